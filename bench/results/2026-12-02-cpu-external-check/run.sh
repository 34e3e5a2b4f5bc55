#!/bin/sh
# Regenerates this directory's JSON from a Release build in build/ (run from the repository root).
# Each run: `reshard simulate SCENARIO --baseline megatron --issue I [--cold] --json`.
# deepseek-v3 with --issue none (every op at t = 0: one component of all
# transfers) did not finish in 3.5 CPU-minutes and is left out.
set -e
D=bench/results/2026-12-02-cpu-external-check
run() {  # scenario, name, options...
  s=$1 n=$2
  shift 2
  /usr/bin/time -f "%U %S %e %M" -o "$D/$s.$n.time" \
    ./build/reshard simulate "scenarios/$s.yaml" --baseline megatron "$@" --json > "$D/$s.$n.json"
}
q=qwen3-30b-a3b-ep8pp2-to-tp8dp2
d=deepseek-v3-pp16ep16-to-tp32dp8
[ -n "$SKIP_QWEN" ] || {
  run $q none --issue none
  run $q python --issue python
  run $q python-cold --issue python --cold
}
run $d python --issue python
run $d python-cold --issue python --cold
