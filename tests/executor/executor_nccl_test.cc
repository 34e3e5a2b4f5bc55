// The NCCL backend on real GPUs (label `gpu`): the same hand-built plans as
// the host tests, verified on device; skipped where fewer GPUs are visible.
// One process drives every GPU here; the multi-process path is exercised by
// `reshard run` under mpirun (see the executor's report for the commands).
#include <cstdio>
#include <map>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "executor/executor.h"
#include "executor/nccl/backend.h"
#include "executor/nccl/gpu_check.h"
#include "executor/nccl/kernels.h"
#include "executor/pattern.h"
#include "model/scenario.h"
#include "plan/issue_order.h"
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

// One GPU, one NCCL group of eight sends to itself and their receives, then
// a copy waiting for a receive that does not own the group's events: one
// event pair stamps the group (EventOwners), every op of it reports those
// stamps, the copy's wait uses the owner's end, and every element arrives.
TEST(NcclExecutor, AGroupSharesOneEventPair) {
  REQUIRE_GPUS(1);
  const Plan p = testplans::SelfGroupPlan();
  const Measurement m = Execute(p, Nccl());
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  const std::vector<int32_t> owner = EventOwners(p);
  std::map<int32_t, OpTime> at;
  for (const OpTime& t : m.op_times) at[t.op] = t;
  int shared = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) continue;
    ASSERT_TRUE(at.count(op.id) && at.count(owner[op.id]));
    EXPECT_EQ(at[op.id].start_s, at[owner[op.id]].start_s);
    EXPECT_EQ(at[op.id].end_s, at[owner[op.id]].end_s);
    shared += owner[op.id] != op.id;
  }
  EXPECT_EQ(shared, 15);
  const Op& copy = p.ops.back();
  EXPECT_GE(at[copy.id].start_s, at[owner[copy.deps[0]]].end_s);
}

// Lane 1 (plan stream "comm2") goes through the GPU's second communicator
// (ncclCommSplit, made because the plan uses it): one GPU sends to itself
// in a group on each lane, and every element of both halves arrives.
TEST(NcclExecutor, TwoCommunicatorLanes) {
  REQUIRE_GPUS(1);
  const Plan p = testplans::SelfLanesPlan();
  ASSERT_TRUE(UsesCommLane2(p));
  const Measurement m = Execute(p, Nccl());
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 2 * 2 * 4 * 64 * 256);
  // Both lanes' groups finished before the copy that waits for them.
  std::map<int32_t, OpTime> at;
  for (const OpTime& t : m.op_times) at[t.op] = t;
  const Op& copy = p.ops.back();
  for (int32_t d : copy.deps) EXPECT_GE(at[copy.id].start_s, at[d].end_s);
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

