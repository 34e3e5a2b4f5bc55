// Executor tests on the host backend: hand-built plans (tests/executor/test_plans.h),
// every destination byte checked, corrupted plans caught, bad plans refused.
#include <algorithm>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "executor/pattern.h"
#include "executor/region_walk.h"
#include "tests/executor/test_plans.h"

namespace reshard {
namespace {

using testplans::Box2;
using testplans::PlanBuilder;
using testplans::Strided;

int64_t DestinationElements(const Plan& p) {
  int64_t n = 0;
  for (const ContentPiece& c : p.destinations) n += Volume(c.box);
  return n;
}

Measurement RunHost(const Plan& p, ExecOptions o = {}) {
  auto backend = MakeHostBackend();
  return Execute(p, *backend, o);
}

// ---- pattern.h ---------------------------------------------------------------

TEST(Pattern, ValuesDifferAcrossTensorsAndIndices) {
  std::set<uint64_t> seen;
  for (int32_t t = 0; t < 4; ++t)
    for (int64_t i = 0; i < 1000; ++i) seen.insert(PatternBits64(t, i));
  EXPECT_EQ(seen.size(), 4000u);  // 64-bit values: a collision here would mean a broken mix
  EXPECT_EQ(PatternValue(3, 77, 2), PatternBits64(3, 77) & 0xFFFF);
  EXPECT_EQ(PatternValue(3, 77, 1), PatternBits64(3, 77) & 0xFF);
  EXPECT_EQ(PatternValue(3, 77, 8), PatternBits64(3, 77));
  EXPECT_NE(PatternValue(0, 1, 4), PatternValue(1, 1, 4));
}

TEST(Pattern, PieceMapEnumeratesBoxInRowMajorOrder) {
  // Box [1:3, 2:5] of a [4, 6] tensor stored with row stride 10 at offset 7.
  const Shape s = MakeShape({4, 6});
  const PieceMap m = MakePieceMap(5, s, 2, Box2(1, 3, 2, 5), 7, {10, 1, 1});
  EXPECT_EQ(m.Elements(), 6);
  std::vector<std::pair<int64_t, int64_t>> got;
  ForEachElement(m, [&](int64_t g, int64_t l) { got.emplace_back(g, l); });
  const std::vector<std::pair<int64_t, int64_t>> want = {{8, 7}, {9, 8}, {10, 9}, {14, 17}, {15, 18}, {16, 19}};
  EXPECT_EQ(got, want);
  // Every element: global index is the row-major index of (lo + i).
  for (size_t k = 0; k < got.size(); ++k) {
    const int64_t i0 = 1 + static_cast<int64_t>(k) / 3, i1 = 2 + static_cast<int64_t>(k) % 3;
    EXPECT_EQ(got[k].first, LinearIndex(s, {i0, i1, 0}));
    EXPECT_EQ(got[k].second, 7 + (i0 - 1) * 10 + (i1 - 2));
  }
  // Row starts agree with the enumeration (the device kernels use them).
  int64_t g = 0, l = 0;
  PieceRowStart(m, 1, &g, &l);
  EXPECT_EQ(std::make_pair(g, l), got[3]);
}

TEST(Pattern, OneAndThreeDimensionalPieces) {
  Box b1;
  b1.ndim = 1;
  b1.lo = {3, 0, 0};
  b1.hi = {7, 1, 1};
  const PieceMap m1 = MakePieceMap(0, MakeShape({10}), 4, b1, 0, {1, 0, 0});
  std::vector<int64_t> g1;
  ForEachElement(m1, [&](int64_t g, int64_t l) {
    g1.push_back(g);
    EXPECT_EQ(l, g - 3);
  });
  EXPECT_EQ(g1, (std::vector<int64_t>{3, 4, 5, 6}));

  Box b3;
  b3.ndim = 3;
  b3.lo = {1, 0, 1};
  b3.hi = {3, 2, 3};
  const Shape s3 = MakeShape({4, 2, 3});
  const PieceMap m3 = MakePieceMap(0, s3, 2, b3, 0, {4, 2, 1});  // dense [2, 2, 2] local layout
  int64_t count = 0;
  ForEachElement(m3, [&](int64_t g, int64_t l) {
    const int64_t i0 = l / 4, i1 = (l / 2) % 2, i2 = l % 2;
    EXPECT_EQ(g, LinearIndex(s3, {1 + i0, i1, 1 + i2}));
    ++count;
  });
  EXPECT_EQ(count, 8);
}

TEST(RegionWalk, RunsCoverBothSequencesInOrder) {
  // src: 3 rows of 4 bytes (stride 10); dst: 2 rows of 6 bytes (stride 8). gcd = 2.
  const Region src = Strided(0, 1, 4, 3, 10), dst = Strided(1, 0, 6, 2, 8);
  std::vector<int64_t> s_bytes, d_bytes;
  ForEachRun(src, dst, [&](int64_t s, int64_t d, int64_t n) {
    EXPECT_EQ(n, 2);
    for (int64_t i = 0; i < n; ++i) {
      s_bytes.push_back(s + i);
      d_bytes.push_back(d + i);
    }
  });
  EXPECT_EQ(s_bytes, (std::vector<int64_t>{1, 2, 3, 4, 11, 12, 13, 14, 21, 22, 23, 24}));
  EXPECT_EQ(d_bytes, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13}));
}

