// Phase chunks (planner/comm_lanes.h PhaseChunks): a round per phase's last
// phase before the relay phase cut into K chunks of whole segments,
// alternating over the two communicator lanes. Properties on a two-node
// relay case cut small (64 KiB segments, everything packed): every segment
// of the phase lands in exactly one chunk and on that chunk's lane, the
// relay feeds in chunk 0, the chunks share each GPU's bytes; the emitted
// plan verifies, runs each lane's groups chunk by chunk, and packs and
// unpacks in chunk order, so a chunk's group waits only for its own packs.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "model/scenario.h"
#include "plan/issue_order.h"
#include "plan/plan.h"
#include "planner/comm_lanes.h"
#include "planner/emitter.h"
#include "planner/problem.h"
#include "planner/segments.h"
#include "sim/simulator.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

struct Chunked {
  Scenario s = planner_testing::Tp2ToTp4RelayScenario();
  Problem p{s};
  Schedule sc;
  Chunked() {
    EXPECT_GT(p.AddRelays(), 0);
    sc = MakeSchedule(p, int64_t{64} << 10, std::numeric_limits<int64_t>::max(), kPerRoundAll);
  }
  int32_t Phase() const { return sc.rounds - sc.relay_rounds - 1; }
};

// A hand-made schedule's segment of one part: `mb` MB from `src` to `dst` in `round`, staged on both sides.
Segment& AddSegment(Schedule& sc, int32_t src, int32_t dst, int64_t mb, int32_t round) {
  Segment g{src, dst, 0, 1, mb << 20, false, false, 0};
  g.round = round;
  sc.segments.push_back(g);
  return sc.segments.back();
}

TEST(PhaseChunks, EachSegmentOfThePhaseGoesWholeInOneChunkOnItsLane) {
  Chunked t;
  ASSERT_EQ(t.sc.relay_rounds, 1);
  const int32_t chunks = 4;
  std::vector<uint8_t> lanes = CommLanes(t.sc, t.s.cluster.Gpus());
  ASSERT_EQ(lanes.size(), t.sc.segments.size());
  const std::vector<int8_t> chunk = PhaseChunks(t.sc, t.s.cluster, chunks, lanes);
  ASSERT_EQ(chunk.size(), t.sc.segments.size());
  std::vector<int64_t> bytes(chunks, 0);
  std::map<int32_t, std::set<int32_t>> chunks_of_sender;
  int32_t feeds = 0;
  for (size_t i = 0; i < t.sc.segments.size(); ++i) {
    const Segment& g = t.sc.segments[i];
    if (g.round != t.Phase() || g.relay) {
      EXPECT_EQ(chunk[i], -1) << "segment " << i << " is not in the chunked phase";
      continue;
    }
    ASSERT_GE(chunk[i], 0) << "segment " << i;
    ASSERT_LT(chunk[i], chunks) << "segment " << i;
    EXPECT_EQ(lanes[i], chunk[i] % 2) << "segment " << i << ": chunk k runs on lane k % 2";
    if (g.feeds) {
      EXPECT_EQ(chunk[i], 0) << "feed segment " << i << ": the relay phase waits for it";
      ++feeds;
    } else {
      chunks_of_sender[g.src_gpu].insert(chunk[i]);
    }
    bytes[chunk[i]] += g.bytes;
  }
  EXPECT_GT(feeds, 0);
  for (int32_t k = 0; k < chunks; ++k) EXPECT_GT(bytes[k], 0) << "chunk " << k << " is empty";
  // Each sender's other segments are spread, not piled into one chunk.
  for (const auto& [gpu, ks] : chunks_of_sender) EXPECT_GT(ks.size(), 1u) << "GPU " << gpu;
}

