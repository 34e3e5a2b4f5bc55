// Tests of the Megatron-Core-style baseline plan (planner/baseline_plan.h):
// on the shared layout cases (planner_test_util.h) it verifies, moves the bytes reshard's plan moves, and run
// on element ids every destination element gets the right value from exactly
// one producer; then its defining choices (round-robin by destination rank,
// one NCCL group, local copies on the side stream, staging per strided side,
// everything allocated at once) and its reported peak.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/scenario.h"
#include "planner/baseline_plan.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "sim/simulator.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace baseline_plan_test {

using namespace planner_testing;  // NOLINT: the shared test helpers

std::vector<Case> Cases() {
  std::vector<Case> v = LayoutCases();
  v.push_back({"optimizer_offloaded_first",
               Yaml("tiny-qwen2", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}",
                    "memory: {optimizer: {bytes_per_param: 12, offload: all}, kv_cache: 64MiB}\n")});
  return v;
}

class BaselineCases : public ::testing::TestWithParam<Case> {};

TEST_P(BaselineCases, VerifiesMovesReshardsBytesAndProducesEveryElementOnce) {
  const Scenario s = FromYaml(GetParam().yaml);
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  const Plan& p = r.plan;
  const VerifyResult v = Verify(p, &s.cluster);
  ASSERT_TRUE(v.ok()) << v.problems.front() << " (" << v.problems.size() << " problems)";
  // The same bytes as reshard's plan of the same scenario, and as the layouts need.
  PlannerOptions po;
  po.simulate = false;
  po.segment_bytes = 1 << 20;
  const PlanResult ours = MakePlan(s, po);
  ASSERT_TRUE(ours.ok()) << ours.message;
  const BytesMoved& a = p.summary.bytes_moved;
  const BytesMoved& b = ours.plan.summary.bytes_moved;
  EXPECT_EQ(a.local + a.nvlink + a.network, b.local + b.nvlink + b.network);
  EXPECT_EQ(a.local + a.nvlink + a.network, DestinationBytes(p));
  EXPECT_EQ(a, CountBytesMoved(p));
  // Every (destination rank, fragment) is one send/recv or one local copy.
  EXPECT_EQ(r.stats.segments + r.stats.local_copy_ops, r.stats.fragments);
  EXPECT_EQ(r.stats.fragments, ours.stats.fragments);
  EXPECT_EQ(r.stats.ops, static_cast<int64_t>(p.ops.size()));
  // The simulator runs it; no plan beats the lower bound.
  EXPECT_GT(p.summary.lower_bound_s, 0);
  EXPECT_GE(p.summary.predicted_time_s, p.summary.lower_bound_s * 0.999);
  RunOnElementIds(p, /*check_not_resent=*/false);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, BaselineCases, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(MegatronBaseline, BuiltinScenariosVerify) {
  for (const char* name : {"llama3-8b-tp2-to-tp1x2", "llama3-8b-disaggregated", "qwen3-30b-a3b-ep2-to-tp2",
                           "tiny-llama-tp2-to-tp1x2"}) {
    const Scenario s = BuiltinScenario(name);
    BaselineOptions o;
    o.simulate = false;
    const PlanResult r = MakeMegatronPlan(s, o);
    ASSERT_TRUE(r.ok()) << name;
    const VerifyResult v = Verify(r.plan, &s.cluster);
    EXPECT_TRUE(v.ok()) << name << ": " << (v.ok() ? "" : v.problems.front());
    const BytesMoved& m = r.plan.summary.bytes_moved;
    EXPECT_EQ(m.local + m.nvlink + m.network, DestinationBytes(r.plan)) << name;
    EXPECT_EQ(r.plan.summary.predicted_time_s, 0) << name << ": not simulated when asked not to";
  }
}

// Megatron's source choice: round-robin by destination rank over the replicas
// (here dest rank 0 -> source rank 0, dest rank 1 -> source rank 1), so the
// replicas on GPUs 2 and 3 send nothing; reshard's planner spreads the load.
TEST(MegatronBaseline, RoundRobinByDestinationRankNotBalanced) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "dgx-h100", "{tp: 1, dp: 4, gpus: \"0-3\"}", "{tp: 2, gpus: \"4-5\"}"));
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  std::set<std::pair<int32_t, int32_t>> pairs;
  for (const Op& op : r.plan.ops)
    if (op.kind == OpKind::kSend) pairs.emplace(op.gpu, op.peer);
  EXPECT_EQ(pairs, (std::set<std::pair<int32_t, int32_t>>{{0, 4}, {1, 5}}));
  PlannerOptions po;
  po.simulate = false;
  const PlanResult ours = MakePlan(s, po);
  ASSERT_TRUE(ours.ok());
  std::set<int32_t> senders;
  for (const Op& op : ours.plan.ops)
    if (op.kind == OpKind::kSend) senders.insert(op.gpu);
  EXPECT_EQ(senders.size(), 4u) << "reshard balances over all four replicas";
}

