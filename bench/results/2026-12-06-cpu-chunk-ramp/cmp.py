import json,sys
A={json.loads(l)['row']:json.loads(l) for l in open(sys.argv[1])}
B={json.loads(l)['row']:json.loads(l) for l in open(sys.argv[2])}
ta=tb=0
for r in A:
    if r not in B: continue
    a,b=A[r],B[r]; ta+=a['wall']; tb+=b['wall']
    d=(b['time_ms']/a['time_ms']-1)*100
    mark='' if abs(d)<0.01 else ('  FASTER' if d<0 else '  slower')
    print(f"{r[:58]:58s} {a['time_ms']:8.2f} -> {b['time_ms']:8.2f} ({d:+.2f}%) eff {a['eff']:.3f}->{b['eff']:.3f} wall {a['wall']:.1f}->{b['wall']:.1f}{mark}")
print('wall', round(ta,1), round(tb,1))