TEST(PhaseChunks, TheEmitterRunsEachLaneChunkByChunkAndPacksInChunkOrder) {
  Chunked t;
  const int32_t chunks = 4;
  std::vector<uint8_t> lanes = CommLanes(t.sc, t.s.cluster.Gpus());
  const std::vector<int8_t> chunk = PhaseChunks(t.sc, t.s.cluster, chunks, lanes);
  PlanPolicy policy;
  policy.phase_chunks = chunks;
  const EmittedPlan e = EmitPlan(t.p, t.sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  // Per (GPU, stream): the chunks of its phase transfers in plan order, one group per (chunk, GPU).
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> on_stream;
  std::map<std::pair<int32_t, int32_t>, std::set<int32_t>> groups_of_chunk;  // (GPU, chunk) -> groups
  std::map<int32_t, std::vector<int32_t>> packs, unpacks;                   // per GPU: chunks in plan order
  for (const Op& op : e.plan.ops) {
    if (op.segment < 0 || chunk[op.segment] < 0) continue;
    const Segment& g = t.sc.segments[op.segment];
    const int32_t k = chunk[op.segment];
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
      on_stream[{op.gpu, op.stream}].push_back(k);
      groups_of_chunk[{op.gpu, k}].insert(op.group);
      EXPECT_EQ(e.plan.stream_names[op.stream] == kCommLane2StreamName, k % 2 == 1) << "op " << op.id;
    } else if (op.kind == OpKind::kCopy && g.Packs() && op.gpu == g.src_gpu) {
      packs[op.gpu].push_back(k);
    } else if (op.kind == OpKind::kCopy && g.Unpacks() && op.gpu == g.dst_gpu) {
      unpacks[op.gpu].push_back(k);
    }
  }
  int32_t chunked_streams = 0;
  for (const auto& [key, ks] : on_stream) {
    EXPECT_TRUE(std::is_sorted(ks.begin(), ks.end())) << "GPU " << key.first << " stream " << key.second;
    chunked_streams += std::set<int32_t>(ks.begin(), ks.end()).size() > 1;
  }
  EXPECT_GT(chunked_streams, 0) << "no stream carries two chunks";
  for (const auto& [key, gs] : groups_of_chunk) EXPECT_EQ(gs.size(), 1u) << "GPU " << key.first << " chunk " << key.second;
  for (const auto& [gpu, ks] : packs) EXPECT_TRUE(std::is_sorted(ks.begin(), ks.end())) << "packs of GPU " << gpu;
  for (const auto& [gpu, ks] : unpacks) EXPECT_TRUE(std::is_sorted(ks.begin(), ks.end())) << "unpacks of GPU " << gpu;
  // Simulated: a sender's first transfer of the phase starts before its last pack of the phase ends.
  const Prediction pr = Simulate(e.plan, SimOptions{});
  std::map<int32_t, std::pair<int64_t, int64_t>> first_send_last_pack;  // per GPU
  for (size_t i = 0; i < e.plan.ops.size(); ++i) {
    const Op& op = e.plan.ops[i];
    if (op.segment < 0 || chunk[op.segment] < 0 || op.gpu != t.sc.segments[op.segment].src_gpu) continue;
    auto& [first, last] = first_send_last_pack.try_emplace(op.gpu, INT64_MAX, 0).first->second;
    if (op.kind == OpKind::kSend) first = std::min(first, pr.op_start_ns[i]);
    if (op.kind == OpKind::kCopy) last = std::max(last, pr.op_end_ns[i]);
  }
  int32_t pipelined = 0;
  for (const auto& [gpu, fl] : first_send_last_pack) pipelined += fl.first < fl.second;
  EXPECT_GT(pipelined, 0);
}

