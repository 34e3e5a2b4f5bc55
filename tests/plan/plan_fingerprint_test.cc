// Plans from elsewhere: ScenarioFingerprint is stable and
// changes with exactly what a plan depends on; PlanScenarioProblems names the
// cluster fields, tensors or layouts that differ; Verify refuses a buffer
// larger than the memory it lives in.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/error.h"
#include "model/layout.h"
#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

const char* kBase = R"(name: fp
model: tiny-llama
dtype: bf16
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
memory: {kv_cache: 64MiB}
plan: {segment_bytes: 1MiB}
)";

Scenario Parse(const std::string& text) { return ParseScenario(text, "fp.yaml"); }

std::string With(const std::string& from, const std::string& to) {
  std::string s = kBase;
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// A plan that claims scenario `s`: its cluster, tensors and fingerprint (no ops needed here).
Plan PlanFor(const Scenario& s) {
  Plan p;
  p.name = s.name;
  p.cluster = s.cluster;
  p.cluster_fingerprint = s.cluster.Fingerprint();
  for (const TensorSpec& t : s.model.tensors) p.tensors.push_back({t.name, t.shape, s.dtype, {}});
  p.scenario_fingerprint = ScenarioFingerprint(s);
  return p;
}

// PlanFor(s) plus the destination pieces of s's destination layout, rank r's
// on GPU gpu_of_rank[r] (default: the scenario's placement), one buffer per
// rank (where a piece sits in memory is not what PlanScenarioProblems checks).
Plan WithDestinations(const Scenario& s, std::vector<int32_t> gpu_of_rank = {}) {
  Plan p = PlanFor(s);
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype);
  if (gpu_of_rank.empty()) gpu_of_rank = s.destination_gpus;
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    PlanBuffer b;
    b.id = static_cast<int32_t>(p.buffers.size());
    b.gpu = gpu_of_rank[r];
    b.bytes = dst.RankBytes(r);
    p.buffers.push_back(b);
    for (const Piece& pc : dst.ShardOf(r).pieces)
      p.destinations.push_back(ContentPiece{b.id, pc.tensor, pc.box, pc.offset, pc.stride});
  }
  return p;
}

TEST(ScenarioFingerprint, StableAndHex) {
  const std::string fp = ScenarioFingerprint(Parse(kBase));
  EXPECT_THAT(fp, MatchesRegex("[0-9a-f]{16}"));
  EXPECT_EQ(ScenarioFingerprint(Parse(kBase)), fp);
  // Labels, memory state and planning options do not enter it.
  EXPECT_EQ(ScenarioFingerprint(Parse(With("name: fp", "name: other"))), fp);
  EXPECT_EQ(ScenarioFingerprint(Parse(With("kv_cache: 64MiB", "kv_cache: 1GiB"))), fp);
  EXPECT_EQ(ScenarioFingerprint(Parse(With("segment_bytes: 1MiB", "segment_bytes: 4MiB"))), fp);
}

TEST(ScenarioFingerprint, ChangesWithClusterModelDtypeLayoutsAndGpus) {
  const std::string fp = ScenarioFingerprint(Parse(kBase));
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"cluster: h200-x2", "cluster: {preset: h200-x2, gpu_memory: 80GiB}"},
           {"model: tiny-llama", "model: tiny-moe"},
           {"dtype: bf16", "dtype: fp16"},
           {"destination: {tp: 1, dp: 2, gpus: all}", "destination: {tp: 2, dp: 1, gpus: all}"},
           {"destination: {tp: 1, dp: 2, gpus: all}", "destination: {tp: 1, dp: 1, gpus: \"1\"}"},
           {"destination: {tp: 1, dp: 2, gpus: all}", "destination: {tp: 1, dp: 2, gpus: all, dtype: fp8_e4m3}"},
       }) {
    Scenario s;
    try {
      s = Parse(With(from, to));
    } catch (const InputError& e) {
      ADD_FAILURE() << to << ": " << e.what();
      continue;
    }
    EXPECT_NE(ScenarioFingerprint(s), fp) << to;
  }
}

TEST(PlanScenarioProblems, NoneForItsOwnScenario) {
  const Scenario s = Parse(kBase);
  EXPECT_THAT(PlanScenarioProblems(WithDestinations(s), s), IsEmpty());
  // A plan without a scenario fingerprint cannot prove its layouts: refused.
  Plan old = PlanFor(s);
  old.scenario_fingerprint.clear();
  const std::vector<std::string> problems = PlanScenarioProblems(old, s);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("scenario_fingerprint is missing"));
}

TEST(PlanScenarioProblems, AnotherClusterNamesTheFieldsThatDiffer) {
  const Scenario s = Parse(kBase);
  const Scenario other = Parse(With("cluster: h200-x2", "cluster: {preset: h200-x2, gpu_memory: 80GiB}"));
  const std::vector<std::string> problems = PlanScenarioProblems(PlanFor(s), other);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("made for cluster 'h200-x2' (fingerprint " + s.cluster.Fingerprint()));
  EXPECT_THAT(problems[0], HasSubstr("cluster.gpu_memory_bytes: " + std::to_string(s.cluster.gpu_memory_bytes) +
                                     " in the plan, 85899345920 here"));
}

