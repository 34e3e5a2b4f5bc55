// Tests of the capacity-planning sweep (planner/sweep.h) and `reshard sweep`:
// the Pareto front against a brute-force dominance check, the recommendation
// rule, determinism over thread counts, infeasible points reported as
// results, and the CLI's JSON fields.
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/scenario.h"
#include "planner/planner.h"
#include "planner/sweep.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

SweepPoint Pt(double time_s, int64_t peak, bool fits = true) {
  SweepPoint p;
  p.time_s = time_s;
  p.peak_bytes = peak;
  p.fits = fits;
  return p;
}

// O(n^2) definition: fits, no fitting point is <= in both and < in one, and no
// earlier point is equal (the front lists distinct points).
std::vector<bool> BruteFront(const std::vector<SweepPoint>& v) {
  std::vector<bool> out(v.size(), false);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].fits) continue;
    bool dominated = false;
    for (size_t j = 0; j < v.size() && !dominated; ++j)
      dominated = v[j].fits && v[j].time_s <= v[i].time_s && v[j].peak_bytes <= v[i].peak_bytes &&
                  (v[j].time_s < v[i].time_s || v[j].peak_bytes < v[i].peak_bytes || j < i);
    out[i] = !dominated;
  }
  return out;
}

TEST(SweepPareto, HandMadePoints) {
  const std::vector<SweepPoint> v = {
      Pt(1.0, 100),         // 0: front (fastest that fits)
      Pt(2.0, 50),          // 1: front
      Pt(2.0, 60),          // 2: dominated by 1 (same time, more memory)
      Pt(3.0, 50),          // 3: dominated by 1 (slower, same memory)
      Pt(0.5, 10, false),   // 4: does not fit: never on the front
      Pt(1.0, 100),         // 5: equal to 0: listed once, as 0
      Pt(4.0, 10),          // 6: front (least memory)
      Pt(1.5, 100),         // 7: dominated by 0
  };
  const std::vector<bool> expected = {true, true, false, false, false, false, true, false};
  EXPECT_EQ(ParetoFront(v), expected);
  EXPECT_EQ(BruteFront(v), expected);
}

TEST(SweepPareto, MatchesBruteForceOnRandomPoints) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<SweepPoint> v;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i)  // few distinct values: many ties
      v.push_back(Pt(static_cast<double>(rng() % 6), static_cast<int64_t>(rng() % 6), rng() % 4 != 0));
    ASSERT_EQ(ParetoFront(v), BruteFront(v)) << "trial " << trial;
  }
}

TEST(SweepRecommend, FastestThatFitsWithinMargin) {
  const std::vector<SweepPoint> v = {
      Pt(1.0, 990),         // fits, but inside the 5% margin of 1000
      Pt(2.0, 900),         // the answer
      Pt(1.5, 960),         // inside the margin
      Pt(3.0, 100),         // slower
      Pt(0.5, 100, false),  // does not fit
      Pt(2.0, 800),         // same time, less memory: preferred over #1
  };
  std::string why;
  const auto r = Recommend(v, 1000, 0.05, &why);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(*r, 5u);
  EXPECT_NE(why.find("5%"), std::string::npos) << why;
  // With no margin the fastest that fits wins.
  EXPECT_EQ(Recommend(v, 1000, 0.0, nullptr), std::optional<size_t>(0));
  // Nothing leaves a 95% margin: none, and the reason says so.
  EXPECT_FALSE(Recommend(v, 1000, 0.95, &why).has_value());
  EXPECT_NE(why.find("none"), std::string::npos) << why;
}

TEST(SweepDomains, DivisorsAndMultiplesOnMultiNode) {
  Cluster c = ClusterPreset("dgx-h100");
  c.nodes = 1;
  EXPECT_EQ(DefaultDomainSizes(c), std::vector<int32_t>{c.nvlink_domain_nodes});  // one node: its value
  c.nodes = 4;
  c.nvlink_domain_nodes = 2;
  EXPECT_EQ(DefaultDomainSizes(c), (std::vector<int32_t>{1, 2, 4}));
  c.nodes = 6;
  EXPECT_EQ(DefaultDomainSizes(c), (std::vector<int32_t>{1, 2, 6}));  // 4 does not divide 6
}