// Without an early relay phase PhaseChunks puts the feeds in chunk 0 only
// where they fit there on every port (FeedsFitChunkZeroOnEveryPort), not
// only in total: feeds on one NIC made chunk 0 outlast the others (deepseek-v3
// TP1xPP16xEP8 -> TP8xDP16 EP128 on 128 GB200: 81.4 -> 77.9 ms). Two DGX H200
// nodes (one NVLink domain each), a hand-made phase: a feed from GPU 0 to
// GPU 8 and six other network segments, GPU i to GPU 8 + i for i = 2..7 (X
// MB each); K chunks. In seconds at one rate, so in MB:
//   feed 200, X = 1000, K = 4: its NIC 4 * 200 <= 1000 (the busiest): fits;
//   feed 400, X = 1000, K = 4: 4 * 400 > 1000, though in total 1600 <= 6400;
//   feed 400, X = 300,  K = 4: 4 * 400 > 400 (its own NIC is the busiest);
//   feed 400, X = 1000, K = 2: 2 * 400 <= 1000: fits.
TEST(PhaseChunks, FeedsGoFirstWithoutAnEarlyRelayPhaseOnlyWhereEveryPortHasRoom) {
  const Scenario s = planner_testing::Tp2ToTp4RelayScenario();
  const Cluster& c = s.cluster;
  ASSERT_EQ(c.gpus_per_node, 8);
  ASSERT_NE(c.DomainOf(0), c.DomainOf(8));
  auto schedule = [&](int64_t feed_mb, int64_t other_mb, bool gpu0_busy = false) {
    Schedule sc;
    sc.all_in_one_round = true;
    sc.rounds = 2, sc.relay_rounds = 1;
    AddSegment(sc, 0, 8, feed_mb, 0).feeds = true;
    for (int32_t i = 2; i < 8; ++i) AddSegment(sc, i, 8 + i, other_mb, 0);
    if (gpu0_busy) AddSegment(sc, 0, 9, 1000, 0);
    AddSegment(sc, 8, 9, feed_mb, 1).relay = true;  // the relay the feed feeds (NVLink, the relay phase)
    return sc;
  };
  EXPECT_TRUE(FeedsFitChunkZeroOnEveryPort(schedule(200, 1000), c, 4));
  EXPECT_FALSE(FeedsFitChunkZeroOnEveryPort(schedule(400, 1000), c, 4));
  EXPECT_TRUE(FeedsInFirstChunk(schedule(400, 1000), 4));
  EXPECT_FALSE(FeedsFitChunkZeroOnEveryPort(schedule(400, 300), c, 4));
  EXPECT_TRUE(FeedsFitChunkZeroOnEveryPort(schedule(400, 1000), c, 2));
  // GPU 0 also sends 1000 MB to GPU 9 (its NIC: 4 * 400 > 1400). Balanced largest first, that segment takes
  // chunk 0 of GPU 0's NIC and the feed another chunk; with an early relay phase the feed goes in chunk 0.
  const Schedule busy = schedule(400, 1000, true);
  for (bool early : {false, true}) {
    std::vector<uint8_t> lanes(busy.segments.size(), 0);
    const std::vector<int8_t> chunk = PhaseChunks(busy, c, 4, lanes, early);
    ASSERT_EQ(chunk.size(), busy.segments.size());
    EXPECT_EQ(chunk[0] == 0, early) << "the feed in chunk " << int{chunk[0]} << ", early " << early;
    EXPECT_EQ(chunk[7], early ? 1 : 0) << "GPU 0's other segment";
    EXPECT_EQ(chunk.back(), -1) << "the relay is in no chunk";
    for (size_t i = 0; i < chunk.size(); ++i) {
      if (chunk[i] >= 0) {
        EXPECT_EQ(lanes[i], chunk[i] % 2) << "segment " << i;
      }
    }
  }
}

// Ramped chunks (PlanPolicy::chunk_ramp): shares growing by the ramp from
// each end. ChunkShares(6, 1.5): weights 1, 1.5, 2.25, 2.25, 1.5, 1 (sum
// 9.5), so the end chunks hold 1 / 9.5 = 10.5 % each instead of 1 / 6. A
// hand-made phase of 95 segments of 1 MB from GPU 0 to GPU 1 (one port
// pair): balanced whole, each chunk holds within one segment of 95 x its
// share (10, 15, 22.5, 22.5, 15, 10).
TEST(PhaseChunks, RampedChunksAreSmallAtBothEnds) {
  const std::vector<double> even = ChunkShares(4, 1);
  for (double v : even) EXPECT_DOUBLE_EQ(v, 0.25);
  const std::vector<double> share = ChunkShares(6, 1.5);
  ASSERT_EQ(share.size(), 6u);
  EXPECT_NEAR(share[0], 1 / 9.5, 1e-12);
  EXPECT_NEAR(share[1], 1.5 / 9.5, 1e-12);
  EXPECT_NEAR(share[2], 2.25 / 9.5, 1e-12);
  for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(share[k], share[5 - k]) << "chunk " << k;
  EXPECT_NEAR(ChunkShares(7, 2)[3], 8.0 / 22, 1e-12) << "odd K: 1 2 4 8 4 2 1, sum 22";

  const Scenario s = planner_testing::Tp2ToTp4RelayScenario();
  Schedule sc;
  sc.all_in_one_round = true;
  sc.rounds = 1;
  for (int32_t i = 0; i < 95; ++i) AddSegment(sc, 0, 1, 1, 0);
  for (double ramp : {1.0, 1.5}) {
    std::vector<uint8_t> lanes(sc.segments.size(), 0);
    const std::vector<int8_t> chunk = PhaseChunks(sc, s.cluster, 6, lanes, false, ramp);
    std::vector<int32_t> count(6, 0);
    for (size_t i = 0; i < chunk.size(); ++i) {
      ASSERT_GE(chunk[i], 0) << "segment " << i;
      ++count[chunk[i]];
      EXPECT_EQ(lanes[i], chunk[i] % 2) << "segment " << i;
    }
    const std::vector<double> want = ChunkShares(6, ramp);
    for (int32_t k = 0; k < 6; ++k) EXPECT_NEAR(count[k], 95 * want[k], 1.0) << "chunk " << k << ", ramp " << ramp;
  }
}