// ---- runs that verify --------------------------------------------------------

TEST(HostExecutor, LocalStridedCopyVerifiesEveryElement) {
  const Plan p = testplans::LocalCopyPlan(2);
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified);
  EXPECT_EQ(m.mismatch_count, 0);
  EXPECT_EQ(m.checked_elements, DestinationElements(p));
  EXPECT_EQ(m.checked_bytes, DestinationElements(p) * 2);
  EXPECT_EQ(m.bytes_moved.local, 2 * 8 * 16 * 2);
  EXPECT_EQ(m.bytes_moved.nvlink, 0);
  EXPECT_EQ(m.op_times.size(), p.ops.size());
  EXPECT_EQ(m.backend, "host");
}

TEST(HostExecutor, PackSendUnpackDeliversStridedPiece) {
  const Plan p = testplans::PackSendUnpackPlan();
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 16 * 16);
  EXPECT_EQ(m.bytes_moved.nvlink, 16 * 16 * 2);
  EXPECT_EQ(m.bytes_moved.local, 0);  // packing into and out of staging is not a transfer
  ASSERT_EQ(m.links.size(), 2u);
  EXPECT_EQ(m.links[0].link, LinkClass::kLocal);
  EXPECT_EQ(m.links[0].bytes, 2 * 16 * 16 * 2);  // but it is device-copy traffic
  EXPECT_EQ(m.links[0].ops, 2);
  EXPECT_EQ(m.links[1].link, LinkClass::kNvlink);
  EXPECT_EQ(m.links[1].busbw_bytes_per_s, m.links[1].algbw_bytes_per_s);
  // Staging lives between alloc and free: the plan's peak on GPU 1 is the
  // preexisting destination plus one staging buffer.
  EXPECT_EQ(m.plan_peak_bytes[1], 16 * 20 * 2 + 16 * 16 * 2);
  EXPECT_EQ(m.peak_bytes[1], m.plan_peak_bytes[1]);
}

TEST(HostExecutor, GroupedBidirectionalExchangeTwoAndFourGpus) {
  for (int32_t gpus : {2, 4}) {
    testplans::ExchangeOptions o;
    o.gpus = gpus;
    const Plan p = testplans::ExchangePlan(o);
    const Measurement m = RunHost(p);
    EXPECT_TRUE(m.verified) << gpus << " GPUs\n" << FormatMeasurement(m, p);
    EXPECT_EQ(m.checked_elements, gpus * 16 * 24);
    const int64_t block = 16 / gpus * 24 * 2;
    EXPECT_EQ(m.bytes_moved.nvlink, gpus * (gpus - 1) * block);
    EXPECT_EQ(m.bytes_moved.local, gpus * block);
  }
}

TEST(HostExecutor, ElementWidthsOneFourEight) {
  for (DType dt : {DType::kFP8E4M3, DType::kFP32}) {
    testplans::ExchangeOptions o;
    o.gpus = 3;
    o.rows = 9;
    o.cols = 5;
    o.dtype = dt;
    const Plan p = testplans::ExchangePlan(o);
    EXPECT_TRUE(RunHost(p).verified) << DTypeName(dt);
  }
}

