// Relayed reads: a relay sends on bytes its GPU received, so every op that
// reads them for a relay (the pack of a relayed segment, or its send where it
// goes in place) must run after every op that wrote them there (a receive in
// place, an unpack, a local copy). Checked on simulated op times for plans
// whose feeds land in place and staged, on one lane and two, with phase
// chunks and the relay phase after chunk 0 (PlanPolicy::early_relay_phase):
// there a feed received in place used to sit in a later chunk than the relay
// phase, which then forwarded bytes before they came (grid deepseek-v3
// TP8xPP4xEP32 -> TP16xDP8 EP128 on 128 H200: packs at 66 ms, their bytes in
// at 122 ms). Also: relays of bytes received in place on lane 1 go on lane 1
// (comm_lanes.h RelaysAfterInPlaceFeeds). Last: AddRelays' groups where a
// rank's fragments do not come in box order.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/layout.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/comm_lanes.h"
#include "planner/emitter.h"
#include "planner/problem.h"
#include "planner/search_candidates.h"
#include "planner/segments.h"
#include "planner/transfer_set.h"
#include "sim/simulator.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

// The byte ranges [begin, end) a region touches, one per row.
std::vector<std::pair<int64_t, int64_t>> Rows(const Region& r) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t q = 0; q < r.planes; ++q)
    for (int64_t i = 0; i < r.rows; ++i) {
      const int64_t a = r.offset_bytes + q * r.plane_stride_bytes + i * r.row_stride_bytes;
      out.emplace_back(a, a + r.row_bytes);
    }
  return out;
}

bool Meet(const Region& a, const Region& b) {
  if (a.buffer != b.buffer) return false;
  for (const auto& [a0, a1] : Rows(a))
    for (const auto& [b0, b1] : Rows(b))
      if (a0 < b1 && b0 < a1) return true;
  return false;
}

struct Checked {
  int32_t reads = 0;       // relayed reads checked
  int32_t early_reads = 0;  // of which read before every write of the phase before ended
};

// Every relayed read (segment `relay`) of a destination buffer starts after each op that wrote bytes it reads has
// ended, in the simulation of `plan`.
Checked ExpectRelayedReadsAfterTheirWrites(const Plan& plan, const Schedule& sc, const std::string& what) {
  const Prediction pr = Simulate(plan, SimOptions{});
  std::vector<bool> destination(plan.buffers.size(), false);
  for (const PlanBuffer& b : plan.buffers) destination[b.id] = b.role == BufferRole::kDestinationWeights;
  // Writes into destination buffers: receives in place, copies (unpacks, local copies).
  std::vector<std::pair<int32_t, Region>> writes;
  int64_t last_write_end = 0;
  for (const Op& op : plan.ops) {
    if (op.kind == OpKind::kRecv && destination[op.region.buffer]) writes.emplace_back(op.id, op.region);
    if (op.kind == OpKind::kCopy)
      for (const CopyPair& c : op.copies)
        if (destination[c.dst.buffer]) writes.emplace_back(op.id, c.dst);
  }
  for (const auto& [id, r] : writes) last_write_end = std::max(last_write_end, pr.op_end_ns[id]);
  Checked n;
  for (const Op& op : plan.ops) {
    if (op.segment < 0 || !sc.segments[op.segment].relay) continue;
    std::vector<Region> reads;
    if (op.kind == OpKind::kCopy)
      for (const CopyPair& c : op.copies)
        if (destination[c.src.buffer]) reads.push_back(c.src);
    if (op.kind == OpKind::kSend && destination[op.region.buffer]) reads.push_back(op.region);
    if (reads.empty()) continue;
    ++n.reads;
    if (pr.op_start_ns[op.id] < last_write_end) ++n.early_reads;
    for (const Region& r : reads)
      for (const auto& [id, w] : writes) {
        if (id == op.id || !Meet(r, w)) continue;
        EXPECT_LE(pr.op_end_ns[id], pr.op_start_ns[op.id]) << what << ": op " << op.id << " (" << op.label
                                                           << ") reads bytes op " << id << " ("
                                                           << plan.ops[id].label << ") writes";
      }
  }
  return n;
}

int32_t FeedsInPlace(const Schedule& sc) {
  return static_cast<int32_t>(std::count_if(sc.segments.begin(), sc.segments.end(),
                                            [](const Segment& g) { return g.feeds_in_place; }));
}

