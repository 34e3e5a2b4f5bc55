// FP8 refits end to end on the host backend: tiny presets planned with a
// quantized destination (quantized at the destination after assembly) and
// run by the executor, every fp8 byte and every scale compared with the
// host's own quantization of the fill pattern.
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "model/error.h"
#include "model/scenario.h"
#include "plan/issue_order.h"
#include "planner/planner.h"
#include "planner/quantize.h"
#include "tests/executor/e2e_cases.h"

namespace reshard {
namespace {

struct Fp8Case {
  const char* name;
  const char* yaml;
};

class Fp8EndToEnd : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8EndToEnd, EveryFp8ByteAndScaleVerified) {
  const Scenario s = ParseScenario(GetParam().yaml, "<fp8-e2e>");
  ASSERT_TRUE(s.quantization.has_value());
  PlannerOptions po;
  po.simulate = true;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  const VerifyResult v = Verify(r.plan);
  ASSERT_TRUE(v.ok()) << v.problems[0];
  int64_t quantize_ops = 0;
  for (const Op& op : r.plan.ops) quantize_ops += op.kind == OpKind::kQuantize;
  EXPECT_GT(quantize_ops, 0);
  EXPECT_GT(r.plan.summary.predicted_time_s, 0);
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
  // The destination holds fp8 values and scales: fewer bytes than bf16.
  const QuantizedBytes qb = DestinationQuantizedBytes(r.plan);
  EXPECT_GT(qb.fp8_bytes, 0);
  EXPECT_GT(qb.scale_bytes, 0);
  EXPECT_LT(qb.AtSource(), qb.AtDestination());
  // JSON round trip of a whole planned fp8 plan.
  EXPECT_EQ(PlanFromJson(PlanToJson(r.plan), "<fp8>"), r.plan);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, Fp8EndToEnd,
    ::testing::Values(
        Fp8Case{"llama_tp2_to_tp1x2_block32", R"(
name: fp8-llama
model: tiny-llama
cluster: h200-x2
source: {tp: 2}
destination: {tp: 1, dp: 2, dtype: fp8_e4m3, quantization: {block: [32, 32]}}
plan: {segment_bytes: 256KiB}
)"},
        Fp8Case{"moe_ep2_to_tp2_mxfp8", R"(
name: fp8-moe
model: tiny-moe
cluster: h200-x2
source: {tp: 1, ep: 2, dp: 2}
destination: {tp: 2, dtype: fp8_e4m3, quantization: {scheme: mxfp8}}
plan: {segment_bytes: 256KiB}
)"},
        Fp8Case{"mla_tp1_ue8m0_experts_and_lm_head", R"(
name: fp8-mla
model: tiny-mla
cluster: {preset: h200-x2, nodes: 1, gpus_per_node: 1}
source: {tp: 1}
destination: {tp: 1, dtype: fp8_e4m3, quantization: {scale: ue8m0, classes: [experts, lm_head, attention]}}
)"},
        Fp8Case{"llama_tp1_per_tensor", R"(
name: fp8-tensor
model: tiny-llama
cluster: {preset: h200-x2, nodes: 1, gpus_per_node: 1}
source: {tp: 1}
destination: {tp: 1, dtype: fp8_e4m3, quantization: {scheme: tensor}}
)"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// Quantized at the source (forced): the trainer's GPUs quantize their bf16
// pieces into staging, fp8 values and scales travel and land in the final
// buffers; weights whose source pieces cut a block are still quantized at
// the destination. Every byte and scale is verified.
class Fp8AtSource : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8AtSource, EveryFp8ByteAndScaleVerified) {
  const Scenario s = ParseScenario(GetParam().yaml, "<fp8-source>");
  PlannerOptions po;
  po.quantize_at_source = true;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  const VerifyResult v = Verify(r.plan);
  ASSERT_TRUE(v.ok()) << v.problems[0];
  EXPECT_NE(r.plan.summary.memory_policy.find("+quantize-at-source"), std::string::npos)
      << r.plan.summary.memory_policy;
  // Some quantize op reads a source buffer (the trainer's weights).
  bool at_source = false;
  for (const Op& op : r.plan.ops)
    for (const QuantizeTile& t : op.tiles) at_source |= r.plan.buffers[t.input.buffer].role == BufferRole::kSourceWeights;
  EXPECT_TRUE(at_source);
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
  EXPECT_EQ(PlanFromJson(PlanToJson(r.plan), "<fp8>"), r.plan);
  // Fewer bytes between GPUs than the destination-quantized plan.
  po.quantize_at_source = false;
  const PlanResult d = MakePlan(s, po);
  ASSERT_TRUE(d.ok());
  const BytesMoved a = r.plan.summary.bytes_moved, b = d.plan.summary.bytes_moved;
  if (b.nvlink + b.network > 0) {
    EXPECT_LT(a.nvlink + a.network, b.nvlink + b.network);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, Fp8AtSource,
    ::testing::Values(
        Fp8Case{"llama_tp2_to_tp1x2_block32_all_at_source", R"(
name: fp8-llama-src
model: tiny-llama
cluster: h200-x2
source: {tp: 2}
destination: {tp: 1, dp: 2, dtype: fp8_e4m3, quantization: {block: [32, 32]}}
plan: {segment_bytes: 256KiB}
)"},
        // k_proj / v_proj: 2 KV heads x 32 rows, 32 per trainer rank, half a
        // 64-row block: those two go bf16 and are quantized after assembly.
        Fp8Case{"llama_tp2_block64_cut_kv_at_destination", R"(
name: fp8-llama-mixed
model: tiny-llama
cluster: h200-x2
source: {tp: 2}
destination: {tp: 1, dp: 2, dtype: fp8_e4m3, quantization: {block: [64, 64]}}
plan: {segment_bytes: 128KiB}
)"},
        Fp8Case{"moe_ep2_to_tp2_mxfp8", R"(
name: fp8-moe-src
model: tiny-moe
cluster: h200-x2
source: {tp: 1, ep: 2, dp: 2}
destination: {tp: 2, dtype: fp8_e4m3, quantization: {scheme: mxfp8}}
plan: {segment_bytes: 256KiB}
)"},
        Fp8Case{"mla_one_gpu_ue8m0", R"(
name: fp8-mla-src
model: tiny-mla
cluster: {preset: h200-x2, nodes: 1, gpus_per_node: 1}
source: {tp: 1}
destination: {tp: 1, dtype: fp8_e4m3, quantization: {scale: ue8m0, classes: [experts, lm_head, attention]}}
)"},
        Fp8Case{"moe_two_nodes_disaggregated_block64", R"(
name: fp8-moe-disagg
model: tiny-moe
cluster: {preset: dgx-h100, nodes: 2, gpus_per_node: 2, nics_per_node: 2}
source: {tp: 2, ep: 2, gpus: "0-1"}
destination: {tp: 2, ep: 2, dtype: fp8_e4m3, quantization: {block: [64, 64]}, gpus: "2-3"}
plan: {segment_bytes: 64KiB}
)"},
        Fp8Case{"llama_per_tensor_tp1_to_dp2", R"(
name: fp8-tensor-src
model: tiny-llama
cluster: h200-x2
source: {tp: 1, dp: 2}
destination: {tp: 1, dp: 2, dtype: fp8_e4m3, quantization: {scheme: tensor}}
)"}),
    [](const auto& param_info) { return std::string(param_info.param.name); });

// Verify on plans quantized at the source: a send that reads staging must be
// ordered after the quantize that fills it; staging is a buffer like any
// other (bounds, lifetime).
TEST(Fp8AtSourceVerify, StagingReadBeforeItsQuantizeIsReported) {
  const Scenario s = ParseScenario(R"(
model: tiny-moe
cluster: {preset: dgx-h100, nodes: 2, gpus_per_node: 2, nics_per_node: 2}
source: {tp: 2, ep: 2, gpus: "0-1"}
destination: {tp: 2, ep: 2, dtype: fp8_e4m3, quantization: {block: [64, 64]}, gpus: "2-3"}
plan: {segment_bytes: 64KiB, direct_min_bytes: 0}
)",
                                   "<fp8-verify>");
  PlannerOptions po;
  po.quantize_at_source = true;
  po.simulate = false;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_TRUE(Verify(r.plan).ok()) << Verify(r.plan).problems[0];
  // Sends straight from staging (direct_min_bytes 0) run on the comm
  // stream and depend on the quantize; without that dependency Verify names
  // the unordered read. A group is one launch that waits for every
  // dependency of its ops, so the dependency goes from all ops of the send's
  // group on its GPU.
  int reported = 0, tried = 0;
  for (const Op& q : r.plan.ops) {
    if (q.kind != OpKind::kQuantize) continue;
    for (const Op& op : r.plan.ops) {
      if (op.stream == q.stream || std::find(op.deps.begin(), op.deps.end(), q.id) == op.deps.end()) continue;
      Plan bad = r.plan;
      for (Op& member : bad.ops)
        if (member.id == op.id || (op.group >= 0 && member.group == op.group && member.gpu == op.gpu))
          std::erase(member.deps, q.id);
      ++tried;
      const VerifyResult v = Verify(bad);
      for (const std::string& problem : v.problems)
        reported += problem.find("quantizes, but is not ordered after it") != std::string::npos;
    }
  }
  EXPECT_GT(tried, 0);
  EXPECT_GT(reported, 0);
  // A staging buffer one byte short: its last tile writes out of bounds.
  Plan small = r.plan;
  for (PlanBuffer& b : small.buffers)
    if (b.role == BufferRole::kStaging && b.name.rfind("fp8 src", 0) == 0) {
      b.bytes -= 1;
      break;
    }
  EXPECT_FALSE(Verify(small).ok());
}

// A per-weight placement: the experts (whose trainer copy is on another
// node) quantized at the source, the dense weights (a trainer copy on the
// engine's GPU) at the destination, in one plan; every fp8 byte and scale
// verified on the host backend.
TEST(Fp8Mixed, ExpertsAtTheSourceDenseAtTheDestinationVerified) {
  const Scenario s = ParseScenario(R"(
name: fp8-mixed
model: tiny-moe
cluster: {preset: dgx-h100, nodes: 2, gpus_per_node: 2, nics_per_node: 1}
source: {tp: 1, ep: 2, dp: 2, gpus: "0,2"}
destination: {tp: 1, dtype: fp8_e4m3, quantization: {block: [64, 64]}, gpus: "0"}
plan: {segment_bytes: 64KiB}
)",
                                   "<fp8-mixed>");
  const std::vector<QuantizePlacement> placements = QuantizePlacements(s);
  const auto it = std::find_if(placements.begin(), placements.end(),
                               [](const QuantizePlacement& c) { return c.rule == "gpu-boundary"; });
  ASSERT_NE(it, placements.end());
  PlannerOptions po;
  po.simulate = false;
  const PlanResult r = PlanQuantizedAt(s, po, it->at_source);
  ASSERT_TRUE(r.ok()) << r.message;
  ASSERT_TRUE(Verify(r.plan).ok()) << Verify(r.plan).problems[0];
  // tiny-moe: 4 MoE layers x 3 stacked expert weights at the source, of 28
  // quantized weights (4 layers x (4 attention + 3 experts)).
  EXPECT_TRUE(r.plan.summary.memory_policy.ends_with("+quantize-at-source-12-of-28")) << r.plan.summary.memory_policy;
  // Quantize ops on both sides: tiles reading the trainer's weights, and
  // tiles reading the destination's bf16 assembly buffers.
  int from_source = 0, after_assembly = 0;
  for (const Op& op : r.plan.ops)
    for (const QuantizeTile& t : op.tiles) {
      const bool src = r.plan.buffers[t.input.buffer].role == BufferRole::kSourceWeights;
      from_source += src;
      after_assembly += !src;
    }
  EXPECT_GT(from_source, 0);
  EXPECT_GT(after_assembly, 0);
  testing::ExpectHostRunVerifies(r.plan, "fp8_mixed_experts_at_source");
  EXPECT_EQ(PlanFromJson(PlanToJson(r.plan), "<fp8>"), r.plan);
}

TEST(Fp8Planner, ASplitThatCutsABlockNamesTheField) {
  // tiny-llama's k_proj has 2 KV heads x 32 = 64 rows: TP2 gives each rank 32
  // rows, half a 64-row block.
  const Scenario s = ParseScenario(R"(
model: tiny-llama
cluster: h200-x2
source: {tp: 2}
destination: {tp: 2, dtype: fp8_e4m3, quantization: {block: [64, 64]}}
)",
                                   "cut.yaml");
  try {
    MakePlan(s);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cut.yaml");
    EXPECT_EQ(e.field(), "destination.tp");
    EXPECT_NE(e.problem().find("cut its 64 x 64 quantization blocks"), std::string::npos) << e.problem();
  }
}

}  // namespace
}  // namespace reshard