// Colocated replicas: everything is on the destination's own GPU, so the
// plan is local copies only, one op per fragment, on the side stream.
TEST(MegatronBaseline, SameGpuReplicaIsCopiedOnTheSideStream) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 2}"));
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.stats.segments, 0);
  EXPECT_EQ(r.stats.groups, 0);
  EXPECT_EQ(r.plan.summary.bytes_moved.local, DestinationBytes(r.plan));
  int64_t copies = 0;
  for (const Op& op : r.plan.ops) {
    EXPECT_NE(op.kind, OpKind::kSend);
    if (op.kind == OpKind::kCopy) {
      EXPECT_EQ(op.stream, 3) << op.label;
      ++copies;
    }
  }
  EXPECT_EQ(copies, r.stats.fragments);
  EXPECT_EQ(r.plan.stream_names.at(3), "side");
}

// One NCCL group for every send/recv; a strided side goes through a staging
// buffer of the fragment's own, a contiguous side sends / receives in place;
// destination weights and staging are allocated before the group, staging
// freed after it.
TEST(MegatronBaseline, OneGroupStagingPerStridedSideAllocatedUpFront) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}"));
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  const Plan& p = r.plan;
  int32_t first_comm = -1, last_comm = -1, staged = 0, in_place_sides = 0, sends = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) continue;
    EXPECT_EQ(op.group, 0);
    EXPECT_EQ(op.stream, kStreamComm);
    if (first_comm < 0) first_comm = op.id;
    last_comm = op.id;
    sends += op.kind == OpKind::kSend;
    const PlanBuffer& b = p.buffers[op.region.buffer];
    if (b.role == BufferRole::kStaging) {
      ++staged;
      EXPECT_EQ(b.bytes, op.region.Bytes()) << "one staging buffer per fragment, of its size";
    } else {
      ++in_place_sides;
      EXPECT_EQ(b.role, op.kind == OpKind::kSend ? BufferRole::kSourceWeights : BufferRole::kDestinationWeights);
    }
  }
  ASSERT_GT(sends, 0);
  EXPECT_EQ(sends, r.stats.segments);
  EXPECT_EQ(r.stats.groups, 1);
  // TP2 -> TP1: the fused QKV / gate-up halves are strided on one side.
  EXPECT_GT(staged, 0);
  EXPECT_GT(in_place_sides, 0);
  int64_t staging_buffers = 0;
  for (const PlanBuffer& b : p.buffers) staging_buffers += b.role == BufferRole::kStaging;
  EXPECT_EQ(staging_buffers, staged);
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc) {
      EXPECT_LT(op.id, first_comm) << "allocated up front: " << op.label;
    }
    if (op.kind == OpKind::kFree) {
      EXPECT_GT(op.id, last_comm) << op.label;
      EXPECT_EQ(p.buffers[op.buffer].role, BufferRole::kStaging);
    }
  }
}

// No memory bound: the planned peak of a GPU is everything at once (start
// memory, every destination buffer, every staging buffer, CUDA context and
// NCCL peer buffers); where that exceeds the GPU, the plan is still returned
// with the GPU and the excess named, while reshard's planner fits by policy.
TEST(MegatronBaseline, PeakIsEverythingAtOnceAndIsReportedNotBounded) {
  const std::string mem = "memory: {optimizer: {bytes_per_param: 0, offload: none}, kv_cache: 0, reserve: 0}\n";
  Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}", mem));
  const PlanResult loose = MakeMegatronPlan(s);
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose.gpu, -1);
  EXPECT_TRUE(loose.message.empty());
  const Plan& p = loose.plan;
  for (int32_t g = 0; g < 2; ++g) {
    int64_t all = s.cluster.overheads.cuda_context_bytes + s.cluster.overheads.nccl_bytes_per_peer;  // one peer
    for (const PlanBuffer& b : p.buffers)
      if (b.gpu == g && b.space == MemorySpace::kDevice) all += b.bytes;
    EXPECT_EQ(loose.stats.planned_peak_bytes[g], all) << "gpu " << g;
    // The simulator's peak is the same (everything lives across the group).
    EXPECT_EQ(p.summary.predicted_peak_bytes[g], all) << "gpu " << g;
  }
  const int64_t need = *std::max_element(loose.stats.planned_peak_bytes.begin(), loose.stats.planned_peak_bytes.end());
  s.cluster.gpu_memory_bytes = need - 4096;
  const PlanResult tight = MakeMegatronPlan(s);
  ASSERT_TRUE(tight.ok()) << "no memory bound: the plan is returned";
  EXPECT_GE(tight.gpu, 0);
  EXPECT_EQ(tight.missing_bytes, tight.stats.planned_peak_bytes[tight.gpu] - s.cluster.gpu_memory_bytes);
  EXPECT_NE(tight.message.find("GPU"), std::string::npos);
  PlannerOptions po;
  po.segment_bytes = 64 << 10;
  const PlanResult ours = MakePlan(s, po);
  ASSERT_TRUE(ours.ok()) << "reshard fits by allocating per layer: " << ours.message;
}

