#!/bin/sh
# Usage: measure.sh RESHARD OUTDIR [names...]: per scenario, `RESHARD plan S
# --json` under /usr/bin/time; writes OUTDIR/NAME.json (the plan's JSON) and
# OUTDIR/NAME.time (user s, system s, wall s, max RSS KB, load average before).
set -e
reshard=$1; out=$2; shift 2
here=$(dirname "$0")
at=bench/results/2026-12-02-cpu-at-scale
mkdir -p "$out"
scenario() {
  case $1 in
    deepseek-v3) echo deepseek-v3-pp16ep16-to-tp32dp8 ;;
    qwen3-235b) echo qwen3-235b-tp4pp8ep16-to-tp8dp16 ;;
    kimi-k2-fp8) echo kimi-k2-256-to-128 ;;
    kimi-k2-bf16) echo $at/kimi-bf16.yaml ;;
    deepseek-v3-nvl72) echo $at/deepseek-v3-gb200-nvl72.yaml ;;
    llama3-70b) echo $at/llama3-70b-h100-disagg.yaml ;;
    llama3-8b-nvl72) echo $at/llama3-8b-gb200-nvl72-disagg.yaml ;;
    qwen3-30b-a3b) echo $at/qwen3-30b-a3b-h200-colocated-ep.yaml ;;
    deepseek-v3-fp8) echo bench/results/2026-12-02-cpu-fp8-at-scale/deepseek-v3-pp16ep16-to-tp8dp32-fp8.yaml ;;
    llama3-405b) echo bench/results/2026-12-02-cpu-planner-pressure/llama3-405b-dgx-h100-tp4pp16-to-tp16dp8.yaml ;;
    llama3-8b-8192) echo $here/llama3-8b-8192.yaml ;;
    llama3-70b-8192) echo $here/llama3-70b-8192.yaml ;;
  esac
}
for n in "$@"; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  /usr/bin/time -o "$out/$n.time" -f "%U %S %e %M $load" "$reshard" plan "$(scenario $n)" --json > "$out/$n.json" || true
  echo "$n $(cat "$out/$n.time")"
done
