// The optimizer-offload choice of the baselines (planner/baseline_plan.h's
// Megatron-Core plan and bench/gpu/allgather_plan.h's all-gather refit), shared
// so both read a scenario's `memory.optimizer.offload` the same way. reshard's
// own planner searches finer fractions (planner/search.cc); this is what the
// stacks it is compared with do: NeMo-RL's offload_optimizer_for_refit is all
// or nothing.
#pragma once

#include <algorithm>
#include <optional>
#include <vector>

#include "model/scenario.h"

namespace reshard {

// The offload fractions a baseline tries, in order; it keeps the first whose
// refit fits (the last one when none does). none -> {0}, all -> {1}, a
// fraction -> {itself}, auto -> {0, 1} (none when that fits, else all).
// `forced` (a command-line override) wins over the scenario, clamped to [0, 1].
inline std::vector<double> BaselineOffloadFractions(const OptimizerConfig& opt, std::optional<double> forced = {}) {
  if (forced) return {std::clamp(*forced, 0.0, 1.0)};
  switch (opt.offload) {
    case OffloadMode::kAll: return {1};
    case OffloadMode::kFraction: return {opt.fraction};
    case OffloadMode::kNone: return {0};
    case OffloadMode::kAuto: return {0, 1};
  }
  return {0};
}

}  // namespace reshard