TEST(HostExecutor, OffloadReloadRoundTrip) {
  const Plan p = testplans::OffloadReloadPlan();
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 32 * 16);
  const int64_t bytes = 16 * 16 * 4;
  EXPECT_EQ(m.bytes_moved.pcie, 2 * 2 * bytes);  // out and back on both GPUs
  ASSERT_EQ(m.memory.size(), 2u);
  for (const GpuMemoryStats& s : m.memory) {
    EXPECT_EQ(s.host_peak_bytes, bytes);
    EXPECT_EQ(s.peak_bytes, bytes);  // the state is freed before its new buffer is allocated
  }
}

TEST(HostExecutor, ThreeDimensionalExpertsWithPlanes) {
  const Plan p = testplans::ExpertsPlan();
  ASSERT_TRUE(Verify(p).ok()) << Verify(p).problems.front();
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 4 * 8 * 16);
}

// A group's ops share one event pair on the NCCL backend (EventOwners);
// on the host backend the plan must simply run and verify: one GPU sending
// to itself in one group, then a copy that waits for a receive that does not
// own the group's events.
TEST(HostExecutor, SelfGroupThenACopyWaitingForIt) {
  const Plan p = testplans::SelfGroupPlan();
  const VerifyResult v = Verify(p);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 2 * 8 * 64 * 256);
}

// The same plan shape over both communicator lanes ("comm" and "comm2"):
// Verify accepts it, and the host backend runs it and checks every byte.
TEST(HostExecutor, SelfGroupsOnTwoCommunicatorLanes) {
  const Plan p = testplans::SelfLanesPlan();
  const VerifyResult v = Verify(p);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified) << FormatMeasurement(m, p);
  EXPECT_EQ(m.checked_elements, 2 * 2 * 4 * 64 * 256);
}

TEST(HostExecutor, CopyBatchOfManyPairs) {
  const Plan p = testplans::ManyPairsPlan();
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified);
  EXPECT_EQ(m.checked_elements, 100 * 256);
}

TEST(HostExecutor, PlanSurvivesJsonRoundTrip) {
  const Plan p = testplans::PackSendUnpackPlan();
  const Plan q = PlanFromJson(PlanToJson(p), "<test>");
  EXPECT_TRUE(RunHost(q).verified);
}

// ---- memory accounting -------------------------------------------------------

TEST(HostExecutor, AllocFreePeakIsExact) {
  // GPU 0, one stream: A (1000, preexisting); +B 500, +C 300 (1800), -B (1300),
  // +D 600 (1900), -C, -D (1000). GPU 1: +E 4096 then -E; host buffer H 777.
  PlanBuilder b(2, "peak");
  const int32_t a = b.Buffer(0, 1000, BufferRole::kKvCache, true, "A");
  const int32_t bb = b.Buffer(0, 500, BufferRole::kStaging, false, "B");
  const int32_t c = b.Buffer(0, 300, BufferRole::kStaging, false, "C");
  const int32_t d = b.Buffer(0, 600, BufferRole::kStaging, false, "D");
  const int32_t e = b.Buffer(1, 4096, BufferRole::kStaging, false, "E");
  const int32_t h = b.Buffer(1, 777, BufferRole::kHost, false, "H", MemorySpace::kHost);
  (void)a;
  b.Alloc(0, 0, bb);
  b.Alloc(0, 0, c);
  b.Free(0, 0, bb);
  b.Alloc(0, 0, d);
  b.Free(0, 0, c);
  b.Free(0, 0, d);
  b.Alloc(1, 0, e);
  b.Alloc(1, 0, h);
  b.Free(1, 0, e);
  b.Free(1, 0, h);
  const Plan p = b.Build();
  const Measurement m = RunHost(p);
  ASSERT_EQ(m.peak_bytes.size(), 2u);
  EXPECT_EQ(m.peak_bytes[0], 1900);
  EXPECT_EQ(m.peak_bytes[1], 4096);
  EXPECT_EQ(m.plan_peak_bytes, m.peak_bytes);  // timeline replay agrees with live tracking
  EXPECT_EQ(m.memory[1].host_peak_bytes, 777);
  EXPECT_EQ(m.memory[0].host_peak_bytes, 0);
  EXPECT_TRUE(m.verified);  // nothing to check is not a failure
}

