cd /work/main
for S in scenarios/deepseek-v3-pp16ep16-to-tp32dp8.yaml bench/results/2026-12-04-cpu-at-scale-riders/llama3-70b-h100-colocated-8192.yaml; do
for i in 1 2 3; do
  /usr/bin/time -f "$(basename $S) base %U %S %e" build/reshard plan $S --json > /dev/null
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 /usr/bin/time -f "$(basename $S) thp %U %S %e" build/reshard plan $S --json > /dev/null
done; done
