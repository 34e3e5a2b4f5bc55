// Capacity-planning sweep: plan and simulate a scenario over a grid of
// segment sizes, optimizer offload fractions, memory policies and (on
// multi-node clusters, on request) NVLink domain sizes; report each point's predicted
// time and per-GPU peak, the Pareto front of (time, peak) among the points
// simulated that fit, and a recommended default (the fastest point whose peak
// leaves a safety margin of the GPU's capacity).
//
// Each point is one MakePlan with every choice forced (PlannerOptions), so a
// point's numbers are those `reshard simulate` would print for that plan.
// Points are independent: they run on a pool of threads, a (domain, segment
// size) at a time, and land in the grid's order, so results do not depend on
// the thread count. A thread plans through one PlanSession per domain
// (planner/planner.h): the problem is set up once and each size cut once for
// its offload fractions and memory policies, with MakePlan's results.
// Sizes that plan the same: a segment size at least as large as every
// (sender, receiver) pair's bytes (with and without relays) cuts each pair
// and transfer class into one segment, so every such size gives the same
// plan (planner/segments.h) as the smallest of them; those points are copied
// from it (same_plan_as) instead of planned again. The front and the
// recommendation are those of planning every point (equal points: the first
// in grid order, which is the one planned).
//
// Pruning (the default; SweepOptions::exhaustive plans every point): first
// each (domain, size)'s base point -- its least offload, then fewest memory
// savers (dest-all-at-once, no source-to-host) -- is planned and simulated.
// Every other point gets an estimate: the larger of its base point's time
// less prune_tolerance (5 %) and its host moves' PCIe bound
// (HostMoveBoundSeconds: the optimizer offload and, with source-to-host, the
// training weights, from the base plan's buffers); where the base point does
// not fit within the margin (or fails), that bound alone. Then every point
// whose estimate is at most the time of the fastest base point that fits
// within the margin (all of them when none does) is planned and simulated;
// the others are reported as estimated, not simulated (simulated = false), and are never on
// the front nor recommended. The recommendation equals the exhaustive
// sweep's unless a memory saver makes a point more than prune_tolerance
// faster than its size's base point (savers only add host transfers and
// later allocations: ~0.01 % faster at most on the built-in scenarios): the
// exhaustive sweep's recommended point Q has time(Q) <= the bar, and its
// estimate <= time(Q) (the PCIe part is a bound), so Q is simulated. The front is that of the
// simulated points: a pruned point of lower peak (a memory saver at a slow
// size) is missing from it, and a simulated point it would dominate may be
// listed instead. Under memory pressure a saver can be faster than a point
// with fewer (qwen3-30b-a3b ep2 -> tp2: dest-per-layer 21 % faster at
// offload 0.25), which is why a size whose base point does not fit within
// the margin estimates its points by their PCIe bound alone. deepseek-v3:
// 24 of its 80 planned points simulated (README of
// bench/results/2026-12-03-cpu-sweep-60s).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {

// The planner's memory policies (planner/planner.h, step 5), less offload.
struct MemoryPolicy {
  bool destination_per_layer = false;
  bool source_to_host = false;
  // "dest-all-at-once", "dest-per-layer+source-to-host", ... (the planner's names).
  std::string Name() const;
  friend bool operator==(const MemoryPolicy&, const MemoryPolicy&) = default;
};

// Most points (domains x segment sizes x offload fractions x policies) one
// sweep plans: the default grid has 176; each point is a plan and a simulation.
inline constexpr int64_t kMaxSweepPoints = 1024;

struct SweepGrid {
  std::vector<int64_t> segment_bytes;      // empty: DefaultSegmentSizes(scenario)
  std::vector<double> offload_fractions;   // empty: DefaultOffloadFractions(scenario)
  std::vector<MemoryPolicy> policies;      // empty: all four
  std::vector<int32_t> nvlink_domain_nodes;// empty: the cluster's own (the domain a user has);
                                           // DefaultDomainSizes lists others worth asking about
};

struct SweepOptions {
  int32_t threads = 0;        // 0: std::thread::hardware_concurrency()
  double margin = 0.05;       // fraction of GPU capacity the recommended peak leaves free
  // Called after each point (done of total), from worker threads, serialised.
  std::function<void(int64_t done, int64_t total)> progress;
  // Copy points whose segment size gives the plan of a smaller one (see the
  // file comment); false plans every point (tests compare the two).
  bool reuse_equal_plans = true;
  // Plan each (domain, segment size)'s points through one PlanSession
  // (planner/planner.h): the problem is set up once per domain and thread,
  // and a size is cut once for its memory policies; false calls MakePlan
  // per point (the same results; tests compare the two).
  bool share_problem = true;
  // Plan and simulate every point (true) or prune (see the file comment).
  bool exhaustive = false;
  // Pruning: a point other than its size's base one is estimated at most this
  // fraction faster than the base.
  double prune_tolerance = 0.05;
};

