#include "cli/run_common.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/common.h"
#include "cli/host_memory.h"
#include "cli/inputs.h"
#include "cli/json_reports.h"
#include "executor/host_backend.h"
#include "executor/mpi_session.h"
#include "model/error.h"
#ifdef RESHARD_HAVE_NCCL
#include "executor/nccl/backend.h"
#endif

namespace reshard::cli {

namespace {

#ifdef RESHARD_HAVE_NCCL
// A number of seconds from the environment: finite and > 0.
double EnvSeconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !std::isfinite(s) || s <= 0 || s > kMaxTimeoutS)
    throw InputError("<environment>", name,
                     fmt::format("must be a finite number of seconds in (0, {:g}], got '{}'", kMaxTimeoutS, v));
  return s;
}
#endif

// RESHARD_FAULT="gpu=G,op=N": a drill (backend.h FaultInjection).
FaultInjection FaultFromEnvironment() {
  const char* v = std::getenv("RESHARD_FAULT");
  return v == nullptr ? FaultInjection{} : ParseFaultSpec(v, "<environment>");
}

// Rank 0 plans; every rank gets the same plan (one source of truth).
Plan SharedPlan(const ExecuteArgs& a, const MpiSession* mpi) {
  if (mpi == nullptr || mpi->size() == 1) return PlanOfTarget(a.target, false);
  std::string text;
  if (mpi->rank() == 0) text = PlanToJson(PlanOfTarget(a.target, false)).dump();
  int64_t length = static_cast<int64_t>(text.size());
  mpi->Broadcast(&length, sizeof(length), 0);
  text.resize(static_cast<size_t>(length));
  mpi->Broadcast(text.data(), length, 0);
  return PlanFromJson(nlohmann::json::parse(text), a.target.target);
}

std::unique_ptr<Backend> MakeBackend(const ExecuteArgs& a, const MpiSession* mpi) {
  if (a.backend == "nccl") {
#ifdef RESHARD_HAVE_NCCL
    NcclBackendOptions n;
    n.mpi = mpi;
    n.warm_pool = !a.no_warmup;
    // Experiment knobs (not flags: they tune the backend, not the plan).
    if (const char* v = std::getenv("RESHARD_COPY_BLOCKS_PER_SM"); v != nullptr) n.copy_blocks_per_sm = std::atoi(v);
    if (const char* v = std::getenv("RESHARD_COPY_MAX_BLOCKS"); v != nullptr) n.copy_max_blocks = std::atoi(v);
    if (const char* v = std::getenv("RESHARD_HOST_COPIES_BY_KERNEL"); v != nullptr) n.host_copies_by_kernel = *v == '1';
    n.timeout_s = a.timeout_s > 0 ? a.timeout_s : EnvSeconds("RESHARD_NCCL_TIMEOUT_S", n.timeout_s);
    if (const char* v = std::getenv("RESHARD_NCCL_BLOCKING"); v != nullptr) n.nonblocking_comms = *v != '1';
    n.fault = FaultFromEnvironment();
    return MakeNcclBackend(n);
#else
    throw InputError("<cli>", "--backend",
                     "this reshard was built without the NCCL backend (CMake found no CUDA toolkit with NCCL; see "
                     "the configure log); use --backend host");
#endif
  }
  HostBackendOptions h;
  h.mpi = mpi;
  if (a.timeout_s > 0) h.timeout_s = a.timeout_s;
  h.fault = FaultFromEnvironment();
  return MakeHostBackend(h);
}

int ExitCodeOf(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e) != nullptr) return kExitInput;
  return kExitInternal;
}

}  // namespace

