// FP8 destinations in the planner: the quantize-at-destination rewrite on a
// planned refit, where the planner quantizes (source or destination, by
// predicted time), and the bytes-by-link arithmetic of the at-scale FP8 refits
// (what quantizing at the source would move: half the bf16 bytes plus scales).
#include <algorithm>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/model.h"
#include "model/scenario.h"
#include "plan/issue_order.h"
#include "planner/planner.h"
#include "planner/quantize.h"

namespace reshard {
namespace {

// What every destination rank of an at-scale FP8 refit receives, in bf16
// (quantized at the destination) and in fp8 plus scales (at the source).
// Quantized weights travel at 1 byte per element plus 4 bytes per 128 x 128
// block (4 / 16384 = 0.024 % more; a bit more where a block is short:
// kv_a_proj_with_mqa has 576 = 4.5 x 128 rows). The bf16 rest does not
// shrink: embedding and lm_head (2 x 163840 x 7168 for Kimi-K2, vocab-split
// over TP8 and held by each of the 16 DP replicas), the routers (384 x 7168
// on every one of the 128 EP ranks, 60 layers) and the norms; they are
// ~4.4 % of the bf16 bytes, so the at-source bytes are 0.5 + 0.044 / 2 =
// ~52 % of the at-destination ones.
void ExpectHalvedPlusScales(const QuantizedBytes& q) {
  EXPECT_EQ(q.bf16_bytes, 2 * q.fp8_bytes);
  EXPECT_GE(q.scale_bytes * 4096, q.fp8_bytes);              // at least one fp32 scale per 16384 elements
  EXPECT_LE(q.scale_bytes * 4096, q.fp8_bytes * 101 / 100);  // short blocks add < 1 %
  const double total = static_cast<double>(q.AtDestination());
  const double ratio = static_cast<double>(q.AtSource()) / total;
  const double plain_share = static_cast<double>(q.plain_bytes) / total;
  EXPECT_NEAR(ratio, 0.5 + plain_share / 2 + static_cast<double>(q.scale_bytes) / total, 1e-12);
  EXPECT_LT(plain_share, 0.05);
  EXPECT_GT(ratio, 0.50);
  EXPECT_LT(ratio, 0.53);
}

TEST(Fp8AtScale, KimiK2DestinationBytesHalveWithScales) {
  const Scenario s = BuiltinScenario("kimi-k2-256-to-128");
  ASSERT_EQ(s.destination_dtype, DType::kFP8E4M3);
  ASSERT_TRUE(s.quantization.has_value());
  ExpectHalvedPlusScales(ScenarioQuantizedBytes(s));
}

// deepseek-v3-pp16ep16-to-tp32dp8 with the checkpoint's own quantization
// (tests/data/hf/deepseek-v3/config.json: fp8, e4m3, weight_block_size
// [128, 128]). Its TP32 destination gives each rank 576 = 4.5 x 128 rows of
// the dense MLP (18432 / 32), which cuts blocks: refused, naming
// destination.tp, as vLLM refuses it. TP16 x DP16 with expert parallelism
// over the 256 ranks (1152 = 9 x 128 dense rows; whole experts per rank)
// keeps every share whole blocks, and the bytes halve as for Kimi-K2.
TEST(Fp8AtScale, DeepSeekV3DestinationBytesHalveWithScales) {
  Scenario s = BuiltinScenario("deepseek-v3-pp16ep16-to-tp32dp8");
  s.destination_dtype = DType::kFP8E4M3;
  s.quantization = ReadHfQuantization(std::string(RESHARD_TEST_DATA_DIR) + "/hf/deepseek-v3/config.json");
  ASSERT_TRUE(s.quantization.has_value());
  EXPECT_EQ(s.quantization->scheme, QuantScheme::kBlock);
  EXPECT_EQ(s.quantization->block_rows, 128);
  EXPECT_THROW(ScenarioQuantizedBytes(s), InputError);
  s.destination.tp = 16;
  s.destination.dp = 16;
  s.destination.ep = 256;
  ExpectHalvedPlusScales(ScenarioQuantizedBytes(s));
}

// A planned FP8 refit on two GPUs: quantized at the destination, so the wire
// carries exactly the bf16 plan's bytes; the destination holds what the
// layout arithmetic says; the lower bound counts quantized values at fp8 size.
TEST(Fp8Planner, QuantizeAtDestinationMovesTheBf16BytesAndHoldsFp8) {
  const char* yaml = R"(
name: fp8-moe
model: tiny-moe
cluster: h200-x2
source: {tp: 1, ep: 2, dp: 2}
destination: {tp: 2, dtype: fp8_e4m3, quantization: {block: [64, 64]}}
plan: {segment_bytes: 256KiB}
)";
  const Scenario s = ParseScenario(yaml, "<fp8>");
  Scenario bf16 = s;
  bf16.destination_dtype = DType::kBF16;
  bf16.quantization.reset();
  PlannerOptions po;
  po.simulate = false;
  po.quantize_at_source = false;
  const PlanResult a = MakePlan(s, po), b = MakePlan(bf16, po);
  ASSERT_TRUE(a.ok() && b.ok());
  // The wire is the bf16 plan's; copies into the bf16 assembly buffers are
  // staging copies, so fewer bytes count as local placement.
  EXPECT_EQ(a.plan.summary.bytes_moved.nvlink, b.plan.summary.bytes_moved.nvlink);
  EXPECT_EQ(a.plan.summary.bytes_moved.network, b.plan.summary.bytes_moved.network);
  EXPECT_LE(a.plan.summary.bytes_moved.local, b.plan.summary.bytes_moved.local);
  EXPECT_NE(a.plan.summary.memory_policy.find("quantize-at-destination"), std::string::npos);
  const QuantizedBytes planned = DestinationQuantizedBytes(a.plan), layout = ScenarioQuantizedBytes(s);
  EXPECT_EQ(planned.plain_bytes, layout.plain_bytes);
  EXPECT_EQ(planned.fp8_bytes, layout.fp8_bytes);
  EXPECT_EQ(planned.scale_bytes, layout.scale_bytes);
  EXPECT_LT(a.plan.summary.lower_bound_s, b.plan.summary.lower_bound_s);
  EXPECT_TRUE(PlanScenarioProblems(a.plan, s).empty() || a.plan.scenario_fingerprint.empty());
  EXPECT_TRUE(Verify(a.plan).ok());
}

// Quantizing at the destination splices an alloc, a copy, a quantize and a free after each assembly buffer's last
// write. Where that write is a receive in an NCCL group, they go after the group: right after the receive they sat on
// the compute stream before the allocation the group's next receive waits for, and the plan had a dependency cycle
// (llama3-8b TP1xPP8 -> vLLM TP2xDP4 fp8 with neither kind of relay, in rounds of two 1 GiB segments: a round
// receives the end of one layer and the start of the next).
TEST(Fp8Planner, QuantizeAtDestinationAfterAGroupThatEndsOneLayerAndStartsTheNext) {
  const Scenario s = ParseScenario(R"(
name: fp8-layer-seam
model: llama3-8b
cluster: {preset: dgx-h100, nodes: 2}
source: {engine: megatron, tp: 1, pp: 8, gpus: "0-7"}
destination: {engine: vllm, tp: 2, dp: 4, dtype: fp8_e4m3, gpus: "8-15"}
memory: {kv_cache_gib: 10, reserve_gib: 2}
)", "<fp8>");
  PlannerOptions po;
  po.quantize_at_source = false;
  po.relays = false;
  po.send_relays = false;
  po.per_round = 2;
  po.segment_bytes = int64_t{1} << 30;
  PlanResult r;
  ASSERT_NO_THROW(r = MakePlan(s, po));  // the rewritten plan is simulated: a cycle is refused there
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_NE(r.plan.summary.memory_policy.find("quantize-at-destination"), std::string::npos);
  EXPECT_EQ(r.stats.per_round, 2);
  EXPECT_NO_THROW(IssueOrder(r.plan));
  EXPECT_TRUE(Verify(r.plan).ok());
}

// Where to quantize is chosen by predicted time: the chosen plan is never
// slower than either extreme.
struct Choice {
  PlanResult chosen, at_source, at_destination;
};
Choice PlanAllThree(const Scenario& s) {
  PlannerOptions po;
  Choice c{MakePlan(s, po), {}, {}};
  po.quantize_at_source = true;
  c.at_source = MakePlan(s, po);
  po.quantize_at_source = false;
  c.at_destination = MakePlan(s, po);
  EXPECT_TRUE(c.chosen.ok() && c.at_source.ok() && c.at_destination.ok());
  // Per-weight placements besides the two extremes may be faster still.
  const double best = std::min(c.at_source.plan.summary.predicted_time_s, c.at_destination.plan.summary.predicted_time_s);
  EXPECT_LE(c.chosen.plan.summary.predicted_time_s, best);
  return c;
}

// Disaggregated over two nodes: the tiny MoE from EP4 x DP4 to TP2 x DP4 EP8 in fp8.
Scenario TwoNodeMoe() {
  return ParseScenario(R"(
name: fp8-moe-two-nodes
model: tiny-moe
cluster: {preset: dgx-h100, nodes: 2}
source: {tp: 2, ep: 4, dp: 4, gpus: "0-7"}
destination: {tp: 2, dp: 4, ep: 8, dtype: fp8_e4m3, quantization: {block: [64, 64]}, gpus: "8-15"}
)",
                       "<fp8-two-nodes>");
}

