// End to end on the host backend: scenarios of the tiny presets planned by
// the planner and run by the executor, every destination element verified.
// The executor never links the planner; this test links both.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/scenario.h"
#include "planner/comm_lanes.h"
#include "planner/emitter.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/segments.h"
#include "tests/executor/e2e_cases.h"

namespace reshard {
namespace {

using testing::E2eCase;

class EndToEnd : public ::testing::TestWithParam<E2eCase> {};

TEST_P(EndToEnd, PlannedRunVerifiesEveryElement) {
  const Scenario s = ParseScenario(testing::WithSegmentBytes(GetParam()), "<e2e>");
  PlannerOptions po;
  po.simulate = false;  // the prediction is not under test here
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
}

// Two segments per GPU and direction in each round (more staging slots,
// packs a round ahead): still every element verified.
TEST_P(EndToEnd, TwoSegmentsPerRoundVerifyEveryElement) {
  const Scenario s = ParseScenario(testing::WithSegmentBytes(GetParam()), "<e2e>");
  PlannerOptions po;
  po.simulate = false;
  po.per_round = 2;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.stats.per_round, 2);
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
}

// Rounds alternating over two NCCL communicators (PlanPolicy::round_lanes,
// forced): a GPU's next round may start before this one ends, its staging
// slots two rounds deep; every element verified. (Tight colocated cases may
// fall back to one lane where the second lane's buffers do not fit.)
TEST_P(EndToEnd, RoundsOnTwoLanesVerifyEveryElement) {
  const Scenario s = ParseScenario(testing::WithSegmentBytes(GetParam()), "<e2e>");
  for (int32_t per_round : {1, 2}) {
    PlannerOptions po;
    po.simulate = false;
    po.per_round = per_round;
    po.round_lanes = true;
    const PlanResult r = MakePlan(s, po);
    ASSERT_TRUE(r.ok()) << r.message;
    testing::ExpectHostRunVerifies(r.plan, fmt::format("{}, {} per round on two lanes", GetParam().name, per_round));
  }
}

// The optimizer offloaded state by state (dest-per-layer with offload: a
// buffer per optimizer state, each moved to host and freed on its own, the
// destination layers allocated in the room they leave): every element verified.
TEST(EndToEndOffload, OptimizerStateByStateVerifiesEveryElement) {
  const E2eCase& c = testing::kE2eCases[2];
  ASSERT_NE(std::string(c.yaml).find("offload: all"), std::string::npos);
  const Scenario s = ParseScenario(testing::WithSegmentBytes(c), "<e2e>");
  PlannerOptions po;
  po.simulate = false;
  po.offload_fraction = 1.0;
  po.destination_per_layer = true;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  int states = 0, offloads = 0;
  for (const PlanBuffer& b : r.plan.buffers) states += b.role == BufferRole::kOptimizer ? 1 : 0;
  for (const Op& op : r.plan.ops) offloads += op.kind == OpKind::kOffload ? 1 : 0;
  EXPECT_GT(states, 0);
  EXPECT_EQ(states % 3, 0);  // three per slot at 12 bytes per parameter
  EXPECT_EQ(offloads, states);
  testing::ExpectHostRunVerifies(r.plan, c.name);
}

// tiny-llama on two DGX H200 nodes (so relays and NIC ports matter), the
// layouts and segment size as given (empty: the scenario's default).
Scenario TinyLlamaTwoNodes(const std::string& name, const std::string& source, const std::string& destination,
                           const std::string& segment = "") {
  return ParseScenario(fmt::format("name: {}\nmodel: tiny-llama\ncluster: {{preset: dgx-h200, nodes: 2}}\nsource: {}\n"
                                   "destination: {}\n{}",
                                   name, source, destination,
                                   segment.empty() ? "" : fmt::format("plan: {{segment_bytes: {}}}\n", segment)),
                       "<e2e>");
}

// `s` planned by the port model (no simulation) with `per_round` segments
// per round and relays and round lanes forced as given (unset: searched).
PlanResult PlanByPortModel(const Scenario& s, int32_t per_round, std::optional<bool> relays,
                           std::optional<bool> send_relays, std::optional<bool> round_lanes = std::nullopt) {
  PlannerOptions po;
  po.simulate = false;
  po.per_round = per_round;
  po.relays = relays;
  po.send_relays = send_relays;
  po.round_lanes = round_lanes;
  return MakePlan(s, po);
}

// Relays over NVLink: four destination replicas in one NVLink domain need
// the same bytes, which sit in another domain; each box crosses the network
// once, into one of them, and is sent on over NVLink to the other three
// (from that GPU's destination buffer, after its receive). Every element of
// every replica verified, with one and two segments per round and a round
// per phase (where the relays' packs run ahead of the unpacks not feeding them).
// Replica blocks (planner/replica_blocks.h): tiny-llama TP2 x PP2 x DP8 ->
// TP1 x PP2 x DP16 on 4 nodes, colocated, planned as two blocks of 16 GPUs
// (nodes 0 and 2, 1 and 3) and replicated: the whole runs, every element of
// its 32 GPUs verified.
TEST(EndToEndReplicaBlocks, ReplicatedPlanVerifiesEveryElement) {
  const Scenario s = ParseScenario(R"(
name: e2e-replica-blocks
model: tiny-llama
cluster: {preset: dgx-h200, nodes: 4}
source: {tp: 2, pp: 2, dp: 8, gpus: all}
destination: {tp: 1, pp: 2, dp: 16, gpus: all}
plan: {segment_bytes: 128KiB}
)",
                                   "<e2e>");
  PlannerOptions po;
  po.simulate = false;
  po.replica_blocks = 2;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.stats.replica_blocks, 2);
  testing::ExpectHostRunVerifies(r.plan, "replica blocks");
}

