// The Megatron-Core-style baseline plan (planner/baseline_plan.h) run end to
// end on the host backend: every destination element verified, the bytes the
// executor counts equal to the plan's; then `reshard plan|simulate|run
// --baseline megatron` through the built binary.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/scenario.h"
#include "planner/baseline_plan.h"
#include "tests/common/run_binary.h"
#include "tests/executor/e2e_cases.h"

namespace reshard {
namespace {

using testing::E2eCase;

// The baseline has no segments: the cases' scenarios without a plan section.
class BaselineEndToEnd : public ::testing::TestWithParam<E2eCase> {};

TEST_P(BaselineEndToEnd, HostRunVerifiesEveryElement) {
  const Scenario s = ParseScenario(GetParam().yaml, "<e2e>");
  BaselineOptions o;
  o.simulate = false;
  const PlanResult r = MakeMegatronPlan(s, o);
  ASSERT_TRUE(r.ok());
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, BaselineEndToEnd, ::testing::ValuesIn(testing::kE2eCases),
                         testing::E2eCaseName);

// Through the built `reshard`; the libraries-only build (RESHARD_BUILD_CLI=OFF, the
// sanitizer pass) has none.
#ifdef RESHARD_BINARY
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

  // The plan's summary predicts reshard's executor issuing it; simulate
  // --baseline megatron predicts Megatron-Core's Python stack by default,
  // whose per-op host costs are higher.
  const auto sim = Reshard({"simulate", s, "--baseline", "megatron", "--issue", "executor", "--json"});
  ASSERT_EQ(sim.code, 0) << sim.err;
  EXPECT_NEAR(nlohmann::json::parse(sim.out).at("time_s").get<double>(), jp.at("time_s").get<double>(), 1e-12);
  const auto py = Reshard({"simulate", s, "--baseline", "megatron", "--json"});
  ASSERT_EQ(py.code, 0) << py.err;
  const nlohmann::json jpy = nlohmann::json::parse(py.out);
  EXPECT_EQ(jpy.at("host").at("issue_model"), "python");
  EXPECT_GT(jpy.at("time_s").get<double>(), jp.at("time_s").get<double>());
}

TEST(BaselineCli, BadCombinationsAreInputErrors) {
  const std::string s = "tiny-llama-tp2-to-tp1x2";
  EXPECT_EQ(Reshard({"plan", s, "--baseline", "nemo"}).code, 2);
  const auto seg = Reshard({"plan", s, "--baseline", "megatron", "--segment-bytes", "64MiB"});
  EXPECT_EQ(seg.code, 2);
  EXPECT_NE(seg.err.find("--segment-bytes"), std::string::npos) << seg.err;
}

#endif  // RESHARD_BINARY

}  // namespace
}  // namespace reshard