void AddExecuteOptions(CLI::App* cmd, ExecuteArgs& a) {
  AddTargetOptions(cmd, a.target);
  cmd->add_option("--backend", a.backend, "host (threads, runs anywhere) or nccl (CUDA + NCCL on GPUs)")
      ->check(CLI::IsMember({"host", "nccl"}));
  cmd->add_option("--save-plan", a.save_plan, "write the plan that ran as JSON to this path");
  cmd->add_option("--trace", a.trace,
                  "write the measured op times of the reported run as a Perfetto / Chrome trace (JSON) to this path");
  cmd->add_option("--repeat", a.repeat, "run the plan N times on the same backend and report the median run")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--max-mismatches", a.max_mismatches, "mismatching elements listed (all are counted)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--timeout", a.timeout_s,
                  "seconds a wait may last before the run fails (host: a receive, default 60; nccl: any GPU wait, then "
                  "ncclCommAbort, default RESHARD_NCCL_TIMEOUT_S or 300)")
      ->check(PositiveFiniteNumber());
  cmd->add_flag("--no-warmup", a.no_warmup,
                "time cold: do not connect NCCL peers or grow the allocator's pool before timing");
  cmd->add_flag("--no-check-run", a.no_check_run,
                "nccl: skip the untimed check run that poisons every buffer allocated during the run before the "
                "timed runs (then memory the allocator reuses is not poisoned)");
  cmd->add_flag("--json", a.json, "machine-readable output (every field: docs/json.md)");
}

void WithProcesses(const std::function<void(const MpiSession* mpi, bool root)>& body) {
  const std::unique_ptr<MpiSession> mpi = MpiSession::FromEnvironment();
  try {
    body(mpi.get(), mpi == nullptr || mpi->rank() == 0);
  } catch (const CLI::RuntimeError&) {
    throw;
  } catch (const std::exception& e) {
    if (mpi != nullptr && mpi->size() > 1) {
      std::cerr << fmt::format("rank {}: error: {}\n", mpi->rank(), e.what());
      mpi->Abort(ExitCodeOf(e));
    }
    throw;
  }
}

ExecuteOutcome ExecuteTarget(const ExecuteArgs& a, const MpiSession* mpi) {
  // Bad input writes nothing: checked before any work.
  const std::vector<std::string> inputs = {a.target.target, a.target.scenario, a.target.calibration};
  CheckOutputPath(a.save_plan, "--save-plan", inputs);
  CheckOutputPath(a.trace, "--trace", inputs);
  ExecuteOutcome out = ExecutePlan(SharedPlan(a, mpi), a, mpi);
  // Written once the plan passed every check (Verify, the executor's, the
  // backend's): input refused on the way leaves no file behind.
  if ((mpi == nullptr || mpi->rank() == 0) && !a.save_plan.empty()) WritePlan(out.plan, a.save_plan);
  return out;
}

ExecuteOutcome ExecutePlan(Plan plan, const ExecuteArgs& a, const MpiSession* mpi) {
  ExecuteOutcome out;
  out.plan = std::move(plan);
  const bool one_process = mpi == nullptr || mpi->size() == 1;
  if (a.backend == "host" && one_process) {
    // Before anything is allocated: a plan larger than the machine would be killed by the kernel, silently.
    const int64_t need = HostBackendBytes(out.plan);
    if (const std::optional<HostMemory> m = ReadHostMemory(); m && need > m->available_bytes)
      throw HostMemoryError(out.plan.name, need, *m);
  }
  std::unique_ptr<Backend> backend = MakeBackend(a, mpi);
  ExecOptions eo;
  eo.plan_source = a.target.target;
  eo.max_mismatches = a.max_mismatches;
  eo.warmup = !a.no_warmup;
  // A destination buffer allocated during the run may get memory the pool
  // took back from a buffer with the same bytes (a colocated source): only a
  // run that poisons such memory proves every write happened. Timed runs skip
  // the memsets.
  const bool check_run = a.backend == "nccl" && !a.no_check_run;
  for (int32_t i = check_run ? -1 : 0; i < std::max(a.repeat, 1); ++i) {
    try {
      eo.check_run = i < 0;
      Measurement m = Execute(out.plan, *backend, eo);
      if (i < 0) out.check = std::move(m);
      else out.runs.push_back(std::move(m));
    } catch (const RunError& e) {
      if (!one_process) throw;  // WithProcesses aborts the other processes
      out.failure = e.what();
      out.failed_op = e.op();
      out.failed_gpu = e.gpu();
      break;
    }
  }
  backend.reset();
  if (out.failed()) return out;
  std::vector<size_t> order(out.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return out.runs[x].time_s < out.runs[y].time_s; });
  out.chosen = order[order.size() / 2];
  out.verified = std::all_of(out.runs.begin(), out.runs.end(), [](const Measurement& r) { return r.verified; }) &&
                 (!out.check || out.check->verified);
  return out;
}