TEST(EndToEndRelays, RelayedPlanVerifiesEveryElement) {
  const Scenario s = TinyLlamaTwoNodes("e2e-relay",
                                       "{tp: 2, gpus: \"0-1\"}", "{tp: 2, dp: 2, gpus: \"8-11\"}", "256KiB");
  for (int32_t per_round : {1, 2, kPerRoundAll}) {
    const PlanResult r = PlanByPortModel(s, per_round, true, false);  // receive-side relays alone
    ASSERT_TRUE(r.ok()) << r.message;
    // tp2 -> tp2 dp2: every box goes to two GPUs of the domain, so half of
    // the destination's bytes are relayed (norms replicated over TP: more).
    EXPECT_GE(2 * r.stats.relayed_bytes, r.plan.summary.bytes_moved.network);
    EXPECT_EQ(r.plan.summary.bytes_moved.nvlink, r.stats.relayed_bytes);
    testing::ExpectHostRunVerifies(r.plan, "relayed");
  }
}

// NVLink and network segments coloured apart (planner/segments.h): a GPU
// sends per_round segments over each class in one round, and its staging
// slots hold a round's worth of both. tiny-llama TP2 x PP2 -> TP4 colocated
// on GPUs 0-1 and 8-9 of two nodes: each GPU sends to its node mate over
// NVLink and to the other node over the network in the same phase. Every
// element verified, with one and two segments per round.
TEST(EndToEndRounds, LinkClassesSharingRoundsVerifyEveryElement) {
  const Scenario s = TinyLlamaTwoNodes("e2e-link-classes",
                                       "{tp: 2, pp: 2, gpus: \"0-1,8-9\"}", "{tp: 4, gpus: \"0-1,8-9\"}", "256KiB");
  for (int32_t per_round : {1, 2}) {
    const PlanResult r = PlanByPortModel(s, per_round, false, false);
    ASSERT_TRUE(r.ok()) << r.message;
    std::map<std::pair<int32_t, int32_t>, std::set<bool>> classes;  // (GPU, group) -> over the network?
    for (const Op& op : r.plan.ops)
      if (op.kind == OpKind::kSend)
        classes[{op.gpu, op.group}].insert(s.cluster.Between(op.gpu, op.peer) == LinkClass::kNetwork);
    EXPECT_TRUE(std::any_of(classes.begin(), classes.end(), [](const auto& c) { return c.second.size() == 2; }))
        << "a GPU sends over NVLink and the network in one group";
    testing::ExpectHostRunVerifies(r.plan, "link classes");
  }
}

