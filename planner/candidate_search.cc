// Members of the candidate search (planner/candidate_search.h): each candidate planned, emitted and predicted, and
// the variants tried on the plan kept.
#include "planner/candidate_search.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/error.h"
#include "plan/issue_order.h"
#include "planner/comm_lanes.h"
#include "planner/round_estimate.h"

namespace reshard::search_internal {

using namespace search_candidates;  // NOLINT: the candidates are this file's vocabulary
using namespace search_predict;     // NOLINT: and their predictions

bool Search::Consider(size_t size_index, int64_t direct_min_bytes, int32_t per_round) {
  fit_and_lost_ = false, missed_bytes_ = 0;
  // Large plans: a schedule of at most two segments per round whose port bound (at most its estimate, less the
  // roundings of summing its rounds) already loses to the plan in hand is not even cut.
  if (!small_ && per_round <= 2 && beat_s_ < std::numeric_limits<double>::infinity()) {
    if (!port_bound_s_) port_bound_s_ = PortBoundSeconds(prob_);  // planner/segments.h
    if (Loses(*port_bound_s_ * (1 - 1e-6))) return true;
  }
  // Small plans: no simulation beats the port bound (a port's bytes at its peak rate), so where it does not beat the
  // other routing's plan no candidate of this routing can win and none is simulated (llama3-8b NVL72: the plain
  // routing's NICs bound it at ~80 ms against 7.6 relayed).
  if (small_ && prune_small_ && beat_s_ < std::numeric_limits<double>::infinity()) {
    if (!port_bound_s_) port_bound_s_ = PortBoundSeconds(prob_);
    if (Loses(*port_bound_s_)) return false;
  }
  const std::shared_ptr<const Schedule> sched =
      cache_.Get(prob_, routing_, sizes_[size_index], direct_min_bytes, per_round, relays_in_place_);
  // Thresholds leaving every piece in the same class give one plan: planned once (most MoE, small-piece plans).
  auto& tried = tried_[size_index];
  if (std::any_of(tried.begin(), tried.end(), [&](const auto& v) {
        return v.first == per_round && SameSegments(v.second, sched->segments);
      }))
    return false;
  if (directs_.size() > 1) tried.emplace_back(per_round, sched->segments);
  // Large plans are timed by the estimate, at least the schedule's: one
  // that cannot beat the plan in hand is not emitted.
  if (!small_ && Loses(sched->estimate_s)) return true;
  // Per (destination per layer, source to host): the last policy that did not fit.
  struct Failed {
    double fraction;
    std::vector<int64_t> start_missing, shortfall;
  };
  std::map<std::pair<bool, bool>, Failed> failed;
  bool kept_any = false;  // small plans: whether a policy's plan was kept (fit_and_lost_)
  // A round per phase holds every staged segment at once: only where the
  // memory is there without a saver (the first policy).
  const size_t policies = sched->all_in_one_round ? std::min<size_t>(1, policies_.size()) : policies_.size();
  for (size_t pi = 0; pi < policies; ++pi) {
    const PlanPolicy& policy = policies_[pi];
    const auto key = std::make_pair(policy.destination_per_layer, policy.source_to_host);
    bool predicted_fit = false;
    if (auto it = failed.find(key); it != failed.end() && it->second.fraction <= policy.offload_fraction) {
      const std::vector<int64_t> missing = PredictMissingBytes(prob_, it->second.start_missing, it->second.shortfall,
                                                               it->second.fraction, policy.offload_fraction,
                                                               OptimizerSlots(policy));
      const auto worst = std::max_element(missing.begin(), missing.end());  // first of the largest
      if (*worst > 0) {
        NoteInfeasible(sched, policy, *worst, static_cast<int32_t>(worst - missing.begin()), {});
        continue;
      }
      predicted_fit = true;
    }
    // Its offloads alone make it slower than the plan in hand (and so
    // every later policy, which offloads as much or more).
    if (!small_ && Loses(OptimizerOffloadSeconds(prob_, OptimizerSlots(policy), policy.offload_fraction)))
      break;
    auto fail = [&](EmittedPlan& e) {
      missed_bytes_ = e.missing_bytes;
      NoteInfeasible(sched, policy, e.missing_bytes, e.worst_gpu, std::move(e.planned_peak));
      failed[key] = Failed{policy.offload_fraction, std::move(e.start_missing), std::move(e.shortfall)};
    };
    // A round per phase often does not fit: its memory answer first; so for a policy that releases
    // nothing, whose answer costs no emission (EmitMode::kAnswerOnly) unless relay buffers are freed.
    const bool releases = policy.offload_fraction > 0 || policy.source_to_host;
    // Large plans: an answer that needs an emission (relay hops: kMemoryOnly) costs about what the full one does
    // (no copies or labels is all it saves: llama3-70b colocated on 8192 GPUs 1.57 against 1.62 s) and the plan
    // kept on it is emitted again (Kept): the full emission answers once.
    const bool answer_first = small_ || MemoryAnswerMode(*sched, policy) == EmitMode::kAnswerOnly;
    if ((!failed.empty() || sched->all_in_one_round || !releases) && !predicted_fit && answer_first) {
      EmittedPlan m = EmitPlan(prob_, *sched, policy, MemoryAnswerMode(*sched, policy));
      if (!m.fits) {
        fail(m);
        continue;
      }
      // A large plan is timed by its estimate: kept on its answer alone, it is emitted only if asked for (Kept): a
      // plan in hand that a later one beats never is (llama3-70b colocated on 8192 GPUs: 1.1 M ops).
      if (!small_ && !releases) {
        const double time_s = std::max(sched->estimate_s, m.pcie_estimate_s);
        Keep(Candidate{sched, policy, std::move(m), time_s, {}, true}, per_round);
        break;
      }
    }
    EmittedPlan e = EmitPlan(prob_, *sched, policy);
    if (!e.fits) {
      fail(e);
      continue;
    }
    // An emitter bug must not reach the user as a plan that cannot run. A small plan's simulation walks the issue
    // order itself where it models the host (HostIssueTimes) and refuses such a plan the same way: the walk is not
    // made twice (~7 % of llama3-70b disaggregated's planning). It gives up once the candidate cannot be kept
    // (KeepLimit; not beat_s: a best slower than that still leads this search's later candidates); its host issue,
    // which walks the issue order, runs before the clock starts.
    std::optional<Prediction> simulated;
    bool gave_up = false;
    try {
      if (small_) {
        simulated = SimulateCandidateWithin(e.plan, KeepLimit(per_round));
        gave_up = !simulated;
      }
      if ((!simulated && !gave_up) || (simulated && simulated->issue_model == "none"))
        ForEachIssueStep(e.plan, [](const IssueStep&) {});  // the check alone: no list of steps kept
    } catch (const PlanRefused& refused) {
      if (unissuable_.empty()) unissuable_ = fmt::format("{} under {}", refused.problem(), policy.Name());
      continue;
    }
    if (small_ && sched->all_in_one_round && e.comm_lanes && !lost_all_) lost_all_ = {sched, policy};
    if (gave_up) {  // fits and loses: as after Keep below
      fit_and_lost_ = !kept_any;
      if (pi == 0) break;
      continue;
    }
    Candidate cand{sched, policy, std::move(e), 0, {}, false};
    if (small_) {
      cand.time_s = simulated->time_s;
      cand.prediction = std::move(simulated);
    } else {
      cand.time_s = std::max(sched->estimate_s, cand.emitted.pcie_estimate_s);
    }
    const double time_s = cand.time_s;
    if (Keep(std::move(cand), per_round)) kept_any = true;
    fit_and_lost_ = !kept_any && time_s > best_->time_s;  // a tie is no loss
    // The simplest policy, when it fits, is the fastest (nothing waits on a release). Under memory pressure small
    // plans simulate every policy that fits; large plans keep the first (cheapest savings first).
    if (pi == 0 || !small_) break;
  }
  return false;
}

void Search::Run(const std::vector<std::pair<size_t, int32_t>>& order) {
  RunCandidates(order);
  if (!small_ || !best_) return;
  if (best_->emitted.comm_lanes) OneLane();
  RoundLanes();
  RelayWaves();
  PhaseChunks();
  HalveChunked();
}

void Search::OneLane() {
  PlanPolicy one = best_->policy;
  one.comm_lanes = false;
  EmittedPlan o = EmitPlan(prob_, *best_->schedule, one);
  if (!o.fits) return;
  std::optional<Prediction> p = SimulateCandidateWithin(o.plan, VariantLimit());
  if (p && p->time_s < best_->time_s) best_ = Candidate{best_->schedule, one, std::move(o), p->time_s, std::move(p)};
}

void Search::RoundLanes() {
  if (!try_round_lanes_ || best_->policy.round_lanes || reshard::RoundLanes(*best_->schedule).empty()) return;
  PlanPolicy p = best_->policy;
  p.round_lanes = true;
  if (!KeepIfFasterOnLanes(best_->schedule, p, kPerRoundGain)) return;
  const size_t at = BestSize();
  const int64_t direct = best_->schedule->direct_min_bytes;
  int32_t kept = best_->schedule->per_round;
  for (int32_t pr = 2 * kept; grow_per_round_ && pr < kPerRoundAll; pr *= 2) {
    const std::shared_ptr<const Schedule> sched = cache_.Get(prob_, routing_, sizes_[at], direct, pr, relays_in_place_);
    if (sched->per_round < pr || reshard::RoundLanes(*sched).empty() || !KeepIfFasterOnLanes(sched, p, kPerRoundGain))
      break;
    kept = pr;
  }
  // The other direct thresholds at that size and round (the one kept won on one lane); one whose segments are those of
  // a schedule tried here gives the same plan (most MoE and small-piece plans) and is skipped.
  std::vector<std::shared_ptr<const Schedule>> tried = {best_->schedule};
  for (int64_t d : directs_) {
    if (d == direct) continue;
    const std::shared_ptr<const Schedule> sched = cache_.Get(prob_, routing_, sizes_[at], d, kept, relays_in_place_);
    if (std::any_of(tried.begin(), tried.end(), [&](const auto& t) { return SameSegments(t->segments, sched->segments); }))
      continue;
    tried.push_back(sched);
    if (sched->per_round == kept && !reshard::RoundLanes(*sched).empty()) KeepIfFasterOnLanes(sched, p);
  }
}

void Search::RelayWaves() {
  const Schedule& sc = *best_->schedule;
  if (!try_waves_ || !sc.all_in_one_round || sc.relay_rounds == 0) return;
  const PlanPolicy base = best_->policy;
  for (int32_t waves : kRelayWaves) {
    PlanPolicy p = base;
    p.comm_lanes = true, p.relay_waves = waves;
    p.relay_first_wave = FirstWaveShare(sc, prob_.scenario.cluster, waves);
    EmittedPlan w = EmitPlan(prob_, sc, p);
    if (!w.fits) continue;
    std::optional<Prediction> pred = SimulateCandidateWithin(w.plan, VariantLimit());
    if (!pred || pred->time_s >= best_->time_s) break;
    best_ = Candidate{best_->schedule, p, std::move(w), pred->time_s, std::move(pred)};
  }
}

void Search::PhaseChunks() {
  const bool kept = best_->schedule->all_in_one_round;
  if (chunk_ramps_.empty() || (kept ? !best_->emitted.comm_lanes || best_->policy.relay_waves > 1 || !best_->prediction ||
                                  !CopiesMayRepayChunks(*best_->prediction) : !lost_all_))
    return;
  const auto [sched, base] = kept ? std::make_pair(best_->schedule, best_->policy) : *lost_all_;
  for (double ramp : chunk_ramps_)
    for (int32_t chunks : kPhaseChunks)
      for (bool early : {false, true}) {
        PlanPolicy p = base;  // the same policy but for its chunks
        p.phase_chunks = chunks, p.early_relay_phase = early, p.chunk_ramp = ramp;
        if (early && !EarlyRelayPhase(*sched, p)) continue;
        KeepIfFasterOnLanes(sched, p);
      }
}

bool Search::KeepIfFasterOnLanes(const std::shared_ptr<const Schedule>& sched, const PlanPolicy& policy, double gain) {
  EmittedPlan w = EmitPlan(prob_, *sched, policy);
  std::optional<Prediction> pred;
  try {  // as in Consider: a plan that cannot be issued is passed over
    if (w.fits && w.comm_lanes) pred = SimulateCandidateWithin(w.plan, VariantLimit());
  } catch (const PlanRefused&) {}
  if (!pred || pred->time_s >= best_->time_s * (1 - gain)) return false;
  best_ = Candidate{sched, policy, std::move(w), pred->time_s, std::move(pred)};
  return true;
}

void Search::HalveChunked() {
  if (!best_->schedule->all_in_one_round || best_->policy.phase_chunks <= 1) return;
  const PlanPolicy policy = best_->policy;
  const int64_t direct = best_->schedule->direct_min_bytes;
  std::vector<size_t> smaller;  // powers of two below the kept size, largest first
  for (size_t i = 0; i < sizes_.size(); ++i)
    if (sizes_[i] < best_->schedule->segment_bytes && sizes_[i] >= kChunkedMinBytes && (sizes_[i] & (sizes_[i] - 1)) == 0)
      smaller.push_back(i);
  std::sort(smaller.begin(), smaller.end(), [&](size_t a, size_t b) { return sizes_[a] > sizes_[b]; });
  for (size_t i : smaller) {
    if (!KeepIfFasterOnLanes(cache_.Get(prob_, routing_, sizes_[i], direct, kPerRoundAll, relays_in_place_), policy))
      return;
  }
}

void Search::RunCandidates(const std::vector<std::pair<size_t, int32_t>>& order) {
  std::optional<bool> lost_family;  // the family (a round per phase?) whose candidate lost
  int32_t losses = 0;  // small plans: sizes in a row that fit and lost
  std::pair<int64_t, int64_t> all_missed{0, 0};  // large plans: a round per phase's last (size, bytes missing)
  bool all_cannot_fit = false;                   // and whether its smaller sizes cannot fit
  for (const auto& [oi, per_round] : order) {
    const bool all = per_round == kPerRoundAll;
    if (!small_ && (lost_family == all || (all && all_cannot_fit))) continue;
    if (Consider(oi, directs_.front(), per_round)) lost_family = all;
    if (best_ && !small_) break;  // large plans: the first candidate that fits
    if (!small_ && all && missed_bytes_ > 0) {
      all_cannot_fit = SmallerSizesCannotFit(all_missed, {sizes_[oi], missed_bytes_});
      all_missed = {sizes_[oi], missed_bytes_};
    }
    losses = fit_and_lost_ ? losses + 1 : best_ && best_->schedule->segment_bytes == sizes_[oi] ? 0 : losses;
    if (small_ && losses >= kSmallSizeLosses) break;
  }
  if (directs_.size() > 1) {
    if (best_) {
      const size_t at = BestSize();
      const int32_t per_round = best_->schedule->per_round;
      for (size_t k = 1; k < directs_.size(); ++k) Consider(at, directs_[k], per_round);
    } else {
      for (const auto& [oi, per_round] : order)
        for (size_t k = 1; k < directs_.size(); ++k) Consider(oi, directs_[k], per_round);
    }
  }
  // Small plans: more segments per round at the best size and threshold.
  if (!small_ || !best_) return;
  const size_t at = BestSize();
  const int64_t direct = best_->schedule->direct_min_bytes;
  for (size_t k = 1; k < per_rounds_.size(); ++k)
    if (per_rounds_[k] != kPerRoundAll) Consider(at, direct, per_rounds_[k]);
  // Where 2 won, twice as many while that is kept (MostPerRoundThatFits: more segments fill the rounds).
  while (grow_per_round_) {
    const std::shared_ptr<const Schedule> held = best_->schedule;
    if (held->all_in_one_round || held->per_round < 2 || held->rounds <= 2) break;
    Consider(at, direct, 2 * held->per_round);
    if (best_->schedule == held) break;
  }
  // Then half that size at twice the segments per round (rounds of the same bytes, more flows sharing each port),
  // doubled until kHalfSizeMisses in a row are not kept (qwen3-235b TP2xPP8xEP4 -> TP4xDP8 EP32 on 32 H200
  // colocated: 64 MiB x 2 318.1 ms, x 4 324.7; 32 MiB x 4 304.2, x 8 297.6).
  const auto half = std::find(sizes_.begin(), sizes_.end(), sizes_[at] / 2);
  int32_t half_misses = 0;
  for (int32_t pr = 2 * best_->schedule->per_round; grow_per_round_ && half != sizes_.end(); pr *= 2) {
    const std::shared_ptr<const Schedule> held = best_->schedule;
    if (held->all_in_one_round || held->per_round < 2 || held->rounds <= 2 || pr >= kPerRoundAll) break;
    Consider(static_cast<size_t>(half - sizes_.begin()), direct, pr);
    if (best_->schedule != held) half_misses = 0;
    else if (++half_misses >= kHalfSizeMisses) break;
  }
  // A round per phase has no rounds to fill evenly: its segment size sets only the ops (fewest at the largest size),
  // its threshold the staging (every staged segment held at once). Tried at the largest size under every threshold.
  if (std::find(per_rounds_.begin() + 1, per_rounds_.end(), kPerRoundAll) == per_rounds_.end()) return;
  const size_t largest = static_cast<size_t>(std::max_element(sizes_.begin(), sizes_.end()) - sizes_.begin());
  for (int64_t d : directs_) Consider(largest, d, kPerRoundAll);
}

Search::Candidate& Search::Kept() {
  Candidate& c = *best_;
  if (!c.answer_only) return c;
  const int32_t was = routes_.Slot();
  routes_.UseSlot(now_);
  RESHARD_CHECK(routes_.Key() == routing_, "a candidate is emitted under the routing it was planned on");
  EmittedPlan e = EmitPlan(prob_, *c.schedule, c.policy);
  routes_.UseSlot(was);
  RESHARD_CHECK(e.fits && e.planned_peak == c.emitted.planned_peak, "a plan fits as its memory answer said");
  try {
    ForEachIssueStep(e.plan, [](const IssueStep&) {});
  } catch (const PlanRefused& refused) {
    throw InternalError(fmt::format("planner: a plan that fits cannot be issued: {} under {}", refused.problem(),
                                    c.policy.Name()));
  }
  c.emitted = std::move(e), c.answer_only = false;
  return c;
}

void Search::Release() {
  if (!best_ || best_->answer_only) return;
  best_->emitted.plan = Plan{};
  best_->answer_only = true;
}

const std::vector<std::vector<int64_t>>& Search::OptimizerSlots(const PlanPolicy& policy) {
  const int32_t states = OptimizerStatesUnder(policy, prob_.scenario);
  auto [it, added] = optimizer_slots_.try_emplace(states);
  return added ? it->second = OptimizerSlotBytes(prob_, states) : it->second;
}

bool Search::Keep(Candidate&& cand, int32_t per_round) {
  if (best_ && cand.time_s >= KeepLimit(per_round)) return false;
  best_ = std::move(cand);
  return true;
}

void Search::NoteInfeasible(const std::shared_ptr<const Schedule>& sched, const PlanPolicy& policy, int64_t missing_bytes,
                            int32_t worst_gpu, std::vector<int64_t> planned_peak) {
  // A round per phase is tried under one policy only, so its answer is not the most frugal one: kept only while no
  // plan in rounds has answered (a search of rounds per phase alone, PlannerOptions::per_round = kPerRoundAll, had no
  // answer to give: "GPU -1 is 0 B short").
  if (closest_infeasible_ && sched->all_in_one_round != closest_infeasible_->schedule->all_in_one_round) {
    if (sched->all_in_one_round) return;
    closest_infeasible_.reset();
  }
  if (!closest_infeasible_ || missing_bytes < closest_infeasible_->missing_bytes)
    closest_infeasible_ = Infeasible{sched, policy, missing_bytes, worst_gpu, std::move(planned_peak)};
}

}  // namespace reshard::search_internal
