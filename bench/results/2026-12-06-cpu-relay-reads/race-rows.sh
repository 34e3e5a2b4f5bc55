#!/bin/bash
# bash bench/results/2026-12-06-cpu-relay-reads/race-rows.sh (repository root): races.py on the kept plans of seven
# rows with relays, planned by build/reshard; one line per row (plan and trace in /tmp).
export GLIBC_TUNABLES=glibc.malloc.hugetlb=0
for S in bench/results/2026-12-02-cpu-at-scale/deepseek-v3-gb200-nvl72.yaml qwen3-235b-tp4pp8ep16-to-tp8dp16 bench/results/2026-12-05-cpu-direct-threshold/deepseek-v3-gb200-nvl72-tp2pp8ep16-to-tp8dp16ep128.yaml bench/results/2026-12-05-cpu-direct-threshold/deepseek-v3-gb200-nvl72-tp1pp16ep8-to-tp8dp16ep128.yaml bench/results/2026-12-05-cpu-direct-threshold/deepseek-v3-dgx-h200-tp2pp8ep16-to-tp8dp16ep128.yaml bench/results/2026-12-05-cpu-direct-threshold/qwen3-235b-a22b-dgx-h200-tp2pp8ep4-to-tp4dp8ep32.yaml bench/results/2026-12-05-cpu-direct-threshold/llama3-405b-gb200-nvl72-tp4pp16-to-tp16dp8.yaml; do
  build/reshard plan $S -o /tmp/rr.json > /dev/null 2>&1
  build/reshard simulate /tmp/rr.json --trace /tmp/rr.t.json --trace-detail ops > /dev/null 2>&1
  echo "$S $(python3 bench/results/2026-12-06-cpu-relay-reads/races.py /tmp/rr.json /tmp/rr.t.json | tail -1)"
done
echo done
