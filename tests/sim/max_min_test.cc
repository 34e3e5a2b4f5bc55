// Tests of max-min fair sharing alone (sim/max_min.h). Each case writes the
// constraints and the progressive-filling steps that solve them by hand; the
// numbers are chosen so every step is exact in floating point, and rates are
// compared exactly.
#include <gtest/gtest.h>

#include <limits>
#include <random>
#include <vector>

#include "sim/max_min.h"

namespace reshard {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

SharedFlow On(std::initializer_list<int32_t> ports, double cap = kInf) {
  SharedFlow f;
  for (int32_t p : ports) f.ports[f.num_ports++] = p;
  f.cap = cap;
  return f;
}

// The rates, through the allocating overload.
std::vector<double> Solve(const std::vector<SharedFlow>& flows, const std::vector<SharedPort>& ports) {
  return MaxMinFairRates(flows, ports);
}

std::vector<SharedPort> Capacities(std::initializer_list<double> capacities) {
  std::vector<SharedPort> ports;
  for (double c : capacities) ports.push_back(SharedPort{c, 0});
  return ports;
}

TEST(MaxMin, ThreeFlowsOverTwoPorts) {
  // Ports: p0 capacity 10, p1 capacity 6. Flows: a on p0; b on p0 and p1; c on p1.
  //   p0: r_a + r_b <= 10
  //   p1: r_b + r_c <= 6
  // Fair shares: p0 10/2 = 5, p1 6/2 = 3: p1 binds first, r_b = r_c = 3.
  // p0 then has 10 - 3 = 7 left for a alone: r_a = 7.
  const std::vector<double> r = Solve({On({0}), On({0, 1}), On({1})}, Capacities({10, 6}));
  EXPECT_EQ(r, (std::vector<double>{7, 3, 3}));
}

TEST(MaxMin, ChainSharesDifferFromEqualSplits) {
  // Ports all of capacity 1: out0 {a, b}, in1 {b, c, d}, in2 {a}, out2 {c}, out3 {d}.
  //   out0: r_a + r_b       <= 1
  //   in1:  r_b + r_c + r_d <= 1
  // in1 binds first at 1/3 (< 1/2 for out0): r_b = r_c = r_d = 1/3; out0 then
  // leaves 1 - 1/3 for a (an equal split per port would give a only 1/2).
  const std::vector<double> r = Solve({On({0, 2}), On({0, 1}), On({3, 1}), On({4, 1})}, Capacities({1, 1, 1, 1, 1}));
  const double third = 1.0 / 3;
  EXPECT_EQ(r, (std::vector<double>{1.0 - third, third, third, third}));
}

TEST(MaxMin, FlowCaps) {
  // The three flows of ThreeFlowsOverTwoPorts (p0 = 10, p1 = 6).
  // a capped at 4: p1 binds first (share 3 < cap 4): r_b = r_c = 3; p0's
  // share is then 7, above a's cap: r_a = 4, and 3 of p0 stay unused.
  EXPECT_EQ(Solve({On({0}, 4), On({0, 1}), On({1})}, Capacities({10, 6})),
            (std::vector<double>{4, 3, 3}));
  // b capped at 2, below every share: r_b = 2 first; then p1 has 6 - 2 = 4
  // for c alone and p0 10 - 2 = 8 for a alone: r_c = 4, r_a = 8.
  EXPECT_EQ(Solve({On({0}), On({0, 1}, 2), On({1})}, Capacities({10, 6})),
            (std::vector<double>{8, 2, 4}));
  // A cap equal to the share binds as a cap (caps before shares): same rates.
  EXPECT_EQ(Solve({On({0}), On({0, 1}, 3), On({1})}, Capacities({10, 6})),
            (std::vector<double>{7, 3, 3}));
  // Two flows capped at 1 on a port of 10: the caps hold, 8 stays unused.
  EXPECT_EQ(Solve({On({0}, 1), On({0}, 1)}, Capacities({10})), (std::vector<double>{1, 1}));
}

TEST(MaxMin, DegenerateCases) {
  // No flows: no rates, whatever the ports.
  EXPECT_TRUE(Solve({}, Capacities({10, 6})).empty());
  EXPECT_TRUE(Solve({}, {}).empty());
  // A flow on no port is held by its cap alone (+infinity without one), and
  // does not take from the others: a alone on p0 gets all 5.
  EXPECT_EQ(Solve({On({}, 2.5), On({}), On({0})}, Capacities({5})), (std::vector<double>{2.5, kInf, 5}));
  // A port without flows is ignored.
  EXPECT_EQ(Solve({On({1})}, Capacities({1, 8})), (std::vector<double>{8}));
  // A port's share is floored at its min_rate (the simulator's guard against
  // a share rounded to zero): capacity 0, floor 0.5.
  EXPECT_EQ(Solve({On({0})}, {SharedPort{0, 0.5}}), (std::vector<double>{0.5}));
}

TEST(MaxMin, ScratchIsReusedAcrossProblems) {
  // One scratch for two different problems gives what fresh buffers give.
  MaxMinScratch scratch;
  const std::vector<SharedFlow> big{On({0}), On({0, 1}), On({1}), On({2, 1}, 1)};
  const std::vector<SharedPort> big_ports = Capacities({10, 6, 3});
  std::vector<double> r(big.size());
  MaxMinFairRates(big, big_ports, r, scratch);
  EXPECT_EQ(r, MaxMinFairRates(big, big_ports));
  std::vector<double> r1(3);
  MaxMinFairRates(std::vector<SharedFlow>{On({0}), On({0, 1}), On({1})}, Capacities({10, 6}), r1, scratch);
  EXPECT_EQ(r1, (std::vector<double>{7, 3, 3}));
}

// On random problems the rates are feasible and max-min fair: every flow is
// at its cap or crosses a saturated port on which no flow has a larger rate.
TEST(MaxMin, RandomProblemsAreFeasibleAndFair) {
  std::mt19937 rng(5);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const int nports = uni(1, 6), nflows = uni(0, 10);
    std::vector<SharedPort> ports;
    for (int p = 0; p < nports; ++p) ports.push_back(SharedPort{static_cast<double>(uni(1, 20)), 0});
    std::vector<SharedFlow> flows;
    for (int i = 0; i < nflows; ++i) {
      SharedFlow f;
      const int k = uni(1, 3);
      for (int j = 0; j < k; ++j) f.ports[f.num_ports++] = uni(0, nports - 1);
      if (uni(0, 2) == 0) f.cap = uni(1, 10) / 2.0;
      flows.push_back(f);
    }
    const std::vector<double> r = MaxMinFairRates(flows, ports);
    constexpr double kEps = 1e-9;
    std::vector<double> load(nports, 0);
    for (int i = 0; i < nflows; ++i)
      for (int k = 0; k < flows[i].num_ports; ++k) load[flows[i].ports[k]] += r[i];
    for (int p = 0; p < nports; ++p) EXPECT_LE(load[p], ports[p].capacity + kEps) << "trial " << trial << " port " << p;
    for (int i = 0; i < nflows; ++i) {
      EXPECT_GT(r[i], 0) << "trial " << trial << " flow " << i;
      EXPECT_LE(r[i], flows[i].cap + kEps) << "trial " << trial << " flow " << i;
      bool bottleneck = r[i] >= flows[i].cap - kEps;
      for (int k = 0; k < flows[i].num_ports && !bottleneck; ++k) {
        const int p = flows[i].ports[k];
        bool largest = true;
        for (int j = 0; j < nflows; ++j)
          for (int m = 0; m < flows[j].num_ports; ++m)
            if (flows[j].ports[m] == p && r[j] > r[i] + kEps) largest = false;
        bottleneck = largest && load[p] >= ports[p].capacity - kEps;
      }
      EXPECT_TRUE(bottleneck) << "trial " << trial << " flow " << i << " rate " << r[i];
    }
  }
}

}  // namespace
}  // namespace reshard