// Sender relays' first hops (a phase of their own, Schedule::pre_rounds):
// their second hops in chunks 1.., the first hops of chunk 1's beside chunk 0
// on lane 1 (kFirstHopsBesideChunkZero) and those of chunk k >= 2's in chunk
// k - 2 (on chunk k's lane, the group before it there); chunk 0's packs go
// before theirs, so chunk 0 starts while the first hops run instead of after
// them. tiny-llama on GPU 0 of node 0 -> TP8 on node 1
// (planner/send_relay_test.cc's one-holder case): GPU 0 sends 7/8 of the
// model to its node mates first.
TEST(PhaseChunks, SenderRelaysFirstHopsRunBesideChunkZero) {
  const Scenario s = ParseScenario(
      "name: one-holder-tiny\nmodel: tiny-llama\ncluster: {preset: dgx-h200, nodes: 2}\n"
      "source: {tp: 1, gpus: \"0\"}\ndestination: {tp: 8, gpus: \"8-15\"}\n",
      "<test>");
  Problem p(s);
  ASSERT_GT(p.AddSendRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{64} << 10, std::numeric_limits<int64_t>::max(), kPerRoundAll);
  ASSERT_EQ(sc.pre_rounds, 1);
  std::vector<uint8_t> lanes = CommLanes(sc, s.cluster.Gpus());
  const std::vector<int8_t> chunk = PhaseChunks(sc, s.cluster, 4, lanes);
  int32_t first_hops = 0, second_hops = 0, in_chunk0 = 0, beside = 0, moved = 0;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& g = sc.segments[i];
    if (g.round < sc.pre_rounds) {
      ++first_hops;
    } else if (g.hop == 2) {
      ++second_hops;
      ASSERT_GE(chunk[i], 1) << "second hop " << i << " waits for its first";
      ASSERT_GE(g.feed, 0);
      if (chunk[i] == 1) {
        ++beside;
        EXPECT_EQ(chunk[g.feed], kFirstHopsBesideChunkZero) << "first hop " << g.feed;
        EXPECT_EQ(lanes[g.feed], 1) << "first hop " << g.feed;
      } else {
        ++moved;
        EXPECT_EQ(chunk[g.feed], chunk[i] - 2) << "first hop " << g.feed;
        EXPECT_EQ(lanes[g.feed], lanes[i]) << "first hop " << g.feed;
      }
    } else {
      in_chunk0 += chunk[i] == 0;
    }
  }
  ASSERT_GT(first_hops, 0);
  ASSERT_EQ(second_hops, first_hops);
  EXPECT_GT(beside, 0);
  EXPECT_GT(moved, 0);
  ASSERT_GT(in_chunk0, 0) << "nothing left for chunk 0";
  PlanPolicy policy;
  policy.phase_chunks = 4;
  const EmittedPlan e = EmitPlan(p, sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  EXPECT_NO_THROW(ForEachIssueStep(e.plan, [](const IssueStep&) {}));
  // GPU 0 packs chunk 0's segments before the first hops', and its chunk-0 transfers start before its first
  // hops end (simulated).
  int32_t first_pack = -1;
  bool packed = false;
  int64_t chunk0_start = std::numeric_limits<int64_t>::max(), hops_end = 0;
  const Prediction pr = Simulate(e.plan);
  for (const Op& op : e.plan.ops) {
    if (op.gpu != 0 || op.segment < 0) continue;
    const int8_t k = chunk[op.segment];
    if (op.kind == OpKind::kCopy && !packed) first_pack = k, packed = true;
    if (op.kind == OpKind::kSend && k == 0) chunk0_start = std::min(chunk0_start, pr.op_start_ns[op.id]);
    if (op.kind == OpKind::kSend && k == kFirstHopsBesideChunkZero) hops_end = std::max(hops_end, pr.op_end_ns[op.id]);
  }
  EXPECT_EQ(first_pack, 0);
  EXPECT_LT(chunk0_start, hops_end);
  // A moved first hop is sent in its chunk's group (with that chunk's own transfers), each in a group of its lane.
  std::map<int32_t, std::set<int32_t>> chunk_groups;  // GPU 0's chunk -> groups of its own sends there
  for (const Op& op : e.plan.ops)
    if (op.gpu == 0 && op.kind == OpKind::kSend && sc.segments[op.segment].round >= sc.pre_rounds)
      chunk_groups[chunk[op.segment]].insert(op.group);
  int32_t moved_sends = 0;
  for (const Op& op : e.plan.ops) {
    if (op.kind != OpKind::kSend || sc.segments[op.segment].round >= sc.pre_rounds || chunk[op.segment] < 0) continue;
    ++moved_sends;
    EXPECT_EQ(chunk_groups[chunk[op.segment]].count(op.group), 1u) << "first hop " << op.segment;
    EXPECT_EQ(e.plan.stream_names[op.stream] == kCommLane2StreamName, lanes[op.segment] == 1) << "first hop " << op.segment;
  }
  EXPECT_GT(moved_sends, 0);
}

