#!/bin/bash
# bench/results/2026-12-07-cpu-domain-balance/rows.sh BIN > rows.jsonl-like lines (repository root; BIN built from
# 7f87f24 + experiment.diff): every row of bench/results/2026-12-05-cpu-simulate-within/summary.json planned three
# ways (base; X_LOW=1; X_LOW=1 X_DOMBAL=1 X_CAP=1.0), with X_DBG=1 printing each sender-relay routing's busiest NIC.
BIN=${1:-/tmp/reshard-exp} python3 - <<'P'
import json, os, subprocess
for r in json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json')):
  out = {}
  for tag, env in (('base', {}), ('low', {'X_LOW': '1'}), ('cap', {'X_LOW': '1', 'X_DOMBAL': '1', 'X_CAP': '1.0'})):
    e = dict(os.environ, X_DBG='1', **env)
    p = subprocess.run([os.environ['BIN'], 'plan', r['scenario'], '--json'], capture_output=True, text=True, env=e)
    lines = [l for l in p.stderr.splitlines() if 'after:' in l]
    d = json.loads(p.stdout)
    lb = d['lower_bound_s'] * 1e3
    out[tag] = (round(d['time_s'] * 1e3, 2), round(d['routing_bound_s'] * 1e3, 2), [l.split('max nic ')[1] for l in lines])
  print(r['row'], 'lb %.2f' % lb, json.dumps(out), flush=True)
P
