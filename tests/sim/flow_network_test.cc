// FlowNetwork (sim/state.h) against a direct statement of what it must
// compute. After every Recompute at time t: each active flow's rate is, bit
// for bit, its rate in MaxMinFairRates over all active flows at once (the
// components are independent, the water-filling does not depend on the
// order flows and ports are listed in, and a big component's re-sharing of
// only the part a change can reach gives the same rates); a flow whose rate
// changed, and only such a flow, settled its bytes at its old rate and got
// the end t + CeilNs(bytes left, rate). Random starts, stops and cap changes
// on real clusters, including ones whose NICs form one component of
// thousands of flows that is split and joined again (the component
// FlowNetwork keeps between calls, re-shared in parts). And two cases solved
// by hand: the re-share grid, and a change re-shared only where it reaches.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <vector>

#include "model/cluster.h"
#include "sim/max_min.h"
#include "sim/ports.h"
#include "sim/state.h"

namespace reshard::sim_internal {
namespace {

struct Expected {
  double remaining = 0, rate = 0;
  int64_t last_ns = 0, finish_ns = -1;
};

class Checker {
 public:
  Checker(const std::string& preset, int32_t nodes) : cluster_(Preset(preset, nodes)), model_(cluster_) {
    net_.Init(model_, nullptr, 1 << 20);
  }

  const PortModel& model() const { return model_; }
  int32_t Gpus() const { return cluster_.Gpus(); }
  size_t Active() const { return expected_.size(); }
  int64_t LocalUpdates() const { return net_.local_updates; }

  // Route of a transfer a -> b as the simulator builds it (NVLink also loads
  // both copy ports).
  Route Transfer(int32_t a, int32_t b) const {
    Route r = model_.Transfer(a, b);
    if (r.link_class == LinkClass::kNvlink) {
      for (int32_t g : {a, b}) r.ports[r.num_ports++] = model_.DeviceCopy(g).ports[0];
    }
    return r;
  }

  int32_t Start(const Route& r, int64_t bytes, double cap, int64_t t) {
    Flow f;
    f.route = r;
    f.bytes = bytes;
    f.cap = cap;
    const int32_t id = net_.Add(f);
    net_.Start(id, t);
    expected_[id] = Expected{static_cast<double>(bytes), 0, t, -1};
    return id;
  }
  void Stop(int32_t id, int64_t t) {
    net_.Stop(id, t);
    expected_.erase(id);
  }
  void SetCap(int32_t id, double cap) {
    net_.SetCap(id, cap);
  }
  // Up to `n` active network flows whose ends `group` puts in different groups.
  template <typename Group>
  std::vector<int32_t> CrossingFlows(Group group, int n) const {
    std::vector<int32_t> out;
    for (const auto& [id, e] : expected_) {
      if (static_cast<int>(out.size()) >= n) break;
      const Route& r = net_.flows[id].route;
      if (r.link_class != LinkClass::kNetwork) continue;
      // NIC ports are numbered after the GPUs' (sim/ports.h); one NIC per GPU here.
      const int32_t a = model_.Owner(r.ports[0]), b = model_.Owner(r.ports[1]);
      if (group(a) != group(b)) out.push_back(id);
    }
    return out;
  }
  int32_t RandomActive(std::mt19937& rng) const {
    auto it = expected_.begin();
    std::advance(it, std::uniform_int_distribution<size_t>(0, expected_.size() - 1)(rng));
    return it->first;
  }

