// `reshard run` / `reshard validate` as a user calls them: the built binary on
// hand-built plan files (tests/executor/test_plans.h) and a tiny scenario.
// Exit codes: 0 verified, 1 wrong bytes, 2 bad input (a plan failing Verify).
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "tests/executor/test_plans.h"

#include "tests/common/run_binary.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace executor_cli_test {

using ::testing::HasSubstr;

using Result = ::reshard::testing::RunResult;

std::filesystem::path TempPath(const std::string& name) {
  std::string file = "reshard_executor_cli_";
  file += std::to_string(::getpid());
  file += '_';
  file += name;
  return std::filesystem::temp_directory_path() / file;
}

// Runs `reshard ARGS...`, capturing stdout and stderr separately.
Result Reshard(const std::vector<std::string>& args) { return ::reshard::testing::RunBinary(RESHARD_BINARY, args); }

// Writes a plan file that is removed when the test ends.
class PlanFile {
 public:
  PlanFile(const Plan& p, const std::string& name) : path_(TempPath(name)) { WritePlan(p, path_.string()); }
  ~PlanFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(RunCommand, PlanJsonRunsAndReportsDesignFields) {
  const Plan p = testplans::ExchangePlan();
  const PlanFile f(p, "exchange.json");
  const Result r = Reshard({"run", f.path(), "--json", "--repeat", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("verified"), true);
  for (const char* k : {"time_s", "peak_bytes", "bytes_moved", "lower_bound_s", "plan_efficiency", "segment_bytes",
                        "offload_fraction", "measured"})
    EXPECT_TRUE(j.contains(k)) << k;
  const auto& m = j.at("measured");
  EXPECT_EQ(m.at("backend"), "host");
  EXPECT_EQ(m.at("runs_time_s").size(), 3u);
  EXPECT_EQ(m.at("bytes_moved").at("nvlink"), 2 * 8 * 24 * 2);
  EXPECT_EQ(m.at("checked_elements"), 2 * 16 * 24);
  EXPECT_EQ(m.at("peak_bytes").size(), 2u);
  EXPECT_EQ(m.at("ops").at("op").size(), p.ops.size());
}

TEST(RunCommand, WrongBytesExitOneNamingTensorAndIndex) {
  testplans::PackOptions o;
  o.pack_shift_bytes = 2;
  const PlanFile f(testplans::PackSendUnpackPlan(o), "shifted.json");
  const Result r = Reshard({"run", f.path(), "--max-mismatches", "2"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.out, HasSubstr("NOT verified: 256 of 256"));
  EXPECT_THAT(r.out, HasSubstr("tensor 'layers.0.self_attn.q_proj.weight' element 8"));
  EXPECT_THAT(r.err, HasSubstr("verification failed"));
}

TEST(RunCommand, PlanFailingVerifyIsBadInput) {
  Plan p = testplans::ExchangePlan();
  p.ops.back().match = -1;  // the last op is a receive
  const PlanFile f(p, "unmatched.json");
  const Result r = Reshard({"run", f.path()});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr(f.path()));
  EXPECT_THAT(r.err, HasSubstr("no matching"));
}

TEST(RunCommand, UnknownBackendIsBadInput) {
  const PlanFile f(testplans::LocalCopyPlan(), "local.json");
  EXPECT_EQ(Reshard({"run", f.path(), "--backend", "gloo"}).code, 2);
}

TEST(RunCommand, ScenarioIsPlannedThenRun) {
  std::string scenario = RESHARD_SOURCE_DIR;
  scenario += "/scenarios/tiny-llama-tp2-to-tp1x2.yaml";
  const Result r = Reshard({"run", scenario, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j.at("verified").get<bool>());  // every destination byte checked and right
  EXPECT_GT(j.at("time_s").get<double>(), 0);  // the planner's prediction
  EXPECT_GT(j.at("measured").at("checked_elements").get<int64_t>(), 0);
}

TEST(ValidateCommand, ReportsSignedRelativeErrorsPerGpu) {
  const PlanFile f(testplans::ExchangePlan(), "exchange-validate.json");
  const Result r = Reshard({"validate", f.path(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const double predicted = j.at("time_s").get<double>();
  const double measured = j.at("measured").at("time_s").get<double>();
  ASSERT_GT(measured, 0);
  EXPECT_NEAR(j.at("time_error").get<double>(), predicted / measured - 1, 1e-9);
  ASSERT_EQ(j.at("per_gpu").size(), 2u);
  for (const auto& g : j.at("per_gpu")) {
    const double pm = g.at("measured_peak_bytes").get<double>();
    ASSERT_GT(pm, 0);
    EXPECT_NEAR(g.at("peak_error").get<double>(), g.at("predicted_peak_bytes").get<double>() / pm - 1, 1e-9);
  }
}

}  // namespace executor_cli_test
}  // namespace reshard
