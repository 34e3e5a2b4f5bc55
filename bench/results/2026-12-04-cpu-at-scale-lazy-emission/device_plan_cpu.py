# Plan CPU time of two reshard binaries, one plan at a time on one pinned core (device host).
import json, os, subprocess, time
OUT = os.environ.get("OUT", "/tmp/out")
B = ".carry/lib"
CORE = str(max(os.sched_getaffinity(0)))  # one core, the same for every run
env = dict(os.environ, LD_LIBRARY_PATH=B)
rows = [("deepseek-v3", "deepseek-v3-pp16ep16-to-tp32dp8"),
        ("llama3-70b-colocated-1024", "bench/results/2026-12-04-cpu-at-scale-riders/llama3-70b-h100-colocated-1024.yaml"),
        ("llama3-70b-colocated-8192", "bench/results/2026-12-04-cpu-at-scale-riders/llama3-70b-h100-colocated-8192.yaml"),
        ("llama3-70b", "bench/results/2026-12-02-cpu-at-scale/llama3-70b-h100-disagg.yaml")]
res = []
for rep in range(2):
    for name, scen in rows:
        for b in ("reshard_base", "reshard_new"):
            t0 = time.time()
            with open(os.path.join(OUT, "stdout.json"), "w") as so, open(os.path.join(OUT, "stderr.txt"), "w") as se:
                p = subprocess.Popen(["taskset", "-c", CORE, f"{B}/{b}", "plan", scen, "--json"], stdout=so, stderr=se, env=env)
                _, status, ru = os.wait4(p.pid, 0)  # this child's own usage
            wall = time.time() - t0
            rc = os.waitstatus_to_exitcode(status)
            r = {"row": name, "binary": b, "rep": rep, "rc": rc, "wall_s": wall,
                 "user_s": ru.ru_utime, "sys_s": ru.ru_stime, "maxrss_kb": ru.ru_maxrss}
            if rc == 0:
                d = json.load(open(os.path.join(OUT, "stdout.json")))
                r["time_s"] = d["time_s"]; r["ops"] = d["ops"]
            else:
                r["stderr"] = open(os.path.join(OUT, "stderr.txt")).read()[-500:]
            print(json.dumps(r), flush=True)
            res.append(r)
json.dump(res, open(os.path.join(OUT, "plan_cpu.json"), "w"), indent=1)
os.remove(os.path.join(OUT, "stdout.json")); os.remove(os.path.join(OUT, "stderr.txt"))
