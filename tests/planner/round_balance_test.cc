// Rounds levelled by bytes (planner/round_balance.h) on hand-worked cases and
// random ones, and the colouring order in which a sender's pairs take turns
// (planner/segments.h InterleavePairs).
#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "planner/round_balance.h"
#include "planner/segments.h"

namespace reshard {
namespace {

// Per round, the most bytes one GPU sends or receives in it.
std::vector<int64_t> RoundMaxima(const std::vector<RoundItem>& items, int32_t gpus, int32_t rounds) {
  std::vector<int64_t> load(static_cast<size_t>(2 * gpus) * rounds, 0), most(rounds, 0);
  for (const RoundItem& it : items) {
    for (int32_t port : {it.src, gpus + it.dst}) {
      int64_t& l = load[static_cast<size_t>(port) * rounds + it.round];
      l += it.bytes;
      most[it.round] = std::max(most[it.round], l);
    }
  }
  return most;
}

// Three GPUs, two rounds of up to two segments per GPU and direction:
//   round 0: A 0->1 100 B, B 0->2 100 B   (GPU 0 sends 200: the round's busiest)
//   round 1: C 1->2 150 B, D 2->0 10 B    (GPU 1 sends 150, GPU 2 receives 150)
// A moves to round 1: there GPU 0 sends 0 and GPU 1 receives 0, so 100 after,
// below round 1's 150. B may not (GPU 2 would receive 150 + 100 = 250 > 150),
// nor may C go back (GPU 2 would receive 100 + 150 = 250 in round 0, then at
// 100). Busiest per round: 200 + 150 -> 100 + 150.
TEST(BalanceRoundBytes, MovesASegmentToARoundItDoesNotLengthen) {
  std::vector<RoundItem> items = {{0, 1, 100, 0}, {0, 2, 100, 0}, {1, 2, 150, 1}, {2, 0, 10, 1}};
  EXPECT_EQ(BalanceRoundBytes(items, 3, 2, 2, kRoundBalanceWindow), 1);
  EXPECT_EQ(items[0].round, 1);
  EXPECT_EQ(items[1].round, 0);
  EXPECT_EQ(items[2].round, 1);
  EXPECT_EQ(items[3].round, 1);
  EXPECT_EQ(RoundMaxima(items, 3, 2), (std::vector<int64_t>{100, 150}));
}

// The same, but GPU 0 already sends two segments in round 1 (E 0->1 and F
// 0->2, 5 B each): at two per round A and B have nowhere to go (nor has C:
// round 0 would take 250 > 200); at three A moves (GPU 0 sends 10 + 100 and
// GPU 1 receives 5 + 100 there, below the round's 155).
TEST(BalanceRoundBytes, KeepsTheSegmentsPerRound) {
  const std::vector<RoundItem> given = {{0, 1, 100, 0}, {0, 2, 100, 0}, {1, 2, 150, 1},
                                        {2, 0, 10, 1},  {0, 1, 5, 1},   {0, 2, 5, 1}};
  std::vector<RoundItem> items = given;
  EXPECT_EQ(BalanceRoundBytes(items, 3, 2, 2, kRoundBalanceWindow), 0);
  for (size_t i = 0; i < items.size(); ++i) EXPECT_EQ(items[i].round, given[i].round) << i;
  items = given;
  EXPECT_EQ(BalanceRoundBytes(items, 3, 2, 3, kRoundBalanceWindow), 1);
  EXPECT_EQ(items[0].round, 1);
}

// A segment moves at most `window` rounds away: with rounds 0 and 2 only
// (round 1 empty and level with nothing), a window of 1 lets it reach
// round 1 (where nothing is sent, so 100 > 0 lengthens it: no move), and round
// 2 is out of reach; a window of 2 moves it there.
TEST(BalanceRoundBytes, StaysWithinTheWindow) {
  const std::vector<RoundItem> given = {{0, 1, 100, 0}, {0, 2, 100, 0}, {1, 2, 150, 2}};
  std::vector<RoundItem> items = given;
  EXPECT_EQ(BalanceRoundBytes(items, 3, 3, 2, 1), 0);
  items = given;
  EXPECT_EQ(BalanceRoundBytes(items, 3, 3, 2, 2), 1);
  EXPECT_EQ(items[0].round, 2);
}

// Random rounds: the limit per round holds after, no round's busiest port
// carries more than before, their sum falls or stays, items keep their
// ports and bytes, and the answer does not depend on the run.
TEST(BalanceRoundBytes, RandomRoundsStayWithinTheirLimitsAndGetNoLonger) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int32_t gpus = 2 + static_cast<int32_t>(rng() % 7), rounds = 2 + static_cast<int32_t>(rng() % 9);
    const int32_t per_round = 1 + static_cast<int32_t>(rng() % 4);
    std::vector<int32_t> used(static_cast<size_t>(2 * gpus) * rounds, 0);
    std::vector<RoundItem> items;
    for (int k = 0; k < gpus * rounds * per_round; ++k) {
      const RoundItem it{static_cast<int32_t>(rng() % gpus), static_cast<int32_t>(rng() % gpus),
                         1 + static_cast<int64_t>(rng() % 1000), static_cast<int32_t>(rng() % rounds)};
      int32_t& out = used[static_cast<size_t>(it.src) * rounds + it.round];
      int32_t& in = used[static_cast<size_t>(gpus + it.dst) * rounds + it.round];
      if (out >= per_round || in >= per_round) continue;
      ++out, ++in;
      items.push_back(it);
    }
    const std::vector<RoundItem> given = items;
    const std::vector<int64_t> before = RoundMaxima(items, gpus, rounds);
    const int64_t moves = BalanceRoundBytes(items, gpus, rounds, per_round, 3);
    std::vector<RoundItem> again = given;
    EXPECT_EQ(BalanceRoundBytes(again, gpus, rounds, per_round, 3), moves);
    std::vector<int32_t> count(used.size(), 0);
    for (size_t i = 0; i < items.size(); ++i) {
      EXPECT_EQ(items[i].round, again[i].round);
      EXPECT_EQ(items[i].src, given[i].src);
      EXPECT_EQ(items[i].dst, given[i].dst);
      EXPECT_EQ(items[i].bytes, given[i].bytes);
      ASSERT_GE(items[i].round, 0);
      ASSERT_LT(items[i].round, rounds);
      EXPECT_LE(++count[static_cast<size_t>(items[i].src) * rounds + items[i].round], per_round);
      EXPECT_LE(++count[static_cast<size_t>(gpus + items[i].dst) * rounds + items[i].round], per_round);
    }
    const std::vector<int64_t> after = RoundMaxima(items, gpus, rounds);
    int64_t sum_before = 0, sum_after = 0;
    for (int32_t r = 0; r < rounds; ++r) sum_before += before[r], sum_after += after[r];
    EXPECT_LE(sum_after, sum_before) << "trial " << trial;
  }
}

// A sender's pairs of one priority take turns: segments (priority, sender,
// receiver) 0: (0, 0, 1) 1: (0, 0, 1) 2: (0, 0, 1) 3: (0, 0, 2) 4: (0, 1, 2)
// 5: (0, 1, 2) 6: (5, 0, 1), in that (sorted) order.
TEST(InterleavePairs, PairsTakeTurnsWithinAPriority) {
  std::vector<Segment> segments;
  for (const auto& [priority, src, dst] : std::vector<std::tuple<int32_t, int32_t, int32_t>>{
           {0, 0, 1}, {0, 0, 1}, {0, 0, 1}, {0, 0, 2}, {0, 1, 2}, {0, 1, 2}, {5, 0, 1}}) {
    Segment g{};
    g.priority = priority, g.src_gpu = src, g.dst_gpu = dst;
    segments.push_back(g);
  }
  std::vector<int32_t> order = {0, 1, 2, 3, 4, 5, 6};
  InterleavePairs(order, segments);
  EXPECT_EQ(order, (std::vector<int32_t>{0, 3, 4, 1, 5, 2, 6}));
}

}  // namespace
}  // namespace reshard