void ExpectRecommendationRule(const SweepResult& r) {
  std::optional<size_t> best;
  for (size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    if (p.fits) {
      EXPECT_LE(p.peak_bytes, r.capacity_bytes);
      EXPECT_GT(p.time_s, 0);
      EXPECT_GT(p.lower_bound_s, 0);
      EXPECT_LE(p.lower_bound_s, p.time_s * (1 + 1e-9));
    }
    if (p.fits && static_cast<double>(p.peak_bytes) <= (1 - r.margin) * static_cast<double>(r.capacity_bytes) &&
        (!best || p.time_s < r.points[*best].time_s))
      best = i;
  }
  ASSERT_EQ(r.recommended.has_value(), best.has_value());
  if (best) {
    EXPECT_EQ(r.points[*r.recommended].time_s, r.points[*best].time_s);
  }
}

TEST(SweepRun, TinyLlamaThreadsDoNotChangeResults) {
  const Scenario s = BuiltinScenario("tiny-llama-tp2-to-tp1x2");
  SweepGrid g;
  g.segment_bytes = {int64_t{4} << 20, int64_t{64} << 20, int64_t{1} << 30};
  SweepOptions one;
  one.threads = 1;
  const SweepResult a = Sweep(s, g, one);
  ASSERT_EQ(a.points.size(), 3u * 4 * 4);  // sizes x default offloads x policies (one node: one domain size)
  SweepOptions four;
  four.threads = 4;
  int64_t calls = 0, last = 0;
  four.progress = [&](int64_t done, int64_t total) {
    ++calls;
    EXPECT_EQ(total, static_cast<int64_t>(a.points.size()));
    EXPECT_EQ(done, last + 1);  // serialised, counting up
    last = done;
  };
  const SweepResult b = Sweep(s, g, four);
  EXPECT_EQ(calls, static_cast<int64_t>(a.points.size()));
  EXPECT_EQ(nlohmann::json(a).dump(), nlohmann::json(b).dump());
  // Grid order: segment size outer, then offload, then policy.
  EXPECT_EQ(a.points[0].segment_bytes, int64_t{4} << 20);
  EXPECT_EQ(a.points[16].segment_bytes, int64_t{64} << 20);
  EXPECT_EQ(a.points[4].offload_fraction, 0.25);
  EXPECT_EQ(a.points[1].policy.Name(), "dest-per-layer");
  ExpectRecommendationRule(a);
  ASSERT_TRUE(a.recommended.has_value());
  // A point dominating the recommendation would be within the margin and faster (or as fast with less memory).
  EXPECT_TRUE(a.points[*a.recommended].pareto);
}

