// Relay waves (planner/comm_lanes.h): a round per phase whose relay phase is
// pipelined with the network phase before it. Properties of the emitted plan
// on a two-node case where every part is sent in place: each network pair
// carries a K-th of its bytes in each wave, the relay phase runs on the
// second communicator lane, each relayed send waits only for the receives
// that wrote what it forwards (in its wave or an earlier one), every byte is
// written once (Verify), and relays start before the network phase ends.
#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/comm_lanes.h"
#include "planner/emitter.h"
#include "planner/problem.h"
#include "planner/search_candidates.h"
#include "planner/segments.h"
#include "sim/simulator.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

// Per (GPU, stream): its send / recv groups in plan order; an op's wave is
// the rank of its group there (one connected component per phase here).
std::map<int32_t, int32_t> WaveOfOps(const Plan& plan, std::map<std::pair<int32_t, int32_t>, int32_t>* groups) {
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> seen;
  std::map<int32_t, int32_t> wave;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) continue;
    auto& v = seen[{op.gpu, op.stream}];
    if (v.empty() || v.back() != op.group) v.push_back(op.group);
    wave[op.id] = static_cast<int32_t>(v.size()) - 1;
  }
  for (const auto& [key, v] : seen) (*groups)[key] = static_cast<int32_t>(v.size());
  return wave;
}

// Simulated: the first relayed receive starts before the last other one ends.
bool RelaysStartBeforeTheNetworkEnds(const Plan& plan, const Schedule& sc) {
  const Prediction pr = Simulate(plan, SimOptions{});
  int64_t first_relay = std::numeric_limits<int64_t>::max(), last_network = 0;
  for (size_t k = 0; k < plan.ops.size(); ++k) {
    const Op& op = plan.ops[k];
    if (op.kind != OpKind::kRecv || op.segment < 0) continue;
    if (sc.segments[op.segment].relay) first_relay = std::min(first_relay, pr.op_start_ns[k]);
    else last_network = std::max(last_network, pr.op_end_ns[k]);
  }
  return first_relay < last_network;
}

bool Overlaps(const Region& a, const Region& b) {
  return a.buffer == b.buffer && a.offset_bytes < b.offset_bytes + b.Bytes() &&
         b.offset_bytes < a.offset_bytes + a.Bytes();
}

