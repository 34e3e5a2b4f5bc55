#!/usr/bin/env python3
"""Prints the before / after / Megatron-style table of this folder (markdown) from NAME.TAG.json."""
import glob, json, os, sys
here = os.path.dirname(os.path.abspath(__file__))
tags = sys.argv[1:] or ["before", "after", "megatron"]
print("| scenario | " + " | ".join(tags) + " | lower bound | efficiency " + " / ".join(t for t in tags if t != "megatron") + " |")
print("| --- " * (len(tags) + 3) + "|")
for y in sorted(glob.glob(os.path.join(here, "*.yaml"))):
    n = os.path.basename(y)[:-5]
    cells, lb, eff = [], None, []
    for t in tags:
        try:
            d = json.load(open(os.path.join(here, f"{n}.{t}.json")))
            cpu = open(os.path.join(here, f"{n}.{t}.cpu")).read().split()[-1]
        except (OSError, ValueError):
            cells.append("-"); continue
        if not d.get("fits", True) or "time_s" not in d:
            cells.append("does not fit"); continue
        cells.append(f"{d['time_s']*1e3:.1f} ms ({cpu} CPU-s)")
        if t != "megatron":
            lb = d["lower_bound_s"]; eff.append(f"{d['plan_efficiency']:.2f}")
    print(f"| {n} | " + " | ".join(cells) + f" | {lb*1e3:.1f} ms | " + " / ".join(eff) + " |" if lb else f"| {n} | " + " | ".join(cells) + " | - | - |")
