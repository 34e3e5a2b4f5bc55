// Faults on the host backend: a GPU (rank) that fails mid-plan ends
// every GPU's worker at once (no one waits out its timeout), the error names
// the op and the GPU, nothing is reported verified, and the run's memory is
// released — also over 100 failing runs (the backend's own accounting and the
// process's resident memory stay flat). Plus RESHARD_FAULT's parser.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "tests/executor/test_plans.h"

namespace reshard {
namespace {

using ::testing::HasSubstr;

// The first op of `kind` on `gpu`.
int32_t FindOp(const Plan& p, OpKind kind, int32_t gpu) {
  for (const Op& op : p.ops)
    if (op.kind == kind && op.gpu == gpu) return op.id;
  ADD_FAILURE() << "no such op";
  return -1;
}

std::unique_ptr<Backend> HostWithFault(int32_t gpu, int32_t op, double timeout_s = 600) {
  HostBackendOptions o;
  o.fault = {gpu, op};
  o.timeout_s = timeout_s;  // long: the run must end through the failure, not the timeout
  return MakeHostBackend(o);
}

// AddressSanitizer keeps freed memory in quarantine (256 MiB by default), so
// resident memory says nothing about leaks there; LiveBytes still does.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

// Resident set size of this process (Linux /proc/self/statm), bytes.
int64_t ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  in >> pages >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

TEST(FaultSpec, ParsesGpuOrRankAndOp) {
  EXPECT_EQ(ParseFaultSpec("gpu=1,op=6"), (FaultInjection{1, 6}));
  EXPECT_EQ(ParseFaultSpec(" rank = 3 , op = 12 "), (FaultInjection{3, 12}));
  EXPECT_EQ(ParseFaultSpec("op=0,gpu=0"), (FaultInjection{0, 0}));
  EXPECT_FALSE(ParseFaultSpec("").active());
  EXPECT_FALSE(ParseFaultSpec("  ").active());
}

TEST(FaultSpec, RefusesAnythingElseNamingTheVariable) {
  for (const char* bad : {"gpu=1", "op=2", "gpu=x,op=1", "gpu=-1,op=2", "gpu=1,op=2,op=3", "gpu=1;op=2", "gpu=1,op=",
                          "gpu=99999999999,op=1", "1,2"}) {
    try {
      ParseFaultSpec(bad, "<environment>");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "RESHARD_FAULT") << bad;
      EXPECT_THAT(e.problem(), HasSubstr("expected gpu=G,op=N")) << bad;
    }
  }
  try {
    ParseFaultSpec("gpu=1,opp=2");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_THAT(e.problem(), HasSubstr("did you mean 'op'?"));
  }
}

TEST(FaultSpec, MustNameAnOpOfThatGpu) {
  const Plan p = testplans::ExchangePlan();
  const int32_t send1 = FindOp(p, OpKind::kSend, 1);
  EXPECT_EQ(FaultProblem({1, send1}, p), "");
  EXPECT_THAT(FaultProblem({0, send1}, p), HasSubstr("runs on GPU 1, not GPU 0"));
  EXPECT_THAT(FaultProblem({0, 999}, p), HasSubstr("op 999 does not exist"));
  auto backend = HostWithFault(0, send1);
  EXPECT_THROW(Execute(p, *backend), InputError);
  EXPECT_EQ(backend->LiveBytes(), 0);
}

// Four GPUs exchange all-to-all in one group; GPU 2 fails at its first send.
// Every other GPU is waiting for GPU 2's message when it fails.
TEST(HostFault, AFailingGpuEndsEveryGpuAndNamesOpAndGpu) {
  testplans::ExchangeOptions eo;
  eo.gpus = 4;
  const Plan p = testplans::ExchangePlan(eo);
  const int32_t op = FindOp(p, OpKind::kSend, 2);
  auto backend = HostWithFault(2, op);
  const auto start = std::chrono::steady_clock::now();
  try {
    Execute(p, *backend);
    FAIL() << "the run did not fail";
  } catch (const RunError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_EQ(e.gpu(), 2);
    EXPECT_THAT(e.what(), HasSubstr("op " + std::to_string(op) + " (send gpu 2->0) on GPU 2: injected fault"));
  }
  // Ended by the failure (the timeout is 600 s).
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  EXPECT_EQ(backend->LiveBytes(), 0);
}

TEST(HostFault, FailureOnALocalCopyToo) {
  const Plan p = testplans::ExchangePlan();
  const int32_t op = FindOp(p, OpKind::kCopy, 0);
  auto backend = HostWithFault(0, op);
  try {
    Execute(p, *backend);
    FAIL();
  } catch (const RunError& e) {
    EXPECT_EQ(e.op(), op);
    EXPECT_EQ(e.gpu(), 0);
    EXPECT_THAT(e.what(), HasSubstr("(copy gpu 0) on GPU 0: injected fault"));
  }
  EXPECT_EQ(backend->LiveBytes(), 0);
}

// 100 failing runs on one backend: no buffer survives a run (the backend's
// accounting), and resident memory stays flat. A leak of one run's buffers
// (about 6 MiB here) would add about 540 MiB over the last 90 runs.
TEST(HostFault, HundredFailingRunsKeepMemoryFlat) {
  testplans::ExchangeOptions eo;
  eo.rows = 1024;
  eo.cols = 1024;  // bf16: 1 MiB source blocks, 2 MiB destinations per GPU
  const Plan p = testplans::ExchangePlan(eo);
  const int32_t op = FindOp(p, OpKind::kRecv, 0);
  auto backend = HostWithFault(0, op);
  int64_t after_ten = 0;
  for (int run = 1; run <= 100; ++run) {
    EXPECT_THROW(Execute(p, *backend), RunError) << "run " << run;
    ASSERT_EQ(backend->LiveBytes(), 0) << "run " << run;
    if (run == 10) after_ten = ResidentBytes();
  }
  const int64_t growth = ResidentBytes() - after_ten;
  if (!kAsan) {
    EXPECT_LT(growth, int64_t{64} << 20) << "resident memory grew by " << growth << " bytes over 90 failing runs";
  }
}

}  // namespace
}  // namespace reshard