// Disaggregated over two nodes: every byte crosses the network; at the
// source half the expert and attention bytes cross it (plus one fp32 scale
// per 64 x 64 block, 4 / 4096 bytes per element). Where the network binds
// (NICs slowed to 5 GB/s, so the tiny model's transfers outweigh its per-op
// costs, which decide at 400 Gb/s) the planner quantizes there.
TEST(Fp8Planner, TheNetworkBindsSoTheSourceQuantizes) {
  const Scenario s = TwoNodeMoe();
  const Choice c = PlanAllThree(s);
  Scenario slow = s;
  slow.cluster.network.bytes_per_s = 5e9;
  const Choice n = PlanAllThree(slow);
  EXPECT_NE(n.chosen.plan.summary.memory_policy.find("+quantize-at-source"), std::string::npos)
      << n.chosen.plan.summary.memory_policy;
  EXPECT_LT(n.at_source.plan.summary.predicted_time_s, n.at_destination.plan.summary.predicted_time_s);
  // Network bytes: the quantized weights' bf16 bytes become fp8 plus scales.
  const QuantizedBytes q = DestinationQuantizedBytes(c.at_source.plan);
  const int64_t net_src = c.at_source.plan.summary.bytes_moved.network,
                net_dst = c.at_destination.plan.summary.bytes_moved.network;
  EXPECT_EQ(net_dst - net_src, q.bf16_bytes - q.fp8_bytes - q.scale_bytes);
  // The trainer's GPUs hold fp8 staging while they send: their peak grows.
  EXPECT_TRUE(Verify(c.at_source.plan).ok());
}

