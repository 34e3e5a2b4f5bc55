// Measured traces: the timeline writer (sim/trace.h WriteTimelinesTrace) on
// hand-made op times, and `reshard run / validate --trace` on the host backend
// through the built binary: valid JSON, one process per timeline ("measured";
// validate: "predicted" and "measured"), every op once per process, start <=
// end; bad paths refused before any work.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "sim/trace.h"
#include "tests/common/run_binary.h"
#include "tests/executor/test_plans.h"

namespace reshard {
namespace {

using ::testing::HasSubstr;
using nlohmann::json;

std::filesystem::path Temp(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("reshard_trace_" + std::to_string(::getpid()) + "_" + name);
}

::reshard::testing::RunResult Reshard(const std::vector<std::string>& args) {
  return ::reshard::testing::RunBinary(RESHARD_BINARY, args);
}

json ReadJson(const std::filesystem::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

// A trace's processes by pid: name, and per op id its "X" slices (ts, dur).
struct Process {
  std::string name;
  std::map<int32_t, std::vector<std::pair<double, double>>> ops;
  std::map<int64_t, std::string> threads;  // tid -> name
};
std::map<int64_t, Process> Processes(const json& trace) {
  std::map<int64_t, Process> out;
  for (const json& e : trace.at("traceEvents")) {
    const int64_t pid = e.at("pid").get<int64_t>();
    if (e.at("ph") == "M" && e.at("name") == "process_name") out[pid].name = e.at("args").at("name");
    if (e.at("ph") == "M" && e.at("name") == "thread_name") out[pid].threads[e.at("tid")] = e.at("args").at("name");
    if (e.at("ph") == "X")
      out[pid].ops[e.at("args").at("op").get<int32_t>()].push_back({e.at("ts").get<double>(), e.at("dur").get<double>()});
  }
  return out;
}

// Every op of `plan` exactly once in `p`, with a duration >= 0.
void ExpectEveryOpOnce(const Process& p, const Plan& plan) {
  EXPECT_EQ(p.ops.size(), plan.ops.size()) << p.name;
  for (const Op& op : plan.ops) {
    const auto it = p.ops.find(op.id);
    ASSERT_NE(it, p.ops.end()) << p.name << ": op " << op.id << " missing";
    ASSERT_EQ(it->second.size(), 1u) << p.name << ": op " << op.id;
    EXPECT_GE(it->second[0].first, 0) << p.name << ": op " << op.id;
    EXPECT_GE(it->second[0].second, 0) << p.name << ": op " << op.id;  // start <= end
  }
}

// ---- the writer ------------------------------------------------------------

TEST(TimelineTrace, HandMadeOpTimesNestPerTrackInMicroseconds) {
  // Per GPU: alloc, offload, free, alloc, reload, free on the host stream.
  const Plan plan = testplans::OffloadReloadPlan();
  ASSERT_EQ(plan.ops.size(), 12u);
  Timeline predicted{"predicted", {}}, measured{"measured", {}};
  for (const Op& op : plan.ops) {
    // Predicted: op k from k us to k us + 500 ns; measured: 1.5 x later and
    // longer (+250 ns), each op given once, in reverse order (the writer sorts).
    predicted.ops.push_back({op.id, op.id * 1000, op.id * 1000 + 500});
    measured.ops.insert(measured.ops.begin(), {op.id, op.id * 1500, op.id * 1500 + 750});
  }
  std::ostringstream out;
  WriteTimelinesTrace(out, plan, {predicted, measured});
  const json trace = json::parse(out.str());
  EXPECT_EQ(trace.at("otherData").at("plan"), plan.name);
  const auto procs = Processes(trace);
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs.at(0).name, "predicted");
  EXPECT_EQ(procs.at(1).name, "measured");
  for (const auto& [pid, p] : procs) ExpectEveryOpOnce(p, plan);
  for (const Op& op : plan.ops) {
    EXPECT_DOUBLE_EQ(procs.at(0).ops.at(op.id)[0].first, op.id * 1.0);    // 1000 ns = 1 us
    EXPECT_DOUBLE_EQ(procs.at(0).ops.at(op.id)[0].second, 0.5);           // 500 ns
    EXPECT_DOUBLE_EQ(procs.at(1).ops.at(op.id)[0].first, op.id * 1.5);
    EXPECT_DOUBLE_EQ(procs.at(1).ops.at(op.id)[0].second, 0.75);
  }
  // One track per (GPU, stream) used, named after both.
  std::set<std::pair<int32_t, int32_t>> used;
  for (const Op& op : plan.ops) used.emplace(op.gpu, op.stream);
  for (const auto& [pid, p] : procs) {
    EXPECT_EQ(p.threads.size(), used.size());
    for (const auto& [tid, name] : p.threads) EXPECT_THAT(name, HasSubstr("GPU "));
  }
  // Within a track, slices come by start time, and at equal starts the
  // longest first, so they nest.
  std::map<std::pair<int64_t, int64_t>, std::pair<double, double>> last;
  for (const json& e : trace.at("traceEvents")) {
    if (e.at("ph") != "X") continue;
    const auto key = std::make_pair(e.at("pid").get<int64_t>(), e.at("tid").get<int64_t>());
    const double ts = e.at("ts"), dur = e.at("dur");
    if (const auto it = last.find(key); it != last.end()) {
      EXPECT_LE(it->second.first, ts);
      if (it->second.first == ts) {
        EXPECT_GE(it->second.second, dur);
      }
    }
    last[key] = {ts, dur};
  }
}

TEST(TimelineTrace, EqualStartsLongestFirst) {
  const Plan plan = testplans::OffloadReloadPlan();
  ASSERT_EQ(plan.ops[0].gpu, plan.ops[1].gpu);
  ASSERT_EQ(plan.ops[0].stream, plan.ops[1].stream);
  // Both ops start at 2 us; op 0 is shorter, so op 1 must be written first.
  const Timeline t{"measured", {{0, 2000, 2100}, {1, 2000, 5000}}};
  std::ostringstream out;
  WriteTimelinesTrace(out, plan, {t});
  const json trace = json::parse(out.str());
  std::vector<int32_t> order;
  for (const json& e : trace.at("traceEvents"))
    if (e.at("ph") == "X") order.push_back(e.at("args").at("op"));
  EXPECT_EQ(order, (std::vector<int32_t>{1, 0}));
}

TEST(TimelineTrace, UnwritablePathIsInputError) {
  const Plan plan = testplans::LocalCopyPlan(1);
  EXPECT_THROW(WriteTimelinesTrace("/nonexistent-dir/t.json", plan, {}), InputError);
}

// ---- run / validate --trace on the host backend ------------------------------

class PlanFile {
 public:
  PlanFile(const Plan& p, const std::string& name) : path_(Temp(name)) { WritePlan(p, path_.string()); }
  ~PlanFile() { std::filesystem::remove(path_); }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

TEST(ValidateTrace, PredictedAndMeasuredProcessesHoldEveryOpOnce) {
  const Plan plan = testplans::OffloadReloadPlan();
  const PlanFile f(plan, "offload.json");
  const auto trace = Temp("validate-trace.json");
  const auto r = Reshard({"validate", f.path(), "--repeat", "2", "--trace", trace.string(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j.at("trace"), trace.string());
  const auto procs = Processes(ReadJson(trace));
  ASSERT_EQ(procs.size(), 2u);
  EXPECT_EQ(procs.at(0).name, "predicted");
  EXPECT_EQ(procs.at(1).name, "measured");
  for (const auto& [pid, p] : procs) ExpectEveryOpOnce(p, plan);
  // The measured process is the reported run: its last end is its time_s.
  double last_end_us = 0;
  for (const auto& [op, s] : procs.at(1).ops) last_end_us = std::max(last_end_us, s[0].first + s[0].second);
  EXPECT_NEAR(last_end_us * 1e-6, j.at("measured").at("time_s").get<double>(), 2e-9);
  std::filesystem::remove(trace);
}

TEST(ValidateTrace, TimesAreFromTheCallWithTheGpuSpanBeside) {
  const PlanFile f(testplans::ExchangePlan(), "exchange.json");
  const auto r = Reshard({"validate", f.path(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& m = j.at("measured");
  const double time_s = m.at("time_s"), span_s = m.at("gpu_span_s");
  EXPECT_GT(span_s, 0);
  EXPECT_GE(time_s, span_s);
  EXPECT_GE(m.at("wall_s").get<double>(), time_s);
  // Per GPU: from the call to that GPU's last op end, so the slowest is the refit.
  double slowest = 0;
  for (const json& g : j.at("per_gpu")) slowest = std::max(slowest, g.at("measured_time_s").get<double>());
  EXPECT_DOUBLE_EQ(slowest, time_s);

  const auto text = Reshard({"validate", f.path()});
  ASSERT_EQ(text.code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("from the call to the last op end"));
  EXPECT_THAT(text.out, HasSubstr("GPU span"));
}

TEST(RunTrace, MeasuredProcessHoldsEveryOpOnce) {
  const Plan plan = testplans::ExchangePlan();
  const PlanFile f(plan, "exchange-run.json");
  const auto trace = Temp("run-trace.json");
  const auto r = Reshard({"run", f.path(), "--trace", trace.string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("measured trace written to"));
  const auto procs = Processes(ReadJson(trace));
  ASSERT_EQ(procs.size(), 1u);
  EXPECT_EQ(procs.begin()->second.name, "measured");
  ExpectEveryOpOnce(procs.begin()->second, plan);
  std::filesystem::remove(trace);
}

TEST(RunTrace, BadPathIsRefusedBeforeAnyWork) {
  const PlanFile f(testplans::ExchangePlan(), "exchange-bad.json");
  const auto saved = Temp("saved-plan.json");
  for (const char* verb : {"run", "validate"}) {
    const auto r = Reshard({verb, f.path(), "--trace", "/nonexistent-dir/t.json", "--save-plan", saved.string()});
    EXPECT_EQ(r.code, 2) << verb << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--trace")) << verb;
    EXPECT_TRUE(r.out.empty()) << verb << ": " << r.out;  // nothing ran
    EXPECT_FALSE(std::filesystem::exists(saved)) << verb;
  }
}

}  // namespace
}  // namespace reshard
