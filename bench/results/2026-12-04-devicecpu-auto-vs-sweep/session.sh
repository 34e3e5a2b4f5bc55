#!/bin/bash
# Session 2026-12-04 (sixteenth): CPU only, on the device host's 16 cores. Issue 16 item 4 re-checked on
# current main: per at-scale scenario `reshard plan` (auto) and the default `reshard sweep`; before them,
# plan + simulate wall / CPU time of each row alone (4 at a time), and deepseek-v3 three times with and
# without glibc's transparent huge pages (GLIBC_TUNABLES=glibc.malloc.hugetlb=1). No GPU used.
set -u
mkdir -p .carry/lib && tar xJf .carry/bin.tar.xz -C .carry/lib
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib; . bench/gpu/run/gpu_env.sh
B=$PWD/.carry/lib/reshard
R=$OUT/l; mkdir -p $R
nproc > $R/nproc.txt; free -g > $R/free.txt; lscpu > $R/lscpu.txt; uname -a > $R/uname.txt
cat /sys/kernel/mm/transparent_hugepage/enabled > $R/thp.txt 2>&1
$B --version > $R/version.txt 2>&1
A=bench/results/2026-12-02-cpu-at-scale; F=bench/results/2026-12-02-cpu-fp8-at-scale
cat > $R/list.txt <<LIST
llama3-70b $A/llama3-70b-h100-disagg.yaml
llama3-8b-nvl72 $A/llama3-8b-gb200-nvl72-disagg.yaml
llama3-70b-colocated bench/results/2026-12-03-cpu-at-scale-nic-relays/llama3-70b-h100-colocated-pp.yaml
qwen3-235b qwen3-235b-tp4pp8ep16-to-tp8dp16
deepseek-v3-fp8 $F/deepseek-v3-pp16ep16-to-tp8dp32-fp8.yaml
deepseek-v3-nvl72 $A/deepseek-v3-gb200-nvl72.yaml
qwen3-30b-a3b $A/qwen3-30b-a3b-h200-colocated-ep.yaml
deepseek-v3 deepseek-v3-pp16ep16-to-tp32dp8
kimi-k2-fp8 kimi-k2-256-to-128
kimi-k2-bf16 $A/kimi-bf16.yaml
llama3-405b bench/results/2026-12-02-cpu-planner-pressure/llama3-405b-dgx-h100-tp4pp16-to-tp16dp8.yaml
qwen3-30b-a3b-ep8pp2 scenarios/qwen3-30b-a3b-ep8pp2-to-tp8dp2.yaml
LIST
for i in 1 2 3; do
  /usr/bin/time -f "base %U %S %e %M %R" -a -o $R/dsv3-thp.time $B plan deepseek-v3-pp16ep16-to-tp32dp8 --json > /dev/null
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 /usr/bin/time -f "thp %U %S %e %M %R" -a -o $R/dsv3-thp.time $B plan deepseek-v3-pp16ep16-to-tp32dp8 --json > /dev/null
done
plan() {
  /usr/bin/time -f "%U %S %e %M" -o $R/$1.plan.time timeout 200 $B plan $2 --json > $R/$1.plan.json 2> $R/$1.plan.err
}
sweep() {
  /usr/bin/time -f "%U %S %e %M" -o $R/$1.sweep.time timeout 400 $B sweep $2 --threads 3 --json > $R/$1.sweep.json 2> $R/$1.sweep.err
  echo "$1 done $(cat $R/$1.sweep.time)"
}
export -f plan sweep; export B R
xargs -P 4 -L 1 bash -c 'plan "$0" "$1"' < $R/list.txt
xargs -P 5 -L 1 bash -c 'sweep "$0" "$1"' < $R/list.txt
tar czf $OUT/l.tgz -C $OUT l && rm -rf $R
