#!/usr/bin/env python3
"""Prints the grid table (markdown): this folder's NAME.per-round.json (db56312) beside
NAME.domain.json (fd7f553, the twentieth session's last planner) from
../2026-12-04-cpu-placement-ties, whose NAME.yaml are the scenarios, and the Megatron-style
plan from ../2026-12-04-cpu-colocated-grid-link-classes (neither copied)."""
import glob, json, os
here = os.path.dirname(os.path.abspath(__file__))
ties = os.path.join(here, "..", "2026-12-04-cpu-placement-ties")
meg = os.path.join(here, "..", "2026-12-04-cpu-colocated-grid-link-classes")


def row(d_, n, t):
    d = json.load(open(os.path.join(d_, f"{n}.{t}.json")))
    cpu = open(os.path.join(d_, f"{n}.{t}.cpu")).read().split()[-1]
    return d, cpu


def per_round(d):
    return "a round per phase" if d["round_per_phase"] else f"{d['segments_per_round']} per round ({d['rounds']} rounds)"


print("| scenario | fd7f553 | db56312 | change | segments per round fd7f553 -> db56312 | Megatron-style | lower bound | efficiency fd7f553 -> db56312 |")
print("| --- " * 8 + "|")
for y in sorted(glob.glob(os.path.join(ties, "*.yaml"))):
    n = os.path.basename(y)[:-5]
    (a, ca), (b, cb), (m, cm) = row(ties, n, "domain"), row(here, n, "per-round"), row(meg, n, "megatron")
    print(f"| {n} | {a['time_s']*1e3:.1f} ms ({ca} CPU-s) | {b['time_s']*1e3:.1f} ms ({cb} CPU-s) | "
          f"{(b['time_s']/a['time_s']-1)*100:+.1f} % | {per_round(a)} -> {per_round(b)} | {m['time_s']*1e3:.1f} ms | "
          f"{b['lower_bound_s']*1e3:.1f} ms | {a['plan_efficiency']:.2f} -> {b['plan_efficiency']:.2f} |")
