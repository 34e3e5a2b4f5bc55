# bins.py TRACE.json [BIN_MS]: the simulator's link counters ("network (all ports)", "nvlink (all ports)",
# "copy (all ports)", GB/s) of a trace written with `reshard simulate PLAN.json --trace TRACE.json
# --trace-detail links`, averaged over bins of BIN_MS (default 4) ms: one line per counter.
import json,sys
t=json.load(open(sys.argv[1])); ev=t['traceEvents'] if isinstance(t,dict) else t
B=float(sys.argv[2]) if len(sys.argv)>2 else 4.0  # ms
for name in ['network (all ports)','nvlink (all ports)','copy (all ports)']:
    cs=sorted([(e['ts'],list(e['args'].values())[0]) for e in ev if e.get('ph')=='C' and e.get('name')==name])
    if not cs: continue
    end=cs[-1][0]; nb=int(end/1000/B)+1; acc=[0.0]*nb
    for (t0,v),(t1,_) in zip(cs,cs[1:]):
        # v rate, integrate over bins
        a=t0
        while a<t1:
            b=min(t1,(int(a/1000/B)+1)*B*1000); acc[int(a/1000/B)]+=v*(b-a); a=b
    print(name, ' '.join('%.0f'%(x/(B*1000)) for x in acc))
