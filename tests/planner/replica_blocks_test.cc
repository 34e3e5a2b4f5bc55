// Replica blocks (planner/replica_blocks.h): a data-parallel refit planned
// as one block and replicated is a complete, race-free plan of the whole, its
// simulation takes the block's predicted time, its lower bound is the whole's,
// and names carry the whole's ranks and GPUs.
#include <map>
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "planner/replica_blocks.h"
#include "sim/simulator.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

using planner_testing::FromYaml;
using planner_testing::Yaml;

// tiny-llama TP2 x PP2 x DP8 -> TP1 x PP2 x DP16 on 4 DGX H100 (32 GPUs),
// colocated, in two blocks. Source rank = tp + 2 dp + 16 pp: replicas 0-3
// sit on nodes 0 and 2, replicas 4-7 on nodes 1 and 3, so destination ranks
// (initially pp + 2 dp: replicas 0-7 on nodes 0-1) are placed among each
// block's source GPUs.
Scenario StridedColocated() {
  return FromYaml(Yaml("tiny-llama", "{preset: dgx-h100, nodes: 4}", "{tp: 2, pp: 2, dp: 8}",
                       "{tp: 1, pp: 2, dp: 16}"));
}

// tiny-llama TP2 x DP8 on nodes 0-1 -> TP2 x DP8 on nodes 2-3 of 4 DGX H100
// (disaggregated: block k = node k of the source and node 2 + k).
Scenario Disaggregated() {
  return FromYaml(Yaml("tiny-llama", "{preset: dgx-h100, nodes: 4}", "{tp: 2, dp: 8, gpus: \"0-15\"}",
                       "{tp: 2, dp: 8, gpus: \"16-31\"}"));
}

PlannerOptions Blocks(int32_t n) {
  PlannerOptions o;
  o.replica_blocks = n;
  return o;
}

void ExpectWholePlan(const Scenario& s, const PlanResult& r, int32_t blocks) {
  ASSERT_TRUE(r.ok()) << r.message;
  const Plan& p = r.plan;
  EXPECT_EQ(r.stats.replica_blocks, blocks);
  EXPECT_EQ(p.Gpus(), s.cluster.Gpus());
  EXPECT_EQ(p.cluster_fingerprint, s.cluster.Fingerprint());
  const VerifyResult v = Verify(p);
  EXPECT_TRUE(v.ok()) << (v.problems.empty() ? "" : v.problems.front());
  // Every destination element of the whole written once, with its own value.
  const planner_testing::ElementRun run = planner_testing::RunOnElementIds(p, /*check_not_resent=*/true);
  EXPECT_EQ(run.written * DTypeBytes(s.dtype), planner_testing::DestinationBytes(p));
  EXPECT_EQ(r.stats.ops, static_cast<int64_t>(p.ops.size()));
  EXPECT_EQ(p.summary.bytes_moved, CountBytesMoved(p));
  // The whole simulated takes what the block was predicted to.
  const Prediction whole = Simulate(p);
  EXPECT_NEAR(whole.time_s, p.summary.predicted_time_s, 1e-12 + 1e-9 * p.summary.predicted_time_s);
  // Source and destination weight buffers named after the whole's ranks, on their GPUs.
  const std::regex rank(R"(^(src|dst) r(\d+) )");
  std::set<std::string> names;
  for (const PlanBuffer& b : p.buffers) {
    std::smatch m;
    if (b.role != BufferRole::kSourceWeights && b.role != BufferRole::kDestinationWeights) continue;
    EXPECT_TRUE(names.insert(b.name).second) << "two buffers named " << b.name;
    ASSERT_TRUE(std::regex_search(b.name, m, rank)) << b.name;
    if (m[1] == "src") {
      EXPECT_EQ(b.gpu, s.source_gpus.at(std::stoi(m[2]))) << b.name;
    }
  }
}

