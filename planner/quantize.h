// FP8 refits: where the planner quantizes.
//
// Quantizing at the destination: the refit is planned as a bf16 one (every
// byte travels as the trainer holds it), then each destination buffer that
// holds quantized weights (model/quant.h: QuantConfig::Quantizes) becomes a
// bf16 assembly buffer: once its last byte has landed, one quantize op
// writes its pieces as fp8 values plus block scales into a new destination
// buffer (its bf16 pieces, norms and the like, are copied there by one
// copy op), and the assembly buffer is freed; these ops follow the last
// write in op order, or its NCCL group's last op where that write is a
// receive (inside the group they could precede an allocation a later
// receive of the group waits for). The extra memory (the new
// buffer beside the assembly buffer, for the length of one quantize) is in
// the plan's alloc / free ops, so the simulator's peak counts it.
//
// Quantizing at the source (planner/quantize_source.h): the trainer's GPUs
// quantize the pieces they hold (where those cover whole blocks) into fp8
// staging, and fp8 values plus scales travel: half the bytes on every link,
// plus the scales, the quantize on the trainer's side. Weights whose source
// pieces cut a block stay bf16 and are quantized at the destination in the
// same plan.
//
// Where is chosen per weight, by the simulator (MakeQuantizedPlan): each
// way has its costs — at the source fp8 plus scales over the links and a
// quantize on the trainer's GPU per piece it sends; at the destination bf16
// over the links, a quantize per destination replica and an assembly
// buffer — so a few placements (QuantizePlacements: every weight at the
// destination, every one at the source, at the source only the weights
// whose bytes cross a GPU boundary or the network, only the experts, only
// the dense weights) are planned and predicted, and the fastest kept
// (PlannerOptions::quantize_at_source forces one extreme).
//
// Complexity: O(ops + destination pieces + tensors) for the rewrite.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard {

// Rewrites `p`, a plan of `s` made with a bf16 destination (or one already
// quantized at the source for some weights), so that the destination holds
// what `*s.quantization` says. Throws InputError(s.path,
// "destination.tp", ...) when a destination rank's share of a quantized
// tensor cuts a block (vLLM refuses those too).
void QuantizeAtDestination(const Scenario& s, Plan& p);

// A candidate placement: which weights are quantized at the source.
struct QuantizePlacement {
  std::string rule;             // "destination", "source", "gpu-boundary", "node-boundary", "experts", "dense"
  std::vector<bool> at_source;  // per model tensor; only weights whose source pieces cover whole blocks
  int32_t at_source_count = 0;
};
// The placements MakeQuantizedPlan predicts, in this order, each mask once:
// none at the source; every weight that can be; those with destination
// bytes on a GPU (node) that holds no trainer copy of them; the experts;
// the dense weights. Placements that equal an earlier one, or (after the
// first) put nothing at the source, are left out. O(source pieces log +
// destination pieces x trainer boxes per GPU).
std::vector<QuantizePlacement> QuantizePlacements(const Scenario& s);

// `s` planned with the weights of `at_source` (per model tensor) quantized
// at the source, the rest at the destination; all at the destination when
// none is set or none can be.
PlanResult PlanQuantizedAt(const Scenario& s, const PlannerOptions& options, const std::vector<bool>& at_source);

// MakePlan for a scenario with a quantized destination: plans every
// placement of QuantizePlacements, predicts each and keeps the fastest
// (ties: the earlier, so the destination over the source). Their searches
// keep rounds of 1 and 2 (a round per phase can close a cycle through the
// quantize ops); where none was asked, the placement kept is then planned
// as a round per phase too, kept where it fits, can be issued and is
// predicted faster (deepseek-v3 PP16xEP16 -> TP8xDP32 fp8: 164.0 -> 153.7 ms).
PlanResult MakeQuantizedPlan(const Scenario& s, const PlannerOptions& options);

// Bytes of what a plan sends, by what it sends, when quantized tensors travel
// as bf16 (quantized at the destination) or as fp8 plus scales (at the
// source): `bf16_bytes` of the quantized tensors' elements at 2 bytes,
// `fp8_bytes` at 1 byte, `scale_bytes` of their scales, `plain_bytes` of the
// rest. Sums over the plan's destination pieces (what each destination GPU
// must receive), O(pieces).
struct QuantizedBytes {
  int64_t plain_bytes = 0, bf16_bytes = 0, fp8_bytes = 0, scale_bytes = 0;
  int64_t AtDestination() const { return plain_bytes + bf16_bytes; }
  int64_t AtSource() const { return plain_bytes + fp8_bytes + scale_bytes; }
};
QuantizedBytes DestinationQuantizedBytes(const Plan& quantized_plan);
// The same from the scenario's destination layout alone (no plan): what all
// destination ranks together receive, O(ranks x pieces per rank). With
// s.quantization unset every byte is plain. Throws InputError(s.path,
// "destination.tp", ...) where a rank's share cuts a block, as the planner.
QuantizedBytes ScenarioQuantizedBytes(const Scenario& s);

}  // namespace reshard