// The quantize kernels against the host's QuantizeBlock on blocks the fill
// pattern never makes (the amax is a packed bf16 max, the division a fast
// path): subnormals only, zeros with one subnormal, zeros only (these and
// the tiny normals have scales below 2^-125: the software path), both signs
// of the largest finite value, a huge value beside the smallest normals,
// powers of two, pattern bits, tiny normals; 128 x 128 blocks with fp32 and UE8M0 scales,
// 32 x 32, MXFP8's 1 x 32 with E8M0, through every kernel path. And the
// exhaustive checks of the building blocks (LaunchConvertCheck): 0 mismatches.
TEST(NcclExecutor, QuantizeKernelsMatchTheHostOnEdgeBlocks) {
  REQUIRE_GPUS(1);
  constexpr int64_t kRows = 256, kCols = 1024;  // 2 x 8 blocks of 128 x 128
  std::vector<uint16_t> x(kRows * kCols);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; ++c) {
      const int64_t i = r * kCols + c, kind = (r / 128 * 8 + c / 128) % 8;
      const uint16_t sign = static_cast<uint16_t>((i * 7 % 3 == 0) << 15);
      uint16_t v = 0;
      switch (kind) {
        case 0: v = static_cast<uint16_t>(1 + (i * 37) % 0x7F); break;               // subnormals
        case 1: v = i % 16411 == 5 ? 0x0001 : 0; break;                                // one subnormal
        case 2: v = 0; break;                                                            // zeros
        case 3: v = i % 97 == 0 ? 0x7F7F : static_cast<uint16_t>(0x3F80 + i % 0x7F); break;  // max finite
        case 4: v = i % 1031 == 0 ? 0x7F00 : 0x0080; break;                             // huge + smallest normal
        case 5: v = static_cast<uint16_t>((1 + i % 200) << 7); break;                   // powers of two
        case 6: v = FiniteBf16Pattern(3, i); break;
        default: v = static_cast<uint16_t>(0x0080 + (i * 13) % 0x180); break;           // tiny normals
      }
      x[i] = static_cast<uint16_t>(v | (v ? sign : 0));
    }
  struct Case {
    int64_t rows, block_rows, block_cols;
    int32_t scale_format, scale_bytes;
  };
  // 200 rows: partial blocks (kAuto leaves the whole-block kernel).
  const Case cases[] = {{256, 128, 128, 0, 4}, {256, 128, 128, 1, 1}, {200, 128, 128, 0, 4}, {256, 32, 32, 0, 4},
                        {256, 1, 32, 2, 1}};
  using gpu::QuantizePath;
  const QuantizePath paths[] = {QuantizePath::kAuto,   QuantizePath::kGeneric, QuantizePath::kVecSoftware,
                                QuantizePath::kVecHardware, QuantizePath::kWide1, QuantizePath::kWide2,
                                QuantizePath::kWide4,  QuantizePath::kBlock128, QuantizePath::kRow};
  int sms = 0;
  RESHARD_GPU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  unsigned char *in = nullptr, *out = nullptr, *sc = nullptr;
  RESHARD_GPU(cudaMalloc(&in, x.size() * 2));
  RESHARD_GPU(cudaMalloc(&out, x.size()));
  RESHARD_GPU(cudaMalloc(&sc, x.size() * 4));
  RESHARD_GPU(cudaMemcpy(in, x.data(), x.size() * 2, cudaMemcpyHostToDevice));
  for (const Case& k : cases) {
    QuantizeJob j;
    j.rows = k.rows;
    j.cols = kCols;
    j.block_rows = k.block_rows;
    j.block_cols = k.block_cols;
    j.scale_format = k.scale_format;
    j.scale_bytes = k.scale_bytes;
    j.in_row = 2 * kCols;
    j.out_row = kCols;
    j.sc_row = j.BlockCols() * k.scale_bytes;
    const int64_t sc_bytes = j.sc_row * j.BlockRows();
    std::vector<unsigned char> want(x.size(), 0xA5), want_sc(sc_bytes);
    for (int64_t b = 0; b < j.Blocks(); ++b)
      QuantizeBlock(j, b, reinterpret_cast<const unsigned char*>(x.data()), want.data(), want_sc.data());
    for (QuantizePath path : paths) {
      SCOPED_TRACE(::testing::Message() << "blocks " << k.block_rows << " x " << k.block_cols << ", scale format "
                                        << k.scale_format << ", path " << static_cast<int>(path));
      RESHARD_GPU(cudaMemset(out, 0xA5, x.size()));
      RESHARD_GPU(cudaMemset(sc, 0x5A, sc_bytes));
      RESHARD_GPU(gpu::LaunchQuantize(j, in, out, sc, nullptr, sms * gpu::kQuantizeCtasPerSm, path));
      std::vector<unsigned char> got(x.size()), got_sc(sc_bytes);
      RESHARD_GPU(cudaMemcpy(got.data(), out, got.size(), cudaMemcpyDeviceToHost));
      RESHARD_GPU(cudaMemcpy(got_sc.data(), sc, sc_bytes, cudaMemcpyDeviceToHost));
      int64_t bad = 0, first = -1;
      for (size_t i = 0; i < got.size(); ++i)
        if (got[i] != want[i]) bad += 1, first = first < 0 ? static_cast<int64_t>(i) : first;
      EXPECT_EQ(bad, 0) << "first at element " << first << " (bf16 0x" << std::hex << x[first < 0 ? 0 : first]
                        << ")";
      EXPECT_EQ(got_sc, want_sc);
    }
  }
  // The conversion, the division and the packed max, exhaustively.
  std::vector<float> scales;
  for (uint32_t e = 1; e < 255; e += 3) {
    scales.push_back(QuantScale(BitsFloat((e << 23) | (37u << 16)), 0));
    scales.push_back(QuantScale(BitsFloat(e << 23), 1));
  }
  float* d_scales = nullptr;
  unsigned long long* d_bad = nullptr;
  RESHARD_GPU(cudaMalloc(&d_scales, scales.size() * sizeof(float)));
  RESHARD_GPU(cudaMalloc(&d_bad, 3 * sizeof(unsigned long long)));
  RESHARD_GPU(cudaMemcpy(d_scales, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
  RESHARD_GPU(cudaMemset(d_bad, 0, 3 * sizeof(unsigned long long)));
  RESHARD_GPU(gpu::LaunchConvertCheck(0, uint64_t{1} << 32, d_scales, static_cast<int32_t>(scales.size()), d_bad,
                                       nullptr));
  unsigned long long bad[3] = {1, 1, 1};
  RESHARD_GPU(cudaMemcpy(bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost));
  EXPECT_EQ(bad[0], 0u) << "fp32 -> E4M3 conversions";
  EXPECT_EQ(bad[1], 0u) << "(bf16, scale) divisions";
  EXPECT_EQ(bad[2], 0u) << "packed amax pairs";
  for (void* p : {static_cast<void*>(in), static_cast<void*>(out), static_cast<void*>(sc), static_cast<void*>(d_scales),
                  static_cast<void*>(d_bad)})
    RESHARD_GPU(cudaFree(p));
}

}  // namespace
}  // namespace reshard

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new reshard::ReleaseBackend);
  std::printf("%s; %d CUDA devices\n", reshard::GpuStackVersion().c_str(), reshard::CudaDeviceCount());
  return RUN_ALL_TESTS();
}
