// Simulator speed on synthetic large plans (events per second).
//
// A plan of `gpus` GPUs (dgx-h200 preset, 8 per node) and `rounds` rounds:
// in round r every GPU g allocates a staging buffer, sends one segment to
// g + shift(r) and receives one from g - shift(r) in one group (comm stream),
// unpacks the received segment with a copy (compute stream) and frees the
// staging buffer: 5 ops per GPU and round. Shifts alternate between NVLink
// (inside a node) and the network. With `jitter` the segment sizes differ per
// GPU and round, so flows end at distinct instants (the expensive case for
// water-filling); without it, every round ends at one instant.
#include <benchmark/benchmark.h>

#include <string>

#include "model/cluster.h"
#include "model/error.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/baseline_plan.h"
#include "planner/planner.h"
#include "sim/simulator.h"
#include "sim/topology_bound.h"

namespace reshard {
namespace {

Plan SyntheticPlan(int32_t gpus, int32_t rounds, bool jitter) {
  constexpr int64_t kSegment = 64 << 20;
  Plan p;
  p.name = "synthetic";
  p.cluster = ClusterPreset("dgx-h200");
  p.cluster.nodes = gpus / p.cluster.gpus_per_node;
  p.cluster_fingerprint = p.cluster.Fingerprint();
  const int32_t g_count = p.cluster.Gpus();
  auto buffer = [&](int32_t gpu, int64_t bytes, bool preexisting) {
    PlanBuffer b;
    b.id = static_cast<int32_t>(p.buffers.size());
    b.gpu = gpu;
    b.bytes = bytes;
    b.preexisting = preexisting;
    b.role = preexisting ? BufferRole::kSourceWeights : BufferRole::kStaging;
    p.buffers.push_back(b);
    return b.id;
  };
  std::vector<int32_t> src(g_count), dst(g_count);
  for (int32_t g = 0; g < g_count; ++g) {
    src[g] = buffer(g, kSegment, true);
    dst[g] = buffer(g, kSegment, true);
  }
  auto add = [&](OpKind k, int32_t gpu, int32_t stream, int32_t group, std::vector<int32_t> deps) -> Op& {
    Op op;
    op.id = static_cast<int32_t>(p.ops.size());
    op.kind = k;
    op.gpu = gpu;
    op.stream = stream;
    op.group = group;
    op.deps = std::move(deps);
    p.ops.push_back(std::move(op));
    return p.ops.back();
  };
  const int32_t per_node = p.cluster.gpus_per_node;
  std::vector<int32_t> staging(g_count), alloc(g_count), recv(g_count), send(g_count);
  for (int32_t r = 0; r < rounds; ++r) {
    const int32_t shift = r % 2 == 0 ? 1 + r / 2 % (per_node - 1) : per_node * (1 + r / 2 % (p.cluster.nodes - 1));
    auto bytes_of = [&](int32_t from) {
      return jitter ? kSegment / 2 + (kSegment / 2) * ((from * 7 + r * 13) % 11) / 10 : kSegment;
    };
    for (int32_t g = 0; g < g_count; ++g) {
      staging[g] = buffer(g, kSegment, false);
      alloc[g] = add(OpKind::kAlloc, g, kStreamCompute, -1, {}).id;
      p.ops[alloc[g]].buffer = staging[g];
    }
    // Sends and recvs in plan order per ordered pair (Verify matches in order).
    for (int32_t g = 0; g < g_count; ++g) {
      const int32_t to = (g + shift) % g_count, from = (g - shift % g_count + g_count) % g_count;
      Op& s = add(OpKind::kSend, g, kStreamComm, r, {});
      s.peer = to;
      s.region = ContiguousRegion(src[g], 0, bytes_of(g));
      send[g] = s.id;
      Op& v = add(OpKind::kRecv, g, kStreamComm, r, {alloc[g]});
      v.peer = from;
      v.region = ContiguousRegion(staging[g], 0, bytes_of(from));
      recv[g] = v.id;
    }
    for (int32_t g = 0; g < g_count; ++g) {
      const int32_t to = (g + shift) % g_count;
      p.ops[send[g]].match = recv[to];
      p.ops[recv[to]].match = send[g];
    }
    for (int32_t g = 0; g < g_count; ++g) {
      const int64_t n = p.ops[recv[g]].region.Bytes();
      Op& c = add(OpKind::kCopy, g, kStreamCompute, -1, {recv[g]});
      c.copies.push_back({ContiguousRegion(staging[g], 0, n), ContiguousRegion(dst[g], 0, n)});
      add(OpKind::kFree, g, kStreamCompute, -1, {}).buffer = staging[g];
    }
  }
  return p;
}

void BM_Simulate(benchmark::State& state) {
  const Plan plan = SyntheticPlan(static_cast<int32_t>(state.range(0)), static_cast<int32_t>(state.range(1)),
                                  state.range(2) != 0);
  if (const VerifyResult v = Verify(plan); !v.ok()) {
    state.SkipWithError(("synthetic plan does not verify: " + v.problems.front()).c_str());
    return;
  }
  int64_t events = 0, updates = 0;
  double predicted_s = 0;
  for (auto _ : state) {
    const Prediction pr = Simulate(plan, SimOptions{nullptr, /*record_op_times=*/false});
    events = pr.events;
    updates = pr.rate_updates;
    predicted_s = pr.time_s;
    benchmark::DoNotOptimize(pr.time_ns);
  }
  state.counters["ops"] = static_cast<double>(plan.ops.size());
  state.counters["events"] = static_cast<double>(events);
  state.counters["rate_updates"] = static_cast<double>(updates);
  state.counters["predicted_s"] = predicted_s;
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
}

// The hard case for water-filling: one group in which every GPU sends to
// every other (as a single batched NCCL send/recv of a whole refit), segment
// sizes all different, so the G(G-1) flows form one component and end at
// distinct instants: O(F) rate recomputations of O(F log F) each.
Plan AllToAllPlan(int32_t gpus) {
  Plan p;
  p.name = "all-to-all";
  p.cluster = ClusterPreset("dgx-h200");
  p.cluster.nodes = gpus / p.cluster.gpus_per_node;
  p.cluster_fingerprint = p.cluster.Fingerprint();
  for (int32_t g = 0; g < gpus; ++g) {
    PlanBuffer b;
    b.id = g;
    b.gpu = g;
    b.bytes = int64_t{1} << 30;
    b.preexisting = true;
    p.buffers.push_back(b);
  }
  for (int32_t a = 0; a < gpus; ++a) {
    for (int32_t b = 0; b < gpus; ++b) {
      if (a == b) continue;
      const int64_t bytes = (int64_t{4} << 20) + ((a * 131 + b * 29) % 97) * (int64_t{1} << 16);
      Op s, r;
      s.id = static_cast<int32_t>(p.ops.size());
      r.id = s.id + 1;
      s.kind = OpKind::kSend;
      r.kind = OpKind::kRecv;
      s.gpu = r.peer = a;
      r.gpu = s.peer = b;
      s.stream = r.stream = kStreamComm;
      s.group = r.group = 0;
      s.match = r.id;
      r.match = s.id;
      s.region = ContiguousRegion(a, 0, bytes);
      r.region = ContiguousRegion(b, 0, bytes);
      p.ops.push_back(s);
      p.ops.push_back(r);
    }
  }
  return p;
}

void BM_SimulateAllToAll(benchmark::State& state) {
  const Plan plan = AllToAllPlan(static_cast<int32_t>(state.range(0)));
  int64_t events = 0, updates = 0;
  for (auto _ : state) {
    const Prediction pr = Simulate(plan, SimOptions{nullptr, /*record_op_times=*/false});
    events = pr.events;
    updates = pr.rate_updates;
    benchmark::DoNotOptimize(pr.time_ns);
  }
  state.counters["flows"] = static_cast<double>(plan.ops.size() / 2);
  state.counters["events"] = static_cast<double>(events);
  state.counters["rate_updates"] = static_cast<double>(updates);
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_SimulateAllToAll)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);

// The planner's plan of a built-in scenario (planned once, outside the
// timing; `planner_simulates`: the planner picks its candidate with the
// simulator, as `reshard plan` does, else by its per-port estimate). The
// target: the deepseek-v3 256 -> 256 GPU plan in under 1 s on one core.
// Times simulating `plan` (without op times) and reports its size and speed.
void TimeSimulation(benchmark::State& state, const Plan& plan) {
  int64_t events = 0;
  double predicted_s = 0;
  for (auto _ : state) {
    const Prediction pr = Simulate(plan, SimOptions{nullptr, /*record_op_times=*/false});
    events = pr.events;
    predicted_s = pr.time_s;
    benchmark::DoNotOptimize(pr.time_ns);
  }
  state.counters["ops"] = static_cast<double>(plan.ops.size());
  state.counters["gpus"] = plan.Gpus();
  state.counters["events"] = static_cast<double>(events);
  state.counters["predicted_s"] = predicted_s;
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_SimulateScenario(benchmark::State& state, const std::string& name, bool planner_simulates) {
  PlannerOptions po;
  po.simulate = planner_simulates;
  const PlanResult r = MakePlan(BuiltinScenario(name), po);
  if (!r.ok()) {
    state.SkipWithError(("does not fit: " + r.message).c_str());
    return;
  }
  TimeSimulation(state, r.plan);
}
BENCHMARK_CAPTURE(BM_SimulateScenario, llama3_8b, std::string("llama3-8b-tp2-to-tp1x2"), true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SimulateScenario, deepseek_v3_256_to_256, std::string("deepseek-v3-pp16ep16-to-tp32dp8"), true)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_SimulateScenario, deepseek_v3_256_to_256_estimated,
                  std::string("deepseek-v3-pp16ep16-to-tp32dp8"), false)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The plan `reshard plan` keeps for a scenario file of the results (planned
// once, with its candidates simulated, outside the timing). llama3-8b on 144
// GB200 NVL72: relay waves whose NVLink relays form components of ~250 flows
// (each on 4 ports), below the 512 at which the simulator keeps a component
// between calls, re-shared at each of ~120 K changes: the water-filling's
// mid-size case (bench/results/2026-12-06-cpu-component-cap-floor).
void BM_SimulateScenarioFile(benchmark::State& state, const std::string& path) {
  const PlanResult r = MakePlan(LoadScenario(std::string(RESHARD_SOURCE_DIR) + "/" + path), {});
  if (!r.ok()) {
    state.SkipWithError(("does not fit: " + r.message).c_str());
    return;
  }
  TimeSimulation(state, r.plan);
}
BENCHMARK_CAPTURE(BM_SimulateScenarioFile, llama3_8b_gb200_nvl72_relay_waves,
                  std::string("bench/results/2026-12-02-cpu-at-scale/llama3-8b-gb200-nvl72-disagg.yaml"))
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The routing-independent lower bound (sim/topology_bound.h) of the plan of a
// built-in scenario (planned once, by the port-model estimate, outside the
// timing). The target: well under a second on one core at 512 GPUs. `bf16`:
// the scenario with its destination in the training dtype (the planners do
// not convert dtypes yet; kimi-k2's vLLM side is fp8).
void BM_TopologyBound(benchmark::State& state, const std::string& name, bool bf16) {
  PlannerOptions po;
  po.simulate = false;
  PlanResult r;
  try {
    Scenario s = BuiltinScenario(name);
    if (bf16) s.destination_dtype = s.dtype;  // as plan_golden_test does
    r = MakePlan(s, po);
  } catch (const InputError& e) {
    state.SkipWithError(e.what());
    return;
  }
  if (!r.ok()) {
    state.SkipWithError(("does not fit: " + r.message).c_str());
    return;
  }
  TopologyBound b;
  for (auto _ : state) {
    b = TopologyLowerBound(r.plan);
    benchmark::DoNotOptimize(b.newton_steps);
  }
  state.counters["gpus"] = r.plan.Gpus();
  state.counters["pieces"] = static_cast<double>(r.plan.sources.size() + r.plan.destinations.size());
  state.counters["bound_ms"] = benchmark::Counter(b.time_s * 1e3);
  state.counters["newton_steps"] = b.newton_steps;
  state.counters["graph_nodes"] = static_cast<double>(b.graph_nodes);
  state.counters["graph_arcs"] = static_cast<double>(b.graph_arcs);
}
BENCHMARK_CAPTURE(BM_TopologyBound, deepseek_v3_256_to_256, std::string("deepseek-v3-pp16ep16-to-tp32dp8"), false)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TopologyBound, kimi_k2_256_to_128_bf16, std::string("kimi-k2-256-to-128"), true)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_TopologyBound, qwen3_235b_128_to_128, std::string("qwen3-235b-tp4pp8ep16-to-tp8dp16"), false)
    ->Unit(benchmark::kMillisecond);

