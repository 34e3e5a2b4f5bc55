// The search step's predictions (planner/search_predict.h) and the
// prediction functions of planner/search.h. O(simulation) each.
#include "planner/search_predict.h"

#include <limits>

#include "planner/search.h"
#include "sim/ports.h"
#include "sim/topology_bound.h"

namespace reshard {

namespace search_predict {

std::optional<Prediction> SimulateCandidateWithin(const Plan& plan, double limit_s) {
  SimOptions so{nullptr, false};
  so.lower_bound = false;  // the summary has it
  return SimulateWithin(plan, limit_s, so);
}

Prediction SimulateCandidate(const Plan& plan) {
  return *SimulateCandidateWithin(plan, std::numeric_limits<double>::infinity());
}

std::optional<Prediction> KnownPrediction(const KnownPlan* known, const Plan& plan) {
  if (!known || !known->plan || !SameButSummary(plan, *known->plan)) return std::nullopt;
  Prediction p;
  p.time_s = known->predicted_time_s;
  p.peak_bytes = known->predicted_peak_bytes;
  p.peak_parts = known->peak_parts;
  return p;
}

void ApplyPrediction(Plan& plan, PlanStats& stats, const Prediction& pred) {
  plan.summary.predicted_time_s = pred.time_s;
  plan.summary.predicted_peak_bytes = pred.peak_bytes;
  stats.peak_parts = pred.peak_parts;
  stats.predicted_by = "simulator";
}

}  // namespace search_predict

double LowerBoundSeconds(const Plan& plan) { return TopologyLowerBound(plan).time_s; }
double RoutingBoundSeconds(const Plan& plan) { return LowerBound(plan).time_s; }

void PredictWithSimulator(Plan& plan, PlanStats& stats) {
  search_predict::ApplyPrediction(plan, stats, search_predict::SimulateCandidate(plan));
}

}  // namespace reshard
