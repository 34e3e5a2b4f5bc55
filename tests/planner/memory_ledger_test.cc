// The memory ledger (planner/memory_ledger.h) on hand-made plans (and the
// labels of its memory ops, last): an
// allocation waits for the releases it takes, and for those earlier
// allocations took, on every stream, so the live bytes stay within the budget
// whatever the order the streams run in.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/cluster.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/buffer_layout.h"
#include "planner/memory_ledger.h"

namespace reshard {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

bool DependsOn(const Plan& p, int32_t op, int32_t dep) {
  const std::vector<int32_t>& d = p.ops[op].deps;
  return std::find(d.begin(), d.end(), dep) != d.end();
}

// GPU 0 of an h200-x2 with a 100 MiB budget (the rest reserved, no context,
// no NCCL peers) holding buffer A (90 MiB) from the start. A is freed on the
// comm stream (recorded), S (60 MiB, comm) needs 90 + 60 > 100: it takes A's
// free, and the ledger counts 60 live. D (30 MiB, compute) then fits the
// ledger's 60 + 30 = 90 without a release of its own; but run before A's
// free, which nothing on the compute stream follows, 90 + 30 = 120 MiB would
// be live: D must wait for A's free too. E (5 MiB, comm) follows S on the
// comm stream, and so A's free, in any case.
TEST(MemoryLedger, AnAllocationWaitsForTheReleasesEarlierOnesTookOnOtherStreams) {
  const Cluster c = ClusterPreset("h200-x2");
  Plan p;
  const int32_t a = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 90 * kMiB, -1, true, "A");
  const int32_t s = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 60 * kMiB, -1, false, "S");
  const int32_t d = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 30 * kMiB, -1, false, "D");
  std::vector<GpuMemoryAtStart> mem(2);
  for (int32_t g = 0; g < 2; ++g) mem[g].gpu = g, mem[g].reserve = c.gpu_memory_bytes - 100 * kMiB;
  MemoryLedger ledger(p, c, mem, {0, 0});
  const int32_t free_a = AppendMemoryOp(p, OpKind::kFree, a, kStreamComm, {});
  ledger.RecordFree(0, free_a, 90 * kMiB);
  const int32_t alloc_s = ledger.Alloc(s, kStreamComm);
  EXPECT_TRUE(DependsOn(p, alloc_s, free_a));
  const int32_t alloc_d = ledger.Alloc(d, kStreamCompute);
  EXPECT_TRUE(DependsOn(p, alloc_d, free_a)) << "D counts on the room S's take of A's free made";
  EXPECT_EQ(ledger.PlannedPeak(0), 90 * kMiB);
  EXPECT_EQ(ledger.MissingBytes(0), 0);
}

// A release taken on one stream and another taken later on a second: an
// allocation after both waits for the latest of each stream (frees of one
// stream run in order, so the latest covers the earlier ones).
TEST(MemoryLedger, AnAllocationWaitsForTheLatestTakenReleaseOfEachStream) {
  const Cluster c = ClusterPreset("h200-x2");
  Plan p;
  std::vector<int32_t> held;
  for (int k = 0; k < 4; ++k)
    held.push_back(AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 25 * kMiB, -1, true, "held"));
  std::vector<GpuMemoryAtStart> mem(2);
  for (int32_t g = 0; g < 2; ++g) mem[g].gpu = g, mem[g].reserve = c.gpu_memory_bytes - 100 * kMiB;
  MemoryLedger ledger(p, c, mem, {0, 0});
  // Frees of held[0], held[1] on the comm stream, held[2] on the compute stream, in that order.
  const int32_t f0 = AppendMemoryOp(p, OpKind::kFree, held[0], kStreamComm, {});
  const int32_t f1 = AppendMemoryOp(p, OpKind::kFree, held[1], kStreamComm, {});
  const int32_t f2 = AppendMemoryOp(p, OpKind::kFree, held[2], kStreamCompute, {});
  for (int32_t f : {f0, f1, f2}) ledger.RecordFree(0, f, 25 * kMiB);
  // 100 live: 50 MiB takes f0 and f1 (comm); 20 MiB then takes f2 (compute).
  const int32_t x = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 50 * kMiB, -1, false, "x");
  const int32_t y = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 20 * kMiB, -1, false, "y");
  const int32_t z = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, 1 * kMiB, -1, false, "z");
  const int32_t ax = ledger.Alloc(x, kStreamCompute);
  EXPECT_TRUE(DependsOn(p, ax, f1));
  const int32_t ay = ledger.Alloc(y, kStreamComm);
  EXPECT_TRUE(DependsOn(p, ay, f2));
  EXPECT_TRUE(DependsOn(p, ay, f1));
  const int32_t az = ledger.Alloc(z, kStreamHost);  // 96 live: no take of its own
  EXPECT_TRUE(DependsOn(p, az, f1));
  EXPECT_TRUE(DependsOn(p, az, f2));
  EXPECT_EQ(ledger.PlannedPeak(0), 100 * kMiB);
}

// Labels and buffer names (planner/buffer_layout.h's Label) read as fmt's
// "{}" writes text and integers: plan.json, traces and golden digests keep
// the names they had when the planner formatted them with fmt.
TEST(Label, WritesTextAndIntegersAsFmtDoes) {
  EXPECT_EQ(Label("send s", 12, ".", 3), fmt::format("send s{}.{}", 12, 3));
  EXPECT_EQ(Label("opt r", int32_t{-7}, " ", LayerName(4), " s", size_t{2}), "opt r-7 L4 s2");
  EXPECT_EQ(Label("x", std::numeric_limits<int64_t>::min()), fmt::format("x{}", std::numeric_limits<int64_t>::min()));
  EXPECT_EQ(Label("y", std::numeric_limits<uint64_t>::max()), fmt::format("y{}", std::numeric_limits<uint64_t>::max()));
  EXPECT_EQ(Label(), "");
  EXPECT_EQ(LayerName(-1), "emb");
  Plan p;
  const int32_t b = AddPlanBuffer(p, 0, MemorySpace::kDevice, BufferRole::kStaging, kMiB, -1, false, "recv stage3 gpu1");
  EXPECT_EQ(p.ops[AppendMemoryOp(p, OpKind::kAlloc, b, kStreamComm, {})].label, "alloc recv stage3 gpu1");
  EXPECT_EQ(p.ops[AppendMemoryOp(p, OpKind::kFree, b, kStreamComm, {})].label, "free recv stage3 gpu1");
}

}  // namespace
}  // namespace reshard
