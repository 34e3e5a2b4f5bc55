# explore.py: forced planner options on the rows below 0.9; one JSON line per (row, option set).
import json, os, subprocess, sys, time, itertools
from concurrent.futures import ThreadPoolExecutor
BIN='build/reshard'
D='bench/results/2026-12-05-cpu-direct-threshold/'
rows = {
 'qwen3-30b-a3b': 'bench/results/2026-12-02-cpu-at-scale/qwen3-30b-a3b-h200-colocated-ep.yaml',
 'q-gb200-tp2pp8': D+'qwen3-235b-a22b-gb200-nvl72-tp2pp8ep4-to-tp4dp8ep32.yaml',
 'q-gb200-tp4pp4': D+'qwen3-235b-a22b-gb200-nvl72-tp4pp4ep8-to-tp8dp4.yaml',
 'q-h200-tp2pp8': D+'qwen3-235b-a22b-dgx-h200-tp2pp8ep4-to-tp4dp8ep32.yaml',
 'ds-h200-tp8pp4': D+'deepseek-v3-dgx-h200-tp8pp4ep32-to-tp16dp8ep128.yaml',
 'ds-h200-tp2pp8': D+'deepseek-v3-dgx-h200-tp2pp8ep16-to-tp8dp16ep128.yaml',
 'ds-gb200-tp8pp4': D+'deepseek-v3-gb200-nvl72-tp8pp4ep32-to-tp16dp8ep128.yaml',
 'ds-gb200-tp2pp8': D+'deepseek-v3-gb200-nvl72-tp2pp8ep16-to-tp8dp16ep128.yaml',
 'ds-gb200-tp1pp16': D+'deepseek-v3-gb200-nvl72-tp1pp16ep8-to-tp8dp16ep128.yaml',
 'l405-gb200-tp8pp8': D+'llama3-405b-gb200-nvl72-tp8pp8-to-tp8dp16.yaml',
}
combos = [dict()]  # auto
combos += [dict(X_SMF='100000000')]                       # large plans searched as small ones (simulated)
combos += [dict(X_RAMP='1.5')]                            # ramped chunks forced where chunks are tried
combos += [dict(X_LANES='1'), dict(X_LANES='0')]
combos += [dict(X_SEND='1'), dict(X_SEND='0'), dict(X_RELAYS='0'), dict(X_RELAYS='1')]
combos += [dict(X_WAVES='1'), dict(X_CH='1')]
only = sys.argv[1:] or list(rows)
jobs = [(r, c) for r in only for c in combos]
def run(job):
    r, c = job
    env = dict(os.environ, GLIBC_TUNABLES='glibc.malloc.hugetlb=0', **c)
    t = time.time()
    p = subprocess.run([BIN, 'plan', rows[r], '--json'], capture_output=True, text=True, env=env, timeout=900)
    try:
        d = json.loads(p.stdout)
        out = dict(row=r, opts=c, time_ms=d.get('time_s', float('nan')) * 1e3, lb_ms=d.get('lower_bound_s', 0) * 1e3,
                   rb_ms=d.get('routing_bound_s', 0) * 1e3, eff=d.get('plan_efficiency'), seg=d.get('segment_bytes'),
                   rounds=d.get('rounds'), groups=d.get('nccl_groups'), wall=time.time() - t, fits=d.get('fits'))
    except Exception as e:
        out = dict(row=r, opts=c, error=str(e)[:100], stderr=p.stderr[-300:], wall=time.time() - t)
    return out
with ThreadPoolExecutor(2) as ex:
    for o in ex.map(run, jobs):
        print(json.dumps(o), flush=True)
