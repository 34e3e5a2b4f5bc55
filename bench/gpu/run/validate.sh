#!/usr/bin/env bash
# `reshard validate --backend nccl` (plan, simulate, run on the GPUs, verify every byte,
# prediction error) on each SCENARIO, with the calibration profile of this host.
#
#   bench/gpu/run/validate.sh OUTDIR SCENARIO...
#
# SCENARIO: a scenario file, a name in bench/gpu/scenarios/ or scenarios/, or a built-in.
# Writes OUTDIR/validate-S.json (reshard's plan) or OUTDIR/PLAN-S.json (a baseline plan),
# each with its .log (stderr), and OUTDIR/environment.txt. Environment:
#   CALIBRATION  profile passed as --calibration (default calib/h200-x2.json; none: the
#                scenario's own cluster.calibration or its preset)
#   PLANS        plans to run (default "reshard"; "reshard megatron" adds --baseline megatron:
#                the Megatron-Core / NeMo-RL pattern through the same executor)
#   REPEAT       validate's --repeat (default 5; the median run is reported)
#   RUN_TIMEOUT  seconds per command before it is killed (default 240)
#   TRACE        set (e.g. TRACE=1): also write OUTDIR/<name>.trace.json, the predicted and
#                measured op times as two processes of one Perfetto trace
#   TAG          appended to every output name, for experiments with the executor's knobs,
#                e.g. RESHARD_COPY_MAX_BLOCKS=32 TAG=copyblocks-32
#   BIN, NCCL_LIB, EXTRA_LIB  see gpu_env.sh
# Exit status: 0 when every run verified, 1 otherwise, 2 for bad use.
set -u -o pipefail
# shellcheck source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
[ $# -ge 2 ] || usage "usage: $0 OUTDIR SCENARIO...   (help: the lines at the top of $0)"
OUT=$1
shift
calibration_args
prepare_run "$OUT" reshard
rc=0
for s in "$@"; do
  scenario=$(resolve_scenario "$s")
  name=$(basename "$s" .yaml)
  for plan in ${PLANS:-reshard}; do
    flag=()
    prefix=validate
    [ "$plan" = reshard ] || { flag=(--baseline "$plan"); prefix=$plan; }
    out="$OUT/$prefix-$name${TAG:+-$TAG}"
    echo "== validate $name ($plan) ${TAG:-}"
    [ -z "${TRACE:-}" ] || flag+=(--trace "$out.trace.json")
    timeout "${RUN_TIMEOUT:-240}" "$RUN_BIN" validate "$scenario" "${CALIB[@]}" "${flag[@]}" --backend nccl \
      --repeat "${REPEAT:-5}" --json > "$out.json" 2> "$out.log" || { echo "  exit $?"; rc=1; }
    tail -n 3 "$out.log"
    python3 - "$out.json" 2> /dev/null <<'PY' || true
import json, sys
d = json.load(open(sys.argv[1])); m = d.get("measured", {})
peak = max(m.get("peak_bytes", [0]) or [0]) / 2**30
print(f"  predicted {d.get('time_s', 0)*1e3:.2f} ms  measured {m.get('time_s', 0)*1e3:.2f} ms "
      f"(GPU span {m.get('gpu_span_s', 0)*1e3:.2f})  "
      f"bound {d.get('lower_bound_s', 0)*1e3:.2f} ms  time_error {d.get('time_error', 0)*100:+.1f}%  "
      f"peak {peak:.2f} GiB (error {d.get('peak_error', 0)*100:+.1f}%)  verified {d.get('verified')}")
PY
  done
done
exit $rc