// Sizes at least every GPU pair's bytes are copied from the smallest of them,
// not planned: every point (front, recommendation included) as planning each.
// tiny-llama's largest GPU pair is between 1 and 4 MiB: 64 KiB, 1 MiB and
// 4 MiB are planned, 64 MiB and 1 GiB copy 4 MiB.
TEST(SweepRun, CopiedSizesEqualPlanningEveryPoint) {
  const Scenario s = BuiltinScenario("tiny-llama-tp2-to-tp1x2");
  SweepGrid g;
  g.segment_bytes = {int64_t{64} << 10, int64_t{1} << 20, int64_t{4} << 20, int64_t{64} << 20, int64_t{1} << 30};
  g.offload_fractions = {0, 1};
  SweepOptions every;
  every.reuse_equal_plans = false;
  const SweepResult a = Sweep(s, g, every);
  const SweepResult b = Sweep(s, g, {});
  ASSERT_EQ(a.points.size(), b.points.size());
  int64_t copied = 0;
  for (size_t i = 0; i < a.points.size(); ++i) {
    const SweepPoint& x = a.points[i];
    const SweepPoint& y = b.points[i];
    EXPECT_EQ(x.same_plan_as, -1);
    if (y.same_plan_as >= 0) {
      ++copied;
      EXPECT_LT(y.same_plan_as, static_cast<int64_t>(i));
      EXPECT_EQ(b.points[y.same_plan_as].same_plan_as, -1) << "copied from a planned point";
    }
    EXPECT_EQ(x.segment_bytes, y.segment_bytes) << i;
    EXPECT_EQ(x.fits, y.fits) << i;
    EXPECT_EQ(x.time_s, y.time_s) << i;  // exactly: the same plan, simulated alike
    EXPECT_EQ(x.peak_bytes, y.peak_bytes) << i;
    EXPECT_EQ(x.peak_gpu, y.peak_gpu) << i;
    EXPECT_EQ(x.lower_bound_s, y.lower_bound_s) << i;
    EXPECT_EQ(x.routing_bound_s, y.routing_bound_s) << i;
    EXPECT_EQ(x.pareto, y.pareto) << i;
  }
  EXPECT_GT(copied, 0);
  EXPECT_LT(copied, static_cast<int64_t>(a.points.size()) - 8);  // the small sizes are planned
  EXPECT_EQ(a.recommended, b.recommended);
  EXPECT_EQ(a.why, b.why);
}

// Planning through one PlanSession per domain (the problem set up once, a
// size cut once for its policies) gives every point of planning each with
// MakePlan: a two-node scenario with relays, two domain sizes.
TEST(SweepRun, SharedProblemEqualsPlanningEachPoint) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  SweepGrid g;
  g.segment_bytes = {int64_t{1} << 20, int64_t{64} << 20};
  g.offload_fractions = {0, 1};
  g.nvlink_domain_nodes = {1, 2};
  SweepOptions each;
  each.share_problem = false;
  each.threads = 1;
  SweepOptions shared;
  shared.threads = 2;
  const SweepResult a = Sweep(s, g, each);
  const SweepResult b = Sweep(s, g, shared);
  ASSERT_EQ(a.points.size(), 2u * 2 * 2 * 4);
  EXPECT_EQ(nlohmann::json(a).dump(), nlohmann::json(b).dump());
}

TEST(SweepRun, RealModelAndInfeasiblePointsAreResults) {
  Scenario s = BuiltinScenario("llama3-8b-tp2-to-tp1x2");
  SweepGrid g;
  g.segment_bytes = {int64_t{64} << 20, int64_t{1} << 30};
  g.offload_fractions = {0, 1};
  const SweepResult r = Sweep(s, g, {});
  ASSERT_EQ(r.points.size(), 2u * 2 * 4);
  ExpectRecommendationRule(r);
  EXPECT_TRUE(std::any_of(r.points.begin(), r.points.end(), [](const SweepPoint& p) { return p.pareto; }));

  // 2 GiB GPUs cannot hold an 8B model's shards: every point is reported, none crashes.
  s.cluster.gpu_memory_bytes = int64_t{2} << 30;
  const SweepResult bad = Sweep(s, g, {});
  ASSERT_EQ(bad.points.size(), r.points.size());
  for (const SweepPoint& p : bad.points) {
    EXPECT_FALSE(p.fits);
    EXPECT_FALSE(p.pareto);
    EXPECT_TRUE(p.missing_bytes > 0 || !p.error.empty());
  }
  EXPECT_FALSE(bad.recommended.has_value());
  EXPECT_NE(bad.why.find("no point fits"), std::string::npos) << bad.why;
  const nlohmann::json j = bad;
  EXPECT_TRUE(j["recommended"].is_null());
  EXPECT_TRUE(j["points"][0]["time_s"].is_null());
}