TEST(PlanScenarioProblems, EditedTensorsAreNamed) {
  const Scenario s = Parse(kBase);
  Plan p = PlanFor(s);
  p.tensors[3].shape.dim[0] += 1;
  std::vector<std::string> problems = PlanScenarioProblems(p, s);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("tensors[3] '" + p.tensors[3].name + "' has shape ["));
  p = PlanFor(s);
  p.tensors[1].dtype = DType::kFP32;
  p.tensors[0].name = "renamed";
  EXPECT_THAT(PlanScenarioProblems(p, s),
              ElementsAre(HasSubstr("tensors[0] 'renamed' is 'renamed' in the plan but"),
                          HasSubstr("has dtype fp32 in the plan but the scenario trains in bf16")));
  p = PlanFor(s);
  p.tensors.pop_back();
  EXPECT_THAT(PlanScenarioProblems(p, s), ElementsAre(HasSubstr("tensors but the scenario's model")));
  p = PlanFor(s);
  for (auto& t : p.tensors) t.shape.dim[0] += 1;  // every tensor: a few listed, the rest counted
  problems = PlanScenarioProblems(p, s);
  EXPECT_EQ(problems.size(), 6u);
  EXPECT_THAT(problems.back(), HasSubstr("more tensors differ"));
}

TEST(PlanScenarioProblems, AnotherLayoutShowsInTheFingerprint) {
  const Scenario s = Parse(kBase);
  const Scenario tp2 = Parse(With("destination: {tp: 1, dp: 2, gpus: all}", "destination: {tp: 2, dp: 1, gpus: all}"));
  EXPECT_THAT(PlanScenarioProblems(PlanFor(s), tp2),
              ElementsAre(HasSubstr("the layouts, dtypes or GPU lists differ")));
}

// The destination pieces the run checks byte by byte are the scenario's: a
// plan whose destination list was edited (a piece dropped, a box changed, a
// shard on the wrong GPU) is refused, even with the right fingerprint.
TEST(PlanScenarioProblems, DestinationPiecesMustBeTheScenarios) {
  const Scenario s = Parse(kBase);  // tiny-llama, destination tp 1 dp 2: one shard on both GPUs
  Plan p = WithDestinations(s);
  p.destinations.pop_back();
  EXPECT_THAT(PlanScenarioProblems(p, s), ElementsAre(HasSubstr("destinations on GPU 1: ")));
  EXPECT_THAT(PlanScenarioProblems(p, s)[0], HasSubstr("is missing"));
  p = WithDestinations(s);
  p.destinations[0].box.hi[0] -= 1;
  EXPECT_THAT(PlanScenarioProblems(p, s),
              ElementsAre(AllOf(HasSubstr("destinations on GPU 0: "), HasSubstr("'" + p.tensors[0].name + "'"))));
  p = WithDestinations(s);
  p.destinations.clear();  // a plan that checks nothing verifies nothing
  EXPECT_EQ(PlanScenarioProblems(p, s).size(), 2u);

  // Destination tp 2: two different shards. Fixed placement: rank r on GPU r.
  const Scenario fixed = Parse(With("destination: {tp: 1, dp: 2, gpus: all}",
                                    "destination: {tp: 2, dp: 1, gpus: all, placement: fixed}"));
  EXPECT_THAT(PlanScenarioProblems(WithDestinations(fixed), fixed), IsEmpty());
  EXPECT_THAT(PlanScenarioProblems(WithDestinations(fixed, {1, 0}), fixed),
              ElementsAre(HasSubstr("destinations on GPU 0"), HasSubstr("destinations on GPU 1")));
  // Placement auto: the planner may swap the ranks, not give one shard twice.
  const Scenario free = Parse(With("destination: {tp: 1, dp: 2, gpus: all}", "destination: {tp: 2, dp: 1, gpus: all}"));
  EXPECT_THAT(PlanScenarioProblems(WithDestinations(free, {1, 0}), free), IsEmpty());
  p = WithDestinations(free);
  std::vector<ContentPiece> rank0;
  for (const ContentPiece& c : p.destinations)
    if (c.buffer == 0) rank0.push_back(c);
  p.destinations = rank0;
  for (ContentPiece c : rank0) {  // rank 0's shard on both GPUs
    c.buffer = 1;
    p.destinations.push_back(c);
  }
  EXPECT_THAT(PlanScenarioProblems(p, free), ElementsAre(HasSubstr("destinations on GPU 1: ")));
  p = WithDestinations(free);
  std::vector<ContentPiece> rank1;
  for (const ContentPiece& c : p.destinations)
    if (c.buffer == 1) rank1.push_back(c);
  p.destinations = rank1;
  for (ContentPiece c : rank1) {  // rank 1's shard on both GPUs: found on GPU 0, once too often on GPU 1
    c.buffer = 0;
    p.destinations.push_back(c);
  }
  EXPECT_THAT(PlanScenarioProblems(p, free), ElementsAre(HasSubstr("given to more GPUs than ranks hold them")));
  const Plan twice = WithDestinations(free, {0, 0});  // both shards on GPU 0, none on GPU 1
  EXPECT_THAT(PlanScenarioProblems(twice, free), Not(IsEmpty()));
}

TEST(PlanVerify, BufferLargerThanItsMemoryIsRefused) {
  const Scenario s = Parse(kBase);
  Plan p = PlanFor(s);
  PlanBuffer b;
  b.id = 0;
  b.gpu = 0;
  b.bytes = s.cluster.gpu_memory_bytes + 1;
  b.preexisting = true;
  p.buffers.push_back(b);
  EXPECT_THAT(Verify(p).problems, ElementsAre(HasSubstr("bytes is more than the GPU's memory it lives in")));
  p.buffers[0].bytes = s.cluster.gpu_memory_bytes;
  EXPECT_TRUE(Verify(p).ok());
  p.buffers[0].space = MemorySpace::kHost;
  p.buffers[0].role = BufferRole::kHost;
  p.buffers[0].bytes = s.cluster.host_memory_bytes + 1;
  EXPECT_THAT(Verify(p).problems, ElementsAre(HasSubstr("more than the node's host memory")));
}

}  // namespace
}  // namespace reshard
