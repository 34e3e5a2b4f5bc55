#!/bin/bash
# K sweep of phase chunks (forced), late and early relay phase, at the kept plan's size and a round per phase.
P=${ROUNDS_PROBE:-build/bench/rounds_probe}
for spec in "bench/results/2026-12-05-cpu-direct-threshold/deepseek-v3-gb200-nvl72-tp2pp8ep16-to-tp8dp16ep128.yaml 64MiB" "bench/results/2026-12-02-cpu-at-scale/deepseek-v3-gb200-nvl72.yaml 64MiB" "deepseek-v3-pp16ep16-to-tp32dp8 64MiB"; do
  set -- $spec
  for k in 1 2 3 4 6 8 12 16; do
    for e in "" --early-relays; do
      [ $k -lt 3 ] && [ -n "$e" ] && continue
      echo "$1 K=$k ${e:-late} $($P $1 --sizes $2 --per-round all --phase-chunks $k $e 2>/dev/null | tail -1)"
    done
  done
done
