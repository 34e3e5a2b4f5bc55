#include "planner/comm_lanes.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <utility>

#include "model/box.h"

namespace reshard {

std::vector<uint8_t> CommLanes(const Schedule& sc, int32_t gpus) {
  if (!sc.all_in_one_round) return {};
  std::vector<uint8_t> lanes(sc.segments.size(), 0);
  // The phase the relay phase follows: its segments that feed relays take
  // lane 0 alone where they are at most half of its bytes.
  const int32_t relays_at = sc.rounds - sc.relay_rounds;
  int64_t feed_bytes = 0, phase_bytes = 0;
  for (const Segment& g : sc.segments) {
    if (g.relay || g.round != relays_at - 1 || sc.relay_rounds == 0) continue;
    phase_bytes += g.bytes;
    if (g.feeds || (g.via_recv && g.hop == 1)) feed_bytes += g.bytes;  // the relay phase waits for both
  }
  const bool feed_lane = feed_bytes > 0 && 2 * feed_bytes <= phase_bytes;
  // Per (sender, round, lane): bytes so far; rounds of a round per phase are few.
  std::vector<int64_t> bytes(static_cast<size_t>(gpus) * 2 * std::max(sc.rounds, 1), 0);
  bool split = false;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.relay || sg.round >= relays_at) continue;
    if (feed_lane && sg.round == relays_at - 1) {
      lanes[i] = sg.feeds || (sg.via_recv && sg.hop == 1) ? 0 : 1;
      split = split || lanes[i] != 0;
      continue;
    }
    int64_t* b = &bytes[(static_cast<size_t>(sg.round) * gpus + sg.src_gpu) * 2];
    lanes[i] = b[1] < b[0] ? 1 : 0;
    b[lanes[i]] += sg.bytes;
    split = split || lanes[i] != 0;
  }
  if (!split) return {};
  return lanes;
}

void RelaysAfterInPlaceFeeds(const Problem& prob, const Schedule& sc, std::vector<uint8_t>& lanes) {
  if (!sc.all_in_one_round || sc.relay_rounds == 0 || lanes.size() != sc.segments.size()) return;
  const int32_t relays_at = sc.rounds - sc.relay_rounds;
  // (destination rank, piece) -> the boxes received there in place on lane 1 by segments that feed relays.
  std::map<std::pair<int32_t, int32_t>, std::vector<Box>> landed;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.round != relays_at - 1 || !sg.feeds_in_place || lanes[i] != 1) continue;
    for (int64_t k = sg.first_part; k < sg.first_part + sg.num_parts; ++k) {
      const Part& p = sc.parts[k];
      landed[{p.dst_rank, prob.FragmentOf(p.dst_rank, p.frag).dst_piece}].push_back(p.box);
    }
  }
  if (landed.empty()) return;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (!sg.relay || lanes[i] == 1) continue;
    for (int64_t k = sg.first_part; k < sg.first_part + sg.num_parts && lanes[i] == 0; ++k) {
      const Part& p = sc.parts[k];
      const auto it = p.relay ? landed.find({p.src_rank, p.src_piece}) : landed.end();
      if (it == landed.end()) continue;
      for (const Box& b : it->second)
        if (Intersect(b, p.box)) {
          lanes[i] = 1;
          break;
        }
    }
  }
}

std::vector<uint8_t> RoundLanes(const Schedule& sc) {
  if (sc.all_in_one_round || sc.rounds < 2) return {};
  std::vector<uint8_t> lanes(sc.segments.size(), 0);
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    const bool first_hop = sg.hop == 1 && !sg.via_recv;  // in the round before its second hop (segments.cc)
    lanes[i] = static_cast<uint8_t>((sg.round + (first_hop ? 1 : 0)) % 2);
  }
  return lanes;
}

std::vector<uint8_t> LanesWithoutWaves(const Schedule& sc, bool round_lanes, int32_t gpus) {
  return round_lanes && !sc.all_in_one_round ? RoundLanes(sc) : CommLanes(sc, gpus);
}

