#!/usr/bin/env python3
"""The at-scale table: reshard's plan against the Megatron-style plan on every
at-scale scenario of the repository, both predicted by the same simulator.

    bench/at_scale_table.py --reshard build/reshard --out DIR [--keep] [--saved-from DIR2] [--python-issue]
                            [--only reshard|megatron] [--markdown FILE] [NAME ...]

Per scenario it runs, saving each command's JSON under DIR:

    reshard plan S --json                                     # NAME.reshard.json (plan CPU-s measured)
    reshard simulate M --baseline megatron --issue none --json  # M.megatron-issue-none.json
    reshard simulate M --baseline megatron --json               # M.megatron-python.json (--python-issue)

where M is S, or for an FP8 destination the same scenario in bf16 (the
Megatron-style plan moves weights as they are). `--issue none` ignores host
issue for the Megatron-style plan (the bar reshard must clear; reshard still
pays its executor's). CPU seconds are the child's user + system time
(getrusage), comparable on a shared machine where wall time is not. `--keep`
reuses a saved JSON instead of rerunning (the Megatron-style simulations of
deepseek-v3 take minutes), from DIR or else from `--saved-from DIR2` (an
earlier run's folder, repeatable, the first holding a row wins: rows that did
not change are read there, not copied);
with `--saved-only` nothing is run. Writes DIR/summary.json and the markdown table
(stdout; with --markdown FILE also into FILE, between its
"<!-- at_scale_table begin/end -->" markers if it has them) with the commit
it ran at.
"""
import argparse
import json
import lzma
import os
import resource
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
AT_SCALE = "bench/results/2026-12-02-cpu-at-scale"
FP8 = "bench/results/2026-12-02-cpu-fp8-at-scale"
RIDERS = "bench/results/2026-12-04-cpu-at-scale-riders"
# (name, scenario, scenario the Megatron-style plan runs in bf16 or None: the same, what it is)
SCENARIOS = [
    ("deepseek-v3", "deepseek-v3-pp16ep16-to-tp32dp8", None,
     "built-in: PP16xEP16 -> TP32xDP8, 256+256 H100 (MoE, disagg)"),
    ("qwen3-235b", "qwen3-235b-tp4pp8ep16-to-tp8dp16", None,
     "built-in: TP4xPP8xEP16 -> TP8xDP16, 128 H100 (MoE, colocated)"),
    ("kimi-k2-fp8", "kimi-k2-256-to-128", f"{AT_SCALE}/kimi-bf16.yaml",
     "built-in: PP16xEP16 -> vLLM TP8xDP16 EP128 fp8, 256 -> 128 H200 (MoE, disagg)"),
    ("kimi-k2-bf16", f"{AT_SCALE}/kimi-bf16.yaml", None,
     "held-out: the built-in kimi-k2 in bf16, 256 -> 128 H200"),
    ("deepseek-v3-nvl72", f"{AT_SCALE}/deepseek-v3-gb200-nvl72.yaml", None,
     "held-out: PP16xEP16 -> vLLM TP16xDP8 (no EP), GB200 NVL72 256+128 (MoE, disagg)"),
    ("llama3-70b", f"{AT_SCALE}/llama3-70b-h100-disagg.yaml", None,
     "held-out: TP8xPP4xDP4 -> vLLM TP8xDP8, H100 128+64 (dense, disagg)"),
    ("llama3-8b-nvl72", f"{AT_SCALE}/llama3-8b-gb200-nvl72-disagg.yaml", None,
     "held-out: TP4xPP2xDP9 -> vLLM TP4xDP18, GB200 NVL72 72+72 (dense, disagg)"),
    ("qwen3-30b-a3b", f"{AT_SCALE}/qwen3-30b-a3b-h200-colocated-ep.yaml", None,
     "held-out: EP8xPP2xDP64 -> vLLM TP2xDP64 EP128, 128 H200 (MoE, colocated)"),
    ("qwen3-30b-a3b-ep8pp2", "scenarios/qwen3-30b-a3b-ep8pp2-to-tp8dp2.yaml", None,
     "built-in: EP8xPP2xDP8 -> TP8xDP2, 16+16 H100 (MoE, disagg)"),
    ("deepseek-v3-fp8", f"{FP8}/deepseek-v3-pp16ep16-to-tp8dp32-fp8.yaml",
     f"{AT_SCALE}-table/deepseek-v3-pp16ep16-to-tp8dp32-bf16.yaml",
     "held-out: PP16xEP16 -> vLLM TP8xDP32 EP256 fp8, 256+256 H100 (MoE, disagg)"),
    ("llama3-405b", "bench/results/2026-12-02-cpu-planner-pressure/llama3-405b-dgx-h100-tp4pp16-to-tp16dp8.yaml",
     None, "held-out: TP4xPP16 -> TP16xDP8, 128 H100 (dense, colocated)"),
    ("llama3-70b-colocated", "bench/results/2026-12-03-cpu-at-scale-nic-relays/llama3-70b-h100-colocated-pp.yaml", None,
     "held-out: TP8xPP8xDP2 -> TP4xPP4xDP8, 128 H100 (dense, colocated)"),
    ("llama3-70b-colocated-1024", f"{RIDERS}/llama3-70b-h100-colocated-1024.yaml", None,
     "held-out: TP8xPP8xDP16 -> TP4xPP4xDP64, 1024 H100 (dense, colocated)"),
    ("llama3-70b-colocated-8192", f"{RIDERS}/llama3-70b-h100-colocated-8192.yaml", None,
     "held-out: TP8xPP8xDP128 -> TP4xPP4xDP512, 8192 H100 (dense, colocated; planner_bench's Large)"),
]