// tiny-llama TP2 on node 0 -> TP2 x DP2 on node 1 (planner_test_util.h):
// each box crosses the network once, into one replica, and is relayed over
// NVLink to the other. Everything in place (threshold 0), one segment per
// pair (1 GiB), waves 2 and 3, even or with a first wave of a quarter.
TEST(RelayWaves, EachWaveCarriesItsShareAndRelaysWaitOnlyForWhatTheyForward) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{1} << 30, 0, kPerRoundAll);
  ASSERT_EQ(sc.relay_rounds, 1);
  const int32_t network_round = sc.rounds - 2;
  for (const auto& [waves, first] : std::vector<std::pair<int32_t, double>>{{2, 0}, {3, 0}, {2, 0.25}, {3, 0.25}}) {
    SCOPED_TRACE(testing::Message() << waves << " waves, first " << first);
    PlanPolicy policy;
    policy.relay_waves = waves;
    policy.relay_first_wave = first;
    const EmittedPlan e = EmitPlan(p, sc, policy);
    ASSERT_TRUE(e.fits && e.comm_lanes);
    const VerifyResult v = Verify(e.plan);
    ASSERT_TRUE(v.ok()) << v.problems.front();
    std::map<std::pair<int32_t, int32_t>, int32_t> groups;
    const std::map<int32_t, int32_t> wave = WaveOfOps(e.plan, &groups);
    // Per network segment and wave: its bytes, WaveStartBytes' share.
    std::map<std::pair<int32_t, int32_t>, int64_t> seg_wave_bytes;
    int32_t relay_stream = -1, network_stream = -1;
    for (const Op& op : e.plan.ops) {
      if (op.kind != OpKind::kSend || op.segment < 0) continue;
      const Segment& sg = sc.segments[op.segment];
      if (sg.relay) {
        if (relay_stream < 0) relay_stream = op.stream;
        EXPECT_EQ(op.stream, relay_stream) << "relays on one lane";
      } else if (sg.round == network_round) {
        if (network_stream < 0) network_stream = op.stream;
        EXPECT_EQ(op.stream, network_stream);
        seg_wave_bytes[{op.segment, wave.at(op.id)}] += op.Bytes();
      }
    }
    ASSERT_GE(relay_stream, 0);
    EXPECT_NE(relay_stream, network_stream) << "the relay phase has a lane of its own";
    int32_t network_segments = 0;
    for (size_t i = 0; i < sc.segments.size(); ++i) {
      const Segment& sg = sc.segments[i];
      if (sg.relay || sg.round != network_round) continue;
      ASSERT_TRUE(sg.Direct());
      ++network_segments;
      for (int32_t w = 0; w < waves; ++w) {
        const int64_t want = WaveStartBytes(sg.bytes, w + 1, waves, first) - WaveStartBytes(sg.bytes, w, waves, first);
        const auto it = seg_wave_bytes.find({static_cast<int32_t>(i), w});
        EXPECT_EQ(it == seg_wave_bytes.end() ? 0 : it->second, want) << "segment " << i << " wave " << w;
      }
      // Each GPU of the pair has one group per wave on the network lane.
      EXPECT_EQ(groups.at({sg.src_gpu, network_stream}), waves);
      EXPECT_EQ(groups.at({sg.dst_gpu, network_stream}), waves);
    }
    EXPECT_GT(network_segments, 0);
    // A relayed send waits for receives only where they wrote bytes it
    // forwards, in its wave or before; and for at least one such receive.
    int32_t relayed_sends = 0;
    for (const Op& op : e.plan.ops) {
      if (op.kind != OpKind::kSend || op.segment < 0 || !sc.segments[op.segment].relay) continue;
      ++relayed_sends;
      int32_t writers = 0;
      for (int32_t d : op.deps) {
        const Op& w = e.plan.ops[d];
        if (w.kind != OpKind::kRecv) continue;
        ++writers;
        EXPECT_TRUE(Overlaps(w.region, op.region)) << "op " << op.id << " waits for recv " << d;
        EXPECT_LE(wave.at(d), wave.at(op.id)) << "op " << op.id;
      }
      EXPECT_GT(writers, 0) << "op " << op.id;
    }
    EXPECT_GT(relayed_sends, 0);
    // Simulated: the first relayed transfer starts before the network phase's last one ends.
    EXPECT_TRUE(RelaysStartBeforeTheNetworkEnds(e.plan, sc));
  }
}

// Wave boundaries: 4 KiB aligned, from 0 to the segment's end; even, or the
// first share and then geometric (comm_lanes.h WaveEnds).
TEST(RelayWaves, WaveStartsSplitBytesEvenlyOrAfterAFirstShare) {
  const int64_t mib = int64_t{1} << 20;
  EXPECT_EQ(WaveStartBytes(64 * mib, 0, 2), 0);
  EXPECT_EQ(WaveStartBytes(64 * mib, 1, 2), 32 * mib);
  EXPECT_EQ(WaveStartBytes(64 * mib, 2, 2), 64 * mib);
  // A quarter first: 16 MiB, then 48 MiB.
  EXPECT_EQ(WaveStartBytes(64 * mib, 1, 2, 0.25), 16 * mib);
  EXPECT_EQ(WaveStartBytes(64 * mib, 2, 2, 0.25), 64 * mib);
  // Three waves, a quarter first, then each r times the one before, with
  // 0.25 (1 + r + r^2) = 1: r = (sqrt(13) - 1) / 2 = 1.3028, so the second
  // starts at 16 MiB and ends at 64 MiB x 0.25 (1 + r) = 36.844 MiB, 4 KiB
  // aligned down: 38,633,472 bytes.
  EXPECT_EQ(WaveStartBytes(64 * mib, 1, 3, 0.25), 16 * mib);
  EXPECT_EQ(WaveStartBytes(64 * mib, 2, 3, 0.25), 38633472);
  EXPECT_EQ(WaveStartBytes(64 * mib, 3, 3, 0.25), 64 * mib);
  // Two waves are the same rule: f and 1 - f.
  const std::vector<double> two = WaveEnds(2, 0.3);
  ASSERT_EQ(two.size(), 3u);
  EXPECT_DOUBLE_EQ(two[1], 0.3);
  EXPECT_DOUBLE_EQ(two[2], 1.0);
  // The shares grow by one ratio and sum to 1 (four waves from 1/15: 1, 2, 4, 8 fifteenths).
  const std::vector<double> four = WaveEnds(4, 1.0 / 15);
  ASSERT_EQ(four.size(), 5u);
  for (int32_t w = 1; w <= 4; ++w) EXPECT_NEAR(four[w], ((1 << w) - 1) / 15.0, 1e-9) << w;
  EXPECT_TRUE(WaveEnds(3, 0).empty());  // even
  // Unaligned sizes: starts round down to 4 KiB, the end is the size.
  const int64_t odd = 10 * 4096 + 123;  // a quarter is 10,270.75 bytes: 2 pages
  EXPECT_EQ(WaveStartBytes(odd, 1, 2, 0.25), 2 * 4096);
  EXPECT_EQ(WaveStartBytes(odd, 2, 2, 0.25), odd);
  for (int32_t w = 0; w < 4; ++w)
    EXPECT_LE(WaveStartBytes(odd, w, 4, 0.1), WaveStartBytes(odd, w + 1, 4, 0.1)) << w;
}

