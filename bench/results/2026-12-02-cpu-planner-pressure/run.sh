#!/bin/bash
# before/after planner CPU time, alternating, --no-simulate (planning only)
cd "$(dirname "$0")"  # BEFORE=, AFTER=: the two reshard binaries
for rep in 1; do
for sc in llama3-405b-dgx-h200-tp8pp8-to-tp8dp16.yaml llama3-405b-dgx-h100-tp4pp16-to-tp16dp8.yaml qwen3-235b-a22b-dgx-h200-tp2pp8ep4-to-tp4dp8ep32.yaml deepseek-v3-dgx-h200-tp1pp16ep8-to-tp8dp16ep128.yaml deepseek-v3-pp16ep16-to-tp32dp8 qwen3-235b-tp4pp8ep16-to-tp8dp16; do
  for which in before after; do
    bin=$BEFORE; [ $which = after ] && bin=$AFTER
    /usr/bin/time -f "%U %S %M" -o t.txt $bin plan $sc --no-simulate --json > out-$which-$sc.json 2>/dev/null
    echo "$rep $sc $which $(cat t.txt) $(python3 -c "import json;j=json.load(open('out-$which-$sc.json'));print(j.get('time_s'), j.get('memory_policy'), j.get('segment_bytes'), j.get('ops'))")"
  done
done
done
