// `reshard simulate SCENARIO|plan.json [--trace trace.json] [--json]`: predict
// a plan's refit time, per-GPU peak memory and link use with the simulator
// (sim/simulator.h), optionally writing a Perfetto / Chrome trace.
//
// A plan.json is read and verified (a plan that fails Verify is bad input,
// exit 2); a scenario is planned first (exit 3 when it does not fit).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <optional>
#include <memory>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/json_reports.h"
#include "plan/plan.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace reshard::cli {

namespace {

struct SimulateCmdOptions {
  TargetArgs target;
  std::string trace;
  std::string trace_detail;  // "" = DefaultTraceDetail (segments above ~100 k ops)
  std::string issue;  // --issue: "" = executor, or python for --baseline megatron
  bool one_process = false;
  bool cold = false;
  bool json = false;
};

// --issue, defaulting to what issues the plan in practice: reshard's executor,
// or for the Megatron-style baseline Megatron-Core's Python stack.
IssueModel IssueOf(const SimulateCmdOptions& o) {
  if (o.issue == "none") return IssueModel::kNone;
  if (o.issue == "executor") return IssueModel::kExecutor;
  if (o.issue == "python") return IssueModel::kPython;
  return o.target.baseline == "megatron" ? IssueModel::kPython : IssueModel::kExecutor;
}

// What the prediction includes beyond the wire, in one line.
std::string HostLine(const Prediction& pr) {
  if (pr.issue_model == "none") return "not modelled (the GPUs see every op at t = 0)";
  std::string s = fmt::format("{} ({}), busiest host thread done issuing at {:.3f} ms",
                              pr.issue_model == "python" ? "Megatron-style Python stack" : "reshard's executor",
                              pr.one_process ? "one process drives every GPU" : "one process per GPU",
                              static_cast<double>(pr.host_issue_ns) * 1e-6);
  return s;
}

// "critical path   wire 80.1 ms (75 %), ...": the terms on the chain of waits
// that set the time (Prediction::critical_path), those that are not zero.
std::string CriticalPathLine(const Prediction& pr) {
  const CriticalPath& c = pr.critical_path;
  const std::pair<const char*, int64_t> terms[] = {{"wire", c.wire_ns},           {"copies", c.copy_ns},
                                                   {"offload", c.offload_ns},     {"host issue", c.host_issue_ns},
                                                   {"event brackets", c.event_ns}, {"warm-up", c.warm_up_ns}};
  std::string s;
  for (const auto& [name, ns] : terms) {
    if (ns == 0) continue;
    s += fmt::format("{}{} {:.3f} ms ({:.0f} %)", s.empty() ? "" : ", ", name, static_cast<double>(ns) * 1e-6,
                     pr.time_ns > 0 ? 100.0 * static_cast<double>(ns) / static_cast<double>(pr.time_ns) : 0.0);
  }
  return s.empty() ? "empty" : s;
}

constexpr size_t kMaxRows = 8;

std::optional<TraceDetail> TraceDetailOf(const std::string& name) {
  if (name == "ops") return TraceDetail::kOps;
  if (name == "segments") return TraceDetail::kSegments;
  if (name == "links") return TraceDetail::kLinks;
  return std::nullopt;
}

// "trace.json: 1,234 events, 5.6 MB, detail segments (...)".
std::string TraceLine(const std::string& path, const TraceWritten& w, size_t ops) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  std::string why;
  if (w.detail == TraceDetail::kSegments && ops > kTraceAllOpsMax)
    why = fmt::format(" (the default above {} ops; --trace-detail ops for every op)", FormatCount(kTraceAllOpsMax));
  return fmt::format("trace written to {}: {} events, {}, detail {}{} (open in ui.perfetto.dev)", path,
                     FormatCount(w.events), FormatBytes(ec ? w.bytes : static_cast<int64_t>(size)),
                     TraceDetailName(w.detail), why);
}

