// MakePlan and PlanSession (planner/planner.h): the checks every scenario
// gets before planning (a conversion the planner cannot plan, a GPU short of
// memory whatever the plan), then the search (search.h PlanProblem) on the
// scenario's problem, or a replica block's (planner/replica_blocks.h); a session keeps the problem, its routings and cut
// schedules between plans.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "model/error.h"
#include "model/scenario.h"
#include "planner/known_plan.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/quantize.h"
#include "planner/replica_blocks.h"
#include "planner/routings.h"
#include "planner/search.h"
#include "planner/search_candidates.h"

namespace reshard {

using search_candidates::CheckPlannable;
using search_candidates::InfeasibleResult;

PlanResult MakePlan(const Scenario& s, const PlannerOptions& options) {
  if (s.quantization && s.destination_dtype != s.dtype) return MakeQuantizedPlan(s, options);  // planner/quantize.h
  CheckPlannable(s);
  // A GPU short of memory whatever the plan: say so at once instead of
  // planning every candidate to find out.
  if (!options.inputs)
    if (const Feasibility floor = CheckRefitFits(s); !floor.fits) return InfeasibleResult(floor);
  if (const std::optional<ReplicaBlocks> rb = FindReplicaBlocks(s, options)) {
    PlannerOptions o = options;
    o.inputs = rb->inputs;
    return ReplicateBlocks(MakePlan(rb->block, o), *rb, s);
  }
  Problem prob(s, options.inputs.get());
  Routings routes(prob);
  search_candidates::ScheduleCache cache;
  return PlanProblem(s, options, prob, routes, cache);
}

struct PlanSession::Impl {
  Scenario scenario;
  std::shared_ptr<const ProblemInputs> inputs;  // a replica block's (planner/replica_blocks.h)
  // Replica blocks by (PlannerOptions::replica_blocks, simulate_max_fragments):
  // the count chosen (1: whole) and, per count, the blocks and their session.
  std::map<std::pair<int32_t, int64_t>, int32_t> block_count;
  std::map<int32_t, std::pair<ReplicaBlocks, std::unique_ptr<PlanSession>>> blocks;
  std::optional<Feasibility> floor;
  std::unique_ptr<Problem> prob;
  std::unique_ptr<Routings> routes;
  search_candidates::ScheduleCache cache;
  KnownPlan known;  // the last plan simulated (planner/known_plan.h)
  bool Quantized() const { return scenario.quantization && scenario.destination_dtype != scenario.dtype; }
  const Feasibility& Floor() {
    if (!floor) floor = inputs ? Feasibility{} : CheckRefitFits(scenario);  // a block's whole was checked
    return *floor;
  }
  // The blocks `o` plans this scenario in, with their session (nullptr: planned whole).
  std::pair<ReplicaBlocks, std::unique_ptr<PlanSession>>* Blocks(const PlannerOptions& o) {
    if (inputs) return nullptr;
    const std::pair<int32_t, int64_t> key{o.replica_blocks, o.simulate_max_fragments};
    auto it = block_count.find(key);
    if (it == block_count.end()) {
      std::optional<ReplicaBlocks> rb = FindReplicaBlocks(scenario, o);
      const int32_t n = rb ? rb->count : 1;
      it = block_count.emplace(key, n).first;
      if (rb && !blocks.count(n)) {
        auto session = std::unique_ptr<PlanSession>(new PlanSession(rb->block, rb->inputs));
        blocks.emplace(n, std::make_pair(std::move(*rb), std::move(session)));
      }
    }
    return it->second > 1 ? &blocks.at(it->second) : nullptr;
  }
  Problem& Prob() {
    if (!prob) {
      prob = std::make_unique<Problem>(scenario, inputs.get());
      routes = std::make_unique<Routings>(*prob);
    }
    return *prob;
  }
};

PlanSession::PlanSession(const Scenario& s) : impl_(std::make_unique<Impl>()) { impl_->scenario = s; }
PlanSession::PlanSession(const Scenario& block, std::shared_ptr<const ProblemInputs> inputs)
    : impl_(std::make_unique<Impl>()) {
  impl_->scenario = block;
  impl_->inputs = std::move(inputs);
}
PlanSession::~PlanSession() = default;

PlanResult PlanSession::Plan(const PlannerOptions& options) {
  RESHARD_CHECK(!options.inputs, "a plan session plans its scenario's own layouts");
  Impl& m = *impl_;
  if (m.Quantized()) return MakeQuantizedPlan(m.scenario, options);
  CheckPlannable(m.scenario);
  if (const Feasibility& floor = m.Floor(); !floor.fits) return InfeasibleResult(floor);
  if (auto* b = m.Blocks(options)) return ReplicateBlocks(b->second->Plan(options), b->first, m.scenario);
  Problem& prob = m.Prob();
  return PlanProblem(m.scenario, options, prob, *m.routes, m.cache, &m.known);
}

int64_t PlanSession::LargestRemotePairBytes() {
  Impl& m = *impl_;
  if (m.Quantized() || m.scenario.destination_dtype != m.scenario.dtype || !m.Floor().fits) return -1;
  // A block's pairs are the whole's, repeated.
  if (auto* b = m.Blocks(PlannerOptions{})) return b->second->LargestRemotePairBytes();
  Problem& prob = m.Prob();
  int64_t largest = 0;
  m.routes->RelayedBytes();
  for (int32_t routing : {Routings::kPlain, Routings::kRelayed}) {
    m.routes->Use(routing);
    for (const PairBytes& pb : prob.pairs)
      if (pb.src_gpu != pb.dst_gpu) largest = std::max(largest, pb.bytes);
  }
  return largest / prob.elem_bytes * prob.elem_bytes;
}

}  // namespace reshard
