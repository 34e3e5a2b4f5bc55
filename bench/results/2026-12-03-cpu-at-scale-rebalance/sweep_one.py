# Times `reshard sweep SCENARIO --threads 2 --json` into OUT.json: sweep_one.py NAME SCENARIO OUT.json [RESHARD]
import json,subprocess,sys,time,resource
name,scen,out=sys.argv[1],sys.argv[2],sys.argv[3]
cmd=[sys.argv[4] if len(sys.argv) > 4 else "build/reshard","sweep",scen,"--threads","2","--json"]
t0=time.time(); b=resource.getrusage(resource.RUSAGE_CHILDREN)
p=subprocess.run(cmd,capture_output=True,text=True,cwd=".")
a=resource.getrusage(resource.RUSAGE_CHILDREN)
res=json.loads(p.stdout)
json.dump({"command":cmd,"cpu_s":(a.ru_utime-b.ru_utime)+(a.ru_stime-b.ru_stime),"wall_s":time.time()-t0,"max_rss_kb":a.ru_maxrss,"result":res},open(out,"w"),indent=1)
