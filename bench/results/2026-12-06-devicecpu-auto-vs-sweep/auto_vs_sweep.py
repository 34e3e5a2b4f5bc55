#!/usr/bin/env python3
"""Per row of LIST ("NAME SCENARIO" lines): the auto plan's time (NAME.plan.json) against the fastest simulated
point of its sweep that fits (NAME.sweep.json.xz), the sweep's recommendation and `reshard plan`'s user CPU-s.
Usage: auto_vs_sweep.py DIR LIST  (Markdown table rows on stdout)."""
import json, lzma, os, sys

d, listing = sys.argv[1], sys.argv[2]
print("| row | auto ms | sweep best ms (point) | recommended ms | auto / best | plan user-s |")
print("| --- | --- | --- | --- | --- | --- |")
for line in open(listing):
    n = line.split()[0]
    a = json.load(open(os.path.join(d, n + ".plan.json")))
    sj = os.path.join(d, n + ".sweep.json.xz")
    user_s = open(os.path.join(d, n + ".plan.time")).read().split()[0]
    if not os.path.exists(sj):
        print(f"| {n} | {a['time_s'] * 1e3:.2f} | (no sweep) | | | {user_s} |")
        continue
    s = json.loads(lzma.open(sj).read() or b"{}")
    pts = [p for p in s.get("points", []) if p["fits"] and p["simulated"]]
    if not pts:
        print(f"| {n} | {a['time_s'] * 1e3:.2f} | (sweep did not finish) | | | {user_s} |")
        continue
    b = min(pts, key=lambda p: p["time_s"])
    rec = s.get("recommended")
    point = f"{b['segment_bytes'] / 2**20:.0f} MiB, {b['memory_policy']}, offload {b['offload_fraction']:g}"
    rec_ms = f"{rec['time_s'] * 1e3:.2f}" if rec else "none within the margin"
    print(f"| {n} | {a['time_s'] * 1e3:.2f} | {b['time_s'] * 1e3:.2f} ({point}) | {rec_ms} | "
          f"{a['time_s'] / b['time_s']:.3f} | {user_s} |")
