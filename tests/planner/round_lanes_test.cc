// Rounds on two lanes (planner/comm_lanes.h RoundLanes, PlanPolicy::round_lanes):
// round r on communicator lane r % 2, a sender relay's first hop on the lane
// of its second hop. Properties on a two-node sender-relay case cut into
// rounds (llama3-8b on one GPU of node 0 -> TP8 on node 1: its peers on node
// 0 forward most bytes over their own NICs): every segment on its lane; the
// emitted plan verifies and can be issued; on one lane a GPU's transfers of
// round r + 1 never start before its round r ends, on two lanes they do.
#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/scenario.h"
#include "plan/issue_order.h"
#include "plan/plan.h"
#include "planner/comm_lanes.h"
#include "planner/emitter.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/search_candidates.h"
#include "planner/segments.h"
#include "sim/simulator.h"

namespace reshard {
namespace {

constexpr int64_t kSegmentBytes = int64_t{256} << 20;

Scenario OneHolderToNodeOne() {
  return ParseScenario(
      "name: round-lanes\nmodel: llama3-8b\ncluster: {preset: dgx-h200, nodes: 2}\n"
      "source: {tp: 1, gpus: \"0\"}\ndestination: {tp: 8, gpus: \"8-15\"}\n",
      "<test>");
}

struct SenderRelayedRounds {
  Scenario s = OneHolderToNodeOne();
  Problem p{s};
  Schedule sc;
  explicit SenderRelayedRounds(int32_t per_round) {
    EXPECT_GT(p.AddSendRelays(), 0);
    sc = MakeSchedule(p, kSegmentBytes, std::numeric_limits<int64_t>::max(), per_round);
  }
};

TEST(RoundLanes, RoundsAlternateAndFirstHopsRunOnTheirSecondHopsLane) {
  for (int32_t per_round : {1, 2}) {
    SenderRelayedRounds t(per_round);
    ASSERT_GT(t.sc.rounds, 4) << per_round;
    const std::vector<uint8_t> lanes = RoundLanes(t.sc);
    ASSERT_EQ(lanes.size(), t.sc.segments.size());
    int32_t first_hops = 0, on_lane_1 = 0;
    for (size_t i = 0; i < t.sc.segments.size(); ++i) {
      const Segment& g = t.sc.segments[i];
      on_lane_1 += lanes[i];
      if (g.hop == 2) {
        // The first hop it sends on: in the round before, on this segment's lane.
        ASSERT_GE(g.feed, 0) << "segment " << i;
        EXPECT_EQ(lanes[g.feed], lanes[i]) << "second hop " << i << " and its first hop " << g.feed;
        EXPECT_EQ(t.sc.segments[g.feed].round + 1, g.round) << "second hop " << i;
      }
      if (g.hop == 1) {
        ++first_hops;
        continue;
      }
      EXPECT_EQ(lanes[i], g.round % 2) << "segment " << i << " of round " << g.round;
    }
    EXPECT_GT(first_hops, 0);
    EXPECT_GT(on_lane_1, 0);
  }
  // A round per phase has its own split (CommLanes); no rounds, no round lanes.
  SenderRelayedRounds all(kPerRoundAll);
  EXPECT_TRUE(RoundLanes(all.sc).empty());
}

// Per GPU and round: when its first transfer started and its last one ended (simulated).
struct RoundSpan {
  int64_t start_ns = std::numeric_limits<int64_t>::max(), end_ns = 0;
};
std::map<std::pair<int32_t, int32_t>, RoundSpan> RoundSpans(const Plan& plan, const Schedule& sc, const Prediction& p) {
  std::map<std::pair<int32_t, int32_t>, RoundSpan> out;
  for (size_t i = 0; i < plan.ops.size(); ++i) {
    const Op& op = plan.ops[i];
    if ((op.kind != OpKind::kSend && op.kind != OpKind::kRecv) || op.segment < 0) continue;
    RoundSpan& r = out[{op.gpu, sc.segments[op.segment].round}];
    r.start_ns = std::min(r.start_ns, p.op_start_ns[i]);
    r.end_ns = std::max(r.end_ns, p.op_end_ns[i]);
  }
  return out;
}

// Round r + 1 of a GPU overlaps its round r: counted over every GPU and round.
int32_t Overlaps(const std::map<std::pair<int32_t, int32_t>, RoundSpan>& spans) {
  int32_t n = 0;
  for (auto it = spans.begin(); it != spans.end(); ++it) {
    const auto next = std::next(it);
    if (next == spans.end() || next->first.first != it->first.first) continue;
    n += next->second.start_ns < it->second.end_ns;
  }
  return n;
}

TEST(RoundLanes, NextRoundStartsWhileThisOnesSlowestPairRunsOnlyOnTwoLanes) {
  SenderRelayedRounds t(2);
  for (bool two : {false, true}) {
    PlanPolicy policy;
    policy.round_lanes = two;
    EmittedPlan e = EmitPlan(t.p, t.sc, policy);
    ASSERT_TRUE(e.fits);
    EXPECT_EQ(e.comm_lanes, two);
    const VerifyResult v = Verify(e.plan);
    EXPECT_TRUE(v.ok()) << (v.ok() ? "" : v.problems.front());
    EXPECT_NO_THROW(ForEachIssueStep(e.plan, [](const IssueStep&) {}));
    // Odd rounds' transfers (and the first hops their second hops wait for) on the second communicator.
    int32_t second_lane = 0;
    for (const Op& op : e.plan.ops)
      if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.stream != 1) ++second_lane;
    EXPECT_EQ(second_lane > 0, two);
    const Prediction pred = Simulate(e.plan);
    const int32_t overlaps = Overlaps(RoundSpans(e.plan, t.sc, pred));
    if (two) EXPECT_GT(overlaps, 0) << "no GPU's round started before its previous round ended";
    else EXPECT_EQ(overlaps, 0) << "one lane runs a GPU's rounds one after another";
  }
}

// The search keeps rounds on two lanes only where simulated kPerRoundGain
// faster, and never where told not to (PlannerOptions::round_lanes = false);
// forced, every plan in rounds has them.
TEST(RoundLanes, SearchedForcedOrOff) {
  const Scenario s = OneHolderToNodeOne();
  PlannerOptions base;
  base.segment_bytes = kSegmentBytes;
  base.per_round = 2;
  base.relays = false;
  base.send_relays = true;
  PlannerOptions off = base, forced = base;
  off.round_lanes = false;
  forced.round_lanes = true;
  const PlanResult searched = MakePlan(s, base), one = MakePlan(s, off), two = MakePlan(s, forced);
  ASSERT_TRUE(searched.ok() && one.ok() && two.ok());
  EXPECT_FALSE(one.stats.round_lanes);
  EXPECT_TRUE(two.stats.round_lanes);
  const double t1 = one.plan.summary.predicted_time_s, t2 = two.plan.summary.predicted_time_s;
  const bool wins = t2 < t1 * (1 - search_candidates::kPerRoundGain);
  EXPECT_EQ(searched.stats.round_lanes, wins) << fmt::format("one lane {} s, two {} s", t1, t2);
  EXPECT_DOUBLE_EQ(searched.plan.summary.predicted_time_s, wins ? t2 : t1);
}

}  // namespace
}  // namespace reshard