// Feeds received in place and staged (thresholds between "everything in place" and "nothing"), on two lanes
// without chunks and with the relay phase after chunk 0 (or after the feed chunks), then relays in place, relay
// waves and rounds: no relayed read before its bytes land; and some relays start before the other writes end
// (the check is not trivially met by a relay phase after everything).
TEST(RelayReads, EveryRelayedReadStartsAfterTheBytesItReadsLand) {
  int32_t in_place_cases = 0, early_in_place = 0, early_reads = 0;
  for (const Scenario& s : {planner_testing::TwoNodeRelayScenario(), planner_testing::Tp2ToTp4RelayScenario()}) {
    Problem prob(s);
    ASSERT_GT(prob.AddRelays(), 0) << s.name;
    for (const int64_t segment : {int64_t{64} << 10, int64_t{1} << 30})
      for (const int64_t direct : {int64_t{0}, int64_t{4} << 10, int64_t{16} << 10, int64_t{64} << 10,
                                   std::numeric_limits<int64_t>::max()}) {
        const Schedule sc = MakeSchedule(prob, segment, direct, kPerRoundAll);
        if (sc.relay_rounds == 0) continue;
        const bool in_place = FeedsInPlace(sc) > 0;
        in_place_cases += in_place ? 1 : 0;
        for (const auto& [chunks, feed_chunks] :
             {std::pair{1, 1}, std::pair{3, 1}, std::pair{4, 1}, std::pair{6, 1}, std::pair{6, 4}}) {
          PlanPolicy policy;
          policy.phase_chunks = chunks;
          policy.early_relay_phase = chunks > 1;
          policy.feed_chunks = feed_chunks;
          if (chunks > 1 && !EarlyRelayPhase(sc, policy)) continue;
          const std::string what = fmt::format("{} segment {} threshold {} chunks {} feeds in {}", s.name, segment,
                                               direct, chunks, feed_chunks);
          const EmittedPlan e = EmitPlan(prob, sc, policy);
          ASSERT_TRUE(e.fits) << what;
          const VerifyResult v = Verify(e.plan);
          ASSERT_TRUE(v.ok()) << what << ": " << v.problems.front();
          const Checked n = ExpectRelayedReadsAfterTheirWrites(e.plan, sc, what);
          EXPECT_GT(n.reads, 0) << what;
          early_reads += n.early_reads;
          early_in_place += chunks > 1 && in_place ? 1 : 0;
        }
      }
  }
  // Relays and their feeds in place (Schedule::relays_in_place), relay waves, and rounds (one or two segments per
  // GPU and round, relay rounds after them): the same.
  for (const Scenario& s : {planner_testing::TwoNodeRelayScenario(), planner_testing::Tp2ToTp4RelayScenario()}) {
    Problem prob(s);
    ASSERT_GT(prob.AddRelays(), 0) << s.name;
    for (const int64_t direct : {int64_t{0}, int64_t{16} << 10, std::numeric_limits<int64_t>::max()}) {
      for (const int32_t per_round : {1, 2, kPerRoundAll}) {
        const Schedule sc = MakeSchedule(prob, int64_t{64} << 10, direct, per_round, per_round == kPerRoundAll);
        if (sc.relay_rounds == 0) continue;
        for (const int32_t waves : {1, 2}) {
          if (waves > 1 && per_round != kPerRoundAll) continue;
          PlanPolicy policy;
          policy.relay_waves = waves;
          const std::string what = fmt::format("{} threshold {} per round {} waves {}{}", s.name, direct, per_round,
                                               waves, sc.relays_in_place ? " relays in place" : "");
          const EmittedPlan e = EmitPlan(prob, sc, policy);
          ASSERT_TRUE(e.fits) << what;
          const VerifyResult v = Verify(e.plan);
          ASSERT_TRUE(v.ok()) << what << ": " << v.problems.front();
          EXPECT_GT(ExpectRelayedReadsAfterTheirWrites(e.plan, sc, what).reads, 0) << what;
        }
      }
    }
  }
  EXPECT_GT(in_place_cases, 0) << "no schedule received a feed in place";
  EXPECT_GT(early_in_place, 0) << "no early relay phase with feeds received in place";
  EXPECT_GT(early_reads, 0) << "no relayed read before the last write of the phase";
}

