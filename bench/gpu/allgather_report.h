// What the all-gather refit baseline prints and writes: the plan (text and
// JSON), the measured result as JSON (units in names: time_s, *_bytes,
// algbw_bytes_per_s) and its table and RESULT line. The JSON keys are what
// the runner scripts (bench/gpu/*.sh) read.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "bench/gpu/allgather_plan.h"
#include "bench/gpu/allgather_run.h"
#include "model/scenario.h"

namespace reshard::baseline {

// "256MiB", "1GiB-oop", "per-tensor", "flat".
std::string ModeLabel(const RefitPlan& p);

// The plan, memory included, for a human.
void PrintPlan(const RefitPlan& p, const Scenario& s);
// The plan's part of every JSON result (program, scenario, mode, sizes, planned memory).
nlohmann::json PlanJson(const RefitPlan& p);
// PlanJson plus what the GPU run measured: medians over the timed runs, the
// phase breakdown (max over GPUs), memory per GPU, verification.
nlohmann::json ResultJson(const RefitPlan& p, const RunResult& r);
// Writes `j` to `path` (nothing when empty); InputError("<cli>", "out") when it cannot.
void WriteJson(const std::string& path, const nlohmann::json& j);
// The table row, the runs and the RESULT line of a ResultJson.
void PrintResult(const nlohmann::json& j);

}  // namespace reshard::baseline