TEST(PlanPeak, AllocationsBeforeFreesAtEqualTimes) {
  PlanBuilder b(1, "ties");
  const int32_t x = b.Buffer(0, 10, BufferRole::kStaging, false, "x");
  const int32_t y = b.Buffer(0, 20, BufferRole::kStaging, false, "y");
  b.Alloc(0, 0, x);
  b.Free(0, 0, x);
  b.Alloc(0, 1, y);
  const Plan p = b.Build();
  // Free of x ends exactly when y's alloc starts: counted as overlapping (30).
  EXPECT_EQ(PlanPeakFromTimes(p, {{0, 0, 0.0, 1.0}, {1, 0, 1.0, 2.0}, {2, 0, 2.0, 3.0}}), (std::vector<int64_t>{30}));
  EXPECT_EQ(PlanPeakFromTimes(p, {{0, 0, 0.0, 1.0}, {1, 0, 1.0, 2.0}, {2, 0, 2.5, 3.0}}), (std::vector<int64_t>{20}));
}

// ---- corrupted plans are caught ---------------------------------------------

TEST(HostExecutor, WrongCopyOffsetIsCaughtWithTensorAndIndex) {
  testplans::PackOptions o;
  o.pack_shift_bytes = 2;  // one bf16 element to the right
  const Plan p = testplans::PackSendUnpackPlan(o);
  ASSERT_TRUE(Verify(p).ok());  // in bounds: only the bytes are wrong
  const Measurement m = RunHost(p);
  EXPECT_FALSE(m.verified);
  EXPECT_EQ(m.mismatch_count, 16 * 16);  // every element took its right neighbour's value
  ASSERT_FALSE(m.mismatches.empty());
  const Mismatch& first = m.mismatches.front();
  EXPECT_EQ(first.tensor, "layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(first.index, 8);  // row 0, column cols/4
  EXPECT_EQ(first.expected, PatternValue(0, 8, 2));
  EXPECT_EQ(first.got, PatternValue(0, 9, 2));
  EXPECT_EQ(first.gpu, 1);
  EXPECT_EQ(m.mismatches.size(), 20u);  // capped by ExecOptions::max_mismatches
}

TEST(HostExecutor, MissingTransferIsCaughtWithTensorAndIndex) {
  testplans::ExchangeOptions o;
  o.gpus = 4;
  o.drop = {2, 1};  // GPU 1 never receives row block 2
  // Verify proves destination coverage, so such a plan is refused before it runs.
  const VerifyResult v = Verify(testplans::ExchangePlan(o));
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.problems[0].find("is never written"), std::string::npos) << v.problems[0];

  // The same loss at run time (the plan is right, the bytes never arrive) is
  // the executor's byte check's to catch.
  o.drop = {-1, -1};
  const Plan p = testplans::ExchangePlan(o);
  ASSERT_TRUE(Verify(p).ok());
  HostBackendOptions ho;
  ho.lose_receive = testplans::LoseReceive("exchange", 2, 1);
  auto backend = MakeHostBackend(ho);
  ExecOptions opt;
  opt.max_mismatches = 5;
  const Measurement m = Execute(p, *backend, opt);
  EXPECT_FALSE(m.verified);
  const int64_t block_elems = 16 / 4 * 24;
  EXPECT_EQ(m.mismatch_count, block_elems);
  ASSERT_EQ(m.mismatches.size(), 5u);
  EXPECT_EQ(m.mismatches[0].tensor, "model.embed_tokens.weight");
  EXPECT_EQ(m.mismatches[0].index, 2 * block_elems);  // first element of block 2
  EXPECT_EQ(m.mismatches[0].gpu, 1);
  EXPECT_EQ(m.mismatches[0].got, 0xA5A5u);  // the poison of a never-written allocation
  EXPECT_EQ(m.mismatches[4].index, 2 * block_elems + 4);
  EXPECT_EQ(m.checked_elements, 4 * 16 * 24);
}