// The first wave's share: N / (N + R), N the busiest port of the phase
// before the relay phase (here the network, node 0 -> node 1) and R the
// relay phase's (NVLink, one replica to the other), each its bytes at its
// class's peak rate, found here from the segments by hand.
TEST(RelayWaves, TheFirstWaveEndsItsRelaysAsTheNetworkPhaseEnds) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{1} << 30, 0, kPerRoundAll);
  ASSERT_EQ(sc.relay_rounds, 1);
  // The busiest port of each phase, by hand from the segments.
  std::map<std::pair<int32_t, bool>, int64_t> before, relay;  // (GPU, sends?) -> bytes
  for (const Segment& g : sc.segments) {
    auto& m = g.relay ? relay : before;
    if (!g.relay && g.round != sc.rounds - 2) continue;
    m[{g.src_gpu, true}] += g.bytes;
    m[{g.dst_gpu, false}] += g.bytes;
  }
  int64_t most_before = 0, most_relay = 0;
  for (const auto& [k, b] : before) most_before = std::max(most_before, b);
  for (const auto& [k, b] : relay) most_relay = std::max(most_relay, b);
  const Cluster& c = s.cluster;
  ASSERT_EQ(c.Between(sc.segments.front().src_gpu, sc.segments.front().dst_gpu), LinkClass::kNetwork);
  const double n = most_before / c.network.bytes_per_s, r = most_relay / c.nvlink.bytes_per_s;
  const double want = std::clamp(n / (n + r), 0.125, 0.5);
  EXPECT_NEAR(search_candidates::FirstWaveShare(sc, c), want, 1e-12);
  EXPECT_GT(want, 0.125);  // the NIC is the slower port: not at the clamp
  // Three waves: each wave r = R / N = (1 - f) / f times the one before, the first 1 / (1 + r + r^2).
  const double ratio = (1 - want) / want;
  EXPECT_NEAR(search_candidates::FirstWaveShare(sc, c, 3), 1 / (1 + ratio + ratio * ratio), 1e-12);
  // Without a relay phase there is nothing to balance: half.
  Problem plain(s);
  EXPECT_EQ(search_candidates::FirstWaveShare(MakeSchedule(plain, int64_t{1} << 30, 0, kPerRoundAll), c), 0.5);
}

// Training weights moved to host as they are read (PlanPolicy::source_to_host):
// a segment sent in place goes out in every wave, and the buffer it reads
// moves to host only after its sends of the last wave (a reader is counted
// per segment, not per wave): every send from a source buffer is an
// ancestor of that buffer's move to host and of its free.
TEST(RelayWaves, ASourceBufferLeavesOnlyAfterEveryWaveSentFromIt) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{1} << 30, 0, kPerRoundAll);
  PlanPolicy policy;
  policy.source_to_host = true;
  policy.relay_waves = 2;
  const EmittedPlan e = EmitPlan(p, sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  const Plan& plan = e.plan;
  auto ancestors = [&](int32_t op) {
    std::vector<bool> seen(plan.ops.size(), false);
    std::vector<int32_t> todo{op};
    while (!todo.empty()) {
      const int32_t x = todo.back();
      todo.pop_back();
      for (int32_t d : plan.ops[x].deps)
        if (!seen[d]) seen[d] = true, todo.push_back(d);
    }
    return seen;
  };
  int32_t checked = 0;
  for (const Op& op : plan.ops) {
    if (op.kind != OpKind::kOffload && op.kind != OpKind::kFree) continue;
    if (op.kind == OpKind::kOffload && op.copies.empty()) continue;
    const int32_t buf = op.kind == OpKind::kFree ? op.buffer : op.copies.front().src.buffer;
    if (buf < 0 || plan.buffers[buf].role != BufferRole::kSourceWeights) continue;
    const std::vector<bool> before = ancestors(op.id);
    for (const Op& send : plan.ops)
      if (send.kind == OpKind::kSend && send.region.buffer == buf) {
        EXPECT_TRUE(before[send.id]) << "send " << send.id << " reads buffer " << buf << " after op " << op.id;
        ++checked;
      }
  }
  EXPECT_GT(checked, 0);
}