// Relay waves (planner/comm_lanes.h): the network phase cut into waves by
// bytes, the relays cut where that phase's receives end, on a communicator
// lane of their own, each wave a group per GPU. Every element of every
// replica verified, with every contiguous piece sent in place (threshold 0:
// the cuts fall inside parts) and with the planner's threshold (staged).
TEST(EndToEndRelays, RelayWavesVerifyEveryElement) {
  const Scenario s = TinyLlamaTwoNodes("e2e-relay-waves",
                                       "{tp: 2, gpus: \"0-1\"}", "{tp: 2, dp: 2, gpus: \"8-11\"}", "1MiB");
  for (int64_t direct : {int64_t{0}, int64_t{-1}})
    for (int32_t waves : {1, 2, 3}) {
      PlannerOptions po;
      po.simulate = false;
      po.per_round = kPerRoundAll;
      po.relays = true;
      po.send_relays = false;
      po.direct_min_bytes = direct;
      po.relay_waves = waves;
      const PlanResult r = MakePlan(s, po);
      ASSERT_TRUE(r.ok()) << r.message;
      // Per GPU that relays: one group per wave on the relay lane.
      std::map<int32_t, std::set<int32_t>> relay_groups;
      for (const Op& op : r.plan.ops)
        if (op.kind == OpKind::kSend && r.plan.stream_names[op.stream] == kCommLane2StreamName)
          relay_groups[op.gpu].insert(op.group);
      if (waves > 1) {
        ASSERT_FALSE(relay_groups.empty());
        for (const auto& [g, v] : relay_groups) EXPECT_LE(static_cast<int32_t>(v.size()), waves) << "GPU " << g;
      }
      testing::ExpectHostRunVerifies(r.plan, fmt::format("relay waves {} threshold {}", waves, direct));
    }
}

// Schedule::relays_in_place (the search tries it on large plans whose relay
// phase is long): relays and the network receives feeding them in place,
// every other piece packed (threshold "never"), without relay waves, with
// two even ones, with two whose first carries a third of each segment
// (PlanPolicy::relay_first_wave), and with two and three whose segments go
// whole into one (PlanPolicy::relay_waves_by_segment); every element
// verified on the host backend.
TEST(EndToEndRelays, RelaysInPlaceVerifyEveryElement) {
  for (const char* destination : {"{tp: 2, dp: 2, gpus: \"8-11\"}", "{tp: 4, gpus: \"8-11\"}"}) {
    const Scenario s = TinyLlamaTwoNodes("e2e-relays-in-place", "{tp: 2, gpus: \"0-1\"}", destination);
    Problem prob(s);
    ASSERT_GT(prob.AddRelays(), 0) << destination;
    const Schedule sc = MakeSchedule(prob, int64_t{1} << 20, std::numeric_limits<int64_t>::max(), kPerRoundAll, true);
    ASSERT_TRUE(sc.relays_in_place);
    for (const auto& [waves, first, by_segment] : {std::tuple{1, 0.0, false}, std::tuple{2, 0.0, false},
                                                   std::tuple{2, 1.0 / 3, false}, std::tuple{2, 0.0, true},
                                                   std::tuple{3, 0.0, true}}) {
      PlanPolicy policy;
      policy.relay_waves = waves;
      policy.relay_first_wave = first;
      policy.relay_waves_by_segment = by_segment;
      EmittedPlan e = EmitPlan(prob, sc, policy);
      ASSERT_TRUE(e.fits) << destination;
      e.plan.summary.bytes_moved = CountBytesMoved(e.plan);  // the search's summary, which this test skips
      testing::ExpectHostRunVerifies(e.plan, fmt::format("relays in place, {} waves, first {}, by segment {}, {}",
                                                         waves, first, by_segment, destination));
    }
  }
}

