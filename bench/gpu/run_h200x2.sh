#!/usr/bin/env bash
# Issue 5/7 measurements on 2x H200 (device kind nvidia-h200-x2), one call:
#   reshard validate on the four scenarios of issue 5 (calibrated profile), then the
#   all-gather baselines of issue 7 (default: llama3-8b TP2 -> TP1x2 only).
# Environment:
#   SCENARIOS           reshard validate's scenarios (names in bench/gpu/scenarios/)
#   SKIP_VALIDATE       set: no reshard validate (baselines only)
#   REPEAT, RUN_TIMEOUT validate's --repeat (5) and seconds per command (240)
#   COPY_BLOCKS_SWEEP   RESHARD_COPY_MAX_BLOCKS values to validate llama3-8b with
#   SKIP_BASELINES      set: no all-gather baselines
#   BASELINE_SCENARIOS  the baselines' scenarios (default llama3-8b-tp2-to-tp1x2): a NAME
#                       with bench/gpu/scenarios/NAME.yaml runs that file (as validate),
#                       any other name is a built-in or a path; each runs every variant
#   BASELINE_VARIANTS   ';'-separated argument sets (default: --bucket 1GiB;--bucket 256MiB;
#                       --bucket per-tensor;--flat)
#   BASELINE_ARGS       added to every baseline run, e.g. "--runs 3 --warmup 1",
#                       "--no-memory" (weights and refit buffers only, as before the
#                       memory model) or "--offload 0.25"
# The baselines hold the scenario's memory (optimizer state, KV cache, reserve) and
# offload the optimizer before the refit as the scenario says, timed
# (bench/gpu/allgather_baseline.cc); one that does not fit (exit 3) is a result,
# printed as DOES NOT FIT. Results: $OUT/baseline-<scenario>-<variant>.json.
# Run from the repository root on the GPU machine, with the binaries built here:
#   cmake -G Ninja -B build-gpu -S . -DRESHARD_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
#   ninja -C build-gpu reshard allgather_baseline
#   mkdir -p .carry/lib && cp build-gpu/reshard build-gpu/bench/allgather_baseline /lib/x86_64-linux-gnu/libfmt.so.9 .carry/lib/
#   device run (carry .carry): bash bench/gpu/run_h200x2.sh $OUT
set -u -o pipefail
OUT=${1:?output dir}
. "$(dirname "$0")/gpu_env.sh"  # BIN, NCCL_LIB, LD_LIBRARY_PATH, NCCL_NVLS_ENABLE=0
mkdir -p "$OUT"
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv; } > "$OUT/environment.txt" 2>&1
rc=0
[ -n "${SKIP_VALIDATE:-}" ] && SCENARIOS=none
for s in ${SCENARIOS:-llama3-8b-tp2-to-tp1x2 llama3-8b-disaggregated qwen3-30b-a3b-ep2-to-tp2 llama3-8b-tp2-to-tp1x2-offload}; do
  [ "$s" = none ] && continue
  echo "== validate $s"
  timeout "${RUN_TIMEOUT:-240}" "$BIN/reshard" validate "bench/gpu/scenarios/$s.yaml" --backend nccl --repeat ${REPEAT:-5} --json \
    > "$OUT/validate-$s.json" 2> "$OUT/validate-$s.log" || { echo "  exit $?"; rc=1; }
  tail -n 3 "$OUT/validate-$s.log"
  python3 - "$OUT/validate-$s.json" <<'PY' || true
import json,sys
d=json.load(open(sys.argv[1])); m=d.get("measured",{})
print(f"  predicted {d.get('time_s',0)*1e3:.2f} ms  measured {m.get('time_s',0)*1e3:.2f} ms  time_error {d.get('time_error',0)*100:+.1f}%  peak_error {d.get('peak_error',0)*100:+.1f}%  verified {d.get('verified')}")
PY
done
# Copy-kernel SM budget while copies overlap NCCL (colocated llama3-8b only).
for b in ${COPY_BLOCKS_SWEEP:-}; do
  echo "== validate llama3-8b-tp2-to-tp1x2 with RESHARD_COPY_MAX_BLOCKS=$b"
  RESHARD_COPY_MAX_BLOCKS=$b "$BIN/reshard" validate bench/gpu/scenarios/llama3-8b-tp2-to-tp1x2.yaml --backend nccl \
    --repeat ${REPEAT:-5} --json > "$OUT/validate-copyblocks-$b.json" 2> "$OUT/validate-copyblocks-$b.log" || rc=1
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(f\"  measured {d['measured']['time_s']*1e3:.2f} ms verified {d['verified']}\")" "$OUT/validate-copyblocks-$b.json" || true
done
if [ -z "${SKIP_BASELINES:-}" ]; then
  for s in ${BASELINE_SCENARIOS:-llama3-8b-tp2-to-tp1x2}; do
    arg=$s
    [ -f "bench/gpu/scenarios/$s.yaml" ] && arg="bench/gpu/scenarios/$s.yaml"
    IFS=';' read -r -a variants <<< "${BASELINE_VARIANTS:---bucket 1GiB;--bucket 256MiB;--bucket per-tensor;--flat}"
    for v in "${variants[@]}"; do
      tag=$(echo "$v" | tr -d ' -')
      name="$(basename "$s" .yaml)-$tag"
      echo "== allgather_baseline $s $v ${BASELINE_ARGS:-}"
      # shellcheck disable=SC2086  # the variant and BASELINE_ARGS are word lists on purpose
      timeout "${RUN_TIMEOUT:-240}" "$BIN/allgather_baseline" --scenario "$arg" $v ${BASELINE_ARGS:-} \
        --out "$OUT/baseline-$name.json" > "$OUT/baseline-$name.log" 2>&1
      brc=$?
      grep -E '^(memory:|DOES NOT FIT|RESULT|MISMATCH)' "$OUT/baseline-$name.log"
      if [ $brc -ne 0 ] && [ $brc -ne 3 ]; then  # 3: does not fit, a result
        echo "  exit $brc"; tail -n 3 "$OUT/baseline-$name.log"; rc=1
      fi
    done
  done
fi
exit $rc
