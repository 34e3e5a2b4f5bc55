#!/usr/bin/env bash
# One H200: base (HEAD e594926) vs new kernels (DPX packed amax, power-of-two
# scale multiply, 64-register wide kernels; copy-kernel cache hints probe);
# GPU tests of the new tree (check run poisoning, FP8 kernels, conversion check);
# end-to-end FP8 refits with base and new binaries (old calibration).
set -u
export EXTRA_LIB=.carry/lib
S=$OUT/s; mkdir -p $S
export BIN=.carry/lib/new; . bench/gpu/run/gpu_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $S/smi.txt 2>&1
for v in base new; do
  timeout 150 .carry/lib/$v/quantize_kernel_probe > $S/qprobe-$v.jsonl 2> $S/qprobe-$v.err; echo "qprobe $v rc $?"
done
timeout 120 .carry/lib/new/copy_kernel_probe > $S/cprobe-new.jsonl 2> $S/cprobe.err; echo "cprobe rc $?"
timeout 200 .carry/lib/new/gpu_check_test > $S/gpu_check_test.txt 2>&1; echo "gpu_check_test rc $?"; tail -3 $S/gpu_check_test.txt
timeout 300 .carry/lib/new/executor_nccl_test > $S/executor_nccl_test.txt 2>&1; echo "executor_nccl_test rc $?"; grep -E "OK|FAILED|SKIPPED|Failure|passed" $S/executor_nccl_test.txt | head -30
for v in new; do
  BIN=.carry/lib/$v TAG=$v PLANS=reshard REPEAT=3 RUN_TIMEOUT=120 bench/gpu/run/validate.sh $S/val llama3-8b-fp8-one-gpu one-gpu-qwen2.5-7b-mxfp8 one-gpu-mistral-7b-fp8-tensor > $S/val-$v.txt 2>&1; echo "validate $v rc $?"
done
for f in $S/val/*.json; do python3 -c "
import json,sys; d=json.load(open('$f')); m=d.get('measured',{})
print('$f'.split('/')[-1], 'pred %.3f ms meas %.3f ms err %+.1f%% verified %s check %s'%(d['time_s']*1e3, m.get('time_s',0)*1e3, d.get('time_error',0)*100, d.get('verified'), m.get('check_run')))" 2>/dev/null; done
python3 - <<'PY'
import json,os
S=os.environ['OUT']+'/s'
for v in ['base','new']:
  for l in open(f'{S}/qprobe-{v}.jsonl'):
    try: d=json.loads(l)
    except: continue
    if d.get('fill')=='pattern': continue
    print(v, {k:d[k] for k in d if k in ('kind','blocks','path','scheme','ms','median_ms','of_memcpy','traffic_bytes_per_s','same','check','ctas_per_sm','mismatch','bad_convert','bad_divide')})
for l in open(f'{S}/cprobe-new.jsonl'):
  try: d=json.loads(l)
  except: continue
  if d['bytes']>=256<<20: print(d['variant'], d['blocks'], d['bytes']>>20, 'MiB', round(d['bytes_per_s']/1e12,3))
PY
