#!/bin/bash
# Session 2026-12-03 call 1: quantize candidates probe; exhaustive vs pruned deepseek-v3 sweep on 16 cores.
export EXTRA_LIB=.carry/lib BIN=.carry/lib/a; . bench/gpu/run/gpu_env.sh
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm --format=csv > $OUT/r/gpu.txt
(command -v cuobjdump && cuobjdump --dump-sass $BIN/quantize_variants_probe | grep -c "STL\|LDL") > $OUT/r/spills.txt 2>&1
timeout 200 $BIN/quantize_variants_probe > $OUT/r/variants.jsonl 2> $OUT/r/variants.err
echo "probe rc=$?"
for mode in pruned exhaustive; do
  flag=""; [ $mode = exhaustive ] && flag=--exhaustive
  /usr/bin/time -v timeout 300 $BIN/reshard sweep deepseek-v3-pp16ep16-to-tp32dp8 --threads 16 $flag --json --csv $OUT/r/sweep-$mode.csv > $OUT/r/sweep-$mode.json 2> $OUT/r/sweep-$mode.time
  echo "$mode rc=$?"; grep -E "Elapsed|User time|System time|Maximum resident" $OUT/r/sweep-$mode.time
done
cd $OUT && tar czf r.tgz r && rm -rf r