  // Recompute at t and compare everything with the statement above.
  void Recompute(int64_t t, const std::string& where) {
    net_.Recompute(t);
    const int32_t np = model_.NumPorts();

    // Rates of all active flows as one problem.
    std::vector<SharedPort> ports(np);
    for (int32_t q = 0; q < np; ++q) {
      const PortState& p = net_.ports[q];
      const bool both = p.coupled && !p.flows.empty() && !net_.ports[p.reverse].flows.empty();
      ports[q] = SharedPort{both ? p.duplex : p.peak, p.peak * 1e-12, q};
    }
    std::vector<SharedFlow> flows;
    std::vector<int32_t> ids;
    for (const auto& [id, e] : expected_) {
      const Flow& f = net_.flows[id];
      SharedFlow s;
      s.num_ports = f.route.num_ports;
      for (int32_t k = 0; k < s.num_ports; ++k) s.ports[k] = f.route.ports[k];
      s.cap = f.cap;
      s.tie_id = id;
      flows.push_back(s);
      ids.push_back(id);
    }
    const std::vector<double> rates = MaxMinFairRates(flows, ports);
    for (size_t i = 0; i < ids.size(); ++i) {
      Expected& e = expected_[ids[i]];
      if (rates[i] != e.rate || e.finish_ns < 0) {
        e.remaining = std::max(0.0, e.remaining - e.rate * static_cast<double>(t - e.last_ns));
        e.last_ns = t;
        e.rate = rates[i];
        e.finish_ns = t + CeilNs(e.remaining, e.rate);
      }
      ASSERT_EQ(net_.Rate(ids[i]), e.rate) << where << " flow " << ids[i];
      ASSERT_EQ(net_.Remaining(ids[i]), e.remaining) << where << " flow " << ids[i];
      ASSERT_EQ(net_.FinishNs(ids[i]), e.finish_ns) << where << " flow " << ids[i];
    }
    // The next end: the smallest (end, flow id).
    if (expected_.empty()) {
      EXPECT_TRUE(net_.ends.Empty()) << where;
    } else {
      int32_t first = -1;
      for (const auto& [id, e] : expected_)
        if (first < 0 || e.finish_ns < expected_[first].finish_ns) first = id;
      ASSERT_FALSE(net_.ends.Empty()) << where;
      EXPECT_EQ(net_.ends.Top(), first) << where;
      EXPECT_EQ(net_.ends.TopKey(), expected_[first].finish_ns) << where;
    }
  }

 private:
  static Cluster Preset(const std::string& name, int32_t nodes) {
    Cluster c = ClusterPreset(name);
    c.nodes = nodes;
    return c;
  }

