// `reshard run SCENARIO|plan.json [--backend host|nccl] [--json] [--repeat N]`:
// execute a plan (a plan.json, or the planner's plan of a scenario), verify
// every destination element and report the measured time, peak memory and
// bandwidth next to the plan's prediction.
//
// Under mpirun / srun (several processes) every process drives its block of
// GPUs; rank 0 plans (for a scenario), broadcasts the plan, and prints the
// gathered result. Exit codes: 0 verified; 1 the run finished but some
// destination element is wrong, or an internal / GPU error; 2 bad input
// (including a plan that fails Verify); 3 the scenario does not fit.
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

#include "cli/commands.h"
#include "cli/common.h"
#include "executor/executor.h"
#include "executor/host_backend.h"
#include "executor/mpi_session.h"
#include "model/error.h"
#include "planner/plan.h"
#include "planner/planner.h"
#ifdef RESHARD_HAVE_NCCL
#include "executor/nccl_backend.h"
#endif

namespace reshard::cli {

namespace {

struct RunCmdOptions {
  std::string target;
  std::string backend = "host";
  std::string segment_bytes;
  std::string save_plan;
  int32_t repeat = 1;
  int32_t max_mismatches = 20;
  double timeout_s = 60;
  bool no_warmup = false;
  bool json = false;
};

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

Plan PlanOf(const RunCmdOptions& o) {
  if (auto j = ReadPlanJson(o.target)) return PlanFromJson(*j, o.target);
  const Scenario s = LoadScenarioArg(o.target);
  PlannerOptions po;
  if (!o.segment_bytes.empty() && o.segment_bytes != "auto")
    po.segment_bytes = ParseBytes(o.segment_bytes, "<cli>", "--segment-bytes");
  const PlanResult r = MakePlan(s, po);
  if (!r.ok()) {
    std::cerr << "infeasible: " << r.message << "\n";
    ExitWith(kExitInfeasible);
  }
  return r.plan;
}

// Rank 0 plans; every rank gets the same plan (one source of truth).
Plan SharedPlan(const RunCmdOptions& o, const MpiSession* mpi) {
  if (mpi == nullptr || mpi->size() == 1) return PlanOf(o);
  std::string text;
  if (mpi->rank() == 0) text = PlanToJson(PlanOf(o)).dump();
  int64_t length = static_cast<int64_t>(text.size());
  mpi->Broadcast(&length, sizeof(length), 0);
  text.resize(static_cast<size_t>(length));
  mpi->Broadcast(text.data(), length, 0);
  return PlanFromJson(nlohmann::json::parse(text), o.target);
}

std::unique_ptr<Backend> MakeBackend(const RunCmdOptions& o, const MpiSession* mpi) {
  if (o.backend == "nccl") {
#ifdef RESHARD_HAVE_NCCL
    NcclBackendOptions n;
    n.mpi = mpi;
    n.warm_pool = !o.no_warmup;
    if (const char* v = std::getenv("RESHARD_COPY_BLOCKS_PER_SM"); v != nullptr) n.copy_blocks_per_sm = std::atoi(v);
    return MakeNcclBackend(n);
#else
    throw InputError("<cli>", "--backend",
                     "this reshard was built without the NCCL backend (CMake found no CUDA toolkit with NCCL; see "
                     "the configure log); use --backend host");
#endif
  }
  HostBackendOptions h;
  h.mpi = mpi;
  h.timeout_s = o.timeout_s;
  return MakeHostBackend(h);
}

nlohmann::json BytesJson(const BytesMoved& b) {
  return {{"local", b.local}, {"nvlink", b.nvlink}, {"network", b.network}, {"pcie", b.pcie}};
}

void Report(const RunCmdOptions& o, const Plan& plan, const std::vector<Measurement>& runs, size_t chosen) {
  const Measurement& m = runs[chosen];
  const PlanSummary& sum = plan.summary;
  const bool verified = std::all_of(runs.begin(), runs.end(), [](const Measurement& r) { return r.verified; });
  std::vector<double> times;
  for (const Measurement& r : runs) times.push_back(r.time_s);
  auto efficiency = [&](double t) { return t > 0 ? sum.lower_bound_s / t : 0.0; };
  if (o.json) {
    nlohmann::json measured = m;
    measured["lower_bound_s"] = sum.lower_bound_s;
    measured["plan_efficiency"] = efficiency(m.time_s);
    measured["segment_bytes"] = sum.segment_bytes;
    measured["offload_fraction"] = sum.offload_fraction;
    measured["runs_time_s"] = times;
    nlohmann::json j;
    j["plan"] = plan.name;
    j["backend"] = m.backend;
    j["time_s"] = sum.predicted_time_s;
    j["peak_bytes"] = sum.predicted_peak_bytes;
    j["bytes_moved"] = BytesJson(sum.bytes_moved);
    j["lower_bound_s"] = sum.lower_bound_s;
    j["plan_efficiency"] = efficiency(sum.predicted_time_s);
    j["segment_bytes"] = sum.segment_bytes;
    j["offload_fraction"] = sum.offload_fraction;
    j["verified"] = verified;
    j["measured"] = measured;
    PrintJson(j);
    return;
  }
  std::cout << FormatMeasurement(m, plan);
  if (runs.size() > 1) {
    std::vector<std::string> ms;
    for (double t : times) ms.push_back(fmt::format("{:.3f}", t * 1e3));
    std::cout << fmt::format("{} runs: {} ms (the median run is shown)\n", runs.size(), fmt::join(ms, ", "));
  }
  if (sum.predicted_time_s > 0) {
    std::cout << fmt::format("predicted {:.3f} ms, measured {:.3f} ms (predicted / measured - 1 = {:+.1f} %)\n",
                             sum.predicted_time_s * 1e3, m.time_s * 1e3,
                             m.time_s > 0 ? (sum.predicted_time_s / m.time_s - 1) * 100 : 0.0);
  }
  if (sum.lower_bound_s > 0)
    std::cout << fmt::format("lower bound {:.3f} ms: plan efficiency {:.1f} % measured\n", sum.lower_bound_s * 1e3,
                             efficiency(m.time_s) * 100);
}

int ExitCodeOf(const std::exception& e) {
  if (dynamic_cast<const InputError*>(&e) != nullptr) return kExitInput;
  return kExitInternal;
}

void Run(const RunCmdOptions& o) {
  const std::unique_ptr<MpiSession> mpi = MpiSession::FromEnvironment();
  const bool root = mpi == nullptr || mpi->rank() == 0;
  try {
    const Plan plan = SharedPlan(o, mpi.get());
    if (root && !o.save_plan.empty()) WritePlan(plan, o.save_plan);
    std::unique_ptr<Backend> backend = MakeBackend(o, mpi.get());
    ExecOptions eo;
    eo.plan_source = o.target;
    eo.max_mismatches = o.max_mismatches;
    eo.warmup = !o.no_warmup;
    std::vector<Measurement> runs;
    for (int32_t i = 0; i < std::max(o.repeat, 1); ++i) runs.push_back(Execute(plan, *backend, eo));
    backend.reset();
    if (!root) return;
    std::vector<size_t> order(runs.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return runs[a].time_s < runs[b].time_s; });
    const size_t chosen = order[order.size() / 2];
    Report(o, plan, runs, chosen);
    const bool verified = std::all_of(runs.begin(), runs.end(), [](const Measurement& r) { return r.verified; });
    if (!verified) {
      std::cerr << fmt::format("verification failed: {} destination elements hold wrong values\n",
                               runs[chosen].mismatch_count);
      ExitWith(kExitInternal);
    }
  } catch (const CLI::RuntimeError&) {
    throw;
  } catch (const std::exception& e) {
    if (mpi != nullptr && mpi->size() > 1) {  // the other ranks would wait forever
      std::cerr << fmt::format("rank {}: error: {}\n", mpi->rank(), e.what());
      mpi->Abort(ExitCodeOf(e));
    }
    throw;
  }
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  auto o = std::make_shared<RunCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run", "execute a plan (plan.json or a scenario's plan), verify every byte, measure time and peak memory");
  cmd->add_option("target", o->target, "plan.json, scenario file or built-in scenario name")->required();
  cmd->add_option("--backend", o->backend, "host (threads, runs anywhere) or nccl (CUDA + NCCL on GPUs)")
      ->check(CLI::IsMember({"host", "nccl"}));
  cmd->add_option("--segment-bytes", o->segment_bytes, "for a scenario: segment size (e.g. 64MiB) or auto");
  cmd->add_option("--save-plan", o->save_plan, "write the plan that ran as JSON to this path");
  cmd->add_option("--repeat", o->repeat, "run the plan N times on the same backend and report the median run")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--max-mismatches", o->max_mismatches, "mismatching elements listed (all are counted)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--timeout", o->timeout_s, "host backend: seconds a receive may wait before the run fails");
  cmd->add_flag("--no-warmup", o->no_warmup,
                "time cold: do not connect NCCL peers or grow the allocator's pool before timing");
  cmd->add_flag("--json", o->json, "machine-readable output (DESIGN's result fields plus `measured`)");
  cmd->callback([o]() { Run(*o); });
}

}  // namespace reshard::cli
