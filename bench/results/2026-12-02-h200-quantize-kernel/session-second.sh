#!/usr/bin/env bash
# One H200: quantize kernel probe (checks + speed by path incl. two-block-wide), the two
# FP8 built-ins validated with the profile that now holds the measured quantize rates.
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/j; mkdir -p $R
timeout 120 .carry/lib/quantize_kernel_probe > $R/quantize_kernel_probe.jsonl 2> $R/quantize_kernel_probe.err; echo "probe rc $?"
cat $R/quantize_kernel_probe.jsonl $R/quantize_kernel_probe.err | cut -c1-220
TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R/fp8 llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -6
cd $OUT && tar czf j.tgz j && rm -rf j