  Cluster cluster_;
  PortModel model_;
  FlowNetwork net_;
  std::map<int32_t, Expected> expected_;  // by flow id
};

// Caps around the ports' rates: some bind, some do not; a few equal.
double RandomCap(std::mt19937& rng, const PortModel& m, const Route& r) {
  double peak = 1e300;
  for (int32_t k = 0; k < r.num_ports; ++k) peak = std::min(peak, m.BytesPerS(r.ports[k]) / kNsPerS);
  const int pick = std::uniform_int_distribution<int>(0, 9)(rng);
  if (pick == 0) return peak / 4;
  return peak * std::uniform_real_distribution<double>(0.01, 1.5)(rng);
}

// Copies, offloads and transfers of every class on two DGX H100 nodes:
// many small components, NVLink and copy ports coupled, caps that bind.
TEST(FlowNetwork, MatchesMaxMinAndSettlesChangedFlows) {
  Checker c("dgx-h100", 2);
  std::mt19937 rng(11);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  int64_t t = 0;
  for (int step = 0; step < 1500; ++step) {
    t += uni(0, 3) == 0 ? 0 : uni(1, 5000);
    const int ops = uni(1, 4);
    for (int o = 0; o < ops; ++o) {
      const int what = c.Active() == 0 ? 0 : uni(0, 9);
      if (what <= 4) {
        Route r;
        const int32_t g = uni(0, c.Gpus() - 1);
        switch (uni(0, 4)) {
          case 0: r = c.model().DeviceCopy(g); break;
          case 1: r = c.model().Offload(g); break;
          case 2: r = c.model().Reload(g); break;
          default: r = c.Transfer(g, uni(0, c.Gpus() - 1)); break;
        }
        c.Start(r, uni(1, 1 << 26), RandomCap(rng, c.model(), r), t);
      } else if (what <= 7) {
        c.Stop(c.RandomActive(rng), t);
      } else {
        const int32_t id = c.RandomActive(rng);
        c.SetCap(id, RandomCap(rng, c.model(), c.Transfer(0, 1)));
      }
    }
    c.Recompute(t, "step " + std::to_string(step));
    if (HasFatalFailure()) return;
  }
}

// Network transfers among 128 GPUs: the NICs form components of thousands
// of flows. Phases where flows cross the whole cluster (components join)
// alternate with phases where new flows stay inside groups of 4 nodes and
// the flows between groups stop (the big component splits, one link at a
// time at the end).
TEST(FlowNetwork, KeepsLargeComponentsExact) {
  Checker c("dgx-h100", 16);
  std::mt19937 rng(7);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr int32_t kPerNode = 8, kGroupNodes = 4;
  auto group_of = [&](int32_t gpu) { return gpu / kPerNode / kGroupNodes; };
  int64_t t = 0;
  for (int step = 0; step < 600; ++step) {
    t += uni(1, 20000);
    const bool split = (step / 100) % 2 == 1;
    const int32_t target = 1200;
    // Start flows (inside a group while splitting), stop random ones.
    for (int o = 0; o < 6 || static_cast<int32_t>(c.Active()) < target / 2; ++o) {
      if (static_cast<int32_t>(c.Active()) < target && uni(0, 2) != 0) {
        // b on another node: anywhere, or (splitting) in a's group.
        const int32_t a = uni(0, c.Gpus() - 1);
        const int32_t span = split ? kGroupNodes * kPerNode : c.Gpus(), base = split ? a - a % span : 0;
        int32_t b = base + uni(0, span - 1);
        if (a / kPerNode == b / kPerNode) b = base + (b - base + kPerNode) % span;
        const Route r = c.Transfer(a, b);
        c.Start(r, uni(1 << 10, 1 << 24), RandomCap(rng, c.model(), r), t);
      } else if (c.Active() > 0) {
        c.Stop(c.RandomActive(rng), t);
      }
    }
    // While splitting, flows between groups stop, a few per step.
    if (split) {
      for (int32_t id : c.CrossingFlows(group_of, uni(0, 8))) c.Stop(id, t);
    }
    c.Recompute(t, "step " + std::to_string(step));
    if (HasFatalFailure()) return;
  }
}

// A big component whose bottlenecks are the receiving NICs: 14 nodes send
// to the 16 NICs of 2 (~70 flows per receiving NIC, ~10 per sending one), so
// a start or end changes the rates on one receiving NIC, and the part is
// re-shared alone; some caps bind, some re-capped flows cross saturated
// ports, some flows stop while saturated. Rates stay bit for bit the whole
// problem's.
TEST(FlowNetwork, ResharesOnlyThePartAChangeReaches) {
  Checker c("dgx-h100", 16);
  std::mt19937 rng(5);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  constexpr int32_t kPerNode = 8, kTarget = 1100;
  int64_t t = 0;
  for (int step = 0; step < 400; ++step) {
    t += uni(1, 20000);
    for (int o = 0; o < 4 || static_cast<int32_t>(c.Active()) < kTarget; ++o) {
      const int what = uni(0, 9);
      if (static_cast<int32_t>(c.Active()) < kTarget && what < 5) {
        const int32_t a = uni(2 * kPerNode, c.Gpus() - 1), b = uni(0, 2 * kPerNode - 1);
        const Route r = c.Transfer(a, b);
        const double cap = uni(0, 3) == 0 ? RandomCap(rng, c.model(), r) : 1e300;
        c.Start(r, uni(1 << 10, 1 << 24), cap, t);
      } else if (what < 8 && c.Active() > 0) {
        c.Stop(c.RandomActive(rng), t);
      } else if (c.Active() > 0) {
        const int32_t id = c.RandomActive(rng);
        c.SetCap(id, RandomCap(rng, c.model(), c.Transfer(2 * kPerNode, 0)));
      }
    }
    c.Recompute(t, "step " + std::to_string(step));
    if (HasFatalFailure()) return;
  }
  EXPECT_GT(c.LocalUpdates(), 100);  // the big component was re-shared in parts
}

}  // namespace
}  // namespace reshard::sim_internal

