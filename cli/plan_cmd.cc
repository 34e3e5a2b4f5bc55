// `reshard plan SCENARIO [-o plan.json] [--json] [--segment-bytes B]`: make the
// plan, print its summary (bytes by link class, segments, NCCL groups, per-GPU
// peak, lower bound, predicted time, efficiency, memory policy) and write it.
// Exits 3 naming the GPU and the bytes missing when nothing fits.
#include <algorithm>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/json_reports.h"
#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard::cli {

namespace {

struct PlanCmdOptions {
  ScenarioArgs scenario;
  std::string output;
  std::string segment_bytes;
  std::string baseline;
  bool json = false;
  bool no_simulate = false;
  int32_t replica_blocks = 0;
};

constexpr size_t kMaxPeakRows = 16;

// Peaks against what a GPU may use (capacity less the reserve), with the share.
void PrintPeaks(const std::vector<int64_t>& peak, const Cluster& c, int64_t reserve) {
  std::vector<int32_t> used;
  for (size_t g = 0; g < peak.size(); ++g)
    if (peak[g] > 0) used.push_back(static_cast<int32_t>(g));
  if (used.empty()) return;
  const int64_t usable = UsableBytes(c, reserve);
  std::cout << fmt::format("peak memory per GPU, of {} usable{}:\n", FormatBytes(usable),
                           reserve > 0 ? fmt::format(" (capacity {} less reserve {})", FormatBytes(c.gpu_memory_bytes),
                                                     FormatBytes(reserve))
                                       : std::string());
  auto row = [&](int32_t g) {
    std::cout << fmt::format("  GPU {:>4}  peak {:>10}  {:5.1f} %{}\n", g, FormatBytes(peak[g]),
                             100.0 * static_cast<double>(peak[g]) / static_cast<double>(usable),
                             peak[g] > usable ? "  ABOVE USABLE MEMORY" : "");
  };
  if (used.size() <= kMaxPeakRows) {
    for (int32_t g : used) row(g);
    return;
  }
  // Many GPUs: the range and the five busiest.
  std::vector<int32_t> order = used;
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return peak[a] > peak[b]; });
  std::cout << fmt::format("  {} GPUs: peak min {}, max {}\n", used.size(), FormatBytes(peak[order.back()]),
                           FormatBytes(peak[order.front()]));
  for (size_t i = 0; i < std::min<size_t>(5, order.size()); ++i) row(order[i]);
}

void Run(const PlanCmdOptions& o) {
  // Bad input writes nothing: checked before any work.
  CheckOutputPath(o.output, "-o", {o.scenario.scenario, o.scenario.calibration});
  const Scenario s = o.scenario.Load();
  PlannerOptions po;
  po.segment_bytes = SegmentBytesFlag(o.segment_bytes, s);
  po.simulate = !o.no_simulate;
  po.replica_blocks = o.replica_blocks;
  PlanResult r = PlanScenario(s, po, o.baseline);
  if (!r.ok()) ExitInfeasible(s, r, o.json);
  RecordScenario(r.plan, s);
  const Plan& p = r.plan;
  const PlanSummary& sum = p.summary;
  if (!o.output.empty()) WritePlan(p, o.output);
  const double efficiency = PlanEfficiency(sum.lower_bound_s, sum.predicted_time_s);
  // A baseline has no memory bound: its peak may exceed what a GPU may use.
  const std::string over = PeakAboveUsable(sum.predicted_peak_bytes, s.cluster, s.memory.reserve_bytes);

  if (o.json) {
    PrintJson(PlanJson(s, r, o.baseline, o.output));
    if (!over.empty()) ExitPeakAboveUsable(over);
    return;
  }
  std::cout << fmt::format("scenario        {} ({})\n", s.name, s.path);
  if (!o.baseline.empty()) std::cout << fmt::format("baseline        {} (not reshard's plan)\n", o.baseline);
  std::cout << fmt::format("bytes moved     local {}, NVLink {}, network {}, PCIe {}\n",
                           FormatBytes(sum.bytes_moved.local), FormatBytes(sum.bytes_moved.nvlink),
                           FormatBytes(sum.bytes_moved.network), FormatBytes(sum.bytes_moved.pcie));
  std::cout << fmt::format("                ({})\n", kLocalBytesDefinition);
  if (r.stats.relayed_bytes > 0)
    std::cout << fmt::format("relayed         {} received over NVLink from a GPU of the same domain that got them over "
                             "the network (NVLink above includes them)\n",
                             FormatBytes(r.stats.relayed_bytes));
  if (r.stats.send_relayed_bytes > 0)
    std::cout << fmt::format("sender relays   {} sent over NVLink to a GPU of the sender's domain that sends them on "
                             "over its own NIC (NVLink above includes them)\n",
                             FormatBytes(r.stats.send_relayed_bytes));
  if (r.stats.recv_relayed_bytes > 0)
    std::cout << fmt::format("NIC relays      {} received over the NIC of another GPU of the receiver's domain that "
                             "sends them on over NVLink (NVLink above includes them)\n",
                             FormatBytes(r.stats.recv_relayed_bytes));
  std::cout << fmt::format("segments        {} of at most {} ({} direct), {} rounds of up to {} per GPU, direction and link class{}, "
                           "{} NCCL groups, {} ops\n",
                           r.stats.segments, FormatBytes(sum.segment_bytes), r.stats.direct, r.stats.rounds,
                           r.stats.per_round, r.stats.round_lanes ? " (alternating over two NCCL communicators)" : "",
                           r.stats.groups, r.stats.ops);
  if (r.stats.replica_blocks > 1)
    std::cout << fmt::format("replica blocks  {} identical blocks of whole nodes: one planned and simulated, the others "
                             "its copies (--replica-blocks 1 plans the whole)\n",
                             r.stats.replica_blocks);
  std::cout << fmt::format("memory policy   {} (optimizer offload fraction {:.2f})\n", sum.memory_policy,
                           sum.offload_fraction);
  std::cout << fmt::format("lower bound     {:.3f} ms (any plan; this plan's routing bound {:.3f} ms)\n",
                           sum.lower_bound_s * 1e3, sum.routing_bound_s * 1e3);
  std::cout << fmt::format("predicted time  {:.3f} ms ({})\n", sum.predicted_time_s * 1e3, r.stats.predicted_by);
  std::cout << fmt::format("efficiency      {:.1f} %\n", efficiency * 100);
  PrintPeaks(sum.predicted_peak_bytes, s.cluster, s.memory.reserve_bytes);
  PrintPeakParts(r.stats.peak_parts, sum.predicted_peak_bytes, s.cluster, s.memory.reserve_bytes);
  if (!o.output.empty()) std::cout << fmt::format("plan written to {}\n", o.output);
  if (!over.empty()) ExitPeakAboveUsable(over);
}

}  // namespace

