# rowsub.sh BIN OUT ROW... : rows.sh restricted to the named rows
BIN=$1; OUT=$2; shift 2
ROWS="$*" BIN=$BIN python3 - > $OUT <<'PY'
import json, os, subprocess, time
want=os.environ['ROWS'].split()
for r in json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json')):
    if r['row'] not in want: continue
    t = time.time()
    p = subprocess.run([os.environ['BIN'], 'plan', r['scenario'], '--json'], capture_output=True, text=True)
    d = json.loads(p.stdout)
    print(json.dumps(dict(row=r['row'], time_ms=d['time_s'] * 1e3, lb_ms=d['lower_bound_s'] * 1e3,
                          rb_ms=d['routing_bound_s'] * 1e3, eff=d['plan_efficiency'], seg=d['segment_bytes'],
                          rounds=d['rounds'], rpp=d['round_per_phase'], relayed=d['relayed_bytes'],
                          groups=d['nccl_groups'], policy=d['memory_policy'], wall=time.time() - t)), flush=True)
PY
