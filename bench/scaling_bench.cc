// Planner and simulator time and memory against GPU count
// (8 ... 8192) and model size (8 B ... 1 T), on one core.
//
// Families (all colocated, dgx-h200 nodes, optimizer offload auto, 10 GiB KV
// cache, 2 GiB reserve):
//  * gpus/dense/N: llama3-8b, Megatron TP8 x DP(N/8) -> vLLM TP4 x DP(N/4);
//  * gpus/moe/N:   qwen3-30b-a3b, Megatron EP8 x DP(N) -> vLLM TP4 x DP(N/4),
//                  N = 8 ... 256: the destination is one vLLM engine, which
//                  shards every expert over its whole TP x DP group (layout.h),
//                  so its size is bounded by the model (768 | N);
//    the work grows with the destination ranks (every one needs its weights),
//    so time ~ GPUs^1 is the ideal;
//  * size/MODEL: the six presets from 8 B to 1 T parameters on 256 GPUs, each
//    in a layout its size needs (README table in bench/results/*-scaling/README.md).
// Each case runs two benchmarks: plan/... times MakePlan with
// PlannerOptions::simulate = false (the planner's own choice of segment size
// and policy, no final simulation), simulate/... times one Simulate of that
// plan (planned once, outside the timing). Counters: gpus, parameters,
// fragments, ops, events, and peak_rss_MiB: the process's peak resident set
// during the benchmark (VmHWM after resetting it through /proc/self/clear_refs
// and malloc_trim before the benchmark; for simulate/ it includes the plan).
//
//   scaling_bench [--max-gpus N] [--moe-max-gpus N] [google-benchmark flags]
//   e.g. scaling_bench --benchmark_out=s.json --benchmark_out_format=json
// bench/scaling_report.py turns the JSON into the CSV, the table and the fits.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include "bench/process_stats.h"
#include "model/scenario.h"
#include "planner/planner.h"
#include "sim/simulator.h"

