// Planner speed at scale. Targets: each of the published refits
// plans in under 1 s on one core; 8192 GPUs in under 10 s. Planning time
// excludes the final simulation (PlannerOptions::simulate = false: prediction
// by the per-port estimate); BM_PlanAndSimulate adds it.
// Each iteration is one MakePlan; the previous iteration's plan is released
// outside the timing (freeing it is not planning). Counters: ops, segments
// and fragments of the plan; cold_ms, the CPU time of the first iteration,
// which starts on a trimmed heap (malloc_trim) like a fresh `reshard plan`
// process, every page faulted in anew; peak_rss_MiB, the process's peak
// resident set during the benchmark (VmHWM, reset before it).
//   planner_bench [--benchmark_repetitions=N] [--benchmark_filter=...]
#include <fstream>
#include <string>

#include <benchmark/benchmark.h>

#include "bench/process_stats.h"
#include "model/scenario.h"
#include "planner/planner.h"

namespace reshard {
namespace {

using bench::PeakRssBytes;
using bench::ResetPeakRss;
using bench::ThreadCpuSeconds;

Scenario Load(const std::string& name) {
  Scenario s = LoadScenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + name + ".yaml");
  // The planner moves weights in the training dtype (kimi-k2's scenario asks
  // for fp8 on the destination, which the planner does not convert yet).
  s.destination_dtype = s.dtype;
  return s;
}

// 8192 GPUs, colocated: llama3-8b TP8 x DP1024 -> TP4 x DP2048 (the dense
// case of bench/scaling_bench.cc at 8192 GPUs).
Scenario LargeDense() {
  return ParseScenario(R"(
name: llama3-8b-8192
model: llama3-8b
dtype: bf16
cluster: {preset: dgx-h200, nodes: 1024}
source: {tp: 8, dp: 1024}
destination: {tp: 4, dp: 2048}
memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache_gib: 10, reserve_gib: 2}
)",
                       "<bench>");
}

// 8192 GPUs, colocated: llama3-70b TP8 x PP8 x DP128 -> TP4 x PP4 x DP512.
Scenario Large() {
  return ParseScenario(R"(
name: llama3-70b-8192
model: llama3-70b
dtype: bf16
cluster: {preset: dgx-h100, nodes: 1024}
source: {tp: 8, pp: 8, dp: 128}
destination: {tp: 4, pp: 4, dp: 512}
memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache_gib: 10, reserve_gib: 2}
)",
                       "<bench>");
}

void Run(benchmark::State& state, const Scenario& s, bool simulate) {
  PlannerOptions o;
  o.simulate = simulate;
  PlanResult r;
  ResetPeakRss();
  double cold_s = -1;
  for (auto _ : state) {
    state.PauseTiming();
    r = PlanResult{};
    state.ResumeTiming();
    const double t0 = ThreadCpuSeconds();
    r = MakePlan(s, o);
    if (cold_s < 0) cold_s = ThreadCpuSeconds() - t0;
    benchmark::DoNotOptimize(r.plan.ops.data());
  }
  state.counters["cold_ms"] = cold_s * 1e3;
  state.counters["gpus"] = s.cluster.Gpus();
  state.counters["ops"] = static_cast<double>(r.stats.ops);
  state.counters["segments"] = static_cast<double>(r.stats.segments);
  state.counters["fragments"] = static_cast<double>(r.stats.fragments);
  state.counters["predicted_ms"] = r.plan.summary.predicted_time_s * 1e3;
  state.counters["lower_bound_ms"] = r.plan.summary.lower_bound_s * 1e3;
  state.counters["peak_rss_MiB"] = PeakRssBytes() / (1 << 20);
  if (!r.ok()) state.SkipWithError(r.message.c_str());
}

void BM_Plan(benchmark::State& state, const char* name) { Run(state, Load(name), false); }
void BM_PlanAndSimulate(benchmark::State& state, const char* name) { Run(state, Load(name), true); }
void BM_Plan8192(benchmark::State& state) { Run(state, Large(), false); }
void BM_Plan8192Dense(benchmark::State& state) { Run(state, LargeDense(), false); }

BENCHMARK_CAPTURE(BM_Plan, deepseek_v3_pp16ep16_to_tp32dp8, "deepseek-v3-pp16ep16-to-tp32dp8")
    ->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Plan, qwen3_235b_tp4pp8ep16_to_tp8dp16, "qwen3-235b-tp4pp8ep16-to-tp8dp16")
    ->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_Plan, kimi_k2_256_to_128, "kimi-k2-256-to-128")->Unit(benchmark::kMillisecond)->Iterations(3);
BENCHMARK_CAPTURE(BM_PlanAndSimulate, deepseek_v3_pp16ep16_to_tp32dp8, "deepseek-v3-pp16ep16-to-tp32dp8")
    ->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Plan8192)->Unit(benchmark::kMillisecond)->Iterations(1);
BENCHMARK(BM_Plan8192Dense)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace reshard

BENCHMARK_MAIN();
