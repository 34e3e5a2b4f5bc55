#!/usr/bin/env python3
"""Pools the three `reshard calibrate` invocations of run2 into one set of host measurements.

run2-host.json measured everything (host costs, copy kernel, cold terms); run2-host_rep2.json and
run2-host_rep3.json measured the host costs again in fresh processes (before and after the PyTorch
script). Per-call costs differed by up to 2x between processes (see README.md), so the
profile takes the median over all three processes' batches: the calls and the NCCL group
samples are concatenated (one series per communicator kind), the copy kernel and cold samples
come from run2-host.json alone. Writes a profile with "measurements.host" only, for
`reshard calibrate --refit merged.json -o fitted.json`.

  python3 merge_profile.py run2 merged.json      # reads run2-host.json, run2-host_rep2.json, run2-host_rep3.json
"""
import json
import sys

run, out = sys.argv[1], sys.argv[2]
main = json.load(open(f"{run}-host.json"))
host = main["measurements"]["host"]
reps = [json.load(open(f"{run}-{f}"))["measurements"]["host"] for f in ("host_rep2.json", "host_rep3.json")]
for rep in reps:
    host["calls"] += rep["calls"]
    for series in host["nccl_groups"]:
        twin = [g for g in rep["nccl_groups"] if g["executor_default"] == series["executor_default"]]
        series["samples"] += twin[0]["samples"]
date = host["environment"]["date_utc"][:10]
host["source"] = (f"reshard calibrate on one NVIDIA H200 (132 SMs; nvidia-h200 lease, driver 580.159.04), {date}: "
                  "NCCL 2.28.9, CUDA runtime 13.0; host costs pooled over 3 processes "
                  "(bench/results/2026-12-01-h200-host-costs/run2-*.json)")
host["environment"]["pooled_processes"] = "3: run2-host.json, run2-host_rep2.json, run2-host_rep3.json"
profile = {"name": "1x NVIDIA H200", "measured": True, "source": host["source"], "measurements": {"host": host}}
json.dump(profile, open(out, "w"), separators=(",", ":"))
