import json,collections,sys,subprocess
plan,trace=sys.argv[1],sys.argv[2]
dsize=int(sys.argv[3]) if len(sys.argv)>3 else 64
p=json.load(open(plan)); ops=p['ops']
def nb(r): return r['row_bytes']*r.get('rows',1)*r.get('planes',1)
t=json.load(open(trace)); ev=t['traceEvents']
start={}; end={}
for e in ev:
    if e.get('ph')=='X' and 'op' in e.get('args',{}):
        start[e['args']['op']]=e['ts']; end[e['args']['op']]=e['ts']+e['dur']
G=collections.defaultdict(lambda: dict(s=1e18,e=0,n=0,net=0,nv=0,st=set(),lab=None,ns=1e18,ne=0))
dom=lambda g: g//dsize
for o in ops:
    if o['kind']!='send': continue
    g=G[o['group']]
    s0,e0=start.get(o['id'],1e18),end.get(o['id'],0)
    g['s']=min(g['s'],s0); g['e']=max(g['e'],e0); g['n']+=1
    b=nb(o['region'])
    if dom(o['gpu'])!=dom(o['peer']): g['net']+=b; g['ns']=min(g['ns'],s0); g['ne']=max(g['ne'],e0)
    else: g['nv']+=b
    g['st'].add(o['stream']); g['lab']=o['label']
for k in sorted(G, key=lambda k: G[k]['s']):
    g=G[k]
    print(f"group {k:4d} start {g['s']/1000:7.2f} end {g['e']/1000:7.2f} net [{g['ns']/1000:7.2f},{g['ne']/1000:7.2f}] sends {g['n']:6d} net {g['net']/2**30:7.1f} GiB nv {g['nv']/2**30:7.1f} GiB streams {sorted(g['st'])}")
