#!/usr/bin/env bash
# Merged tree (quantize kernel + FP8 at the source + sim speed + hardening), one H200:
# GPU unit tests, the two FP8 built-ins (qwen3-30b-a3b now quantized at the source),
# the four one-GPU bf16 refits (re-run with the padded-group rule for quantize tiles).
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/m; mkdir -p $R
timeout 240 .carry/lib/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; tail -1 $R/executor_nccl_test.txt
timeout 120 .carry/lib/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"; tail -1 $R/gpu_check_test.txt
TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R/fp8 llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -6
PLANS="reshard" REPEAT=5 bench/gpu/run/validate.sh $R/bf16 one-gpu-llama3-8b one-gpu-qwen3-30b-a3b one-gpu-qwen2.5-7b one-gpu-mistral-7b 2>&1 | grep -v "^  *$" | grep -E "==|predicted" | tail -12
cd $OUT && tar czf m.tgz m && rm -rf m
