// The search's candidates and their order (planner/search_candidates.h).
#include "planner/search_candidates.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include <fmt/format.h>

#include "model/error.h"
#include "planner/round_estimate.h"
#include "planner/segments.h"

namespace reshard::search_candidates {

std::shared_ptr<const Schedule> ScheduleCache::Get(const Problem& prob, int32_t routing, int64_t segment_bytes,
                                                   int64_t direct_min_bytes, int32_t per_round,
                                                   bool relays_in_place) {
  if (segment_bytes != size_) {
    entries_.clear();
    size_ = segment_bytes;
  }
  auto& e = entries_[std::make_tuple(routing, direct_min_bytes, per_round, relays_in_place)];
  if (!e)
    e = std::make_shared<const Schedule>(
        MakeSchedule(prob, segment_bytes, direct_min_bytes, per_round, relays_in_place));
  return e;
}

int64_t NetworkBytes(const Problem& prob) {
  const Cluster& c = prob.scenario.cluster;
  int64_t bytes = 0;
  for (const PairBytes& pb : prob.pairs)
    if (pb.src_gpu != pb.dst_gpu && c.Between(pb.src_gpu, pb.dst_gpu) == LinkClass::kNetwork) bytes += pb.bytes;
  return bytes;
}

bool SmallerSizesCannotFit(std::pair<int64_t, int64_t> larger, std::pair<int64_t, int64_t> smaller) {
  const auto [s1, m1] = larger;
  const auto [s2, m2] = smaller;
  if (s2 <= 0 || s1 <= s2 || m1 <= 0 || m2 <= 0) return false;
  // At most (m1 - m2) / (s1 - s2) per byte of size (none where the smaller size missed as much or more).
  const double most_saved = static_cast<double>(std::max<int64_t>(0, m1 - m2)) * static_cast<double>(s2) /
                            static_cast<double>(s1 - s2);
  return static_cast<double>(m2) > kFallbackSkipMargin * most_saved;
}

bool NegligibleRelays(const Problem& relayed, std::pair<int64_t, double> plain) {
  const auto [plain_bytes, plain_bound_s] = plain;
  return static_cast<double>(plain_bytes - NetworkBytes(relayed)) < kNegligibleRelayShare * static_cast<double>(plain_bytes) &&
         PortBoundSeconds(relayed) > plain_bound_s * (1 - kNegligibleRelayShare);
}

PlanResult InfeasibleResult(const Feasibility& floor) {
  PlanResult res;
  res.status = PlanStatus::kInfeasible;
  res.gpu = floor.gpu;
  res.missing_bytes = floor.missing_bytes;
  res.message = floor.message;
  return res;
}

void CheckPlannable(const Scenario& s) {
  if (s.destination_dtype != s.dtype)
    throw InputError(s.path, "destination.dtype",
                     fmt::format("the planner moves {} weights as they are; converting to {} during the refit is "
                                 "not supported yet",
                                 DTypeName(s.dtype), DTypeName(s.destination_dtype)));
}

std::vector<PlanPolicy> Policies(const Scenario& s, const PlannerOptions& o) {
  std::vector<double> fractions;
  if (o.offload_fraction) {
    fractions = {*o.offload_fraction};
  } else {
    switch (s.memory.optimizer.offload) {
      case OffloadMode::kNone: fractions = {0}; break;
      case OffloadMode::kAll: fractions = {1}; break;
      case OffloadMode::kFraction: fractions = {s.memory.optimizer.fraction}; break;
      case OffloadMode::kAuto: fractions = {0, 0.25, 0.5, 0.75, 1}; break;
    }
  }
  std::vector<bool> per_layer = o.destination_per_layer ? std::vector<bool>{*o.destination_per_layer}
                                                        : std::vector<bool>{false, true};
  std::vector<bool> to_host = o.source_to_host ? std::vector<bool>{*o.source_to_host} : std::vector<bool>{false, true};
  // Fastest first: no offload, then the cheap memory savers, then more offload.
  std::vector<PlanPolicy> out;
  for (double f : fractions)
    for (bool th : to_host)
      for (bool pl : per_layer) {
        out.push_back(PlanPolicy{f, pl, th, o.merge_local_copies});
        out.back().relay_waves = std::max(1, o.relay_waves);
        out.back().relay_waves_by_segment = o.relay_waves_by_segment.value_or(false);
        out.back().phase_chunks = std::max(1, o.phase_chunks);
        out.back().chunk_ramp = o.chunk_ramp > 0 ? o.chunk_ramp : 1;
        out.back().early_relay_phase = o.early_relay_phase;
        out.back().round_lanes = o.round_lanes.value_or(false);
      }
  return out;
}

std::vector<double> ChunkRampsSearched(const PlannerOptions& o) {
  if (o.phase_chunks != 0) return {};
  return o.chunk_ramp > 0 ? std::vector<double>{o.chunk_ramp} : std::vector<double>{1, kChunkRamp};
}

std::vector<int64_t> SegmentSizes(const Scenario& s, const PlannerOptions& options, bool small) {
  const int64_t given = options.segment_bytes > 0 ? options.segment_bytes : s.plan.segment_bytes;
  if (given > 0) return {given};
  if (!options.segment_candidates.empty()) return options.segment_candidates;
  std::vector<int64_t> sizes;
  for (int64_t x = int64_t{4} << 20; x <= int64_t{1} << 30; x *= 2) {
    sizes.push_back(x);
    if (small || x == int64_t{1} << 30) continue;
    for (int k = 1; k < 4; ++k) {
      const double y = static_cast<double>(x) * std::exp2(k / 4.0);
      sizes.push_back(static_cast<int64_t>(std::llround(y / 65536.0)) * 65536);
    }
  }
  return sizes;
}

std::vector<int32_t> PerRounds(const PlannerOptions& options) {
  if (options.per_round > 0) return {options.per_round};
  if (!options.per_round_candidates.empty()) return options.per_round_candidates;
  return {1, 2, kPerRoundAll};
}

SizeOrders SizeOrder(const Problem& prob, const std::vector<int64_t>& sizes, const std::vector<int32_t>& per_rounds,
                     const PlannerOptions& options, bool small) {
  std::vector<size_t> by_size(sizes.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  SizeOrders out;
  if (small || (sizes.size() <= 1 && per_rounds.size() <= 1)) {
    for (size_t i : by_size) out.order.emplace_back(i, per_rounds.front());
    return out;
  }
  // Bound the plan's size: sizes whose segment count exceeds the cap only
  // compete when no size meets it.
  std::vector<int64_t> count(sizes.size(), 0);
  for (size_t i = 0; i < sizes.size(); ++i)
    for (const PairBytes& pb : prob.pairs)
      if (pb.src_gpu != pb.dst_gpu) count[i] += (pb.bytes + sizes[i] - 1) / sizes[i];
  const bool any_under = std::any_of(count.begin(), count.end(), [&](int64_t n) { return n <= options.max_segments; });
  struct Cand {
    size_t size;
    int32_t per_round;
    double estimate_s;
  };
  std::vector<Cand> cands;
  const EstimatePairs pairs = EstimatePairsOf(prob);
  for (size_t i : by_size)
    for (int32_t b : per_rounds)
      cands.push_back(Cand{i, b,
                           any_under && count[i] > options.max_segments ? std::numeric_limits<double>::infinity()
                                                                        : QuickEstimate(prob, pairs, sizes[i], b)});
  auto best_of = [&](bool all) {
    double best = std::numeric_limits<double>::infinity();
    for (const Cand& c : cands)
      if ((c.per_round == kPerRoundAll) == all) best = std::min(best, c.estimate_s);
    const Cand* pick = nullptr;
    for (const Cand& c : cands) {
      if ((c.per_round == kPerRoundAll) != all || c.estimate_s > best * kTie) continue;
      if (!pick || c.per_round < pick->per_round ||
          (c.per_round == pick->per_round && sizes[c.size] > sizes[pick->size]))
        pick = &c;
    }
    return pick;
  };
  const Cand* first = best_of(false);
  const Cand* all = best_of(true);
  if (!first) first = all, all = nullptr;
  if (all) {
    out.all.emplace_back(all->size, all->per_round);
    out.all_wire_s = AllInOneRoundWireEstimate(prob, pairs, sizes[all->size]);
    // Where it does not fit: at kAllFallbackBytes and its halves, whose
    // staging slots (the largest staged segment each) waste less.
    for (int64_t b = kAllFallbackBytes; b >= kAllFallbackSmallestBytes; b /= 2) {
      const auto fallback = std::find(sizes.begin(), sizes.end(), b);
      if (fallback != sizes.end() && sizes[all->size] > b)
        out.all.emplace_back(static_cast<size_t>(fallback - sizes.begin()), kPerRoundAll);
    }
  }
  out.rounds.emplace_back(first->size, first->per_round);
  if (first->per_round != per_rounds.front()) out.rounds.emplace_back(first->size, per_rounds.front());
  const size_t smallest = static_cast<size_t>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
  if (smallest != first->size) out.rounds.emplace_back(smallest, per_rounds.front());
  out.all_first = all && all->estimate_s < first->estimate_s * (1 - kPerRoundGain);
  if (out.all_first) out.order = out.all;
  out.order.insert(out.order.end(), out.rounds.begin(), out.rounds.end());
  return out;
}

std::vector<int64_t> DirectThresholds(const Scenario& s, const PlannerOptions& options, bool small) {
  const int64_t given = options.direct_min_bytes >= 0 ? options.direct_min_bytes : s.plan.direct_min_bytes;
  if (given >= 0) return {given};
  std::vector<int64_t> out = {kDefaultDirectMinBytes};
  if (small) out.insert(out.end(), {std::numeric_limits<int64_t>::max(), int64_t{0}});
  return out;
}

double RelayPhaseSeconds(const Schedule& sc, const Cluster& c) {
  if (sc.relay_rounds == 0) return 0;
  std::vector<int64_t> out(c.Gpus(), 0), in(c.Gpus(), 0);
  int64_t most = 0;
  for (const Segment& g : sc.segments)
    if (g.round >= sc.rounds - sc.relay_rounds)
      most = std::max({most, out[g.src_gpu] += g.bytes, in[g.dst_gpu] += g.bytes});
  return static_cast<double>(most) / c.nvlink.bytes_per_s;
}

double FirstWaveShare(const Schedule& sc, const Cluster& c, int32_t waves) {
  const double f = FirstOfTwoWaves(sc, c);
  const double r = (1 - f) / f;  // wave k + 1 carries r times wave k (comm_lanes.h WaveEnds)
  double sum = 0, t = 1;
  for (int32_t k = 0; k < waves; ++k) sum += t, t *= r;
  return waves == 2 ? f : 1 / sum;
}

double FirstOfTwoWaves(const Schedule& sc, const Cluster& c) {
  const int32_t relays_at = sc.rounds - sc.relay_rounds;
  if (sc.relay_rounds == 0 || relays_at == 0) return 0.5;
  constexpr int kClasses = 4;  // LinkClass values
  std::vector<int64_t> out(static_cast<size_t>(c.Gpus()) * kClasses, 0), in(out.size(), 0);
  double before_s = 0;
  for (const Segment& g : sc.segments) {
    if (g.round != relays_at - 1) continue;
    const LinkClass lc = c.Between(g.src_gpu, g.dst_gpu);
    const double rate = c.Link(lc).bytes_per_s;
    if (rate <= 0) continue;
    const size_t k = static_cast<size_t>(lc);
    const int64_t most = std::max(out[g.src_gpu * kClasses + k] += g.bytes, in[g.dst_gpu * kClasses + k] += g.bytes);
    before_s = std::max(before_s, static_cast<double>(most) / rate);
  }
  const double relay_s = RelayPhaseSeconds(sc, c);
  if (before_s + relay_s <= 0) return 0.5;
  return std::clamp(before_s / (before_s + relay_s), 0.125, 0.5);
}

double InPlaceRelayShare(const Schedule& sc) {
  int64_t all = 0, in_place = 0;
  for (const Segment& g : sc.segments) {
    if (g.round < sc.rounds - sc.relay_rounds) continue;
    all += g.bytes;
    if (g.relay && g.send_direct && g.hop == 0) in_place += g.bytes;
  }
  return all == 0 ? 0.0 : static_cast<double>(in_place) / static_cast<double>(all);
}

int32_t MostPerRoundThatFits(const Problem& prob, ScheduleCache& cache, int32_t routing, const Schedule& won,
                             const PlanPolicy& policy) {
  auto fits = [&](int32_t e) {  // at won.per_round << e segments per round
    const std::shared_ptr<const Schedule> sc =
        cache.Get(prob, routing, won.segment_bytes, won.direct_min_bytes, won.per_round << e, won.relays_in_place);
    return EmitPlan(prob, *sc, policy, MemoryAnswerMode(*sc, policy)).fits;
  };
  // Exponents 1 .. top, while a phase stays more than two rounds; staging grows with the segments per round, so
  // what fits is a prefix: the top first, then a binary search for its end.
  int32_t top = 0;
  while (int64_t{won.per_round} << (top + 1) < int64_t{won.per_round} * won.rounds / 2 &&
         (int64_t{won.per_round} << (top + 1)) < kPerRoundAll)
    ++top;
  if (top > 0 && fits(top)) return won.per_round << top;  // the most often fits (a phase in about two rounds)
  int32_t lo = 0, hi = top - 1;  // fits(lo) (0: the plan in hand), the answer is in [lo, hi]
  while (lo < hi) {
    const int32_t mid = (lo + hi + 1) / 2;
    if (fits(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo > 0 ? won.per_round << lo : 0;
}

bool SameSegments(const std::vector<Segment>& a, const std::vector<Segment>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](const Segment& x, const Segment& y) {
           return std::tie(x.src_gpu, x.dst_gpu, x.first_part, x.num_parts, x.bytes, x.send_direct, x.recv_direct) ==
                  std::tie(y.src_gpu, y.dst_gpu, y.first_part, y.num_parts, y.bytes, y.send_direct, y.recv_direct);
         });
}

bool PortBoundIsAFloor(const Cluster& c) {
  for (const LinkProfile* l : {&c.nvlink, &c.network, &c.pcie, &c.device_copy})
    if (l->duplex_bytes_per_s > l->bytes_per_s) return false;
  return true;
}

}  // namespace reshard::search_candidates
