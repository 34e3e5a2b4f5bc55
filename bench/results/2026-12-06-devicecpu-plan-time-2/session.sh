#!/bin/bash
# Session 2026-12-06 (thirty-fourth): CPU only, on the device host. `reshard plan S --json` (plan + simulate on
# one core), one run at a time, base (f12afda, the thirty-third session's head) and new binary alternating, three
# times each, with the CLI's default huge-page heap: deepseek-v3 on 512 GPUs and llama3-70b colocated on 8192 GPUs
# (issue 16's two plan-time targets). No GPU used. Everything under $OUT/r, tarred into one file.
set -u
mkdir -p .carry/lib && tar xJf .carry/bin.tar.xz -C .carry/lib
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib; . bench/gpu/run/gpu_env.sh
R=$OUT/r; mkdir -p $R
nproc > $R/nproc.txt; lscpu > $R/lscpu.txt; uname -a > $R/uname.txt
for b in base new; do .carry/lib/reshard.$b --version > $R/version.$b.txt 2>&1; done
cat > $R/list.txt <<LIST
deepseek-v3 deepseek-v3-pp16ep16-to-tp32dp8
llama3-70b-colocated-8192 bench/results/2026-12-04-cpu-at-scale-riders/llama3-70b-h100-colocated-8192.yaml
LIST
while read -r name sc; do
  for i in 1 2 3; do
    for b in base new; do
      /usr/bin/time -f "$b %U %S %e %M %R" -a -o $R/$name.time .carry/lib/reshard.$b plan $sc --json > $R/$name.$b.json
    done
  done
done < $R/list.txt
for f in $R/*.json; do python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); d.pop('links',None); d.pop('peak_parts',None); json.dump(d,open(sys.argv[1],'w'),indent=1)" $f; done
tar cJf $OUT/r.tar.xz -C $OUT r && rm -rf $R
