// The NCCL backend on real GPUs (label `gpu`): the same hand-built plans as
// the host tests, verified on device; skipped where fewer GPUs are visible.
// One process drives every GPU here; the multi-process path is exercised by
// `reshard run` under mpirun (see the executor's report for the commands).
#include <cstdio>

#include <gtest/gtest.h>

#include "executor/executor.h"
#include "executor/nccl/backend.h"
#include "executor/pattern.h"
#include "model/scenario.h"
#include "planner/planner.h"
#include "tests/executor/test_plans.h"

namespace reshard {
namespace {

#define REQUIRE_GPUS(n)                                                                        \
  do {                                                                                         \
    if (CudaDeviceCount() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA devices, found " \
                                              << CudaDeviceCount();                          \
  } while (0)

// One backend for the whole binary (communicators are created once),
// destroyed by the environment before CUDA's own teardown at exit.
std::unique_ptr<Backend> backend_instance;
Backend& Nccl() {
  if (!backend_instance) backend_instance = MakeNcclBackend();
  return *backend_instance;
}
class ReleaseBackend : public ::testing::Environment {
 public:
  void TearDown() override { backend_instance.reset(); }
};

TEST(NcclExecutor, LocalStridedCopy) {
  REQUIRE_GPUS(2);
  const Plan p = testplans::LocalCopyPlan(2, 64, 96);
  const Measurement m = Execute(p, Nccl());
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 2 * 64 * 96);
}

TEST(NcclExecutor, PackSendUnpack) {
  REQUIRE_GPUS(2);
  testplans::PackOptions o;
  o.rows = 512;
  o.cols = 1024;
  const Plan p = testplans::PackSendUnpackPlan(o);
  const Measurement m = Execute(p, Nccl());
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  // The pool's high-water mark is the plan's own buffers: destination + one staging buffer.
  const int64_t want = 512 * (512 + 4) * 2 + 512 * 512 * 2;
  EXPECT_GE(m.memory[1].plan_peak_bytes, want);
  EXPECT_LE(m.memory[1].plan_peak_bytes, want + (4 << 20)) << "pool rounding beyond 4 MiB";
  EXPECT_GT(m.memory[1].context_bytes, 0);
  EXPECT_GE(m.peak_bytes[1], m.memory[1].plan_peak_bytes);
}

TEST(NcclExecutor, GroupedExchangeSmallAndLarge) {
  REQUIRE_GPUS(2);
  for (int64_t rows : {16, 16384}) {
    testplans::ExchangeOptions o;
    o.rows = rows;
    o.cols = 8192;  // 16384 rows: 128 MiB per GPU each way
    const Plan p = testplans::ExchangePlan(o);
    const Measurement m = Execute(p, Nccl());
    EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
    std::printf("%s", FormatMeasurement(m, p).c_str());
  }
}

TEST(NcclExecutor, FourGpuExchangeInOneGroup) {
  REQUIRE_GPUS(4);
  testplans::ExchangeOptions o;
  o.gpus = 4;
  o.rows = 1024;
  o.cols = 1024;
  const Plan p = testplans::ExchangePlan(o);
  EXPECT_TRUE(Execute(p, Nccl()).verified);
}

TEST(NcclExecutor, ElementWidths) {
  REQUIRE_GPUS(2);
  for (DType dt : {DType::kFP8E4M3, DType::kFP32}) {
    testplans::ExchangeOptions o;
    o.rows = 30;
    o.cols = 7;
    o.dtype = dt;
    EXPECT_TRUE(Execute(testplans::ExchangePlan(o), Nccl()).verified) << DTypeName(dt);
  }
}

TEST(NcclExecutor, OffloadReloadThroughPinnedHost) {
  REQUIRE_GPUS(2);
  const Plan p = testplans::OffloadReloadPlan(4096, 1024);
  const Measurement m = Execute(p, Nccl());
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.memory[0].host_peak_bytes, 2048 * 1024 * 4);
}

TEST(NcclExecutor, ThreeDimensionalExperts) {
  REQUIRE_GPUS(2);
  const Plan p = testplans::ExpertsPlan(8, 256, 512);
  EXPECT_TRUE(Execute(p, Nccl()).verified);
}

TEST(NcclExecutor, CopyBatchBeyondKernelParameters) {
  REQUIRE_GPUS(1);
  const Plan p = testplans::ManyPairsPlan(300, 1000);
  const Measurement m = Execute(p, Nccl());
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
}

TEST(NcclExecutor, CorruptionsAreCaught) {
  REQUIRE_GPUS(2);
  testplans::PackOptions shifted;
  shifted.rows = 64;
  shifted.cols = 128;
  shifted.pack_shift_bytes = 2;
  Measurement m = Execute(testplans::PackSendUnpackPlan(shifted), Nccl());
  EXPECT_FALSE(m.verified);
  EXPECT_EQ(m.mismatch_count, 64 * 64);
  ASSERT_FALSE(m.mismatches.empty());
  EXPECT_EQ(m.mismatches[0].tensor, "layers.0.self_attn.q_proj.weight");

  testplans::ExchangeOptions dropped;
  dropped.rows = 64;
  dropped.cols = 32;
  dropped.drop = {1, 0};
  m = Execute(testplans::ExchangePlan(dropped), Nccl());
  EXPECT_FALSE(m.verified);
  EXPECT_EQ(m.mismatch_count, 32 * 32);
  ASSERT_FALSE(m.mismatches.empty());
  EXPECT_EQ(m.mismatches[0].gpu, 0);
  EXPECT_GE(m.mismatches[0].index, 32 * 32);
}

// A destination allocated during the run into memory the pool took back
// from a buffer with the same bytes, its copy dropped (test hook): a timed
// run cannot see the missing write (stale right bytes), the check run's
// poison memset can.
TEST(NcclExecutor, CheckRunPoisonsReusedMemory) {
  REQUIRE_GPUS(1);
  int32_t d_copy = -1;
  const Plan p = testplans::ReusedMemoryPlan(1024, 1024, &d_copy);
  NcclBackendOptions o;
  o.drop_copy_op = d_copy;
  const std::unique_ptr<Backend> nccl = MakeNcclBackend(o);
  ExecOptions timed;
  const Measurement stale = Execute(p, *nccl, timed);
  EXPECT_TRUE(stale.verified) << "the pool did not hand the staging buffer's memory to the destination, so this "
                                 "plan no longer exercises reuse: "
                              << FormatMeasurement(stale, p);
  ExecOptions check;
  check.check_run = true;
  const Measurement m = Execute(p, *nccl, check);
  EXPECT_FALSE(m.verified);
  // Every element mismatches but those whose expected bits are the poison's
  // (0xA5A5: about 1 in 65,536).
  int64_t poison_like = 0;
  for (int64_t i = 0; i < 1024 * 1024; ++i) poison_like += PatternValue(0, i, 2) == 0xA5A5;
  EXPECT_EQ(m.mismatch_count, 1024 * 1024 - poison_like);
  // Without the hook the check run verifies.
  const Measurement ok = Execute(p, *MakeNcclBackend(), check);
  EXPECT_TRUE(ok.verified) << FormatMeasurement(ok, p);
}

// FP8 refits of tiny presets on one GPU, one case per quantize kernel the
// backend picks (blocks of 32 x 32 and 128 x 128, MXFP8's 1 x 32 with E8M0
// scales, one scale per matrix and per expert), quantized at the source and
// at the destination: every fp8 byte and scale verified on the device.
TEST(NcclExecutor, Fp8EveryQuantizeKernel) {
  REQUIRE_GPUS(1);
  const char* const models[] = {"tiny-llama", "tiny-moe"};
  const char* const schemes[] = {"{block: [32, 32]}", "{block: [128, 128], scale: ue8m0}", "{scheme: mxfp8}",
                                 "{scheme: tensor}"};
  for (const char* model : models)
    for (const char* scheme : schemes)
      for (bool at_source : {false, true}) {
        const std::string yaml = std::string("name: fp8-gpu\nmodel: ") + model +
                                 "\ncluster: {preset: h200-x2, nodes: 1, gpus_per_node: 1}\nsource: {tp: 1}\n"
                                 "destination: {tp: 1, dtype: fp8_e4m3, quantization: " +
                                 scheme + "}\n";
        SCOPED_TRACE(yaml + (at_source ? "at the source" : "at the destination"));
        PlannerOptions po;
        po.quantize_at_source = at_source;
        const PlanResult r = MakePlan(ParseScenario(yaml, "<fp8-gpu>"), po);
        ASSERT_TRUE(r.ok()) << r.message;
        const Measurement m = Execute(r.plan, Nccl());
        EXPECT_TRUE(m.verified) << FormatMeasurement(m, r.plan);
        EXPECT_GT(m.checked_elements, 0);
      }
}

}  // namespace
}  // namespace reshard

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new reshard::ReleaseBackend);
  std::printf("%s; %d CUDA devices\n", reshard::GpuStackVersion().c_str(), reshard::CudaDeviceCount());
  return RUN_ALL_TESTS();
}
