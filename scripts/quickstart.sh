#!/usr/bin/env bash
# Installs what reshard needs, builds it, and runs the main job on a built-in
# scenario: Llama-3-8B, Megatron TP2 -> vLLM TP1 x DP2, colocated on 2x H200.
# It plans the refit (plan.json), predicts its time and peak memory with the
# simulator (trace.json opens in ui.perfetto.dev) and runs it on host threads,
# checking every destination byte. No GPU needed.
#   scripts/quickstart.sh [SCENARIO]   (a scenario file or built-in name)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake -G Ninja -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build reshard
scenario=${1:-llama3-8b-tp2-to-tp1x2}
./build/reshard inspect "$scenario"
echo
./build/reshard plan "$scenario" -o build/plan.json
echo
./build/reshard simulate build/plan.json --trace build/trace.json
echo
# Running the plan on host threads moves the real bytes (2 x 16 GB for this
# scenario); the tiny built-in checks the same end to end in a second: a byte
# check of the executor on CPU threads, not a GPU measurement.
./build/reshard run tiny-llama-tp2-to-tp1x2 --backend host
echo
echo "done: the plan is build/plan.json, its predicted timeline build/trace.json (ui.perfetto.dev);"
echo "on GPUs, \`build/reshard validate $scenario --backend nccl\` measures it against the prediction."
