#!/usr/bin/env bash
# Measures this host's GPU links with `reshard calibrate` and writes the calibration
# profile (with its raw measurements and fit residuals) under OUTDIR.
#
#   bench/gpu/run/calibrate.sh OUTDIR [calibrate flags, e.g. --quick --max-bytes 256MiB]
#
# Writes OUTDIR/profile.json (the profile), OUTDIR/summary.json (`--json` summary),
# OUTDIR/calibrate.log (progress and errors) and OUTDIR/environment.txt. Nothing else:
# to use the profile, pass it (`--calibration OUTDIR/profile.json`, CALIBRATION= for the
# other runners) or copy it to calib/ yourself. Environment: BIN, NCCL_LIB, EXTRA_LIB (see
# gpu_env.sh). Exit status: reshard's (0 written, 2 no GPU / bad flags, 1 CUDA or NCCL
# failure), 2 for bad use of this script.
set -u -o pipefail
# shellcheck source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
[ $# -ge 1 ] || usage "usage: $0 OUTDIR [calibrate flags]   (help: the lines at the top of $0)"
OUT=$1
shift
prepare_run "$OUT" reshard
echo "flags: $*" >> "$OUT/environment.txt"
cat "$OUT/environment.txt"

"$RUN_BIN" calibrate -o "$OUT/profile.json" --json "$@" > "$OUT/summary.json" 2> >(tee "$OUT/calibrate.log" >&2)
rc=$?
if [ $rc -eq 0 ]; then
  echo "profile: $OUT/profile.json"
  cat "$OUT/summary.json"
else
  echo "reshard calibrate failed (exit $rc); see $OUT/calibrate.log" >&2
fi
exit $rc
