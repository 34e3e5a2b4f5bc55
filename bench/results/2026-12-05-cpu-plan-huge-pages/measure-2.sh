cd /work/main
for S in bench/results/2026-12-02-cpu-plan-speed/llama3-8b-8192.yaml bench/results/2026-12-02-cpu-planner-pressure/llama3-405b-dgx-h100-tp4pp16-to-tp16dp8.yaml bench/results/2026-12-02-cpu-at-scale/qwen3-30b-a3b-h200-colocated-ep.yaml; do
for i in 1 2; do
  /usr/bin/time -f "$(basename $S) base %U %S %e %M %R" build/reshard plan $S --json > /dev/null
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 /usr/bin/time -f "$(basename $S) thp %U %S %e %M %R" build/reshard plan $S --json > /dev/null
done; done
