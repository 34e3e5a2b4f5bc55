#!/bin/bash
# Session 2026-12-03 call 2: packed-amax quantize kernels: GPU tests, probes, calibrate, FP8 refits.
set -u
mkdir -p .carry/lib/a && tar xJf .carry/bin.tar.xz -C .carry/lib/a
export EXTRA_LIB=.carry/lib BIN=.carry/lib/a; . bench/gpu/run/gpu_env.sh
R=$OUT/j; mkdir -p $R
write_environment $R $BIN/reshard > /dev/null
timeout 240 $BIN/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED)" $R/executor_nccl_test.txt | tail -4
timeout 60 $BIN/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"; tail -1 $R/gpu_check_test.txt
timeout 150 $BIN/quantize_kernel_probe > $R/quantize-probe.jsonl 2> $R/quantize-probe.err; echo "probe rc $?"; head -2 $R/quantize-probe.jsonl | cut -c1-250
timeout 100 $BIN/quantize_variants_probe > $R/variants.jsonl 2> $R/variants.err; echo "variants rc $?"
grep -E '"(backend_auto|t256_exact_packed)"' $R/variants.jsonl | grep -E '"ctas_per_sm": (16|32)' | cut -c1-170
timeout 200 $BIN/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.log 2>&1; echo "calibrate rc $?"; tail -4 $R/calibrate.log
python3 - $R/quantize-profile.json calib/h200-x2.json $R/h200-x2-merged.json <<'PY'
import json, sys
q = json.load(open(sys.argv[1])); base = json.load(open(sys.argv[2]))
base["quantize_kernel"] = q["quantize_kernel"]
json.dump(base, open(sys.argv[3], "w"), indent=2, sort_keys=True)
PY
CALIBRATION=$R/h200-x2-merged.json PLANS=reshard REPEAT=5 RUN_TIMEOUT=120 bench/gpu/run/validate.sh $R/v \
  llama3-8b-fp8-one-gpu one-gpu-mistral-7b-fp8 one-gpu-qwen2.5-7b-fp8 one-gpu-qwen2.5-7b-mxfp8 \
  one-gpu-mistral-7b-fp8-tensor one-gpu-qwen3-30b-a3b-fp8-tensor qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  exit" | tail -12
tar czf $OUT/j.tgz -C $OUT j && rm -rf $R
