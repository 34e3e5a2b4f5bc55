// The candidate search of PlanProblem (planner/search.h): the candidates planned so far, the one kept and the
// variants tried on it. Internal to planner/search.cc; its members are in planner/candidate_search.cc.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "planner/emitter.h"
#include "planner/problem.h"
#include "planner/routings.h"
#include "planner/search_candidates.h"
#include "planner/search_predict.h"
#include "planner/segments.h"

namespace reshard::search_internal {

// The candidates planned so far: the fastest that fits, and the infeasible one closest to fitting.
class Search {
 public:
  // `beat_s`: large plans only emit candidates that may be faster than this (the plan another search found); equal
  // ones only if `wins_ties`. `routes` holds the problem's routing that the search plans on.
  Search(const Problem& prob, search_candidates::ScheduleCache& cache, Routings& routes,
         std::vector<int64_t> sizes,
         std::vector<int64_t> directs, std::vector<int32_t> per_rounds, std::vector<PlanPolicy> policies, bool small,
         double beat_s, bool wins_ties, bool try_waves, std::vector<double> chunk_ramps, bool grow_per_round,
         bool relays_in_place, bool try_round_lanes)
      : prob_(prob),
        cache_(cache),
        routes_(routes),
        routing_(routes.Key()),
        now_(routes.Slot()),
        sizes_(std::move(sizes)),
        directs_(std::move(directs)),
        per_rounds_(std::move(per_rounds)),
        policies_(std::move(policies)),
        small_(small),
        beat_s_(beat_s),
        wins_ties_(wins_ties),
        try_waves_(try_waves),
        chunk_ramps_(std::move(chunk_ramps)),
        grow_per_round_(grow_per_round),
        relays_in_place_(relays_in_place),
        try_round_lanes_(try_round_lanes),
        tried_(sizes_.size()) {}

  // Plans (size index, threshold, segments per round) under the policies in order. Once one policy did not fit, the
  // others are first emitted for their memory only (kMemoryOnly) and fully only if they fit; a policy that only adds
  // optimizer offload to one that did not fit is not emitted when PredictMissingBytes (exact) says it cannot fit
  // either. Returns true when a large plan's schedule estimate already loses (nothing emitted).
  bool Consider(size_t size_index, int64_t direct_min_bytes, int32_t per_round);

  // Every candidate, in order (planner/search.h). Large plans: the first that fits is kept; the ones after a candidate
  // of the same round family (rounds, or a round per phase) are its memory fallbacks (SizeOrder), not cut where it
  // lost on its estimate, nor a round per phase's smaller sizes where its memory answers say none can fit.
  void Run(const std::vector<std::pair<size_t, int32_t>>& order);

  // Small phases may not repay a second lane's group (comm_lanes.h): the plan kept is simulated with one lane too.
  void OneLane();

  // Relay waves (comm_lanes.h) where the plan kept has a relay phase: kRelayWaves (8 was slower on llama3-8b NVL72: a
  // wave's groups wait for their slowest pair, relay ops are cut where receives end); more only where fewer won, as
  // for large plans (llama3-8b NVL72's search with sender relays: 4 lost after 2 did, 1.4 CPU-s).
  void RelayWaves();

  // Phase chunks (comm_lanes.h PhaseChunks) where the plan kept is a round per phase on two lanes without relay waves
  // and copies hold up its critical path, or where rounds were kept, of the first round per phase that fit and lost
  // (grid qwen3-235b TP4xPP2xEP16 -> TP8xDP4 EP32 on 128 GB200: rounds 26.2 ms, a round per phase 27.9, in 8 chunks
  // 24.8, ramped 24.0): kPhaseChunks, each also with the relay phase after chunk 0 where that applies, each of
  // chunk_ramps, kept where simulated faster.
  void PhaseChunks();

  // A chunked round per phase kept by PhaseChunks, planned again at halved sizes (powers of two, down to
  // kChunkedMinBytes) under the same policy while simulated faster: small segments let the first chunk start
  // sooner and the last end sooner, and its chunks are finer (grid qwen3-235b TP2xPP8xEP4 -> TP4xDP8 EP32 on 32
  // GB200: 8 ramped chunks at 1 GiB 28.3 ms, halved while faster down to 128 MiB, 27.5; its sweep's best 27.4).
  void HalveChunked();

  // Rounds kept (small plans): on two lanes (comm_lanes.h RoundLanes), kept where simulated kPerRoundGain faster (a
  // second communicator's buffers per peer); then, while kept so, at twice the segments per round (two rounds in
  // flight overlap their seams, so fuller rounds idle less: qwen3-235b TP2xPP8xEP4 -> TP4xDP8 EP32 on 32 H200
  // colocated at 32 MiB, one lane x 8 298.9 ms, two lanes x 8 293.6, x 16 290.0); then at the other direct
  // thresholds, each kept where simulated faster (the threshold one lane kept, never, is 290.0 ms on two lanes;
  // 64 MiB in place, 286.7).
  void RoundLanes();

  // Emits `sched` under `policy` on two lanes and keeps it where it fits, can be issued and is simulated faster than
  // the plan kept by more than `gain` (a share; within VariantLimit). Returns whether it was kept.
  bool KeepIfFasterOnLanes(const std::shared_ptr<const Schedule>& sched, const PlanPolicy& policy, double gain = 0);

