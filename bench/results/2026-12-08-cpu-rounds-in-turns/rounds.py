# rounds.py TRACE.json: a 32-GPU DGX plan's network rounds (a GPU's k-th NCCL group with network bytes) from
# `reshard simulate plan.json --trace TRACE.json --trace-detail ops`. Per round: the mean / max / min bytes a GPU
# sends and receives over the network (and the sum of round means over the sum of round maxima); then, every 5th
# round, the distinct peers a GPU sends its network segments of the round to (with the most segments to one peer).
import collections
import json
import sys

GPUS_PER_NODE = 8
t = json.load(open(sys.argv[1]))
ev = t['traceEvents'] if isinstance(t, dict) else t
groups = collections.defaultdict(list)  # (gpu, stream, group) -> its send / recv slices
for e in ev:
    if e.get('ph') == 'X' and e['cat'] in ('send', 'recv'):
        groups[(e['pid'], e['tid'], e['args']['group'])].append(e)
per = collections.defaultdict(list)  # gpu -> (start, send MB, recv MB, end, sends per peer)
for (gpu, _, _), es in groups.items():
    net = [e for e in es if e['args']['peer'] // GPUS_PER_NODE != gpu // GPUS_PER_NODE]
    if not net:
        continue
    sends = [e for e in net if e['cat'] == 'send']
    per[gpu].append((min(e['ts'] for e in es) / 1e3, sum(e['args']['bytes'] for e in sends) / 1e6,
                     sum(e['args']['bytes'] for e in net if e['cat'] == 'recv') / 1e6,
                     max(e['ts'] + e['dur'] for e in es) / 1e3, collections.Counter(e['args']['peer'] for e in sends)))
rounds = max(len(v) for v in per.values())
means, maxima = 0.0, 0.0
for r in range(rounds):
    rows = [sorted(v, key=lambda x: x[0])[r] for v in per.values() if len(v) > r]
    sends, recvs = [x[1] for x in rows], [x[2] for x in rows]
    means += (sum(sends) + sum(recvs)) / (2 * len(rows))
    maxima += max(max(sends), max(recvs))
    print('round %2d gpus %2d send mean %5.0f max %5.0f min %5.0f | recv mean %5.0f max %5.0f min %5.0f | '
          'start %.1f-%.1f end %.1f-%.1f' % (r, len(rows), sum(sends) / len(rows), max(sends), min(sends),
                                            sum(recvs) / len(rows), max(recvs), min(recvs), min(x[0] for x in rows),
                                            max(x[0] for x in rows), min(x[3] for x in rows), max(x[3] for x in rows)))
print('sum mean / sum max', means / maxima)
print('distinct peers (send) per round per GPU:')
for r in range(0, rounds, 5):
    rows = [sorted(v, key=lambda x: x[0])[r] for v in per.values() if len(v) > r]
    print(r, sorted(len(x[4]) for x in rows if x[4]), 'max per peer', max(max(x[4].values()) for x in rows if x[4]))