TEST(ReplicaBlocks, StridedColocatedRefitSplitsIntoBlocksOfWholeNodes) {
  const Scenario s = StridedColocated();
  const std::optional<ReplicaBlocks> rb = FindReplicaBlocks(s, Blocks(2));
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->count, 2);
  EXPECT_EQ(rb->block.cluster.Gpus(), 16);
  // Block 0: nodes 0 and 2 (replica 0's pipeline stages), block 1: nodes 1 and 3.
  for (int32_t i = 0; i < 16; ++i) {
    EXPECT_EQ(rb->gpu_of[i], i < 8 ? i : 8 + i) << i;
    EXPECT_EQ(rb->gpu_of[16 + i], i < 8 ? 8 + i : 16 + i) << i;
  }
  // Block source rank 9 (tp 1, dp 0, pp 1) is the whole's tp + 2 (dp + 4 k) + 16 pp.
  EXPECT_EQ(rb->src_rank_of[9], 17);
  EXPECT_EQ(rb->src_rank_of[16 + 9], 25);
  // The optimizer is sharded over the whole's DP8, not the block's DP4.
  const std::vector<GpuMemoryAtStart> whole = MemoryAtStart(s, MakeSourceLayout(s.model, s.source, s.dtype));
  for (int32_t i = 0; i < 16; ++i) EXPECT_EQ(rb->inputs->memory_at_start[i].optimizer, whole[rb->gpu_of[i]].optimizer);
}

TEST(ReplicaBlocks, BlockPlanReplicatedIsAPlanOfTheWholeWithItsBound) {
  const Scenario s = StridedColocated();
  const PlanResult whole = MakePlan(s, Blocks(1));
  ASSERT_TRUE(whole.ok()) << whole.message;
  EXPECT_EQ(whole.stats.replica_blocks, 1);
  const PlanResult split = MakePlan(s, Blocks(2));
  ExpectWholePlan(s, split, 2);
  // No plan of the whole beats the block's bound: the same number.
  EXPECT_NEAR(split.plan.summary.lower_bound_s, whole.plan.summary.lower_bound_s,
              1e-12 + 1e-9 * whole.plan.summary.lower_bound_s);
  // Each block's GPUs peak as block 0's do.
  const std::optional<ReplicaBlocks> rb = FindReplicaBlocks(s, Blocks(2));
  for (int32_t i = 0; i < 16; ++i)
    EXPECT_EQ(split.plan.summary.predicted_peak_bytes[rb->gpu_of[i]],
              split.plan.summary.predicted_peak_bytes[rb->gpu_of[16 + i]]);
}

TEST(ReplicaBlocks, DisaggregatedRefitSplitsSourceAndDestinationTogether) {
  const Scenario s = Disaggregated();
  const std::optional<ReplicaBlocks> rb = FindReplicaBlocks(s, Blocks(2));
  ASSERT_TRUE(rb);
  for (int32_t i = 0; i < 16; ++i) EXPECT_EQ(rb->gpu_of[i], i < 8 ? i : 8 + i) << i;
  const PlanResult split = MakePlan(s, Blocks(2));
  ExpectWholePlan(s, split, 2);
  EXPECT_NEAR(split.plan.summary.lower_bound_s, MakePlan(s, Blocks(1)).plan.summary.lower_bound_s, 1e-12);
  // Blocks of half a node do not split it.
  EXPECT_THROW(FindReplicaBlocks(s, Blocks(4)), InputError);
}

TEST(ReplicaBlocks, SessionPlansWhatMakePlanPlans) {
  const Scenario s = StridedColocated();
  PlanSession session(s);
  for (int32_t n : {2, 1}) {
    const PlanResult a = session.Plan(Blocks(n)), b = MakePlan(s, Blocks(n));
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.stats.replica_blocks, n);
    EXPECT_TRUE(a.plan == b.plan) << n;
  }
}

TEST(ReplicaBlocks, AutoSplitsOnlyLargePlansIntoBlocksThatStayLarge) {
  const Scenario s = StridedColocated();
  PlannerOptions o;  // replica_blocks 0: auto
  EXPECT_FALSE(FindReplicaBlocks(s, o));  // a small plan: planned whole
  const int64_t fragments = MakePlan(s, Blocks(1)).stats.fragments;
  ASSERT_GT(fragments, 2);
  o.simulate_max_fragments = fragments / 2 - 1;  // half the whole stays above: two blocks
  const std::optional<ReplicaBlocks> rb = FindReplicaBlocks(s, o);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->count, 2);
  o.simulate_max_fragments = fragments / 2;  // a half would be small
  EXPECT_FALSE(FindReplicaBlocks(s, o));
}