std::vector<uint8_t> RelayWaveLanes(const Schedule& sc, int32_t gpus) {
  if (!sc.all_in_one_round || sc.relay_rounds == 0) return {};
  std::vector<uint8_t> lanes = CommLanes(sc, gpus);
  lanes.resize(sc.segments.size(), 0);
  const int32_t relays_at = sc.rounds - sc.relay_rounds;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.round >= relays_at - 1) lanes[i] = sg.round >= relays_at ? 1 : 0;
  }
  return lanes;
}

namespace {

// Where a segment's sender (`send`) or receiver load of part 0 sits in a (GPU, link class, part) array.
size_t LoadAt(const Cluster& c, const Segment& sg, bool send, size_t parts) {
  const size_t net = c.DomainOf(sg.src_gpu) != c.DomainOf(sg.dst_gpu);
  return (static_cast<size_t>(send ? sg.src_gpu : sg.dst_gpu) * 2 + net) * parts;
}

// Each segment of `order` (largest first) whole into the part k where its
// sender's and its receiver's bytes of its link class, with it, over share[k]
// stay lowest; `sent` / `received` hold (GPU, class, part) loads already there.
void BalanceWhole(const Schedule& sc, const Cluster& c, const std::vector<int32_t>& order,
                  const std::vector<double>& share, std::vector<int64_t>& sent, std::vector<int64_t>& received,
                  std::vector<int8_t>& part) {
  const size_t parts = share.size();
  for (int32_t i : order) {
    const Segment& sg = sc.segments[i];
    int64_t* s = &sent[LoadAt(c, sg, true, parts)];
    int64_t* r = &received[LoadAt(c, sg, false, parts)];
    size_t best = 0;
    double best_load = std::numeric_limits<double>::infinity();
    for (size_t w = 0; w < parts; ++w) {
      if (!(share[w] > 0)) continue;  // a part it may not take
      const double load = static_cast<double>(std::max(s[w], r[w]) + sg.bytes) / share[w];
      if (load < best_load) best = w, best_load = load;
    }
    s[best] += sg.bytes, r[best] += sg.bytes;
    part[i] = static_cast<int8_t>(best);
  }
}

void LargestFirst(const Schedule& sc, std::vector<int32_t>& order) {
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t x, int32_t y) { return sc.segments[x].bytes > sc.segments[y].bytes; });
}

// Segments the relay phase waits for: relay feeds (staged or received in place) and receiver-side relays' first
// hops.
bool FeedsRelays(const Segment& sg) { return sg.feeds || sg.feeds_in_place || (sg.via_recv && sg.hop == 1); }

}  // namespace

std::vector<double> WaveEnds(int32_t waves, double first) {
  if (waves < 2 || !(first > 0 && first < 1)) return {};
  auto sum = [&](double r) {  // 1 + r + ... + r^(waves - 1)
    double s = 0, t = 1;
    for (int32_t k = 0; k < waves; ++k) s += t, t *= r;
    return s;
  };
  double r = (1 - first) / first;  // two waves: exact
  if (waves > 2) {  // sum(r) = 1 / first, sum increasing in r > 0: bisection on log r
    double lo = -30, hi = 30;
    for (int it = 0; it < 200; ++it) {
      const double mid = (lo + hi) / 2;
      (sum(std::exp(mid)) < 1 / first ? lo : hi) = mid;
    }
    r = std::exp((lo + hi) / 2);
  }
  std::vector<double> ends(static_cast<size_t>(waves) + 1, 1.0);
  ends[0] = 0;
  double share = first;
  for (int32_t w = 1; w < waves; ++w, share *= r) ends[w] = std::min(1.0, ends[w - 1] + share);
  return ends;
}

