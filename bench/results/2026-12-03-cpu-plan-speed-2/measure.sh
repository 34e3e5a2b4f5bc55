#!/bin/sh
# Usage: measure.sh RESHARD OUTDIR TAG [names...]: ../2026-12-02-cpu-plan-speed/
# measure.sh (`RESHARD plan S --json` per scenario under /usr/bin/time; the
# names are its scenarios) under `ulimit -v 14000000`, its NAME.json and
# NAME.time written as OUTDIR/NAME.TAG.json and OUTDIR/NAME.TAG.time (user s,
# system s, wall s, max RSS KB, load averages before). Run from the repository root.
set -e
reshard=$1; out=$2; tag=$3; shift 3
tmp=$(mktemp -d)
mkdir -p "$out"
ulimit -v 14000000
sh bench/results/2026-12-02-cpu-plan-speed/measure.sh "$reshard" "$tmp" "$@" | sed "s/ / $tag /"
for n in "$@"; do
  mv "$tmp/$n.json" "$out/$n.$tag.json"
  mv "$tmp/$n.time" "$out/$n.$tag.time"
done
rmdir "$tmp"
