// Guards that make the planner's speed-ups and restructurings safe: they must
// not change what is planned.
//  * SourceTiers: on clusters of several NVLink domains, every fragment is
//    served from the best tier a holder offers (same GPU, else same domain,
//    else network), checked against a brute-force scan of the holders; this
//    is what ChooseSources' per-domain binary search must reproduce.
//  * GoldenPlans: plans of tiny and medium scenarios hash (FNV-1a 64 over
//    every field of the Plan) to the digests in
//    tests/data/planner_golden.json, which were made by the planner before
//    its speed-ups. A deliberate change of what
//    the planner emits changes them: regenerate with
//      RESHARD_UPDATE_GOLDEN=1 <build>/tests/planner/planner_test --gtest_filter=GoldenPlans.*
//    and say in the commit why the plans changed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/layout.h"
#include "model/scenario.h"
#include "planner/assign.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "planner/transfer_set.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

// The golden scenarios are named "g" (the name is part of every digest).
std::string Yaml(const std::string& model, const std::string& cluster, const std::string& src, const std::string& dst,
                 const std::string& memory = "") {
  return planner_testing::Yaml(model, cluster, src, dst, memory, "g");
}

// ---- Source tiers on multi-domain clusters ----------------------------------------

struct TierCase {
  const char* name;
  std::string yaml;
};

class SourceTiers : public testing::TestWithParam<TierCase> {};

TEST_P(SourceTiers, EveryFragmentComesFromTheBestTierAHolderOffers) {
  const Scenario s = ParseScenario(GetParam().yaml, "<test>");
  const Cluster& c = s.cluster;
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  const TransferSet ts = BuildTransferSet(s.model, src, dst);
  const std::vector<int32_t> dst_gpu = PlaceDestinations(s, src, dst, ts);
  const auto choice = ChooseSources(s, src, dst, ts, dst_gpu);
  std::vector<std::vector<int32_t>> ranks_of_shard(src.shards.size());
  for (int32_t r = 0; r < src.Ranks(); ++r) ranks_of_shard[src.rank_shard[r]].push_back(r);
  int64_t tiers[3] = {0, 0, 0};
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    const int32_t g = dst_gpu[r];
    const auto& frags = ts.shard_fragments[dst.rank_shard[r]];
    ASSERT_EQ(choice.src_rank[r].size(), frags.size());
    for (size_t i = 0; i < frags.size(); ++i) {
      // Brute force: the best tier any holder GPU offers this destination.
      int best = 2;  // 0 same GPU, 1 same NVLink domain, 2 network
      for (const auto& [shard, piece] : ts.holder_sets[frags[i].holder_set].holders)
        for (int32_t q : ranks_of_shard[shard]) {
          const int32_t h = s.source_gpus[q];
          best = std::min(best, h == g ? 0 : c.DomainOf(h) == c.DomainOf(g) ? 1 : 2);
        }
      const int32_t q = choice.src_rank[r][i];
      ASSERT_GE(q, 0);
      const int32_t h = s.source_gpus[q];
      const int got = h == g ? 0 : c.DomainOf(h) == c.DomainOf(g) ? 1 : 2;
      EXPECT_EQ(got, best) << "destination rank " << r << " fragment " << i;
      bool holds = false;
      for (const auto& [shard, piece] : ts.holder_sets[frags[i].holder_set].holders) holds |= shard == src.rank_shard[q];
      EXPECT_TRUE(holds) << "destination rank " << r << " fragment " << i << ": source rank " << q << " holds none of it";
      ++tiers[got];
    }
  }
  // The case exercises the tiers it was built for.
  EXPECT_GT(tiers[1] + tiers[2], 0);
}

INSTANTIATE_TEST_SUITE_P(
    Domains, SourceTiers,
    testing::Values(
        // GB200 NVL72: 2 domains of 72 GPUs; sources in domain 0, destinations in both.
        TierCase{"nvl72_disaggregated_across_domains",
                 Yaml("tiny-llama", "{preset: gb200-nvl72, nodes: 36}", "{tp: 2, dp: 36, gpus: \"0-71\"}",
                      "{tp: 1, dp: 72, gpus: \"72-143\"}")},
        // Sources in part of domain 0, destinations over both domains: all three tiers.
        TierCase{"nvl72_mixed", Yaml("tiny-llama", "{preset: gb200-nvl72, nodes: 36}",
                                     "{tp: 2, dp: 18, gpus: \"36-71\"}", "{tp: 1, dp: 72, gpus: \"36-107\"}")},
        // DGX nodes, NVLink domains of 2 nodes: every domain holds replicas.
        TierCase{"dgx_domains_of_two_nodes", Yaml("tiny-moe", "{preset: dgx-h100, nodes: 8, nvlink_domain_nodes: 2}",
                                                  "{tp: 2, ep: 4, dp: 32}", "{tp: 4, dp: 16}")},
        // Sources in some domains only: network for the rest.
        TierCase{"dgx_sources_in_two_of_four_domains",
                 Yaml("tiny-mla", "{preset: dgx-h100, nodes: 8, nvlink_domain_nodes: 2}",
                      "{tp: 2, pp: 2, ep: 4, dp: 8, gpus: \"0-31\"}", "{tp: 8, dp: 4, gpus: \"16-47\"}")},
        // Holders in domains 0 and 2, destinations in 2 and 3: the in-domain
        // holders of domain 2 are not the first holders in GPU order.
        TierCase{"dgx_holders_late_in_gpu_order",
                 Yaml("tiny-llama", "{preset: dgx-h100, nodes: 8, nvlink_domain_nodes: 2}",
                      "{tp: 2, dp: 16, gpus: \"0-15,32-47\"}", "{tp: 1, dp: 24, gpus: \"40-63\"}")}),
    [](const testing::TestParamInfo<TierCase>& i) { return std::string(i.param.name); });

