#!/usr/bin/env bash
# Issue 8 item 4 on 2 GPUs: a GPU that skips its sends from op N on must end the
# run within RESHARD_NCCL_TIMEOUT_S with an error naming the op (communicators
# aborted, not a hang), report "verified": false, and leave the GPUs usable: a
# normal run right after verifies. Repeats the pair RUNS times and records the
# memory in use after each (nvidia-smi).   bash bench/gpu/fault_drill.sh OUT
set -u -o pipefail
OUT=${1:?output dir}
. "$(dirname "$0")/gpu_env.sh"  # BIN, NCCL_LIB, LD_LIBRARY_PATH, NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
S=${SCENARIO:-tiny-llama-tp2-to-tp1x2}
"$BIN/reshard" plan "$S" -o "$OUT/plan.json" > /dev/null
OP=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1])); print([o['id'] for o in p['ops'] if o['kind']=='send' and o['gpu']==1][0])" "$OUT/plan.json")
for i in $(seq 1 "${RUNS:-3}"); do
  t0=$(date +%s.%N)
  RESHARD_FAULT=gpu=1,op=$OP RESHARD_NCCL_TIMEOUT_S=${TIMEOUT_S:-10} timeout 120 "$BIN/reshard" run "$OUT/plan.json" --backend nccl --json \
    > "$OUT/fault-$i.json" 2> "$OUT/fault-$i.log"; rc=$?
  t1=$(date +%s.%N)
  timeout 120 "$BIN/reshard" run "$OUT/plan.json" --backend nccl --json > "$OUT/normal-$i.json" 2> "$OUT/normal-$i.log"; rc2=$?
  mem=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader | tr '\n' ' ')
  python3 - "$OUT/fault-$i.json" "$OUT/normal-$i.json" "$rc" "$rc2" "$(python3 -c "print($t1 - $t0)")" "$mem" <<'PY'
import json, sys
def load(f):
    try: return json.load(open(f))
    except Exception: return {}
f, n = load(sys.argv[1]), load(sys.argv[2])
print(f"fault run: exit {sys.argv[3]} in {float(sys.argv[5]):.1f} s, verified {f.get('verified')}, error: {str(f.get('error', ''))[:220]}")
print(f"normal run after it: exit {sys.argv[4]}, verified {n.get('verified')}; memory used after: {sys.argv[6]}")
PY
done
