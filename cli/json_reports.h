// The verbs' --json results (docs/json.md) as functions of what each verb
// computed, shared by the `reshard` command and the Python module (python/),
// so the field names of both come from one place. `reshard sweep --json` is
// nlohmann::json(SweepResult) (planner/sweep.h); `reshard run --json` is
// RunJson (cli/run_common.h).
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "cli/host_memory.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace reshard::cli {

// `reshard inspect --json`: sizes, per-GPU bytes and memory at refit start,
// cost terms, and whether the start (and the refit's floor) fits: "fits",
// "missing_bytes", "worst_gpu", "message".
nlohmann::json InspectJson(const Scenario& s);

// `reshard plan --json` for a plan of `s` (r.ok()): the summary, "fits"
// (every peak within capacity less reserve), the planner's counts; "baseline"
// and "plan" (the output path) when not empty.
nlohmann::json PlanJson(const Scenario& s, const PlanResult& r, const std::string& baseline, const std::string& output);

// What plan / simulate / run print with --json when the scenario does not
// fit (!r.ok()): scenario, fits false, gpu, missing_bytes, message.
nlohmann::json InfeasibleJson(const Scenario& s, const PlanResult& r);

// What run / validate print with --json when the host backend refuses a plan
// larger than this machine's memory (exit 3): plan, backend, verified and
// fits false, missing_bytes, message, host_memory {needed_bytes,
// available_bytes, source}.
nlohmann::json HostMemoryJson(const HostMemoryError& e);

// `reshard simulate --json`: the Prediction plus plan, segment_bytes,
// offload_fraction, the peak's parts against capacity less `reserve_bytes`,
// and the trace (path, detail, events, bytes) when `trace` is not empty.
nlohmann::json SimulateJson(const Plan& plan, const Prediction& pr, int64_t reserve_bytes, const std::string& trace,
                            const TraceWritten& written);

}  // namespace reshard::cli
