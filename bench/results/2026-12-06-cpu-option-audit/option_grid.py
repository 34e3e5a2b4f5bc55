# bench/results/2026-12-06-cpu-option-audit/option_grid.py PART PARTS (repository root; BIN: a `reshard` with
# cli-options.diff applied): `plan --json` of ten cheap rows of rowlist.txt and three small fp8 scenarios of this
# folder under every combination of the forced options below; one line per run, FAIL where the exit code is
# neither 0 nor 3 (does not fit). Run PART 0..PARTS-1 side by side.
import itertools, subprocess, os, sys, json
HERE = os.path.dirname(os.path.abspath(__file__))
rows = [l.split() for l in open(os.path.join(HERE, 'rowlist.txt'))]
cheap = ['qwen3-30b-a3b','qwen3-30b-a3b-ep8pp2','kimi-k2-bf16','grid-qwen3-235b-a22b-gb200-nvl72-tp4pp2ep16-to-tp8dp4ep32',
         'grid-qwen3-235b-a22b-gb200-nvl72-tp4pp4ep8-to-tp8dp4','grid-llama3-405b-dgx-h200-tp8pp16-to-tp8pp2dp8',
         'grid-llama3-405b-gb200-nvl72-tp8pp16-to-tp8pp2dp8','grid-qwen3-235b-a22b-dgx-h200-tp4pp4ep8-to-tp8dp4',
         'grid-qwen3-235b-a22b-dgx-h200-tp4pp2ep16-to-tp8dp4ep32','llama3-70b-colocated-1024']
scen = [(r, s) for r, s in rows if r in cheap] + [(n, os.path.join(HERE, f)) for n, f in (('fp8-d', 'fp8-layer-seam.yaml'), ('fp8-b', 'fp8-moe.yaml'), ('fp8-a', 'fp8-small.yaml'))]
part = int(sys.argv[1]); parts = int(sys.argv[2])
combos = list(itertools.product(['0','1'], ['0','1'], ['1','2','-1'], ['0','2'], ['0','4'], ['', '0']))
k = 0
for name, s in scen:
    for rel, send, pr, waves, ch, qas in combos:
        k += 1
        if k % parts != part: continue
        if qas and not name.startswith('fp8'): continue
        env = dict(os.environ, X_RELAYS=rel, X_SEND=send, X_PR=pr, X_WAVES=waves, X_CH=ch, GLIBC_TUNABLES='glibc.malloc.hugetlb=0')
        if qas: env['X_QAS'] = qas
        p = subprocess.run([os.environ.get('BIN', 'build/reshard'), 'plan', s, '--json'], env=env, capture_output=True, text=True, timeout=600)
        if p.returncode not in (0, 3):
            err = p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else ['?']
            print(f"FAIL rc={p.returncode} {name} relays={rel} send={send} pr={pr} waves={waves} ch={ch} qas={qas}: {err[0][:200]}", flush=True)
        else:
            print(f"ok rc={p.returncode} {name} relays={rel} send={send} pr={pr} waves={waves} ch={ch} qas={qas}", flush=True)