struct SweepPoint {
  int64_t segment_bytes = 0;
  double offload_fraction = 0;
  MemoryPolicy policy;
  int32_t nvlink_domain_nodes = 1;
  bool fits = false;
  double time_s = 0;          // valid when fits
  int64_t peak_bytes = 0;     // max over GPUs: simulated (fits) or the planner's bound (does not)
  int32_t peak_gpu = -1;
  int64_t missing_bytes = 0;  // when !fits
  double lower_bound_s = 0;   // valid when fits
  double plan_efficiency = 0; // lower_bound_s / time_s
  double routing_bound_s = 0; // valid when fits: the plan's own routing bound
  bool pareto = false;
  std::string error;          // the planner refused the point (InputError message)
  int64_t same_plan_as = -1;  // >= 0: index of the point of the same plan, whose results these are
  // false: pruned (see the file comment): not planned; fits is false and
  // only estimate_s is known.
  bool simulated = true;
  double estimate_s = -1;     // the pruning estimate; < 0: none (a base point, or an exhaustive sweep)
};

struct SweepResult {
  std::string scenario;
  int64_t capacity_bytes = 0; // per GPU, less the scenario's reserve (what a plan may use)
  double margin = 0;
  std::vector<SweepPoint> points;  // grid order: domains, segment size, offload, policy
  std::optional<size_t> recommended;  // index into points
  std::string why;            // one line: why that point, or why none
};

// Domain sizes to try: the cluster's value, its divisors, and its multiples
// up to the node count that divide the node count; only values for which the
// cluster stays valid (ValidateCluster). Single-node clusters: the value alone.
std::vector<int32_t> DefaultDomainSizes(const Cluster& c);

// The bytes a plan may move to host, per GPU: its optimizer slots in layer
// order, whole (OptimizerSlotBytes, a slot's `plan_states` buffers summed:
// planner/emitter.h's OptimizerStatesUnder of the plan's policy), and its
// training weight buffers.
struct HostMoves {
  std::vector<std::vector<int64_t>> optimizer, source;
};
HostMoves HostMovesOf(const Plan& p, int32_t plan_states = 1);

// OptimizerStatesUnder of a point's policy and offload fraction.
int32_t OptimizerStatesOf(const Scenario& s, const SweepPoint& p);

// A lower bound on the time of a plan with optimizer offload `fraction` and,
// with `source_to_host`, every training weight buffer moved to host (the
// emitter moves each once its last read is done): the most bytes one GPU
// moves to host over its PCIe link's peak rate, which no sharing exceeds
// (its duplex rate is no higher). `moves`: HostMovesOf any plan of the same
// problem; `states`: the plan's optimizer buffers per slot (the offload moves
// whole buffers until the fraction is reached). 0 where the cluster has no
// PCIe rate.
double HostMoveBoundSeconds(const Cluster& c, const HostMoves& moves, double fraction, bool source_to_host,
                            int32_t states = 1);

// Segment sizes a sweep tries by default: powers of two 4 MiB .. 4 GiB that
// `reshard plan --segment-bytes` accepts (SegmentBytesProblem: at most
// kMaxSegments segments, so deepseek-v3 on 512 GPUs starts at 16 MiB; its 4
// and 8 MiB points, which plan refuses, took 150 of the sweep's 250 CPU-s).
// Throws InputError when none is accepted.
std::vector<int64_t> DefaultSegmentSizes(const Scenario& s);

// Offload fractions worth sweeping: 0 alone when there is no optimizer state
// on the GPUs or the scenario forbids offload (every fraction would give the
// same plan); 0 and the scenario's fraction when it gives one; else 0, 0.25,
// 0.5, 1.
std::vector<double> DefaultOffloadFractions(const Scenario& s);

// Pareto front of (time, peak), both minimised, among points with fits;
// others are never on it. Of equal (time, peak) points not dominated, only
// the first in grid order is on it (the front lists distinct points).
// O(n log n): sort by (time, peak), keep the running minimum peak.
std::vector<bool> ParetoFront(const std::vector<SweepPoint>& points);

// The fastest point that fits with peak <= (1 - margin) * capacity (ties:
// lower peak, then grid order); nullopt when none. `why` gets one line.
std::optional<size_t> Recommend(const std::vector<SweepPoint>& points, int64_t capacity_bytes, double margin,
                                std::string* why);

// Runs the sweep. Throws InputError for a bad grid (empty values, fraction
// outside [0, 1], a domain size the cluster cannot have).
SweepResult Sweep(const Scenario& s, const SweepGrid& grid, const SweepOptions& options = {});

void to_json(nlohmann::json& j, const SweepPoint& p);
void to_json(nlohmann::json& j, const SweepResult& r);

}  // namespace reshard
