// Cluster presets, link efficiency, topology queries, fingerprints, JSON and
// calibration profiles.
#include <cmath>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/cluster.h"
#include "model/error.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace cluster_test {

using ::testing::HasSubstr;
using nlohmann::json;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

TEST(LinkProfile, EfficiencyInterpolatesLogLinearlyAndClamps) {
  LinkProfile l;
  EXPECT_EQ(l.Efficiency(1), 1.0);  // no curve: always peak
  l.efficiency = {{kMiB, 0.2}, {16 * kMiB, 0.6}, {256 * kMiB, 1.0}};
  EXPECT_DOUBLE_EQ(l.Efficiency(1), 0.2);
  EXPECT_DOUBLE_EQ(l.Efficiency(0), 0.2);
  EXPECT_DOUBLE_EQ(l.Efficiency(kMiB), 0.2);
  EXPECT_DOUBLE_EQ(l.Efficiency(16 * kMiB), 0.6);
  EXPECT_DOUBLE_EQ(l.Efficiency(int64_t{1} << 40), 1.0);
  // 4 MiB is halfway between 1 and 16 MiB in log(bytes): halfway in fraction.
  EXPECT_NEAR(l.Efficiency(4 * kMiB), 0.4, 1e-12);
  EXPECT_NEAR(l.Efficiency(64 * kMiB), 0.8, 1e-12);
  // Monotone between points.
  double prev = 0;
  for (int64_t b = kMiB; b <= 256 * kMiB; b += 3 * kMiB) {
    double e = l.Efficiency(b);
    EXPECT_GE(e, prev);
    prev = e;
  }
}

TEST(Presets, AllValidAndNamed) {
  const auto names = ClusterPresetNames();
  for (const char* n : {"h200-x2", "dgx-h100", "dgx-h200", "gb200-nvl72"})
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  for (const auto& n : names) {
    SCOPED_TRACE(n);
    const Cluster c = ClusterPreset(n);
    EXPECT_EQ(c.name, n);
    EXPECT_NO_THROW(ValidateCluster(c, "<test>"));
    EXPECT_FALSE(c.profile_source.empty());
    EXPECT_GT(c.overheads.cuda_context_bytes, 0);
    EXPECT_GT(c.overheads.nccl_bytes_per_peer, 0);
    for (const auto& p : c.nvlink.efficiency) EXPECT_TRUE(p.fraction > 0 && p.fraction <= 1);
  }
  try {
    ClusterPreset("dgx-h10", "s.yaml", "cluster");
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "cluster");
    EXPECT_THAT(e.what(), HasSubstr("did you mean 'dgx-h100'?"));
  }
}

TEST(Presets, DatasheetNumbers) {
  const Cluster h = ClusterPreset("h200-x2");
  EXPECT_EQ(h.Gpus(), 2);
  EXPECT_EQ(h.gpu_memory_bytes, 143155 * kMiB);  // cudaMemGetInfo total, not nvidia-smi's
  EXPECT_TRUE(h.measured);
  EXPECT_EQ(h.nvlink.latency_ns, 23000);
  EXPECT_EQ(h.nvlink.bytes_per_s, 365e9);
  EXPECT_EQ(h.nvlink.duplex_bytes_per_s, 358e9);
  EXPECT_EQ(h.pcie.bytes_per_s, 55e9);
  EXPECT_EQ(h.pcie_pageable.bytes_per_s, 6.6e9);
  EXPECT_EQ(h.device_copy.bytes_per_s, 2.1e12);
  const Cluster d = ClusterPreset("dgx-h100");
  EXPECT_EQ(d.gpus_per_node, 8);
  EXPECT_EQ(d.nics_per_node, 8);
  EXPECT_FALSE(d.measured);
  EXPECT_NEAR(d.gpu_memory_bytes / 1e9, 85.5, 0.1);  // "80 GB": 81559 MiB
  EXPECT_NEAR(d.network.bytes_per_s, 48e9, 1);
  const Cluster g = ClusterPreset("gb200-nvl72");
  EXPECT_EQ(g.gpus_per_node, 4);
  EXPECT_EQ(g.nvlink_domain_nodes, 18);
  EXPECT_EQ(g.Gpus(), 72);
  EXPECT_FALSE(g.measured);
}