// ---- Golden plans ------------------------------------------------------------------

// FNV-1a 64 over the fields of a Plan, in declaration order (the plan JSON
// would do, but takes seconds for the medium plans). A field added to Plan
// belongs here too.
class Digest {
 public:
  void Add(int64_t x) {
    for (int i = 0; i < 8; ++i) h_ = (h_ ^ ((static_cast<uint64_t>(x) >> (8 * i)) & 0xff)) * 1099511628211ull;
  }
  void Add(double x) {
    int64_t bits;
    static_assert(sizeof bits == sizeof x);
    std::memcpy(&bits, &x, sizeof bits);
    Add(bits);
  }
  void Add(const std::string& s) {
    Add(static_cast<int64_t>(s.size()));
    for (unsigned char ch : s) h_ = (h_ ^ ch) * 1099511628211ull;
  }
  void Add(const Region& r) {
    for (int64_t x : {int64_t{r.buffer}, r.offset_bytes, r.row_bytes, r.rows, r.row_stride_bytes, r.planes,
                      r.plane_stride_bytes})
      Add(x);
  }
  void Add(const Box& b) {
    Add(int64_t{b.ndim});
    for (int d = 0; d < kMaxDims; ++d) Add(b.lo[d]), Add(b.hi[d]);
  }
  void Add(const Plan& p) {
    Add(int64_t{p.format_version});
    Add(p.name), Add(p.cluster.Fingerprint()), Add(p.cluster_fingerprint), Add(p.scenario_fingerprint);
    for (const auto& n : p.stream_names) Add(n);
    for (const PlanTensor& t : p.tensors) {
      Add(t.name), Add(int64_t{t.shape.ndim}), Add(static_cast<int64_t>(t.dtype));
      for (int d = 0; d < t.shape.ndim; ++d) Add(t.shape.dim[d]);
    }
    for (const PlanBuffer& b : p.buffers)
      for (int64_t x : {int64_t{b.id}, int64_t{b.gpu}, static_cast<int64_t>(b.space), static_cast<int64_t>(b.role),
                        b.bytes, int64_t{b.layer}, int64_t{b.preexisting}})
        Add(x);
    for (const PlanBuffer& b : p.buffers) Add(b.name);
    for (const Op& o : p.ops) {
      for (int64_t x : {int64_t{o.id}, static_cast<int64_t>(o.kind), int64_t{o.gpu}, int64_t{o.stream}, int64_t{o.group},
                        int64_t{o.buffer}, int64_t{o.peer}, int64_t{o.match}, int64_t{o.segment},
                        static_cast<int64_t>(o.deps.size()), static_cast<int64_t>(o.copies.size())})
        Add(x);
      for (int32_t d : o.deps) Add(int64_t{d});
      for (const CopyPair& c : o.copies) Add(c.src), Add(c.dst);
      Add(o.region), Add(o.label);
    }
    for (const auto* list : {&p.sources, &p.destinations}) {
      Add(static_cast<int64_t>(list->size()));
      for (const ContentPiece& c : *list) {
        Add(int64_t{c.buffer}), Add(int64_t{c.tensor}), Add(c.box), Add(c.offset_elems);
        for (int d = 0; d < kMaxDims; ++d) Add(c.stride_elems[d]);
      }
    }
    const PlanSummary& s = p.summary;
    Add(s.segment_bytes), Add(s.direct_min_bytes), Add(s.offload_fraction), Add(s.memory_policy);
    Add(s.bytes_moved.local), Add(s.bytes_moved.nvlink), Add(s.bytes_moved.network), Add(s.bytes_moved.pcie);
    Add(s.lower_bound_s), Add(s.routing_bound_s), Add(s.predicted_time_s);
    for (int64_t x : s.predicted_peak_bytes) Add(x);
  }
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 1469598103934665603ull;
};

struct GoldenCase {
  std::string name;
  Scenario scenario;
  bool simulate;
  int32_t replica_blocks = 0;  // PlannerOptions::replica_blocks (1: the whole's search, pinned)
};

