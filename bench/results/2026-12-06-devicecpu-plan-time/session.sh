#!/bin/bash
# Session 2026-12-06 (thirty-third): CPU only, on the device host. `reshard plan S --json` (plan + simulate on
# one core), one run at a time, three times each, with the CLI's default huge-page heap and with
# GLIBC_TUNABLES=glibc.malloc.hugetlb=0: deepseek-v3 on 512 GPUs and llama3-70b colocated on 8192 GPUs (issue 16's
# two plan-time targets) and llama3-8b NVL72 (the slowest small plan). No GPU used.
set -u
mkdir -p .carry/lib && tar xJf .carry/bin.tar.xz -C .carry/lib
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib; . bench/gpu/run/gpu_env.sh
B=$PWD/.carry/lib/reshard
R=$OUT/r; mkdir -p $R
nproc > $R/nproc.txt; free -g > $R/free.txt; lscpu > $R/lscpu.txt; uname -a > $R/uname.txt
cat /sys/kernel/mm/transparent_hugepage/enabled > $R/thp.txt 2>&1
$B --version > $R/version.txt 2>&1
cat > $R/list.txt <<LIST
deepseek-v3 deepseek-v3-pp16ep16-to-tp32dp8
llama3-70b-colocated-8192 bench/results/2026-12-04-cpu-at-scale-riders/llama3-70b-h100-colocated-8192.yaml
llama3-8b-nvl72 bench/results/2026-12-02-cpu-at-scale/llama3-8b-gb200-nvl72-disagg.yaml
LIST
while read -r name sc; do
  for i in 1 2 3; do
    /usr/bin/time -f "default %U %S %e %M %R" -a -o $R/$name.time $B plan $sc --json > $R/$name.json
    GLIBC_TUNABLES=glibc.malloc.hugetlb=0 /usr/bin/time -f "hugetlb0 %U %S %e %M %R" -a -o $R/$name.time $B plan $sc --json > $R/$name.h0.json
  done
  cmp -s $R/$name.json $R/$name.h0.json && rm $R/$name.h0.json
done < $R/list.txt
for f in $R/*.json; do python3 -c "
import json,sys; d=json.load(open(sys.argv[1])); d.pop('links',None); d.pop('peak_parts',None); json.dump(d,open(sys.argv[1],'w'),indent=1)" $f; done
