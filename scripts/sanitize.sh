#!/usr/bin/env bash
# Builds reshard's libraries and their unit tests with AddressSanitizer +
# UndefinedBehaviorSanitizer (Debug asserts at -Og with line tables: compiles
# faster than -O0 -g and runs the tests ~2x faster) in its own build dir and runs
# those tests in it. `scripts/test.sh --sanitize` runs it after the Release
# suite; CI does not (a second full build: over CI's 20 minutes on 2 cores).
#
# What runs under ASan + UBSan: every GoogleTest program that calls the libraries
# directly — model/ (scenario, HF-config and recipe parsing, layouts), plan/ (the
# IR, JSON reader, Verify), sim/, planner/, executor/ (host backend, faults,
# planner -> executor end to end, mpirun -np 2), calib/ — i.e. all the library
# code that the command and the Python module are thin layers over.
# What does not (Release only, scripts/test.sh): the `reshard` command itself and
# the tests that run it (tests/cli/, executor_cli_test.cc, the CLI cases of
# sweep_test.cc and baseline_e2e_test.cc), the Python module and its pytest suites, the
# notebooks, the benchmarks and the NCCL backend (RESHARD_BUILD_CLI=OFF,
# RESHARD_BUILD_BENCH=OFF, RESHARD_WITH_NCCL=OFF). Those drive the same library
# code through a process per case, each an ASan start-up of the whole command,
# so under ASan they cost more than the unit tests while reaching little library
# code that these do not; cli/ itself is argument handling and output. The parsers
# the bad-input corpora feed the command are fuzzed under ASan (docs/fuzzing.md).
# Tests labelled `slow` (whole-scenario runs whose code the smaller tests
# already reach) run in the Release pass only as well (and are not built here).
# Each GoogleTest program runs as 4 CTest tests here (RESHARD_TEST_PER_PROGRAM,
# RESHARD_TEST_SHARDS; SANITIZE_SHARDS=N to change): a few ASan start-ups per
# program (one per test folder), not one per test case, and the longest program
# (planner_test, minutes under ASan; its shards start first) spread over both
# cores; the failing case is in the output.
# SANITIZE_PER_CASE=1 makes each case a CTest test again, to select cases
# with -R.
#   scripts/sanitize.sh                 # build-sanitize/, the tests above
#   BUILD_DIR=build-asan JOBS=1 scripts/sanitize.sh -R model_   # extra args go to ctest
#   SANITIZE_PER_CASE=1 scripts/sanitize.sh -R 'Planner\.'        # one test case at a time
#   SANITIZE_CLI=1 scripts/sanitize.sh  # the command and the tests that run it under ASan too
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build-sanitize}
jobs=${JOBS:-$(nproc)}
start_s=$(date +%s)

cmake -G Ninja -B "$build_dir" -S . \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-Og -g1" -DRESHARD_SANITIZE=ON \
  -DRESHARD_WITH_NCCL=OFF -DRESHARD_BUILD_BENCH=OFF -DRESHARD_BUILD_PYTHON=OFF \
  -DRESHARD_BUILD_CLI="$([[ -n "${SANITIZE_CLI:-}" ]] && echo ON || echo OFF)" \
  -DRESHARD_TEST_PER_PROGRAM="$([[ -n "${SANITIZE_PER_CASE:-}" ]] && echo OFF || echo ON)" \
  -DRESHARD_TEST_SHARDS="${SANITIZE_SHARDS:-4}" >/dev/null
ninja -C "$build_dir" -j"$jobs"
built_s=$(date +%s)

# Any ASan/UBSan report fails the test that triggered it; leaks are reported too.
# Stack use after return is not looked for (GCC's default): its fake stacks
# doubled the planner tests' time (a planner case 9.9 -> 4.6 CPU-s without);
# ASAN_OPTIONS=...:detect_stack_use_after_return=1 asks for it.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
status=0
ctest --test-dir "$build_dir" --output-on-failure -j"$jobs" --timeout 600 -LE 'gpu|slow' "$@" || status=$?
end_s=$(date +%s)
echo "sanitize.sh: build $((built_s - start_s)) s, tests $((end_s - built_s)) s, exit $status"
exit "$status"
