// The NCCL backend's copy-kernel block budget (executor/nccl/backend.h
// CopyBlocks) without a GPU: the plan's share of the copy grid by default,
// RESHARD_COPY_MAX_BLOCKS as an override.
#include <gtest/gtest.h>

#include "executor/nccl/backend.h"

namespace reshard {
namespace {

// An H200 with 2 blocks per SM (RESHARD_COPY_BLOCKS_PER_SM=2): a copy grid of 264 blocks.
constexpr int32_t kSms = 132, kPerSm = 2;

TEST(CopyBlocks, DefaultGridIsOneBlockPerSm) {
  const int32_t per_sm = NcclBackendOptions{}.copy_blocks_per_sm;
  EXPECT_EQ(per_sm, 1);
  EXPECT_EQ(CopyBlocks(kSms, per_sm, -1, 1.0), 132);
  EXPECT_EQ(CopyBlocks(kSms, per_sm, -1, 0.5), 66);  // the planner's share beside transfers
}

TEST(CopyBlocks, PlanShareOfTheCopyGrid) {
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 1.0), 264);
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 0.25), 66);   // 0.25 * 264 = 66
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 0.5), 132);
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 0.1), 26);    // 26.4 rounds to 26
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 0.102), 27);  // 26.928 rounds to 27
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 1e-6), 1);    // never below one block
  EXPECT_EQ(CopyBlocks(kSms, 1, -1, 0.25), 33);        // RESHARD_COPY_BLOCKS_PER_SM=1: grid 132
}

TEST(CopyBlocks, OverrideIgnoresThePlan) {
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, 0, 0.25), 264);   // 0: the whole grid
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, 32, 0.25), 32);   // N: at most N
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, 32, 1.0), 32);
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, 1000, 0.25), 264);  // never beyond the grid
}

TEST(CopyBlocks, OddInputsStayInRange) {
  EXPECT_EQ(CopyBlocks(0, 0, -1, 1.0), 1);             // no SMs reported: one block
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, 2.0), 264);   // shares above 1 are the whole grid
  EXPECT_EQ(CopyBlocks(kSms, kPerSm, -1, -0.5), 1);
}

}  // namespace
}  // namespace reshard
