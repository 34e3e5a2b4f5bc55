# Plans the 34 rows (14 at-scale + 20 colocated grid) with build/reshard, two at a time, and compares
# time_s with the 2026-12-05-cpu-simulate-within summary (efa58f7's plans). Usage (repository root): python3 bench/results/2026-12-05-cpu-relay-hop-rounds/rows.py OUTDIR
import json, subprocess, sys, os, concurrent.futures as cf
out = sys.argv[1]; os.makedirs(out, exist_ok=True)
base = json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json'))
def run(r):
    f = os.path.join(out, r['row'] + '.json')
    p = subprocess.run(['/usr/bin/time', '-f', 'CPU %U %S', 'build/reshard', 'plan', r['scenario'], '--json'],
                       capture_output=True, text=True)
    open(f, 'w').write(p.stdout)
    cpu = [float(x) for x in p.stderr.strip().splitlines()[-1].split()[1:3]]
    try:
        d = json.loads(p.stdout)
    except Exception:
        return r['row'], None, cpu, p.stderr[-300:]
    return r['row'], d, cpu, ''
rows = []
with cf.ThreadPoolExecutor(2) as ex:
    for (name, d, cpu, err), r in zip(ex.map(run, base), base):
        if d is None:
            print(name, 'FAILED', err); rows.append({'row': name, 'failed': err}); continue
        t = d['time_s'] * 1e3
        rows.append({'row': name, 'scenario': r['scenario'], 'time_ms_before': r['time_ms'], 'time_ms': t,
                     'change': t / r['time_ms'] - 1, 'plan_efficiency': d['plan_efficiency'],
                     'send_relayed_bytes': d.get('send_relayed_bytes'), 'cpu_user_sys_s': cpu})
        print(f"{name:60s} {r['time_ms']:9.3f} -> {t:9.3f} ms ({(t / r['time_ms'] - 1) * 100:+.2f} %) eff {d['plan_efficiency']:.3f} send {d.get('send_relayed_bytes', 0) / 1e9:.1f} GB cpu {cpu}", flush=True)
json.dump(rows, open(os.path.join(out, 'rows.json'), 'w'), indent=1)