std::vector<int8_t> SegmentWaves(const Schedule& sc, const Cluster& c, int32_t waves, double first) {
  std::vector<int8_t> wave(sc.segments.size(), -1);
  if (!sc.all_in_one_round || sc.relay_rounds == 0 || waves < 2) return wave;
  const int32_t before = sc.rounds - sc.relay_rounds - 1;
  std::vector<int32_t> order;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.round == before && !sg.relay && sg.hop == 0 && sg.recv_direct) order.push_back(static_cast<int32_t>(i));
  }
  LargestFirst(sc, order);
  std::vector<double> share(waves, 1.0 / waves);
  if (const std::vector<double> ends = WaveEnds(waves, first); !ends.empty())
    for (int32_t w = 0; w < waves; ++w) share[w] = ends[w + 1] - ends[w];
  // Per (GPU, link class, wave): bytes so far.
  std::vector<int64_t> sent(static_cast<size_t>(c.Gpus()) * 2 * waves, 0), received(sent.size(), 0);
  BalanceWhole(sc, c, order, share, sent, received, wave);
  return wave;
}

bool FeedsInFirstChunk(const Schedule& sc, int32_t chunks, int32_t within) {
  if (!sc.all_in_one_round || sc.relay_rounds == 0) return false;
  const int32_t phase = sc.rounds - sc.relay_rounds - 1;
  int64_t feed_bytes = 0, phase_bytes = 0;
  for (const Segment& sg : sc.segments) {
    if (sg.round != phase || sg.relay) continue;
    feed_bytes += FeedsRelays(sg) ? sg.bytes : 0, phase_bytes += sg.bytes;
  }
  return feed_bytes > 0 && feed_bytes * chunks <= within * phase_bytes;
}

bool FeedsFitChunkZeroOnEveryPort(const Schedule& sc, const Cluster& c, int32_t chunks) {
  if (!sc.all_in_one_round || sc.relay_rounds == 0) return false;
  const int32_t phase = sc.rounds - sc.relay_rounds - 1;
  // Per (GPU, link class, direction: LoadAt's layout with the two directions as its parts): seconds of the
  // phase and of its feeds at the class's peak.
  std::vector<double> all(static_cast<size_t>(c.Gpus()) * 4, 0), feeds(all.size(), 0);
  const double rate[2] = {c.Link(LinkClass::kNvlink).bytes_per_s, c.Link(LinkClass::kNetwork).bytes_per_s};
  for (const Segment& sg : sc.segments) {
    if (sg.round != phase || sg.relay) continue;
    const bool feed = FeedsRelays(sg);
    const double s = static_cast<double>(sg.bytes) / rate[c.DomainOf(sg.src_gpu) != c.DomainOf(sg.dst_gpu)];
    for (const size_t at : {LoadAt(c, sg, true, 2), LoadAt(c, sg, false, 2) + 1}) {
      all[at] += s;
      if (feed) feeds[at] += s;
    }
  }
  return *std::max_element(feeds.begin(), feeds.end()) * chunks <= *std::max_element(all.begin(), all.end());
}

std::vector<double> ChunkShares(int32_t chunks, double ramp) {
  std::vector<double> share(static_cast<size_t>(std::max(chunks, 0)));
  double sum = 0;
  for (int32_t k = 0; k < chunks; ++k) sum += share[k] = std::pow(ramp, std::min(k, chunks - 1 - k));
  for (double& v : share) v /= sum;
  return share;
}

