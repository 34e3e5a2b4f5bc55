// The search's limits on what it tries (planner/search_candidates.h), on
// hand-worked numbers.
#include <cstdint>
#include <utility>

#include <gtest/gtest.h>

#include "planner/search_candidates.h"

namespace reshard {
namespace {

using search_candidates::SmallerSizesCannotFit;

constexpr int64_t kSizeMiB = int64_t{1} << 20;
constexpr int64_t kShortGB = 1'000'000'000;

// A round per phase short by m1 at s1 and m2 at s2 < s1 saves at most (m1 - m2) / (s1 - s2) per byte of size, so
// at most (m1 - m2) * s2 / (s1 - s2) below s2; smaller sizes are skipped where m2 is more than twice that.
TEST(SearchLimits, SmallerSizesAreSkippedOnlyWhereTheirMemoryCannotCoverWhatIsMissing) {
  // llama3-405b on 128 H100: 271.4 GB short at 1 GiB, 67.6 at 64 MiB. At most 203.8 * 64 / 960 = 13.59 GB more to
  // save; 67.6 > 2 * 13.59: skipped.
  EXPECT_TRUE(SmallerSizesCannotFit({1024 * kSizeMiB, 271'400'000'000}, {64 * kSizeMiB, 67'600'000'000}));
  // The same job on 128 H200: 206.8 GB, then 3.0. At most 203.8 * 64 / 960 = 13.59 more: tried (32 MiB fits).
  EXPECT_FALSE(SmallerSizesCannotFit({1024 * kSizeMiB, 206'800'000'000}, {64 * kSizeMiB, 3'000'000'000}));
  // Halving: 5.0 GB short at 64 MiB, 1.6 at 32. At most 3.4 * 32 / 32 = 3.4 more: 1.6 < 6.8, tried.
  EXPECT_FALSE(SmallerSizesCannotFit({64 * kSizeMiB, 5 * kShortGB}, {32 * kSizeMiB, 1'600'000'000}));
  // 10 GB short at 64 MiB, 9 at 32: at most 1 more; 9 > 2: skipped. At exactly twice the most (2 GB at 32, after 3
  // at 64: at most 1 more, 2 = 2 * 1) it is tried: the margin is strict.
  EXPECT_TRUE(SmallerSizesCannotFit({64 * kSizeMiB, 10 * kShortGB}, {32 * kSizeMiB, 9 * kShortGB}));
  EXPECT_FALSE(SmallerSizesCannotFit({64 * kSizeMiB, 3 * kShortGB}, {32 * kSizeMiB, 2 * kShortGB}));
  // A smaller size that saved nothing (as short or shorter at 1 GiB): nothing below it is expected to save either.
  EXPECT_TRUE(SmallerSizesCannotFit({1024 * kSizeMiB, kShortGB}, {64 * kSizeMiB, kShortGB}));
}

TEST(SearchLimits, WithoutTwoAnswersAtFallingSizesNothingIsSkipped) {
  EXPECT_FALSE(SmallerSizesCannotFit({0, 0}, {64 * kSizeMiB, 67 * kShortGB}));             // the first answer
  EXPECT_FALSE(SmallerSizesCannotFit({32 * kSizeMiB, kShortGB}, {64 * kSizeMiB, 67 * kShortGB}));   // a larger size after a smaller
  EXPECT_FALSE(SmallerSizesCannotFit({64 * kSizeMiB, kShortGB}, {64 * kSizeMiB, 67 * kShortGB}));   // the same size
  EXPECT_FALSE(SmallerSizesCannotFit({1024 * kSizeMiB, 67 * kShortGB}, {64 * kSizeMiB, 0}));  // it fit
}

}  // namespace
}  // namespace reshard
