set -u
# bench/results/2026-12-06-cpu-plan-time-3/run-vm.sh (repository root): the same runs as session.sh on this machine.
# B: the binary (the stripped build-gpu reshard with its libfmt.so.9 beside it), OUT: where times.txt goes.
B=${B:-/tmp/carry/reshard}; export LD_LIBRARY_PATH=$(dirname $B); OUT=${OUT:-/tmp/pt3}
while read -r row scen; do
  for run in 1 2 3; do
    for heap in default nohuge; do
      if [ $heap = nohuge ]; then export GLIBC_TUNABLES=glibc.malloc.hugetlb=0; else unset GLIBC_TUNABLES; fi
      /usr/bin/time -f "%U %S %e %M" -o $OUT/t.txt $B plan $scen --json > $OUT/p.json 2> /dev/null
      ms=$(python3 -c "import json; print(round(json.load(open('$OUT/p.json'))['time_s']*1e3, 3))")
      echo "$row $heap $run $(cat $OUT/t.txt) $ms" | tee -a $OUT/times.txt
    done
  done
done <<'LIST'
deepseek-v3 deepseek-v3-pp16ep16-to-tp32dp8
llama3-70b-colocated-8192 bench/results/2026-12-04-cpu-at-scale-riders/llama3-70b-h100-colocated-8192.yaml
LIST
