#!/usr/bin/env bash
# Plan-shape variants of one scenario on 2x H200 (device kind nvidia-h200-x2):
# validates the scenario with plan.segment_bytes / plan.direct_min_bytes set to
# each value of SEGMENTS x DIRECTS (auto = the planner's choice), REPEAT runs each.
#   bash bench/gpu/run_variants.sh OUT [SCENARIO]   (binaries in .carry/lib, see run_h200x2.sh)
set -u -o pipefail
OUT=${1:?output dir}
SCEN=${2:-llama3-8b-tp2-to-tp1x2}
. "$(dirname "$0")/gpu_env.sh"  # BIN, NCCL_LIB, LD_LIBRARY_PATH, NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
src=bench/gpu/scenarios/$SCEN.yaml
for seg in ${SEGMENTS:-auto}; do
  for d in ${DIRECTS:-auto}; do
    tag="$SCEN-seg$seg-direct$d"
    f=bench/gpu/scenarios/.variant-$tag.yaml  # beside the original: its relative calibration path holds
    sed -e "s/^  segment_bytes: .*/  segment_bytes: $seg\n  direct_min_bytes: $d/" "$src" > "$f"
    timeout "${RUN_TIMEOUT:-240}" "$BIN/reshard" validate "$f" --backend nccl --repeat ${REPEAT:-3} --json > "$OUT/validate-$tag.json" 2> "$OUT/validate-$tag.log"
    python3 - "$OUT/validate-$tag.json" "$tag" <<'PY' || tail -n 2 "$OUT/validate-$tag.log"
import json,sys
d=json.load(open(sys.argv[1])); m=d["measured"]
print(f"{sys.argv[2]:55s} seg {d['segment_bytes']>>20:5d} MiB ops {d.get('ops','?')} predicted {d['time_s']*1e3:7.2f} ms measured {m['time_s']*1e3:7.2f} ms time_error {d['time_error']*100:+6.1f}% peak_error {d['peak_error']*100:+5.2f}% verified {d['verified']}")
PY
    rm -f "$f"
  done
done
