# races.py PLAN.json TRACE.json: reads of destination buffers by packs and sends (relays: no other pack or send
# reads a destination buffer) that start before a receive that wrote bytes they read has ended, in the simulated
# times of an ops trace (`reshard simulate PLAN.json --trace TRACE.json --trace-detail ops`). Prints the first five
# and a count. Byte-exact: a strided region is taken row by row.
import json,sys,collections,bisect
p=json.load(open(sys.argv[1])); t=json.load(open(sys.argv[2])); ev=t['traceEvents'] if isinstance(t,dict) else t
start={}; end={}
for e in ev:
    if e.get('ph')=='X' and 'op' in e.get('args',{}):
        start[e['args']['op']]=e['ts']; end[e['args']['op']]=e['ts']+e['dur']
ops=p['ops']
def rows(r):
    o=r.get('offset_bytes',0); rb=r['row_bytes']; n=r.get('rows',1); st=r.get('row_stride_bytes',0); pl=r.get('planes',1); ps=r.get('plane_stride_bytes',0)
    for q in range(pl):
        for i in range(n): yield (o+q*ps+i*st, o+q*ps+i*st+rb)
# recv writes per buffer (in place: region is the destination)
writes=collections.defaultdict(list)
for o in ops:
    if o['kind']=='recv':
        r=o['region']; a=r.get('offset_bytes',0); writes[r['buffer']].append((a, a+r['row_bytes']*r.get('rows',1), o['id']))
for v in writes.values(): v.sort()
# relay segments: label of pack 'pack sN' / sends. Which segments are relays? use ops in groups after... use plan 'summary'? fall back: ops reading destination buffers (role destination) via copies src or send region
bufs=p['buffers']
isdst=lambda b: bufs[b]['role'] in ('destination','destination_weights','generation_weights') or bufs[b]['name'].startswith('dst')
races=0; checked=0; worst=0
for o in ops:
    regs=[]
    if o['kind']=='copy' and o.get('label','').startswith('pack'):
        regs=[c['src'] for c in o.get('copies',[]) if isdst(c['src']['buffer'])]
    elif o['kind']=='send' and isdst(o['region']['buffer']):
        regs=[o['region']]
    if not regs or o['id'] not in start: continue
    checked+=1
    for r in regs:
        v=writes.get(r['buffer'],[])
        for (a,b) in rows(r):
            k=bisect.bisect_left(v,(a,))-1
            k=max(k,0)
            while k<len(v) and v[k][0]<b:
                wa,wb,wid=v[k]
                if wb>a and wid in end and end[wid]>start[o['id']]+1e-6:
                    races+=1; worst=max(worst,end[wid]-start[o['id']])
                    if races<=5: print('race: op',o['id'],o.get('label'),'gpu',o['gpu'],'starts %.3f ms'%(start[o['id']]/1e3),'before recv',wid,ops[wid].get('label'),'stream',ops[wid]['stream'],'ends %.3f'%(end[wid]/1e3))
                k+=1
print('relay reads checked',checked,'races',races,'worst %.3f ms'%(worst/1e3))