// The default sizes are the powers of two 4 MiB .. 4 GiB that `plan
// --segment-bytes` accepts: at most kMaxSegments segments (deepseek-v3 on 512
// GPUs: 1.90 TiB / 131072 = 15.2 MiB, so from 16 MiB) and no more than a GPU.
TEST(SweepGrid, DefaultSizesArePlanAccepted) {
  Scenario tiny = BuiltinScenario("tiny-llama-tp2-to-tp1x2");
  std::vector<int64_t> every;
  for (int64_t x = int64_t{4} << 20; x <= int64_t{4} << 30; x *= 2) every.push_back(x);
  EXPECT_EQ(DefaultSegmentSizes(tiny), every);
  tiny.cluster.gpu_memory_bytes = int64_t{1} << 30;  // 2 GiB and 4 GiB segments do not fit a GPU
  EXPECT_EQ(DefaultSegmentSizes(tiny), std::vector<int64_t>(every.begin(), every.end() - 2));

  const Scenario dsv3 = BuiltinScenario("deepseek-v3-pp16ep16-to-tp32dp8");
  const std::vector<int64_t> sizes = DefaultSegmentSizes(dsv3);
  EXPECT_EQ(sizes, std::vector<int64_t>(every.begin() + 2, every.end()));
  const int64_t dst = DestinationBytes(dsv3, dsv3.path);
  EXPECT_EQ(SegmentBytesProblem(dsv3, int64_t{16} << 20, dst), "");
  EXPECT_NE(SegmentBytesProblem(dsv3, int64_t{8} << 20, dst).find("more than the 131072"), std::string::npos);
}

