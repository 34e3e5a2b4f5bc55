#!/usr/bin/env python3
"""Turn scaling_bench's Google Benchmark JSON into a CSV, a Markdown table and
log-log least-squares fits of time against GPU count.

    scaling_report.py scaling.json --csv scaling.csv > table.md

CSV columns (one row per case; times in seconds, memory in bytes):
  sweep (gpus|size), family (dense|moe|model preset), gpus, parameters,
  fragments, ops, events, plan_s, plan_peak_rss_bytes, simulate_s,
  simulate_peak_rss_bytes, predicted_s, lower_bound_s
The fit: time = a * gpus^k by least squares on (log gpus, log time); k is
reported with its R^2, per family, for the planner and the simulator.
Standard library only.
"""
import argparse
import csv
import json
import math
import sys


def fit(xs, ys):
    """Least squares of log y = log a + k log x; returns (k, a, r2)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(y) for y in ys]
    n = len(lx)
    mx, my = sum(lx) / n, sum(ly) / n
    sxx = sum((x - mx) ** 2 for x in lx)
    sxy = sum((x - mx) * (y - my) for x, y in zip(lx, ly))
    k = sxy / sxx
    b = my - k * mx
    ss_tot = sum((y - my) ** 2 for y in ly)
    ss_res = sum((y - (b + k * x)) ** 2 for x, y in zip(lx, ly))
    return k, math.exp(b), 1 - ss_res / ss_tot if ss_tot > 0 else 1.0


def seconds(b):
    unit = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[b.get("time_unit", "ns")]
    return b["cpu_time"] * unit  # one-core cost (the shared machine's wall time includes waiting)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()
    data = json.load(open(args.json))
    rows = {}
    order = []
    for b in data["benchmarks"]:
        if b.get("run_type", "iteration") != "iteration":
            continue
        kind, _, case = b["name"].partition("/")
        case = case.split("/min_time")[0]
        if case not in rows:
            parts = case.split("/")
            rows[case] = {"sweep": parts[0], "family": parts[1], "error": ""}
            order.append(case)
        r = rows[case]
        if b.get("error_occurred"):
            r["error"] = b.get("error_message", "error")
            continue
        r["gpus"] = int(b["gpus"])
        r["parameters"] = int(b["parameters"])
        r["ops"] = int(b["ops"])
        if kind == "plan":
            r["fragments"] = int(b["fragments"])
            r["plan_s"] = seconds(b)
            r["plan_peak_rss_bytes"] = int(b["peak_rss_MiB"] * 2**20)
        else:
            r["events"] = int(b["events"])
            r["simulate_s"] = seconds(b)
            r["simulate_peak_rss_bytes"] = int(b["peak_rss_MiB"] * 2**20)
            r["predicted_s"] = b["predicted_ms"] / 1e3
            r["lower_bound_s"] = b["lower_bound_ms"] / 1e3
    cols = ["sweep", "family", "gpus", "parameters", "fragments", "ops", "events", "plan_s",
            "plan_peak_rss_bytes", "simulate_s", "simulate_peak_rss_bytes", "predicted_s", "lower_bound_s"]
    with open(args.csv, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for c in order:
            if rows[c]["error"]:
                continue
            w.writerow([rows[c].get(k, "") for k in cols])

    out = sys.stdout
    out.write("| sweep | case | GPUs | parameters | fragments | ops | plan | plan peak RSS | simulate | "
              "simulate peak RSS | events | predicted refit | lower bound |\n")
    out.write("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
    for c in order:
        r = rows[c]
        if r["error"]:
            out.write(f"| {r['sweep']} | {r['family']} | | | | | {r['error']} | | | | | | |\n")
            continue
        out.write("| {} | {} | {} | {:.1f} B | {:,} | {:,} | {:.3f} s | {:.0f} MiB | {:.3f} s | {:.0f} MiB | {:,} | "
                  "{:.1f} ms | {:.1f} ms |\n".format(
                      r["sweep"], r["family"], r["gpus"], r["parameters"] / 1e9, r["fragments"], r["ops"],
                      r["plan_s"], r["plan_peak_rss_bytes"] / 2**20, r["simulate_s"],
                      r["simulate_peak_rss_bytes"] / 2**20, r["events"], r["predicted_s"] * 1e3,
                      r["lower_bound_s"] * 1e3))
    out.write("\nLog-log least-squares fits, time = a * GPUs^k (GPU sweep):\n\n")
    out.write("| family | what | k | R^2 | points (GPUs) |\n| --- | --- | --- | --- | --- |\n")
    for fam in sorted({rows[c]["family"] for c in order if rows[c]["sweep"] == "gpus"}):
        pts = [rows[c] for c in order if rows[c]["sweep"] == "gpus" and rows[c]["family"] == fam and not rows[c]["error"]]
        for what, key in (("planner", "plan_s"), ("simulator", "simulate_s"), ("planner peak RSS", "plan_peak_rss_bytes")):
            if len(pts) < 2:
                continue
            k, _, r2 = fit([p["gpus"] for p in pts], [p[key] for p in pts])
            out.write(f"| {fam} | {what} | {k:.2f} | {r2:.3f} | {', '.join(str(p['gpus']) for p in pts)} |\n")
        # The asymptotic rate: the last three points only (small cases are fixed-cost dominated).
        if len(pts) >= 4:
            tail = pts[-3:]
            for what, key in (("planner (largest 3)", "plan_s"), ("simulator (largest 3)", "simulate_s")):
                k, _, r2 = fit([p["gpus"] for p in tail], [p[key] for p in tail])
                out.write(f"| {fam} | {what} | {k:.2f} | {r2:.3f} | {', '.join(str(p['gpus']) for p in tail)} |\n")


if __name__ == "__main__":
    main()