namespace reshard {
namespace {

using bench::PeakRssBytes;
using bench::ResetPeakRss;

constexpr const char* kMemory =
    "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache_gib: 10, reserve_gib: 2}\n";

Scenario Make(const std::string& name, const std::string& model, int32_t gpus, const std::string& src,
              const std::string& dst) {
  return ParseScenario(fmt::format("name: {}\nmodel: {}\ndtype: bf16\ncluster: {{preset: dgx-h200, nodes: {}}}\n"
                                   "source: {}\ndestination: {}\n{}",
                                   name, model, gpus / 8, src, dst, kMemory),
                       "<scaling_bench>");
}

Scenario GpuScenario(const std::string& family, int32_t n) {
  if (family == "dense")
    return Make(fmt::format("dense-{}", n), "llama3-8b", n, fmt::format("{{tp: 8, dp: {}}}", n / 8),
                fmt::format("{{tp: 4, dp: {}}}", n / 4));
  return Make(fmt::format("moe-{}", n), "qwen3-30b-a3b", n, fmt::format("{{tp: 1, ep: 8, dp: {}}}", n),
              fmt::format("{{tp: 4, dp: {}}}", n / 4));
}

// Model sizes on 256 GPUs, each in a layout its size needs.
struct SizeCase {
  const char* model;
  const char* src;
  const char* dst;
};
const SizeCase kSizes[] = {
    {"llama3-8b", "{tp: 2, dp: 128}", "{tp: 1, dp: 256}"},
    {"qwen3-30b-a3b", "{tp: 1, ep: 8, dp: 256}", "{tp: 4, dp: 64}"},
    {"llama3-70b", "{tp: 8, pp: 2, dp: 16}", "{tp: 4, dp: 64}"},
    {"qwen3-235b-a22b", "{tp: 4, pp: 8, ep: 16, dp: 8}", "{tp: 8, dp: 32}"},
    {"deepseek-v3", "{tp: 1, pp: 16, ep: 16, dp: 16}", "{tp: 32, dp: 8}"},
    {"kimi-k2", "{tp: 1, pp: 16, ep: 16, dp: 16}", "{tp: 8, dp: 16, ep: 128, gpus: \"0-127\"}"},
};

int64_t Parameters(const Scenario& s) {
  int64_t n = 0;
  for (const auto& t : s.model.tensors) n += t.shape.Elements();
  return n;
}

// The plan of the case last planned, for its simulate/ benchmark.
struct Cache {
  std::string name;
  Plan plan;
};

void BM_Plan(benchmark::State& state, const Scenario& s, const std::shared_ptr<Cache>& cache) {
  cache->name.clear();
  cache->plan = Plan{};
  ResetPeakRss();
  PlannerOptions o;
  o.simulate = false;
  PlanResult r;
  for (auto _ : state) {
    r = MakePlan(s, o);
    benchmark::DoNotOptimize(r.plan.ops.data());
  }
  state.counters["peak_rss_MiB"] = PeakRssBytes() / (1 << 20);
  state.counters["gpus"] = s.cluster.Gpus();
  state.counters["parameters"] = static_cast<double>(Parameters(s));
  state.counters["fragments"] = static_cast<double>(r.stats.fragments);
  state.counters["ops"] = static_cast<double>(r.stats.ops);
  if (!r.ok()) {
    state.SkipWithError(("does not fit: " + r.message).c_str());
    return;
  }
  cache->name = s.name;
  cache->plan = std::move(r.plan);
}

void BM_Simulate(benchmark::State& state, const Scenario& s, const std::shared_ptr<Cache>& cache) {
  if (cache->name != s.name) {
    PlannerOptions o;
    o.simulate = false;
    PlanResult r = MakePlan(s, o);
    if (!r.ok()) {
      state.SkipWithError(("does not fit: " + r.message).c_str());
      return;
    }
    cache->name = s.name;
    cache->plan = std::move(r.plan);
  }
  ResetPeakRss();
  Prediction pr;
  for (auto _ : state) {
    pr = Simulate(cache->plan, SimOptions{nullptr, /*record_op_times=*/false});
    benchmark::DoNotOptimize(pr.time_ns);
  }
  state.counters["peak_rss_MiB"] = PeakRssBytes() / (1 << 20);
  state.counters["gpus"] = s.cluster.Gpus();
  state.counters["parameters"] = static_cast<double>(Parameters(s));
  state.counters["ops"] = static_cast<double>(cache->plan.ops.size());
  state.counters["events"] = static_cast<double>(pr.events);
  state.counters["predicted_ms"] = pr.time_s * 1e3;
  state.counters["lower_bound_ms"] = pr.lower_bound_s * 1e3;
  // The next case plans afresh; free this one before its peak is measured.
  cache->name.clear();
  cache->plan = Plan{};
}

void Register(const std::string& name, const Scenario& s, const std::shared_ptr<Cache>& cache) {
  benchmark::RegisterBenchmark(("plan/" + name).c_str(), BM_Plan, s, cache)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.2);
  benchmark::RegisterBenchmark(("simulate/" + name).c_str(), BM_Simulate, s, cache)
      ->Unit(benchmark::kMillisecond)
      ->MinTime(0.2);
}

}  // namespace
}  // namespace reshard

int main(int argc, char** argv) {
  using namespace reshard;
  int32_t max_gpus = 8192, moe_max = 256;
  std::vector<char*> rest{argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--max-gpus" && i + 1 < argc) max_gpus = std::stoi(argv[++i]);
    else if (a == "--moe-max-gpus" && i + 1 < argc) moe_max = std::stoi(argv[++i]);
    else rest.push_back(argv[i]);
  }
  auto cache = std::make_shared<Cache>();
  for (int32_t n = 8; n <= max_gpus; n *= 4) Register(fmt::format("gpus/dense/{}", n), GpuScenario("dense", n), cache);
  for (int32_t n = 8; n <= std::min(max_gpus, moe_max); n *= 2)
    Register(fmt::format("gpus/moe/{}", n), GpuScenario("moe", n), cache);
  for (const SizeCase& c : kSizes)
    Register(fmt::format("size/{}", c.model), Make(fmt::format("size-{}", c.model), c.model, 256, c.src, c.dst), cache);
  int rest_argc = static_cast<int>(rest.size());
  benchmark::Initialize(&rest_argc, rest.data());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
