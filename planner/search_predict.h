// The search step's predictions (planner/search.cc): a candidate simulated
// as the search simulates it, a sweep's known prediction, and a prediction
// written into a plan. Internal to planner/; with search.cc the only planner
// code that includes sim/ (tests/layering).
#pragma once

#include <optional>

#include "plan/plan.h"
#include "planner/known_plan.h"
#include "planner/planner.h"
#include "planner/search_candidates.h"
#include "sim/simulator.h"

namespace reshard::search_predict {

// A candidate's prediction, as PredictWithSimulator makes it (a warm refit,
// no op times, no lower bound: the summary has it).
Prediction SimulateCandidate(const Plan& plan);
// The same, or nullopt where the plan takes longer than `limit_s`
// (SimulateWithin).
std::optional<Prediction> SimulateCandidateWithin(const Plan& plan, double limit_s);
// The kept plan's prediction (time_s, peak_bytes and peak_parts; nothing else
// is set) when `plan` equals it (SameButSummary); nullopt otherwise or when
// `known` is null. Here, not in known_plan.h: only the search step may use
// the simulator's types.
std::optional<Prediction> KnownPrediction(const KnownPlan* known, const Plan& plan);
// Whether copies hold up `p`'s critical path enough for phase chunks to be
// tried (search_candidates.h kPhaseChunksMinCopyShare).
inline bool CopiesMayRepayChunks(const Prediction& p) {
  return static_cast<double>(p.critical_path.copy_ns) >=
         search_candidates::kPhaseChunksMinCopyShare * static_cast<double>(p.time_ns);
}
// Writes `pred`'s time and peak into the plan's summary and `stats`.
void ApplyPrediction(Plan& plan, PlanStats& stats, const Prediction& pred);

}  // namespace reshard::search_predict