// The h200-x2 curve is built so that the simulator's time model,
// latency + bytes / (peak * efficiency), reproduces DESIGN's measured
// one-direction NCCL throughputs.
TEST(Presets, H200CurveReproducesTheMeasuredCeilings) {
  const Cluster h = ClusterPreset("h200-x2");
  const std::pair<int64_t, double> measured[] = {
      {4 * kMiB, 92e9}, {16 * kMiB, 190e9}, {64 * kMiB, 295e9}, {256 * kMiB, 347e9}, {kGiB, 365e9}};
  for (auto [bytes, bw] : measured) {
    const double t = h.nvlink.latency_ns * 1e-9 + bytes / (h.nvlink.bytes_per_s * h.nvlink.Efficiency(bytes));
    EXPECT_NEAR(bytes / t / bw, 1.0, 0.01) << bytes;
  }
}

TEST(Topology, NicsLinksAndDomains) {
  Cluster d = ClusterPreset("dgx-h100");
  d.nodes = 2;
  for (int32_t g = 0; g < 16; ++g) EXPECT_EQ(d.NicOf(g), g);  // one NIC per GPU
  d.nics_per_node = 4;
  EXPECT_EQ(d.NicOf(0), 0);
  EXPECT_EQ(d.NicOf(1), 0);
  EXPECT_EQ(d.NicOf(2), 1);
  EXPECT_EQ(d.NicOf(7), 3);
  EXPECT_EQ(d.NicOf(8), 4);
  EXPECT_EQ(d.NicOf(15), 7);
  EXPECT_EQ(ClusterPreset("h200-x2").NicOf(1), -1);  // no NICs
  EXPECT_EQ(d.Between(3, 3), LinkClass::kLocal);
  EXPECT_EQ(d.Between(0, 7), LinkClass::kNvlink);
  EXPECT_EQ(d.Between(7, 8), LinkClass::kNetwork);
  const Cluster g = ClusterPreset("gb200-nvl72");
  EXPECT_EQ(g.Between(0, 71), LinkClass::kNvlink);  // one rack, one NVLink domain
  Cluster g2 = g;
  g2.nodes = 36;
  EXPECT_EQ(g2.Between(0, 72), LinkClass::kNetwork);
  EXPECT_EQ(g2.DomainOf(72), 1);
  EXPECT_EQ(&d.Link(LinkClass::kLocal), &d.device_copy);
  EXPECT_EQ(&d.Link(LinkClass::kNvlink), &d.nvlink);
  EXPECT_EQ(&d.Link(LinkClass::kNetwork), &d.network);
  EXPECT_EQ(&d.Link(LinkClass::kPcie), &d.pcie);
  EXPECT_EQ(LinkClassName(LinkClass::kNvlink), "nvlink");
  EXPECT_EQ(LinkClassName(LinkClass::kPcie), "pcie");
}

TEST(Fingerprint, StableHexAndSensitiveToEveryNumber) {
  const Cluster base = ClusterPreset("dgx-h200");
  const std::string fp = base.Fingerprint();
  EXPECT_TRUE(std::regex_match(fp, std::regex("[0-9a-f]{16}"))) << fp;
  EXPECT_EQ(ClusterPreset("dgx-h200").Fingerprint(), fp);
  Cluster renamed = base;
  renamed.name = "other";
  renamed.profile_source = "elsewhere";
  EXPECT_EQ(renamed.Fingerprint(), fp);  // labels do not matter
  const std::vector<std::function<void(Cluster&)>> changes = {
      [](Cluster& c) { c.nodes = 2; },
      [](Cluster& c) { c.gpus_per_node = 4; },
      [](Cluster& c) { c.nvlink_domain_nodes = 2; },
      [](Cluster& c) { c.nics_per_node = 4; },
      [](Cluster& c) { c.gpu_memory_bytes -= 1; },
      [](Cluster& c) { c.host_memory_bytes += 1; },
      [](Cluster& c) { c.overheads.cuda_context_bytes += 1; },
      [](Cluster& c) { c.overheads.nccl_bytes_per_peer += 1; },
      [](Cluster& c) { c.nvlink.latency_ns += 1; },
      [](Cluster& c) { c.nvlink.bytes_per_s *= 1.000001; },
      [](Cluster& c) { c.nvlink.duplex_bytes_per_s += 1; },
      [](Cluster& c) { c.nvlink.efficiency.back().fraction = 0.99; },
      [](Cluster& c) { c.network.bytes_per_s += 1; },
      [](Cluster& c) { c.pcie.latency_ns += 1; },
      [](Cluster& c) { c.pcie_pageable.bytes_per_s += 1; },
      [](Cluster& c) { c.device_copy.efficiency.push_back({kGiB, 1.0}); },
  };
  std::set<std::string> seen = {fp};
  for (size_t i = 0; i < changes.size(); ++i) {
    Cluster c = base;
    changes[i](c);
    EXPECT_TRUE(seen.insert(c.Fingerprint()).second) << "change " << i << " left the fingerprint unchanged";
  }
}