// Quantized plans keep rounds of 1 and 2 in their search (a round per phase can close a cycle through the quantize
// ops); the placement kept is then planned as a round per phase, and that is kept only where it is predicted faster
// (and can be issued). So the answer is never slower than the rounds alone, and a round per phase is kept only for
// a gain.
TEST(Fp8Planner, ARoundPerPhaseIsKeptOnlyWherePredictedFaster) {
  const Scenario s = TwoNodeMoe();
  for (const double network_bytes_per_s : {50e9, 5e9}) {
    Scenario v = s;
    v.cluster.network.bytes_per_s = network_bytes_per_s;
    PlannerOptions rounds;
    rounds.per_round_candidates = {1, 2};
    const PlanResult chosen = MakePlan(v, {}), only_rounds = MakePlan(v, rounds);
    ASSERT_TRUE(chosen.ok() && only_rounds.ok());
    EXPECT_FALSE(only_rounds.stats.round_per_phase);
    EXPECT_LE(chosen.plan.summary.predicted_time_s, only_rounds.plan.summary.predicted_time_s) << network_bytes_per_s;
    if (chosen.stats.round_per_phase) {
      EXPECT_LT(chosen.plan.summary.predicted_time_s, only_rounds.plan.summary.predicted_time_s) << network_bytes_per_s;
    }
    EXPECT_TRUE(Verify(chosen.plan).ok());
  }
}

// One GPU: no wire; both place every weight by copies. The choice is the
// faster of the two predictions (asserted in PlanAllThree), whichever it is.
TEST(Fp8Planner, OneGpuKeepsTheFasterOfTheTwo) {
  const Scenario s = ParseScenario(R"(
name: fp8-one-gpu
model: tiny-llama
cluster: {preset: h200-x2, nodes: 1, gpus_per_node: 1}
source: {tp: 1}
destination: {tp: 1, dtype: fp8_e4m3, quantization: {block: [64, 64]}}
)",
                                   "<fp8-one-gpu>");
  const Choice c = PlanAllThree(s);
  EXPECT_EQ(c.chosen.plan.summary.bytes_moved.network + c.chosen.plan.summary.bytes_moved.nvlink, 0);
}

