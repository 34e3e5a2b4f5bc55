#!/usr/bin/env bash
# One H200: quantize kernels, packed-amax build (new) vs float amax + one
# block per CTA + 16 CTAs/SM + power-of-two scales (new2); copy probe with
# TMA bulk copies; GPU tests; calibrate of the quantize kernel with new2,
# merged; FP8 + bf16 refits validated with it (check run on).
set -u
export EXTRA_LIB=.carry/lib BIN=.carry/lib/new2; . bench/gpu/run/gpu_env.sh
R=$OUT/t; mkdir -p $R
date -u +%T
for v in new new2; do
  timeout 150 .carry/lib/$v/quantize_kernel_probe > $R/qprobe-$v.jsonl 2> $R/qprobe-$v.err; echo "qprobe $v rc $?"
done
timeout 150 .carry/lib/new2/copy_kernel_probe > $R/cprobe.jsonl 2> $R/cprobe.err; echo "cprobe rc $?"; cat $R/cprobe.err | head -5
timeout 200 .carry/lib/new2/gpu_check_test > $R/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"
timeout 300 .carry/lib/new2/executor_nccl_test > $R/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "FAILED|PASSED|OK \]" $R/executor_nccl_test.txt | tail -4
date -u +%T
timeout 150 .carry/lib/new2/reshard calibrate -o $R/quantize-profile.json --no-links --no-host-costs --no-copy-kernel --no-cold > $R/calibrate.txt 2>&1; echo "calibrate rc $?"
grep -i quantize $R/calibrate.txt | cut -c1-150 | head
python3 - "$R/quantize-profile.json" $R/h200-x2-merged.json <<'PY'
import json, sys
q = json.load(open(sys.argv[1]))
m = json.load(open("calib/h200-x2.json"))
m["quantize_kernel"] = q["quantize_kernel"]
json.dump(m, open(sys.argv[2], "w"), indent=2, sort_keys=True)
PY
date -u +%T
CALIBRATION=$R/h200-x2-merged.json PLANS="reshard" REPEAT=5 RUN_TIMEOUT=120 bench/gpu/run/validate.sh $R/val llama3-8b-fp8-one-gpu one-gpu-mistral-7b-fp8 one-gpu-qwen2.5-7b-fp8 one-gpu-qwen2.5-7b-mxfp8 one-gpu-mistral-7b-fp8-tensor one-gpu-qwen3-30b-a3b-fp8-tensor one-gpu-llama3-8b 2>&1 | grep -v "^  *$" | tail -16
date -u +%T
python3 - <<'PY'
import json,os
R=os.environ['OUT']+'/t'
for v in ['new','new2']:
  for l in open(f'{R}/qprobe-{v}.jsonl'):
    try: d=json.loads(l)
    except: continue
    if d.get('fill')=='pattern': continue
    print(v, d.get('variant', d.get('check')), d.get('blocks',''), d.get('ctas_per_sm',''), d.get('median_ms',''), d.get('of_memcpy',''), d.get('same_bytes',''), d.get('mismatches',''), d.get('divide_mismatches',''))
for l in open(f'{R}/cprobe.jsonl'):
  try: d=json.loads(l)
  except: continue
  if 'check' in d: print(d); continue
  if d['bytes']>=256<<20 and (d['variant'].startswith('tma') or d['variant'] in ('memcpy','hint_plain_w8')): print(d['variant'], d['blocks'], d['chunk_bytes'], d['bytes']>>20, 'MiB', round(d['bytes_per_s']/1e12,3))
PY
grep -h check_run $R/val/*.json | head -2
