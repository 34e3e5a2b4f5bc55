// `reshard inspect SCENARIO [--json]`: model size, per-GPU bytes on each side
// and the memory at refit start against each GPU's capacity. Exits 3 (with
// "GPU g needs X but has Y: Z missing") when the starting state does not fit.
#include <algorithm>
#include <iostream>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/json_reports.h"
#include "model/layout.h"
#include "model/scenario.h"

namespace reshard::cli {

namespace {

// "12 rates by launch size (block, mxfp8, tensor)": the block shapes measured.
std::string QuantizeRatesText(const QuantizeKernelProfile& q) {
  std::vector<std::string_view> shapes;
  for (const QuantizeRatePoint& p : q.rates)
    if (shapes.empty() || shapes.back() != QuantSchemeName(p.scheme)) shapes.push_back(QuantSchemeName(p.scheme));
  return fmt::format("{} rates by launch size ({})", q.rates.size(), fmt::join(shapes, ", "));
}

struct InspectOptions {
  ScenarioArgs scenario;
  bool json = false;
};

// At most this many GPUs are listed one per row; larger clusters get a summary.
constexpr size_t kMaxTableRows = 16;
constexpr size_t kWorstRows = 5;

std::string Placement(const Scenario& s) {
  std::vector<int32_t> a = s.source_gpus, b = s.destination_gpus;
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a == b) return "colocated";
  std::vector<int32_t> common;
  std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(common));
  return common.empty() ? "disaggregated" : "mixed";
}

// "2 ranks on GPUs 0-1", "1 rank on GPU 3".
std::string RanksOn(const std::vector<int32_t>& gpus) {
  return gpus.size() == 1 ? fmt::format("1 rank on GPU {}", gpus[0])
                          : fmt::format("{} ranks on GPUs {}", gpus.size(), FormatGpuSet(gpus));
}

struct Row {
  int32_t gpu;
  int64_t source, destination;
  GpuMemoryAtStart mem;
};

void PrintRows(const std::vector<Row>& rows, int64_t capacity) {
  std::cout << fmt::format("{:>5}  {:>10}  {:>11}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}\n",
                           "GPU", "source", "destination", "gradients", "optimizer", "kv cache", "reserve", "context",
                           "total", "capacity", "free");
  for (const Row& r : rows) {
    std::cout << fmt::format("{:>5}  {:>10}  {:>11}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}  {:>10}\n",
                             r.gpu, FormatBytes(r.source), FormatBytes(r.destination), FormatBytes(r.mem.gradients),
                             FormatBytes(r.mem.optimizer), FormatBytes(r.mem.kv_cache), FormatBytes(r.mem.reserve),
                             FormatBytes(r.mem.overheads), FormatBytes(r.mem.Total()), FormatBytes(capacity),
                             FormatBytes(capacity - r.mem.Total()));
  }
}

// "min X (GPU a), max Y (GPU b)" over the used GPUs; ties go to the lowest id.
template <typename Get>
std::string MinMax(const std::vector<Row>& rows, Get get) {
  auto [lo, hi] = std::minmax_element(rows.begin(), rows.end(),
                                      [&](const Row& a, const Row& b) { return get(a) < get(b); });
  // minmax_element returns the LAST largest; prefer the first for determinism of "lowest id".
  auto first_hi = std::find_if(rows.begin(), rows.end(), [&](const Row& r) { return get(r) == get(*hi); });
  return fmt::format("min {} (GPU {}), max {} (GPU {})", FormatBytes(get(*lo)), lo->gpu, FormatBytes(get(*first_hi)),
                     first_hi->gpu);
}

