#!/bin/bash
# Issue 16 item 4 re-checked (2026-12-06, thirty-sixth session): CPU only, on the device host's 16 cores. Usage,
# from the repository root with the stripped binary carried as .carry/bin.tar.xz:
#   bash bench/results/2026-12-06-devicecpu-auto-vs-sweep/session.sh LIST THREADS PARALLEL TIMEOUT_S [PLAN_LIST]
# LIST: lines "NAME SCENARIO"; each row's default `reshard sweep S --threads THREADS --json`, PARALLEL at a time,
# each stopped after TIMEOUT_S; with PLAN_LIST (same format), first each of its rows' `reshard plan S --json`
# (four at a time).
# Writes $OUT/l.tgz: NAME.sweep.json / .time / .err, NAME.plan.json (links and peak parts stripped) / .time,
# and the host's nproc, lscpu, free, uname. No GPU used.
set -u
LIST=$1 THREADS=$2 PAR=$3 LIMIT=$4 PLANS=${5:-}
mkdir -p .carry/lib && tar xJf .carry/bin.tar.xz -C .carry/lib
export EXTRA_LIB=$PWD/.carry/lib BIN=$PWD/.carry/lib; . bench/gpu/run/gpu_env.sh
export B=$PWD/.carry/lib/reshard R=$OUT/l THREADS LIMIT
mkdir -p $R
nproc > $R/nproc.txt; free -g > $R/free.txt; lscpu > $R/lscpu.txt; uname -a > $R/uname.txt
$B --version > $R/version.txt 2>&1
cp $LIST $R/list.txt
plan() {
  /usr/bin/time -f "%U %S %e %M" -o $R/$1.plan.time timeout 200 $B plan $2 --json 2> $R/$1.plan.err |
    python3 -c "import json,sys; d=json.load(sys.stdin); d.pop('links',None); d.pop('peak_parts',None); json.dump(d,sys.stdout)" \
    > $R/$1.plan.json
}
sweep() {
  /usr/bin/time -f "%U %S %e %M" -o $R/$1.sweep.time timeout $LIMIT $B sweep $2 --threads $THREADS --json \
    > $R/$1.sweep.json 2> $R/$1.sweep.err
}
export -f plan sweep
[ -n "$PLANS" ] && xargs -P 4 -L 1 bash -c 'plan "$0" "$1"' < $PLANS
xargs -P $PAR -L 1 bash -c 'sweep "$0" "$1"' < $LIST
tar czf $OUT/l.tgz -C $OUT l && rm -rf $R
