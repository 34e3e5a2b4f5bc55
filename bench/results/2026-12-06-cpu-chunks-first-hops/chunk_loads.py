# Usage: python3 chunk_loads.py PLAN.json [GPUS_PER_NVLINK_DOMAIN]
# Per NCCL group of a plan (a chunk, a phase): the busiest GPU's network bytes (send or receive side, each op's
# first region row count times row bytes) and that at 96 GB/s (GB200's NIC), its mean, and the busiest NVLink
# side; then the sum of the groups' busiest network times: with phase chunks, the chunks run one after another
# per lane, so that sum is what the chunks' network cannot beat.
import json,sys,collections
d=json.load(open(sys.argv[1]))
dom=int(sys.argv[2]) if len(sys.argv) > 2 else 64
gpus=1+max(b['gpu'] for b in d['buffers'])
load=collections.defaultdict(lambda: collections.Counter())
nvl=collections.defaultdict(lambda: collections.Counter())
for o in d['ops']:
  if o['kind'] not in ('send','recv'): continue
  a,b=o['gpu'],o['peer']
  r=o['region']; n=r['row_bytes']*r.get('rows',1)
  key=(o['group'] if 'group' in o else -1)
  if a//dom!=b//dom: load[key][(a,o['kind'])]+=n
  else: nvl[key][(a,o['kind'])]+=n
tot=0
for g in sorted(set(load)|set(nvl)):
  mx=max(load[g].values()) if load[g] else 0
  mv=max(nvl[g].values()) if nvl[g] else 0
  s=sum(load[g].values())/2
  print(f"group {g}: net max {mx/1e9:.2f} GB ({mx/96e9*1e3:.1f} ms) mean {s/gpus/1e9:.2f}; nvl max {mv/1e9:.2f} GB ({mv/900e9*1e3:.1f} ms)")
  tot+=mx/96e9*1e3
print('sum of net max ms', round(tot,1))