void PrintHuman(const Plan& plan, const Prediction& pr, const std::string& trace_line, int64_t reserve) {
  std::cout << fmt::format("plan            {} ({} ops, {} GPUs, cluster {})\n", plan.name, FormatCount(plan.ops.size()),
                           plan.Gpus(), plan.cluster.name);
  std::cout << fmt::format("predicted time  {:.3f} ms ({}; GPU span {:.3f} ms)\n", pr.time_s * 1e3,
                           pr.cold ? "cold: the job's first refit" : "warm: peers connected and memory pinned by earlier refits",
                           static_cast<double>(pr.gpu_span_ns) * 1e-6);
  std::cout << fmt::format("host issue      {}\n", HostLine(pr));
  if (pr.cold)
    std::cout << fmt::format("cold setup      {:.3f} ms pinning + mapping, {:.3f} ms NCCL connections (busiest process)\n",
                             static_cast<double>(pr.cold_setup_ns) * 1e-6, static_cast<double>(pr.connect_ns) * 1e-6);
  std::cout << fmt::format("critical path   {} (what the time waited on)\n", CriticalPathLine(pr));
  std::cout << fmt::format("lower bound     {:.3f} ms (any plan; binding {})\n", pr.lower_bound_s * 1e3,
                           pr.lower_bound_port.empty() ? "none" : pr.lower_bound_port);
  std::cout << fmt::format("routing bound   {:.3f} ms (this plan's routing; binding port {})\n", pr.routing_bound_s * 1e3,
                           pr.routing_bound_port.empty() ? "none" : pr.routing_bound_port);
  std::cout << fmt::format("efficiency      {:.1f} %\n", pr.plan_efficiency * 100);
  std::cout << fmt::format("bytes moved     local {}, NVLink {}, network {}, PCIe {}\n",
                           FormatBytes(pr.bytes_moved.local), FormatBytes(pr.bytes_moved.nvlink),
                           FormatBytes(pr.bytes_moved.network), FormatBytes(pr.bytes_moved.pcie));
  std::cout << fmt::format("                ({})\n", kLocalBytesDefinition);
  // Peaks: every GPU when few, else the range and the highest.
  std::vector<int32_t> order(pr.peak_bytes.size());
  for (size_t g = 0; g < order.size(); ++g) order[g] = static_cast<int32_t>(g);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return pr.peak_bytes[a] > pr.peak_bytes[b]; });
  const int64_t usable = UsableBytes(plan.cluster, reserve);
  std::cout << fmt::format("peak memory per GPU, of {} usable{}:\n", FormatBytes(usable),
                           reserve > 0 ? fmt::format(" (capacity {} less reserve {})",
                                                     FormatBytes(plan.cluster.gpu_memory_bytes), FormatBytes(reserve))
                                       : std::string());
  if (order.size() > kMaxRows) {
    std::cout << fmt::format("  {} GPUs: min {}, max {}; highest:\n", order.size(),
                             FormatBytes(pr.peak_bytes[order.back()]), FormatBytes(pr.peak_bytes[order.front()]));
    order.resize(kMaxRows / 2);
    std::sort(order.begin(), order.end());
  } else {
    std::sort(order.begin(), order.end());
  }
  for (int32_t g : order)
    std::cout << fmt::format("  GPU {:>4}  {:>12}  {:5.1f} %{}\n", g, FormatBytes(pr.peak_bytes[g]),
                             100.0 * static_cast<double>(pr.peak_bytes[g]) / static_cast<double>(usable),
                             pr.peak_bytes[g] > usable ? "  ABOVE USABLE MEMORY" : "");
  PrintPeakParts(pr.peak_parts, pr.peak_bytes, plan.cluster, reserve);
  // The busiest links.
  std::vector<const PortUse*> links;
  for (const PortUse& u : pr.ports) links.push_back(&u);
  std::stable_sort(links.begin(), links.end(),
                   [](const PortUse* a, const PortUse* b) { return a->utilisation > b->utilisation; });
  if (!links.empty()) {
    std::cout << fmt::format("busiest links ({} carry bytes; gpuN.copy carries the GPU's copy ops and the NVLink "
                             "bytes whose kernels share its SMs and HBM):\n",
                             links.size());
    for (size_t i = 0; i < std::min(links.size(), kMaxRows); ++i) {
      const PortUse& u = *links[i];
      std::cout << fmt::format("  {:<18} {:>12}  busy {:5.1f} %  average {:8.1f} GB/s of {:.1f} ({:.1f} %)\n", u.name,
                               FormatBytes(u.bytes), u.busy_fraction * 100, u.average_bytes_per_s / 1e9,
                               u.capacity_bytes_per_s / 1e9, u.utilisation * 100);
    }
  }
  std::cout << "phases (active = wall time with at least one running):\n";
  auto rows = [&](const char* what, const std::vector<PhaseUse>& v, bool link) {
    for (const PhaseUse& u : v) {
      // Copies are of two kinds; the link class "local" is the device-copy engine, not the local bytes above.
      const bool copy = u.name == (link ? "local" : "copy");
      std::cout << fmt::format("  {:<8} {:<8} {:>9} x  {:>12}  active {:10.3f} ms{}\n", what,
                               link && copy ? "copy" : u.name, u.count, FormatBytes(u.bytes),
                               static_cast<double>(u.active_ns) * 1e-6,
                               copy ? CopySplit(u.bytes, pr.bytes_moved.local) : std::string());
    }
  };
  rows("op", pr.by_kind, false);
  rows("link", pr.by_class, true);
  std::cout << fmt::format("events          {}\n", FormatCount(pr.events));
  if (!trace_line.empty()) std::cout << trace_line << "\n";
}

