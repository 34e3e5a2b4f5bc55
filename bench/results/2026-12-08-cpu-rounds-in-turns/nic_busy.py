# nic_busy.py TRACE.json END_MS: per NIC port (ops-detail trace counters), the share of [0, END_MS) it carries
# bytes, runs at >= 97 % of 48 GB/s, and its mean rate over 48 GB/s; prints the lowest and highest and the means.
import json,sys,collections
t=json.load(open(sys.argv[1])); T1=float(sys.argv[2])*1000
ev=t['traceEvents'] if isinstance(t,dict) else t
C=collections.defaultdict(list)
for e in ev:
    if e.get('ph')=='C' and e['pid']==32: C[e['name']].append((e['ts'],e['args']['GB/s']))
names=sorted(C)
print(len(names), names[:6])
res=[]
for n in names:
    if 'nic' not in n.lower() and 'net' not in n.lower(): continue
    s=sorted(C[n]); busy=0; full=0; byt=0
    for i,(ts,v) in enumerate(s):
        te=s[i+1][0] if i+1<len(s) else T1
        te=min(te,T1)
        if te<=ts: continue
        byt+=v*(te-ts)
        if v>0: busy+=te-ts
        if v>=0.97*48: full+=te-ts
    res.append((n,busy/T1,full/T1,byt/T1/48))
for r in sorted(res,key=lambda r:r[3])[:5]+sorted(res,key=lambda r:r[3])[-3:]: print(r)
import statistics
print('mean util', statistics.mean(r[3] for r in res), 'mean busy', statistics.mean(r[1] for r in res), 'mean full', statistics.mean(r[2] for r in res))
