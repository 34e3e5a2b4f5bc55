#!/bin/bash
# Session 2026-12-03 (ninth): CPU only. Per at-scale scenario: `reshard plan` (auto) and the default `reshard sweep`,
# to check the auto choice against the sweep's best point (issue 16 item 4). No GPU used.
set -u
mkdir -p .carry/lib/a && tar xJf .carry/bin.tar.xz -C .carry/lib/a
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib/a; . bench/gpu/run/gpu_env.sh
B=$PWD/.carry/lib/a/reshard
R=$OUT/l; mkdir -p $R
nproc > $R/nproc.txt; free -g > $R/free.txt; $B --version > $R/version.txt 2>&1
A=bench/results/2026-12-02-cpu-at-scale; F=bench/results/2026-12-02-cpu-fp8-at-scale
cat > $R/list.txt <<LIST
deepseek-v3 deepseek-v3-pp16ep16-to-tp32dp8
qwen3-235b qwen3-235b-tp4pp8ep16-to-tp8dp16
kimi-k2-fp8 kimi-k2-256-to-128
kimi-k2-bf16 $A/kimi-bf16.yaml
deepseek-v3-nvl72 $A/deepseek-v3-gb200-nvl72.yaml
llama3-70b $A/llama3-70b-h100-disagg.yaml
llama3-8b-nvl72 $A/llama3-8b-gb200-nvl72-disagg.yaml
qwen3-30b-a3b $A/qwen3-30b-a3b-h200-colocated-ep.yaml
qwen3-30b-a3b-ep8pp2 scenarios/qwen3-30b-a3b-ep8pp2-to-tp8dp2.yaml
deepseek-v3-fp8 $F/deepseek-v3-pp16ep16-to-tp8dp32-fp8.yaml
llama3-405b bench/results/2026-12-02-cpu-planner-pressure/llama3-405b-dgx-h100-tp4pp16-to-tp16dp8.yaml
LIST
one() {
  name=$1; s=$2
  /usr/bin/time -f "%U %S %e %M" -o $R/$name.plan.time timeout 300 $B plan $s --json > $R/$name.plan.json 2> $R/$name.plan.err
  /usr/bin/time -f "%U %S %e %M" -o $R/$name.sweep.time timeout 330 $B sweep $s --threads 3 --json > $R/$name.sweep.json 2> $R/$name.sweep.err
  echo "$name done $(cat $R/$name.sweep.time)"
}
export -f one; export B R
xargs -P 6 -L 1 bash -c 'one "$0" "$1"' < $R/list.txt
tar czf $OUT/l.tgz -C $OUT l && rm -rf $R