// What the simulator's cost terms beyond the link rates rest on, one line
// each: measured here (a calibrate profile), measured elsewhere, or an
// estimate from published sources (docs/cost-model.md). `measured`: every
// number of the term comes from a measurement (here or on the preset's host).
struct CostTerm {
  std::string term, value, source;
  bool measured = false;
};
std::vector<CostTerm> CostTerms(const Cluster& c) {
  std::vector<CostTerm> out;
  const bool network = c.nodes > c.nvlink_domain_nodes;
  out.push_back({"network per-op",
                 network ? fmt::format("{:.1f} us per op, {:.1f} us between posts per NIC, size curve of {} points",
                                       static_cast<double>(c.network.latency_ns) * 1e-3,
                                       static_cast<double>(c.network.op_gap_ns) * 1e-3, c.network.efficiency.size())
                         : "not used (one NVLink domain)",
                 c.network_measured ? "measured by `reshard calibrate --network`: " + c.network_source
                 : c.network_source.empty()
                     ? "estimate from published sources (NCCL's cost model, nccl-tests issues; docs/cost-model.md) "
                       "until `reshard calibrate --network` runs across nodes"
                     : "estimate: " + c.network_source + " (not measured by `reshard calibrate --network`)",
                 c.network_measured});
  // The executor records an event before and after each op; Megatron-Core's Python path does not.
  auto host = [](const HostCosts& h, bool events) {
    const int64_t ev = events ? 2 * h.event_record_ns : 0;
    return h.Empty() ? std::string("not modelled")
                     : fmt::format("{:.1f} us per copy op, {:.1f} us per NCCL group + {:.2f} us per op",
                                   static_cast<double>(h.kernel_launch_ns + ev) * 1e-3,
                                   static_cast<double>(h.nccl_group_ns) * 1e-3,
                                   static_cast<double>(h.nccl_op_ns + h.nccl_group_op_ns + ev) * 1e-3);
  };
  out.push_back({"host issue (executor)", host(c.host, true), c.host.source, !c.host.Empty()});
  out.push_back({"host issue (Python)", host(c.host_python, false), c.host_python.source, !c.host_python.Empty()});
  out.push_back({"copy kernel", c.copy_kernel.Empty() ? "not modelled (device-copy link rate)"
                                                      : fmt::format("{} rates by run length and SM share",
                                                                    c.copy_kernel.rates.size()),
                 c.copy_kernel.source, !c.copy_kernel.Empty()});
  out.push_back({"quantize kernel",
                 c.quantize_kernel.Empty() ? "estimate: a copy of half its traffic at the device-copy rate"
                                           : QuantizeRatesText(c.quantize_kernel),
                 c.quantize_kernel.Empty() ? "sim/state.h QuantizeCopyBytes (not measured)" : c.quantize_kernel.source,
                 !c.quantize_kernel.Empty()});
  out.push_back({"cold refit", fmt::format("{:.0f} ms per NCCL connection, pinning {:.2f} GB/s",
                                           static_cast<double>(c.host.nccl_connect_ns) * 1e-6, c.host.pin_bytes_per_s / 1e9),
                 "connection: estimate (NVIDIA/nccl#415, 10-100 ms first sends); pinning: as host issue", false});
  return out;
}

// What inspect reports, computed once for its table and its JSON.
struct InspectFacts {
  std::vector<int64_t> source_bytes, destination_bytes;  // per GPU
  std::vector<GpuMemoryAtStart> mem;
  Feasibility fit;
};

InspectFacts Inspect(const Scenario& s) {
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  const int32_t gpus = s.cluster.Gpus();
  InspectFacts f;
  f.source_bytes.assign(gpus, 0);
  f.destination_bytes.assign(gpus, 0);
  for (int32_t r = 0; r < src.Ranks(); ++r) f.source_bytes[s.source_gpus[r]] += src.RankBytes(r);
  for (int32_t r = 0; r < dst.Ranks(); ++r) f.destination_bytes[s.destination_gpus[r]] += dst.RankBytes(r);
  f.mem = MemoryAtStart(s, src);
  f.fit = CheckStartFits(s, f.mem);
  if (f.fit.fits) f.fit = CheckRefitFloor(s, f.mem, DestinationFloorBytes(s, dst));
  return f;
}