std::vector<GoldenCase> GoldenCases() {
  auto file = [](const std::string& n) {
    Scenario s = LoadScenario(std::string(RESHARD_SOURCE_DIR) + "/scenarios/" + n + ".yaml");
    s.destination_dtype = s.dtype;
    return s;
  };
  auto yaml = [](const std::string& y) { return ParseScenario(y, "<golden>"); };
  const std::string big_memory =
      "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache_gib: 10, reserve_gib: 2}\n";
  return {
      // Tiny: simulated candidates (segment size, in-place threshold, policy).
      {"tiny-llama-tp2-to-tp1x2", file("tiny-llama-tp2-to-tp1x2"), true},
      {"llama3-8b-tp2-to-tp1x2", file("llama3-8b-tp2-to-tp1x2"), true},
      {"llama3-8b-disaggregated", file("llama3-8b-disaggregated"), true},
      {"llama3-8b-tp2-to-tp1x2-offload", file("llama3-8b-tp2-to-tp1x2-offload"), true},
      {"qwen3-30b-a3b-ep2-to-tp2", file("qwen3-30b-a3b-ep2-to-tp2"), false},
      {"tiny-mla-multinode",
       yaml(Yaml("tiny-mla", "{preset: dgx-h100, nodes: 2}", "{tp: 2, pp: 2, ep: 4, dp: 4}", "{tp: 8, dp: 2}")), true},
      {"tiny-moe-network", yaml(Yaml("tiny-moe", "{preset: dgx-h100, nodes: 2}", "{tp: 2, ep: 4, dp: 4, gpus: \"0-7\"}",
                                     "{tp: 2, dp: 4, gpus: \"8-15\"}")),
       true},
      // Medium: the large-plan path (round estimate, one candidate size), planned whole.
      {"llama3-8b-256-domains-of-4",
       yaml(Yaml("llama3-8b", "{preset: dgx-h200, nodes: 32, nvlink_domain_nodes: 4}", "{tp: 8, dp: 32}",
                 "{tp: 4, dp: 64}", big_memory)),
       false, 1},
      // The same as planned by default: two replica blocks of 128 GPUs (planner/replica_blocks.h), predicted as the
      // whole (6.102 ms), its ops ordered block by block.
      {"llama3-8b-256-domains-of-4-blocks",
       yaml(Yaml("llama3-8b", "{preset: dgx-h200, nodes: 32, nvlink_domain_nodes: 4}", "{tp: 8, dp: 32}",
                 "{tp: 4, dp: 64}", big_memory)),
       false},
      {"llama3-8b-nvl72-disaggregated",
       yaml(Yaml("llama3-8b", "{preset: gb200-nvl72, nodes: 36}", "{tp: 4, pp: 2, dp: 9, gpus: \"0-71\"}",
                 "{tp: 4, dp: 18, gpus: \"72-143\"}", big_memory)),
       false},
      {"qwen3-30b-a3b-64", yaml(Yaml("qwen3-30b-a3b", "{preset: dgx-h200, nodes: 8}", "{tp: 1, ep: 8, dp: 64}",
                                     "{tp: 4, dp: 16}", big_memory)),
       false},
  };
}

TEST(GoldenPlans, PlansAreUnchanged) {
  const std::string path = std::string(RESHARD_TEST_DATA_DIR) + "/planner_golden.json";
  const bool update = std::getenv("RESHARD_UPDATE_GOLDEN") != nullptr;
  nlohmann::json golden;
  if (!update) {
    std::ifstream in(path);
    ASSERT_TRUE(in) << "missing " << path;
    in >> golden;
  }
  nlohmann::json made = nlohmann::json::object();
  for (const GoldenCase& g : GoldenCases()) {
    PlannerOptions o;
    o.simulate = g.simulate;
    o.replica_blocks = g.replica_blocks;
    const PlanResult r = MakePlan(g.scenario, o);
    ASSERT_TRUE(r.ok()) << g.name << ": " << r.message;
    Digest h;
    h.Add(r.plan);
    char digest[17];
    std::snprintf(digest, sizeof digest, "%016llx", static_cast<unsigned long long>(h.value()));
    made[g.name] = {{"digest", digest}, {"ops", r.stats.ops}, {"segments", r.stats.segments},
                    {"segment_bytes", r.plan.summary.segment_bytes}};
    if (update) continue;
    ASSERT_TRUE(golden.contains(g.name)) << g.name << " is not in " << path;
    const auto& want = golden[g.name];
    EXPECT_EQ(r.stats.ops, want["ops"].get<int64_t>()) << g.name;
    EXPECT_EQ(r.stats.segments, want["segments"].get<int64_t>()) << g.name;
    EXPECT_EQ(r.plan.summary.segment_bytes, want["segment_bytes"].get<int64_t>()) << g.name;
    EXPECT_EQ(std::string(digest), want["digest"].get<std::string>())
        << g.name << ": the plan changed (if on purpose, regenerate: RESHARD_UPDATE_GOLDEN=1 planner_test --gtest_filter=GoldenPlans.*)";
  }
  if (update) {
    std::ofstream(path) << made.dump(2) << "\n";
    GTEST_SKIP() << "wrote " << path;
  }
}

}  // namespace
}  // namespace reshard
