// FP8 refits: where the planner quantizes.
//
// Quantizing at the destination: the refit is planned as a bf16 one (every
// byte travels as the trainer holds it), then each destination buffer that
// holds quantized weights (model/quant.h: QuantConfig::Quantizes) becomes a
// bf16 assembly buffer: once its last byte has landed, one quantize op
// writes its pieces as fp8 values plus block scales into a new destination
// buffer (its bf16 pieces, norms and the like, are copied there by one
// copy op), and the assembly buffer is freed. The extra memory (the new
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
// MakeQuantizedPlan plans both and keeps the one predicted faster
// (PlannerOptions::quantize_at_source forces one).
//
// Complexity: O(ops + destination pieces + tensors) for the rewrite.
#pragma once

#include <cstdint>

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

// MakePlan for a scenario with a quantized destination: plans it quantized
// at the destination (the bf16 view of `s`, rewritten) and, where any weight
// can be, at the source; predicts both and keeps the faster (ties: the
// destination).
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
