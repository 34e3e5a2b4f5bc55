#!/usr/bin/env bash
# Plan-shape variants of one scenario on the GPUs: `reshard validate --backend nccl` with
# plan.segment_bytes and plan.direct_min_bytes set to each value of SEGMENTS x DIRECTS
# (auto = the planner's choice).
#
#   bench/gpu/run/variants.sh OUTDIR SCENARIO
#
# SCENARIO: a scenario file or a name in bench/gpu/scenarios/ or scenarios/; its file must
# have a `  segment_bytes:` line under `plan:`. Each variant's scenario is written to
# OUTDIR/scenarios/S-segSEG-directD.yaml (what ran), its result to
# OUTDIR/validate-S-segSEG-directD.json and .log. Environment:
#   SEGMENTS     segment sizes (default "auto"), e.g. "64MiB 1GiB auto"
#   DIRECTS      direct_min_bytes values (default "auto"), e.g. "0 1TiB"
#   CALIBRATION  as in validate.sh (default calib/h200-x2.json)
#   REPEAT, RUN_TIMEOUT  validate's --repeat (default 3), seconds per command (default 240)
#   BIN, NCCL_LIB, EXTRA_LIB  see gpu_env.sh
# Exit status: 0 when every run verified, 1 otherwise, 2 for bad use.
set -u -o pipefail
# shellcheck source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
[ $# -eq 2 ] || usage "usage: $0 OUTDIR SCENARIO   (help: the lines at the top of $0)"
OUT=$1
NAME=$(basename "$2" .yaml)
calibration_args
prepare_run "$OUT" reshard
mkdir -p "$OUT/scenarios" || exit 2
base="$OUT/scenarios/$NAME.yaml"
scenario_copy "$2" "$base"
grep -q '^  segment_bytes:' "$base" || usage "$2: no '  segment_bytes:' line under plan: to vary"
rc=0
for seg in ${SEGMENTS:-auto}; do
  for d in ${DIRECTS:-auto}; do
    tag="$NAME-seg$seg-direct$d"
    f="$OUT/scenarios/$tag.yaml"
    sed -e "s/^  segment_bytes: .*/  segment_bytes: $seg\n  direct_min_bytes: $d/" "$base" > "$f"
    timeout "${RUN_TIMEOUT:-240}" "$RUN_BIN" validate "$f" "${CALIB[@]}" --backend nccl --repeat "${REPEAT:-3}" --json \
      > "$OUT/validate-$tag.json" 2> "$OUT/validate-$tag.log" || rc=1
    python3 - "$OUT/validate-$tag.json" "$tag" 2> /dev/null <<'PY' || tail -n 2 "$OUT/validate-$tag.log"
import json, sys
d = json.load(open(sys.argv[1])); m = d["measured"]
print(f"{sys.argv[2]:55s} seg {d['segment_bytes'] >> 20:5d} MiB predicted {d['time_s']*1e3:7.2f} ms "
      f"measured {m['time_s']*1e3:7.2f} ms time_error {d['time_error']*100:+6.1f}% "
      f"peak_error {d['peak_error']*100:+5.2f}% verified {d['verified']}")
PY
  done
done
exit $rc
