#!/usr/bin/env bash
# Merged tree of 2026-12-02 (third session), one H200: GPU unit tests, the two one-GPU FP8
# built-ins (quantized at the destination; every fp8 byte and scale verified on the GPU),
# then the four one-GPU bf16 refits with reshard's plan (unchanged?).
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/g; mkdir -p $R
nvidia-smi > $R/nvidia-smi.txt 2>&1
timeout 240 .carry/lib/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"
tail -3 $R/executor_nccl_test.txt
timeout 120 .carry/lib/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"
tail -3 $R/gpu_check_test.txt
TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R/fp8 llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -30
TRACE=1 PLANS="reshard" REPEAT=5 bench/gpu/run/validate.sh $R/bf16 one-gpu-llama3-8b one-gpu-qwen3-30b-a3b one-gpu-qwen2.5-7b one-gpu-mistral-7b 2>&1 | grep -v "^  *$" | tail -30
cd $OUT && tar czf g.tgz g && rm -rf g