// HostMoveBoundSeconds by hand: PCIe 50 GB/s. GPU 0: optimizer slots 3 GB and
// 1 GB (4 GB in all), 2 GB of training weights; GPU 1: one 1 GB slot, 1 GB of
// weights. Offload 0.5: GPU 0 moves its first slot (3 GB >= 2 GB), GPU 1 its
// only one. Without source-to-host: max(3, 1) GB / 50 GB/s = 0.06 s; with
// it: max(3 + 2, 1 + 1) GB / 50 GB/s = 0.1 s; offload 0 and source-to-host:
// 2 GB / 50 GB/s = 0.04 s; no PCIe rate: 0. A plan with 3 buffers per slot
// (a buffer per optimizer state) offloads 0.5 as GPU 0's first two thirds
// of its 3 GB slot (1 + 1 >= 2 GB) and GPU 1's first two of 333,333,333 +
// 333,333,333 + 333,333,334 bytes: 2 GB / 50 GB/s = 0.04 s.
TEST(SweepPruning, HostMoveBoundByHand) {
  Cluster c = BuiltinScenario("tiny-llama-tp2-to-tp1x2").cluster;
  c.pcie.bytes_per_s = 50e9;
  HostMoves m;
  m.optimizer = {{3'000'000'000, 1'000'000'000}, {1'000'000'000}};
  m.source = {{2'000'000'000}, {1'000'000'000}};
  EXPECT_DOUBLE_EQ(HostMoveBoundSeconds(c, m, 0.5, false), 0.06);
  EXPECT_DOUBLE_EQ(HostMoveBoundSeconds(c, m, 0.5, true), 0.1);
  EXPECT_DOUBLE_EQ(HostMoveBoundSeconds(c, m, 0, true), 0.04);
  EXPECT_DOUBLE_EQ(HostMoveBoundSeconds(c, m, 0, false), 0);
  EXPECT_DOUBLE_EQ(HostMoveBoundSeconds(c, m, 0.5, false, 3), 0.04);
  EXPECT_DOUBLE_EQ(HostMoveBoundSeconds(c, m, 1, false, 3), 0.08);
  c.pcie.bytes_per_s = 0;
  EXPECT_EQ(HostMoveBoundSeconds(c, m, 1, true), 0);
}

// The pruning's PCIe part is a bound: every point the exhaustive sweep
// simulates takes at least HostMoveBoundSeconds of its size's base plan's
// moves (the same buffers in every plan of the problem).
TEST(SweepPruning, HostMoveBoundIsBelowEverySimulatedTime) {
  for (const char* name : {"tiny-llama-tp2-to-tp1x2", "llama3-8b-tp2-to-tp1x2-offload"}) {
    SCOPED_TRACE(name);
    const Scenario s = BuiltinScenario(name);
    SweepGrid g;
    g.segment_bytes = {int64_t{64} << 20};
    SweepOptions every;
    every.exhaustive = true;
    const SweepResult r = Sweep(s, g, every);
    PlannerOptions o;
    o.segment_bytes = g.segment_bytes.front();
    o.offload_fraction = 0;
    o.destination_per_layer = false;
    o.source_to_host = false;
    const PlanResult base = MakePlan(s, o);
    ASSERT_TRUE(base.ok());
    const HostMoves moves = HostMovesOf(base.plan);
    int64_t weights = 0;
    for (const std::vector<int64_t>& gpu : moves.source)
      for (int64_t b : gpu) weights += b;
    EXPECT_GT(weights, 0);  // source-to-host moves something
    int64_t checked = 0;
    for (const SweepPoint& p : r.points) {
      if (!p.fits) continue;
      const double bound_s =
          HostMoveBoundSeconds(s.cluster, moves, p.offload_fraction, p.policy.source_to_host, OptimizerStatesOf(s, p));
      EXPECT_LE(bound_s, p.time_s) << p.offload_fraction << " " << p.policy.Name();
      checked += bound_s > 0;
    }
    EXPECT_GT(checked, 0);
  }
}

TEST(SweepGrid, AxesTheScenarioHas) {
  Scenario s = BuiltinScenario("tiny-llama-tp2-to-tp1x2");
  EXPECT_EQ(DefaultOffloadFractions(s), (std::vector<double>{0, 0.25, 0.5, 1}));
  s.memory.optimizer.bytes_per_param = 0;  // no optimizer state: every fraction plans the same
  EXPECT_EQ(DefaultOffloadFractions(s), std::vector<double>{0});
  s.memory.optimizer.bytes_per_param = 12;
  s.memory.optimizer.offload = OffloadMode::kNone;
  EXPECT_EQ(DefaultOffloadFractions(s), std::vector<double>{0});
  s.memory.optimizer.offload = OffloadMode::kFraction;
  s.memory.optimizer.fraction = 0.3;
  EXPECT_EQ(DefaultOffloadFractions(s), (std::vector<double>{0, 0.3}));
  s.memory.optimizer.offload = OffloadMode::kAuto;
  s.memory.optimizer.bytes_per_param = 0;
  SweepGrid g;
  g.segment_bytes = {int64_t{4} << 20};
  const SweepResult r = Sweep(s, g, {});
  EXPECT_EQ(r.points.size(), 4u);  // the four memory policies, no offload axis
  // What a plan may use: the GPU less the reserve.
  EXPECT_EQ(r.capacity_bytes, s.cluster.gpu_memory_bytes - s.memory.reserve_bytes);
}

TEST(SweepGrid, MultiNodeSweepsTheClustersOwnDomain) {
  Scenario s = BuiltinScenario("tiny-llama-tp2-to-tp1x2");
  s.cluster.nodes = 4;  // 4 x 2 GPUs, NVLink domain of one node; the scenario uses GPUs 0-1
  s.cluster.nics_per_node = 1;
  s.cluster.network.bytes_per_s = 50e9;
  SweepGrid g;
  g.segment_bytes = {int64_t{4} << 20};
  g.offload_fractions = {0};
  const SweepResult r = Sweep(s, g, {});
  ASSERT_EQ(r.points.size(), 4u);
  for (const SweepPoint& p : r.points) EXPECT_EQ(p.nvlink_domain_nodes, s.cluster.nvlink_domain_nodes);
  g.nvlink_domain_nodes = {1, 2};  // others only on request
  EXPECT_EQ(Sweep(s, g, {}).points.size(), 8u);
}

// A cluster smaller than its NVLink domain (2 GB200 trays of an 18-tray rack): `plan` plans it as one partial
// domain with a warning, and the sweep's default domain axis is the cluster's own value, so it sweeps too (it once
// refused it as a --domains value larger than the cluster). Other values are still checked.
TEST(SweepGrid, PartialDomainSweepsLikePlan) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "{preset: gb200-nvl72, nodes: 2}", "{tp: 2, gpus: \"0-1\"}",
                                   "{tp: 4, gpus: \"4-7\"}"));
  ASSERT_GT(s.cluster.nvlink_domain_nodes, s.cluster.nodes);
  ASSERT_TRUE(MakePlan(s, {}).ok());
  SweepGrid g;
  g.segment_bytes = {int64_t{4} << 20};
  g.offload_fractions = {0};
  const SweepResult r = Sweep(s, g, {});
  ASSERT_EQ(r.points.size(), 4u);
  for (const SweepPoint& p : r.points) {
    EXPECT_EQ(p.nvlink_domain_nodes, s.cluster.nvlink_domain_nodes);
    EXPECT_TRUE(p.fits);
  }
  g.nvlink_domain_nodes = {3};  // asked for: more nodes than the cluster has
  EXPECT_THROW(Sweep(s, g, {}), InputError);
}

