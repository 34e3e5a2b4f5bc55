# interleave.py IN OUT [mode]: relay waves by segment on alternating lanes, by editing a plan:
# network group k and relay group k on lane k % 2, relay group k right after network group k + 1 in op order.
import json, sys, collections
d = json.load(open(sys.argv[1]))
ops = d['ops']
COMM, COMM2 = 1, 4
# wave index of each (gpu, stream, group): rank among that GPU's groups on that stream
seen = collections.defaultdict(list)
for o in ops:
    g = o.get('group', -1)
    if g >= 0 and o['stream'] in (COMM, COMM2):
        l = seen[(o['gpu'], o['stream'])]
        if not l or l[-1] != g:
            if g not in l: l.append(g)
wave = {}
for (gpu, st), l in seen.items():
    for k, g in enumerate(l): wave[(gpu, st, g)] = k
prim = []
cur = -1.0
first_r = None
for i, o in enumerate(ops):
    g = o.get('group', -1)
    if g >= 0 and o['stream'] in (COMM, COMM2):
        k = wave[(o['gpu'], o['stream'], g)]
        if o['stream'] == COMM:
            p = 2 * k
        else:
            p = 2 * k + 3
            if first_r is None: first_r = i
        o['stream'] = COMM if k % 2 == 0 else COMM2
        cur = p if o['stream'] == COMM or True else cur
        prim.append(p)
    else:
        prim.append(1000 if first_r is not None else cur)
    if not (g >= 0): pass
# N1 waits for N0 on its GPU (the lanes start out of phase)
first_n0 = {}
for i, o in enumerate(ops):
    g = o.get('group', -1)
    if g >= 0 and prim[i] == 0 and o['gpu'] not in first_n0: first_n0[o['gpu']] = i
if len(sys.argv) > 3:
    for i, o in enumerate(ops):
        if o.get('group', -1) >= 0 and prim[i] == 2 and o['gpu'] in first_n0:
            o.setdefault('deps', []).append(first_n0[o['gpu']])
order = sorted(range(len(ops)), key=lambda i: (prim[i], i))
new = {old: n for n, old in enumerate(order)}
out = []
for n, old in enumerate(order):
    o = ops[old]
    o['id'] = n
    if 'deps' in o: o['deps'] = [new[x] for x in o['deps']]
    if 'match' in o and o['match'] >= 0: o['match'] = new[o['match']]
    out.append(o)
d['ops'] = out
json.dump(d, open(sys.argv[2], 'w'))
print('ops', len(out), 'groups by prim', collections.Counter(p for p in prim if p < 1000 and p >= 0).most_common(4))
