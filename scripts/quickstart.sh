#!/usr/bin/env bash
# Installs what reshard needs, builds it, and runs the main job (plan + predict)
# on a built-in scenario: Llama-3-8B, Megatron TP2 -> vLLM TP1 x DP2, colocated
# on 2x H200. No GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -G Ninja -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build reshard
scenario=${1:-llama3-8b-tp2-to-tp1x2}
./build/reshard inspect "$scenario"
if ./build/reshard --help 2>/dev/null | grep -q '^ *plan'; then
  ./build/reshard plan "$scenario" -o build/plan.json
fi
if ./build/reshard --help 2>/dev/null | grep -q '^ *simulate'; then
  ./build/reshard simulate build/plan.json --trace build/trace.json
fi
