#!/bin/bash
# bench/results/2026-12-07-cpu-byte-races/verify-rows.sh BIN [ROW-SUBSTRING] > OUT.jsonl (repository root): every row
# of bench/results/2026-12-05-cpu-simulate-within/summary.json planned with BIN (`plan -o`), then the plan read back
# by `simulate` (which runs Verify, races included, before simulating): one JSON line per row with the exit code,
# Verify's problems (first 20 lines of stderr) and the plan's size.
BIN=${1:-build/reshard} ONLY=${2:-} python3 - <<'PY'
import json, os, subprocess, tempfile, time
tmp = tempfile.mkdtemp()
plan = os.path.join(tmp, 'plan.json')
for r in json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json')):
    if os.environ['ONLY'] and os.environ['ONLY'] not in r['row']:
        continue
    t = time.time()
    p = subprocess.run([os.environ['BIN'], 'plan', r['scenario'], '-o', plan, '--json'], capture_output=True, text=True)
    d = json.loads(p.stdout)
    s = subprocess.run([os.environ['BIN'], 'simulate', plan, '--json'], capture_output=True, text=True)
    sim = json.loads(s.stdout) if s.returncode == 0 else {}
    print(json.dumps(dict(row=r['row'], plan_rc=p.returncode, simulate_rc=s.returncode, ops=d.get('ops'),
                          time_ms=d['time_s'] * 1e3, simulated_ms=sim.get('time_s', 0) * 1e3,
                          problems=s.stderr.splitlines()[:20], wall=time.time() - t)), flush=True)
    os.remove(plan)
PY