nlohmann::json PlanJson(const Scenario& s, const PlanResult& r, const std::string& baseline, const std::string& output) {
  const PlanSummary& sum = r.plan.summary;
  nlohmann::json j = PlanSummaryJson(sum);
  j["scenario"] = s.name;
  // A baseline has no memory bound: its peak may exceed what a GPU may use.
  j["fits"] = PeakAboveUsable(sum.predicted_peak_bytes, s.cluster, s.memory.reserve_bytes).empty();
  j["direct_min_bytes"] = sum.direct_min_bytes;
  j["memory_policy"] = sum.memory_policy;
  j["predicted_by"] = r.stats.predicted_by;
  j["segments"] = r.stats.segments;
  j["direct_transfers"] = r.stats.direct;
  j["nccl_groups"] = r.stats.groups;
  j["rounds"] = r.stats.rounds;
  j["segments_per_round"] = r.stats.per_round;
  j["round_per_phase"] = r.stats.round_per_phase;
  j["round_lanes"] = r.stats.round_lanes;
  j["relayed_bytes"] = r.stats.relayed_bytes;
  j["send_relayed_bytes"] = r.stats.send_relayed_bytes;
  j["recv_relayed_bytes"] = r.stats.recv_relayed_bytes;
  j["ops"] = r.stats.ops;
  j["replica_blocks"] = r.stats.replica_blocks;
  AddPeakMemoryJson(j, r.stats.peak_parts, s.cluster, s.memory.reserve_bytes);
  if (!baseline.empty()) j["baseline"] = baseline;
  if (!output.empty()) j["plan"] = output;
  return j;
}

void RegisterPlanCommand(CLI::App& app) {
  auto o = std::make_shared<PlanCmdOptions>();
  CLI::App* cmd = app.add_subcommand("plan", "plan the refit: transfers, order, memory policy; summary and plan.json");
  AddScenarioOptions(cmd, o->scenario);
  cmd->add_option("-o,--output", o->output, "write the plan as JSON to this path");
  cmd->add_option("--segment-bytes", o->segment_bytes, "segment size (e.g. 64MiB) or auto (the scenario's default)");
  AddBaselineOption(cmd, o->baseline);
  cmd->add_flag("--no-simulate", o->no_simulate, "predict with the planner's per-port estimate, not the simulator");
  cmd->add_option("--replica-blocks", o->replica_blocks,
                  "0 (auto): a large refit of identical data-parallel blocks of whole nodes is planned as one block "
                  "and replicated; 1: plan it whole; N: in N blocks")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o->json, "machine-readable output (every field: docs/json.md)");
  cmd->callback([o]() { Run(*o); });
}

}  // namespace reshard::cli