nlohmann::json InspectJsonOf(const Scenario& s, const InspectFacts& f) {
  const int32_t gpus = s.cluster.Gpus();
  const int64_t capacity = s.cluster.gpu_memory_bytes;
  const int64_t parameters = s.model.Parameters();
  const std::vector<int64_t>& source_bytes = f.source_bytes;
  const std::vector<int64_t>& destination_bytes = f.destination_bytes;
  const std::vector<GpuMemoryAtStart>& mem = f.mem;
  const Feasibility& fit = f.fit;
  nlohmann::json j;
  j["scenario"] = s.name;
  j["path"] = s.path;
  j["model"] = s.model.config.name;
  j["dtype"] = std::string(DTypeName(s.dtype));
  j["destination_dtype"] = std::string(DTypeName(s.destination_dtype));
  j["parameters"] = parameters;
  j["model_bytes"] = s.model.Bytes(s.dtype);
  j["destination_model_bytes"] = s.model.Bytes(s.destination_dtype);
  j["cluster"] = {{"name", s.cluster.name},
                  {"gpus", gpus},
                  {"gpu_memory_bytes", capacity},
                  {"measured", s.cluster.measured},
                  {"fingerprint", s.cluster.Fingerprint()}};
  j["scenario_fingerprint"] = ScenarioFingerprint(s);  // what plans of this scenario record (docs/plan-format.md)
  j["placement"] = Placement(s);
  j["source_gpus"] = s.source_gpus;
  j["destination_gpus"] = s.destination_gpus;
  j["source_bytes"] = source_bytes;
  j["destination_bytes"] = destination_bytes;
  j["memory_at_start"] = MemoryAtStartJson(mem, capacity);
  nlohmann::json terms = nlohmann::json::array();
  for (const CostTerm& t : CostTerms(s.cluster))
    terms.push_back({{"term", t.term}, {"value", t.value}, {"source", t.source}, {"measured", t.measured}});
  j["cost_terms"] = terms;
  j["fits"] = fit.fits;
  j["missing_bytes"] = fit.missing_bytes;
  j["worst_gpu"] = fit.gpu;
  j["message"] = fit.message;
  return j;
}

