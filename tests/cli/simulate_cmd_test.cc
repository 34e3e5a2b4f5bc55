// Runs `reshard simulate` from the built binary: a scenario and a plan.json
// give the same prediction with DESIGN's JSON fields; --trace writes a Chrome
// trace; a plan that fails Verify exits 2 naming the problem.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace simulate_cmd_test {

using ::testing::HasSubstr;
using nlohmann::json;

using Result = ::reshard::testing::RunResult;

std::filesystem::path Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("reshard_sim_cli_" + std::to_string(::getpid()) + "_" + name);
}

// Runs `reshard ARGS...`, capturing stdout and stderr separately.
Result Reshard(const std::vector<std::string>& args) { return ::reshard::testing::RunBinary(RESHARD_BINARY, args); }

json ReadJson(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

constexpr const char* kScenario = "tiny-llama-tp2-to-tp1x2";

TEST(CliSimulate, ScenarioAndPlanFileAgree) {
  const std::filesystem::path plan = Temp("plan.json"), trace = Temp("trace.json");
  const Result planned = Reshard({"plan", kScenario, "-o", plan.string()});
  ASSERT_EQ(planned.code, 0) << planned.err;

  const Result a = Reshard({"simulate", kScenario, "--json"});
  ASSERT_EQ(a.code, 0) << a.err;
  const Result b = Reshard({"simulate", plan.string(), "--json", "--trace", trace.string()});
  ASSERT_EQ(b.code, 0) << b.err;
  const json ja = json::parse(a.out), jb = json::parse(b.out);
  for (const char* k : {"time_s", "peak_bytes", "bytes_moved", "lower_bound_s", "plan_efficiency", "segment_bytes",
                        "offload_fraction", "links", "phases"}) {
    EXPECT_TRUE(jb.contains(k)) << k;
  }
  EXPECT_EQ(ja["time_s"], jb["time_s"]);
  EXPECT_EQ(ja["peak_bytes"], jb["peak_bytes"]);
  EXPECT_EQ(jb["peak_bytes"].size(), 2u);
  EXPECT_GT(jb["time_s"].get<double>(), 0.0);
  EXPECT_GE(jb["time_s"].get<double>() + 1e-9, jb["lower_bound_s"].get<double>());
  EXPECT_LE(jb["plan_efficiency"].get<double>(), 1.0 + 1e-9);
  // The prediction is the one `plan` stored in the plan's summary.
  const json p = ReadJson(plan);
  EXPECT_DOUBLE_EQ(p["summary"]["predicted_time_s"].get<double>(), jb["time_s"].get<double>());

  const json t = ReadJson(trace);
  ASSERT_TRUE(t.contains("traceEvents"));
  int slices = 0;
  for (const auto& e : t["traceEvents"]) slices += e["ph"] == "X" ? 1 : 0;
  EXPECT_EQ(static_cast<size_t>(slices), p["ops"].size());

  const Result human = Reshard({"simulate", plan.string()});
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_THAT(human.out, HasSubstr("predicted time"));
  EXPECT_THAT(human.out, HasSubstr("lower bound"));
  std::filesystem::remove(plan);
  std::filesystem::remove(trace);
}

// --trace-detail: ops has a slice per op; segments merges a stream's run of
// ops of one segment (or one kind) into one slice and drops alloc/free;
// links has only counters. The summary and --json give the trace's size.
TEST(CliSimulate, TraceDetailLevels) {
  const std::filesystem::path plan = Temp("detail_plan.json"), trace = Temp("detail_trace.json");
  ASSERT_EQ(Reshard({"plan", kScenario, "-o", plan.string()}).code, 0);
  const json p = ReadJson(plan);
  size_t timed_ops = 0;  // ops that are not alloc / free
  for (const auto& op : p["ops"]) timed_ops += op["kind"] != "alloc" && op["kind"] != "free";
  std::map<std::string, size_t> slices;
  for (const char* detail : {"ops", "segments", "links"}) {
    const Result r = Reshard({"simulate", plan.string(), "--json", "--trace", trace.string(), "--trace-detail", detail});
    ASSERT_EQ(r.code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["trace_detail"], detail);
    EXPECT_EQ(j["trace_bytes"].get<int64_t>(), static_cast<int64_t>(std::filesystem::file_size(trace)));
    const json t = ReadJson(trace);
    EXPECT_EQ(j["trace_events"].get<size_t>(), t["traceEvents"].size());
    EXPECT_EQ(t["otherData"]["detail"], detail);
    int64_t seg_ops = 0;
    for (const auto& e : t["traceEvents"]) {
      if (e["ph"] != "X") continue;
      ++slices[detail];
      if (std::string(detail) == "segments") seg_ops += e["args"]["ops"].get<int64_t>();
    }
    if (std::string(detail) == "segments") {
      EXPECT_EQ(static_cast<size_t>(seg_ops), timed_ops);  // every timed op, once
    }
  }
  EXPECT_EQ(slices["ops"], p["ops"].size());
  EXPECT_LT(slices["segments"], timed_ops);
  EXPECT_EQ(slices["links"], 0u);
  const Result human = Reshard({"simulate", plan.string(), "--trace", trace.string()});
  EXPECT_THAT(human.out, HasSubstr("events, "));
  EXPECT_THAT(human.out, HasSubstr("detail ops"));  // a small plan: every op by default
  std::filesystem::remove(plan);
  std::filesystem::remove(trace);
}

TEST(CliSimulate, PlanThatFailsVerifyExits2) {
  const std::filesystem::path plan = Temp("bad_plan.json");
  ASSERT_EQ(Reshard({"plan", kScenario, "-o", plan.string()}).code, 0);
  json p = ReadJson(plan);
  for (auto& op : p["ops"]) {
    if (op["kind"] == "send") {
      op["match"] = 0;  // op 0 is not its recv
      break;
    }
  }
  std::ofstream(plan) << p.dump();
  const Result r = Reshard({"simulate", plan.string()});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("fails Verify"));
  EXPECT_THAT(r.err, HasSubstr("no matching"));
  std::filesystem::remove(plan);
}

TEST(CliSimulate, UnwritableTraceExits2) {
  const Result r = Reshard({"simulate", kScenario, "--trace", "/nonexistent-dir/trace.json"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--trace: cannot write"));  // checked before any work
}

}  // namespace simulate_cmd_test
