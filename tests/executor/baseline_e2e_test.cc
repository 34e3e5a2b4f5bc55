// The Megatron-Core-style baseline plan (planner/baseline_plan.h) run end to
// end on the host backend: every destination element verified, the bytes the
// executor counts equal to the plan's; then `reshard plan|simulate|run
// --baseline megatron` through the built binary.
#include <cctype>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "model/scenario.h"
#include "planner/baseline_plan.h"
#include "tests/common/run_binary.h"

namespace reshard {
namespace {

struct Case {
  const char* name;
  const char* yaml;
};

const Case kCases[] = {
    {"tiny-llama colocated tp2 -> tp1x2", R"(
name: base-llama
model: tiny-llama
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
)"},
    {"tiny-llama disaggregated 0 -> 1", R"(
name: base-llama-disagg
model: tiny-llama
cluster: h200-x2
source: {tp: 1, gpus: "0"}
destination: {tp: 1, gpus: "1"}
)"},
    {"tiny-qwen2 (tied, biases) optimizer offloaded first", R"(
name: base-qwen2-offload
model: tiny-qwen2
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
memory: {optimizer: {bytes_per_param: 12, offload: all}}
)"},
    {"tiny-moe ep2 -> tp2", R"(
name: base-moe
model: tiny-moe
cluster: h200-x2
source: {tp: 1, ep: 2, dp: 2, gpus: all}
destination: {tp: 2, gpus: all}
)"},
    {"tiny-mla tp2 -> tp1x2", R"(
name: base-mla
model: tiny-mla
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
)"},
    {"tiny-llama on 8 GPUs: tp2 pp2 dp2 -> tp2 dp4", R"(
name: base-llama-8
model: tiny-llama
cluster: dgx-h200
source: {tp: 2, pp: 2, dp: 2, gpus: all}
destination: {tp: 2, dp: 4, gpus: all}
)"},
};

class BaselineEndToEnd : public ::testing::TestWithParam<Case> {};

TEST_P(BaselineEndToEnd, HostRunVerifiesEveryElement) {
  const Scenario s = ParseScenario(GetParam().yaml, "<e2e>");
  BaselineOptions o;
  o.simulate = false;
  const PlanResult r = MakeMegatronPlan(s, o);
  ASSERT_TRUE(r.ok());
  auto backend = MakeHostBackend();
  const Measurement m = Execute(r.plan, *backend);
  EXPECT_TRUE(m.verified) << GetParam().name << "\n" << FormatMeasurement(m, r.plan);
  int64_t want = 0;
  for (const ContentPiece& c : r.plan.destinations) want += Volume(c.box);
  EXPECT_GT(want, 0);
  EXPECT_EQ(m.checked_elements, want);
  EXPECT_EQ(m.op_times.size(), r.plan.ops.size());
  EXPECT_EQ(m.bytes_moved, r.plan.summary.bytes_moved);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, BaselineEndToEnd, ::testing::ValuesIn(kCases), [](const auto& test) {
  std::string n = test.param.name;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

testing::RunResult Reshard(const std::vector<std::string>& args) { return testing::RunBinary(RESHARD_BINARY, args); }

TEST(BaselineCli, RunVerifiesAndPlanAndSimulateReportTheBaseline) {
  const std::string s = "tiny-llama-tp2-to-tp1x2";
  const auto run = Reshard({"run", s, "--baseline", "megatron", "--backend", "host", "--json"});
  ASSERT_EQ(run.code, 0) << run.err;
  const nlohmann::json jr = nlohmann::json::parse(run.out);
  EXPECT_EQ(jr.at("verified"), true);
  EXPECT_GT(jr.at("time_s").get<double>(), 0);

  const auto plan = Reshard({"plan", s, "--baseline", "megatron", "--json"});
  ASSERT_EQ(plan.code, 0) << plan.err;
  const nlohmann::json jp = nlohmann::json::parse(plan.out);
  EXPECT_EQ(jp.at("baseline"), "megatron");
  EXPECT_EQ(jp.at("nccl_groups"), 1);
  EXPECT_EQ(jp.at("rounds"), 1);
  for (const char* k : {"time_s", "peak_bytes", "bytes_moved", "lower_bound_s", "plan_efficiency", "segment_bytes"})
    EXPECT_TRUE(jp.contains(k)) << k;
  // Same bytes as reshard's own plan of the scenario; a different schedule.
  const auto ours = Reshard({"plan", s, "--json"});
  ASSERT_EQ(ours.code, 0) << ours.err;
  const nlohmann::json jo = nlohmann::json::parse(ours.out);
  auto total = [](const nlohmann::json& j) {
    const auto& b = j.at("bytes_moved");
    return b.at("local").get<int64_t>() + b.at("nvlink").get<int64_t>() + b.at("network").get<int64_t>();
  };
  EXPECT_EQ(total(jp), total(jo));
  EXPECT_FALSE(jo.contains("baseline"));

  const auto sim = Reshard({"simulate", s, "--baseline", "megatron", "--json"});
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_NEAR(nlohmann::json::parse(sim.out).at("time_s").get<double>(), jp.at("time_s").get<double>(), 1e-12);
}

TEST(BaselineCli, BadCombinationsAreInputErrors) {
  const std::string s = "tiny-llama-tp2-to-tp1x2";
  EXPECT_EQ(Reshard({"plan", s, "--baseline", "nemo"}).code, 2);
  const auto seg = Reshard({"plan", s, "--baseline", "megatron", "--segment-bytes", "64MiB"});
  EXPECT_EQ(seg.code, 2);
  EXPECT_NE(seg.err.find("--segment-bytes"), std::string::npos) << seg.err;
}

}  // namespace
}  // namespace reshard
