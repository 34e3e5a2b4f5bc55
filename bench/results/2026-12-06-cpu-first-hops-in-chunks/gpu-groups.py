# gpu-groups.py TRACE.json GPUS [DOMAIN_GPUS]: per GPU of the comma-separated GPUS, its NCCL groups in a trace
# written with `reshard simulate PLAN.json --trace TRACE.json --trace-detail ops`: stream (tid), group, first
# start and last end (ms), and GB sent and received over the network (peer in another NVLink domain of
# DOMAIN_GPUS GPUs, default 64) and over NVLink.
import json,collections,sys
t=json.load(open(sys.argv[1])); ev=t['traceEvents'] if isinstance(t,dict) else t
D=int(sys.argv[3]) if len(sys.argv)>3 else 64
X=[e for e in ev if e.get('ph')=='X' and e['cat'] in ('send','recv')]
for g in map(int,sys.argv[2].split(',')):
    G=collections.defaultdict(list)
    for e in X:
        if e['pid']==g: G[(e['tid'],e['args'].get('group'))].append(e)
    print('GPU',g)
    for k in sorted(G, key=lambda k:min(e['ts'] for e in G[k])):
        L=G[k]; s=min(e['ts'] for e in L); f=max(e['ts']+e['dur'] for e in L)
        net=collections.Counter(); 
        for e in L:
            p=e['args']['peer']; cls='net' if p//D!=g//D else 'nvl'
            net[e['cat']+'-'+cls]+=e['args']['bytes']/1e9
        print('   tid',k[0],'group',k[1],'%6.2f-%6.2f'%(s/1000,f/1000),' '.join('%s %.2f'%(a,b) for a,b in sorted(net.items())))
