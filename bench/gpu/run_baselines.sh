#!/usr/bin/env bash
# Runs every variant of the PyTorch-style refit baseline (allgather_baseline) on a list
# of scenarios and collects one JSON per run, a log per run and a summary table under
# OUTDIR. Issue 7, item 2(b).
#
#   bench/gpu/run_baselines.sh OUTDIR [BINARY]
#
# BINARY defaults to build-base/bench/allgather_baseline in the repository. Environment:
#   SCENARIOS  scenario names or files (default: the three 2x H200 scenarios of issue 5);
#              a NAME with bench/gpu/scenarios/NAME.yaml runs that file (calibrated
#              cluster, as reshard validate does), any other name is a built-in
#   VARIANTS   ';'-separated argument sets (default: per-tensor, 64MiB, 256MiB, 1GiB,
#              1GiB out-of-place, flat)
#   EXTRA_ARGS arguments added to every run, e.g. "--no-memory" (weights and refit
#              buffers only, as before the memory model) or "--offload 0.25"
#   RUNS, WARMUP   timed and untimed runs per variant (default 7 and 2)
#   NCCL_LIB   folder holding libnccl.so.2 (default: PyTorch's nvidia.nccl when python3 finds it)
#   EXTRA_LIB  more library folders for LD_LIBRARY_PATH (e.g. a carried libfmt.so.9)
#   RUN_TIMEOUT  seconds per run before it is killed (default 240)
# By default each run holds the scenario's memory (optimizer state, KV cache, reserve)
# and offloads the optimizer as the scenario says before the refit, timed
# (allgather_baseline.cc). NCCL_NVLS_ENABLE is set to 0 unless already set. Exit
# status: 0 when every run verified or did not fit (exit 3, a result: "DOES NOT FIT"
# in the summary), 1 otherwise.
set -u -o pipefail

if [ $# -lt 1 ]; then
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
OUTDIR=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${2:-$ROOT/build-base/bench/allgather_baseline}
[ -x "$BIN" ] || { echo "no executable at $BIN" >&2; exit 2; }
mkdir -p "$OUTDIR"

SCENARIOS=${SCENARIOS:-"llama3-8b-tp2-to-tp1x2 qwen3-30b-a3b-ep2-to-tp2 llama3-8b-disaggregated"}
VARIANTS=${VARIANTS:-"--bucket per-tensor;--bucket 64MiB;--bucket 256MiB;--bucket 1GiB;--bucket 1GiB --out-of-place;--flat"}
RUNS=${RUNS:-7}
WARMUP=${WARMUP:-2}
EXTRA_ARGS=${EXTRA_ARGS:-}
RUN_TIMEOUT=${RUN_TIMEOUT:-240}

export NCCL_NVLS_ENABLE=${NCCL_NVLS_ENABLE:-0}
if [ -z "${NCCL_LIB:-}" ] && command -v python3 > /dev/null; then
  NCCL_LIB=$(python3 -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' 2> /dev/null || true)
fi
for d in ${EXTRA_LIB:-} ${NCCL_LIB:-}; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "binary: $BIN"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader
} | tee "$OUTDIR/environment.txt"

status=0
: > "$OUTDIR/results.txt"
for scenario in $SCENARIOS; do
  scenario_arg=$scenario
  [ -f "$ROOT/bench/gpu/scenarios/$scenario.yaml" ] && scenario_arg="$ROOT/bench/gpu/scenarios/$scenario.yaml"
  IFS=';' read -r -a variants <<< "$VARIANTS"
  for variant in "${variants[@]}"; do
    # File name: scenario base name + the variant's arguments, e.g. llama3-8b-tp2-to-tp1x2__bucket-1GiB-out-of-place.
    tag=$(echo "$variant" | sed -e 's/--//g' -e 's/ \+/-/g')
    name="$(basename "$scenario" .yaml)__$tag"
    echo "== $name"
    # shellcheck disable=SC2086  # the variant and EXTRA_ARGS are word lists on purpose
    timeout "$RUN_TIMEOUT" "$BIN" --scenario "$scenario_arg" $variant $EXTRA_ARGS --warmup "$WARMUP" --runs "$RUNS" \
      --out "$OUTDIR/$name.json" > "$OUTDIR/$name.log" 2>&1
    rc=$?
    grep -E '^(plan:|memory:|\||runs|MISMATCH|DOES NOT FIT)' "$OUTDIR/$name.log" | grep -v '^|---' | tail -n +1
    if [ $rc -eq 3 ]; then  # does not fit: a result, with its RESULT line
      grep '^RESULT' "$OUTDIR/$name.log" >> "$OUTDIR/results.txt"
    elif [ $rc -ne 0 ]; then
      echo "   FAILED rc=$rc:"; tail -5 "$OUTDIR/$name.log" | sed 's/^/   /'
      echo "RESULT scenario=$(basename "$scenario" .yaml) mode=$tag failed rc=$rc" >> "$OUTDIR/results.txt"
      status=1
    else
      grep '^RESULT' "$OUTDIR/$name.log" >> "$OUTDIR/results.txt"
    fi
  done
done

# Summary table from the RESULT lines.
{
  echo "| scenario | variant | offload | time ms | refit ms (flat: with unpack) | offload ms | extra peak GiB | device peak GiB | verified |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
  awk '{
    delete f; for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
    if ("failed" in f || $0 ~ / failed /) { printf "| %s | %s | - | - | - | - | - | - | FAILED |\n", f["scenario"], f["mode"]; next }
    if (f["fits"] == "false") { printf "| %s | %s | %s | - | - | - | - | - | DOES NOT FIT |\n", f["scenario"], f["mode"], f["offload_fraction"]; next }
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f["scenario"], f["mode"], f["offload_fraction"], f["time_ms"],
           f["refit_ms"], f["offload_ms"], f["extra_gib"], f["peak_gib"], f["verified"]
  }' "$OUTDIR/results.txt"
} | tee "$OUTDIR/summary.md"
grep -v 'fits=false' "$OUTDIR/results.txt" | grep -q 'verified=false\| failed ' && status=1
exit $status