// A backend that only counts calls: proves refusal happens before any work.
class CountingBackend final : public Backend {
 public:
  int calls = 0;
  std::string Name() const override { return "counting"; }
  void Begin(const Plan&) override { ++calls; }
  std::vector<int32_t> LocalGpus() const override { return {}; }
  const MpiSession* Processes() const override { return nullptr; }
  void Warmup(const std::vector<std::pair<int32_t, int32_t>>&) override { ++calls; }
  void End() override { ++calls; }
  void Allocate(const PlanBuffer&, int32_t) override { ++calls; }
  void Free(const PlanBuffer&, int32_t) override { ++calls; }
  void Copy(int32_t, int32_t, std::span<const CopyPair>, double) override { ++calls; }
  void GroupStart() override { ++calls; }
  void Send(int32_t, int32_t, const Region&, int32_t) override { ++calls; }
  void Recv(int32_t, int32_t, const Region&, int32_t) override { ++calls; }
  void GroupEnd() override { ++calls; }
  void OpStart(int32_t, int32_t, int32_t) override { ++calls; }
  void OpEnd(int32_t, int32_t, int32_t) override { ++calls; }
  void WaitOp(int32_t, int32_t, int32_t) override { ++calls; }
  void StartClock() override { ++calls; }
  void StopClock() override { ++calls; }
  std::vector<OpTime> OpTimes() override { return {}; }
  void Fill(const PlanBuffer&, const PieceMap&) override { ++calls; }
  void Check(const PlanBuffer&, const PieceMap&, int32_t) override { ++calls; }
  std::vector<PieceCheck> CheckResults(int32_t) override { return {}; }
  std::vector<GpuMemoryStats> MemoryStats() override { return {}; }
};

TEST(HostExecutor, PlanFailingVerifyIsRefusedBeforeAnyWork) {
  Plan p = testplans::ExchangePlan();
  // Unmatch one receive: Verify reports it; the executor must not start.
  for (Op& op : p.ops)
    if (op.kind == OpKind::kRecv) {
      op.match = -1;
      break;
    }
  ASSERT_FALSE(Verify(p).ok());
  CountingBackend backend;
  ExecOptions opt;
  opt.plan_source = "bad-plan.json";
  try {
    Execute(p, backend, opt);
    FAIL() << "a plan failing Verify ran";
  } catch (const PlanRefused& e) {
    EXPECT_EQ(e.file(), "bad-plan.json");
    ASSERT_FALSE(e.problems().empty());
    EXPECT_NE(std::string(e.what()).find("no matching"), std::string::npos) << e.what();
  }
  EXPECT_EQ(backend.calls, 0);
}

TEST(HostExecutor, FingerprintOfAnotherClusterIsRefused) {
  const Plan p = testplans::LocalCopyPlan(2);
  const Cluster other = testplans::TestCluster(4);
  CountingBackend backend;
  ExecOptions opt;
  opt.cluster = &other;
  EXPECT_THROW(Execute(p, backend, opt), PlanRefused);
  EXPECT_EQ(backend.calls, 0);
}

TEST(ExecutorProblems, CopyAcrossGpusIsRefused) {
  Plan p = testplans::LocalCopyPlan(2);
  // Point GPU 0's copy at GPU 1's destination buffer.
  p.ops[0].copies[0].dst.buffer = 4;
  const auto problems = ExecutorProblems(p);
  ASSERT_FALSE(problems.empty());
  EXPECT_NE(problems[0].find("lives on GPU 1"), std::string::npos) << problems[0];
}

// ---- issue order -------------------------------------------------------------

TEST(IssueOrder, GroupIsOneStepWithSendsFirstAndReceivesByMatch) {
  testplans::ExchangeOptions o;
  o.gpus = 3;
  const Plan p = testplans::ExchangePlan(o);
  const std::vector<IssueStep> steps = IssueOrder(p);
  const auto group = std::find_if(steps.begin(), steps.end(), [](const IssueStep& s) { return !s.comm.empty(); });
  ASSERT_NE(group, steps.end());
  EXPECT_EQ(group->comm.size(), 12u);  // 6 sends + 6 receives
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(p.ops[group->comm[i]].kind, OpKind::kSend);
  for (size_t i = 6; i < 12; ++i) {
    EXPECT_EQ(p.ops[group->comm[i]].kind, OpKind::kRecv);
    if (i > 6) {
      EXPECT_LT(p.ops[group->comm[i - 1]].match, p.ops[group->comm[i]].match);
    }
  }
  // Every op issued exactly once, each after its dependencies.
  std::vector<int> position(p.ops.size(), -1);
  int k = 0;
  for (const IssueStep& s : steps)
    for (const auto* list : {&s.before, &s.comm, &s.after})
      for (int32_t id : *list) position[id] = k++;
  for (const Op& op : p.ops) {
    ASSERT_GE(position[op.id], 0);
    for (int32_t d : op.deps) EXPECT_LT(position[d], position[op.id]);
  }
}

