#!/usr/bin/env bash
# Measures this host's GPU links with `reshard calibrate` and writes the
# calibration profile (with its raw measurements and fit residuals) under
# OUTDIR. Issue 6, item 2.
#
#   bench/gpu/calibrate.sh OUTDIR [BINARY] [-- extra calibrate flags, e.g. --quick --max-bytes 256MiB]
#
# BINARY defaults to build-calib/reshard, else build/reshard, in the repository. Environment:
#   NCCL_LIB   folder holding libnccl.so.2 (default: PyTorch's nvidia.nccl when python3 finds it)
#   EXTRA_LIB  more library folders for LD_LIBRARY_PATH (e.g. a carried libfmt.so.9)
# NCCL_NVLS_ENABLE is set to 0 unless already set. Writes OUTDIR/profile.json (the
# profile), OUTDIR/summary.json (`--json` summary), OUTDIR/calibrate.log (progress
# and errors) and OUTDIR/environment.txt. Exit status: reshard's (0 written,
# 2 no GPU / bad flags, 1 CUDA or NCCL failure), 2 for bad use of this script.
set -u -o pipefail

if [ $# -lt 1 ] || [ "$1" = "-h" ] || [ "$1" = "--help" ]; then
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
OUTDIR=$1
shift
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=""
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  BIN=$1
  shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
if [ -z "$BIN" ]; then
  for candidate in "$ROOT/build-calib/reshard" "$ROOT/build/reshard"; do
    [ -x "$candidate" ] && { BIN=$candidate; break; }
  done
fi
if [ -z "$BIN" ] || [ ! -x "$BIN" ]; then
  echo "no reshard executable (looked for build-calib/reshard, build/reshard; or pass BINARY)" >&2
  exit 2
fi
mkdir -p "$OUTDIR" || exit 2

# Keep NVLink SHARP (multicast) off: it can take a shared host's GPUs out of service.
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
if [ -z "${NCCL_LIB:-}" ] && command -v python3 > /dev/null; then
  NCCL_LIB=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))" 2> /dev/null || true)
fi
for d in ${EXTRA_LIB:-} ${NCCL_LIB:-}; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "binary: $BIN"
  echo "flags: $*"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"
  echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  if command -v nvidia-smi > /dev/null; then
    nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader
    nvidia-smi topo -m 2> /dev/null
  else
    echo "nvidia-smi: not found"
  fi
  missing=$(ldd "$BIN" 2> /dev/null | grep 'not found')
  [ -n "$missing" ] && echo "MISSING LIBRARIES (set NCCL_LIB / EXTRA_LIB):" && echo "$missing"
} 2>&1 | tee "$OUTDIR/environment.txt"

"$BIN" calibrate -o "$OUTDIR/profile.json" --json "$@" > "$OUTDIR/summary.json" 2> >(tee "$OUTDIR/calibrate.log" >&2)
rc=$?
if [ $rc -eq 0 ]; then
  echo "profile: $OUTDIR/profile.json"
  cat "$OUTDIR/summary.json"
else
  echo "reshard calibrate failed (exit $rc); see $OUTDIR/calibrate.log" >&2
fi
exit $rc