// Phase chunks (PlanPolicy::phase_chunks, forced through PlannerOptions):
// a round per phase's last phase before the relay phase cut into 2, 3 and
// 4 chunks alternating over the two lanes, with relays and without, staged
// and in place, with the relay phase after chunk 0 too (forced; applied
// where every feed is in chunk 0); each GPU's phase transfers then span
// several groups, and every element is verified on the host backend.
TEST(EndToEndRelays, PhaseChunksVerifyEveryElement) {
  for (const auto& [destination, relays] : {std::pair{"{tp: 2, dp: 2, gpus: \"8-11\"}", true},
                                            std::pair{"{tp: 4, gpus: \"8-11\"}", false}}) {
    const Scenario s = TinyLlamaTwoNodes("e2e-phase-chunks", "{tp: 2, gpus: \"0-1\"}", destination, "64KiB");
    for (int64_t direct : {int64_t{0}, int64_t{-1}})
      for (const auto& [chunks, early] : {std::pair{2, false}, std::pair{3, false}, std::pair{4, false},
                                          std::pair{3, true}, std::pair{4, true}}) {
        PlannerOptions po;
        po.simulate = false;
        po.per_round = kPerRoundAll;
        po.relays = relays;
        po.send_relays = false;
        po.relay_waves = 1;
        po.direct_min_bytes = direct;
        po.phase_chunks = chunks;
        po.early_relay_phase = early;
        const PlanResult r = MakePlan(s, po);
        ASSERT_TRUE(r.ok()) << r.message;
        std::map<int32_t, std::set<int32_t>> groups;  // per GPU: its send / recv groups
        for (const Op& op : r.plan.ops)
          if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) groups[op.gpu].insert(op.group);
        size_t most = 0;
        for (const auto& [g, v] : groups) most = std::max(most, v.size());
        EXPECT_GE(most, static_cast<size_t>(chunks)) << destination << ": the phase is not cut into chunks";
        testing::ExpectHostRunVerifies(r.plan, fmt::format("{} phase chunks, early relays {}, threshold {}, {}", chunks,
                                                           early, direct, destination));
      }
  }
  // The relay phase after chunk 0 where it applies: TP2 -> TP4, whose few relay feeds fit in chunk 0.
  const Scenario s = TinyLlamaTwoNodes("e2e-early-relays", "{tp: 2, gpus: \"0-1\"}", "{tp: 4, gpus: \"8-11\"}");
  Problem prob(s);
  ASSERT_GT(prob.AddRelays(), 0);
  int32_t applied = 0, spread = 0;
  for (int64_t direct : {int64_t{0}, std::numeric_limits<int64_t>::max()}) {
    const Schedule sc = MakeSchedule(prob, int64_t{64} << 10, direct, kPerRoundAll);
    // The feeds in chunk 0, or spread over all chunks but the last two (PlanPolicy::feed_chunks).
    for (const auto& [chunks, feed_chunks] :
         {std::pair{3, 1}, std::pair{4, 1}, std::pair{6, 1}, std::pair{4, 2}, std::pair{6, 4}}) {
      PlanPolicy policy;
      policy.phase_chunks = chunks;
      policy.early_relay_phase = true;
      policy.feed_chunks = feed_chunks;
      if (!EarlyRelayPhase(sc, policy)) continue;
      ++applied;
      spread += feed_chunks > 1 ? 1 : 0;
      EmittedPlan e = EmitPlan(prob, sc, policy);
      ASSERT_TRUE(e.fits);
      e.plan.summary.bytes_moved = CountBytesMoved(e.plan);  // the search's summary, which this test skips
      testing::ExpectHostRunVerifies(e.plan, fmt::format("early relays, {} chunks, feeds in {}, threshold {}", chunks,
                                                         feed_chunks, direct));
    }
  }
  EXPECT_GE(applied, 5);
  EXPECT_GE(spread, 2);
}

