# python3 bench/results/2026-12-06-cpu-routings-kept/rows_identical.py OUT BASE NEW (repository root): the 34 rows of
# bench/results/2026-12-05-cpu-simulate-within/summary.json, base then new binary per row; full `plan --json` compared.
import json, subprocess, sys, os
out, base_bin, new_bin = sys.argv[1:4]
os.makedirs(out, exist_ok=True)
rows = json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json'))
env = dict(os.environ, GLIBC_TUNABLES='glibc.malloc.hugetlb=0')
def run(b, sc):
    p = subprocess.run(['/usr/bin/time', '-f', 'CPU %U %S', b, 'plan', sc, '--json'], capture_output=True, text=True, env=env)
    cpu = [float(x) for x in p.stderr.strip().splitlines()[-1].split()[1:3]]
    return p.stdout, cpu
res = []
for r in rows:
    sb, cb = run(base_bin, r['scenario'])
    sn, cn = run(new_bin, r['scenario'])
    same = json.loads(sb) == json.loads(sn)
    res.append({'row': r['row'], 'same': same, 'cpu_base': cb, 'cpu_new': cn})
    print(f"{r['row'][:60]:60s} same={same} user {cb[0]:6.2f} -> {cn[0]:6.2f}", flush=True)
json.dump(res, open(os.path.join(out, 'rows.json'), 'w'), indent=1)
print('ALL SAME' if all(x['same'] for x in res) else 'DIFFER')
