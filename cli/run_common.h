// What `reshard run` and `reshard validate` share: their flags, getting the
// plan (a plan.json, or the planner's plan of a scenario, made once on rank 0
// and broadcast under mpirun), choosing the backend, running the plan N times
// on that one backend (its pinned host buffers kept from run to run), the JSON
// of the plan's prediction, the measured trace, and the verb's registration.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "cli/inputs.h"
#include "executor/executor.h"
#include "plan/plan.h"
#include "sim/trace.h"

namespace CLI {
class App;
}

namespace reshard {
class MpiSession;
}

namespace reshard::cli {

struct ExecuteArgs {
  TargetArgs target;
  std::string backend = "host";
  std::string save_plan;
  std::string trace;  // --trace: the chosen run's op times as a Perfetto trace (validate: beside the prediction's)
  int32_t repeat = 1;
  int32_t max_mismatches = 20;
  double timeout_s = 0;  // --timeout; 0: the backend's default (host 60 s; NCCL RESHARD_NCCL_TIMEOUT_S or 300 s)
  bool no_warmup = false;
  bool no_check_run = false;  // --no-check-run: the NCCL backend's poisoned check run skipped
  bool json = false;
};
void AddExecuteOptions(CLI::App* cmd, ExecuteArgs& a);

struct ExecuteOutcome {
  Plan plan;
  std::vector<Measurement> runs;  // rank 0: complete measurements
  size_t chosen = 0;              // the median run by time
  // NCCL backend: one untimed check run before the timed ones, with every
  // buffer allocated during the run poisoned first (ExecOptions::check_run).
  std::optional<Measurement> check;
  bool verified = false;          // every run verified, the check run too
  // A run that failed part-way (RunError: a fault, a timeout, a GPU error):
  // what happened and where. Nothing of it counts as verified.
  std::string failure;
  int32_t failed_op = -1, failed_gpu = -1;
  bool failed() const { return !failure.empty(); }
  const Measurement& Chosen() const { return runs[chosen]; }
};

// Joins the MPI job when started by a launcher, runs `body` and, on an error
// in a multi-process run, aborts every process (the others would wait
// forever). `body` gets the session (nullptr for one process) and reports
// whether this process is rank 0.
void WithProcesses(const std::function<void(const MpiSession* mpi, bool root)>& body);

// Plans (or reads) the target, runs it args.repeat times on one backend.
ExecuteOutcome ExecuteTarget(const ExecuteArgs& args, const MpiSession* mpi);
// Runs `plan` args.repeat times on one backend (args.backend, timeout,
// mismatches, warm-up; args.target names the plan in messages), after one
// check run on the NCCL backend (ExecuteOutcome::check). The caller
// has verified the plan. Throws HostMemoryError (cli/host_memory.h) when the
// host backend would need more than this machine's memory.
ExecuteOutcome ExecutePlan(Plan plan, const ExecuteArgs& args, const MpiSession* mpi);

// DESIGN's result fields from the plan's own prediction (PlanSummary).
nlohmann::json PredictedJson(const Plan& plan);
// `reshard run --json` of a run that finished: PredictedJson, backend,
// verified, measured (MeasuredJson) and "trace" when args.trace is set.
nlohmann::json RunJson(const ExecuteArgs& args, const ExecuteOutcome& o);
// `measured`: the Measurement plus the plan-level fields and every run's time.
nlohmann::json MeasuredJson(const ExecuteOutcome& o);
// One line on the check run ("" when there was none).
std::string CheckRunLine(const ExecuteOutcome& o);

// The chosen run's measured op times (CUDA events on the NCCL backend) as a
// trace timeline named "measured".
Timeline MeasuredTimeline(const Measurement& m);

// Exits 1 with a message when some run did not verify.
void FailUnlessVerified(const ExecuteOutcome& o);
// When a run failed part-way: prints the failure (with --json as JSON:
// verified false, error, failed_op, failed_gpu) and exits 1.
void ExitIfRunFailed(const ExecuteArgs& a, const ExecuteOutcome& o);

// Adds a verb that executes its target (AddExecuteOptions, ExecuteTarget in
// every process) and, on rank 0, reports a failed run, calls `report` and
// exits 1 unless every run verified: `reshard run` and `reshard validate`.
using ReportOutcome = void (*)(const ExecuteArgs& a, const ExecuteOutcome& o);
void RegisterExecuteVerb(CLI::App& app, const std::string& name, const std::string& description,
                         ReportOutcome report);

}  // namespace reshard::cli
