#!/usr/bin/env python3
"""The table of README.md from the JSON here: per row, time and efficiency under
the gate commit (2e0b3d7), a full search at threshold 0, and threshold 0 tried
at the won size of a round per phase (direct0-at-won-size.diff)."""
import glob, json, os
HERE = os.path.dirname(os.path.abspath(__file__))
print("| row | 2e0b3d7 | threshold 0, full search | threshold 0 at the won size | CPU-s (three runs) |")
print("| --- | --- | --- | --- | --- |")
for y in sorted(glob.glob(f"{HERE}/*.yaml")):
    n = os.path.basename(y)[:-5]
    cells, cpus = [], []
    for tag in ("gate", "direct0-search", "direct0-at-won"):
        j = json.load(open(f"{HERE}/{n}.{tag}.json"))
        sched = "a round per phase" if j["round_per_phase"] else f"{j['rounds']} rounds of {j['segments_per_round']}"
        cells.append(f"{j['time_s'] * 1e3:.1f} ms ({j['plan_efficiency']:.2f}; {j['segment_bytes'] >> 20} MiB, {sched})")
        cpus.append(open(f"{HERE}/{n}.{tag}.cpu").read().split()[-1])
    print(f"| {n} | " + " | ".join(cells) + f" | {' / '.join(cpus)} |")
