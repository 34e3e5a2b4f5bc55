#!/usr/bin/env python3
"""Writes a hostile-but-valid plan.json: tests/data/plans/exchange.json with its
ops replaced by N copy ops (default 3,000,000, ~182 MB) that each depend on the
previous one and copy nothing. Valid JSON, every field in range, so the reader
must convert all of it before Verify refuses it (copies without regions).
Usage: make_hostile_plan.py OUT [N]"""
import json
import sys

out, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3_000_000
with open(__file__.rsplit("/", 4)[0] + "/tests/data/plans/exchange.json") as f:
    plan = json.load(f)
head = {k: v for k, v in plan.items() if k not in ("ops",)}
with open(out, "w") as f:
    f.write(json.dumps(head, separators=(",", ":"))[:-1])
    f.write(',\n"ops":[')
    for i in range(n):
        dep = f',"deps":[{i - 1}]' if i else ""
        f.write(f'{"," if i else ""}\n{{"id":{i},"kind":"copy","gpu":0,"stream":0{dep}}}')
    f.write("\n]}\n")
