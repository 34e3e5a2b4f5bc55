// FP8 refits quantized at the source (planner/quantize.h says when).
//
// Idea: plan bytes, not elements. The planner moves boxes of tensors with one
// element size; a "byte view" of the scenario makes every tensor a tensor of
// bytes (the last dimension times its element size), so one planner run
// moves bf16 weights (2 bytes an element), fp8 values (1) and scales (4, or 1
// for E8M0) together, through the same transfer set, source choice, relays,
// segments and memory ledger as a bf16 refit:
//  - the view's source holds, beside its bf16 weights, a staging buffer per
//    layer with the fp8 values and scales of every piece of a weight it can
//    quantize alone (the piece covers whole blocks: a TP split of the trainer
//    that cuts a block leaves that weight to the destination);
//  - the view's destination wants those weights as fp8 values and scales,
//    in its final buffers (each buffer: bf16 pieces and values in order, then
//    scales), so they are received where they stay, no assembly buffer.
// Then FinishSourceQuantized turns the view's plan into the scenario's: the
// staging part of each source buffer becomes its own buffer, allocated and
// filled by one quantize op (its tiles read the bf16 pieces in place) just
// before the first op that reads it, freed after the last; tiles whose bytes
// no transfer reads (a replica the planner did not pick) are dropped.
// Weights left to the destination are quantized there afterwards
// (QuantizeAtDestination on the mixed plan).
//
// Complexity: O(pieces) for the view, O(ops + pieces + tiles log tiles) for
// the rewrite; planning as for a bf16 refit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "planner/problem.h"

namespace reshard {

struct SourceQuantView {
  Scenario scenario;  // the byte view: tensors of bytes, dtype of one byte, no quantization
  std::shared_ptr<const ProblemInputs> inputs;  // its layouts and start memory
  int32_t model_tensors = 0;                    // the model's, first and with the same ids in the view
  std::vector<int32_t> values;                  // per model tensor: its values tensor (scales: +1), -1 if not at the source
  std::vector<int64_t> elem_bytes;              // per view tensor: bytes of one element of the real tensor
  int32_t at_source = 0, quantized = 0;         // weights quantized at the source, of all quantized weights
};

// The byte view of `s` (a bf16-trained scenario with a quantized
// destination); nullopt when no weight is quantized at its source. `wanted`
// (per model tensor; empty: every one) says which weights to quantize at the
// source: those of them that can be, the rest at the destination.
// Throws InputError(s.path, "destination.tp", ...) where a destination rank
// cuts a block, as QuantizeAtDestination.
std::optional<SourceQuantView> MakeSourceQuantView(const Scenario& s, const std::vector<bool>& wanted = {});

// Per model tensor: whether its trainer pieces let its holders quantize it
// alone (a quantized weight whose every source piece covers whole blocks,
// its last dimension contiguous).
std::vector<bool> SourceQuantizable(const Scenario& s, const Layout& src);

// Rewrites `p`, a plan of `v.scenario`, into a plan of `s` (see above), the
// weights not quantized at the source still bf16 at the destination.
void FinishSourceQuantized(const Scenario& s, const SourceQuantView& v, Plan& p);

}  // namespace reshard
