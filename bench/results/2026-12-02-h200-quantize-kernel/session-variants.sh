#!/usr/bin/env bash
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/k; mkdir -p $R
timeout 120 .carry/lib/quantize_kernel_probe > $R/quantize_kernel_probe.jsonl 2> $R/quantize_kernel_probe.err; echo "probe rc $?"
grep -v "vec_software\|generic" $R/quantize_kernel_probe.jsonl | cut -c1-200; cat $R/quantize_kernel_probe.err
cd $OUT && tar czf k.tgz k && rm -rf k
