#!/usr/bin/env bash
# Installs what reshard needs, builds everything (the NCCL backend too when CUDA
# and NCCL are present) and runs every test, then builds the libraries and
# their unit tests under ASan + UBSan and runs those (scripts/sanitize.sh says
# which run there and why). CI runs exactly this (.ci/run).
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
# (Debug, separate build dir). RESHARD_SKIP_SANITIZE=1 skips it for quick local runs.
if [[ -z "${RESHARD_SKIP_SANITIZE:-}" ]]; then
  JOBS=$jobs scripts/sanitize.sh
fi
