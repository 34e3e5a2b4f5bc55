// Tests of the routing-independent lower bound (sim/topology_bound.h) on
// hand-solved topologies of the test cluster (plan_builder.h: every link 1
// byte/ns, device copies 2 bytes/ns). Plans here carry contents only: the bound
// reads what must move, not the ops.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "sim/ports.h"
#include "sim/simulator.h"
#include "sim/topology_bound.h"
#include "tests/sim/plan_builder.h"

namespace reshard {
namespace {

using sim_test::PlanBuilder;
using sim_test::TestCluster;

constexpr int64_t kX = 1'000'000;  // bytes of the one tensor (fp8: one byte per element)

// A preexisting buffer of `bytes` on `gpu`, appended to `p`; returns its id.
int32_t AddBuffer(Plan& p, int32_t gpu, MemorySpace space, BufferRole role, int64_t bytes) {
  PlanBuffer b;
  b.gpu = gpu;
  b.space = space;
  b.role = role;
  b.bytes = bytes;
  b.preexisting = true;
  return AppendBuffer(p, std::move(b));
}

// A plan whose only tensor (kX fp8 elements) is held whole by `holders` and
// needed whole by `needers` (each in a buffer of its own), or with `split`,
// needer i of n needs the i-th of n equal slices; `host_holders` hold it in
// host memory.
Plan Contents(const Cluster& c, const std::vector<int32_t>& holders, const std::vector<int32_t>& needers,
              const std::vector<int32_t>& host_holders = {}, bool split = false) {
  Plan p;
  p.name = "bound";
  p.cluster = c;
  p.tensors.push_back({"w", MakeShape({kX}), DType::kFP8E4M3, {}});
  auto buffer = [&](int32_t gpu, MemorySpace space, BufferRole role) { return AddBuffer(p, gpu, space, role, kX); };
  const Box whole = WholeBox(p.tensors[0].shape);
  for (int32_t g : holders)
    p.sources.push_back({buffer(g, MemorySpace::kDevice, BufferRole::kSourceWeights), 0, whole, 0, {0, 0, 1}});
  for (int32_t g : host_holders)
    p.sources.push_back({buffer(g, MemorySpace::kHost, BufferRole::kHost), 0, whole, 0, {0, 0, 1}});
  const int64_t n = static_cast<int64_t>(needers.size());
  for (int64_t i = 0; i < n; ++i) {
    const Box box = split ? SliceBox(p.tensors[0].shape, 0, kX * i / n, kX * (i + 1) / n) : whole;
    p.destinations.push_back(
        {buffer(needers[i], MemorySpace::kDevice, BufferRole::kDestinationWeights), 0, box, 0, {0, 0, 1}});
  }
  return p;
}

TEST(TopologyBound, TwoReplicasBehindTwoNicsSendHalvesEach) {
  // Node 0: GPUs 0 and 1 each hold the kX bytes, each behind its own NIC.
  // Node 1: GPU 2 needs them; GPU 3 needs nothing but has a NIC and NVLink.
  // The kX bytes cross the network once: half from each replica's NIC (1
  // byte/ns each), half landing at GPU 2's NIC and half at GPU 3's, which
  // forwards it over NVLink (1 byte/ns). T = (kX / 2) / 1 byte/ns = 500,000 ns.
  // One replica sending all of it through one NIC takes kX ns (its routing bound).
  const Cluster c = TestCluster(2, 2, 2);
  const TopologyBound b = TopologyLowerBound(Contents(c, {0, 1}, {2}));
  EXPECT_NEAR(b.time_s, 500'000e-9, 1e-15);
  EXPECT_NEAR(b.flow_s, 500'000e-9, 1e-15);

  PlanBuilder one(c);  // the one-NIC plan: GPU 0 sends everything to GPU 2
  one.Transfer(0, 2, kX);
  EXPECT_NEAR(LowerBound(one.Build()).time_s, 1'000'000e-9, 1e-15);
}

TEST(TopologyBound, DestinationDomainReceivesSharedBytesOnceAndRelaysOverNvlink) {
  // GPUs 2 and 3 (node 1, one NVLink domain, a NIC each) both need the kX
  // bytes that GPUs 0 and 1 of node 0 hold. Sending them to each GPU takes kX
  // ns on each receiving NIC. Sent once: kX / 2 lands at each NIC, and each GPU
  // takes the other half from its peer over NVLink: every NIC and NVLink port
  // carries kX / 2. T = 500,000 ns.
  const Cluster c = TestCluster(2, 2, 2);
  const TopologyBound b = TopologyLowerBound(Contents(c, {0, 1}, {2, 3}));
  EXPECT_NEAR(b.time_s, 500'000e-9, 1e-15);
  // With NVLink at 0.25 byte/ns, each GPU lands n bytes on its NIC and takes
  // the other kX - n from its peer: T = n = (kX - n) / 0.25 gives n = 0.8 kX
  // (the two NICs land 1.6 kX >= kX between them). T = 800,000 ns.
  Cluster slow = c;
  slow.nvlink.bytes_per_s = 0.25e9;
  EXPECT_NEAR(TopologyLowerBound(Contents(slow, {0, 1}, {2, 3})).time_s, 800'000e-9, 1e-15);
}

TEST(TopologyBound, ColocatedTp1ToTp1IsCopyBound) {
  // One GPU holds the kX bytes and needs them in its destination buffer: a
  // device copy at 2 bytes/ns, nothing else can help. T = 500,000 ns.
  const Cluster c = TestCluster(1, 1, 0);
  const TopologyBound b = TopologyLowerBound(Contents(c, {0}, {0}));
  EXPECT_NEAR(b.time_s, 500'000e-9, 1e-15);
  EXPECT_EQ(b.binding, "gpu0.copy");
  // Held in host memory instead: PCIe host-to-device at 1 byte/ns. T = kX ns.
  const TopologyBound h = TopologyLowerBound(Contents(c, {}, {0}, {0}));
  EXPECT_NEAR(h.time_s, 1'000'000e-9, 1e-15);
}

TEST(TopologyBound, OneHolderMustSendWhatItAloneHoldsOnce) {
  // GPU 0 alone holds the kX bytes; GPUs 1 and 2 of its domain need one half
  // each. Their NVLink ins carry kX / 2 each (the flow: 500,000 ns), but every
  // byte leaves GPU 0 at least once over its NVLink out (1 byte/ns), whatever
  // relays it later: T = kX ns, met by sending each half straight.
  const Cluster c = TestCluster(1, 4, 1);
  const TopologyBound b = TopologyLowerBound(Contents(c, {0}, {1, 2}, {}, /*split=*/true));
  EXPECT_NEAR(b.flow_s, 500'000e-9, 1e-15);
  EXPECT_NEAR(b.time_s, 1'000'000e-9, 1e-15);
  EXPECT_EQ(b.binding, "gpu0.nvlink_out");
  // Needed whole by GPUs 1, 2 and 3: still kX bytes out of GPU 0 (a
  // pipelined chain 0 -> 1 -> 2 -> 3 meets it), and kX into each needer.
  EXPECT_NEAR(TopologyLowerBound(Contents(c, {0}, {1, 2, 3})).time_s, 1'000'000e-9, 1e-15);
}

TEST(TopologyBound, LastDomainMayHaveFewerNodes) {
  // Three one-GPU nodes, NVLink domains of two nodes: GPUs 0 and 1 form
  // domain 0, GPU 2 alone domain 1. GPU 0 holds the kX bytes, GPU 2 needs
  // them: they land through GPU 2's one NIC at 1 byte/ns. T = kX ns.
  Cluster c = TestCluster(3, 1, 1);
  c.nvlink_domain_nodes = 2;
  const TopologyBound b = TopologyLowerBound(Contents(c, {0}, {2}));
  EXPECT_NEAR(b.time_s, 1'000'000e-9, 1e-15);
  EXPECT_EQ(b.binding, "nic2.in");
}

// A plan of one fp8 tensor per item: `bytes` elements held whole by
// `holders` and needed whole by `needers`.
struct Item {
  std::vector<int32_t> holders, needers;
  int64_t bytes;
};
Plan Items(const Cluster& c, const std::vector<Item>& items) {
  Plan p;
  p.name = "bound";
  p.cluster = c;
  for (const Item& it : items) {
    const int32_t t = static_cast<int32_t>(p.tensors.size());
    p.tensors.push_back({"w" + std::to_string(t), MakeShape({it.bytes}), DType::kFP8E4M3, {}});
    const Box whole = WholeBox(p.tensors[t].shape);
    for (int32_t g : it.holders)
      p.sources.push_back({AddBuffer(p, g, MemorySpace::kDevice, BufferRole::kSourceWeights, it.bytes), t, whole, 0,
                           {0, 0, 1}});
    for (int32_t g : it.needers)
      p.destinations.push_back(
          {AddBuffer(p, g, MemorySpace::kDevice, BufferRole::kDestinationWeights, it.bytes), t, whole, 0, {0, 0, 1}});
  }
  return p;
}

TEST(TopologyBound, GpusSwappingBytesPayTheDuplexRate) {
  // GPUs 0 and 1 of one domain (no NIC) each alone hold kX / 2 bytes the other
  // needs. Each NVLink pair carries kX / 2 in and kX / 2 out; both directions
  // busy, each runs at the duplex rate, 0.6 byte/ns: T = 500,000 / 0.6 =
  // 833,333.3 ns (the flow alone, peak rates: 500,000). A swap sent both ways
  // at once meets it.
  Cluster c = TestCluster(1, 2, 0);
  c.nvlink.duplex_bytes_per_s = 0.6e9;
  const Plan swap = Items(c, {{{0}, {1}, kX / 2}, {{1}, {0}, kX / 2}});
  const TopologyBound b = TopologyLowerBound(swap);
  EXPECT_NEAR(b.flow_s, 500'000e-9, 1e-15);
  EXPECT_NEAR(b.time_s, 500'000e-9 / 0.6, 1e-12);
  EXPECT_EQ(b.binding, "gpu0.nvlink_in + gpu0.nvlink_out (duplex)");
  PlanBuilder both(c);  // one NCCL group: both directions at once
  const sim_test::Opts grouped{.group = 0};
  both.Transfer(0, 1, kX / 2, grouped, grouped);
  both.Transfer(1, 0, kX / 2, grouped, grouped);
  const Prediction pr = Simulate(both.Build());
  EXPECT_GE(pr.time_s, b.time_s);
  EXPECT_NEAR(pr.time_s, b.time_s, 1e-6);
  // A duplex rate at most half the peak gains nothing from overlap: T =
  // (kX / 2 + kX / 2) / 1 byte/ns = kX ns. Without a duplex penalty: the flow.
  c.nvlink.duplex_bytes_per_s = 0.4e9;
  EXPECT_NEAR(TopologyLowerBound(Items(c, {{{0}, {1}, kX / 2}, {{1}, {0}, kX / 2}})).time_s, 1'000'000e-9, 1e-15);
  c.nvlink.duplex_bytes_per_s = 0;
  EXPECT_NEAR(TopologyLowerBound(Items(c, {{{0}, {1}, kX / 2}, {{1}, {0}, kX / 2}})).time_s, 500'000e-9, 1e-15);
}

TEST(TopologyBound, DuplexCutLetsTheNicBringBytesFromAnotherDomain) {
  // Domains of one node (GPUs 0, 1 | 2, 3), a NIC per GPU, every port 1
  // byte/ns, NVLink duplex 0.6. GPU 0 needs Y (kX), held by GPU 1 and by GPU
  // 2 of the other domain; it alone holds X (kX / 2), which GPU 1 needs. With
  // n bytes of Y over its NIC (n <= T), GPU 0's NVLink takes kX - n in and
  // sends kX / 2 out. At T = 700,000 ns: 300,000 in, 500,000 out, both ways
  // for 300,000 / 0.6 = 500,000 ns, then 200,000 out alone: 700,000 ns, with
  // n = 700,000 over the NIC in the same time. Without duplex: 500,000.
  Cluster c = TestCluster(2, 2, 2);
  c.nvlink.duplex_bytes_per_s = 0.6e9;
  const TopologyBound b = TopologyLowerBound(Items(c, {{{1, 2}, {0}, kX}, {{0}, {1}, kX / 2}}));
  EXPECT_NEAR(b.time_s, 700'000e-9, 1e-12);
  EXPECT_EQ(b.binding, "gpu0.nvlink_in + gpu0.nvlink_out (duplex)");
  c.nvlink.duplex_bytes_per_s = 0;
  EXPECT_NEAR(TopologyLowerBound(Items(c, {{{1, 2}, {0}, kX}, {{0}, {1}, kX / 2}})).time_s, 500'000e-9, 1e-15);
}

TEST(TopologyBound, NothingToMoveIsZero) {
  const Cluster c = TestCluster(1, 2, 1);
  Plan p = Contents(c, {0}, {});
  EXPECT_EQ(TopologyLowerBound(p).time_s, 0);
  PlanBuilder b(c);
  b.Transfer(0, 1, 1000);
  const Prediction pr = Simulate(b.Build());
  EXPECT_EQ(pr.lower_bound_s, 0);  // contents say nothing must move
  EXPECT_GT(pr.routing_bound_s, 0);
}

}  // namespace
}  // namespace reshard