// Feeds received in place and staged (thresholds between "all in place" and
// "none"), on two lanes: relays of bytes that land in place on lane 1 go on
// lane 1 (comm_lanes.h RelaysAfterInPlaceFeeds), the others on lane 0 right
// after lane 0's network group; with phase chunks and the relay phase after
// chunk 0, feeds received in place go in chunk 0 as staged ones do. Every
// element of every replica verified on the host backend.
TEST(EndToEndRelays, FeedsInPlaceOnBothLanesVerifyEveryElement) {
  const Scenario s =
      TinyLlamaTwoNodes("e2e-feeds-in-place", "{tp: 2, gpus: \"0-1\"}", "{tp: 2, dp: 2, gpus: \"8-11\"}");
  Problem prob(s);
  ASSERT_GT(prob.AddRelays(), 0);
  int32_t both_lanes = 0;
  for (const int64_t direct : {int64_t{0}, int64_t{4} << 10, int64_t{16} << 10}) {
    const Schedule sc = MakeSchedule(prob, int64_t{64} << 10, direct, kPerRoundAll);
    ASSERT_GT(sc.relay_rounds, 0);
    for (const int32_t chunks : {1, 3, 4}) {
      PlanPolicy policy;
      policy.phase_chunks = chunks;
      policy.early_relay_phase = chunks > 1;
      if (chunks > 1 && !EarlyRelayPhase(sc, policy)) continue;
      EmittedPlan e = EmitPlan(prob, sc, policy);
      ASSERT_TRUE(e.fits && e.comm_lanes);
      std::set<int32_t> relay_streams;
      for (const Op& op : e.plan.ops)
        if (op.kind == OpKind::kSend && op.segment >= 0 && sc.segments[op.segment].relay)
          relay_streams.insert(op.stream);
      both_lanes += chunks == 1 && relay_streams.size() == 2 ? 1 : 0;
      e.plan.summary.bytes_moved = CountBytesMoved(e.plan);  // the search's summary, which this test skips
      testing::ExpectHostRunVerifies(e.plan, fmt::format("feeds in place, threshold {}, {} chunks", direct, chunks));
    }
  }
  EXPECT_GT(both_lanes, 0) << "no plan had relays on both lanes";
}

// Sender-side relays (Problem::AddSendRelays): one GPU of node 0 holds
// every weight that node 1's eight GPUs need, so its NIC would carry them
// all; fragments go first over NVLink to its node peers (into staging
// there), which send them on over their own NICs. Every element of every
// destination GPU verified on the host backend, with one and two segments
// per round and a round per phase, with receive-side relays too (TP2 DP4).
TEST(EndToEndRelays, SenderRelayedPlanVerifiesEveryElement) {
  for (const auto& [destination, relays] : {std::pair{"{tp: 8, gpus: \"8-15\"}", false},
                                            std::pair{"{tp: 2, dp: 4, gpus: \"8-15\"}", true}}) {
    const Scenario s = TinyLlamaTwoNodes("e2e-send-relay", "{tp: 1, gpus: \"0\"}", destination, "256KiB");
    for (int32_t per_round : {1, 2, kPerRoundAll}) {
      const PlanResult r = PlanByPortModel(s, per_round, relays, true);
      ASSERT_TRUE(r.ok()) << r.message;
      // Rounds on two lanes too (first hops on their second hop's lane).
      if (per_round != kPerRoundAll) {
        const PlanResult two = PlanByPortModel(s, per_round, relays, true, true);
        ASSERT_TRUE(two.ok()) << two.message;
        EXPECT_TRUE(two.stats.round_lanes) << destination;
        EXPECT_GT(two.stats.send_relayed_bytes, 0) << destination;
        testing::ExpectHostRunVerifies(two.plan, fmt::format("sender-relayed, {} per round on two lanes", per_round));
      }
      EXPECT_EQ(r.stats.relayed_bytes > 0, relays) << destination;
      // Node 0's mean egress is an eighth: about 7/8 of the bytes go through a peer.
      EXPECT_GT(8 * r.stats.send_relayed_bytes, 6 * r.plan.summary.bytes_moved.network) << destination;
      EXPECT_EQ(r.plan.summary.bytes_moved.nvlink, r.stats.send_relayed_bytes + r.stats.relayed_bytes) << destination;
      testing::ExpectHostRunVerifies(r.plan, "sender-relayed");
    }
  }
}