// A baseline's plan of a built-in scenario (built once, outside the timing,
// unpredicted), simulated under a host issue model (`reshard simulate
// --baseline megatron` issues it as Python does). The Megatron plan of
// qwen3-235b (128 GPUs, one NCCL group, ~4.3 M ops) keeps ~15,000 transfers
// on the 256 NIC ports at once, one component re-shared at every flow start
// and end: the simulator's heaviest built-in case. Targets on one core:
// deepseek-v3 (512 GPUs) well under 1 s, qwen3-235b under 30 s.
void BM_SimulateBaseline(benchmark::State& state, const std::string& name, const std::string& baseline,
                         IssueModel issue) {
  BaselineOptions bo;
  bo.simulate = false;
  const Plan plan = MakeBaselinePlan(BuiltinScenario(name), baseline, bo).plan;
  SimOptions so;
  so.record_op_times = false;
  so.issue = issue;
  so.lower_bound = false;
  int64_t events = 0, updates = 0;
  double predicted_s = 0;
  for (auto _ : state) {
    const Prediction pr = Simulate(plan, so);
    events = pr.events;
    updates = pr.rate_updates;
    predicted_s = pr.time_s;
    benchmark::DoNotOptimize(pr.time_ns);
  }
  state.counters["ops"] = static_cast<double>(plan.ops.size());
  state.counters["gpus"] = plan.Gpus();
  state.counters["events"] = static_cast<double>(events);
  state.counters["rate_updates"] = static_cast<double>(updates);
  state.counters["predicted_s"] = predicted_s;
  state.counters["events/s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK_CAPTURE(BM_SimulateBaseline, deepseek_v3_megatron_python, std::string("deepseek-v3-pp16ep16-to-tp32dp8"),
                  std::string("megatron"), IssueModel::kPython)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_SimulateBaseline, qwen3_235b_megatron_python, std::string("qwen3-235b-tp4pp8ep16-to-tp8dp16"),
                  std::string("megatron"), IssueModel::kPython)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);
BENCHMARK_CAPTURE(BM_SimulateBaseline, qwen3_235b_megatron_no_issue, std::string("qwen3-235b-tp4pp8ep16-to-tp8dp16"),
                  std::string("megatron"), IssueModel::kNone)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// gpus, rounds, jitter
BENCHMARK(BM_Simulate)
    ->Args({16, 64, 0})
    ->Args({16, 64, 1})
    ->Args({256, 100, 0})
    ->Args({256, 100, 1})
    ->Args({512, 400, 0})
    ->Args({512, 400, 1})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace reshard

BENCHMARK_MAIN();