def saved_path(path):
    """path, or its xz-compressed copy (path + ".xz": large rows are kept so), or None."""
    return next((p for p in (path, path + ".xz") if os.path.exists(p)), None)


def run(cmd, out_path, keep, saved_only=False, saved_from=None):
    """Runs cmd (stdout: JSON) into out_path; returns (json, cpu_s or None)."""
    found = saved_path(out_path) if keep else None
    for folder in (saved_from or []) if keep and not found else []:
        found = saved_path(os.path.join(folder, os.path.basename(out_path)))
        if found:
            break
    if found:
        with (lzma.open(found, "rt") if found.endswith(".xz") else open(found)) as f:
            saved = json.load(f)
        return saved["result"], saved.get("cpu_s")
    if saved_only:
        return None, None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:  # 3: the plan does not fit in memory (the message says where)
        print(f"{' '.join(cmd)}: exit {p.returncode}\n{p.stderr}", file=sys.stderr)
        result = {"exit": p.returncode, "error": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""}
        with open(out_path, "w") as f:
            json.dump({"command": cmd, "cpu_s": cpu_s, "result": result}, f, indent=1)
            f.write("\n")
        return result, cpu_s
    result = json.loads(p.stdout)
    with open(out_path, "w") as f:
        json.dump({"command": cmd, "cpu_s": cpu_s, "result": result}, f, indent=1)
        f.write("\n")
    return result, cpu_s


