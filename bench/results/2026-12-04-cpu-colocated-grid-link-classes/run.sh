#!/usr/bin/env bash
# Plans every scenario of this folder with the given reshard binary and keeps
# its --json answer as NAME.TAG.json and its user CPU seconds as NAME.TAG.cpu
# (TAG megatron: the Megatron-style plan, --baseline megatron).
#   bench/results/2026-12-04-cpu-colocated-grid-link-classes/run.sh BINARY TAG
set -euo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
bin=$1 tag=$2
for f in "$dir"/*.yaml; do
  n=$(basename "$f" .yaml)
  /usr/bin/time -f "%U" -o "$dir/$n.$tag.cpu" "$bin" plan "$f" --json $([[ $tag == megatron ]] && echo --baseline megatron) > "$dir/$n.$tag.json" || true
done
