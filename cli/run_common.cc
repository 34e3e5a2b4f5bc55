#include "cli/run_common.h"

#include <algorithm>
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
#include "executor/host_backend.h"
#include "executor/mpi_session.h"
#include "model/error.h"
#include "planner/planner.h"
#ifdef RESHARD_HAVE_NCCL
#include "executor/nccl_backend.h"
#endif

namespace reshard::cli {

namespace {

// A plan.json is a JSON object with "ops"; anything else is a scenario.
std::optional<nlohmann::json> ReadPlanJson(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("ops")) return std::nullopt;
  return j;
}

Plan PlanOf(const ExecuteArgs& a) {
  if (auto j = ReadPlanJson(a.target)) return PlanFromJson(*j, a.target);
  const Scenario s = LoadScenarioArg(a.target);
  PlannerOptions po;
  if (!a.segment_bytes.empty() && a.segment_bytes != "auto")
    po.segment_bytes = ParseBytes(a.segment_bytes, "<cli>", "--segment-bytes");
  const PlanResult r = MakePlan(s, po);
  if (!r.ok()) {
    std::cerr << "infeasible: " << r.message << "\n";
    ExitWith(kExitInfeasible);
  }
  return r.plan;
}

// Rank 0 plans; every rank gets the same plan (one source of truth).
Plan SharedPlan(const ExecuteArgs& a, const MpiSession* mpi) {
  if (mpi == nullptr || mpi->size() == 1) return PlanOf(a);
  std::string text;
  if (mpi->rank() == 0) text = PlanToJson(PlanOf(a)).dump();
  int64_t length = static_cast<int64_t>(text.size());
  mpi->Broadcast(&length, sizeof(length), 0);
  text.resize(static_cast<size_t>(length));
  mpi->Broadcast(text.data(), length, 0);
  return PlanFromJson(nlohmann::json::parse(text), a.target);
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
    return MakeNcclBackend(n);
#else
    throw InputError("<cli>", "--backend",
                     "this reshard was built without the NCCL backend (CMake found no CUDA toolkit with NCCL; see "
                     "the configure log); use --backend host");
#endif
  }
  HostBackendOptions h;
  h.mpi = mpi;
  h.timeout_s = a.timeout_s;
  return MakeHostBackend(h);
}

int ExitCodeOf(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e) != nullptr) return kExitInput;
  return kExitInternal;
}

}  // namespace

void AddExecuteOptions(CLI::App* cmd, ExecuteArgs& a) {
  cmd->add_option("target", a.target, "plan.json, scenario file or built-in scenario name")->required();
  cmd->add_option("--backend", a.backend, "host (threads, runs anywhere) or nccl (CUDA + NCCL on GPUs)")
      ->check(CLI::IsMember({"host", "nccl"}));
  cmd->add_option("--segment-bytes", a.segment_bytes, "for a scenario: segment size (e.g. 64MiB) or auto");
  cmd->add_option("--save-plan", a.save_plan, "write the plan that ran as JSON to this path");
  cmd->add_option("--repeat", a.repeat, "run the plan N times on the same backend and report the median run")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--max-mismatches", a.max_mismatches, "mismatching elements listed (all are counted)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--timeout", a.timeout_s, "host backend: seconds a receive may wait before the run fails");
  cmd->add_flag("--no-warmup", a.no_warmup,
                "time cold: do not connect NCCL peers or grow the allocator's pool before timing");
  cmd->add_flag("--json", a.json, "machine-readable output (DESIGN's result fields plus `measured`)");
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
  ExecuteOutcome out;
  out.plan = SharedPlan(a, mpi);
  const bool root = mpi == nullptr || mpi->rank() == 0;
  if (root && !a.save_plan.empty()) WritePlan(out.plan, a.save_plan);
  std::unique_ptr<Backend> backend = MakeBackend(a, mpi);
  ExecOptions eo;
  eo.plan_source = a.target;
  eo.max_mismatches = a.max_mismatches;
  eo.warmup = !a.no_warmup;
  for (int32_t i = 0; i < std::max(a.repeat, 1); ++i) out.runs.push_back(Execute(out.plan, *backend, eo));
  backend.reset();
  std::vector<size_t> order(out.runs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return out.runs[x].time_s < out.runs[y].time_s; });
  out.chosen = order[order.size() / 2];
  out.verified = std::all_of(out.runs.begin(), out.runs.end(), [](const Measurement& r) { return r.verified; });
  return out;
}

nlohmann::json PredictedJson(const Plan& plan) {
  const PlanSummary& s = plan.summary;
  nlohmann::json j;
  j["plan"] = plan.name;
  j["time_s"] = s.predicted_time_s;
  j["peak_bytes"] = s.predicted_peak_bytes;
  j["bytes_moved"] = {{"local", s.bytes_moved.local},
                      {"nvlink", s.bytes_moved.nvlink},
                      {"network", s.bytes_moved.network},
                      {"pcie", s.bytes_moved.pcie}};
  j["lower_bound_s"] = s.lower_bound_s;
  j["plan_efficiency"] = s.predicted_time_s > 0 ? s.lower_bound_s / s.predicted_time_s : 0.0;
  j["segment_bytes"] = s.segment_bytes;
  j["offload_fraction"] = s.offload_fraction;
  return j;
}

nlohmann::json MeasuredJson(const ExecuteOutcome& o) {
  const Measurement& m = o.Chosen();
  const PlanSummary& s = o.plan.summary;
  nlohmann::json j = m;
  j["lower_bound_s"] = s.lower_bound_s;
  j["plan_efficiency"] = m.time_s > 0 ? s.lower_bound_s / m.time_s : 0.0;
  j["segment_bytes"] = s.segment_bytes;
  j["offload_fraction"] = s.offload_fraction;
  std::vector<double> times;
  for (const Measurement& r : o.runs) times.push_back(r.time_s);
  j["runs_time_s"] = times;
  return j;
}

void FailUnlessVerified(const ExecuteOutcome& o) {
  if (o.verified) return;
  int64_t worst = 0;
  for (const Measurement& r : o.runs) worst = std::max(worst, r.mismatch_count);
  std::cerr << fmt::format("verification failed: {} destination elements hold wrong values\n", worst);
  ExitWith(kExitInternal);
}

}  // namespace reshard::cli