TEST(IssueOrder, CopyBetweenSendsOfOneGroupIsRefused) {
  PlanBuilder b(2, "interleaved");
  const int32_t x = b.Buffer(0, 64, BufferRole::kStaging, true, "x");
  const int32_t y = b.Buffer(1, 64, BufferRole::kStaging, true, "y");
  b.SendRecv(0, ContiguousRegion(x, 0, 16), 1, ContiguousRegion(y, 0, 16), 7);
  Op copy;
  copy.kind = OpKind::kCopy;
  copy.gpu = 0;
  copy.stream = kStreamComm;
  copy.group = 7;
  copy.copies = {{ContiguousRegion(x, 32, 16), ContiguousRegion(x, 48, 16)}};
  b.Add(copy);
  b.SendRecv(0, ContiguousRegion(x, 16, 16), 1, ContiguousRegion(y, 16, 16), 7);
  const Plan p = b.Build();
  EXPECT_THROW(IssueOrder(p), PlanRefused);
}

// A group's first send / recv on each GPU owns the group's events there,
// whichever other groups' ops come between; dense group ids (bucketed) and
// sparse ones (hashed) give the same owners.
TEST(IssueOrder, EventOwnersAreEachGroupsFirstOpOnItsGpu) {
  for (const int32_t far_group : {5, 2000000000}) {
    PlanBuilder b(2, "owners");
    const int32_t x = b.Buffer(0, 64, BufferRole::kStaging, true, "x");
    const int32_t y = b.Buffer(1, 64, BufferRole::kStaging, true, "y");
    const auto a = b.SendRecv(0, ContiguousRegion(x, 0, 16), 1, ContiguousRegion(y, 0, 16), 3);
    const auto m = b.SendRecv(0, ContiguousRegion(x, 16, 16), 1, ContiguousRegion(y, 16, 16), far_group);
    const auto c = b.SendRecv(0, ContiguousRegion(x, 32, 16), 1, ContiguousRegion(y, 32, 16), 3);
    const auto d = b.SendRecv(1, ContiguousRegion(y, 48, 16), 0, ContiguousRegion(x, 48, 16), 3);
    const Plan p = b.Build();
    const std::vector<int32_t> owner = EventOwners(p);
    ASSERT_EQ(owner.size(), p.ops.size());
    EXPECT_EQ(owner[a.first], a.first) << far_group;
    EXPECT_EQ(owner[a.second], a.second) << far_group;
    EXPECT_EQ(owner[m.first], m.first) << far_group;
    EXPECT_EQ(owner[m.second], m.second) << far_group;
    EXPECT_EQ(owner[c.first], a.first) << far_group;    // GPU 0's first op of group 3
    EXPECT_EQ(owner[c.second], a.second) << far_group;  // GPU 1's
    EXPECT_EQ(owner[d.first], a.second) << far_group;   // a send on GPU 1: its recv came first
    EXPECT_EQ(owner[d.second], a.first) << far_group;
    for (const Op& op : p.ops) {
      if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) {
        EXPECT_EQ(owner[op.id], op.id) << far_group;
      }
    }
  }
}

// ---- reporting ---------------------------------------------------------------

TEST(Measurement, JsonRoundTrip) {
  const Plan p = testplans::PackSendUnpackPlan();
  const Measurement m = RunHost(p);
  nlohmann::json j = m;
  EXPECT_EQ(j.at("verified"), true);
  EXPECT_EQ(j.at("bytes_moved").at("nvlink"), 16 * 16 * 2);
  EXPECT_EQ(j.at("ops").at("op").size(), p.ops.size());
  const Measurement back = MeasurementFromJson(j);
  EXPECT_EQ(back.op_times, m.op_times);
  EXPECT_EQ(back.memory, m.memory);
  EXPECT_EQ(back.links, m.links);
  EXPECT_EQ(back.peak_bytes, m.peak_bytes);
  EXPECT_EQ(back.time_s, m.time_s);
  EXPECT_EQ(back.gpu_span_s, m.gpu_span_s);
  EXPECT_EQ(back.wall_s, m.wall_s);
  EXPECT_GT(back.gpu_span_s, 0);
}

