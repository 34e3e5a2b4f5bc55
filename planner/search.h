// The search behind MakePlan (planner/planner.h): which segment size, in-place
// threshold and memory policy to plan with, chosen by predicting candidate
// plans. Also the predictions every planner's result carries (reshard's and
// the baselines'): the lower bound and the simulator's time and peak.
//
// This file's implementation is the only planner code that calls the
// simulator (sim/): the rest of planner/ builds plans without predicting them.
#pragma once

#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard {

// The lower bound of `plan`'s own routing (sim/ports.h: max over ports of the bytes
// the plan puts on a port / its bandwidth), in seconds.
double LowerBoundSeconds(const Plan& plan);

// Simulates `plan` (a warm refit, no op times kept) and writes the predicted
// time and per-GPU peak into its summary; stats.predicted_by = "simulator".
void PredictWithSimulator(Plan& plan, PlanStats& stats);

}  // namespace reshard