TEST(ClusterJson, RoundTripsEveryPreset) {
  for (const auto& n : ClusterPresetNames()) {
    const Cluster c = ClusterPreset(n);
    json j = c;
    EXPECT_TRUE(j.contains("gpu_memory_bytes"));
    EXPECT_TRUE(j["links"]["nvlink"].contains("bytes_per_s"));
    EXPECT_TRUE(j["links"]["nvlink"].contains("latency_ns"));
    // Through text, as a plan file would carry it.
    const Cluster back = ClusterFromJson(json::parse(j.dump()), "plan.json");
    EXPECT_EQ(back, c) << n;
  }
}

TEST(ClusterJson, ErrorsNameFileAndField) {
  const json good = ClusterPreset("dgx-h100");
  struct Case {
    std::function<void(json&)> edit;
    std::string field, fragment;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("nodes"); }, "cluster.nodes", "missing field"},
      {[](json& j) { j["nodez"] = 1; }, "cluster.nodez", "did you mean 'nodes'?"},
      {[](json& j) { j["gpus_per_node"] = "eight"; }, "cluster.gpus_per_node", "expected an integer"},
      {[](json& j) { j["links"]["nvlink"]["bytes_per_s"] = -1.0; }, "cluster.links.nvlink.bytes_per_s", ">= 0"},
      {[](json& j) { j["links"]["pcie"].erase("latency_ns"); }, "cluster.links.pcie.latency_ns", "missing field"},
      {[](json& j) { j["links"]["nvlink"]["efficiency"][0]["fraction"] = 1.5; },
       "cluster.links.nvlink.efficiency[0].fraction", "(0, 1]"},
      {[](json& j) { j["links"]["nvlink"]["efficiency"][1]["bytes"] = 1; },
       "cluster.links.nvlink.efficiency[1].bytes", "increasing"},
      {[](json& j) { j["fingerprint"] = "0000000000000000"; }, "cluster.fingerprint", "does not match"},
      {[](json& j) { j["gpu_memory_bytes"] = 0; }, "cluster.gpu_memory", "must be > 0"},
  };
  for (const auto& c : cases) {
    json j = good;
    c.edit(j);
    try {
      ClusterFromJson(j, "plan.json");
      ADD_FAILURE() << c.field;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "plan.json");
      EXPECT_EQ(e.field(), c.field);
      EXPECT_THAT(e.what(), HasSubstr(c.fragment)) << c.field;
    }
  }
}

TEST(Profile, RoundTripAndPartialApply) {
  // A profile written from one cluster makes another cluster's links equal.
  const Cluster h = ClusterPreset("h200-x2");
  Cluster d = ClusterPreset("dgx-h200");
  ApplyProfileJson(d, ProfileJson(h), "h.json");
  EXPECT_EQ(d.nvlink, h.nvlink);
  EXPECT_EQ(d.network, h.network);
  EXPECT_EQ(d.pcie, h.pcie);
  EXPECT_EQ(d.device_copy, h.device_copy);
  EXPECT_EQ(d.overheads, h.overheads);
  EXPECT_EQ(d.gpus_per_node, 8);  // topology is not part of a profile
  EXPECT_EQ(d.profile_source.rfind("h.json", 0), 0u);

  // Only what the profile names changes.
  Cluster e = ClusterPreset("dgx-h100");
  const Cluster before = e;
  ApplyProfileJson(e, json::parse(R"({"name": "p", "links": {"pcie": {"latency_ns": 7000, "bytes_per_s": 5e10}},
                                      "memory": {"nccl_bytes_per_peer": 1048576}})"),
                   "p.json");
  EXPECT_EQ(e.pcie.bytes_per_s, 5e10);
  EXPECT_EQ(e.pcie.latency_ns, 7000);
  EXPECT_EQ(e.nvlink, before.nvlink);
  EXPECT_EQ(e.overheads.nccl_bytes_per_peer, kMiB);
  EXPECT_EQ(e.overheads.cuda_context_bytes, before.overheads.cuda_context_bytes);
  EXPECT_TRUE(e.measured);
  EXPECT_NE(e.Fingerprint(), before.Fingerprint());
}

