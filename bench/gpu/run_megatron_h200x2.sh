#!/usr/bin/env bash
# Issue 7 item 2(a) on 2x H200 (device kind nvidia-h200-x2), one call: the
# Megatron-Core-style refit that NeMo-RL runs (planner/baseline_plan.h: every
# piece its own send/recv in one NCCL group, local copies on a side stream, no
# memory bound) through reshard's NCCL executor, every byte verified, next to
# reshard's own plan, on the scenarios of issue 5 (calibrated profile).
# Build and carry as for run_h200x2.sh:
#   cmake -G Ninja -B build-gpu -S . -DRESHARD_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#   ninja -C build-gpu reshard
#   mkdir -p .carry/lib && cp build-gpu/reshard /lib/x86_64-linux-gnu/libfmt.so.9 .carry/lib/
#   device run (carry .carry): bash bench/gpu/run_megatron_h200x2.sh $OUT
# Environment: SCENARIOS, REPEAT (default 5), PLANS (default "megatron reshard").
set -u -o pipefail
OUT=${1:?output dir}
. "$(dirname "$0")/gpu_env.sh"  # BIN, NCCL_LIB, LD_LIBRARY_PATH, NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } > "$OUT/environment.txt" 2>&1
rc=0
for s in ${SCENARIOS:-llama3-8b-tp2-to-tp1x2 llama3-8b-disaggregated qwen3-30b-a3b-ep2-to-tp2 llama3-8b-tp2-to-tp1x2-offload}; do
  for plan in ${PLANS:-megatron reshard}; do
    flag=""
    [ "$plan" = reshard ] || flag="--baseline $plan"
    echo "== validate $s ($plan)"
    # shellcheck disable=SC2086  # flag is empty or two words on purpose
    timeout "${RUN_TIMEOUT:-240}" "$BIN/reshard" validate "bench/gpu/scenarios/$s.yaml" $flag --backend nccl --repeat "${REPEAT:-5}" --json \
      > "$OUT/$plan-$s.json" 2> "$OUT/$plan-$s.log" || { echo "  exit $?"; rc=1; }
    tail -n 3 "$OUT/$plan-$s.log"
    python3 - "$OUT/$plan-$s.json" <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1])); m = d.get("measured", {})
extra = max(m.get("peak_bytes", [0]) or [0]) / 2**30
print(f"  predicted {d.get('time_s', 0)*1e3:.2f} ms  measured {m.get('time_s', 0)*1e3:.2f} ms  "
      f"bound {d.get('lower_bound_s', 0)*1e3:.2f} ms  time_error {d.get('time_error', 0)*100:+.1f}%  "
      f"peak {extra:.2f} GiB (error {d.get('peak_error', 0)*100:+.1f}%)  verified {d.get('verified')}")
PY
  done
done
exit $rc
