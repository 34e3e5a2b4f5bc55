// A simulated plan kept for equal plans (planner/known_plan.h).
#include "planner/known_plan.h"

namespace reshard {

bool SameButSummary(const Plan& a, const Plan& b) {
  // Cheap and most telling fields first.
  return a.ops.size() == b.ops.size() && a.buffers.size() == b.buffers.size() &&
         a.format_version == b.format_version && a.name == b.name && a.cluster_fingerprint == b.cluster_fingerprint &&
         a.scenario_fingerprint == b.scenario_fingerprint && a.stream_names == b.stream_names &&
         a.buffers == b.buffers && a.ops == b.ops && a.tensors == b.tensors && a.sources == b.sources &&
         a.destinations == b.destinations && a.cluster == b.cluster;
}

bool TakeKnown(const KnownPlan& known, Plan& plan, PlanStats& stats) {
  if (!known.plan || !SameButSummary(plan, *known.plan)) return false;
  PlanSummary& sum = plan.summary;
  sum.lower_bound_s = known.lower_bound_s;
  sum.routing_bound_s = known.routing_bound_s;
  sum.predicted_time_s = known.predicted_time_s;
  sum.predicted_peak_bytes = known.predicted_peak_bytes;
  stats.peak_parts = known.peak_parts;
  stats.predicted_by = "simulator";
  return true;
}

void Keep(KnownPlan& known, const Plan& plan, const PlanStats& stats) {
  known.plan.reset();  // the old copy freed before the new one is made
  known.plan = plan;
  known.plan->summary = PlanSummary{};
  known.lower_bound_s = plan.summary.lower_bound_s;
  known.routing_bound_s = plan.summary.routing_bound_s;
  known.predicted_time_s = plan.summary.predicted_time_s;
  known.predicted_peak_bytes = plan.summary.predicted_peak_bytes;
  known.peak_parts = stats.peak_parts;
}

}  // namespace reshard