void Run(const InspectOptions& o) {
  const Scenario s = o.scenario.Load();
  const InspectFacts facts = Inspect(s);
  const std::vector<int64_t>& source_bytes = facts.source_bytes;
  const std::vector<int64_t>& destination_bytes = facts.destination_bytes;
  const std::vector<GpuMemoryAtStart>& mem = facts.mem;
  const Feasibility& fit = facts.fit;
  const int32_t gpus = s.cluster.Gpus();
  const int64_t capacity = s.cluster.gpu_memory_bytes;
  const int64_t parameters = s.model.Parameters();

  if (o.json) {
    PrintJson(InspectJsonOf(s, facts));
  } else {
    const Cluster& c = s.cluster;
    std::cout << fmt::format("scenario     {} ({})\n", s.name, s.path);
    std::cout << fmt::format("model        {}: {} parameters, {} in {}", s.model.config.name,
                             FormatCount(parameters), FormatBytes(s.model.Bytes(s.dtype)), DTypeName(s.dtype));
    if (s.destination_dtype != s.dtype)
      std::cout << fmt::format(", {} in {} on the destination", FormatBytes(s.model.Bytes(s.destination_dtype)),
                               DTypeName(s.destination_dtype));
    std::cout << "\n";
    std::cout << fmt::format("cluster      {}: {} node{} x {} GPUs, {} per GPU, NVLink domains of {} node{} [{}: {}]\n",
                             c.name, c.nodes, c.nodes == 1 ? "" : "s", c.gpus_per_node, FormatBytes(capacity),
                             c.nvlink_domain_nodes, c.nvlink_domain_nodes == 1 ? "" : "s",
                             c.measured ? "measured" : "datasheet", c.profile_source);
    const SourceParallel& sp = s.source;
    std::cout << fmt::format("source       megatron tp={} pp={} vpp={} ep={} etp={} cp={} dp={}: {}\n", sp.tp, sp.pp,
                             sp.vpp, sp.ep, sp.etp, sp.cp, sp.dp, RanksOn(s.source_gpus));
    const DestinationParallel& dp = s.destination;
    std::cout << fmt::format("destination  vllm tp={} pp={} ep={} dp={} {}: {} ({}, placement {})\n", dp.tp, dp.pp,
                             dp.ep, dp.dp, DTypeName(s.destination_dtype), RanksOn(s.destination_gpus), Placement(s),
                             s.destination_placement_free ? "auto" : "fixed");

    std::vector<Row> rows;
    for (int32_t g = 0; g < gpus; ++g)
      if (mem[g].Total() > 0 || source_bytes[g] > 0 || destination_bytes[g] > 0)
        rows.push_back({g, source_bytes[g], destination_bytes[g], mem[g]});
    std::cout << "\nper GPU at refit start (destination weights are allocated by the refit itself):\n";
    if (rows.size() <= kMaxTableRows) {
      PrintRows(rows, capacity);
    } else {
      std::cout << fmt::format("  {} GPUs used of {}\n", rows.size(), gpus);
      // Each side over its own GPUs (a disaggregated side has zeros elsewhere).
      std::vector<bool> is_src(gpus, false), is_dst(gpus, false);
      for (int32_t g : s.source_gpus) is_src[g] = true;
      for (int32_t g : s.destination_gpus) is_dst[g] = true;
      std::vector<Row> src_rows, dst_rows;
      for (const Row& r : rows) {
        if (is_src[r.gpu]) src_rows.push_back(r);
        if (is_dst[r.gpu]) dst_rows.push_back(r);
      }
      std::cout << "  source weights       " << MinMax(src_rows, [](const Row& r) { return r.source; }) << "\n";
      std::cout << "  destination weights  " << MinMax(dst_rows, [](const Row& r) { return r.destination; }) << "\n";
      std::cout << "  total at start       " << MinMax(rows, [](const Row& r) { return r.mem.Total(); }) << "\n";
      std::vector<Row> worst = rows;
      std::stable_sort(worst.begin(), worst.end(),
                       [](const Row& a, const Row& b) { return a.mem.Total() > b.mem.Total(); });
      worst.resize(kWorstRows);
      std::cout << fmt::format("  the {} fullest GPUs:\n", kWorstRows);
      PrintRows(worst, capacity);
    }
    std::cout << "\ncost terms beyond the link rates (docs/cost-model.md):\n";
    for (const CostTerm& t : CostTerms(s.cluster))
      std::cout << fmt::format("  {:<22} {}\n  {:<22} [{}]\n", t.term, t.value, "", t.source.empty() ? "?" : t.source);
    if (fit.fits) {
      auto least = std::min_element(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
        return capacity - a.mem.Total() < capacity - b.mem.Total();
      });
      std::cout << fmt::format("\nfits: yes (least free at start: {} on GPU {})\n",
                               FormatBytes(capacity - least->mem.Total()), least->gpu);
    } else {
      std::cout << fmt::format("\nfits: no ({})\n", fit.message);
    }
  }
  if (!fit.fits) {
    std::cerr << "infeasible: " << fit.message << "\n";
    ExitWith(kExitInfeasible);
  }
}

}  // namespace

nlohmann::json InspectJson(const Scenario& s) { return InspectJsonOf(s, Inspect(s)); }

void RegisterInspectCommand(CLI::App& app) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* sub = app.add_subcommand(
      "inspect", "Model size, per-GPU bytes on each side, memory at refit start (exit 3 if it does not fit)");
  AddScenarioOptions(sub, opts->scenario);
  sub->add_flag("--json", opts->json, "machine-readable output (every field: docs/json.md)");
  sub->callback([opts] { Run(*opts); });
}

}  // namespace reshard::cli
