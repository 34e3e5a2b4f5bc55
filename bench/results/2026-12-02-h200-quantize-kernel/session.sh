#!/usr/bin/env bash
# One H200: quantize kernel probe (checks; speed by path: up to 4 blocks per CTA is now
# the default), GPU unit tests, calibrate of the quantize kernel, then the two FP8
# built-ins validated with a profile that holds the rates just measured.
set -u
export BIN=.carry/lib EXTRA_LIB=.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/l; mkdir -p $R
timeout 120 .carry/lib/quantize_kernel_probe > $R/quantize_kernel_probe.jsonl 2> $R/quantize_kernel_probe.err; echo "probe rc $?"
grep '"ctas_per_sm": 8\|check\|memcpy' $R/quantize_kernel_probe.jsonl | cut -c1-200; cat $R/quantize_kernel_probe.err
timeout 240 .carry/lib/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; tail -1 $R/executor_nccl_test.txt
timeout 120 .carry/lib/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"; tail -1 $R/gpu_check_test.txt
timeout 200 .carry/lib/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.txt 2>&1; echo "calibrate rc $?"
tail -6 $R/calibrate.txt
python3 - "$R/quantize-profile.json" <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))
m = json.load(open("calib/h200-x2.json"))
m["quantize_kernel"] = q["quantize_kernel"]
json.dump(m, open("/tmp/h200-q.json", "w"), indent=2, sort_keys=True)
PY
CALIBRATION=/tmp/h200-q.json TRACE=1 PLANS="reshard" REPEAT=5 RUN_TIMEOUT=200 bench/gpu/run/validate.sh $R/fp8 llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  *$" | tail -6
cd $OUT && tar czf l.tgz l && rm -rf l