namespace reshard::sim_internal {
namespace {

// Two dgx-h100 nodes whose network runs 60 bytes/ns one way (no duplex
// limit), for flows of 10^6 bytes between GPUs' NICs (one NIC per GPU).
struct TwoNodes {
  Cluster cluster;
  PortModel model;
  FlowNetwork net;
  explicit TwoNodes(int64_t share_grid_ns, int32_t grid_flows = 0, double grid_lives = 0)
      : cluster(Network60()), model(cluster) {
    net.Init(model, nullptr, 1024, share_grid_ns, grid_flows, grid_lives);
  }
  static Cluster Network60() {
    Cluster c = ClusterPreset("dgx-h100");
    c.nodes = 2;
    c.network.bytes_per_s = 60e9;
    c.network.duplex_bytes_per_s = 0;
    return c;
  }
  int32_t Start(int32_t a, int32_t b, double cap, int64_t t, int64_t bytes = 1'000'000) {
    Flow f;
    f.route = model.Transfer(a, b);
    f.bytes = bytes;
    f.cap = cap;
    const int32_t id = net.Add(f);
    net.Start(id, t);
    return id;
  }
};

// The re-share grid (SimOptions::share_grid_ns = 1000 ns). 600 flows of
// 10^6 bytes from NIC 0 to the NIC of GPU 8 at 60 bytes/ns: one component
// of >= 512 flows, both NIC ports saturated at 0.1 bytes/ns a flow. A 601st
// flow starting at 1,500 ns reaches every flow through the two saturated
// ports, so the re-share waits for the grid point 2,000 ns:
//   1,500 ns: the new flow's rate is 0, the others keep 0.1;
//   2,000 ns: every flow at 60/601 bytes/ns. The old flows have
//     10^6 - 0.1 x 2,000 = 999,800 bytes left: 999,800 x 601 / 60 =
//     10,014,663.3 ns, ending at 2,000 + 10,014,664 = 10,016,664 ns; the new
//     one 10^6 x 601 / 60 = 10,016,666.7 ns, ending at 10,018,667 ns.
// Without the grid it would end at 1,500 + 10,016,667 = 10,018,167 ns: the
// grid delays it by the 500 ns it waited, no more.
TEST(FlowNetwork, BigComponentReachedEverywhereIsResharedOnTheGrid) {
  TwoNodes two(/*share_grid_ns=*/1000);
  FlowNetwork& net = two.net;
  ASSERT_EQ(two.model.Transfer(0, 8).link_class, LinkClass::kNetwork);
  auto start = [&](int64_t t) { return two.Start(0, 8, 1e300, t); };
  for (int i = 0; i < 600; ++i) start(0);
  net.Recompute(0);
  EXPECT_DOUBLE_EQ(net.Rate(0), 0.1);
  const int32_t late = start(1500);
  net.Recompute(1500);
  EXPECT_EQ(net.DueNs(), 2000);
  EXPECT_EQ(net.Rate(late), 0.0);
  EXPECT_DOUBLE_EQ(net.Rate(0), 0.1);
  net.Recompute(2000);
  EXPECT_EQ(net.DueNs(), -1);
  EXPECT_DOUBLE_EQ(net.Rate(late), 60.0 / 601);
  EXPECT_DOUBLE_EQ(net.Rate(0), 60.0 / 601);
  EXPECT_EQ(net.FinishNs(0), 10'016'664);
  EXPECT_EQ(net.FinishNs(late), 10'018'667);
  EXPECT_EQ(net.ends.TopKey(), 10'016'664);
}

// While the re-share waits for the grid, a flow that starts runs on what its
// ports have free (FlowNetwork::RunOnFreeBandwidth). The 600 flows of the
// test above, NIC 0 -> NIC 8 at 0.1 bytes/ns each (60 of 60: both NIC ports
// saturated). At 1,500 ns flow 0 ends and the next transfer on the same pair
// starts: the change reaches every flow, so the re-share waits for 2,000 ns,
// but the new flow takes the 60 - 599 x 0.1 = 0.1 bytes/ns flow 0 left at
// once and ends at 1,500 + 10^6 / 0.1 = 10,001,500 ns, as under the exact
// rule (on rate 0 until the grid point it would end at 10,002,000). At 2,000
// ns the re-share gives every flow 60/600 = 0.1 again: no end moves. A flow
// that starts while both ports are saturated still waits (rate 0).
TEST(FlowNetwork, AFlowStartingWhileTheReshareWaitsRunsOnWhatAnEndedFlowLeft) {
  TwoNodes two(/*share_grid_ns=*/1000);
  FlowNetwork& net = two.net;
  auto start = [&](int64_t t) { return two.Start(0, 8, 1e300, t); };
  for (int i = 0; i < 600; ++i) start(0);
  net.Recompute(0);
  ASSERT_DOUBLE_EQ(net.Rate(1), 0.1);
  ASSERT_EQ(net.FinishNs(1), 10'000'000);
  net.Stop(0, 1500);
  const int32_t next = start(1500);
  net.Recompute(1500);
  EXPECT_EQ(net.DueNs(), 2000);
  EXPECT_NEAR(net.Rate(next), 0.1, 1e-9);
  EXPECT_NEAR(net.FinishNs(next), 10'001'500, 1);  // the free rate is 60 less a sum of 599 rates
  EXPECT_DOUBLE_EQ(net.Rate(1), 0.1);
  const int32_t waits = start(1700);  // nothing left free
  net.Recompute(1700);
  EXPECT_EQ(net.DueNs(), 2000);
  EXPECT_EQ(net.Rate(waits), 0.0);
  net.Recompute(2000);
  EXPECT_EQ(net.DueNs(), -1);
  // 601 flows now: 60/601 each.
  EXPECT_DOUBLE_EQ(net.Rate(next), 60.0 / 601);
  EXPECT_DOUBLE_EQ(net.Rate(waits), 60.0 / 601);
}

// Another component than the big one waits for the grid where it has at
// least grid_flows (256) flows with on average at least grid_lives (64) grids
// left (SimOptions::share_grid_flows, share_grid_lives). Grid 1,000 ns; n
// flows NIC 0 -> NIC 8 at t = 0 (on the grid: shared at once, 60/n bytes/ns
// each), then two more at 1,500 ns:
//  * 300 flows of 10^6 bytes (0.2 bytes/ns, ending at 5,000,000 ns: 4,998,500
//    ns = 4,998.5 grids left): the component of 302 flows waits for 2,000 ns;
//    the new flows find both NIC ports saturated and wait at rate 0. At 2,000
//    ns every flow runs at 60/302: an old one has 10^6 - 0.2 x 2,000 = 999,600
//    bytes left, x 302/60 = 5,031,320 ns, ending at 5,033,320; a new one ends
//    at 2,000 + ceil(10^6 x 302/60 = 5,033,333.3) = 5,035,334.
//  * 300 flows of 10^4 bytes (ending at 50,000 ns: 48.5 grids left, short):
//    re-shared at 1,500 ns, 60/302 each; an old flow has 10^4 - 0.2 x 1,500 =
//    9,700 bytes left, x 302/60 = 48,823.3 ns, ending at 1,500 + 48,824 = 50,324.
//  * 200 flows of 10^6 bytes (0.3 bytes/ns): 202 < 256 flows, re-shared at
//    1,500 ns, 60/202 each.
TEST(FlowNetwork, ComponentOfManyLongFlowsWaitsForTheGrid) {
  struct Case {
    int n;
    int64_t bytes;
    bool waits;
  };
  for (const Case c : {Case{300, 1'000'000, true}, Case{300, 10'000, false}, Case{200, 1'000'000, false}}) {
    SCOPED_TRACE(c.n);
    SCOPED_TRACE(c.bytes);
    TwoNodes two(/*share_grid_ns=*/1000, /*grid_flows=*/256, /*grid_lives=*/64);
    FlowNetwork& net = two.net;
    auto start = [&](int64_t t) { return two.Start(0, 8, 1e300, t, c.bytes); };
    for (int i = 0; i < c.n; ++i) start(0);
    net.Recompute(0);
    EXPECT_EQ(net.DueNs(), -1);
    EXPECT_DOUBLE_EQ(net.Rate(0), 60.0 / c.n);
    const int32_t late = start(1500);
    start(1500);
    net.Recompute(1500);
    const double shared = 60.0 / (c.n + 2);
    if (!c.waits) {
      EXPECT_EQ(net.DueNs(), -1);
      EXPECT_DOUBLE_EQ(net.Rate(0), shared);
      EXPECT_DOUBLE_EQ(net.Rate(late), shared);
      if (c.bytes == 10'000) {
        EXPECT_EQ(net.FinishNs(0), 50'324);
      }
      continue;
    }
    EXPECT_EQ(net.DueNs(), 2000);
    EXPECT_EQ(net.Rate(late), 0.0);
    EXPECT_DOUBLE_EQ(net.Rate(0), 0.2);
    net.Recompute(2000);
    EXPECT_EQ(net.DueNs(), -1);
    EXPECT_DOUBLE_EQ(net.Rate(0), shared);
    EXPECT_DOUBLE_EQ(net.Rate(late), shared);
    EXPECT_EQ(net.FinishNs(0), 5'033'320);
    EXPECT_EQ(net.FinishNs(late), 5'035'334);
  }
}

// Local re-sharing, by hand. Network 60 B/ns (one way), one NIC per GPU:
//   A: 200 flows NIC 0 -> NIC 8, uncapped;
//   B: 400 flows NIC 1 -> NIC 9, each capped at 0.1 B/ns (NIC 1 and NIC 9
//      carry 40 of 60: not saturated);
//   L: one flow NIC 0 -> NIC 9, uncapped, which links A and B into one
//      component of 601 flows (>= 512: kept between calls).
// Rates at 0: NIC 0 binds its 201 flows at 60/201 B/ns (NIC 8 then carries
// 200 x 60/201 = 59.7 < 60; NIC 9 40.3); B at its cap 0.1.
// At 1,000 ns one more A flow starts. Only NIC 0 is saturated among the
// ports it touches, so the change reaches the 202 flows on NIC 0 and NIC 8
// and stops at NIC 9 (not saturated): A and L are re-shared at 60/202, B is
// not touched (its ends stay at 10^6 / 0.1 = 10^7 ns). An old A flow had
// 10^6 - 1,000 x 60/201 = 999,701.49 B left: x 202/60 = 3,365,661.7 ns, so it
// ends at 1,000 + 3,365,662 = 3,366,662; the new one at 1,000 + 10^6 x 202/60
// = 1,000 + 3,366,667 = 3,367,667.
TEST(FlowNetwork, ChangeIsResharedOnlyWhereSaturatedPortsReach) {
  TwoNodes two(/*share_grid_ns=*/0);
  FlowNetwork& net = two.net;
  auto start = [&](int32_t a, int32_t b, double cap, int64_t t) { return two.Start(a, b, cap, t); };
  const int32_t a0 = start(0, 8, 1e300, 0);
  for (int i = 1; i < 200; ++i) start(0, 8, 1e300, 0);
  const int32_t b0 = start(1, 9, 0.1, 0);
  for (int i = 1; i < 400; ++i) start(1, 9, 0.1, 0);
  const int32_t link = start(0, 9, 1e300, 0);
  ASSERT_EQ(two.model.Transfer(0, 8).link_class, LinkClass::kNetwork);
  net.Recompute(0);
  EXPECT_DOUBLE_EQ(net.Rate(a0), 60.0 / 201);
  EXPECT_DOUBLE_EQ(net.Rate(link), 60.0 / 201);
  EXPECT_DOUBLE_EQ(net.Rate(b0), 0.1);
  EXPECT_EQ(net.FinishNs(b0), 10'000'000);
  const int64_t local_before = net.local_updates;
  const int32_t late = start(0, 8, 1e300, 1000);
  net.Recompute(1000);
  EXPECT_EQ(net.local_updates, local_before + 1);  // a part, not the component
  EXPECT_DOUBLE_EQ(net.Rate(a0), 60.0 / 202);
  EXPECT_DOUBLE_EQ(net.Rate(late), 60.0 / 202);
  EXPECT_DOUBLE_EQ(net.Rate(link), 60.0 / 202);
  EXPECT_DOUBLE_EQ(net.Rate(b0), 0.1);
  EXPECT_EQ(net.FinishNs(a0), 3'366'662);
  EXPECT_EQ(net.FinishNs(late), 3'367'667);
  EXPECT_EQ(net.FinishNs(b0), 10'000'000);
}

// A port leaves the kept big component and joins it again between two
// re-shares: GPU 0's only flow stops (its NIC ports are left alone, listed
// as stale) and a new flow from GPU 0 to a receiver of the component starts.
// The ports must be listed once: listed twice, their flows were counted
// twice and the water-filling ran out of ports before freezing them all
// ("water-filling lost a flow", deepseek-v3's sweep at 16 MiB segments).
// Senders 1..63 send to 10 of the receivers 64..127 each (630 flows, one
// component over the network); rates stay those of the whole problem.
TEST(FlowNetwork, PortThatLeavesAndRejoinsTheBigComponentIsListedOnce) {
  Checker c("dgx-h100", 16);
  const int32_t only = c.Start(c.Transfer(0, 64), 1 << 24, 1e300, 0);
  for (int32_t a = 1; a < 64; ++a)
    for (int32_t k = 0; k < 10; ++k) {
      const Route r = c.Transfer(a, 64 + (a * 7 + k) % 64);
      ASSERT_EQ(r.link_class, LinkClass::kNetwork);
      c.Start(r, (1 << 20) + a * 1000 + k, 1e300, 0);
    }
  c.Recompute(0, "start");
  if (HasFatalFailure()) return;
  c.Stop(only, 1000);
  c.Start(c.Transfer(0, 100), 1 << 24, 1e300, 1000);
  c.Recompute(1000, "left and joined");
  if (HasFatalFailure()) return;
  // And on: stops and starts of the others re-share the component again.
  std::mt19937 rng(3);
  for (int step = 0; step < 40; ++step) {
    const int64_t t = 2000 + step * 1000;
    c.Stop(c.RandomActive(rng), t);
    const int32_t a = 1 + step % 63;
    c.Start(c.Transfer(a, 64 + (a * 11 + step) % 64), 1 << 22, 1e300, t);
    c.Recompute(t, "step " + std::to_string(step));
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace reshard::sim_internal
