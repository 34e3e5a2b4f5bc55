#!/usr/bin/env bash
# Installs what reshard needs, builds everything (the NCCL backend too when CUDA
# and NCCL are present) and runs every test. CI runs exactly this (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
cmake -G Ninja -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 -LE gpu
