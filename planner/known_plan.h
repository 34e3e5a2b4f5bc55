// The last plan a PlanSession bounded and simulated, kept with its numbers.
// Memory policies often change nothing in a large plan (no optimizer offload
// asked for, every destination layer allocated up front anyway), and a sweep
// plans them one after another: a plan equal to the kept one in everything
// the bounds and the simulator read (all but its summary) takes the kept
// lower bound, routing bound and prediction, which are functions of those
// parts, instead of being simulated again (large plans, simulated before
// their bounds are taken: KnownPrediction in planner/search.cc). Comparing costs O(plan size),
// a small part of one simulation.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard {

struct KnownPlan {
  std::optional<Plan> plan;  // its summary cleared
  double lower_bound_s = 0, routing_bound_s = 0, predicted_time_s = 0;
  std::vector<int64_t> predicted_peak_bytes;
  std::vector<MemoryParts> peak_parts;
};

// Plans equal but for their summaries.
bool SameButSummary(const Plan& a, const Plan& b);

// When `plan` equals the kept one (SameButSummary): gives its summary the
// kept bounds and prediction and `stats` the kept peak parts, and returns
// true; else changes nothing and returns false.
bool TakeKnown(const KnownPlan& known, Plan& plan, PlanStats& stats);

// Keeps a copy of `plan`, whose summary holds its bounds and simulated
// prediction (and `stats` its peak parts), in place of the kept one.
void Keep(KnownPlan& known, const Plan& plan, const PlanStats& stats);

}  // namespace reshard
