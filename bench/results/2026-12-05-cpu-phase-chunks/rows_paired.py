# Usage (repository root): python3 bench/results/2026-12-05-cpu-phase-chunks/rows_paired.py OUTDIR BASE_RESHARD NEW_RESHARD [ROW,ROW...]
# Paired rows: base and new binary per row, one after the other (same VM minute), one row at a time.
import json, subprocess, sys, os
out = sys.argv[1]; base_bin, new_bin = sys.argv[2], sys.argv[3]; only = sys.argv[4].split(',') if len(sys.argv) > 4 else None
os.makedirs(out, exist_ok=True)
rows = json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json'))
def run(b, sc):
    p = subprocess.run(['/usr/bin/time', '-f', 'CPU %U %S', b, 'plan', sc, '--json'], capture_output=True, text=True)
    cpu = [float(x) for x in p.stderr.strip().splitlines()[-1].split()[1:3]]
    return json.loads(p.stdout), cpu
res = []
for r in rows:
    if only and r['row'] not in only: continue
    db, cb = run(base_bin, r['scenario'])
    dn, cn = run(new_bin, r['scenario'])
    json.dump(dn, open(os.path.join(out, r['row'] + '.json'), 'w'))
    e = {'row': r['row'], 'scenario': r['scenario'], 'time_ms_base': db['time_s'] * 1e3, 'time_ms': dn['time_s'] * 1e3,
         'plan_efficiency': dn['plan_efficiency'], 'cpu_user_sys_base': cb, 'cpu_user_sys': cn}
    res.append(e)
    print(f"{r['row'][:56]:56s} {e['time_ms_base']:9.3f} -> {e['time_ms']:9.3f} ({(e['time_ms']/e['time_ms_base']-1)*100:+.2f} %) eff {dn['plan_efficiency']:.3f} cpu {sum(cb):6.1f} -> {sum(cn):6.1f}", flush=True)
json.dump(res, open(os.path.join(out, 'rows.json'), 'w'), indent=1)
