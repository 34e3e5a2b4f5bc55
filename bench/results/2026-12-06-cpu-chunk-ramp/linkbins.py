# usage: linkbins.py TRACE SUFFIX BIN_MS : aggregate rate of links ending with SUFFIX per bin (GB/s), and per-link busy
import json,collections,sys
t=json.load(open(sys.argv[1]))['traceEvents']; suf=sys.argv[2]; B=float(sys.argv[3])*1000
cs=collections.defaultdict(list)
for e in t:
    if e.get('ph')=='C' and e['name'].endswith(suf): cs[e['name']].append((e['ts'],e['args']['GB/s']))
end=max(ts for v in cs.values() for ts,_ in v)
nb=int(end//B)+1; agg=[0.0]*nb
for n,v in cs.items():
    v.sort()
    for (t0,r),(t1,_) in zip(v,v[1:]+[(end,0)]):
        x=t0
        while x<t1:
            b=int(x//B); y=min(t1,(b+1)*B); agg[b]+=r*(y-x)/B; x=y
print(len(cs),'links; end',end/1000,'ms')
for i,a in enumerate(agg): print(f"{i*B/1000:7.2f} {a:9.0f} GB/s  per-link {a/len(cs):6.0f}")
