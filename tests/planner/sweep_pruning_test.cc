// The sweep's pruning against the exhaustive sweep on the smaller built-in
// scenarios: a whole sweep planned and simulated twice per scenario (~25 CPU-s
// in Release, minutes under the sanitizers), so a program of its own with the
// `slow` label (Release pass only).

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "model/scenario.h"
#include "planner/sweep.h"

namespace reshard {
namespace {

// Pruning (sweep.h) against planning and simulating every point, on the
// smaller built-in scenarios (three sizes for tiny-llama, one for the others; the
// default offloads and policies): the same recommendation; every point it
// simulates has the exhaustive sweep's numbers; each pruned point is
// estimated slower than the recommendation; and the rule's assumption holds
// wherever the base point fits: no point is more than prune_tolerance faster
// than its size's base point (no offload, no memory saver). qwen3-30b-a3b
// ep2 -> tp2 is memory-bound: its base point does not fit, a memory saver is
// faster than a point with fewer (dest-per-layer 0.43 ms vs 0.55 ms at
// offload 0.25), no point leaves the margin, and nothing is pruned. Some
// point is pruned elsewhere.
TEST(SweepRun, PrunedKeepsTheExhaustiveRecommendation) {
  int64_t pruned = 0;
  for (const char* name : {"tiny-llama-tp2-to-tp1x2", "llama3-8b-tp2-to-tp1x2", "llama3-8b-tp2-to-tp1x2-offload",
                           "qwen3-30b-a3b-ep2-to-tp2"}) {
    SCOPED_TRACE(name);
    const Scenario s = BuiltinScenario(name);
    SweepGrid g;
    g.segment_bytes = {int64_t{4} << 20, int64_t{64} << 20, int64_t{1} << 30};
    // One size for the slower ones (the qwen3 sweep ~9 CPU-s, llama3-8b ~1 min at three sizes).
    if (!std::string(name).starts_with("tiny")) g.segment_bytes = {int64_t{4} << 20};
    SweepOptions every;
    every.exhaustive = true;
    const SweepResult a = Sweep(s, g, every);
    const SweepResult b = Sweep(s, g, {});
    ASSERT_EQ(a.points.size(), b.points.size());
    EXPECT_EQ(a.recommended, b.recommended);
    const double rec_s = a.recommended ? a.points[*a.recommended].time_s : 0;
    const size_t per_size = a.points.size() / g.segment_bytes.size();  // grid order: size outermost
    for (size_t i = 0; i < a.points.size(); ++i) {
      const SweepPoint &x = a.points[i], &y = b.points[i];
      EXPECT_TRUE(x.simulated);
      EXPECT_LT(x.estimate_s, 0);
      const SweepPoint& base = a.points[i / per_size * per_size];  // offload 0, dest-all-at-once
      if (x.fits && base.fits) {
        EXPECT_GE(x.time_s, base.time_s * (1 - SweepOptions{}.prune_tolerance)) << i;
      }
      if (i % per_size == 0) {
        EXPECT_TRUE(y.simulated) << i;  // base points always are
        EXPECT_LT(y.estimate_s, 0) << i;
      }
      if (y.simulated) {
        EXPECT_EQ(x.fits, y.fits) << i;
        EXPECT_EQ(x.time_s, y.time_s) << i;
        EXPECT_EQ(x.peak_bytes, y.peak_bytes) << i;
      } else {
        ++pruned;
        EXPECT_FALSE(y.fits) << i;
        EXPECT_FALSE(y.pareto) << i;
        EXPECT_GT(y.estimate_s, rec_s) << i;
        EXPECT_GE(y.estimate_s, 0) << i;
      }
    }
  }
  EXPECT_GT(pruned, 0);
}

}  // namespace
}  // namespace reshard