// Offload first: destination allocations wait for the GPU's optimizer to
// leave, as NeMo-RL offloads before it refits.
TEST(MegatronBaseline, OptimizerOffloadPrecedesDestinationAllocation) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}",
                                   "memory: {optimizer: {bytes_per_param: 12, offload: none}}\n"));
  BaselineOptions o;
  o.offload_fraction = 1.0;
  const PlanResult r = MakeMegatronPlan(s, o);
  ASSERT_TRUE(r.ok());
  const Plan& p = r.plan;
  ASSERT_TRUE(Verify(p).ok());
  EXPECT_EQ(p.summary.offload_fraction, 1.0);
  EXPECT_GT(p.summary.bytes_moved.pcie, 0);
  const Prediction pr = Simulate(p);
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kAlloc || p.buffers[op.buffer].role != BufferRole::kDestinationWeights) continue;
    for (const Op& o2 : p.ops)
      if (o2.kind == OpKind::kOffload && o2.gpu == op.gpu) {
        EXPECT_GE(pr.op_start_ns[op.id], pr.op_end_ns[o2.id]) << op.label << " before " << o2.label;
      }
  }
  // Without offload the same scenario moves nothing over PCIe.
  EXPECT_EQ(MakeMegatronPlan(s).plan.summary.bytes_moved.pcie, 0);
}

// offload: auto is NeMo-RL's all-or-nothing switch: none while everything
// fits, all when only that fits.
TEST(MegatronBaseline, AutoOffloadsAllOnlyWhenNothingElseFits) {
  Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}",
                             "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache: 0, reserve: 0}\n"));
  auto peak = [](const PlanResult& r) {
    return *std::max_element(r.stats.planned_peak_bytes.begin(), r.stats.planned_peak_bytes.end());
  };
  BaselineOptions none, all;
  none.offload_fraction = 0.0;
  all.offload_fraction = 1.0;
  const int64_t p0 = peak(MakeMegatronPlan(s, none)), p1 = peak(MakeMegatronPlan(s, all));
  ASSERT_LT(p1, p0);
  const PlanResult roomy = MakeMegatronPlan(s);
  EXPECT_EQ(roomy.plan.summary.offload_fraction, 0.0);
  EXPECT_EQ(roomy.gpu, -1);
  s.cluster.gpu_memory_bytes = (p0 + p1) / 2;
  const PlanResult tight = MakeMegatronPlan(s);
  EXPECT_EQ(tight.plan.summary.offload_fraction, 1.0);
  EXPECT_EQ(tight.gpu, -1) << tight.message;
  EXPECT_EQ(peak(tight), p1);
  s.cluster.gpu_memory_bytes = p1 - 1;  // nothing fits: all offloaded, the excess reported
  const PlanResult over = MakeMegatronPlan(s);
  EXPECT_EQ(over.plan.summary.offload_fraction, 1.0);
  EXPECT_EQ(over.missing_bytes, 1);
}

TEST(MegatronBaseline, SameInputSamePlan) {
  const Scenario s = FromYaml(Yaml("tiny-moe", "{preset: dgx-h100, nodes: 2}", "{tp: 2, ep: 4, dp: 8}", "{tp: 2, dp: 8}"));
  BaselineOptions o;
  o.simulate = false;
  EXPECT_TRUE(MakeMegatronPlan(s, o).plan == MakeMegatronPlan(s, o).plan);
}

TEST(MegatronBaseline, UnknownNameAndDtypeConversionAreInputErrors) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}"));
  EXPECT_THROW(MakeBaselinePlan(s, "nemo"), InputError);
  EXPECT_NO_THROW(MakeBaselinePlan(s, "megatron"));
  const Scenario fp8 = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2, dtype: fp8_e4m3}"));
  EXPECT_THROW(MakeMegatronPlan(fp8), InputError);
}

}  // namespace baseline_plan_test
}  // namespace reshard
