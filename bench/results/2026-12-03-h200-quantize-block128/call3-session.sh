#!/bin/bash
# Session 2026-12-03 call 3: whole-block 128x128 quantize kernel: GPU tests, probes, calibrate, FP8 refits.
set -u
mkdir -p .carry/lib/a && tar xJf .carry/bin.tar.xz -C .carry/lib/a
export EXTRA_LIB=.carry/lib BIN=.carry/lib/a; . bench/gpu/run/gpu_env.sh
R=$OUT/k; mkdir -p $R
write_environment $R $BIN/reshard > /dev/null
timeout 240 $BIN/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "^\[  (PASSED|FAILED|  OK|SKIPPED)" $R/executor_nccl_test.txt | tail -4
cuobjdump --dump-sass $BIN/quantize_kernel_probe 2>/dev/null | awk '/Function : /{p = /Block128/} p' > $R/block128.sass; echo "block128 sass lines $(wc -l < $R/block128.sass), STL $(grep -c STL $R/block128.sass), LDL $(grep -c LDL $R/block128.sass)"
timeout 60 $BIN/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"; tail -1 $R/gpu_check_test.txt
timeout 150 $BIN/quantize_kernel_probe > $R/quantize-probe.jsonl 2> $R/quantize-probe.err; echo "probe rc $?"; head -2 $R/quantize-probe.jsonl | cut -c1-250
timeout 100 $BIN/quantize_variants_probe > $R/variants.jsonl 2> $R/variants.err; echo "variants rc $?"
grep -E '"(backend_auto|t256_exact_packed)"' $R/variants.jsonl | grep -E '"ctas_per_sm": (16|32)' | cut -c1-170
timeout 200 $BIN/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.log 2>&1; echo "calibrate rc $?"; tail -4 $R/calibrate.log
python3 - $R/quantize-profile.json calib/h200-x2.json $R/h200-x2-merged.json <<'PY'
import json, sys
q = json.load(open(sys.argv[1])); base = json.load(open(sys.argv[2]))
base["quantize_kernel"] = q["quantize_kernel"]
json.dump(base, open(sys.argv[3], "w"), indent=2, sort_keys=True)
PY
CALIBRATION=$R/h200-x2-merged.json PLANS=reshard REPEAT=5 RUN_TIMEOUT=120 bench/gpu/run/validate.sh $R/v \
  llama3-8b-fp8-one-gpu one-gpu-mistral-7b-fp8 one-gpu-qwen2.5-7b-fp8 one-gpu-qwen2.5-7b-mxfp8 \
  one-gpu-mistral-7b-fp8-tensor one-gpu-qwen3-30b-a3b-fp8-tensor qwen3-30b-a3b-fp8-one-gpu 2>&1 | grep -v "^  exit" | tail -12
tar czf $OUT/k.tgz -C $OUT k && rm -rf $R
R=$OUT/s; mkdir -p $R
for mode in pruned exhaustive; do
  flag=""; [ $mode = exhaustive ] && flag=--exhaustive
  /usr/bin/time -v timeout 240 $BIN/reshard sweep deepseek-v3-pp16ep16-to-tp32dp8 --threads 16 $flag --json --csv $R/sweep-$mode.csv > $R/sweep-$mode.json 2> $R/sweep-$mode.time
  echo "$mode rc=$?"; grep -E "Elapsed|User time|System time|Maximum resident" $R/sweep-$mode.time
done
tar czf $OUT/s.tgz -C $OUT s && rm -rf $R