std::vector<int8_t> PhaseChunks(const Schedule& sc, const Cluster& c, int32_t chunks, std::vector<uint8_t>& lanes,
                                bool early, double ramp, int32_t feed_chunks) {
  std::vector<int8_t> chunk(sc.segments.size(), -1);
  if (!sc.all_in_one_round || lanes.size() != sc.segments.size() || chunks < 2 || chunks > 64) return chunk;
  const int32_t phase = sc.rounds - sc.relay_rounds - 1;
  std::vector<int64_t> sent(static_cast<size_t>(c.Gpus()) * 2 * chunks, 0), received(sent.size(), 0);
  // The feeds all in chunk 0 (the relay phase waits for them) where they fit in a chunk's share, then the rest
  // around them; more feeds go with the rest.
  const int32_t spread = early && chunks > 2 ? std::clamp(feed_chunks, 1, chunks - 2) : 1;  // chunks the feeds go in
  const bool first = FeedsInFirstChunk(sc, chunks, spread) && (early || FeedsFitChunkZeroOnEveryPort(sc, c, chunks));
  std::vector<int32_t> feeds, order;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.round != phase || sg.relay) continue;
    (first && FeedsRelays(sg) ? feeds : order).push_back(static_cast<int32_t>(i));
  }
  // Sender relays' first hops (a phase of their own before this one) on lane 1 beside chunk 0, which then starts
  // while they run; so their second hops, which wait for them, not in chunk 0: feeds among them in chunk 1 (lane
  // 1, right after the first hops), the others balanced over chunks 1...
  const bool beside = sc.pre_rounds > 0 && !(feeds.empty() && order.empty());
  auto feed_hop = [&](int32_t i) { return beside && sc.segments[i].hop == 2; };
  if (spread > 1) {  // balanced over chunks [0, spread), second hops among them over [1, spread)
    std::vector<double> in_feed(chunks, 0), after_hops(chunks, 0);
    for (int32_t k = 0; k < spread; ++k) in_feed[k] = 1.0 / spread, after_hops[k] = k > 0 ? 1.0 / (spread - 1) : 0;
    std::vector<int32_t> feed_hops, rest;
    for (int32_t i : feeds) (feed_hop(i) ? feed_hops : rest).push_back(i);
    LargestFirst(sc, feed_hops);
    BalanceWhole(sc, c, feed_hops, after_hops, sent, received, chunk);
    LargestFirst(sc, rest);
    BalanceWhole(sc, c, rest, in_feed, sent, received, chunk);
  } else {
    for (int32_t i : feeds) {
      const Segment& sg = sc.segments[i];
      const int8_t k = feed_hop(i) ? 1 : 0;
      sent[LoadAt(c, sg, true, chunks) + k] += sg.bytes;
      received[LoadAt(c, sg, false, chunks) + k] += sg.bytes;
      chunk[i] = k;
    }
  }
  std::vector<int32_t> hops;
  if (beside) {
    auto second = [&](int32_t i) { return sc.segments[i].hop == 2; };
    std::copy_if(order.begin(), order.end(), std::back_inserter(hops), second);
    order.erase(std::remove_if(order.begin(), order.end(), second), order.end());
  }
  const std::vector<double> share = ChunkShares(chunks, ramp);
  std::vector<double> later = share;
  later[0] = 0;
  LargestFirst(sc, hops);
  BalanceWhole(sc, c, hops, later, sent, received, chunk);
  LargestFirst(sc, order);
  BalanceWhole(sc, c, order, share, sent, received, chunk);
  // The first hops of chunk k's second hops (k >= 2) in chunk k - 2, the group before it on its lane: only those
  // of chunk 1's run beside chunk 0, so the relay peers get bytes to send on within a ms instead of after all
  // first hops.
  for (size_t i = 0; beside && phase == sc.pre_rounds && i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.hop == 2 && !sg.via_recv && sg.feed >= 0 && chunk[i] >= 2 && sc.segments[sg.feed].round < sc.pre_rounds)
      chunk[sg.feed] = static_cast<int8_t>(chunk[i] - 2);
  }
  for (size_t i = 0; i < sc.segments.size(); ++i)
    if (chunk[i] >= 0) lanes[i] = static_cast<uint8_t>(chunk[i] % 2);
    else if (beside && sc.segments[i].round < sc.pre_rounds) lanes[i] = 1, chunk[i] = kFirstHopsBesideChunkZero;
  return chunk;
}

std::vector<int32_t> LanePeers(const Schedule& sc, const std::vector<uint8_t>& lanes, int32_t gpus) {
  std::vector<std::vector<int32_t>> peer_list(static_cast<size_t>(gpus));
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& g = sc.segments[i];
    const int32_t lane = lanes.empty() ? 0 : lanes[i];
    peer_list[g.src_gpu].push_back(lane * gpus + g.dst_gpu);
    peer_list[g.dst_gpu].push_back(lane * gpus + g.src_gpu);
  }
  std::vector<int32_t> peers(static_cast<size_t>(gpus), 0);
  for (int32_t g = 0; g < gpus; ++g) {
    auto& v = peer_list[g];
    std::sort(v.begin(), v.end());
    peers[g] = static_cast<int32_t>(std::unique(v.begin(), v.end()) - v.begin());
  }
  return peers;
}

}  // namespace reshard
