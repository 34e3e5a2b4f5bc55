// Hand-derived tests of the critical path (Prediction::critical_path, sim/
// critical_path.cc), a cold refit's pool mapping and a transfer over a link
// that shares the copy port. On the test cluster of plan_builder.h (links 1
// byte/ns, copies 2 bytes/ns, no latency unless set).
#include <gtest/gtest.h>

#include "model/host_costs.h"
#include "plan/plan.h"
#include "sim/simulator.h"
#include "tests/sim/plan_builder.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace critical_path_test {

using namespace sim_test;  // NOLINT: TestCluster, PlanBuilder, SimVerified

Cluster WithHost(Cluster c) {
  c.host.event_record_ns = 10;
  c.host.stream_wait_ns = 7;
  c.host.kernel_launch_ns = 100;
  c.host.nccl_op_ns = 20;
  c.host.nccl_group_ns = 50;
  c.host.nccl_group_op_ns = 5;
  return c;
}

void ExpectPath(const Prediction& p, int64_t wire, int64_t copy, int64_t host, int64_t event, int64_t warm_up) {
  const CriticalPath& c = p.critical_path;
  EXPECT_EQ(c.wire_ns, wire);
  EXPECT_EQ(c.copy_ns, copy);
  EXPECT_EQ(c.host_issue_ns, host);
  EXPECT_EQ(c.event_ns, event);
  EXPECT_EQ(c.warm_up_ns, warm_up);
  EXPECT_EQ(c.TotalNs(), p.time_ns);
}

TEST(CriticalPath, WireAloneWithoutTheHost) {
  // One 1000 B NVLink transfer, latency 100: [0, 1100], all of it wire.
  Cluster cl = TestCluster();
  cl.nvlink.latency_ns = 100;
  PlanBuilder b(cl);
  b.Transfer(0, 1, 1000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.time_ns, 1100);
  ExpectPath(p, 1100, 0, 0, 0, 0);
  EXPECT_EQ(p.critical_path.ops, 1);
}

TEST(CriticalPath, CopyThenSendThroughTheHost) {
  // As HostIssue.DependencyOnAnotherStreamCostsAStreamWait: the copy is queued
  // at 110 and runs [110, 2110]; the send (queued at 212) waits for it and
  // runs [2110, 3110]. Back from 3110: the send's flow 1000 ns of wire, its
  // launch ready when the copy ended (2110 >= host 212), the copy's flow
  // 2000 ns, its launch issued by the host at 110: 1000 + 2000 + 110 = 3110.
  PlanBuilder b(WithHost(TestCluster()));
  const int32_t c = b.Copy(0, 4000);
  b.Transfer(0, 1, 1000, {kStreamComm, -1, {c}});
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.time_ns, 3110);
  ExpectPath(p, 1000, 2000, 110, 0, 0);
  EXPECT_EQ(p.critical_path.ops, 2);
}

TEST(CriticalPath, EventBracketsAreTheirOwnTerm) {
  // As HostIssue.EventBracketsTakeStreamTime (event_gpu_ns 50): copy 1 queued
  // at 110, starts at 160, ends 1160; copy 2 ready at 1160, starts 1210, ends
  // 2210. Back: copy 2 1000 + bracket 50 + copy 1 1000 + bracket 50 + host
  // 110 = 2210.
  Cluster cl = WithHost(TestCluster());
  cl.host.event_gpu_ns = 50;
  PlanBuilder b(cl);
  b.Copy(0, 2000);
  b.Copy(0, 2000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.time_ns, 2210);
  ExpectPath(p, 0, 2000, 110, 100, 0);
}

TEST(CriticalPath, ColdWarmUpIsChargedApartFromIssuing) {
  // As HostIssue.ColdRefitConnectsEachPairOnceAndPinsHostBuffers, plus pool
  // mapping at 1e12 B/s: GPU 0's device buffers (2000 B, and the transfers'
  // 1000 B pool) map in 3 ns, its 5000 B host buffer pins in 5, so process
  // 0's warm-up before its first op is 8 (cold_setup_ns), and its first send
  // connects in 1000.
  // Process 0: send 1 queued at 8 + 10 + 20 + 1000 + 55 = 1093; process 1:
  // recv 1 at 1085. Transfer 1 [1093, 2093]; transfer 2 (queued later) waits
  // on the pair: [2093, 3093]. Back from 3093: 1000 + 1000 of wire, then the
  // send's host thread to 1093, of which 8 + 1000 = 1008 warm-up and 85
  // issuing. Warm: [85, 1085], [1085, 2085]: 2000 wire + 85 host.
  Cluster cl = WithHost(TestCluster());
  cl.host.nccl_connect_ns = 1000;
  cl.host.pin_bytes_per_s = 1e12;
  cl.host.map_bytes_per_s = 1e12;
  PlanBuilder b(cl);
  b.Buffer(0, 5000, /*preexisting=*/true, MemorySpace::kHost);
  b.Buffer(0, 2000, /*preexisting=*/true);
  b.Transfer(0, 1, 1000);
  b.Transfer(0, 1, 1000);
  const Plan plan = b.Build();
  SimOptions cold;
  cold.cold = true;
  const Prediction c = Simulate(plan, cold);
  EXPECT_EQ(c.cold_setup_ns, 8);
  EXPECT_EQ(c.time_ns, 3093);
  ExpectPath(c, 2000, 0, 85, 0, 1008);
  const Prediction w = SimVerified(plan);
  EXPECT_EQ(w.time_ns, 2085);
  ExpectPath(w, 2000, 0, 85, 0, 0);
}

TEST(CriticalPath, OffloadIsItsOwnTerm) {
  // A 3000 B offload over PCIe (1 B/ns) without a host model: [0, 3000].
  PlanBuilder b(TestCluster());
  b.OffloadBytes(0, 3000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.time_ns, 3000);
  EXPECT_EQ(p.critical_path.offload_ns, 3000);
  EXPECT_EQ(p.critical_path.TotalNs(), 3000);
}

TEST(Simulate, NvlinkTransferSharesTheCopyPorts) {
  // shares_copy_port: a 1000 B NVLink transfer 0 -> 1 (1 B/ns) also crosses
  // gpu0.copy and gpu1.copy (2 B/ns). Beside it, a 2000 B copy on GPU 0: the
  // two share gpu0.copy max-min: the transfer is held to 1 B/ns by NVLink, the
  // copy gets the other 1 B/ns. At 1000 the transfer ends with the copy's
  // 1000 B done; the last 1000 B at 2 B/ns take 500: the copy ends at 1500.
  // Without the rule the copy runs alone at 2 B/ns: [0, 1000].
  Cluster cl = TestCluster();
  cl.nvlink.shares_copy_port = true;
  PlanBuilder b(cl);
  const int32_t c = b.Copy(0, 2000);
  auto [s, r] = b.Transfer(0, 1, 1000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[s], 1000);
  EXPECT_EQ(p.op_end_ns[c], 1500);
  cl.nvlink.shares_copy_port = false;
  PlanBuilder b2(cl);
  const int32_t c2 = b2.Copy(0, 2000);
  b2.Transfer(0, 1, 1000);
  EXPECT_EQ(SimVerified(b2.Build()).op_end_ns[c2], 1000);
  (void)r;
}

}  // namespace critical_path_test
}  // namespace reshard