// A second hop that feeds relays goes in chunk 1, where the feeds go first
// (the early relay phase then also waits for chunk 1), not in chunk 0 with
// the other feeds: chunk 0 would wait for the first hops (deepseek-v3
// TP8xPP4xEP32 -> TP16xDP8 EP128 on 128 GB200: 76.9 -> 82.8 ms). A
// hand-made schedule on two DGX H200 nodes: GPU 0 -> GPU 1 (a first hop, 100
// MB) -> GPU 9 (its second hop, a feed), a 100 MB feed GPU 2 -> GPU 10, six
// 1000 MB network segments GPU i -> GPU 8 + i (i = 3..7, and 2 -> 15), and
// the relays. Feeds 200 of 6200 MB: 4 * 200 <= 6200, and every port has
// room (4 * 100 <= 1100, GPU 2's NIC).
TEST(PhaseChunks, ASecondHopFeedingRelaysGoesInChunkOne) {
  const Scenario s = planner_testing::Tp2ToTp4RelayScenario();
  const Cluster& c = s.cluster;
  Schedule sc;
  sc.all_in_one_round = true;
  sc.rounds = 3, sc.relay_rounds = 1, sc.pre_rounds = 1;
  AddSegment(sc, 0, 1, 100, 0).hop = 1;
  Segment& second = AddSegment(sc, 1, 9, 100, 1);
  second.hop = 2, second.feed = 0, second.feeds = true;
  AddSegment(sc, 2, 10, 100, 1).feeds = true;
  for (int32_t i = 3; i < 8; ++i) AddSegment(sc, i, 8 + i, 1000, 1);
  AddSegment(sc, 2, 15, 1000, 1);
  AddSegment(sc, 9, 12, 100, 2).relay = true;
  AddSegment(sc, 10, 13, 100, 2).relay = true;
  ASSERT_TRUE(FeedsInFirstChunk(sc, 4));
  ASSERT_TRUE(FeedsFitChunkZeroOnEveryPort(sc, c, 4));
  for (bool early : {false, true}) {
    std::vector<uint8_t> lanes(sc.segments.size(), 0);
    const std::vector<int8_t> chunk = PhaseChunks(sc, c, 4, lanes, early);
    EXPECT_EQ(chunk[0], kFirstHopsBesideChunkZero);
    EXPECT_EQ(lanes[0], 1);
    EXPECT_EQ(chunk[1], 1) << "the second hop feeding relays";
    EXPECT_EQ(lanes[1], 1);
    EXPECT_EQ(chunk[2], 0) << "the other feed";
    EXPECT_EQ(chunk[sc.segments.size() - 1], -1);
  }
}

