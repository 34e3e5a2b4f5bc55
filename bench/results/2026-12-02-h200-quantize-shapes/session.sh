#!/usr/bin/env bash
# One H200: the quantized-piece check spread over CTAs for large blocks; the
# per-matrix FP8 refit that timed out in its check, MXFP8, and a bf16 refit.
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/q; mkdir -p $R
date -u +%T
timeout 150 .carry/lib/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "FAILED|PASSED|OK \]" $R/executor_nccl_test.txt | tail -3
date -u +%T
CALIBRATION=calib/h200-x2.json TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=150 bench/gpu/run/validate.sh $R/fp8 one-gpu-mistral-7b-fp8-tensor one-gpu-qwen2.5-7b-mxfp8 one-gpu-llama3-8b one-gpu-mistral-7b-fp8 2>&1 | grep -v "^  *$" | tail -8
date -u +%T
cd $OUT && tar czf q.tgz q && rm -rf q
