#!/usr/bin/env bash
# One H200: the quantize kernels for every block shape (probe: same bytes as
# the generic kernel, speed), GPU unit tests (FP8 on every kernel), calibrate
# of the quantize kernel (three block shapes), then the held-out FP8 refits
# validated with a profile holding the rates just measured.
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/p; mkdir -p $R
date -u +%T
timeout 150 .carry/lib/quantize_kernel_probe > $R/quantize_kernel_probe.jsonl 2> $R/quantize_kernel_probe.err; echo "probe rc $?"
grep '"ctas_per_sm": 8\|check\|memcpy' $R/quantize_kernel_probe.jsonl | grep -v '"fill": "pattern"' | cut -c1-220; cat $R/quantize_kernel_probe.err
date -u +%T
timeout 150 .carry/lib/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "FAILED|PASSED|OK \]" $R/executor_nccl_test.txt | tail -4
date -u +%T
timeout 150 .carry/lib/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.txt 2>&1; echo "calibrate rc $?"
grep quantize_kernel $R/calibrate.txt | cut -c1-150
python3 - "$R/quantize-profile.json" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))
m = json.load(open("calib/h200-x2.json"))
m["quantize_kernel"] = q["quantize_kernel"]
json.dump(m, open("/tmp/h200-q.json", "w"), indent=2, sort_keys=True)
PY
date -u +%T
CALIBRATION=/tmp/h200-q.json TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=100 bench/gpu/run/validate.sh $R/fp8 one-gpu-qwen2.5-7b-mxfp8 one-gpu-mistral-7b-fp8-tensor one-gpu-qwen3-30b-a3b-fp8-tensor llama3-8b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -8
date -u +%T
cd $OUT && tar czf p.tgz p && rm -rf p
