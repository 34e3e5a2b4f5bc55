#!/usr/bin/env bash
# Installs what reshard needs, builds everything (the NCCL backend too when CUDA
# and NCCL are present) and runs every test. CI runs exactly this (.ci/run),
# on 2 cores within 20 minutes. `--sanitize` (or RESHARD_SANITIZE=1) then also
# builds the libraries and their unit tests under ASan + UBSan and runs those
# (scripts/sanitize.sh says which and why): a second full build and ~2x the
# tests' CPU, so not in CI; run it before submitting library changes.
# Build time (README): the libraries compile in unity batches
# (RESHARD_UNITY_BUILD), the tests (one program per folder) in the same
# batches at -O1 over one precompiled header; the notebooks start first (CTest
# COST), as the longest tests.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --notebooks   # Jupyter too: the notebooks/ are executed as tests
jobs=$(nproc)
cmake -G Ninja -B build -S . -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j"$jobs"
ctest --test-dir build --output-on-failure -j"$jobs" --timeout 600 -LE gpu
# The libraries' unit tests again under AddressSanitizer + UndefinedBehaviorSanitizer
# (Debug, separate build dir), when asked for.
if [[ "${1:-}" == "--sanitize" || -n "${RESHARD_SANITIZE:-}" ]]; then
  JOBS=$jobs scripts/sanitize.sh
fi