TEST(Profile, ErrorsNameFileAndField) {
  Cluster c = ClusterPreset("h200-x2");
  const Cluster before = c;
  auto expect_error = [&](const std::string& text, const std::string& field, const std::string& fragment) {
    try {
      ApplyProfileJson(c, json::parse(text), "prof.json");
      ADD_FAILURE() << text;
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "prof.json");
      EXPECT_EQ(e.field(), field);
      EXPECT_THAT(e.what(), HasSubstr(fragment));
    }
    EXPECT_EQ(c, before);  // a failed apply leaves the cluster untouched
  };
  expect_error(R"({"linkz": {}})", "linkz", "did you mean 'links'?");
  expect_error(R"({"links": {"nvlnk": {}}})", "links.nvlnk", "did you mean 'nvlink'?");
  expect_error(R"({"links": {"nvlink": {"bytes_per_s": 1e9}}})", "links.nvlink.latency_ns", "missing field");
  expect_error(R"({"links": {"nvlink": {"latency_ns": 1, "bytes_per_s": "fast"}}})", "links.nvlink.bytes_per_s",
               "expected a number");
  expect_error(R"({"memory": {"cuda_context_bytes": -1}})", "memory.cuda_context_bytes", ">= 0");
  expect_error(R"({"measured": "yes"})", "measured", "expected true or false");
  expect_error(R"([1, 2])", "", "expected an object");
  EXPECT_THROW(ApplyProfileFile(c, "/no/such/profile.json"), InputError);
}

// calib/README.md shows an example profile; it must stay loadable.
TEST(Profile, ReadmeExampleApplies) {
  std::ifstream in(std::string(RESHARD_SOURCE_DIR) + "/calib/README.md");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t begin = text.find("```json\n");
  ASSERT_NE(begin, std::string::npos);
  const size_t end = text.find("```", begin + 8);
  ASSERT_NE(end, std::string::npos);
  Cluster c = ClusterPreset("h200-x2");
  ApplyProfileJson(c, json::parse(text.substr(begin + 8, end - begin - 8)), "calib/README.md");
  EXPECT_TRUE(c.measured);
  EXPECT_GT(c.nvlink.bytes_per_s, 0);
}

}  // namespace cluster_test
// 128 GB200 nodes in NVLink domains of 18: 128 = 7 x 18 + 2, so the last domain
// holds 2 nodes; 126 = 7 x 18 and 144 = 8 x 18 are the multiples around it.
TEST(Topology, PartialDomainIsWarnedWithItsNumbers) {
  Cluster g = ClusterPreset("gb200-nvl72");
  EXPECT_EQ(PartialDomainWarning(g), "");  // one full rack
  g.nodes = 36;
  EXPECT_EQ(PartialDomainWarning(g), "");
  g.nodes = 128;
  const std::string w = PartialDomainWarning(g);
  EXPECT_NE(w.find("128 nodes is not a multiple of its NVLink domain of 18 nodes"), std::string::npos) << w;
  EXPECT_NE(w.find("7 full domain(s) and one of 2 node(s)"), std::string::npos) << w;
  EXPECT_NE(w.find("(126 or 144)"), std::string::npos) << w;
  EXPECT_EQ(g.DomainOf(127 * 4), 7);  // the partial domain is the eighth
  EXPECT_EQ(PartialDomainWarning(ClusterPreset("dgx-h100")), "");  // one-node domains never are partial
}

}  // namespace reshard