// Where each weight is quantized is chosen per weight. One trainer GPU
// (node 0) holds the whole model; the engine is PP2: layers 0-1 on that same
// GPU, layers 2-3 on node 1's GPU. tiny-moe widened to hidden 512, expert
// width 256: 28 quantized weights (4 layers x (q, k, v, o + 3 stacked
// experts)), 64 x 64 blocks. The "gpu-boundary" placement quantizes at the
// source exactly the 14 weights of layers 2-3, whose bytes cross the
// network (fp8 halves them), and quantizes layers 0-1 after assembly on GPU 0.
// It is predicted faster than both extremes: than all at the destination by
// the network bytes; than all at the source because GPU 0's first quantize
// then fills only the staging the network waits for (layers 0-1 first would
// delay the first network send), and layers 0-1 are placed while the
// network carries layers 2-3. The planner picks it.
TEST(Fp8Planner, PerWeightPlacementBeatsBothExtremes) {
  Scenario s = ParseScenario(R"(
name: fp8-mixed
model: tiny-moe
cluster: {preset: dgx-h100, nodes: 2, gpus_per_node: 1, nics_per_node: 1}
source: {tp: 1, gpus: "0"}
destination: {tp: 1, pp: 2, dtype: fp8_e4m3, quantization: {block: [64, 64]}, gpus: "0,1"}
)",
                             "<fp8-mixed>");
  ModelConfig cfg = ModelPreset("tiny-moe");
  cfg.hidden = 512;
  cfg.moe_intermediate = 256;
  s.model = BuildModel(cfg);
  const std::vector<QuantizePlacement> placements = QuantizePlacements(s);
  std::vector<std::string> rules;
  for (const QuantizePlacement& c : placements) rules.push_back(c.rule);
  // node-boundary equals gpu-boundary here (one GPU per node): planned once.
  EXPECT_EQ(rules, (std::vector<std::string>{"destination", "source", "gpu-boundary", "experts", "dense"}));
  const QuantizePlacement& mixed = placements[2];
  int32_t quantized = 0;
  for (size_t t = 0; t < s.model.tensors.size(); ++t) {
    const TensorSpec& spec = s.model.tensors[t];
    const bool q = s.quantization->Quantizes(spec.kind) && (spec.shape.ndim == 2 || spec.shape.ndim == 3);
    quantized += q;
    EXPECT_EQ(mixed.at_source[t], q && spec.layer >= 2) << spec.name;
  }
  EXPECT_EQ(quantized, 28);
  EXPECT_EQ(mixed.at_source_count, 14);
  PlannerOptions po;
  const PlanResult dst = PlanQuantizedAt(s, po, placements[0].at_source);
  const PlanResult src = PlanQuantizedAt(s, po, placements[1].at_source);
  const PlanResult mix = PlanQuantizedAt(s, po, mixed.at_source);
  ASSERT_TRUE(dst.ok() && src.ok() && mix.ok());
  EXPECT_TRUE(mix.plan.summary.memory_policy.ends_with("+quantize-at-source-14-of-28")) << mix.plan.summary.memory_policy;
  EXPECT_LT(mix.plan.summary.predicted_time_s, src.plan.summary.predicted_time_s);
  EXPECT_LT(src.plan.summary.predicted_time_s, dst.plan.summary.predicted_time_s);
  // The quantized weights of layers 2-3 cross the network at fp8: fewer
  // network bytes than all at the destination (bf16 less fp8 and scales).
  const QuantizedBytes q = DestinationQuantizedBytes(mix.plan);
  EXPECT_LT(mix.plan.summary.bytes_moved.network, dst.plan.summary.bytes_moved.network);
  EXPECT_LE(dst.plan.summary.bytes_moved.network - mix.plan.summary.bytes_moved.network, q.bf16_bytes - q.fp8_bytes);
  const PlanResult chosen = MakePlan(s, po);
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen.plan.summary.predicted_time_s, mix.plan.summary.predicted_time_s);
  EXPECT_EQ(chosen.plan.summary.memory_policy, mix.plan.summary.memory_policy);
  EXPECT_TRUE(Verify(chosen.plan).ok());
}

// plan.quantize_at forces the choice; other values name the field.
TEST(Fp8Planner, TheScenarioCanForceWhereToQuantize) {
  const std::string base = R"(
model: tiny-llama
cluster: h200-x2
source: {tp: 2}
destination: {tp: 1, dp: 2, dtype: fp8_e4m3, quantization: {block: [32, 32]}}
)";
  PlannerOptions po;
  po.simulate = false;
  const PlanResult d = MakePlan(ParseScenario(base + "plan: {quantize_at: destination}\n", "<q>"), po);
  const PlanResult s = MakePlan(ParseScenario(base + "plan: {quantize_at: source}\n", "<q>"), po);
  ASSERT_TRUE(d.ok() && s.ok());
  EXPECT_TRUE(d.plan.summary.memory_policy.ends_with("+quantize-at-destination")) << d.plan.summary.memory_policy;
  EXPECT_TRUE(s.plan.summary.memory_policy.ends_with("+quantize-at-source")) << s.plan.summary.memory_policy;
  try {
    ParseScenario(base + "plan: {quantize_at: trainer}\n", "q.yaml");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "plan.quantize_at");
    EXPECT_NE(e.problem().find("auto, source, destination"), std::string::npos) << e.problem();
  }
}

}  // namespace
}  // namespace reshard
