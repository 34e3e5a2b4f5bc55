#!/usr/bin/env bash
# One H200: held-out FP8 scenarios (not used for any calibration), every byte verified.
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/n; mkdir -p $R
TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R one-gpu-mistral-7b-fp8 one-gpu-qwen2.5-7b-fp8 one-gpu-qwen2.5-7b-mxfp8 2>&1 | grep -v "^  *$" | tail -9
cd $OUT && tar czf n.tgz n && rm -rf n
