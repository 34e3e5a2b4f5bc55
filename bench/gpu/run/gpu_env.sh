# shellcheck shell=bash
# Sourced by the runners in bench/gpu/run/ (never run on its own): what every
# GPU run needs, and helpers they share. Run them from the repository root.
#
# Environment it reads:
#   BIN         folder of the binaries (reshard, allgather_baseline, ...); default the
#               first of .carry/lib (binaries carried to the GPU machine), build, build/bench
#   NCCL_LIB    folder holding libnccl.so.2 (default: PyTorch's nvidia.nccl when python3 finds it)
#   EXTRA_LIB   more library folders for LD_LIBRARY_PATH (e.g. a carried libfmt.so.9)
# It sets LD_LIBRARY_PATH (BIN, EXTRA_LIB, NCCL_LIB first) and NCCL_NVLS_ENABLE=0 unless
# already set: NVLink SHARP (multicast) can take a shared host's GPUs out of service.
#
# Building and carrying the binaries (on the CPU host, then a device run carrying .carry):
#   cmake -G Ninja -B build-gpu -S . -DRESHARD_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#   ninja -C build-gpu reshard allgather_baseline
#   mkdir -p .carry/lib && cp build-gpu/reshard build-gpu/bench/allgather_baseline /lib/x86_64-linux-gnu/libfmt.so.9 .carry/lib/

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)

if [ -z "${NCCL_LIB:-}" ] && command -v python3 > /dev/null; then
  NCCL_LIB=$(python3 -c "import nvidia.nccl,os;print(os.path.join(list(nvidia.nccl.__path__)[0],'lib'))" 2> /dev/null || true)
fi
for d in ${NCCL_LIB:-} ${EXTRA_LIB:-} ${BIN:-.carry/lib}; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}

# usage LINES...: prints the usage to stderr and exits 2 (bad use of a runner).
usage() {
  printf '%s\n' "$@" >&2
  exit 2
}

# prepare_run OUTDIR NAME: sets RUN_BIN to the binary NAME (find_binary), makes OUTDIR and
# writes OUTDIR/environment.txt (write_environment); exits 2 when either cannot be done.
prepare_run() {
  RUN_BIN=$(find_binary "$2") || exit 2
  mkdir -p "$1" || exit 2
  write_environment "$1" "$RUN_BIN" > /dev/null
}

# find_binary NAME: the path of a binary, from $BIN or the default folders; exits 2 if none.
find_binary() {
  local d
  for d in ${BIN:-.carry/lib build build/bench}; do
    [ -x "$d/$1" ] && { echo "$d/$1"; return 0; }
  done
  echo "no executable $1 in ${BIN:-.carry/lib, build, build/bench} (set BIN to its folder)" >&2
  exit 2
}

# resolve_scenario NAME|PATH: a scenario file as given; else bench/gpu/scenarios/NAME.yaml
# (GPU-only scenarios), else scenarios/NAME.yaml; else NAME itself (a built-in name).
resolve_scenario() {
  local s
  for s in "$1" "$ROOT/bench/gpu/scenarios/$1.yaml" "$ROOT/scenarios/$1.yaml"; do
    [ -f "$s" ] && { echo "$s"; return 0; }
  done
  echo "$1"
}

# calibration_args: sets CALIB to `--calibration FILE` for reshard, FILE from CALIBRATION
# (default calib/h200-x2.json, the profile measured on the lent 2x H200), or to nothing
# when CALIBRATION=none (each scenario's own cluster.calibration, or its preset).
calibration_args() {
  local c=${CALIBRATION:-$ROOT/calib/h200-x2.json}
  CALIB=()
  [ "$c" = none ] && return 0
  [ -f "$c" ] || usage "CALIBRATION=$c: no such profile"
  # shellcheck disable=SC2034  # CALIB is for the runners that source this file
  CALIB=(--calibration "$c")
}

# scenario_copy SCENARIO DEST.yaml [calibrated]: the scenario's file (resolve_scenario)
# written to DEST with its relative hf_config and calibration paths made absolute, so DEST
# can be edited and read from anywhere. With `calibrated` (for a program without
# --calibration: allgather_baseline) the line `cluster: PRESET` becomes
# `cluster: {preset: PRESET, calibration: CALIBRATION}` (as calibration_args chooses it).
scenario_copy() {
  local src dir cal
  src=$(resolve_scenario "$1")
  [ -f "$src" ] || { echo "scenario_copy: '$1' is not a scenario file" >&2; exit 2; }
  dir=$(cd "$(dirname "$src")" && pwd)
  sed -E -e "s#((hf_config|calibration): *)([^/{ \"][^},]*)#\\1$dir/\\3#" "$src" > "$2"
  cal=${CALIBRATION:-$ROOT/calib/h200-x2.json}
  if [ -n "${3:-}" ] && [ "$cal" != none ]; then
    cal=$(cd "$(dirname "$cal")" && pwd)/$(basename "$cal")
    sed -i -E -e "s#^cluster: *([A-Za-z0-9_.-]+) *\$#cluster: {preset: \\1, calibration: $cal}#" "$2"
    grep -q "calibration: $cal" "$2" || { echo "scenario_copy: cannot set the calibration of $src (cluster is not a preset name)" >&2; exit 2; }
  fi
}

# write_environment OUTDIR [BINARY]: the date, the host's GPUs and the binary's libraries to
# OUTDIR/environment.txt (and stdout).
write_environment() {
  {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: $(hostname)"
    echo "commit: $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo unknown)"
    [ -n "${2:-}" ] && echo "binary: $2"
    echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    if command -v nvidia-smi > /dev/null; then
      nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used --format=csv,noheader
    else
      echo "nvidia-smi: not found"
    fi
    if [ -n "${2:-}" ]; then
      local missing
      missing=$(ldd "$2" 2> /dev/null | grep 'not found')
      [ -n "$missing" ] && echo "MISSING LIBRARIES (set NCCL_LIB / EXTRA_LIB / BIN):" && echo "$missing"
    fi
  } 2>&1 | tee "$1/environment.txt"
}
