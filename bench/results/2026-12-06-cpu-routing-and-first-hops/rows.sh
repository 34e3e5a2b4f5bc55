#!/bin/bash
# bench/results/2026-12-06-cpu-routing-and-first-hops/rows.sh BIN > OUT.jsonl (repository root): every row of
# bench/results/2026-12-05-cpu-simulate-within/summary.json planned with BIN (`plan --json`), one JSON line per row:
# predicted time, lower bound, routing bound, efficiency, segment size, rounds, round per phase, relayed bytes, policy.
# The experiments' environment variables (SHAVE=1, PIPE_FH=1, DOMAIN_BAL=1: see the .diff files) pass through.
BIN=${1:-build/reshard}
BIN=$BIN python3 - <<'PY'
import json, os, subprocess, time
for r in json.load(open('bench/results/2026-12-05-cpu-simulate-within/summary.json')):
    t = time.time()
    p = subprocess.run([os.environ['BIN'], 'plan', r['scenario'], '--json'], capture_output=True, text=True)
    d = json.loads(p.stdout)
    print(json.dumps(dict(row=r['row'], time_ms=d['time_s'] * 1e3, lb_ms=d['lower_bound_s'] * 1e3,
                          rb_ms=d['routing_bound_s'] * 1e3, eff=d['plan_efficiency'], seg=d['segment_bytes'],
                          rounds=d['rounds'], rpp=d['round_per_phase'], relayed=d['relayed_bytes'],
                          policy=d['memory_policy'], wall=time.time() - t)), flush=True)
PY
