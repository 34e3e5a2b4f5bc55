#!/usr/bin/env bash
# One H200: the two one-GPU FP8 built-ins with the vectorized quantize kernel, every byte verified.
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/h; mkdir -p $R
TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -30
cd $OUT && tar czf h.tgz h && rm -rf h
