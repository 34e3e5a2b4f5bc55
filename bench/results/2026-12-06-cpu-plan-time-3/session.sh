#!/bin/bash
# Plan time on the device host's CPUs, one plan at a time (issue 16's "faster to answer" target), 2026-12-06.
# Usage (repository root, the stripped binary carried as .carry/bin.tar.xz): bash $0 ; writes $OUT/times.txt:
# "ROW HEAP RUN user_s sys_s wall_s maxrss_kb time_ms" per run, HEAP default (the huge-page heap restart) or
# nohuge (GLIBC_TUNABLES=glibc.malloc.hugetlb=0). No GPU used.
set -u
mkdir -p .carry/lib && tar xJf .carry/bin.tar.xz -C .carry/lib
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib; . bench/gpu/run/gpu_env.sh
export B=$PWD/.carry/lib/reshard
nproc > $OUT/nproc.txt; lscpu > $OUT/lscpu.txt; free -g > $OUT/free.txt
B=$B OUT=$OUT bash bench/results/2026-12-06-cpu-plan-time-3/run-vm.sh
rm -f $OUT/p.json $OUT/t.txt