// Without a relay phase there is nothing to pipeline: the policy changes nothing.
TEST(RelayWaves, APlanWithoutRelaysIsTheSame) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem p(s);
  const Schedule sc = MakeSchedule(p, int64_t{1} << 30, 0, kPerRoundAll);
  ASSERT_EQ(sc.relay_rounds, 0);
  PlanPolicy waved;
  waved.relay_waves = 4;
  EXPECT_EQ(EmitPlan(p, sc, waved).plan, EmitPlan(p, sc, PlanPolicy{}).plan);
}

// Large plans try waves only where the relay phase is mostly sent in place
// (search_candidates.h kRelayWavesMinInPlace): the same relays sent in place
// (threshold 0) are all of the phase, packed (no part in place) none of it,
// and a plan without relays has no relay phase.
TEST(RelayWaves, TheSearchTriesThemWhereRelaysAreSentInPlace) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem plain(s);
  EXPECT_EQ(search_candidates::InPlaceRelayShare(MakeSchedule(plain, int64_t{1} << 30, 0, kPerRoundAll)), 0.0);
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule in_place = MakeSchedule(p, int64_t{1} << 30, 0, kPerRoundAll);
  ASSERT_EQ(in_place.relay_rounds, 1);
  EXPECT_EQ(search_candidates::InPlaceRelayShare(in_place), 1.0);
  const Schedule packed = MakeSchedule(p, int64_t{1} << 30, std::numeric_limits<int64_t>::max(), kPerRoundAll);
  ASSERT_EQ(packed.relay_rounds, 1);
  EXPECT_EQ(search_candidates::InPlaceRelayShare(packed), 0.0);
}

// Schedule::relays_in_place: in a round per phase, relayed entries and the
// network entries feeding them go in place whatever the threshold, and the
// other entries keep it; in rounds the flag does nothing.
TEST(RelayWaves, RelaysInPlaceSendsRelaysAndTheirFeedsInPlace) {
  const int64_t never = std::numeric_limits<int64_t>::max();
  for (const Scenario& s : {planner_testing::TwoNodeRelayScenario(), planner_testing::Tp2ToTp4RelayScenario()}) {
    SCOPED_TRACE(s.name);
    Problem p(s);
    ASSERT_GT(p.AddRelays(), 0);
    const int64_t size = 4096;  // many segments per pair: splitting a pair by class never restages it
    const Schedule packed = MakeSchedule(p, size, never, kPerRoundAll);
    const Schedule in_place = MakeSchedule(p, size, never, kPerRoundAll, true);
    EXPECT_FALSE(packed.relays_in_place);
    EXPECT_TRUE(in_place.relays_in_place);
    EXPECT_EQ(search_candidates::InPlaceRelayShare(packed), 0.0);
    EXPECT_EQ(search_candidates::InPlaceRelayShare(in_place), 1.0);
    // Packed, the feeding entries are a staged class of their own; in place,
    // none is staged and they are the bytes the non-relayed segments send in
    // place. The rest is packed in both.
    int64_t fed_packed = 0, staged_feeds = 0, sent_in_place = 0, relayed[2] = {0, 0}, total[2] = {0, 0};
    for (const Segment& g : packed.segments) {
      EXPECT_FALSE(g.send_direct);
      if (g.feeds) fed_packed += g.bytes;
      (g.relay ? relayed[0] : total[0]) += g.bytes;
    }
    for (const Segment& g : in_place.segments) {
      if (g.feeds) staged_feeds += g.bytes;
      if (!g.relay && g.send_direct) sent_in_place += g.bytes;
      if (g.relay) {
        EXPECT_TRUE(g.send_direct);
      }
      (g.relay ? relayed[1] : total[1]) += g.bytes;
    }
    EXPECT_GT(fed_packed, 0);
    EXPECT_EQ(staged_feeds, 0);
    EXPECT_EQ(sent_in_place, fed_packed);
    EXPECT_EQ(relayed[0], relayed[1]);
    EXPECT_EQ(total[0], total[1]);
    // In rounds feeds are no class of their own and nothing changes.
    const Schedule rounds = MakeSchedule(p, size, never, 1, true);
    EXPECT_FALSE(rounds.relays_in_place);
    EXPECT_TRUE(search_candidates::SameSegments(rounds.segments, MakeSchedule(p, size, never, 1).segments));
  }
}

