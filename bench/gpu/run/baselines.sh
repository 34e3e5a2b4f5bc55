#!/usr/bin/env bash
# The refit PyTorch RL stacks run (allgather_baseline: bucketed all-gather, or one flat
# send/recv) on each SCENARIO, every variant, every destination element verified.
#
#   bench/gpu/run/baselines.sh OUTDIR SCENARIO...
#
# SCENARIO: a scenario file, a name in bench/gpu/scenarios/ or scenarios/, or a built-in.
# Each run holds the scenario's memory at refit start (optimizer state, KV cache, reserve)
# and offloads the optimizer as the scenario says, timed (allgather_baseline.cc). The
# scenario runs as OUTDIR/scenarios/S.yaml: its file with the calibration profile set
# (allgather_baseline has no --calibration). Writes OUTDIR/baseline-S-VARIANT.json and
# .log per run, OUTDIR/results.txt (the RESULT lines), OUTDIR/summary.md (a table) and
# OUTDIR/environment.txt. Environment:
#   CALIBRATION  profile for the scenario's cluster (default calib/h200-x2.json; none: the
#                scenario as it is; a built-in name needs its scenarios/NAME.yaml)
#   VARIANTS     ';'-separated argument sets (default "--bucket 1GiB;--bucket 256MiB;
#                --bucket per-tensor;--flat"; also e.g. "--bucket 1GiB --out-of-place")
#   ARGS         added to every run, e.g. "--runs 3 --warmup 1", "--no-memory" (weights
#                and refit buffers only) or "--offload 0.25"
#   RUN_TIMEOUT  seconds per run before it is killed (default 240)
#   BIN, NCCL_LIB, EXTRA_LIB  see gpu_env.sh
# Exit status: 0 when every run verified or did not fit (exit 3 of allgather_baseline, a
# result: DOES NOT FIT in the summary), 1 otherwise, 2 for bad use.
set -u -o pipefail
# shellcheck source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
[ $# -ge 2 ] || usage "usage: $0 OUTDIR SCENARIO...   (help: the lines at the top of $0)"
OUT=$1
shift
prepare_run "$OUT" allgather_baseline
mkdir -p "$OUT/scenarios" || exit 2
IFS=';' read -r -a variants <<< "${VARIANTS:---bucket 1GiB;--bucket 256MiB;--bucket per-tensor;--flat}"
status=0
: > "$OUT/results.txt"
for s in "$@"; do
  name=$(basename "$s" .yaml)
  scenario="$OUT/scenarios/$name.yaml"
  scenario_copy "$s" "$scenario" calibrated
  for v in "${variants[@]}"; do
    tag=$(echo "$v" | tr -d ' -')  # "--bucket 1GiB --out-of-place" -> bucket1GiBoutofplace
    log="$OUT/baseline-$name-$tag"
    echo "== allgather_baseline $name $v ${ARGS:-}"
    # shellcheck disable=SC2086  # the variant and ARGS are word lists on purpose
    timeout "${RUN_TIMEOUT:-240}" "$RUN_BIN" --scenario "$scenario" $v ${ARGS:-} --out "$log.json" > "$log.log" 2>&1
    rc=$?
    grep -E '^(memory:|DOES NOT FIT|RESULT|MISMATCH)' "$log.log"
    if [ $rc -eq 0 ] || [ $rc -eq 3 ]; then  # 3: does not fit, a result with its RESULT line
      grep '^RESULT' "$log.log" >> "$OUT/results.txt"
    else
      echo "  exit $rc"; tail -n 3 "$log.log"
      echo "RESULT scenario=$name mode=$tag failed rc=$rc" >> "$OUT/results.txt"
      status=1
    fi
  done
done

# Summary table from the RESULT lines.
{
  echo "| scenario | variant | offload | time ms | refit ms (flat: with unpack) | offload ms | extra peak GiB | device peak GiB | verified |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---|"
  awk '{
    delete f; for (i = 2; i <= NF; ++i) { split($i, kv, "="); f[kv[1]] = kv[2] }
    if ($0 ~ / failed /) { printf "| %s | %s | - | - | - | - | - | - | FAILED |\n", f["scenario"], f["mode"]; next }
    if (f["fits"] == "false") { printf "| %s | %s | %s | - | - | - | - | - | DOES NOT FIT |\n", f["scenario"], f["mode"], f["offload_fraction"]; next }
    printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f["scenario"], f["mode"], f["offload_fraction"], f["time_ms"],
           f["refit_ms"], f["offload_ms"], f["extra_gib"], f["peak_gib"], f["verified"]
  }' "$OUT/results.txt"
} | tee "$OUT/summary.md"
grep -v 'fits=false' "$OUT/results.txt" | grep -q 'verified=false\| failed ' && status=1
exit $status
