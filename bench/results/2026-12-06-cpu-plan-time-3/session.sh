#!/bin/bash
# Plan time on the device host's CPUs, one plan at a time (issue 16's "faster to answer" target), 2026-12-06.
# Usage (repository root, the stripped binary carried as .carry/bin.tar.xz): bash $0 ; writes $OUT/times.txt:
# "ROW HEAP RUN user_s sys_s wall_s maxrss_kb time_ms" per run, HEAP default (the huge-page heap restart) or
# nohuge (GLIBC_TUNABLES=glibc.malloc.hugetlb=0). No GPU used.
set -u
mkdir -p .carry/lib && tar xJf .carry/bin.tar.xz -C .carry/lib
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib; . bench/gpu/run/gpu_env.sh
B=$PWD/.carry/lib/reshard
nproc > $OUT/nproc.txt; lscpu > $OUT/lscpu.txt; free -g > $OUT/free.txt
while read -r row scen; do
  for heap in default nohuge; do
    for run in 1 2 3; do
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
unset GLIBC_TUNABLES
rm -f $OUT/p.json $OUT/t.txt
