// Reshard's plan against a Megatron-style plan (planner/
// baseline_plan.h: round-robin source replicas, every piece its own send/recv
// in one NCCL group, no ordering, no memory bound) on the published at-scale
// refits, both predicted by the same simulator, with each plan's lower bound.
//
//   at_scale [--markdown] [--json FILE] [--calibration FILE] [--plans P,...] [SCENARIO...]
//
// Default scenarios: deepseek-v3-pp16ep16-to-tp32dp8, qwen3-235b-tp4pp8ep16-to-tp8dp16,
// kimi-k2-256-to-128 (built-ins; a SCENARIO ending in .yaml is read from that
// file). An fp8 destination (kimi-k2) is quantized by reshard's plan (where,
// chosen by the planner: the note says) and planned in the training dtype by
// the Megatron-style one. Plans: reshard, megatron (default), and for fp8
// destinations reshard-fp8-source / reshard-fp8-destination (the choice
// forced), reshard-fp8-RULE (one placement of planner/quantize.h's
// QuantizePlacements, e.g. reshard-fp8-experts) and reshard-bf16 (the destination left in bf16). Progress and wall
// times go to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/scenario.h"
#include "planner/baseline_plan.h"
#include "planner/planner.h"
#include "planner/quantize.h"
#include "sim/ports.h"
#include "sim/simulator.h"

namespace reshard {
namespace {

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Row {
  std::string scenario, plan, note, memory_policy;
  int32_t gpus = 0;
  bool fits = true;                 // every GPU's peak within capacity - reserve
  double time_s = 0, lower_bound_s = 0, efficiency = 0;
  std::string bound_port;
  int64_t max_peak_bytes = 0, capacity_bytes = 0;
  int32_t max_peak_gpu = -1;
  BytesMoved bytes;
  int64_t ops = 0, sends = 0, groups = 0;
  double plan_wall_s = 0, sim_wall_s = 0;
};

Row Measure(const Scenario& s, const std::string& which) {
  Row row;
  row.scenario = s.name;
  row.plan = which;
  row.gpus = s.cluster.Gpus();
  row.capacity_bytes = s.cluster.gpu_memory_bytes;
  std::cerr << fmt::format("{}: planning ({})...\n", s.name, which);
  auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  if (which.rfind("reshard", 0) == 0) {
    PlannerOptions po;
    po.simulate = false;  // simulated below, timed apart
    if (which == "reshard-fp8-source") po.quantize_at_source = true;
    if (which == "reshard-fp8-destination") po.quantize_at_source = false;
    const std::string placement = which.rfind("reshard-fp8-", 0) == 0 ? which.substr(12) : "";
    if (placement.empty() || placement == "source" || placement == "destination") {
      r = MakePlan(s, po);
    } else {  // one of QuantizePlacements, by its rule
      const std::vector<QuantizePlacement> all = QuantizePlacements(s);
      const auto c = std::find_if(all.begin(), all.end(), [&](const QuantizePlacement& q) { return q.rule == placement; });
      if (c == all.end()) {
        row.fits = false;
        row.note = "placement not planned (it equals an earlier one)";
        return row;
      }
      r = PlanQuantizedAt(s, po, c->at_source);
    }
  } else {
    BaselineOptions bo;
    bo.simulate = false;
    r = MakeBaselinePlan(s, which, bo);
  }
  row.plan_wall_s = Seconds(t0);
  if (!r.ok()) {
    row.fits = false;
    row.note = r.message;
    return row;
  }
  row.ops = static_cast<int64_t>(r.plan.ops.size());
  row.memory_policy = r.plan.summary.memory_policy;
  row.groups = r.stats.groups;
  for (const Op& op : r.plan.ops) row.sends += op.kind == OpKind::kSend;
  std::cerr << fmt::format("{}: {} plan: {} ops in {:.2f} s; simulating...\n", s.name, which, row.ops, row.plan_wall_s);
  t0 = std::chrono::steady_clock::now();
  const Prediction pr = Simulate(r.plan, SimOptions{nullptr, false});
  row.sim_wall_s = Seconds(t0);
  std::cerr << fmt::format("{}: {} simulated in {:.2f} s ({} events)\n", s.name, which, row.sim_wall_s, pr.events);
  row.time_s = pr.time_s;
  row.lower_bound_s = pr.lower_bound_s;
  row.bound_port = pr.lower_bound_port;
  row.efficiency = pr.plan_efficiency;
  row.bytes = pr.bytes_moved;
  for (size_t g = 0; g < pr.peak_bytes.size(); ++g)
    if (pr.peak_bytes[g] > row.max_peak_bytes) row.max_peak_bytes = pr.peak_bytes[g], row.max_peak_gpu = static_cast<int32_t>(g);
  const int64_t usable = s.cluster.gpu_memory_bytes - s.memory.reserve_bytes;
  for (int64_t p : pr.peak_bytes) row.fits = row.fits && p <= usable;
  return row;
}

double GiB(int64_t b) { return static_cast<double>(b) / static_cast<double>(int64_t{1} << 30); }
double GB(int64_t b) { return static_cast<double>(b) / 1e9; }

void PrintMarkdown(const std::vector<Row>& rows) {
  std::cout << "| scenario | GPUs | plan | predicted | lower bound | efficiency | max peak per GPU | fits | bytes local / NVLink / network (GB) | sends | ops | plan + simulate wall |\n";
  std::cout << "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const Row& r : rows) {
    std::cout << fmt::format(
        "| {}{} | {} | {} | {:.1f} ms | {:.1f} ms | {:.1f} % | {:.1f} GiB (GPU {}) of {:.1f} | {} | {:.1f} / {:.1f} / {:.1f} | {} | {} | {:.1f} + {:.1f} s |\n",
        r.scenario, r.note.empty() ? "" : " (" + r.note + ")", r.gpus, r.plan, r.time_s * 1e3, r.lower_bound_s * 1e3,
        r.efficiency * 100, GiB(r.max_peak_bytes), r.max_peak_gpu, GiB(r.capacity_bytes), r.fits ? "yes" : "**no**",
        GB(r.bytes.local), GB(r.bytes.nvlink), GB(r.bytes.network), r.sends, r.ops, r.plan_wall_s, r.sim_wall_s);
  }
}

void PrintText(const std::vector<Row>& rows) {
  std::cout << fmt::format("{:<36} {:>5} {:<9} {:>11} {:>11} {:>6} {:>10} {:>5} {:>9} {:>9} {:>9}\n", "scenario", "GPUs",
                           "plan", "predicted", "bound", "eff", "peak GiB", "fits", "local GB", "NVLink GB",
                           "net GB");
  for (const Row& r : rows)
    std::cout << fmt::format("{:<36} {:>5} {:<9} {:>8.1f} ms {:>8.1f} ms {:>5.1f}% {:>10.1f} {:>5} {:>9.1f} {:>9.1f} {:>9.1f}\n",
                             r.scenario, r.gpus, r.plan, r.time_s * 1e3, r.lower_bound_s * 1e3, r.efficiency * 100,
                             GiB(r.max_peak_bytes), r.fits ? "yes" : "NO", GB(r.bytes.local), GB(r.bytes.nvlink),
                             GB(r.bytes.network));
}

nlohmann::json ToJson(const std::vector<Row>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const Row& r : rows)
    out.push_back({{"scenario", r.scenario},
                   {"plan", r.plan},
                   {"note", r.note},
                   {"memory_policy", r.memory_policy},
                   {"gpus", r.gpus},
                   {"time_s", r.time_s},
                   {"lower_bound_s", r.lower_bound_s},
                   {"lower_bound_port", r.bound_port},
                   {"plan_efficiency", r.efficiency},
                   {"max_peak_bytes", r.max_peak_bytes},
                   {"max_peak_gpu", r.max_peak_gpu},
                   {"capacity_bytes", r.capacity_bytes},
                   {"fits", r.fits},
                   {"bytes_moved", r.bytes},
                   {"sends", r.sends},
                   {"ops", r.ops},
                   {"plan_wall_s", r.plan_wall_s},
                   {"simulate_wall_s", r.sim_wall_s}});
  return out;
}

}  // namespace
}  // namespace reshard