// Two lanes, no chunks, every piece in place: feeds land in place on both lanes (by sender bytes). A relayed segment
// whose parts read a box received in place on lane 1 goes on lane 1, the others stay on lane 0; the relayed sends
// run on their segment's lane's stream.
TEST(RelayReads, RelaysOfBytesReceivedInPlaceOnLaneOneGoOnLaneOne) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  Problem prob(s);
  ASSERT_GT(prob.AddRelays(), 0);
  const Schedule sc = MakeSchedule(prob, int64_t{64} << 10, 0, kPerRoundAll);
  ASSERT_GT(sc.relay_rounds, 0);
  ASSERT_GT(FeedsInPlace(sc), 0);
  std::vector<uint8_t> lanes = CommLanes(sc, s.cluster.Gpus());
  ASSERT_EQ(lanes.size(), sc.segments.size());
  const std::vector<uint8_t> before = lanes;
  RelaysAfterInPlaceFeeds(prob, sc, lanes);
  // By hand: the (rank, piece, box) each lane-1 in-place feed wrote, and which relayed parts read one of them.
  const int32_t relays_at = sc.rounds - sc.relay_rounds;
  int32_t moved = 0, kept = 0;
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& r = sc.segments[i];
    if (!r.relay) {
      EXPECT_EQ(lanes[i], before[i]) << "segment " << i << " is not relayed: its lane stays";
      continue;
    }
    bool reads_lane_one = false;
    for (int64_t k = r.first_part; k < r.first_part + r.num_parts; ++k) {
      const Part& p = sc.parts[k];
      for (size_t j = 0; j < sc.segments.size() && !reads_lane_one; ++j) {
        const Segment& f = sc.segments[j];
        if (f.round != relays_at - 1 || !f.feeds_in_place || before[j] != 1) continue;
        for (int64_t q = f.first_part; q < f.first_part + f.num_parts; ++q) {
          const Part& fp = sc.parts[q];
          if (fp.dst_rank == p.src_rank && prob.FragmentOf(fp.dst_rank, fp.frag).dst_piece == p.src_piece &&
              Intersect(fp.box, p.box))
            reads_lane_one = true;
        }
      }
    }
    EXPECT_EQ(lanes[i], reads_lane_one || before[i] == 1 ? 1 : 0) << "relayed segment " << i;
    (lanes[i] != before[i] ? moved : kept) += 1;
  }
  EXPECT_GT(moved, 0) << "no relay read a box received in place on lane 1";
  EXPECT_GT(kept, 0) << "every relay read one";
  // Emitted (MakeLaneLayout applies it): each relayed send on its lane's stream, every relayed read after its bytes.
  const EmittedPlan e = EmitPlan(prob, sc, PlanPolicy{});
  ASSERT_TRUE(e.fits && e.comm_lanes);
  constexpr int32_t kLaneStream[2] = {1, 4};  // the comm and comm2 streams (emitter.cc)
  int32_t on_lane_one = 0;
  for (const Op& op : e.plan.ops) {
    if (op.kind != OpKind::kSend || op.segment < 0 || !sc.segments[op.segment].relay) continue;
    on_lane_one += lanes[op.segment];
    EXPECT_EQ(op.stream, kLaneStream[lanes[op.segment]]) << "op " << op.id << " of segment " << op.segment;
  }
  EXPECT_GT(on_lane_one, 0);
  ExpectRelayedReadsAfterTheirWrites(e.plan, sc, "two lanes, in place");
}

// Rounds on two lanes, every piece in place: a relayed send made of parts back
// to back (one op) reads bytes that several receives wrote, some on the other
// lane's stream. Each such receive is among the send's dependencies (the
// parts appended to the first used to wait for nothing: found by
// PlansRaceFree, Verify's byte races), and the plan verifies.
TEST(RelayReads, AnInPlaceRelayOfPartsBackToBackWaitsForTheWritersOfEachPart) {
  const Scenario s = planner_testing::FromYaml(planner_testing::Yaml(
      "tiny-moe", "{preset: dgx-h100, nodes: 2}", "{tp: 2, ep: 4, dp: 4, gpus: \"0-7\"}",
      "{tp: 4, dp: 2, gpus: \"8-15\"}"));
  Problem prob(s);
  ASSERT_GT(prob.AddRelays(), 0);
  const Schedule sc = MakeSchedule(prob, int64_t{64} << 10, 0, 1);
  ASSERT_GT(sc.relay_rounds, 0);
  PlanPolicy policy;
  policy.round_lanes = true;
  const EmittedPlan e = EmitPlan(prob, sc, policy);
  ASSERT_TRUE(e.fits);
  const VerifyResult v = Verify(e.plan);
  ASSERT_TRUE(v.ok()) << v.problems.front();
  std::vector<bool> destination(e.plan.buffers.size(), false);
  for (const PlanBuffer& b : e.plan.buffers) destination[b.id] = b.role == BufferRole::kDestinationWeights;
  int32_t other_lane_writers = 0;
  for (const Op& send : e.plan.ops) {
    if (send.kind != OpKind::kSend || send.segment < 0 || !sc.segments[send.segment].relay ||
        !destination[send.region.buffer])
      continue;
    for (const Op& recv : e.plan.ops) {
      if (recv.kind != OpKind::kRecv || recv.id > send.id || recv.gpu != send.gpu || !Meet(recv.region, send.region))
        continue;
      if (recv.stream == send.stream) continue;  // stream order
      ++other_lane_writers;
      EXPECT_NE(std::find(send.deps.begin(), send.deps.end(), recv.id), send.deps.end())
          << "op " << send.id << " (" << send.label << ") reads bytes op " << recv.id << " (" << recv.label
          << ") wrote on the other lane";
    }
  }
  EXPECT_GT(other_lane_writers, 0) << "no relayed send read bytes received on the other lane";
}