void Run(const SimulateCmdOptions& o) {
  // Bad input writes nothing: checked before any work.
  CheckOutputPath(o.trace, "--trace", {o.target.target, o.target.scenario, o.target.calibration});
  // A baseline is simulated once, here (planning it would simulate it too).
  const Plan plan = PlanOfTarget(o.target, o.json, /*predict_baseline=*/false);
  SimOptions so;
  so.issue = IssueOf(o);
  so.one_process = o.one_process;
  so.cold = o.cold;
  TraceWritten written;
  const Prediction pr =
      o.trace.empty() ? Simulate(plan, so) : SimulateWithTrace(plan, o.trace, so, TraceDetailOf(o.trace_detail), &written);
  const int64_t reserve = ReserveOfTarget(o.target.target, o.target.scenario);
  const std::string over = PeakAboveUsable(pr.peak_bytes, plan.cluster, reserve);
  if (o.json) {
    PrintJson(SimulateJson(plan, pr, reserve, o.trace, written));
  } else {
    PrintHuman(plan, pr, o.trace.empty() ? std::string() : TraceLine(o.trace, written, plan.ops.size()), reserve);
  }
  if (!over.empty()) ExitPeakAboveUsable(over);
}

}  // namespace

nlohmann::json SimulateJson(const Plan& plan, const Prediction& pr, int64_t reserve_bytes, const std::string& trace,
                            const TraceWritten& written) {
  nlohmann::json j = pr;
  j["plan"] = plan.name;
  j["segment_bytes"] = plan.summary.segment_bytes;
  j["offload_fraction"] = plan.summary.offload_fraction;
  AddPeakMemoryJson(j, pr.peak_parts, plan.cluster, reserve_bytes);
  if (!trace.empty()) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(trace, ec);
    j["trace"] = trace;
    j["trace_detail"] = TraceDetailName(written.detail);
    j["trace_events"] = written.events;
    j["trace_bytes"] = ec ? written.bytes : static_cast<int64_t>(size);
  }
  return j;
}

void RegisterSimulateCommand(CLI::App& app) {
  auto o = std::make_shared<SimulateCmdOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "predict refit time, peak memory and link use of a plan");
  AddTargetOptions(cmd, o->target);
  cmd->add_option("--trace", o->trace, "write a Perfetto / Chrome trace (JSON) to this path");
  cmd->add_option("--trace-detail", o->trace_detail,
                  "what the trace holds besides link and memory counters: ops (a slice per op), segments (a slice per "
                  "segment and stream; the default above 100,000 ops) or links (counters only)")
      ->check(CLI::IsMember({"ops", "segments", "links"}));
  cmd->add_option("--issue", o->issue,
                  "who issues the ops on the host: executor (reshard's, the default), python (Megatron-Core through "
                  "PyTorch; the default with --baseline megatron) or none (ignore host issue)")
      ->check(CLI::IsMember({"none", "executor", "python"}));
  cmd->add_flag("--one-process", o->one_process,
                "one host process drives every GPU (reshard run without mpirun); default: one process per GPU");
  cmd->add_flag("--cold", o->cold,
                "the job's first refit: also pin host buffers, map device memory and connect NCCL peers");
  cmd->add_flag("--json", o->json, "machine-readable output (every field: docs/json.md)");
  cmd->callback([o]() { Run(*o); });
}

}  // namespace reshard::cli