nlohmann::json PredictedJson(const Plan& plan) {
  nlohmann::json j = PlanSummaryJson(plan.summary);
  j["plan"] = plan.name;
  return j;
}

nlohmann::json RunJson(const ExecuteArgs& a, const ExecuteOutcome& o) {
  nlohmann::json j = PredictedJson(o.plan);
  j["backend"] = o.Chosen().backend;
  j["verified"] = o.verified;
  j["measured"] = MeasuredJson(o);
  if (!a.trace.empty()) j["trace"] = a.trace;
  return j;
}

nlohmann::json MeasuredJson(const ExecuteOutcome& o) {
  const Measurement& m = o.Chosen();
  const PlanSummary& s = o.plan.summary;
  nlohmann::json j = m;
  j["lower_bound_s"] = s.lower_bound_s;
  j["plan_efficiency"] = PlanEfficiency(s.lower_bound_s, m.time_s);
  j["routing_bound_s"] = s.routing_bound_s;
  j["segment_bytes"] = s.segment_bytes;
  j["offload_fraction"] = s.offload_fraction;
  std::vector<double> times;
  for (const Measurement& r : o.runs) times.push_back(r.time_s);
  j["runs_time_s"] = times;
  if (o.check)
    j["check_run"] = {{"verified", o.check->verified},
                      {"mismatch_count", o.check->mismatch_count},
                      {"checked_bytes", o.check->checked_bytes},
                      {"time_s", o.check->time_s}};
  return j;
}

std::string CheckRunLine(const ExecuteOutcome& o) {
  if (!o.check) return "";
  const Measurement& c = *o.check;
  return fmt::format("check run (untimed; every buffer allocated during the run poisoned first): {}, {:.3f} ms\n",
                     c.verified ? "every destination byte verified"
                                : fmt::format("NOT verified, {} mismatching elements", c.mismatch_count),
                     c.time_s * 1e3);
}

Timeline MeasuredTimeline(const Measurement& m) {
  Timeline t;
  t.name = "measured";
  for (const OpTime& o : m.op_times)
    t.ops.push_back({o.op, std::llround(o.start_s * 1e9), std::llround(o.end_s * 1e9)});
  return t;
}

void ExitIfRunFailed(const ExecuteArgs& a, const ExecuteOutcome& o) {
  if (!o.failed()) return;
  if (a.json) {
    nlohmann::json j = PredictedJson(o.plan);
    j["backend"] = a.backend;
    j["verified"] = false;
    j["error"] = o.failure;
    j["failed_op"] = o.failed_op;
    j["failed_gpu"] = o.failed_gpu;
    j["completed_runs"] = o.runs.size();
    PrintJson(j);
  }
  std::cerr << fmt::format("run failed: {}\nNOT verified: the run did not finish, so no destination counts as refit\n",
                           o.failure);
  ExitWith(kExitInternal);
}

void RegisterExecuteVerb(CLI::App& app, const std::string& name, const std::string& description,
                         ReportOutcome report) {
  auto a = std::make_shared<ExecuteArgs>();
  CLI::App* cmd = app.add_subcommand(name, description);
  AddExecuteOptions(cmd, *a);
  cmd->callback([a, report]() {
    WithProcesses([&](const MpiSession* mpi, bool root) {
      ExecuteOutcome o;
      try {
        o = ExecuteTarget(*a, mpi);
      } catch (const HostMemoryError& e) {  // one process only: nothing to abort
        if (a->json) {
          PrintJson(HostMemoryJson(e));
        } else {
          std::cerr << "infeasible: " << e.what() << "\n";
        }
        ExitWith(kExitInfeasible);
      }
      if (!root) return;
      ExitIfRunFailed(*a, o);
      report(*a, o);
      FailUnlessVerified(o);
    });
  });
}

void FailUnlessVerified(const ExecuteOutcome& o) {
  if (o.verified) return;
  int64_t worst = 0;
  for (const Measurement& r : o.runs) worst = std::max(worst, r.mismatch_count);
  std::cerr << fmt::format("verification failed: {} destination elements hold wrong values\n", worst);
  ExitWith(kExitInternal);
}

}  // namespace reshard::cli
