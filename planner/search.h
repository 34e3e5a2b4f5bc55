// The search behind MakePlan (planner/planner.h): which segment size, in-place
// threshold and memory policy to plan with, chosen by predicting candidate
// plans. Also the predictions every planner's result carries (reshard's and
// the baselines'): the lower bound and the simulator's time and peak.
//
// This file's implementation (search.cc, search_predict.cc) is the only
// planner code that calls the simulator (sim/): the rest of planner/ builds
// plans without predicting them.
#pragma once

#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard {

// The least time any plan of `plan`'s contents could take on its cluster
// (sim/topology_bound.h), in seconds.
double LowerBoundSeconds(const Plan& plan);
// The bound of `plan`'s own routing (sim/ports.h: max over ports of the bytes
// the plan puts on a port / its bandwidth), in seconds.
double RoutingBoundSeconds(const Plan& plan);

// Simulates `plan` (a warm refit, no op times kept) and writes the predicted
// time and per-GPU peak into its summary; stats.predicted_by = "simulator".
void PredictWithSimulator(Plan& plan, PlanStats& stats);

struct Problem;
class Routings;
struct KnownPlan;
namespace search_candidates {
class ScheduleCache;
}

// MakePlan's search on a problem already set up; `routes` and `cache` may
// hold earlier plans' work (PlanSession), and so may `known`: that changes
// nothing but time. plan_session.cc calls it (MakePlan, PlanSession::Plan).
PlanResult PlanProblem(const Scenario& s, const PlannerOptions& options, Problem& prob, Routings& routes,
                       search_candidates::ScheduleCache& cache, KnownPlan* known = nullptr);

}  // namespace reshard