// time_s runs from the reference (t = 0, the call) to the last op end;
// gpu_span_s from the first op start; wall_s to the end of the final wait.
TEST(Measurement, TimeFromTheCallAndGpuSpan) {
  const Plan p = testplans::ExchangePlan();
  const Measurement m = RunHost(p);
  double lo = 1e9, hi = -1e9;
  for (const OpTime& t : m.op_times) {
    EXPECT_GE(t.start_s, 0);  // nothing starts before the reference
    EXPECT_LE(t.start_s, t.end_s);
    lo = std::min(lo, t.start_s);
    hi = std::max(hi, t.end_s);
  }
  EXPECT_DOUBLE_EQ(m.time_s, hi);
  EXPECT_DOUBLE_EQ(m.gpu_span_s, hi - lo);
  EXPECT_GE(m.time_s, m.gpu_span_s);
  EXPECT_GE(m.wall_s, m.time_s);
  const std::string text = FormatMeasurement(m, p);
  EXPECT_NE(text.find("from the call to the last op end"), std::string::npos) << text;
  EXPECT_NE(text.find("GPU span"), std::string::npos) << text;
}

TEST(HostExecutor, BackendRunsSeveralPlansInSequence) {
  HostBackendOptions ho;
  ho.lose_receive = testplans::LoseReceive("pack-send-unpack", 0, 1);  // this plan's one transfer is lost
  auto backend = MakeHostBackend(ho);
  EXPECT_TRUE(Execute(testplans::ExchangePlan(), *backend).verified);
  EXPECT_TRUE(Execute(testplans::OffloadReloadPlan(), *backend).verified);
  testplans::PackOptions bad;
  bad.drop_transfer = true;
  EXPECT_FALSE(Verify(testplans::PackSendUnpackPlan(bad)).ok());  // refused before it runs
  const Measurement m = Execute(testplans::PackSendUnpackPlan(), *backend);  // runs; its bytes never arrive
  EXPECT_FALSE(m.verified);
  EXPECT_EQ(m.mismatch_count, 16 * 16);
  EXPECT_TRUE(Execute(testplans::ExchangePlan(), *backend).verified);
}

// Host buffers are kept from one run to the next of the same plan (as a
// job keeps its pinned buffers across steps), and runs still verify.
TEST(HostExecutor, HostBuffersKeptAcrossRuns) {
  const Plan p = testplans::OffloadReloadPlan();
  int64_t host_bytes = 0;
  for (const PlanBuffer& b : p.buffers)
    if (b.space == MemorySpace::kHost) host_bytes += b.bytes;
  ASSERT_GT(host_bytes, 0);
  auto backend = MakeHostBackend();
  EXPECT_EQ(backend->KeptHostBytes(), 0);
  for (int run = 0; run < 3; ++run) {
    EXPECT_TRUE(Execute(p, *backend).verified) << "run " << run;
    EXPECT_EQ(backend->LiveBytes(), 0) << "run " << run;
    EXPECT_EQ(backend->KeptHostBytes(), host_bytes) << "run " << run;
  }
  // A plan without those buffers releases them.
  EXPECT_TRUE(Execute(testplans::ExchangePlan(), *backend).verified);
  EXPECT_EQ(backend->KeptHostBytes(), 0);
}