// Relay waves by segment (PlanPolicy::relay_waves_by_segment, comm_lanes.h
// SegmentWaves): the network phase's segments received in place, and only
// they, get a wave; each goes whole into it (one group for all its sends),
// so that phase has as many sends as without waves; each GPU's network bytes
// spread over the waves; a relayed send waits only for receives that wrote
// bytes it forwards, all of one wave; every byte is written once (Verify);
// relays start before the network phase ends.
TEST(RelayWaves, BySegmentEachSegmentGoesWholeInOneWave) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{64} << 10, 0, kPerRoundAll);  // many segments per pair
  ASSERT_EQ(sc.relay_rounds, 1);
  const int32_t network_round = sc.rounds - 2;
  auto network_sends = [&](const Plan& plan, std::map<int32_t, std::set<int32_t>>* groups) {
    int32_t n = 0;
    for (const Op& op : plan.ops) {
      if (op.kind != OpKind::kSend || op.segment < 0) continue;
      const Segment& g = sc.segments[op.segment];
      if (g.relay || g.round != network_round) continue;
      ++n;
      if (groups) (*groups)[op.segment].insert(op.group);
    }
    return n;
  };
  const int32_t unwaved_sends = network_sends(EmitPlan(p, sc, PlanPolicy{}).plan, nullptr);
  for (const int32_t waves : {2, 4}) {
    SCOPED_TRACE(testing::Message() << waves << " waves");
    const std::vector<int8_t> wave = SegmentWaves(sc, s.cluster, waves, 0);
    ASSERT_EQ(wave.size(), sc.segments.size());
    // Per (GPU, sends?): its network bytes in each wave.
    std::map<std::pair<int32_t, bool>, std::vector<int64_t>> load;
    std::map<std::pair<int32_t, bool>, int32_t> count;
    for (size_t i = 0; i < sc.segments.size(); ++i) {
      const Segment& g = sc.segments[i];
      const bool waved = !g.relay && g.round == network_round && g.hop == 0 && g.recv_direct;
      ASSERT_EQ(wave[i] >= 0, waved) << "segment " << i;
      if (!waved) continue;
      ASSERT_LT(wave[i], waves);
      for (const bool sends : {true, false}) {
        const std::pair<int32_t, bool> key{sends ? g.src_gpu : g.dst_gpu, sends};
        load[key].resize(waves, 0);
        load[key][wave[i]] += g.bytes;
        ++count[key];
      }
    }
    ASSERT_FALSE(load.empty());
    for (const auto& [key, v] : load) {
      const int64_t total = std::accumulate(v.begin(), v.end(), int64_t{0});
      if (count[key] < 4 * waves) continue;
      for (int32_t w = 0; w < waves; ++w)
        EXPECT_GE(2 * waves * v[w], total) << "GPU " << key.first << (key.second ? " sends" : " receives") << " wave " << w;
    }
    PlanPolicy policy;
    policy.relay_waves = waves;
    policy.relay_waves_by_segment = true;
    const EmittedPlan e = EmitPlan(p, sc, policy);
    ASSERT_TRUE(e.fits && e.comm_lanes);
    const VerifyResult v = Verify(e.plan);
    ASSERT_TRUE(v.ok()) << v.problems.front();
    std::map<int32_t, std::set<int32_t>> groups;
    EXPECT_EQ(network_sends(e.plan, &groups), unwaved_sends);
    for (const auto& [segment, in] : groups) EXPECT_EQ(in.size(), 1u) << "segment " << segment;
    int32_t relayed_sends = 0;
    for (const Op& op : e.plan.ops) {
      if (op.kind != OpKind::kSend || op.segment < 0 || !sc.segments[op.segment].relay) continue;
      ++relayed_sends;
      std::set<int32_t> writer_waves;
      for (int32_t d : op.deps) {
        const Op& w = e.plan.ops[d];
        if (w.kind != OpKind::kRecv) continue;
        EXPECT_TRUE(Overlaps(w.region, op.region)) << "op " << op.id << " waits for recv " << d;
        writer_waves.insert(wave[w.segment]);
      }
      EXPECT_EQ(writer_waves.size(), 1u) << "op " << op.id;
    }
    EXPECT_GT(relayed_sends, 0);
    EXPECT_TRUE(RelaysStartBeforeTheNetworkEnds(e.plan, sc));
  }
}

