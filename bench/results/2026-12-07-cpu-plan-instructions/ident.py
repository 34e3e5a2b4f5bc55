# python3 bench/results/2026-12-07-cpu-plan-instructions/ident.py BIN OUTFILE [rows...] (repository root): plan each row with BIN (-o plan, --json), record sha256 of the plan file and of the
# --json answer without wall/cpu fields, and user+sys CPU seconds.
import json, os, subprocess, sys, hashlib, resource, time
BIN, OUT = sys.argv[1], sys.argv[2]
rows = {r['row']: r['scenario'] for r in json.load(open('./bench/results/2026-12-05-cpu-simulate-within/summary.json'))}
names = sys.argv[3:] or ['deepseek-v3','qwen3-235b','kimi-k2-bf16','deepseek-v3-nvl72','qwen3-30b-a3b','qwen3-30b-a3b-ep8pp2',
  'llama3-70b-colocated-1024','grid-deepseek-v3-gb200-nvl72-tp8pp4ep32-to-tp16dp8ep128','grid-llama3-405b-dgx-h200-tp8pp16-to-tp8pp2dp8',
  'grid-qwen3-235b-a22b-gb200-nvl72-tp4pp4ep8-to-tp8dp4','grid-qwen3-235b-a22b-dgx-h200-tp4pp4ep8-to-tp8dp4','kimi-k2-fp8',
  'grid-deepseek-v3-dgx-h200-tp8pp4ep32-to-tp16dp8ep128']
with open(OUT, 'w') as f:
  for n in names:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.time()
    p = subprocess.run([BIN, 'plan', rows[n], '--json', '-o', '/tmp/ident-plan.json'], capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    d = json.loads(p.stdout)
    for k in list(d):
      if 'wall' in k or 'cpu' in k: d.pop(k)
    h = hashlib.sha256(open('/tmp/ident-plan.json','rb').read()).hexdigest()[:16]
    j = hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
    f.write(json.dumps(dict(row=n, plan=h, answer=j, time_ms=d.get('time_s',0)*1e3, user=round(after.ru_utime-before.ru_utime,2),
                            sys=round(after.ru_stime-before.ru_stime,2), wall=round(time.time()-t,2))) + '\n'); f.flush()