// A kept host buffer is poisoned when reused: the bytes a run left in it
// cannot pass a later run's check.
TEST(HostExecutor, KeptHostBufferIsPoisonedAtReuse) {
  const Plan p = testplans::OffloadReloadPlan();
  const PlanBuffer* host = nullptr;
  for (const PlanBuffer& b : p.buffers)
    if (b.space == MemorySpace::kHost && b.gpu == 0) host = &b;
  ASSERT_NE(host, nullptr);
  // GPU 0's piece of the tensor, laid out row-major in the host buffer.
  const ContentPiece& src = p.sources.front();
  ASSERT_EQ(p.buffers[src.buffer].gpu, 0);
  const PlanTensor& t = p.tensors[src.tensor];
  const PieceMap m = MakePieceMap(src.tensor, t.shape, static_cast<int32_t>(DTypeBytes(t.dtype)), src.box, 0,
                                  src.stride_elems);
  ASSERT_EQ(m.Elements() * m.elem_bytes, host->bytes);

  auto backend = MakeHostBackend();
  backend->Begin(p);
  backend->Allocate(*host, -1);
  backend->Fill(*host, m);
  backend->Check(*host, m, 0);
  ASSERT_EQ(backend->CheckResults(1).at(0).mismatches, 0);  // the pattern is there
  backend->End();
  EXPECT_EQ(backend->KeptHostBytes(), host->bytes);

  backend->Begin(p);
  EXPECT_EQ(backend->KeptHostBytes(), host->bytes);  // still kept: same buffer, same size
  backend->Allocate(*host, -1);
  EXPECT_EQ(backend->KeptHostBytes(), 0);  // now in use
  backend->Check(*host, m, 0);
  const std::vector<PieceCheck> r = backend->CheckResults(1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].mismatches, m.Elements());  // poisoned: no stale pattern survives
  ASSERT_EQ(r[0].first.size(), 1u);
  EXPECT_EQ(r[0].first[0].got, 0xA5A5A5A5u);
  backend->End();
}

// The host backend, recording the share of the SMs each copy was given.
class ShareRecorder final : public Backend {
 public:
  std::unique_ptr<Backend> inner = MakeHostBackend();
  std::vector<double> shares;  // per Copy call, in issue order
  std::string Name() const override { return inner->Name(); }
  void Begin(const Plan& p) override { inner->Begin(p); }
  std::vector<int32_t> LocalGpus() const override { return inner->LocalGpus(); }
  const MpiSession* Processes() const override { return inner->Processes(); }
  void Warmup(const std::vector<std::pair<int32_t, int32_t>>& pairs) override { inner->Warmup(pairs); }
  void End() override { inner->End(); }
  void Allocate(const PlanBuffer& b, int32_t s) override { inner->Allocate(b, s); }
  void Free(const PlanBuffer& b, int32_t s) override { inner->Free(b, s); }
  void Copy(int32_t g, int32_t s, std::span<const CopyPair> pairs, double share) override {
    shares.push_back(share);
    inner->Copy(g, s, pairs, share);
  }
  void GroupStart() override { inner->GroupStart(); }
  void Send(int32_t g, int32_t s, const Region& r, int32_t peer) override { inner->Send(g, s, r, peer); }
  void Recv(int32_t g, int32_t s, const Region& r, int32_t peer) override { inner->Recv(g, s, r, peer); }
  void GroupEnd() override { inner->GroupEnd(); }
  void OpStart(int32_t op, int32_t g, int32_t s) override { inner->OpStart(op, g, s); }
  void OpEnd(int32_t op, int32_t g, int32_t s) override { inner->OpEnd(op, g, s); }
  void WaitOp(int32_t g, int32_t s, int32_t op) override { inner->WaitOp(g, s, op); }
  void StartClock() override { inner->StartClock(); }
  void StopClock() override { inner->StopClock(); }
  std::vector<OpTime> OpTimes() override { return inner->OpTimes(); }
  void Fill(const PlanBuffer& b, const PieceMap& m) override { inner->Fill(b, m); }
  void Check(const PlanBuffer& b, const PieceMap& m, int32_t piece) override { inner->Check(b, m, piece); }
  std::vector<PieceCheck> CheckResults(int32_t n) override { return inner->CheckResults(n); }
  std::vector<GpuMemoryStats> MemoryStats() override { return inner->MemoryStats(); }
};

// Each copy reaches the backend with its op's share of the copy grid.
TEST(HostExecutor, CopyGetsTheOpsSmShare) {
  Plan p = testplans::PackSendUnpackPlan();
  std::vector<double> want;
  for (Op& op : p.ops) {
    if (op.kind != OpKind::kCopy) continue;
    op.sm_share = op.gpu == 0 ? 0.25 : 0.5;  // pack on GPU 0, unpack on GPU 1
    want.push_back(op.sm_share);
  }
  ASSERT_EQ(want, (std::vector<double>{0.25, 0.5}));
  ShareRecorder backend;
  EXPECT_TRUE(Execute(p, backend).verified);
  EXPECT_EQ(backend.shares, want);
}

}  // namespace
}  // namespace reshard
