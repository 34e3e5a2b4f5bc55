#!/usr/bin/env python3
"""Prints the grid table (markdown): this folder's NAME.ties.json (42b34a4),
NAME.fallback.json (2b866ab) and NAME.domain.json (fd7f553) beside the previous session's 'both'
(reshard at f68186a) and 'megatron' rows, read from
../2026-12-04-cpu-colocated-grid-link-classes (not copied)."""
import glob, json, os
here = os.path.dirname(os.path.abspath(__file__))
prev = os.path.join(here, "..", "2026-12-04-cpu-colocated-grid-link-classes")
cols = [("f68186a", prev, "both"), ("42b34a4", here, "ties"), ("2b866ab", here, "fallback"),
        ("fd7f553", here, "domain"), ("Megatron-style", prev, "megatron")]
print("| scenario | " + " | ".join(c[0] for c in cols) + " | lower bound f68186a / 42b34a4 / 2b866ab / fd7f553 | efficiency f68186a / 42b34a4 / 2b866ab / fd7f553 |")
print("| --- " * (len(cols) + 3) + "|")
for y in sorted(glob.glob(os.path.join(here, "*.yaml"))):
    n = os.path.basename(y)[:-5]
    cells, lbs, effs = [], [], []
    for _, d_, t in cols:
        d = json.load(open(os.path.join(d_, f"{n}.{t}.json")))
        cpu = open(os.path.join(d_, f"{n}.{t}.cpu")).read().split()[-1]
        cells.append(f"{d['time_s']*1e3:.1f} ms ({cpu} CPU-s)")
        if t != "megatron":
            lbs.append(f"{d['lower_bound_s']*1e3:.1f}"); effs.append(f"{d['plan_efficiency']:.2f}")
    print(f"| {n} | " + " | ".join(cells) + f" | {' / '.join(lbs)} ms | {' / '.join(effs)} |")
