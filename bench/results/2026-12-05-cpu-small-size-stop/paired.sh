#!/bin/bash
# Paired runs: OLD and NEW rounds_probe binaries (auto row only), one process at a time, alternating.
# Usage: paired.sh OLD NEW OUT.jsonl REPS
set -u
OLD=$1 NEW=$2 OUT=$3 REPS=${4:-2}
D=bench/results/2026-12-05-cpu-small-size-stop
ROWS="llama3-8b-tp2-to-tp1x2 qwen3-30b-a3b-ep2-to-tp2 llama3-8b-disaggregated llama3-8b-tp2-to-tp1x2-offload
scenarios/qwen3-30b-a3b-ep8pp2-to-tp8dp2.yaml $D/l8-64.yaml $D/l70-64.yaml $D/l70c-64.yaml $D/q30-64.yaml
bench/results/2026-12-02-cpu-at-scale/llama3-8b-gb200-nvl72-disagg.yaml
bench/results/2026-12-02-cpu-at-scale/llama3-70b-h100-disagg.yaml
bench/results/2026-12-03-cpu-at-scale-nic-relays/llama3-70b-h100-colocated-pp.yaml"
: > "$OUT"
for rep in $(seq 1 "$REPS"); do
  for S in $ROWS; do
    for which in old new; do
      B=$OLD; [ $which = new ] && B=$NEW
      /usr/bin/time -f "%U %S %e" -o /tmp/paired.time "$B" "$S" --json /tmp/paired.json --write-plans /tmp/paired.$which > /dev/null 2>&1
      python3 - "$S" "$which" "$rep" >> "$OUT" <<'PY'
import json, sys, hashlib
s, which, rep = sys.argv[1:]
d = json.load(open('/tmp/paired.json')); r = d['rows'][-1] if isinstance(d, dict) else d[-1]
u, sy, w = open('/tmp/paired.time').read().split()[-3:]
h = hashlib.sha256(open(f'/tmp/paired.{which}.auto.auto.json', 'rb').read()).hexdigest()[:16]
print(json.dumps({'scenario': s, 'binary': which, 'rep': int(rep), 'time_s': r['time_s'], 'segment_bytes': r['segment_bytes'],
                  'user_s': float(u), 'sys_s': float(sy), 'wall_s': float(w), 'plan_sha256_16': h}))
PY
    done
  done
done