TEST(SweepRun, BadGridIsInputError) {
  const Scenario s = BuiltinScenario("tiny-llama-tp2-to-tp1x2");
  SweepGrid g;
  g.offload_fractions = {1.5};
  EXPECT_THROW(Sweep(s, g, {}), InputError);
  g = {};
  g.nvlink_domain_nodes = {2};  // one node
  EXPECT_THROW(Sweep(s, g, {}), InputError);
}

// Through the built `reshard`; the libraries-only build (RESHARD_BUILD_CLI=OFF, the
// sanitizer pass) has none.
#ifdef RESHARD_BIN
TEST(SweepCli, JsonHasTheFields) {
  const std::string cmd = std::string("'") + RESHARD_BIN +
                          "' sweep tiny-llama-tp2-to-tp1x2 --json --segment-bytes 4MiB,64MiB --offload 0,1 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0;) out.append(buf.data(), n);
  const int status = pclose(pipe.release());
  ASSERT_EQ(status, 0) << out;
  const nlohmann::json j = nlohmann::json::parse(out);
  ASSERT_EQ(j["points"].size(), 2u * 2 * 4);
  for (const char* f : {"segment_bytes", "offload_fraction", "memory_policy", "nvlink_domain_nodes", "time_s",
                        "peak_bytes", "fits", "lower_bound_s", "plan_efficiency", "pareto", "simulated", "estimate_s"})
    EXPECT_TRUE(j["points"][0].contains(f)) << f;
  EXPECT_EQ(j["points"][0]["segment_bytes"], int64_t{4} << 20);
  EXPECT_EQ(j["points"].back()["offload_fraction"], 1.0);
  EXPECT_DOUBLE_EQ(j["margin"].get<double>(), 0.05);
  ASSERT_TRUE(j["recommended"].is_object());
  EXPECT_TRUE(j["recommended"].contains("why"));
  EXPECT_TRUE(j["recommended"]["fits"].get<bool>());
}

TEST(SweepCli, NothingFitsExits3) {
  const std::string cmd = std::string("'") + RESHARD_BIN + "' sweep '" + RESHARD_TEST_DATA_DIR +
                          "/scenarios/does-not-fit.yaml' --segment-bytes 64MiB --offload 0 2>&1";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(cmd.c_str(), "r"), pclose);
  ASSERT_TRUE(pipe);
  std::string out;
  std::array<char, 4096> buf{};
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), pipe.get())) > 0;) out.append(buf.data(), n);
  const int status = pclose(pipe.release());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << out;
  EXPECT_NE(out.find("infeasible: no point of the sweep fits"), std::string::npos) << out;
}
#endif  // RESHARD_BIN

}  // namespace
}  // namespace reshard
