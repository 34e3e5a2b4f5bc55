#!/usr/bin/env bash
# One H200: the quantize kernel probe (exactness of the hardware conversion over
# every fp32, speed by path), GPU unit tests, the two FP8 built-ins (every byte
# verified), and the bf16 one-GPU llama3-8b (unchanged?).
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/i; mkdir -p $R
timeout 120 .carry/lib/quantize_kernel_probe > $R/quantize_kernel_probe.jsonl 2> $R/quantize_kernel_probe.err; echo "probe rc $?"
cat $R/quantize_kernel_probe.jsonl $R/quantize_kernel_probe.err
timeout 240 .carry/lib/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"
tail -2 $R/executor_nccl_test.txt
timeout 120 .carry/lib/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"
tail -2 $R/gpu_check_test.txt
timeout 200 .carry/lib/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.txt 2>&1; echo "calibrate rc $?"
tail -8 $R/calibrate.txt
TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R/fp8 llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -12
cd $OUT && tar czf i.tgz i && rm -rf i
