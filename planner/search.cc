// MakePlan (planner/planner.h): the simulate-and-choose search over candidate plans.
// The candidates, their order and what prunes them: planner/search.h (PlanProblem).
#include "planner/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "model/error.h"
#include "plan/issue_order.h"
#include "planner/candidate_search.h"
#include "planner/emitter.h"
#include "planner/known_plan.h"
#include "planner/problem.h"
#include "planner/round_estimate.h"
#include "planner/routings.h"
#include "planner/search_candidates.h"
#include "planner/search_predict.h"
#include "planner/segments.h"
#include "sim/simulator.h"

namespace reshard {

namespace {

using namespace search_candidates;  // NOLINT: the candidates are this file's vocabulary
using namespace search_predict;     // NOLINT: and their predictions
using search_internal::Search;

}  // namespace

PlanResult PlanProblem(const Scenario& s, const PlannerOptions& options, Problem& prob, Routings& routes,
                       ScheduleCache& cache, KnownPlan* known) {
  const bool small = options.simulate && prob.Fragments() <= options.simulate_max_fragments;
  const std::vector<int64_t> sizes = SegmentSizes(s, options, small || prob.Fragments() <= kFineSizesMinFragments);
  const std::vector<int32_t> per_rounds = PerRounds(options);
  // `beat_s` / `wins_ties`: see Search.
  auto order_of = [&](const Problem& p) { return SizeOrder(p, sizes, per_rounds, options, small); };
  auto run = [&](const Problem& p, const Order& order, double beat_s, bool wins_ties,
                 std::vector<PlanPolicy> policies = {}, bool relays_in_place = false, std::vector<int64_t> directs = {}) {
    if (policies.empty()) policies = Policies(s, options);
    if (directs.empty()) directs = DirectThresholds(s, options, small);
    auto search = std::make_unique<Search>(p, cache, routes, sizes, std::move(directs),
                                           per_rounds, std::move(policies), small, beat_s, wins_ties,
                                           options.relay_waves == 0, ChunkRampsSearched(options),
                                           GrowsPerRound(options), relays_in_place, !options.round_lanes.has_value());
    search->Run(order);
    return search;
  };
  // The round estimate of the candidate a large plan's search tries first.
  auto first_estimate = [&](const Problem& p, const Order& order) {
    return QuickEstimate(p, sizes[order.front().first], order.front().second);
  };
  constexpr double kNone = std::numeric_limits<double>::infinity();
  auto time_of = [&](const std::unique_ptr<Search>& x) { return x && x->best() ? x->best()->time_s : kNone; };
  // The (size, segments per round) the best plan of `x` was planned at.
  auto won_order = [&](Search& x) {
    const Schedule& won = *x.best()->schedule;
    return Order{{x.BestSize(), won.all_in_one_round ? kPerRoundAll : won.per_round}};
  };
  // A candidate's prediction: a sweep's known plan (known_plan.h), else simulated.
  // Where only a plan faster than `limit_s` matters: nullopt once the simulation passes it.
  auto predict_within = [&](const Plan& plan, double limit_s) {
    std::optional<Prediction> p = KnownPrediction(known, plan);
    return p ? std::move(p) : SimulateCandidateWithin(plan, limit_s);
  };
  auto predict = [&](const Plan& plan) { return *predict_within(plan, kNone); };
  // Without relays and (where some box goes to several GPUs of a domain over the network) with them: relays are kept
  // only if predicted faster. Large plans search first the side whose first candidate estimates faster, so the other
  // side's candidates that cannot beat it are not emitted.
  std::unique_ptr<Search> plain, relayed;
  SizeOrders plain_orders, relay_orders;  // the candidates of each routing
  const Order& plain_order = plain_orders.order;
  const Order& relay_order = relay_orders.order;
  int64_t relayed_bytes = 0;
  double plain_first_s = kNone, relay_first_s = kNone;  // each routing's first round estimate (large plans) or port bound (small)
  if (options.relays == std::optional<bool>{false}) {
    routes.Use(Routings::kPlain);
    plain_orders = order_of(prob);
    plain = run(prob, plain_order, kNone, true);
  } else if (options.relays == std::optional<bool>{true}) {
    relayed_bytes = routes.RelayedBytes();
    routes.Use(Routings::kRelayed);
    plain_orders = order_of(prob);  // one routing when nothing is relayed
    if (relayed_bytes > 0) std::swap(plain_orders, relay_orders);
    (relayed_bytes > 0 ? relayed : plain) = run(prob, relayed_bytes > 0 ? relay_order : plain_order, kNone,
                                                relayed_bytes == 0);
  } else {
    routes.Use(Routings::kPlain);
    plain_orders = order_of(prob);
    // Small plans: the routing of the lower port bound goes first, so the other's candidates can be skipped where its loses.
    plain_first_s = small ? PortBoundSeconds(prob) : first_estimate(prob, plain_order);
    const std::pair<int64_t, double> plain_load{small ? 0 : NetworkBytes(prob), small ? 0 : PortBoundSeconds(prob)};
    relayed_bytes = routes.RelayedBytes();
    routes.Use(Routings::kRelayed);
    // Large plans: relays that change next to nothing are not searched, nor sender relays on top of them (below).
    const bool negligible = !small && relayed_bytes > 0 && NegligibleRelays(prob, plain_load);
    if (relayed_bytes == 0 || negligible) {
      routes.Use(Routings::kPlain);
      plain = run(prob, plain_order, kNone, true);
    } else {
      relay_orders = order_of(prob);
      relay_first_s = small ? PortBoundSeconds(prob) : first_estimate(prob, relay_order);
      if (relay_first_s < plain_first_s) {
        relayed = run(prob, relay_order, kNone, false);
        routes.Use(Routings::kPlain);
        plain = run(prob, plain_order, time_of(relayed), true);
      } else {
        routes.Use(Routings::kPlain);
        plain = run(prob, plain_order, kNone, true);
        routes.Use(Routings::kRelayed);
        relayed = run(prob, relay_order, time_of(plain), false);
      }
    }
  }
  // Where nothing fits the relayed search answers.
  bool use_relays = relayed && (relayed->best() ? time_of(relayed) < time_of(plain) : !(plain && plain->best()));
  std::optional<Prediction> predicted;  // of search's best, where already simulated
  // Large plans: where the two routings' best estimates are within kRelayBand and one of them is rounds (whose estimate
  // errs most), both are simulated and the faster kept (llama3-405b: plain 1106.6 against relayed 1128.0 ms estimated;
  // plain simulates 1554.0, the relayed plan kept 1218.3).
  if (!small && options.simulate && plain && relayed && plain->best() && relayed->best() &&
      !(plain->best()->schedule->all_in_one_round && relayed->best()->schedule->all_in_one_round) &&
      std::max(time_of(plain), time_of(relayed)) < std::min(time_of(plain), time_of(relayed)) * (1 + kRelayBand)) {
    Prediction p = predict(plain->Kept().emitted.plan);
    std::optional<Prediction> r = predict_within(relayed->Kept().emitted.plan, p.time_s);
    use_relays = r && r->time_s < p.time_s;
    predicted = std::move(use_relays ? *r : p);
  }
  // Relays that lost by < kRelayBand (tried again with sender relays below): on their first candidates' estimates
  // (large plans), or simulated (small plans, whose sender relays then search from the size and segments per round
  // that won: grid qwen3-235b TP4xPP2xEP16 -> TP8xDP4 EP32 on 32 H200 colocated, relayed 300.75 against plain 300.23
  // ms; with sender relays on the plain routing 64 MiB x 2 185.62, on the relayed one 64 MiB x 8 183.24).
  const bool relays_near = small ? relayed && relayed->best() && plain && plain->best() &&
                                       time_of(relayed) < time_of(plain) * (1 + kRelayBand)
                                 : relay_first_s < plain_first_s * (1 + kRelayBand);
  std::unique_ptr<Search> search = std::move(use_relays ? relayed : plain);
  if (!use_relays) relayed_bytes = 0;
  routes.Use(use_relays && relayed_bytes > 0 ? Routings::kRelayed : Routings::kPlain);
  // Sender-side relays (Problem::AddSendRelays) on top of the routing chosen: kept only if predicted faster (or forced:
  // options.send_relays). Large plans try them at the (size, segments per round) that won only (each cut and emission
  // of a large plan costs about as much as planning: llama3-405b 1.6 -> 6.4 CPU-s over all candidates), and where the
  // estimate prefers them both plans are simulated, so the simulator decides as for small plans.
  SizeOrders send_orders;
  int64_t send_relayed_bytes = 0, recv_relayed_bytes = 0;  // of the routing kept (Routings::kSendRelayed)
  if (options.send_relays != std::optional<bool>{false} && (search->best() || options.send_relays)) {
    const int32_t base = routes.Now();
    // The plan in hand's port bound (its routing's, in use now): a floor of its simulation, so where the sender-relayed
    // plan simulates below it the plan in hand is not simulated (llama3-70b colocated on 8192 GPUs: one simulation of
    // 1.1 M ops less).
    const double base_floor_s = !small && options.simulate && !predicted && search->best() &&
                                        PortBoundIsAFloor(s.cluster)
                                    ? PortBoundSeconds(prob)
                                    : 0;
    if (routes.SendRelayedBytes(base) > 0) {
      routes.Use(Routings::kSendRelayed);
      send_orders = order_of(prob);
      const bool forced = options.send_relays == std::optional<bool>{true};
      Order order = send_orders.order;
      if (!small && search->best()) order = won_order(*search);
      std::unique_ptr<Search> sent = run(prob, order, forced ? kNone : time_of(search), forced);
      bool keep = sent->best() && (forced || time_of(sent) < time_of(search));
      if (keep && !forced && !small && options.simulate) {
        Prediction after = SimulateCandidate(sent->Kept().emitted.plan);
        if (!predicted && after.time_s < base_floor_s) {
          predicted = std::move(after);
        } else {
          std::optional<Prediction> before =
              predicted ? std::move(predicted) : predict_within(search->Kept().emitted.plan, after.time_s);
          keep = !before || after.time_s < before->time_s;
          predicted = keep ? std::move(after) : std::move(*before);
        }
      }
      if (keep) {
        // Forced, the plan kept was not simulated: a prediction in hand is the replaced plan's.
        if (forced) predicted.reset();
        search = std::move(sent);
        send_relayed_bytes = prob.send_relayed_bytes, recv_relayed_bytes = prob.recv_relayed_bytes;
      } else {
        routes.Use(base);
      }
    }
  }
  // Relays that lost, with sender-side relays on top, kept if simulated faster: at the size and round that won where
  // a large plan's relays lost on estimates by < kRelayBand (qwen3-30b-a3b colocated: relayed 24.4 against plain 23.6
  // ms estimated; with sender relays 17.7 and 26.4 simulated), searched anew where that found nothing faster and its
  // port bound is kRelayBand below the plan in hand's (deepseek-v3 TP1xPP16xEP8 -> TP8xDP16 on 128 GB200 colocated:
  // relayed 132 ms, plain with sender relays 112, both 77; port bounds 85 and 59 ms; TP8xPP4xEP32 -> TP16xDP8: at
  // the won 1 GiB round per phase nothing fits, anew 81 against 107 ms). Not emitted where the estimate loses to the
  // plan in hand's prediction (llama3-70b colocated on 8192 GPUs). relays_near: above.
  if (options.simulate && !use_relays && search->best() && options.send_relays != std::optional<bool>{false} &&
      relay_first_s < kNone) {
    const int32_t before = routes.Slot();
    const double held_bound_s = PortBoundSeconds(prob);  // the plan in hand's routing
    const bool made = routes.SendRelayedBytes(Routings::kRelayed) > 0;
    const bool bound_wins = made && PortBoundSeconds(prob) < held_bound_s * (1 - kRelayBand);
    if (made && (relays_near || bound_wins)) {
      SizeOrders orders = order_of(prob);
      auto try_both = [&](const Order& order) {
        if (!predicted) predicted = search->best()->prediction ? *search->best()->prediction : predict(search->Kept().emitted.plan);
        std::unique_ptr<Search> both = run(prob, order, predicted->time_s, false);
        if (!both->best()) return false;
        // A small plan's candidates were simulated as they were emitted.
        Prediction p = both->best()->prediction ? *both->best()->prediction : SimulateCandidate(both->Kept().emitted.plan);
        if (p.time_s >= predicted->time_s) return false;
        search = std::move(both), predicted = std::move(p), send_orders = orders, use_relays = true;
        relayed_bytes = prob.relayed_bytes, send_relayed_bytes = prob.send_relayed_bytes;
        recv_relayed_bytes = prob.recv_relayed_bytes;
        return true;
      };
      if (!(relays_near && try_both(won_order(*search))) && bound_wins) try_both(orders.order);
    }
    if (!use_relays) routes.UseSlot(before);
  }
  // Relays that lost where, relayed, rounds of a few segments won: those rounds filled (MostPerRoundThatFits), kept
  // where simulated faster, where their port bound is kRelayBand below the plan in hand's (grid deepseek-v3 below).
  if (!small && options.simulate && !use_relays && relayed && relayed->best() && search->best() &&
      GrowsPerRound(options) && !relayed->best()->schedule->all_in_one_round && relayed->best()->schedule->rounds > 2) {
    const int32_t before = routes.Slot();
    const double held_bound_s = PortBoundSeconds(prob);  // the plan in hand's routing
    if (routes.Use(Routings::kRelayed); PortBoundSeconds(prob) < held_bound_s * (1 - kRelayBand)) {
      const Search::Candidate& r = *relayed->best();
      if (const int32_t most = MostPerRoundThatFits(prob, cache, routes.Key(), *r.schedule, r.policy); most > 0) {
        if (!predicted) predicted = predict(search->Kept().emitted.plan);
        std::unique_ptr<Search> grown = run(prob, Order{{relayed->BestSize(), most}}, predicted->time_s, false, {r.policy});
        std::optional<Prediction> p = grown->best() ? predict_within(grown->Kept().emitted.plan, predicted->time_s) : std::nullopt;
        if (p && p->time_s < predicted->time_s) {
          search = std::move(grown), predicted = std::move(*p), use_relays = true;
          relayed_bytes = prob.relayed_bytes, send_relayed_bytes = 0, recv_relayed_bytes = 0;
        }
      }
    }
    if (!use_relays) routes.UseSlot(before);
  }
  // The sender-relayed routing a levelled plan replaced (the last large-plan try): given back after the plan is
  // emitted.
  std::optional<Problem::Routing> levelled_held;
  // Large plans rank candidates by the round estimate, close for a round per phase but optimistic for rounds (ports
  // idle while a round's flows ramp up, wait for peers or end early). So the plan in hand is simulated, and the
  // candidates below where it may have erred too; the fastest is kept.
  if (!small && options.simulate && search->best()) {
    // A sweep's memory policy that changes nothing: the last plan's prediction (known_plan.h).
    if (!predicted) predicted = predict(search->Kept().emitted.plan);
    // The plan in hand's emission is freed before the other's is made (Kept() emits it again if it stays): two
    // emitted plans at once were the heap's peak (deepseek-v3 on 512 GPUs: 0.72 of 1.27 GB; page faults 319 K -> 218 K,
    // user + system CPU 9.1 -> 7.7 s on the development VM).
    auto keep_if_faster = [&](std::unique_ptr<Search> other) {  // where predicted faster; false: it found none
      if (!other->best()) return false;
      search->Release();
      std::optional<Prediction> p = predict_within(other->Kept().emitted.plan, predicted->time_s);
      if (p && p->time_s < predicted->time_s) search = std::move(other), predicted = std::move(*p);
      return true;
    };
    const SizeOrders& o = send_relayed_bytes + recv_relayed_bytes > 0 ? send_orders : use_relays ? relay_orders : plain_orders;
    // Where rounds won and a round per phase's wire estimate (SizeOrders::all_wire_s) is below the plan in hand: at its
    // best size, then (no fit) at kAllFallbackBytes and its halves (deepseek-v3 171.1 -> 165.5 ms; llama3-405b TP8xPP16
    // -> TP8xPP2xDP8 on 128 GB200 66.8 -> 63.1), also where it went first in another routing.
    bool all_none = false;  // none fit (or beat the plan in hand): tried in place last, below
    // Phase chunks (comm_lanes.h) of a round per phase on two lanes without relay waves, each kept where simulated
    // faster: with the relay phase after chunk 0 where that applies, then without it where that did not win
    // (search_candidates.h kPhaseChunksLarge), then at each of `ramps` (ChunkShares) where none won.
    auto chunked = [&](const std::shared_ptr<const Schedule>& sched, const PlanPolicy& base, const Order& order,
                       std::initializer_list<double> ramps) {
      PlanPolicy p = base, early = base;
      p.phase_chunks = kPhaseChunksLarge, early.phase_chunks = kPhaseChunksLargeEarly, early.early_relay_phase = true;
      const double held_s = predicted->time_s;
      if (EarlyRelayPhase(*sched, early)) keep_if_faster(run(prob, order, kNone, false, {early}, sched->relays_in_place));
      // Where that lost, the feeds over all chunks but the last two, the relay phase after them
      // (PlanPolicy::feed_chunks; where it won, this lost: bench/results/2026-12-06-cpu-feeds-spread).
      PlanPolicy spread = early;
      spread.feed_chunks = kPhaseChunksLargeEarly - 2;
      if (predicted->time_s >= held_s && EarlyRelayPhase(*sched, spread))
        keep_if_faster(run(prob, order, kNone, false, {spread}, sched->relays_in_place));
      for (double ramp : ramps) {
        if (predicted->time_s < held_s) break;
        p.chunk_ramp = ramp;
        keep_if_faster(run(prob, order, kNone, false, {p}, sched->relays_in_place));
      }
    };
    if (!search->best()->schedule->all_in_one_round && !o.all.empty() && o.all_wire_s < predicted->time_s) {
      std::unique_ptr<Search> all = run(prob, o.all, predicted->time_s, false);
      all_none = !all->best();
      // Its round estimate lost: chunked it may not.
      if (all_none && options.phase_chunks == 0) all = run(prob, o.all, kNone, false);
      // Where it fit and lost, in chunks too, even and ramped (grid qwen3-235b TP4xPP4xEP8 -> TP8xDP4 on 32 GB200:
      // rounds 26.6 ms, a round per phase at 1 GiB 27.2, in 8 chunks ramped 24.8).
      const std::shared_ptr<const Schedule> sched = all->best() ? all->best()->schedule : nullptr;
      const PlanPolicy base = sched ? all->best()->policy : PlanPolicy{};
      const bool lanes = sched && all->Kept().emitted.comm_lanes && base.relay_waves <= 1;
      const Order all_order = sched ? won_order(*all) : Order{};
      keep_if_faster(std::move(all));
      if (lanes && options.phase_chunks == 0 && search->best()->schedule != sched)
        chunked(sched, base, all_order, {1, kChunkRamp});
    }
    // Where the relay phase is a large share of the refit and its relays are packed: relays and their feeds in place
    // (Schedule::relays_in_place), kept where simulated faster; a round per phase that won at its size and policy,
    // rounds that won as a round per phase, which stages less in place and may fit where packed it did not (llama3-405b
    // on 128 GB200: TP4xPP16 -> TP16xDP8 relay phase ~26 of 118 ms, 103.7 in place; TP8xPP8 -> TP8xDP16 rounds of 128
    // 144.0, a round per phase in place 133.3). Where the relay phase is <= 13 % of the refit in place loses up to 10 %
    // (bench/results/2026-12-05-cpu-relays-in-place).
    if (const Schedule& k = *search->best()->schedule; k.relay_rounds > 0 && !k.relays_in_place &&
        options.direct_min_bytes < 0 && s.plan.direct_min_bytes < 0 &&
        RelayPhaseSeconds(k, s.cluster) >= kRelaysInPlaceMinShare * predicted->time_s &&
        InPlaceRelayShare(k) < kRelayWavesMinInPlace) {
      if (k.all_in_one_round)
        keep_if_faster(run(prob, won_order(*search), predicted->time_s, false, {search->best()->policy}, true));
      else if (!o.all.empty())
        keep_if_faster(run(prob, o.all, predicted->time_s, false, {}, true));
    }
    // The estimate is the more optimistic the more rounds, so it favours small sizes:
    // rounds at the largest size too (kimi-k2 fp8: 53.8 MiB 234.7 ms, 1 GiB 213.7 ms).
    const std::shared_ptr<const Schedule> won = search->best()->schedule;
    const size_t largest = static_cast<size_t>(std::max_element(sizes.begin(), sizes.end()) - sizes.begin());
    if (!won->all_in_one_round && sizes[largest] != won->segment_bytes)
      keep_if_faster(run(prob, Order{{largest, won->per_round}}, predicted->time_s, false));
    // A round per phase is ranked by an estimate in which its segment size sets only the ops, so it is planned at
    // the largest size; smaller segments let each sender's transfers start sooner (qwen3-30b-a3b colocated: 1 GiB
    // 12.77 ms, 128 MiB 12.58). Where the plan is cheap to simulate, smaller powers of two are simulated too,
    // halving while no slower than the best (down to 16 MiB), emitted whatever their estimate.
    constexpr size_t kCheapOps = 50000;
    if (won->all_in_one_round && search->Kept().emitted.plan.ops.size() <= kCheapOps) {
      // A chunked one (kept above, where a round per phase lost to rounds) is halved in its chunks.
      std::vector<PlanPolicy> chunked_policy;
      if (search->best()->policy.phase_chunks > 1) chunked_policy = {search->best()->policy};
      for (size_t i = sizes.size(); i-- > 0;) {
        if (sizes[i] >= won->segment_bytes || sizes[i] < kChunkedMinBytes || (sizes[i] & (sizes[i] - 1)) != 0)
          continue;
        std::unique_ptr<Search> other = run(prob, Order{{i, kPerRoundAll}}, kNone, false, chunked_policy);
        if (!other->best()) break;
        std::optional<Prediction> p = predict_within(other->Kept().emitted.plan, predicted->time_s);
        if (!p || p->time_s > predicted->time_s) break;
        if (p->time_s < predicted->time_s) search = std::move(other), predicted = std::move(*p);
      }
    }
    // Relay waves (comm_lanes.h), kept where simulated faster; each try emits and simulates the whole plan, so only
    // where the relay phase is at least kRelayWavesMinShare of the refit (deepseek-v3 NVL72: ~5 of 121 ms) and mostly
    // sent in place (kRelayWavesMinInPlace). Plans of at most kRelayWavesMaxOps cut them by bytes, more waves only
    // where fewer won; larger ones by segment (no ops added), kRelayWavesBySegment of them, one try.
    const Schedule& kept_sc = *search->best()->schedule;
    const bool in_place = kept_sc.relays_in_place;
    if (options.relay_waves == 0 && kept_sc.all_in_one_round && kept_sc.relay_rounds > 0 &&
        RelayPhaseSeconds(kept_sc, s.cluster) >= kRelayWavesMinShare * predicted->time_s &&
        InPlaceRelayShare(kept_sc) >= kRelayWavesMinInPlace) {
      const PlanPolicy base = search->best()->policy;
      const bool by_segment =
          options.relay_waves_by_segment.value_or(search->Kept().emitted.plan.ops.size() > kRelayWavesMaxOps);
      const std::vector<int32_t> tries = by_segment ? std::vector<int32_t>{kRelayWavesBySegment}
                                                    : std::vector<int32_t>(std::begin(kRelayWaves), std::end(kRelayWaves));
      const double unwaved_s = predicted->time_s;
      const int64_t kept_bytes = kept_sc.segment_bytes;  // kept_sc goes with the search a try replaces
      PlanPolicy p = base;
      for (int32_t waves : tries) {
        p = base;
        p.comm_lanes = true, p.relay_waves = waves, p.relay_waves_by_segment = by_segment;
        if (!by_segment || waves == 2) p.relay_first_wave = FirstWaveShare(kept_sc, s.cluster, waves);
        const double held_s = predicted->time_s;
        keep_if_faster(run(prob, won_order(*search), kNone, false, {p}, in_place));
        if (predicted->time_s >= held_s) break;
      }
      // Waves of whole segments are coarse where the segments are large: where they lost, once more at
      // kRelayWavesBySegmentBytes (llama3-405b TP8xPP8 -> TP8xDP16 on 128 GB200, a relay phase of ~61 of 133 ms: at 1
      // GiB 132.6 ms with or without waves, at 128 MiB with them 128.2).
      const auto fine = std::find(sizes.begin(), sizes.end(), kRelayWavesBySegmentBytes);
      if (by_segment && predicted->time_s >= unwaved_s && kept_bytes > kRelayWavesBySegmentBytes && fine != sizes.end())
        keep_if_faster(run(prob, Order{{static_cast<size_t>(fine - sizes.begin()), kPerRoundAll}}, kNone, false, {p},
                           in_place));
    }
    // Phase chunks where a round per phase on two lanes without relay waves (nor chunks) was kept and copies hold up
    // its critical path: even only (ramped chunks lost on the rows whose network transfers dwarf their copies).
    if (const Search::Candidate& b = search->Kept(); options.phase_chunks == 0 && b.schedule->all_in_one_round &&
                                                     b.emitted.comm_lanes && b.policy.relay_waves <= 1 &&
                                                     b.policy.phase_chunks <= 1 && CopiesMayRepayChunks(*predicted)) {
      const std::shared_ptr<const Schedule> sched = b.schedule;  // b goes with the search a try replaces
      chunked(sched, b.policy, won_order(*search), {1});
    }
    // The first policy that fits is kept; where it releases memory, allocating destination layers late can be faster
    // (llama3-405b at full offload: 19 %).
    const PlanPolicy kept = search->best()->policy;
    if (!kept.destination_per_layer && !options.destination_per_layer &&
        (kept.offload_fraction > 0 || kept.source_to_host)) {
      PlanPolicy twin = kept;
      twin.destination_per_layer = true;
      keep_if_faster(run(prob, won_order(*search), predicted->time_s, false, {twin},
                         search->best()->schedule->relays_in_place));
    }
    // Rounds that won, under the policy kept: as many segments per round as fit (llama3-405b TP8xPP8 -> TP8xDP16 on
    // 128 GB200 colocated: 214.1 ms in rounds of 2 at 54 MiB, 144.0 in rounds of 128; a round per phase does not fit),
    // where they idle: simulated kRoundsIdleBand over their estimate (which has no idle port).
    if (const Search::Candidate& b = *search->best();
        !b.schedule->all_in_one_round && GrowsPerRound(options) &&
        predicted->time_s >= b.schedule->estimate_s * (1 + kRoundsIdleBand)) {
      if (const int32_t most = MostPerRoundThatFits(prob, cache, routes.Key(), *b.schedule, b.policy); most > 0)
        keep_if_faster(run(prob, Order{{search->BestSize(), most}}, predicted->time_s, false, {b.policy}));
    }
    // Rounds of two that won: three a round, at the size the round estimate picks for three, kept where simulated
    // faster (fuller rounds of smaller segments: fewer seams where a port waits for a round's slowest pair; llama3-405b
    // TP4xPP16 -> TP16xDP8 on 128 H100 colocated: 2 x 38 MiB 1125.9 ms, 3 x 16 MiB 1107.1; 4 x 11 MiB no faster).
    if (const Search::Candidate& b = *search->best();
        !b.schedule->all_in_one_round && b.schedule->per_round == 2 && GrowsPerRound(options)) {
      const PlanPolicy policy = b.policy;  // b goes with the search a try replaces
      const SizeOrders three = SizeOrder(prob, sizes, {kRoundsOfThree}, options, false);
      if (!three.rounds.empty()) keep_if_faster(run(prob, Order{three.rounds.front()}, predicted->time_s, false, {policy}));
    }
    // Rounds kept at the default threshold: the same size, round and policy with every piece staged, kept where
    // simulated faster, else with every contiguous piece in place, kept where so (a piece in place is an op of its own
    // size among the round's segments, so a round waits for it or it for the round: llama3-405b TP4xPP16 -> TP16xDP8
    // on 128 H100 at 16 MiB x 3 1107.1 ms, staged 1102.9; grid deepseek-v3 TP2xPP8xEP16 -> TP8xDP16 EP128 on 128 H200
    // 320.2, staged 324.0, in place 318.3). Their estimates err as the rounds' do: not pruned by them.
    if (const Search::Candidate& b = *search->best(); !b.schedule->all_in_one_round &&
        b.schedule->direct_min_bytes == kDefaultDirectMinBytes && options.direct_min_bytes < 0 &&
        s.plan.direct_min_bytes < 0) {
      const Order order = won_order(*search);  // b goes with the search a try replaces
      const PlanPolicy policy = b.policy;
      const double held_s = predicted->time_s;
      keep_if_faster(run(prob, order, kNone, false, {policy}, false, {std::numeric_limits<int64_t>::max()}));
      if (predicted->time_s >= held_s) keep_if_faster(run(prob, order, kNone, false, {policy}, false, {0}));
      // Where one won: the next larger size of the grid at its threshold, round and policy, kept where simulated
      // faster (staging every piece or sending each in place adds no op of a piece's own to a round, so somewhat
      // larger segments fill the rounds: llama3-405b TP4xPP16 -> TP16xDP8 on 128 H100 staged 16 MiB x 3 1102.9 ms,
      // 19 MiB 1098.1; grid deepseek-v3 TP2xPP8xEP16 -> TP8xDP16 EP128 on 128 H200 in place 11.3 MiB x 512 318.3,
      // 13.4 MiB 316.2). One step: the next one up lost on every at-scale row (llama3-405b at 22.6 MiB), a
      // simulation of ~1.5 M ops there.
      if (predicted->time_s < held_s) {
        size_t up = sizes.size();
        for (size_t j = 0; j < sizes.size(); ++j)
          if (sizes[j] > sizes[order.front().first] && (up == sizes.size() || sizes[j] < sizes[up])) up = j;
        if (up < sizes.size())
          keep_if_faster(run(prob, Order{{up, order.front().second}}, kNone, false, {policy}, false,
                             {search->best()->schedule->direct_min_bytes}));
      }
    }
    // Rounds kept where no round per phase fit: one with every contiguous piece in place (stages less), after the rounds
    // are filled (grid deepseek-v3 on H200: TP1xPP16xEP8 rounds 364.5 ms, in place 319.6; TP2xPP8xEP16 320.2, 325.6).
    if (all_none && !search->best()->schedule->all_in_one_round && options.direct_min_bytes < 0 && s.plan.direct_min_bytes < 0)
      keep_if_faster(run(prob, o.all, predicted->time_s, false, {}, false, {0}));
    // Kept on sender relays: the same order, policy and relay placement on the routing with every NIC levelled
    // (Routings::Level), kept where simulated faster, where its port bound is kLevelledBoundGain lower (grid
    // deepseek-v3 TP1xPP16xEP8 -> TP8xDP16 EP128 on 128 GB200: bound 61.1 -> 58.1 ms, plan 68.4 -> 67.7; TP2xPP8xEP16
    // 63.6 -> 58.0, 69.1 -> 69.0; TP8xPP4xEP32 64.8 -> 58.3, 69.7 on both). Last: the search before tried its
    // candidates on the routing the estimates chose, and a levelled one made first moved other rows either way
    // (bench/results/2026-12-07-cpu-domain-balance).
    if (routes.Now() == Routings::kSendRelayed && send_relayed_bytes > 0) {
      const double held_bound_s = PortBoundSeconds(prob);
      Problem::Routing held = routes.Level();
      bool levelled_kept = false;
      if (PortBoundSeconds(prob) < held_bound_s * (1 - kLevelledBoundGain)) {
        const Search::Candidate& b = *search->best();  // b goes with the search a try replaces
        const Order order = won_order(*search);
        const PlanPolicy policy = b.policy;
        const bool b_in_place = b.schedule->relays_in_place;
        const int64_t direct = b.schedule->direct_min_bytes;
        const double held_s = predicted->time_s;
        keep_if_faster(run(prob, order, kNone, false, {policy}, b_in_place, {direct}));
        levelled_kept = predicted->time_s < held_s;
      }
      if (levelled_kept) {
        send_relayed_bytes = prob.send_relayed_bytes, recv_relayed_bytes = prob.recv_relayed_bytes;
        levelled_held = std::move(held);  // given back once the plan is emitted (below)
      } else {
        routes.Unlevel(std::move(held));
      }
    }
  }
  PlanResult res;
  res.stats.fragments = prob.Fragments();
  res.stats.relayed_bytes = relayed_bytes;
  res.stats.send_relayed_bytes = send_relayed_bytes;
  res.stats.recv_relayed_bytes = recv_relayed_bytes;
  auto& best = search->best();
  if (!best && !search->unissuable().empty())
    throw InternalError(fmt::format("planner: every plan of scenario '{}' ({}) that fits in memory cannot be "
                                    "issued: {}",
                                    s.name, s.path, search->unissuable()));
  if (!best) {
    Search::Infeasible closest;
    if (search->closest_infeasible()) closest = *search->closest_infeasible();
    if (closest.schedule && closest.planned_peak.empty()) {  // predicted, not emitted: emit it for its peaks
      const EmittedPlan e = EmitPlan(prob, *closest.schedule, closest.policy, EmitMode::kMemoryOnly);
      RESHARD_CHECK(e.missing_bytes == closest.missing_bytes && e.worst_gpu == closest.worst_gpu,
                    "the predicted answer of a larger optimizer offload is the emitted one");
      closest.planned_peak = e.planned_peak;
    }
    res.status = PlanStatus::kInfeasible;
    res.gpu = closest.worst_gpu;
    res.missing_bytes = closest.missing_bytes;
    // A round per phase is tried under one policy only (Search::NoteInfeasible).
    const bool one_policy = closest.schedule && closest.schedule->all_in_one_round;
    res.message = fmt::format("GPU {} is {} short of memory {}", res.gpu, FormatBytes(res.missing_bytes),
                              one_policy ? "as a round per phase" : "even with the most frugal policy");
    res.stats.planned_peak_bytes = closest.planned_peak;
    return res;
  }
  search->Kept();
  // A plan session plans again on `routes` (plan_session.h): the routing slot goes back to its unlevelled one.
  if (levelled_held) routes.Unlevel(std::move(*levelled_held));
  const Schedule& sc = *best->schedule;
  Plan& plan = best->emitted.plan;
  PlanSummary& sum = plan.summary;
  sum.segment_bytes = sc.segment_bytes;
  sum.direct_min_bytes = sc.direct_min_bytes;
  sum.offload_fraction = best->policy.offload_fraction;
  sum.memory_policy = best->policy.Name();
  sum.bytes_moved = CountBytesMoved(plan);
  res.stats.planned_peak_bytes = best->emitted.planned_peak;
  const bool taken = known && options.simulate && TakeKnown(*known, plan, res.stats);  // known_plan.h
  // A small plan's candidates were simulated as they were emitted: its own.
  if (!predicted && best->prediction) predicted = std::move(best->prediction);
  if (!taken) {
    sum.lower_bound_s = LowerBoundSeconds(plan);
    sum.routing_bound_s = RoutingBoundSeconds(plan);
  }
  if (!taken && (predicted || options.simulate)) {
    if (predicted) ApplyPrediction(plan, res.stats, *predicted);
    else PredictWithSimulator(plan, res.stats);
    if (known) Keep(*known, plan, res.stats);
  } else if (!options.simulate) {
    sum.predicted_time_s = std::max(sc.estimate_s, best->emitted.pcie_estimate_s);
    sum.predicted_peak_bytes = best->emitted.planned_peak;
    res.stats.predicted_by = "port model";
  }
  res.stats.segments = static_cast<int64_t>(sc.segments.size());
  res.stats.direct = std::count_if(sc.segments.begin(), sc.segments.end(), [](const Segment& g) { return g.Direct(); });
  res.stats.rounds = sc.rounds;
  res.stats.per_round = sc.per_round;
  res.stats.round_per_phase = sc.all_in_one_round;
  res.stats.round_lanes = best->policy.round_lanes && best->emitted.comm_lanes && !sc.all_in_one_round;
  res.stats.groups = best->emitted.groups;
  res.stats.local_copy_ops = best->emitted.local_ops;
  res.stats.ops = static_cast<int64_t>(plan.ops.size());
  res.plan = std::move(plan);
  return res;
}

}  // namespace reshard
