#!/bin/bash
# Session 2026-12-03 call 4: committed tree (a4fd9b7): GPU tests, calibrate of the quantize kernel (every power of two), FP8 refits.
set -u
mkdir -p .carry/lib/a && tar xJf .carry/bin.tar.xz -C .carry/lib/a
export EXTRA_LIB=.carry/lib BIN=.carry/lib/a; . bench/gpu/run/gpu_env.sh
R=$OUT/m; mkdir -p $R
write_environment $R $BIN/reshard > /dev/null
timeout 240 $BIN/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "^\[  (PASSED|FAILED)" $R/executor_nccl_test.txt | tail -2
timeout 200 $BIN/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.log 2>&1; echo "calibrate rc $?"; grep "128 x 128" $R/calibrate.log | cut -c1-120
python3 - $R/quantize-profile.json calib/h200-x2.json $R/h200-x2-merged.json <<'PY'
import json, sys
q = json.load(open(sys.argv[1])); base = json.load(open(sys.argv[2]))
base["quantize_kernel"] = q["quantize_kernel"]
json.dump(base, open(sys.argv[3], "w"), indent=2, sort_keys=True)
PY
CALIBRATION=$R/h200-x2-merged.json TRACE=1 PLANS=reshard REPEAT=5 RUN_TIMEOUT=120 bench/gpu/run/validate.sh $R/v \
  llama3-8b-fp8-one-gpu qwen3-30b-a3b-fp8-one-gpu one-gpu-mistral-7b-fp8 one-gpu-qwen2.5-7b-fp8 one-gpu-qwen2.5-7b-mxfp8 \
  one-gpu-mistral-7b-fp8-tensor one-gpu-qwen3-30b-a3b-fp8-tensor 2>&1 | grep -E "^==|predicted" | paste - - | cut -c1-220
tar czf $OUT/m.tgz -C $OUT m && rm -rf $R
R=$OUT/s3; mkdir -p $R
for mode in pruned exhaustive; do
  flag=""; [ $mode = exhaustive ] && flag=--exhaustive
  /usr/bin/time -v timeout 200 $BIN/reshard sweep deepseek-v3-pp16ep16-to-tp32dp8 --segment-bytes 32MiB,64MiB,128MiB --threads 16 $flag --json --csv $R/sweep3-$mode.csv > $R/sweep3-$mode.json 2> $R/sweep3-$mode.time
  echo "$mode rc=$?"; grep -E "Elapsed|User time|System time|Maximum resident" $R/sweep3-$mode.time
done
tar czf $OUT/s3.tgz -C $OUT s3 && rm -rf $R
