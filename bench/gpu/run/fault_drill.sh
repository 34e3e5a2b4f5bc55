#!/usr/bin/env bash
# Fault drill on the GPUs: a GPU that skips its sends from op N on must end the run within
# RESHARD_NCCL_TIMEOUT_S with an error naming the op (communicators aborted, not a hang),
# report "verified": false, and leave the GPUs usable: a normal run right after verifies.
# Repeats the pair RUNS times and records the memory in use after each (nvidia-smi).
#
#   bench/gpu/run/fault_drill.sh OUTDIR [SCENARIO]
#
# SCENARIO defaults to the built-in tiny-llama-tp2-to-tp1x2; GPU 1 skips from its first
# send. Writes OUTDIR/plan.json, fault-I.json/.log, normal-I.json/.log, summary.txt and
# environment.txt. Environment: RUNS (default 3), TIMEOUT_S (the NCCL timeout, default
# 10), CALIBRATION (as in validate.sh), BIN, NCCL_LIB, EXTRA_LIB (see gpu_env.sh).
set -u -o pipefail
# shellcheck source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
{ [ $# -ge 1 ] && [ $# -le 2 ]; } || usage "usage: $0 OUTDIR [SCENARIO]   (help: the lines at the top of $0)"
OUT=$1
S=$(resolve_scenario "${2:-tiny-llama-tp2-to-tp1x2}")
calibration_args
prepare_run "$OUT" reshard
"$RUN_BIN" plan "$S" "${CALIB[@]}" -o "$OUT/plan.json" > /dev/null || exit 2
OP=$(python3 -c "import json,sys; p=json.load(open(sys.argv[1])); print([o['id'] for o in p['ops'] if o['kind']=='send' and o['gpu']==1][0])" "$OUT/plan.json")
echo "== fault drill: $S, GPU 1 skips its sends from op $OP" | tee "$OUT/summary.txt"
for i in $(seq 1 "${RUNS:-3}"); do
  t0=$(date +%s.%N)
  RESHARD_FAULT=gpu=1,op=$OP RESHARD_NCCL_TIMEOUT_S=${TIMEOUT_S:-10} timeout 120 "$RUN_BIN" run "$OUT/plan.json" --backend nccl --json \
    > "$OUT/fault-$i.json" 2> "$OUT/fault-$i.log"; rc=$?
  t1=$(date +%s.%N)
  timeout 120 "$RUN_BIN" run "$OUT/plan.json" --backend nccl --json > "$OUT/normal-$i.json" 2> "$OUT/normal-$i.log"; rc2=$?
  mem=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader | tr '\n' ' ')
  python3 - "$OUT/fault-$i.json" "$OUT/normal-$i.json" "$rc" "$rc2" "$(python3 -c "print($t1 - $t0)")" "$mem" <<'PY' | tee -a "$OUT/summary.txt"
import json, sys
def load(f):
    try: return json.load(open(f))
    except Exception: return {}
f, n = load(sys.argv[1]), load(sys.argv[2])
print(f"fault run: exit {sys.argv[3]} in {float(sys.argv[5]):.1f} s, verified {f.get('verified')}, error: {str(f.get('error', ''))[:220]}")
print(f"normal run after it: exit {sys.argv[4]}, verified {n.get('verified')}; memory used after: {sys.argv[6]}")
PY
done
