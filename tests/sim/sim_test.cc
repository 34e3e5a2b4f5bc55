// Tests of the simulator (sim/). Plans are built by hand on the test cluster
// of plan_builder.h, so every expected time is exact nanoseconds derived in a
// comment.
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "model/error.h"
#include "plan/plan.h"
#include "sim/ports.h"
#include "sim/simulator.h"
#include "sim/trace.h"
#include "tests/sim/plan_builder.h"

namespace reshard {
namespace {

using namespace sim_test;  // NOLINT: TestCluster, PlanBuilder, SimVerified

// The share grid (SimOptions::share_grid_share = 1/2048 of the routing bound,
// whole microseconds, within [16, 64] us):
//   10 ms: 10^7 / 2048 = 4,882.8 ns -> 4,000 -> at least 16,000;
//   100 ms: 10^8 / 2048 = 48,828.1 ns -> 48,000;
//   1 s: 488,281.25 ns -> at most 64,000;
//   an infinite or NaN bound: at most 64,000 (no cast of a non-number);
//   share_grid_ns = 0 (exact) stays 0; a floor of 20,000 ns lifts 10 ms to it.
TEST(Simulator, ShareGridIsAShareOfTheRoutingBound) {
  SimOptions o;
  EXPECT_EQ(ShareGridNs(o, std::numeric_limits<double>::infinity()), 64'000);
  EXPECT_EQ(ShareGridNs(o, std::numeric_limits<double>::quiet_NaN()), 64'000);
  EXPECT_EQ(ShareGridNs(o, 0.010), 16'000);
  EXPECT_EQ(ShareGridNs(o, 0.100), 48'000);
  EXPECT_EQ(ShareGridNs(o, 1.0), 64'000);
  EXPECT_EQ(ShareGridNs(o, 0.0), 16'000);
  o.share_grid_ns = 20'000;
  EXPECT_EQ(ShareGridNs(o, 0.010), 20'000);
  o.share_grid_ns = 0;
  EXPECT_EQ(ShareGridNs(o, 1.0), 0);
}

// Two transfers issued as one group (group 0, comm stream) on cluster `c`.
struct Xfer {
  int32_t src, dst;
  int64_t bytes;
};
struct GroupOfTwo {
  Prediction p;
  std::pair<int32_t, int32_t> a, b;  // {send, recv} of each
};
GroupOfTwo SimulateGroupOfTwo(const Cluster& c, Xfer a, Xfer b) {
  PlanBuilder builder(c);
  const Opts g{kStreamComm, 0};
  GroupOfTwo r;
  r.a = builder.Transfer(a.src, a.dst, a.bytes, g, g);
  r.b = builder.Transfer(b.src, b.dst, b.bytes, g, g);
  r.p = SimVerified(builder.Build());
  return r;
}

// ---------------------------------------------------------------------------
// Port model and lower bound

TEST(Ports, RoutesFollowTheLinkClass) {
  const PortModel m(TestCluster(2, 2, 1));  // GPUs 0,1 on node 0 (NIC 0); 2,3 on node 1 (NIC 1)
  const Route nv = m.Transfer(0, 1);
  EXPECT_EQ(nv.link_class, LinkClass::kNvlink);
  ASSERT_EQ(nv.num_ports, 2);
  EXPECT_EQ(m.Name(nv.ports[0]), "gpu0.nvlink_out");
  EXPECT_EQ(m.Name(nv.ports[1]), "gpu1.nvlink_in");
  const Route net = m.Transfer(1, 2);  // network: NICs of both ends, not NVLink
  EXPECT_EQ(net.link_class, LinkClass::kNetwork);
  EXPECT_EQ(m.Name(net.ports[0]), "nic0.out");
  EXPECT_EQ(m.Name(net.ports[1]), "nic1.in");
  const Route self = m.Transfer(3, 3);
  EXPECT_EQ(self.link_class, LinkClass::kLocal);
  ASSERT_EQ(self.num_ports, 1);
  EXPECT_EQ(m.Name(self.ports[0]), "gpu3.copy");
  EXPECT_EQ(m.Name(m.Offload(2).ports[0]), "gpu2.pcie_d2h");
  EXPECT_EQ(m.Name(m.Reload(2).ports[0]), "gpu2.pcie_h2d");
  EXPECT_EQ(m.Reverse(nv.ports[0]), m.Port(PortKind::kNvlinkIn, 0));
  EXPECT_EQ(m.Reverse(self.ports[0]), -1);
  // Pageable PCIe crosses the same port but is capped by pcie_pageable.
  Cluster c = TestCluster();
  c.pcie_pageable.bytes_per_s = 0.25e9;
  const PortModel mp(c);
  EXPECT_EQ(mp.Offload(0, /*pinned=*/false).ports[0], mp.Offload(0).ports[0]);
  EXPECT_DOUBLE_EQ(mp.FlowCapBytesPerS(mp.Offload(0, false), 100), 0.25e9);
  EXPECT_DOUBLE_EQ(mp.FlowCapBytesPerS(mp.Offload(0), 100), 1e9);
}

TEST(Ports, DuplexLowerBoundIsTheLpOptimum) {
  // P = 1 byte/ns, D = 0.75: e = 3000 out, i = 1000 in on GPU 0.
  // D > P/2: overlap all of i: T = i/D + (e - i)/P = 1000/0.75 + 2000 = 3333.3 ns.
  Cluster c = TestCluster();
  c.nvlink.duplex_bytes_per_s = 0.75e9;
  const PortModel m(c);
  std::vector<int64_t> bytes(m.NumPorts(), 0);
  bytes[m.Port(PortKind::kNvlinkOut, 0)] = 3000;
  bytes[m.Port(PortKind::kNvlinkIn, 0)] = 1000;
  EXPECT_NEAR(PortSeconds(m, m.Port(PortKind::kNvlinkOut, 0), bytes), (1000 / 0.75 + 2000) * 1e-9, 1e-15);
  const PortBound b = LowerBoundOfLoads(m, bytes);
  EXPECT_EQ(b.port_name, "gpu0.nvlink_out");
  EXPECT_EQ(b.port_bytes, 3000);
  // D = 0.4 <= P/2: running the directions one after the other is better:
  // T = (e + i)/P = 4000 ns.
  c.nvlink.duplex_bytes_per_s = 0.4e9;
  const PortModel m2(c);
  EXPECT_NEAR(PortSeconds(m2, m2.Port(PortKind::kNvlinkIn, 0), bytes), 4000e-9, 1e-15);
  // Balanced directions give DESIGN's "duplex rate": e/D.
  bytes[m.Port(PortKind::kNvlinkIn, 0)] = 3000;
  EXPECT_NEAR(PortSeconds(m, m.Port(PortKind::kNvlinkIn, 0), bytes), 3000 / 0.75 * 1e-9, 1e-15);
}

// ---------------------------------------------------------------------------
// Bandwidth sharing

TEST(Simulate, OneFlow) {
  // 1,000,000 bytes at 1 byte/ns over gpu0.nvlink_out -> gpu1.nvlink_in: 1,000,000 ns.
  PlanBuilder b(TestCluster());
  auto [s, r] = b.Transfer(0, 1, 1'000'000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.time_ns, 1'000'000);
  EXPECT_EQ(p.op_end_ns[s], 1'000'000);
  EXPECT_EQ(p.op_end_ns[r], 1'000'000);
  EXPECT_DOUBLE_EQ(p.time_s, 1e-3);
  EXPECT_EQ(p.bytes_moved, (BytesMoved{0, 1'000'000, 0, 0}));
  ASSERT_EQ(p.ports.size(), 2u);
  EXPECT_EQ(p.ports[0].name, "gpu0.nvlink_out");
  EXPECT_EQ(p.ports[0].busy_ns, 1'000'000);
  EXPECT_DOUBLE_EQ(p.ports[0].busy_fraction, 1.0);
  EXPECT_DOUBLE_EQ(p.ports[0].average_bytes_per_s, 1e9);
  EXPECT_DOUBLE_EQ(p.routing_bound_s, 1e-3);
  EXPECT_DOUBLE_EQ(PlanEfficiency(p.routing_bound_s, p.time_s), 1.0);

  // With 500 ns of latency: 500 + 1,000,000.
  Cluster c = TestCluster();
  c.nvlink.latency_ns = 500;
  PlanBuilder b2(c);
  b2.Transfer(0, 1, 1'000'000);
  EXPECT_EQ(SimVerified(b2.Build()).time_ns, 1'000'500);
}

TEST(Simulate, TwoFlowsShareAPort) {
  // One group on GPU 0 sends 1e6 bytes to GPU 1 and 3e6 to GPU 2; both cross
  // gpu0.nvlink_out (1 byte/ns): 0.5 byte/ns each until the first is done at
  // 1e6 / 0.5 = 2e6 ns; the second then has 3e6 - 1e6 = 2e6 bytes left at
  // 1 byte/ns and ends at 4e6 ns = (1e6 + 3e6) bytes / 1 byte/ns.
  const auto [p, a, b] = SimulateGroupOfTwo(TestCluster(), {0, 1, 1'000'000}, {0, 2, 3'000'000});
  EXPECT_EQ(p.op_end_ns[a.first], 2'000'000);
  EXPECT_EQ(p.op_end_ns[a.second], 2'000'000);
  EXPECT_EQ(p.op_end_ns[b.first], 4'000'000);
  EXPECT_EQ(p.op_end_ns[b.second], 4'000'000);
  EXPECT_EQ(p.time_ns, 4'000'000);
  // The shared port is the binding one and the plan meets its bound.
  EXPECT_EQ(p.routing_bound_port, "gpu0.nvlink_out");
  EXPECT_DOUBLE_EQ(p.routing_bound_s, 4e-3);
  EXPECT_DOUBLE_EQ(PlanEfficiency(p.routing_bound_s, p.time_s), 1.0);
}

TEST(Simulate, MaxMinOnAChainDiffersFromEqualShares) {
  // Flows (bytes): a 0->2 (8e6), b 0->1 (3e6), c 2->1 (3e6), d 3->1 (3e6).
  // Ports: out0 {a, b}, in1 {b, c, d}, in2 {a}, out2 {c}, out3 {d}; all 1 byte/ns.
  //   out0: r_a + r_b       <= 1
  //   in1:  r_b + r_c + r_d <= 1
  // Progressive filling: in1 saturates first, at level 1/3 (< 1/2 for out0),
  // so r_b = r_c = r_d = 1/3; out0 then leaves 1 - 1/3 = 2/3 for a: r_a = 2/3.
  // (Equal shares per port would give r_a = min(1/2, 1) = 1/2.)
  // b, c, d end at 3e6 / (1/3) = 9e6 ns; by then a moved 9e6 * 2/3 = 6e6, and
  // its last 2e6 bytes run alone at 1 byte/ns: a ends at 11e6 ns
  // (equal shares would end it at 9e6 + (8e6 - 4.5e6) = 12.5e6 ns).
  PlanBuilder b(TestCluster());
  const Opts g{kStreamComm, 0};
  auto [a, ar] = b.Transfer(0, 2, 8'000'000, g, g);
  auto [bs, br] = b.Transfer(0, 1, 3'000'000, g, g);
  auto [c, cr] = b.Transfer(2, 1, 3'000'000, g, g);
  auto [d, dr] = b.Transfer(3, 1, 3'000'000, g, g);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[bs], 9'000'000);
  EXPECT_EQ(p.op_end_ns[c], 9'000'000);
  EXPECT_EQ(p.op_end_ns[d], 9'000'000);
  EXPECT_EQ(p.op_end_ns[a], 11'000'000);
  EXPECT_EQ(p.op_end_ns[ar], 11'000'000);
  EXPECT_EQ(p.time_ns, 11'000'000);
  (void)br, (void)cr, (void)dr;
}

TEST(Simulate, NetworkFlowsShareTheNics) {
  // Two nodes of two GPUs, one NIC each. 0->2 and 1->3 (1e6 bytes each) both
  // cross nic0.out and nic1.in: 0.5 byte/ns each, both end at 2e6 ns.
  PlanBuilder b(TestCluster(2, 2, 1));
  auto [s1, r1] = b.Transfer(0, 2, 1'000'000);
  auto [s2, r2] = b.Transfer(1, 3, 1'000'000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[s1], 2'000'000);
  EXPECT_EQ(p.op_end_ns[s2], 2'000'000);
  EXPECT_EQ(p.bytes_moved, (BytesMoved{0, 0, 2'000'000, 0}));
  EXPECT_EQ(p.routing_bound_port, "nic0.out");
  EXPECT_EQ(p.time_ns, 2'000'000);
  for (const PortUse& u : p.ports) EXPECT_EQ(u.link_class, LinkClass::kNetwork) << u.name;
  (void)r1, (void)r2;
}

TEST(Simulate, DuplexPlanMeetsItsLowerBound) {
  // NVLink P = 1 byte/ns, D = 0.5 byte/ns per direction when both run.
  // 0->1 1000 bytes and 1->0 3000 bytes at once: both at 0.5 until 1000/0.5 =
  // 2000 ns; then 1->0 runs alone at 1 byte/ns for its last 3000 - 1000 = 2000
  // bytes: ends at 4000 ns. Lower bound (D > P/2 is false: D = P/2, both
  // formulas agree): i/D + (e - i)/P = 1000/0.5 + 2000/1 = 4000 ns.
  Cluster c = TestCluster();
  c.nvlink.duplex_bytes_per_s = 0.5e9;
  const auto [p, forth, back] = SimulateGroupOfTwo(c, {0, 1, 1000}, {1, 0, 3000});
  EXPECT_EQ(p.op_end_ns[forth.first], 2000);
  EXPECT_EQ(p.op_end_ns[back.first], 4000);
  EXPECT_EQ(p.time_ns, 4000);
  EXPECT_NEAR(p.routing_bound_s, 4000e-9, 1e-18);
  EXPECT_DOUBLE_EQ(PlanEfficiency(p.routing_bound_s, p.time_s), 1.0);
}

TEST(Simulate, LatencyDominatesSmallSegments) {
  // NVLink latency 20,000 ns. Ten 1,000-byte segments one after another on the
  // comm stream each cost 20,000 + 1,000 = 21,000 ns: 210,000 ns in all; the
  // same 10,000 bytes as one op cost 20,000 + 10,000 = 30,000 ns. The routing
  // bound ignores latency: 10,000 ns, so efficiency = 10,000 / 210,000.
  Cluster c = TestCluster();
  c.nvlink.latency_ns = 20'000;
  PlanBuilder b(c);
  for (int k = 0; k < 10; ++k) b.Transfer(0, 1, 1000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.time_ns, 210'000);
  EXPECT_NEAR(PlanEfficiency(p.routing_bound_s, p.time_s), 10'000.0 / 210'000.0, 1e-12);

  PlanBuilder one(c);
  one.Transfer(0, 1, 10'000);
  EXPECT_EQ(SimVerified(one.Build()).time_ns, 30'000);
}

TEST(Simulate, EfficiencyCurveCapsEachFlow) {
  // NVLink efficiency: 0.25 at 1,000 bytes, 0.75 at 100,000 bytes,
  // log-linear between, clamped outside.
  Cluster c = TestCluster();
  c.nvlink.efficiency = {{1000, 0.25}, {100'000, 0.75}};
  auto time_of = [&](int64_t bytes) {
    PlanBuilder b(c);
    b.Transfer(0, 1, bytes);
    return SimVerified(b.Build()).time_ns;
  };
  EXPECT_EQ(time_of(500), 2000);        // clamped 0.25: 500 / 0.25
  EXPECT_EQ(time_of(1000), 4000);       // 1000 / 0.25
  EXPECT_EQ(time_of(10'000), 20'000);   // halfway in log: 0.5; 10,000 / 0.5
  EXPECT_EQ(time_of(1'000'000), 1'333'334);  // clamped 0.75: 1,333,333.3 rounded up

  // Two 1,000-byte flows sharing gpu0.nvlink_out: each capped at 0.25 byte/ns,
  // together 0.5 < 1, so the cap (not the port) binds: both end at 4,000 ns.
  const auto [p, a, b] = SimulateGroupOfTwo(c, {0, 1, 1000}, {0, 2, 1000});
  EXPECT_EQ(p.op_end_ns[a.first], 4000);
  EXPECT_EQ(p.op_end_ns[b.first], 4000);
}

// ---------------------------------------------------------------------------
// Ordering

TEST(Simulate, DependencyChainAcrossStreamsAndGpus) {
  // GPU0 compute: copy 1000 B at 2 B/ns            [0, 500]
  // GPU0 comm:    send 1000 B to GPU1, deps copy   [500, 1500] (1 B/ns)
  // GPU1 comm:    recv, issued at 0, waits for the send (rendezvous) and ends at 1500
  // GPU1 compute: copy 1000 B, deps recv           [1500, 2000]
  // GPU1 host:    offload 1000 B, deps GPU1 copy   [2000, 3000] (PCIe 1 B/ns)
  // GPU0 compute: copy2 1000 B, no deps, after copy on its stream: [500, 1000]
  PlanBuilder b(TestCluster());
  const int32_t c0 = b.Copy(0, 1000);
  auto [s, r] = b.Transfer(0, 1, 1000, {kStreamComm, -1, {c0}}, {kStreamComm});
  const int32_t c1 = b.Copy(1, 1000, {kStreamCompute, -1, {r}});
  const int32_t off = b.OffloadBytes(1, 1000, {kStreamHost, -1, {c1}});
  const int32_t c2 = b.Copy(0, 1000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[c0], 500);
  EXPECT_EQ(p.op_start_ns[s], 500);
  EXPECT_EQ(p.op_end_ns[s], 1500);
  EXPECT_EQ(p.op_start_ns[r], 0);
  EXPECT_EQ(p.op_end_ns[r], 1500);
  EXPECT_EQ(p.op_start_ns[c1], 1500);
  EXPECT_EQ(p.op_end_ns[c1], 2000);
  EXPECT_EQ(p.op_start_ns[off], 2000);
  EXPECT_EQ(p.op_end_ns[off], 3000);
  EXPECT_EQ(p.op_start_ns[c2], 500);
  EXPECT_EQ(p.op_end_ns[c2], 1000);
  EXPECT_EQ(p.time_ns, 3000);
  // bytes_moved has CountBytesMoved's meaning: this builder's copies use
  // staging buffers, so they re-copy bytes rather than move them: only the
  // send (NVLink) and the offload (PCIe) count.
  EXPECT_EQ(p.bytes_moved, (BytesMoved{0, 1000, 0, 1000}));
  EXPECT_EQ(p.bytes_moved, CountBytesMoved(b.Build()));
}

// SimulateWithin on that chain (3,000 ns; events at 0, 500, 1,000, 1,500,
// 2,000 and 3,000 ns): at a limit of 3 us or more (or none) the prediction
// is Simulate's; below, the clock passes the limit at the next event (3,000
// ns past 2.5 us, 500 ns past 0) and it gives up.
TEST(Simulate, WithinALimitGivesUpOnceTheClockPassesIt) {
  PlanBuilder b(TestCluster());
  const int32_t c0 = b.Copy(0, 1000);
  auto [s, r] = b.Transfer(0, 1, 1000, {kStreamComm, -1, {c0}}, {kStreamComm});
  const int32_t c1 = b.Copy(1, 1000, {kStreamCompute, -1, {r}});
  b.OffloadBytes(1, 1000, {kStreamHost, -1, {c1}});
  const Plan plan = b.Build();
  const Prediction full = Simulate(plan);
  ASSERT_EQ(full.time_ns, 3000);
  for (const double limit_s : {3e-6, 4e-6, std::numeric_limits<double>::infinity()}) {
    const std::optional<Prediction> p = SimulateWithin(plan, limit_s);
    ASSERT_TRUE(p.has_value()) << limit_s;
    EXPECT_EQ(p->time_ns, 3000);
    EXPECT_EQ(p->op_end_ns, full.op_end_ns);
  }
  EXPECT_FALSE(SimulateWithin(plan, 2.5e-6).has_value());
  EXPECT_FALSE(SimulateWithin(plan, 0).has_value());
}

// SimulateWithin also gives up where the bytes no flow has started yet need
// more than the time left on some port at its peak: 20 copies of 1,000 B, one
// after another on GPU 0's stream (copy port 2 B/ns: 500 ns each, 10,000 ns).
// At a limit of 9.5 us the copy port's 20,000 B need 10,000 ns from t = 0, so
// no op even starts (the clock alone passes 9.5 us only at the last copy's
// end); at 10 us or more the prediction is Simulate's. A two-node plan's
// answers at limits around its time are Simulate's too: the plan's time
// decides, not how soon the run can tell.
TEST(Simulate, WithinALimitGivesUpOnceTheBytesLeftCannotEndBeforeIt) {
  struct Starts : SimObserver {
    int n = 0;
    void OnOpStart(int64_t, const Op&) override { ++n; }
  };
  PlanBuilder b(TestCluster());
  for (int i = 0; i < 20; ++i) b.Copy(0, 1000);
  const Plan copies = b.Build();
  ASSERT_EQ(Simulate(copies).time_ns, 10000);
  Starts starts;
  SimOptions o;
  o.observer = &starts;
  EXPECT_FALSE(SimulateWithin(copies, 9.5e-6, o).has_value());
  EXPECT_EQ(starts.n, 0);
  for (const double limit_s : {10e-6, 10.5e-6}) {
    const std::optional<Prediction> p = SimulateWithin(copies, limit_s, o);
    ASSERT_TRUE(p.has_value()) << limit_s;
    EXPECT_EQ(p->time_ns, 10000);
  }

  PlanBuilder t(TestCluster(2, 4, 2));
  for (int i = 0; i < 12; ++i) {
    const int32_t c = t.Copy(i % 8, 4000 + 1000 * i);
    t.Transfer(i % 8, (3 * i + 5) % 8, 3000 + 700 * i, {kStreamComm, -1, {c}}, {kStreamComm});
  }
  const Plan mixed = t.Build();
  const Prediction full = Simulate(mixed);
  for (double f = 0.5; f <= 1.5; f += 0.05) {
    const double limit_s = static_cast<double>(full.time_ns) * f * 1e-9;
    const std::optional<Prediction> p = SimulateWithin(mixed, limit_s);
    EXPECT_EQ(p.has_value(), static_cast<double>(full.time_ns) <= limit_s * 1e9 * (1 + 1e-12)) << f;
    if (p) {
      EXPECT_EQ(p->op_end_ns, full.op_end_ns) << f;
    }
  }
}

// The bytes a flow in flight has left count too. GPU 1 runs a chain of 2,000
// copies of 100 B (50 ns each, 0.1 ms); GPU 0's copy of 2,000,000 B (1 ms)
// waits for the chain's 1,000th copy, so it runs [0.05, 1.05] ms: the plan
// takes ~1.05 ms against a busiest port of 1 ms. At a limit 20 us below its
// time, the check at t = 0 passes (1 ms of bytes), and the next one, after
// 4,096 events, finds the big copy in flight with ~0.98 ms of bytes left:
// it gives up before the chain ends, where the clock alone would pass the
// limit only at the big copy's end.
TEST(Simulate, WithinALimitCountsTheBytesLeftOfFlowsInFlight) {
  struct Ends : SimObserver {
    int n = 0;
    void OnOpEnd(int64_t, const Op&, int64_t) override { ++n; }
  };
  PlanBuilder b(TestCluster());
  int32_t half = -1;
  for (int i = 0; i < 2000; ++i) {
    const int32_t c = b.Copy(1, 100);
    if (i == 999) half = c;
  }
  b.Copy(0, 2'000'000, {kStreamCompute, -1, {half}});
  const Plan plan = b.Build();
  const Prediction full = Simulate(plan);
  ASSERT_GT(full.time_ns, 1'040'000);
  const double limit_s = static_cast<double>(full.time_ns - 20'000) * 1e-9;
  Ends ends;
  SimOptions o;
  o.observer = &ends;
  EXPECT_FALSE(SimulateWithin(plan, limit_s, o).has_value());
  EXPECT_LT(ends.n, 2000);
  const std::optional<Prediction> p = SimulateWithin(plan, static_cast<double>(full.time_ns) * 1e-9);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->op_end_ns, full.op_end_ns);
}

TEST(Simulate, GroupIssuesTogetherAndEndsTogether) {
  // Group 7: GPU0 {send 1000 B to GPU1, recv 3000 B from GPU2 (deps: copy)},
  // GPU1 {recv}, GPU2 {send}. GPU0's copy of 4000 B at 2 B/ns ends at 2000, so
  // GPU0's launch issues at 2000 with both its ops, though the send itself
  // was ready at 0: send [2000, 3000], recv [2000, 5000] (separate ports).
  // GPU0's launch ends at 5000, so copy2 (deps: the send) starts at 5000, not
  // 3000: [5000, 5500]; send2 after the group on the comm stream: [5000, 6000].
  PlanBuilder b(TestCluster());
  const int32_t c0 = b.Copy(0, 4000);
  auto [s, sr] = b.Transfer(0, 1, 1000, {kStreamComm, 7}, {kStreamComm, 7});
  auto [rs, r] = b.Transfer(2, 0, 3000, {kStreamComm, 7}, {kStreamComm, 7, {c0}});
  const int32_t c2 = b.Copy(0, 1000, {kStreamCompute, -1, {s}});
  auto [s2, s2r] = b.Transfer(0, 3, 1000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_start_ns[s], 2000);
  EXPECT_EQ(p.op_end_ns[s], 3000);
  EXPECT_EQ(p.op_start_ns[sr], 0);  // GPU1's part of the group issued at once
  EXPECT_EQ(p.op_end_ns[sr], 3000);
  EXPECT_EQ(p.op_start_ns[rs], 0);
  EXPECT_EQ(p.op_end_ns[r], 5000);
  EXPECT_EQ(p.op_start_ns[c2], 5000);
  EXPECT_EQ(p.op_end_ns[c2], 5500);
  EXPECT_EQ(p.op_start_ns[s2], 5000);
  EXPECT_EQ(p.op_end_ns[s2], 6000);
  EXPECT_EQ(p.time_ns, 6000);
  (void)s2r;
}

TEST(Simulate, OpsOfOnePairRunOneAtATime) {
  // Group 3: GPU0 sends 1000 B then 3000 B to GPU1; GPU3 sends 2000 B to GPU2
  // (other ports); link latency 100 ns, 1 B/ns. The pair 0->1 runs its ops in
  // order: the first pays latency, then moves 1000 B: [0, 1100]; the second
  // pays its latency from 1100 and moves 3000 B: ends at 4200 (in parallel,
  // sharing GPU0's port, both would end by 100 + 4000 = 4100). 3->2: 100 +
  // 2000 = 2100.
  Cluster c = TestCluster();
  c.nvlink.latency_ns = 100;
  PlanBuilder b(c);
  auto [s1, r1] = b.Transfer(0, 1, 1000, {kStreamComm, 3}, {kStreamComm, 3});
  auto [s2, r2] = b.Transfer(0, 1, 3000, {kStreamComm, 3}, {kStreamComm, 3});
  auto [s3, r3] = b.Transfer(3, 2, 2000, {kStreamComm, 3}, {kStreamComm, 3});
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[s1], 1100);
  EXPECT_EQ(p.op_end_ns[r1], 1100);
  EXPECT_EQ(p.op_end_ns[s2], 4200);
  EXPECT_EQ(p.op_end_ns[r2], 4200);
  EXPECT_EQ(p.op_end_ns[s3], 2100);
  EXPECT_EQ(p.op_end_ns[r3], 2100);
  EXPECT_EQ(p.time_ns, 4200);
}

TEST(Simulate, BothWaysUsesTheDuplexRamp) {
  // NVLink 1 byte/ns one way; both ways each direction reaches 0.5 of it at
  // any size (duplex_efficiency flat 0.5). 0->1 1000 B and 1->0 3000 B at
  // once: both at 0.5 B/ns until 0->1 ends at 1000 / 0.5 = 2000 ns; 1->0 then
  // runs alone at 1 B/ns for its last 2000 bytes: ends at 4000 ns.
  Cluster c = TestCluster();
  c.nvlink.duplex_efficiency = {{1, 0.5}};
  const auto [p, forth, back] = SimulateGroupOfTwo(c, {0, 1, 1000}, {1, 0, 3000});
  EXPECT_EQ(p.op_end_ns[forth.first], 2000);
  EXPECT_EQ(p.op_end_ns[back.first], 4000);
}

TEST(Simulate, SelfSendIsADeviceCopy) {
  // An ungrouped send/recv to self is one launch and one flow on gpu2.copy
  // (2 B/ns): 4000 B take 2000 ns; bytes count as local.
  PlanBuilder b(TestCluster());
  auto [s, r] = b.Transfer(2, 2, 4000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[s], 2000);
  EXPECT_EQ(p.op_end_ns[r], 2000);
  EXPECT_EQ(p.bytes_moved, (BytesMoved{4000, 0, 0, 0}));
  ASSERT_EQ(p.ports.size(), 1u);
  EXPECT_EQ(p.ports[0].name, "gpu2.copy");
}

TEST(Simulate, DeadlockIsReported) {
  // GPU0: send to 1 then recv from 1; GPU1: send to 0 then recv from 0, each
  // op a launch of its own on one stream: both sends wait for recvs queued
  // behind them.
  PlanBuilder b(TestCluster());
  auto [s01, r01] = b.Transfer(0, 1, 100, {kStreamComm}, {kStreamComm});
  auto [s10, r10] = b.Transfer(1, 0, 100, {kStreamComm}, {kStreamComm});
  Plan p = b.Build();
  // Put the recvs after the sends on their streams (ops keep their ids).
  std::swap(p.ops[r01], p.ops[s10]);
  for (int32_t i = 0; i < static_cast<int32_t>(p.ops.size()); ++i) p.ops[i].id = i;
  for (Op& op : p.ops) op.match = op.match == r01 ? s10 : op.match == s10 ? r01 : op.match;
  try {
    Simulate(p);
    FAIL() << "expected a deadlock";
  } catch (const InputError& e) {
    EXPECT_NE(e.problem().find("deadlocks"), std::string::npos) << e.what();
  }
  (void)s01, (void)r10;
}

// ---------------------------------------------------------------------------
// Memory

struct MemoryLog : SimObserver {
  std::map<int32_t, std::vector<std::pair<int64_t, int64_t>>> by_gpu;  // (t, bytes)
  void OnMemory(int64_t t, int32_t gpu, int64_t bytes) override { by_gpu[gpu].emplace_back(t, bytes); }
};

TEST(Simulate, MemoryPeakOfOverlappedAllocs) {
  // GPU0: CUDA context 50 B, preexisting device buffer P (500 B), host H.
  // compute: alloc A (1000) at 0; offload A -> H, 1000 B over PCIe d2h [0, 1000]; free A at 1000.
  // host:    reload H -> P, 500 B over PCIe h2d [0, 500]; alloc B (700) at 500;
  //          reload H -> B, 700 B [500, 1200]; free B at 1200.
  // (The reloads read bytes of H the offload does not write: H is 2500 B.)
  // GPU0 bytes: 550 at 0, +A 1550, +B at 500: 2250 (peak), -A at 1000: 1250, -B at 1200: 550.
  Cluster c = TestCluster();
  c.overheads.cuda_context_bytes = 50;
  // The plan above; with `b_waits_for_a`, B's alloc depends on A's free.
  auto build = [&](bool b_waits_for_a) {
    PlanBuilder b(c);
    const int32_t P = b.Buffer(0, 500, true);
    const int32_t H = b.Buffer(0, 2500, true, MemorySpace::kHost);
    const int32_t A = b.Buffer(0, 1000, false);
    const int32_t B = b.Buffer(0, 700, false);
    b.Alloc(A, {kStreamCompute});
    b.Offload(0, ContiguousRegion(A, 0, 1000), ContiguousRegion(H, 0, 1000), {kStreamCompute});
    const int32_t free_a = b.Free(A, {kStreamCompute});
    b.Reload(0, ContiguousRegion(H, 1700, 500), ContiguousRegion(P, 0, 500), {kStreamHost});
    b.Alloc(B, {kStreamHost, -1, b_waits_for_a ? std::vector<int32_t>{free_a} : std::vector<int32_t>{}});
    b.Reload(0, ContiguousRegion(H, 1000, 700), ContiguousRegion(B, 0, 700), {kStreamHost});
    b.Free(B, {kStreamHost});
    return b.Build();
  };
  MemoryLog log;
  const Prediction p = SimVerified(build(false), &log);
  EXPECT_EQ(p.time_ns, 1200);
  EXPECT_EQ(p.peak_bytes, (std::vector<int64_t>{2250, 50, 50, 50}));
  EXPECT_EQ(p.peak_host_bytes, (std::vector<int64_t>{2500}));
  const std::vector<std::pair<int64_t, int64_t>> want{{0, 550}, {0, 1550}, {500, 2250}, {1000, 1250}, {1200, 550}};
  EXPECT_EQ(log.by_gpu[0], want);

  // The same with B allocated only after A is freed (a dependency): the peak
  // is 550 + 1000 = 1550 (A alone), B then adds 700 to 550.
  EXPECT_EQ(SimVerified(build(true)).peak_bytes[0], 1550);
}

TEST(Simulate, AtOneInstantFlowEndsRunByFlowIdAndTheirFollowersInThatOrder) {
  // GPU0, no CUDA context, 3000 B of preexisting pools (the copies read the
  // same 1000 B and write 1000 B each); alloc X (500 B) at 0 on
  // the comm stream. Two 1000 B copies, ready at 0, share gpu0.copy (2 B/ns):
  // 1 B/ns each, both end at 1000. Copy K (compute stream) is followed by
  // alloc Y (700 B) then free Y; copy F (host stream) by free X. Flows are
  // numbered as the copies are issued at 0 (by first op id), ends at one
  // instant run by flow id, and each end's followers are issued in that order:
  //   K first: +Y 4200 (peak), -X 3700, -Y 3000 (free Y was queued last);
  //   F first: -X 3000, +Y 3700 (peak), -Y 3000.
  // Memory at t = 0: 3000 + X = 3500.
  auto build = [](bool k_first) {
    Cluster c = TestCluster();
    c.overheads.cuda_context_bytes = 0;
    PlanBuilder b(c);
    const int32_t X = b.Buffer(0, 500, false), Y = b.Buffer(0, 700, false);
    const int32_t alloc_x = b.Alloc(X, {kStreamComm});
    auto k_side = [&]() {
      b.Copy(0, 1000, {kStreamCompute});
      b.Alloc(Y, {kStreamCompute});
      b.Free(Y, {kStreamCompute});
    };
    auto f_side = [&]() {
      b.Copy(0, 1000, {kStreamHost});
      b.Free(X, {kStreamHost, -1, {alloc_x}});
    };
    if (k_first) {
      k_side();
      f_side();
    } else {
      f_side();
      k_side();
    }
    return b.Build();
  };
  const Prediction k = SimVerified(build(true));
  EXPECT_EQ(k.time_ns, 1000);
  EXPECT_EQ(k.peak_bytes[0], 4200);
  const Prediction f = SimVerified(build(false));
  EXPECT_EQ(f.time_ns, 1000);
  EXPECT_EQ(f.peak_bytes[0], 3700);
}

TEST(Simulate, NcclMemoryPerNewPeer) {
  // nccl_bytes_per_peer = 10. GPU0 sends to GPU1 twice and to GPU2 once, and
  // receives from GPU3; GPU1 also sends to itself (not a peer). Peers:
  // GPU0 {1, 2, 3} = 30 B; GPU1 {0} = 10; GPU2 {0} = 10; GPU3 {0} = 10.
  // Compared with the same plan at 0 bytes per peer (pools are the same).
  auto build = [](int64_t per_peer) {
    Cluster c = TestCluster();
    c.overheads.nccl_bytes_per_peer = per_peer;
    PlanBuilder b(c);
    b.Transfer(0, 1, 100);
    b.Transfer(0, 1, 100);
    b.Transfer(0, 2, 100);
    b.Transfer(3, 0, 100);
    b.Transfer(1, 1, 100);
    return b.Build();
  };
  const Prediction with = SimVerified(build(10)), without = SimVerified(build(0));
  ASSERT_EQ(with.peak_bytes.size(), 4u);
  const std::vector<int64_t> want{30, 10, 10, 10};
  for (int g = 0; g < 4; ++g) EXPECT_EQ(with.peak_bytes[g] - without.peak_bytes[g], want[g]) << "gpu " << g;
  EXPECT_EQ(with.time_ns, without.time_ns);
}

// ---------------------------------------------------------------------------
// Properties

// A random valid plan: rounds of send/recv pairs (one group per round, comm
// stream), copies, offloads and reloads, alloc/free pairs; deps only on
// earlier ops, so it cannot deadlock. Random latencies, duplex rates and
// efficiency curves.
Plan RandomPlan(uint32_t seed) {
  std::mt19937 rng(seed);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Cluster c = TestCluster(static_cast<int32_t>(uni(1, 3)), static_cast<int32_t>(uni(1, 4)), static_cast<int32_t>(uni(1, 2)));
  for (LinkProfile* l : {&c.nvlink, &c.network, &c.pcie, &c.device_copy}) {
    l->bytes_per_s = static_cast<double>(uni(1, 40)) * 0.25e9;
    l->latency_ns = uni(0, 3) == 0 ? 0 : uni(0, 2000);
    l->duplex_bytes_per_s = uni(0, 1) ? l->bytes_per_s * static_cast<double>(uni(3, 10)) / 10.0 : 0;
    if (uni(0, 1)) l->efficiency = {{uni(100, 1000), static_cast<double>(uni(1, 5)) / 10.0}, {uni(2000, 100'000), 1.0}};
  }
  c.overheads.nccl_bytes_per_peer = uni(0, 100);
  PlanBuilder b(c);
  const int32_t gpus = c.Gpus();
  std::vector<int32_t> ops;
  auto some_deps = [&]() {
    std::vector<int32_t> d;
    const int64_t n = ops.empty() ? 0 : uni(0, 2);
    for (int64_t k = 0; k < n; ++k) d.push_back(ops[uni(0, static_cast<int64_t>(ops.size()) - 1)]);
    std::sort(d.begin(), d.end());
    d.erase(std::unique(d.begin(), d.end()), d.end());
    return d;
  };
  int32_t group = 0;
  const int64_t steps = uni(5, 40);
  for (int64_t step = 0; step < steps; ++step) {
    const int32_t g = static_cast<int32_t>(uni(0, gpus - 1));
    switch (uni(0, 5)) {
      case 0:
      case 1: {  // a round of pairs in one group
        const int64_t pairs = uni(1, 4);
        std::vector<std::pair<int32_t, int32_t>> made;
        for (int64_t k = 0; k < pairs; ++k) {
          const int32_t src = static_cast<int32_t>(uni(0, gpus - 1)), dst = static_cast<int32_t>(uni(0, gpus - 1));
          made.push_back(b.Transfer(src, dst, uni(1, 50'000), {kStreamComm, group, some_deps()}, {kStreamComm, group}));
        }
        for (auto [s, r] : made) ops.push_back(s), ops.push_back(r);
        ++group;
        break;
      }
      case 2: ops.push_back(b.Copy(g, uni(0, 50'000), {kStreamCompute, -1, some_deps()})); break;
      case 3: ops.push_back(b.OffloadBytes(g, uni(1, 50'000), {kStreamHost, -1, some_deps()})); break;
      case 4: ops.push_back(b.ReloadBytes(g, uni(1, 50'000), {kStreamHost, -1, some_deps()})); break;
      case 5: {
        const int32_t buf = b.Buffer(g, uni(1, 10'000), false);
        const int32_t s = static_cast<int32_t>(uni(0, 2));
        const int32_t a = b.Alloc(buf, {s, -1, some_deps()});
        ops.push_back(b.Free(buf, {s, -1, {a}}));
        break;
      }
    }
  }
  return b.Build();
}

TEST(Properties, PredictionIsNeverBelowTheLowerBound) {
  for (uint32_t seed = 1; seed <= 300; ++seed) {
    const Plan plan = RandomPlan(seed);
    const VerifyResult v = Verify(plan);
    ASSERT_TRUE(v.ok()) << "seed " << seed << ": " << v.problems.front();
    const Prediction p = Simulate(plan);
    const PortBound lb = LowerBound(plan);
    EXPECT_DOUBLE_EQ(p.routing_bound_s, lb.time_s);
    // Flow ends are rounded up to whole ns; 1 ns of slack covers floating noise.
    EXPECT_GE(p.time_ns + 1, static_cast<int64_t>(lb.time_s * 1e9)) << "seed " << seed << " bound port " << lb.port_name;
    for (int32_t i = 0; i < static_cast<int32_t>(plan.ops.size()); ++i) {
      ASSERT_GE(p.op_end_ns[i], p.op_start_ns[i]) << "seed " << seed << " op " << i;
    }
  }
}

bool SamePrediction(const Prediction& a, const Prediction& b) {
  return a.time_ns == b.time_ns && a.peak_bytes == b.peak_bytes && a.peak_host_bytes == b.peak_host_bytes &&
         a.bytes_moved == b.bytes_moved && a.events == b.events && a.op_start_ns == b.op_start_ns &&
         a.op_end_ns == b.op_end_ns && a.ports.size() == b.ports.size() &&
         std::equal(a.ports.begin(), a.ports.end(), b.ports.begin(),
                    [](const PortUse& x, const PortUse& y) { return x.name == y.name && x.bytes == y.bytes && x.busy_ns == y.busy_ns; });
}

TEST(Properties, TwoSimulatorsOnTwoThreadsAgree) {
  const Plan a = RandomPlan(7), b = RandomPlan(8);
  const Prediction ra = Simulate(a), rb = Simulate(b);
  Prediction ta1, ta2, tb;
  std::thread t1([&] { ta1 = Simulator(a).Run(); tb = Simulator(b).Run(); });
  std::thread t2([&] { ta2 = Simulate(a); });
  t1.join();
  t2.join();
  EXPECT_TRUE(SamePrediction(ra, ta1));
  EXPECT_TRUE(SamePrediction(ra, ta2));
  EXPECT_TRUE(SamePrediction(rb, tb));
  EXPECT_FALSE(SamePrediction(ra, rb));  // the check can fail
}

// ---------------------------------------------------------------------------
// Trace

TEST(Trace, IsValidJsonWithTheExpectedTracks) {
  PlanBuilder b(TestCluster());
  const int32_t c0 = b.Copy(0, 1000);
  auto [s, r] = b.Transfer(0, 1, 1000, {kStreamComm, -1, {c0}}, {kStreamComm});
  b.OffloadBytes(1, 1000, {kStreamHost, -1, {r}});
  const Plan plan = b.Build();
  std::ostringstream out;
  ChromeTraceWriter writer(out);
  const Prediction traced = SimVerified(plan, &writer);
  EXPECT_TRUE(SamePrediction(traced, Simulate(plan)));  // tracing changes nothing

  const nlohmann::json j = nlohmann::json::parse(out.str());
  ASSERT_TRUE(j.contains("traceEvents"));
  std::set<std::pair<int, int>> threads;
  std::set<std::string> counters;
  std::map<int, int> memory_counters;
  int slices = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") threads.emplace(e["pid"], e["tid"]);
    if (ph == "X") {
      ++slices;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
    if (ph == "C" && e["name"] == "memory") ++memory_counters[e["pid"].get<int>()];
    if (ph == "C" && e["pid"] == plan.Gpus()) counters.insert(e["name"].get<std::string>());
  }
  EXPECT_EQ(threads, (std::set<std::pair<int, int>>{{0, kStreamCompute}, {0, kStreamComm}, {1, kStreamComm}, {1, kStreamHost}}));
  EXPECT_EQ(slices, static_cast<int>(plan.ops.size()));
  EXPECT_EQ(counters, (std::set<std::string>{"gpu0.copy", "gpu0.nvlink_out", "gpu1.nvlink_in", "gpu1.pcie_d2h"}));
  for (int g = 0; g < plan.Gpus(); ++g) EXPECT_GE(memory_counters[g], 1) << "gpu " << g;
  (void)s;
}

// Slices on one track must nest (Perfetto rejects partial overlaps): a group
// launch's ops start together, the longest must come first.
TEST(Trace, SlicesNestOnEveryTrack) {
  PlanBuilder b(TestCluster());
  const Opts g{kStreamComm, 3};
  b.Transfer(0, 1, 1000, g, g);
  b.Transfer(2, 0, 3000, g, g);
  b.Transfer(0, 3, 2000, g, g);
  const int32_t buf = b.Buffer(0, 64, false);
  b.Alloc(buf, {kStreamComm});
  b.Free(buf, {kStreamComm});
  b.Copy(0, 4000);
  const Plan plan = b.Build();
  std::ostringstream out;
  ChromeTraceWriter writer(out);
  SimVerified(plan, &writer);
  const nlohmann::json j = nlohmann::json::parse(out.str());
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> tracks;  // (ts, end) in file order
  int alloc_bytes = -1;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const double ts = e["ts"], dur = e["dur"];
    tracks[{e["pid"], e["tid"]}].emplace_back(ts, ts + dur);
    if (e["cat"] == "alloc") alloc_bytes = e["args"]["bytes"];
  }
  EXPECT_EQ(alloc_bytes, 64);
  for (const auto& [track, slices] : tracks) {
    // In file order, each slice starts after the open ones closed, or lies
    // inside the innermost open one. A slice ending at `ts` that began before
    // it is closed; a zero-length slice at `ts` is not (a longer slice at the
    // same ts must come first).
    std::vector<std::pair<double, double>> open;
    for (auto [ts, end] : slices) {
      while (!open.empty() && (open.back().second < ts || (open.back().second == ts && open.back().first < ts))) {
        open.pop_back();
      }
      if (!open.empty()) {
        EXPECT_LE(end, open.back().second) << "track " << track.first << "/" << track.second << " slice at " << ts;
      }
      open.emplace_back(ts, end);
    }
  }
  EXPECT_EQ(tracks[std::make_pair(0, kStreamComm)].size(), 5u);  // GPU0: 3 ops of the group + alloc + free
}

TEST(Trace, PredictionJsonHasDesignFields) {
  PlanBuilder b(TestCluster());
  b.Transfer(0, 1, 1000);
  nlohmann::json j = SimVerified(b.Build());
  for (const char* k : {"time_s", "peak_bytes", "bytes_moved", "lower_bound_s", "plan_efficiency", "routing_bound_s", "links", "phases"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["bytes_moved"]["nvlink"], 1000);
  EXPECT_EQ(j["peak_bytes"].size(), 4u);
}

}  // namespace
}  // namespace reshard
