"""Writes summary.json from this folder's *.time / *.json: per
scenario and run, CPU time (user + system), wall, max RSS, the load at start,
and the output's sha256; same_output: every run of the scenario wrote the
same bytes. Run in this folder after measure.sh."""
import glob, hashlib, json, os

def timing(path):
    f = open(path).read().split()
    return {"user_s": float(f[0]), "sys_s": float(f[1]), "cpu_s": round(float(f[0]) + float(f[1]), 2),
            "wall_s": float(f[2]), "max_rss_kb": int(f[3]), "load_at_start": [float(x) for x in f[4:7]]}

out = {}
for t in sorted(glob.glob("*.time")):
    name, tag = os.path.basename(t)[:-5].rsplit(".", 1)
    j = t[:-5] + ".json"
    run = timing(t)
    run["output_sha256"] = (hashlib.sha256(open(j, "rb").read()).hexdigest() if os.path.exists(j)
                            else open(j + ".sha256").read().split()[0])
    out.setdefault(name, {"runs": {}})["runs"][tag] = run
for name, v in out.items():
    v["same_output"] = len({r["output_sha256"] for r in v["runs"].values()}) == 1
    after = json.load(open(f"{name}.after.json"))
    v["time_ms"] = after["time_s"] * 1e3
json.dump(out, open("summary.json", "w"), indent=1, sort_keys=True)
for name, v in out.items():
    print(name, v["same_output"], {k: r["cpu_s"] for k, r in sorted(v["runs"].items())})