// With waves by segment each sender packs its network-phase segments wave by
// wave (emitter.cc), so a wave's group waits for its own packs only: on
// tiny-llama TP2 -> TP4 at threshold 0 some segments are packed at the
// sender and received in place, so they have waves; per sender their packs
// come in the order of those waves.
TEST(RelayWaves, BySegmentSendersPackWaveByWave) {
  const Scenario s = planner_testing::Tp2ToTp4RelayScenario();
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{64} << 10, 0, kPerRoundAll);
  ASSERT_EQ(sc.relay_rounds, 1);
  const int32_t waves = 4;
  const std::vector<int8_t> wave = SegmentWaves(sc, s.cluster, waves, 0);
  PlanPolicy policy;
  policy.relay_waves = waves;
  policy.relay_waves_by_segment = true;
  const EmittedPlan e = EmitPlan(p, sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  std::map<int32_t, std::vector<int32_t>> packs;  // per sender: the waves of its network-phase packs, in plan order
  for (const Op& op : e.plan.ops) {
    if (op.kind != OpKind::kCopy || op.segment < 0) continue;
    const Segment& g = sc.segments[op.segment];
    if (g.relay || g.round != sc.rounds - 2 || !g.Packs() || op.gpu != g.src_gpu) continue;
    packs[op.gpu].push_back(wave[op.segment]);
  }
  int32_t mixed = 0;
  for (const auto& [gpu, w] : packs) {
    EXPECT_TRUE(std::is_sorted(w.begin(), w.end())) << "GPU " << gpu;
    mixed += std::set<int32_t>(w.begin(), w.end()).size() > 1;
  }
  EXPECT_GT(mixed, 0) << "no sender packs segments of two waves";
}

// A relayer sends the same parts to each of its J receivers: the j-th of its
// relay segments starts at part j P / J (emitter_state.h PartRotations), so
// their per-op boundaries are staggered; every part is still sent once per
// receiver and the plan verifies. tiny-llama TP2 on node 0 -> TP2 x DP4 on
// node 1: each box crosses the network once and is relayed to 3 replicas.
TEST(RelayParts, ARelayersSegmentsStartAtStaggeredParts) {
  using planner_testing::FromYaml, planner_testing::Yaml;
  const Scenario s = FromYaml(Yaml("tiny-llama", "{preset: dgx-h200, nodes: 2}", "{tp: 2, gpus: \"0-1\"}",
                                   "{tp: 2, dp: 4, gpus: \"8-15\"}",
                                   "memory: {optimizer: {bytes_per_param: 12, offload: auto}}\n", "relay4"));
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{1} << 30, 0, kPerRoundAll);
  const EmittedPlan e = EmitPlan(p, sc, PlanPolicy{});
  ASSERT_TRUE(e.fits);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  // Per relay segment: the source (buffer, offset) of its first send and its bytes sent.
  std::map<int32_t, std::pair<int32_t, int64_t>> first_offset;
  std::map<int32_t, int64_t> sent;
  for (const Op& op : e.plan.ops) {
    if (op.kind != OpKind::kSend || op.segment < 0 || !sc.segments[op.segment].relay) continue;
    first_offset.try_emplace(op.segment, op.region.buffer, op.region.offset_bytes);
    sent[op.segment] += op.Bytes();
  }
  std::map<int32_t, std::set<std::pair<int32_t, int64_t>>> starts;  // per relayer: where its segments start
  std::map<int32_t, int32_t> segments;
  for (const auto& [i, offset] : first_offset) {
    const Segment& sg = sc.segments[i];
    EXPECT_EQ(sent.at(i), sg.bytes) << "segment " << i;
    if (sg.num_parts < 3) continue;
    starts[sg.src_gpu].insert(offset);
    ++segments[sg.src_gpu];
  }
  ASSERT_FALSE(segments.empty());
  for (const auto& [gpu, n] : segments) {
    EXPECT_EQ(n, 3) << "relayer " << gpu;
    EXPECT_EQ(static_cast<int32_t>(starts.at(gpu).size()), n) << "relayer " << gpu << ": one start per receiver";
  }
}

}  // namespace
}  // namespace reshard