// Sender relays' first hops moved into the phase chunks (comm_lanes.h
// PhaseChunks: those of chunk k's second hops in chunk k - 2's group, those
// of chunk 1's beside chunk 0): one holder (GPU 0) -> TP8 and TP2 x DP4 (with
// receive-side relays) on node 1, a round per phase in 3, 4 and 6 chunks,
// staged and in place. Every element verified on the host backend.
TEST(EndToEndRelays, FirstHopsInTheChunksVerifyEveryElement) {
  int32_t moved = 0;
  for (const auto& [destination, relays] : {std::pair{"{tp: 8, gpus: \"8-15\"}", false},
                                            std::pair{"{tp: 2, dp: 4, gpus: \"8-15\"}", true}}) {
    const Scenario s = TinyLlamaTwoNodes("e2e-first-hops-in-chunks", "{tp: 1, gpus: \"0\"}", destination);
    Problem prob(s);
    if (relays) {
      ASSERT_GT(prob.AddRelays(), 0);
    }
    ASSERT_GT(prob.AddSendRelays(), 0);
    for (int64_t direct : {int64_t{0}, std::numeric_limits<int64_t>::max()}) {
      const Schedule sc = MakeSchedule(prob, int64_t{64} << 10, direct, kPerRoundAll);
      ASSERT_EQ(sc.pre_rounds, 1) << destination;
      for (int32_t chunks : {3, 4, 6}) {
        std::vector<uint8_t> lanes = CommLanes(sc, s.cluster.Gpus());
        const std::vector<int8_t> chunk = PhaseChunks(sc, s.cluster, chunks, lanes);
        for (size_t i = 0; i < chunk.size(); ++i) moved += sc.segments[i].round < sc.pre_rounds && chunk[i] >= 0;
        PlanPolicy policy;
        policy.phase_chunks = chunks;
        EmittedPlan e = EmitPlan(prob, sc, policy);
        ASSERT_TRUE(e.fits && e.comm_lanes) << destination;
        e.plan.summary.bytes_moved = CountBytesMoved(e.plan);  // the search's summary, which this test skips
        testing::ExpectHostRunVerifies(e.plan, fmt::format("first hops in {} chunks, threshold {}, {}", chunks,
                                                           direct, destination));
      }
    }
  }
  EXPECT_GT(moved, 0) << "no first hop went into a chunk";
}

// Receiver-side NIC relays (Problem::AddRecvRelays): GPU 8 alone needs
// every weight, which sits on node 0 (TP2 x DP4), so its NIC would take them all;
// fragments go instead over node 1's other NICs (into staging on GPUs
// 9-15) and on to GPU 8 over NVLink in the relay phase. Every element
// verified on the host backend, with one and two segments per round and a
// round per phase.
TEST(EndToEndRelays, NicRelayedPlanVerifiesEveryElement) {
  const Scenario s = TinyLlamaTwoNodes("e2e-nic-relay",
                                       "{tp: 2, dp: 4, gpus: \"0-7\"}", "{tp: 1, gpus: \"8\"}", "256KiB");
  for (int32_t per_round : {1, 2, kPerRoundAll}) {
    const PlanResult r = PlanByPortModel(s, per_round, false, true);
    ASSERT_TRUE(r.ok()) << r.message;
    // Node 1's mean ingress is an eighth: about 7/8 of the bytes go through a peer.
    EXPECT_GT(8 * r.stats.recv_relayed_bytes, 6 * r.plan.summary.bytes_moved.network);
    EXPECT_EQ(r.plan.summary.bytes_moved.nvlink, r.stats.recv_relayed_bytes + r.stats.send_relayed_bytes);
    testing::ExpectHostRunVerifies(r.plan, "NIC-relayed");
    if (per_round == kPerRoundAll) continue;
    // Rounds on two lanes too (the relay peers' receive buffers allocated on their round's lane).
    const PlanResult two = PlanByPortModel(s, per_round, false, true, true);
    ASSERT_TRUE(two.ok()) << two.message;
    EXPECT_TRUE(two.stats.round_lanes);
    EXPECT_GT(two.stats.recv_relayed_bytes, 0);
    testing::ExpectHostRunVerifies(two.plan, fmt::format("NIC-relayed, {} per round on two lanes", per_round));
  }
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, EndToEnd, ::testing::ValuesIn(testing::kE2eCases), testing::E2eCaseName);

}  // namespace
}  // namespace reshard
