// `reshard run SCENARIO|plan.json [--backend host|nccl] [--json] [--repeat N]
// [--trace FILE]`: execute a plan (a plan.json, or the planner's plan of a
// scenario), verify every destination element and report the measured time
// (from the call to the last op end; the GPU span beside it), peak memory and
// bandwidth next to the plan's prediction; --trace writes the reported run's
// op times as a Perfetto trace (one process, "measured").
//
// Under mpirun / srun (several processes) every process drives its block of
// GPUs; rank 0 plans (for a scenario), broadcasts the plan, and prints the
// gathered result. Exit codes: 0 verified; 1 the run finished but some
// destination element is wrong, the run failed part-way (RESHARD_FAULT, a
// timeout, a GPU error: docs/reliability.md), or an internal error; 2 bad
// input (including a plan that fails Verify or --scenario); 3 the scenario
// does not fit.
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_common.h"
#include "sim/trace.h"

namespace reshard::cli {

namespace {

void Print(const ExecuteArgs& a, const ExecuteOutcome& o) {
  const Measurement& m = o.Chosen();
  const PlanSummary& sum = o.plan.summary;
  if (!a.trace.empty()) WriteTimelinesTrace(a.trace, o.plan, {MeasuredTimeline(m)});
  if (a.json) {
    PrintJson(RunJson(a, o));
    return;
  }
  std::cout << FormatMeasurement(m, o.plan) << CheckRunLine(o);
  if (o.runs.size() > 1) {
    std::vector<std::string> ms;
    for (const Measurement& r : o.runs) ms.push_back(fmt::format("{:.3f}", r.time_s * 1e3));
    std::cout << fmt::format("{} runs: {} ms (the median run is shown)\n", o.runs.size(), fmt::join(ms, ", "));
  }
  // Host threads copy memory: their times say nothing about GPUs, so the host
  // backend reports a byte check, not a prediction error.
  const bool host = m.backend == "host";
  if (host) {
    std::cout << fmt::format("host backend: a byte check ({}); its times are CPU threads', not a GPU prediction's "
                             "(predicted on GPUs: {:.3f} ms; `--backend nccl` measures that)\n",
                             o.verified ? "every destination byte verified" : "NOT verified",
                             sum.predicted_time_s * 1e3);
  } else if (sum.predicted_time_s > 0 && m.time_s > 0) {
    std::cout << fmt::format("predicted {:.3f} ms, measured {:.3f} ms from the call (predicted / measured - 1 = "
                             "{:+.1f} %)\n",
                             sum.predicted_time_s * 1e3, m.time_s * 1e3, (sum.predicted_time_s / m.time_s - 1) * 100);
  }
  if (!host && sum.lower_bound_s > 0 && m.time_s > 0)
    std::cout << fmt::format("lower bound {:.3f} ms: plan efficiency {:.1f} % measured\n", sum.lower_bound_s * 1e3,
                             PlanEfficiency(sum.lower_bound_s, m.time_s) * 100);
  if (!a.trace.empty())
    std::cout << fmt::format("measured trace written to {} (open in ui.perfetto.dev)\n", a.trace);
}

}  // namespace

void RegisterRunCommand(CLI::App& app) {
  RegisterExecuteVerb(app, "run",
                      "execute a plan (plan.json or a scenario's plan), verify every byte, measure time and peak memory",
                      Print);
}

}  // namespace reshard::cli