TEST(ReplicaBlocks, AutoKeepsTwoSourceReplicasPerBlock) {
  // tiny-llama TP2 x DP8 -> TP1 x DP16 on 8 nodes of 2 GPUs: a replica per node,
  // so 8 blocks split it, but only 4 keep a choice of sources.
  const Scenario s = FromYaml(Yaml("tiny-llama", "{preset: dgx-h100, nodes: 8, gpus_per_node: 2}", "{tp: 2, dp: 8}",
                                   "{tp: 1, dp: 16}", "", "pairs"));
  const std::optional<ReplicaBlocks> eight = FindReplicaBlocks(s, Blocks(8));
  ASSERT_TRUE(eight);
  EXPECT_EQ(eight->block.cluster.Gpus(), 2);
  PlannerOptions o;
  o.simulate_max_fragments = 1;
  const std::optional<ReplicaBlocks> rb = FindReplicaBlocks(s, o);
  ASSERT_TRUE(rb);
  EXPECT_EQ(rb->count, 4);
  ExpectWholePlan(s, MakePlan(s, o), 4);
}

// Rank orders the block maps follow: context parallel inside the source's
// data-parallel index, virtual pipeline chunks, uneven stages, and a fixed
// destination placement on other nodes; each in two blocks of 16 GPUs.
class Shapes : public testing::TestWithParam<planner_testing::Case> {};

TEST_P(Shapes, TwoBlocksReplicatedAreAPlanOfTheWhole) {
  const Scenario s = FromYaml(GetParam().yaml);
  const PlanResult split = MakePlan(s, Blocks(2));
  ExpectWholePlan(s, split, 2);
  EXPECT_NEAR(split.plan.summary.lower_bound_s, MakePlan(s, Blocks(1)).plan.summary.lower_bound_s,
              1e-12 + 1e-9 * split.plan.summary.lower_bound_s);
}

INSTANTIATE_TEST_SUITE_P(
    ReplicaBlocks, Shapes,
    testing::Values(
        planner_testing::Case{"cp2", Yaml("tiny-llama", "{preset: dgx-h100, nodes: 4}", "{tp: 2, cp: 2, pp: 2, dp: 4}",
                                          "{tp: 2, pp: 2, dp: 8}")},
        planner_testing::Case{"vpp2", Yaml("tiny-llama", "{preset: dgx-h100, nodes: 4}", "{tp: 2, pp: 2, vpp: 2, dp: 8}",
                                           "{tp: 1, pp: 2, dp: 16}")},
        planner_testing::Case{"uneven_stages",
                              Yaml("tiny-llama", "{preset: dgx-h100, nodes: 4}", "{tp: 2, pp: 2, dp: 8, pp_layers: [1, 3]}",
                                   "{tp: 2, dp: 16}")},
        planner_testing::Case{"fixed_placement",
                              Yaml("tiny-llama", "{preset: dgx-h100, nodes: 4}", "{tp: 2, dp: 8, gpus: \"0-15\"}",
                                   "{tp: 2, dp: 8, gpus: \"16-31\", placement: fixed}")}),
    [](const testing::TestParamInfo<planner_testing::Case>& i) { return std::string(i.param.name); });

TEST(ReplicaBlocks, ForcedSplitThatDoesNotExistNamesTheReason) {
  // Source replicas on both nodes' halves: a block would share nodes.
  const Scenario halves = FromYaml(Yaml("tiny-llama", "{preset: dgx-h100, nodes: 2}", "{tp: 2, dp: 8}",
                                        "{tp: 2, dp: 8}", "", "halves"));
  try {
    FindReplicaBlocks(halves, Blocks(4));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("replica_blocks"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("whole nodes"), std::string::npos) << e.what();
  }
  // One source replica: nothing to split.
  EXPECT_THROW(FindReplicaBlocks(planner_testing::TwoNodeRelayScenario(), Blocks(2)), InputError);
  EXPECT_THROW(FindReplicaBlocks(StridedColocated(), Blocks(-1)), InputError);
}

TEST(ReplicaBlocks, MoeDestinationsSpreadOverDataParallelRanksDoNotSplit) {
  // vLLM spreads experts over the flattened tp x dp group: its DP ranks differ.
  const Scenario moe = FromYaml(Yaml("tiny-mla", "{preset: dgx-h100, nodes: 2}", "{tp: 8, dp: 2}",
                                     "{tp: 8, dp: 2}", "", "moe"));
  try {
    FindReplicaBlocks(moe, Blocks(2));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("other weights"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