def commit():
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reshard", default="build/reshard")
    ap.add_argument("--out", required=True)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--python-issue", action="store_true")
    ap.add_argument("--saved-only", action="store_true", help="with --keep: rows not saved stay empty")
    ap.add_argument("--saved-from", action="append",
                    help="with --keep: an earlier run's folder to read rows not saved in --out from (repeat: "
                         "the first that has the row)")
    ap.add_argument("--only", choices=["reshard", "megatron"])
    ap.add_argument("--markdown")
    ap.add_argument("names", nargs="*")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    chosen = [next(x for x in SCENARIOS if x[0] == n) for n in a.names] if a.names else SCENARIOS
    for name, scen, meg_scen, what in chosen:
        row = {"name": name, "scenario": scen, "what": what}
        if a.only != "megatron":
            print(f"{name}: reshard plan", file=sys.stderr, flush=True)
            r, cpu = run([a.reshard, "plan", scen, "--json"], os.path.join(a.out, f"{name}.reshard.json"), a.keep,
                      a.saved_only, a.saved_from)
            row["reshard"] = r and {k: r.get(k) for k in (
                "time_s", "lower_bound_s", "routing_bound_s", "plan_efficiency", "segment_bytes", "rounds",
                "segments_per_round", "round_per_phase", "relayed_bytes", "memory_policy", "peak_bytes")}
            if row["reshard"]:
                row["reshard"]["max_peak_bytes"] = max(row["reshard"].pop("peak_bytes") or [0])
            row["reshard_plan_cpu_s"] = cpu
        if a.only != "reshard":
            m = meg_scen or scen
            for issue, flags in (("issue-none", ["--issue", "none"]), ("python", [])):
                if issue == "python" and not a.python_issue:
                    continue
                print(f"{name}: megatron ({issue})", file=sys.stderr, flush=True)
                base = os.path.basename(m).removesuffix(".yaml")  # rows sharing a bf16 scenario share its file
                r, cpu = run([a.reshard, "simulate", m, "--baseline", "megatron", *flags, "--json"],
                             os.path.join(a.out, f"{base}.megatron-{issue}.json"), a.keep, a.saved_only,
                             a.saved_from)
                row[f"megatron_{issue}"] = r and {"time_s": r.get("time_s"), "lower_bound_s": r.get("lower_bound_s"),
                                                  "does_not_fit": r.get("exit") == 3}
                row[f"megatron_{issue}_cpu_s"] = cpu
        rows.append(row)
    at = commit()
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump({"commit": at, "rows": rows}, f, indent=1)
        f.write("\n")

    def ms(x):
        return f"{x * 1e3:.1f}" if x is not None else "-"

    def megatron(row, issue):
        m = row.get(f"megatron_{issue}") or {}
        return "does not fit" if m.get("does_not_fit") else ms(m.get("time_s"))

    lines = [f"Generated by `bench/at_scale_table.py` at commit {at}.", "",
             "| scenario | reshard | Megatron-style (issue none / Python issue) | reshard / Megatron (issue none) "
             "| lower bound | plan_efficiency | segment size | round size | plan CPU-s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        r = row.get("reshard") or {}
        mn = (row.get("megatron_issue-none") or {}).get("time_s")
        mp = (row.get("megatron_python") or {}).get("time_s")
        t = r.get("time_s")
        ratio = f"{t / mn:.3f}" if t and mn else "-"
        size = f"{r['segment_bytes'] / 2**20:.2f} MiB" if r.get("segment_bytes") else "-"
        rounds = ("a round per phase" if r.get("round_per_phase") else f"{r.get('segments_per_round')} per round") \
            if r else "-"
        rounds += f" ({r.get('rounds')} rounds)" if r else ""
        eff = f"{r['plan_efficiency']:.2f}" if r.get("plan_efficiency") is not None else "-"
        cpu = f"{row['reshard_plan_cpu_s']:.1f}" if row.get("reshard_plan_cpu_s") is not None else "-"
        lines.append(f"| {row['name']}: {row['what']} | {ms(t)} ms | {megatron(row, 'issue-none')} / "
                     f"{megatron(row, 'python')} ms | {ratio} "
                     f"| {ms(r.get('lower_bound_s'))} ms | {eff} | {size} | {rounds} | {cpu} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:  # between the markers of an existing page, else the whole file
        page = open(a.markdown).read() if os.path.exists(a.markdown) else ""
        begin, end = "<!-- at_scale_table begin -->\n", "<!-- at_scale_table end -->"
        if begin in page and end in page:
            text = page[:page.index(begin) + len(begin)] + text + page[page.index(end):]
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
