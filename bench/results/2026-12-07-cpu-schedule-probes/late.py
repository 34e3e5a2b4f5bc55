# per-GPU lateness (last comm op end - earliest GPU's) from an ops trace
import json,sys,collections
d=json.load(open(sys.argv[1]));ev=d['traceEvents']
end=collections.defaultdict(float)
for e in ev:
    if e.get('ph')=='X' and e.get('cat') in ('send','recv'):
        end[e['pid']]=max(end[e['pid']],(e['ts']+e['dur'])/1e3)
m=min(end.values())
with open(sys.argv[2],'w') as f:
    for g in sorted(end): f.write(f"{g} {end[g]-m:.4f}\n")
print('spread', max(end.values())-m)