int main(int argc, char** argv) {
  using namespace reshard;
  bool markdown = false;
  std::string json_path, calibration;
  std::vector<std::string> names;
  std::vector<std::string> plans = {"reshard", "megatron"};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--markdown") {
      markdown = true;
    } else if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--calibration" && i + 1 < argc) {  // as the CLI's: replaces each scenario's links
      calibration = argv[++i];
    } else if (a == "--plans" && i + 1 < argc) {  // e.g. --plans reshard
      plans.clear();
      std::string v = argv[++i];
      for (size_t p = 0; p <= v.size();) {
        const size_t q = std::min(v.find(',', p), v.size());
        plans.push_back(v.substr(p, q - p));
        p = q + 1;
      }
    } else if (!a.empty() && a[0] == '-') {
      std::cerr << "usage: at_scale [--markdown] [--json FILE] [--calibration FILE] [--plans reshard,megatron] [SCENARIO...]\n";
      return 2;
    } else {
      names.push_back(a);
    }
  }
  if (names.empty())
    names = {"deepseek-v3-pp16ep16-to-tp32dp8", "qwen3-235b-tp4pp8ep16-to-tp8dp16", "kimi-k2-256-to-128"};
  std::vector<Row> rows;
  try {
    for (const std::string& n : names) {
      const bool file = n.size() > 5 && n.compare(n.size() - 5, 5, ".yaml") == 0;
      Scenario s = file ? LoadScenario(n) : BuiltinScenario(n);
      if (!calibration.empty()) ApplyProfileFile(s.cluster, calibration);
      for (const std::string& which : plans) {
        // reshard quantizes an fp8 destination (where, the planner chooses);
        // the Megatron-style plan moves the weights as they are.
        Scenario planned = s;
        std::string note;
        const bool quantizes = which.rfind("reshard", 0) == 0 && which != "reshard-bf16" && s.quantization;
        if (s.destination_dtype != s.dtype && !quantizes) {
          note = fmt::format("planned in {}: the {} destination is not converted by this plan", DTypeName(s.dtype),
                             DTypeName(s.destination_dtype));
          planned.destination_dtype = s.dtype;
          planned.quantization.reset();
        } else if (s.quantization && s.destination_dtype != s.dtype) {
          note = fmt::format("{} ({})", DTypeName(s.destination_dtype), QuantConfigText(*s.quantization));
        }
        rows.push_back(Measure(planned, which));
        Row& row = rows.back();
        if (const size_t q = row.memory_policy.find("+quantize-at-"); q != std::string::npos && row.fits)
          note += ", " + row.memory_policy.substr(q + 1);
        if (row.note.empty()) row.note = note;
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  if (markdown) PrintMarkdown(rows);
  else PrintText(rows);
  if (!json_path.empty()) std::ofstream(json_path) << ToJson(rows).dump(2) << "\n";
  return 0;
}
