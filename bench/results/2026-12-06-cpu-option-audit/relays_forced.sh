# bench/results/2026-12-06-cpu-option-audit/relays_forced.sh (repository root; BIN: a `reshard` with
# cli-options.diff applied): every row of rowlist.txt planned with relays forced off and on; predicted ms.
D=bench/results/2026-12-06-cpu-option-audit
while read -r row scen; do
  for rel in 0 1; do
    out=$(X_RELAYS=$rel GLIBC_TUNABLES=glibc.malloc.hugetlb=0 ${BIN:-build/reshard} plan $scen --json 2>/dev/null | python3 -c 'import json,sys;d=json.load(sys.stdin);print(round(d["time_s"]*1e3,3))' 2>/dev/null)
    echo "$row relays=$rel $out"
  done
done < $D/rowlist.txt