// With second hops feeding relays in chunk 1, the early relay phase goes on
// lane 0 after chunk 2 instead of chunk 0 (lane 0 ran nothing while chunk 1
// went on: deepseek-v3 TP8xPP4xEP32 -> TP16xDP8 EP128 on 128 GB200 76.3 ->
// 74.1 ms). qwen3-30b-a3b Megatron TP2xPP2xEP8xDP8 -> vLLM TP4xDP8 EP32 on 4
// DGX H200, colocated: relays, sender relays, and second hops among the
// feeds; 8 chunks. The plan verifies, issues and simulates.
TEST(PhaseChunks, AnEarlyRelayPhaseWaitingForChunkOneFollowsChunkTwo) {
  const Scenario s = planner_testing::FromYaml(planner_testing::Yaml(
      "qwen3-30b-a3b", "{preset: dgx-h200, nodes: 4}", "{engine: megatron, tp: 2, pp: 2, ep: 8, dp: 8}",
      "{engine: vllm, tp: 4, dp: 8, ep: 32}",
      "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache_gib: 10, reserve_gib: 2}\n"));
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  ASSERT_GT(p.AddSendRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{128} << 20, int64_t{64} << 20, kPerRoundAll);
  PlanPolicy policy;
  policy.phase_chunks = 8, policy.early_relay_phase = true;
  ASSERT_TRUE(EarlyRelayPhase(sc, policy));
  std::vector<uint8_t> lanes = CommLanes(sc, s.cluster.Gpus());
  const std::vector<int8_t> chunk = PhaseChunks(sc, s.cluster, 8, lanes, true);
  int32_t fed_late = 0;
  for (size_t i = 0; i < sc.segments.size(); ++i) fed_late += sc.segments[i].feeds && sc.segments[i].hop == 2;
  ASSERT_GT(fed_late, 0);
  const EmittedPlan e = EmitPlan(p, sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  EXPECT_NO_THROW(ForEachIssueStep(e.plan, [](const IssueStep&) {}));
  EXPECT_NO_THROW(Simulate(e.plan));
  // Per GPU, lane 0's transfers in plan order: chunks 0 and 2 (0), the relay phase (1), chunks 4 and 6 (2).
  const int32_t phase = sc.rounds - sc.relay_rounds - 1;
  std::map<int32_t, std::vector<int32_t>> kinds;
  for (const Op& op : e.plan.ops) {
    if ((op.kind != OpKind::kSend && op.kind != OpKind::kRecv) || op.stream != kStreamComm || op.segment < 0) continue;
    const Segment& g = sc.segments[op.segment];
    if (g.round < phase) continue;
    kinds[op.gpu].push_back(g.round > phase ? 1 : chunk[op.segment] <= 2 ? 0 : 2);
  }
  int32_t after_chunk2 = 0;
  for (const auto& [gpu, ks] : kinds) {
    EXPECT_TRUE(std::is_sorted(ks.begin(), ks.end())) << "GPU " << gpu;
    after_chunk2 += std::set<int32_t>(ks.begin(), ks.end()).size() == 3;
  }
  EXPECT_GT(after_chunk2, 0) << "no GPU runs the relay phase between chunks 2 and 4";
}

// PlanPolicy::early_relay_phase: on lane 0 the relay phase comes right after
// chunk 0's group and before chunk 2's; the plan still verifies, and the
// relays start before the phase's last transfer ends.
TEST(PhaseChunks, AnEarlyRelayPhaseRunsBetweenChunkZeroAndTwo) {
  Chunked t;
  PlanPolicy policy;
  policy.phase_chunks = 4;
  policy.early_relay_phase = true;
  ASSERT_TRUE(FeedsInFirstChunk(t.sc, 4));
  ASSERT_TRUE(EarlyRelayPhase(t.sc, policy));
  std::vector<uint8_t> lanes = CommLanes(t.sc, t.s.cluster.Gpus());
  const std::vector<int8_t> chunk = PhaseChunks(t.sc, t.s.cluster, 4, lanes, true);
  const EmittedPlan e = EmitPlan(t.p, t.sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  // Per GPU, lane 0's transfers in plan order: 0 (chunk 0), 1 (relay phase), 2 (chunk 2).
  std::map<int32_t, std::vector<int32_t>> kinds;
  for (const Op& op : e.plan.ops) {
    if ((op.kind != OpKind::kSend && op.kind != OpKind::kRecv) || op.stream != kStreamComm || op.segment < 0) continue;
    const Segment& g = t.sc.segments[op.segment];
    const int32_t k = g.round > t.Phase() ? 1 : chunk[op.segment] == 0 ? 0 : chunk[op.segment] == 2 ? 2 : -1;
    ASSERT_GE(k, 0) << "op " << op.id << " of chunk " << int{chunk[op.segment]} << " on lane 0";
    kinds[op.gpu].push_back(k);
  }
  int32_t between = 0;
  for (const auto& [gpu, ks] : kinds) {
    EXPECT_TRUE(std::is_sorted(ks.begin(), ks.end())) << "GPU " << gpu;
    between += std::set<int32_t>(ks.begin(), ks.end()).size() == 3;
  }
  EXPECT_GT(between, 0) << "no GPU runs the relay phase between two chunks";
  // Without it, the relay phase follows chunk 2 on lane 0.
  policy.early_relay_phase = false;
  const EmittedPlan late = EmitPlan(t.p, t.sc, policy);
  int32_t last_chunk = -1;
  bool relay_seen = false;
  for (const Op& op : late.plan.ops) {
    if (op.kind != OpKind::kSend || op.stream != kStreamComm || op.segment < 0) continue;
    if (t.sc.segments[op.segment].round > t.Phase()) relay_seen = true;
    else EXPECT_FALSE(relay_seen) << "chunk " << int{chunk[op.segment]} << " after the relay phase";
    last_chunk = std::max(last_chunk, int32_t{chunk[op.segment]});
  }
  EXPECT_TRUE(relay_seen);
  EXPECT_EQ(last_chunk, 2);
}

// PlanPolicy::feed_chunks: with the early relay phase, the feeds spread over
// chunks [0, feed_chunks) (balanced as the rest is) instead of all in chunk
// 0, and on lane 0 the relay phase after the turn holding the last of them:
// 6 chunks, feeds in chunks 0-3, the relay phase between chunks 2 and 4 on
// lane 0 (after turn 1), chunk 4 after it. It needs two chunks after the
// feeds' (feed_chunks <= phase_chunks - 2). The plan verifies and issues.
TEST(PhaseChunks, FeedsSpreadOverTheFirstChunksWithTheRelayPhaseAfterThem) {
  Chunked t;
  PlanPolicy policy;
  policy.phase_chunks = 6;
  policy.early_relay_phase = true;
  policy.feed_chunks = 4;
  ASSERT_TRUE(EarlyRelayPhase(t.sc, policy));
  policy.feed_chunks = 5;
  EXPECT_FALSE(EarlyRelayPhase(t.sc, policy)) << "one chunk after the feeds' only";
  policy.feed_chunks = 4;
  std::vector<uint8_t> lanes = CommLanes(t.sc, t.s.cluster.Gpus());
  const std::vector<int8_t> chunk = PhaseChunks(t.sc, t.s.cluster, 6, lanes, true, 1, 4);
  std::set<int32_t> feed_chunks;
  for (size_t i = 0; i < t.sc.segments.size(); ++i) {
    const Segment& g = t.sc.segments[i];
    if (g.round != t.Phase() || g.relay || !g.feeds) continue;
    EXPECT_LT(chunk[i], 4) << "feed " << i;
    feed_chunks.insert(chunk[i]);
  }
  EXPECT_GT(feed_chunks.size(), 1u) << "the feeds are not spread";
  const EmittedPlan e = EmitPlan(t.p, t.sc, policy);
  ASSERT_TRUE(e.fits && e.comm_lanes);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  EXPECT_NO_THROW(ForEachIssueStep(e.plan, [](const IssueStep&) {}));
  // Per GPU, lane 0's transfers in plan order: chunks 0 and 2 (0), the relay phase (1), chunk 4 (2).
  std::map<int32_t, std::vector<int32_t>> kinds;
  for (const Op& op : e.plan.ops) {
    if ((op.kind != OpKind::kSend && op.kind != OpKind::kRecv) || op.stream != kStreamComm || op.segment < 0) continue;
    const int32_t k = t.sc.segments[op.segment].round > t.Phase() ? 1 : chunk[op.segment] < 4 ? 0 : 2;
    kinds[op.gpu].push_back(k);
  }
  int32_t between = 0;
  for (const auto& [gpu, ks] : kinds) {
    EXPECT_TRUE(std::is_sorted(ks.begin(), ks.end())) << "GPU " << gpu;
    between += std::set<int32_t>(ks.begin(), ks.end()).size() == 3;
  }
  EXPECT_GT(between, 0) << "no GPU runs the relay phase between chunks 2 and 4";
}

// An early relay phase comes between the chunks of the phase before it,
// whose later chunks must still be grouped by that phase's components (the
// relay phase's own components once split them: a GPU got two groups in one
// chunk, and the plan could not be issued). Colocated, every GPU sends,
// receives and relays: each plan must verify and be issuable.
TEST(PhaseChunks, AnEarlyRelayPhaseKeepsThePhaseGroupsWhole) {
  const Scenario s = planner_testing::Qwen30ColocatedEp();
  Problem p(s);
  ASSERT_GT(p.AddRelays(), 0);
  const Schedule sc = MakeSchedule(p, int64_t{128} << 20, int64_t{64} << 20, kPerRoundAll);
  int32_t applied = 0;
  for (int32_t chunks : {3, 4}) {
    PlanPolicy policy;
    policy.phase_chunks = chunks;
    policy.early_relay_phase = true;
    if (!EarlyRelayPhase(sc, policy)) continue;
    ++applied;
    const EmittedPlan e = EmitPlan(p, sc, policy);
    ASSERT_TRUE(e.fits && e.comm_lanes);
    const VerifyResult v = Verify(e.plan);
    ASSERT_TRUE(v.ok()) << v.problems.front();
    EXPECT_NO_THROW(ForEachIssueStep(e.plan, [](const IssueStep&) {})) << chunks << " chunks";
    // Per (GPU, stream): each chunk's transfers in one group.
    std::map<std::tuple<int32_t, int32_t, int32_t>, std::set<int32_t>> groups;  // (GPU, stream, round or chunk)
    std::vector<uint8_t> lanes = CommLanes(sc, s.cluster.Gpus());
    const std::vector<int8_t> chunk = PhaseChunks(sc, s.cluster, chunks, lanes, true);  // as the emitter: early
    for (const Op& op : e.plan.ops)
      if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.segment >= 0 && chunk[op.segment] >= 0)
        groups[{op.gpu, op.stream, chunk[op.segment]}].insert(op.group);
    for (const auto& [key, gs] : groups)
      EXPECT_EQ(gs.size(), 1u) << "GPU " << std::get<0>(key) << " chunk " << std::get<2>(key);
  }
  EXPECT_GT(applied, 0);
}

TEST(PhaseChunks, NoneWhereTheScheduleIsNotARoundPerPhase) {
  Chunked t;
  const Schedule rounds = MakeSchedule(t.p, int64_t{64} << 10, std::numeric_limits<int64_t>::max(), 2);
  ASSERT_FALSE(rounds.all_in_one_round);
  std::vector<uint8_t> lanes(rounds.segments.size(), 0);
  const std::vector<int8_t> chunk = PhaseChunks(rounds, t.s.cluster, 4, lanes);
  EXPECT_TRUE(std::all_of(chunk.begin(), chunk.end(), [](int8_t k) { return k == -1; }));
  EXPECT_TRUE(std::all_of(lanes.begin(), lanes.end(), [](uint8_t l) { return l == 0; }));
}

}  // namespace
}  // namespace reshard
