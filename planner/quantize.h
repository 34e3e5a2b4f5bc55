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
// Quantizing at the source (half the bytes on every link, but the source
// piece must cover whole blocks and the scales travel too) is not planned
// yet; QuantizedTransferBytes gives the bytes such a plan would move, for
// the choice and the at-scale arithmetic.
//
// Complexity: O(ops + destination pieces + tensors) for the rewrite.
#pragma once

#include <cstdint>

#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard {

// Rewrites `p`, a plan of `s` made with a bf16 destination, so that the
// destination holds what `*s.quantization` says. Throws InputError(s.path,
// "destination.tp", ...) when a destination rank's share of a quantized
// tensor cuts a block (vLLM refuses those too).
void QuantizeAtDestination(const Scenario& s, Plan& p);

// MakePlan for a scenario with a quantized destination: plans the bf16 view
// of `s`, quantizes at the destination and predicts the result again.
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