// AddRelays groups the receivers of each box in a domain by merging every
// destination rank's fragments in (tensor, box) order; a rank whose fragments
// come in another order is sorted first. Here they do: two destination ranks
// (GPUs 8 and 9, one NVLink domain on node 1) each hold an 8 x 8 matrix as
// two pieces of columns [0, 4) and [4, 8), so their fragments (rows [0, 4)
// and [4, 8) of each piece, from the two source ranks' row halves on node 0)
// come (0,0), (4,0), (0,4), (4,4) by piece, not by box. Each of the four
// boxes (16 bf16 elements, 32 B) lands once on the domain and is relayed to
// the other GPU over NVLink: 4 x 32 = 128 B relayed, each box fed by the
// GPU of less network ingress so far (ties: GPU 8 first, then the other as
// ingress grows: 8, 9, 8, 9 by bytes).
TEST(RelayGroups, FragmentsOutOfBoxOrderAreGroupedByBox) {
  Scenario s = planner_testing::FromYaml(planner_testing::Yaml(
      "tiny-llama", "{preset: dgx-h200, nodes: 2}", "{tp: 2, gpus: \"0-1\"}", "{tp: 2, gpus: \"8-9\"}"));
  ModelSpec m;
  m.tensors.push_back(TensorSpec{"w", TensorKind::kMlpGate, 0, MakeShape({8, 8})});
  s.model = m;
  const Shape& w = s.model.tensors[0].shape;
  ProblemInputs in;
  in.byte_view = false;
  for (int64_t lo : {0, 4}) {
    Shard sh;
    sh.buffers.push_back(LocalBuffer{"w", 0, 4 * 8});
    sh.pieces.push_back(Piece{0, SliceBox(w, 0, lo, lo + 4), 0, 0, {8, 1, 1}});
    in.src.shards.push_back(sh);
  }
  in.src.rank_shard = {0, 1};
  Shard cols;
  for (int64_t lo : {0, 4}) {
    cols.buffers.push_back(LocalBuffer{lo == 0 ? "w0" : "w1", 0, 8 * 4});
    cols.pieces.push_back(Piece{0, SliceBox(w, 1, lo, lo + 4), static_cast<int32_t>(cols.buffers.size() - 1), 0, {4, 1, 1}});
  }
  in.dst.shards = {cols, cols};
  in.dst.rank_shard = {0, 1};
  in.memory_at_start.resize(static_cast<size_t>(s.cluster.Gpus()));
  for (int32_t g = 0; g < s.cluster.Gpus(); ++g) in.memory_at_start[g].gpu = g;
  Problem prob(s, &in);
  // The fragments do come out of box order (else this test checks nothing new).
  const std::vector<Fragment>& frags = prob.transfer_set.shard_fragments[0];
  ASSERT_EQ(frags.size(), 4u);
  EXPECT_FALSE(std::is_sorted(frags.begin(), frags.end(), [](const Fragment& a, const Fragment& b) {
    return std::tie(a.tensor, a.box) < std::tie(b.tensor, b.box);
  }));
  EXPECT_EQ(prob.AddRelays(), 4 * 16 * 2);
  // Per box: one entry fed over the network, the other relayed from the feeder's GPU.
  std::map<std::pair<int64_t, int64_t>, std::vector<const SourcedFragment*>> by_box;
  for (const SourcedFragment& sf : prob.sourced) {
    const Box& b = prob.FragmentOf(sf.dst_rank, sf.frag).box;
    by_box[{b.lo[0], b.lo[1]}].push_back(&sf);
  }
  ASSERT_EQ(by_box.size(), 4u);
  std::vector<int32_t> feeders;
  for (const auto& [lo, entries] : by_box) {
    ASSERT_EQ(entries.size(), 2u);
    const SourcedFragment* feed = entries[0]->feeds ? entries[0] : entries[1];
    const SourcedFragment* relay = entries[0]->feeds ? entries[1] : entries[0];
    EXPECT_TRUE(feed->feeds && !feed->relay);
    EXPECT_TRUE(relay->relay && !relay->feeds);
    EXPECT_EQ(relay->src_gpu, feed->dst_gpu);
    EXPECT_NE(relay->dst_gpu, feed->dst_gpu);
    EXPECT_LT(feed->src_gpu, 2);
    feeders.push_back(feed->dst_gpu);
  }
  // Both GPUs feed two boxes (the least-ingress choice alternates).
  EXPECT_EQ(std::count(feeders.begin(), feeders.end(), 8), 2);
  EXPECT_EQ(std::count(feeders.begin(), feeders.end(), 9), 2);
}

}  // namespace
}  // namespace reshard