  void RunCandidates(const std::vector<std::pair<size_t, int32_t>>& order);

  struct Candidate {
    std::shared_ptr<const Schedule> schedule;
    PlanPolicy policy;
    EmittedPlan emitted;
    double time_s = 0;
    // Small plans: the simulation of emitted.plan that time_s comes from
    // (SimulateCandidate's options), so the plan kept is not simulated again.
    std::optional<Prediction> prediction;
    bool answer_only = false;  // emitted is the memory answer (EmitMode::kAnswerOnly)
  };
  std::optional<Candidate>& best() { return best_; }
  // The best candidate with its plan emitted: now, under the search's own routing, where it was kept on its answer. Its
  // issue order is checked as Consider checks it; failing that is an emitter bug (InternalError).
  Candidate& Kept();
  // Frees the best candidate's emitted plan, keeping its memory answer; Kept() emits it again where it is needed.
  void Release();
  size_t BestSize() const {
    return static_cast<size_t>(std::find(sizes_.begin(), sizes_.end(), best_->schedule->segment_bytes) - sizes_.begin());
  }
  // The plan that did not fit closest to fitting (least missing bytes, the
  // first of equals). planned_peak is empty where its answer was predicted.
  struct Infeasible {
    std::shared_ptr<const Schedule> schedule;
    PlanPolicy policy;
    int64_t missing_bytes = 0;
    int32_t worst_gpu = -1;
    std::vector<int64_t> planned_peak;
  };
  const std::optional<Infeasible>& closest_infeasible() const { return closest_infeasible_; }
  // The first candidate that fit but could not be issued ("" if none).
  const std::string& unissuable() const { return unissuable_; }

 private:
  const Problem& prob_;
  search_candidates::ScheduleCache& cache_;
  Routings& routes_;
  const int32_t routing_;  // Routings::Key() of the problem's routing
  const int32_t now_;      // and the Routings::Slot() it was planned on
  const std::vector<int64_t> sizes_, directs_;
  const std::vector<int32_t> per_rounds_;
  const std::vector<PlanPolicy> policies_;
  const bool small_;
  const double beat_s_;
  const bool wins_ties_;
  const bool try_waves_;  // small plans: relay waves searched (PlannerOptions::relay_waves == 0)
  // Small plans: phase chunks searched (PlannerOptions::phase_chunks == 0) with these PlanPolicy::chunk_ramp; empty:
  // not searched.
  const std::vector<double> chunk_ramps_;
  const bool grow_per_round_;  // segments per round not given: more than 2 tried where rounds win
  const bool relays_in_place_;  // Schedule::relays_in_place
  const bool try_round_lanes_;  // rounds on two lanes searched (PlannerOptions::round_lanes unset)
  // Small plans: PortBoundSeconds is a lower bound of every simulation (no link runs faster both ways than one way).
  const bool prune_small_ = search_candidates::PortBoundIsAFloor(prob_.scenario.cluster);
  bool Loses(double time_s) const { return wins_ties_ ? time_s > beat_s_ : time_s >= beat_s_; }
  std::optional<double> port_bound_s_;  // PortBoundSeconds(prob_), once asked
  // Per size: (segments per round, segment list) already planned.
  std::vector<std::vector<std::pair<int32_t, std::vector<Segment>>>> tried_;
  std::optional<Candidate> best_;
  bool fit_and_lost_ = false;  // the last Consider's plan fit under some policy and none was kept
  int64_t missed_bytes_ = 0;   // the last Consider's plan did not fit by this much (under its last policy tried)
  std::optional<std::pair<std::shared_ptr<const Schedule>, PlanPolicy>> lost_all_;  // small: the first round per phase
  std::optional<Infeasible> closest_infeasible_;
  std::map<int32_t, std::vector<std::vector<int64_t>>> optimizer_slots_;  // by OptimizerStatesUnder
  const std::vector<std::vector<int64_t>>& OptimizerSlots(const PlanPolicy& policy);

  // More segments per round hold more staging: only for a clear gain.
  bool Keep(Candidate&& cand, int32_t per_round);
  // The time a candidate of `per_round` segments per round must beat to be kept: the plan in hand's, less a margin
  // (more segments per round must gain kPerRoundGain).
  double KeepLimit(int32_t per_round) const {
    if (!best_) return std::numeric_limits<double>::infinity();
    const double margin = per_round > best_->schedule->per_round ? search_candidates::kPerRoundGain : 1e-9;
    return best_->time_s * (1 - margin);
  }
  // Where a variant's simulation gives up (OneLane, RelayWaves: after the candidates, so a best they do not replace
  // changes no later choice): past the plan kept, or past beat_s, where the search loses to the other's plan.
  double VariantLimit() const { return std::min(best_->time_s, beat_s_); }
  void NoteInfeasible(const std::shared_ptr<const Schedule>& sched, const PlanPolicy& policy, int64_t missing_bytes,
                      int32_t worst_gpu, std::vector<int64_t> planned_peak);
  std::string unissuable_;
};

}  // namespace reshard::search_internal
