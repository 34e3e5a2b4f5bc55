#!/usr/bin/env bash
# Builds reshard with AddressSanitizer + UndefinedBehaviorSanitizer (Debug
# asserts at -Og with line tables: compiles faster than -O0 -g and runs the
# tests ~2x faster; no NCCL, no benchmarks) in its own build dir and runs the test suite in it.
# scripts/test.sh (and so CI) runs it after the Release suite.
#   scripts/sanitize.sh                 # build-sanitize/, all non-GPU tests
#   BUILD_DIR=build-asan JOBS=1 scripts/sanitize.sh -R model_   # extra args go to ctest
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-sanitize}
jobs=${JOBS:-$(nproc)}
start_s=$(date +%s)

cmake -G Ninja -B "$build_dir" -S . \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DRESHARD_SANITIZE=ON \
  -DRESHARD_WITH_NCCL=OFF -DRESHARD_BUILD_BENCH=OFF >/dev/null
ninja -C "$build_dir" -j"$jobs"
built_s=$(date +%s)

# Any ASan/UBSan report fails the test that triggered it; leaks are reported too.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" --timeout 600 -LE gpu "$@" || status=$?
end_s=$(date +%s)
echo "sanitize.sh: build $((built_s - start_s)) s, tests $((end_s - built_s)) s, exit $status"
exit "$status"
