# Plan edit: every other chunk group of each comm lane moved to a new stream (4 lanes: chunk k waits for k - 4).
import json, sys, collections
src, dst = sys.argv[1], sys.argv[2]
d = json.load(open(src))
ops = d['ops']
names = d['stream_names']
comm_streams = sorted({o['stream'] for o in ops if o['kind'] in ('send', 'recv')})
print('comm streams', comm_streams, [names[s] for s in comm_streams])
gstream = {}
for o in ops:
    if o['kind'] in ('send', 'recv'):
        gstream.setdefault(o['group'], o['stream'])
order = sorted(gstream)
blocks = collections.defaultdict(int)  # stream -> block count seen
block_of = {}
prev = None
for g in order:
    s = gstream[g]
    if s != prev:
        blocks[s] += 1
        prev = s
    block_of[g] = blocks[s] - 1
print('blocks per stream', dict(blocks))
new_stream = {}
for s in comm_streams:
    names.append(names[s] + 'b')
    new_stream[s] = len(names) - 1
moved = 0
for o in ops:
    if o['kind'] in ('send', 'recv') and block_of[o['group']] % 2 == 1:
        o['stream'] = new_stream[o['stream']]
        moved += 1
print('moved', moved)
json.dump(d, open(dst, 'w'))
