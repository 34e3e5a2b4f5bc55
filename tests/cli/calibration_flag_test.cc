// `--calibration FILE` through the built `reshard`: the profile replaces the
// scenario's cluster.calibration on plan, simulate, run, validate, sweep and
// inspect, and the prediction follows it (a lower bound of NVLink bytes / the
// profile's bandwidth); a plan.json takes it only with --scenario, since a
// plan carries the cluster it was planned for. Bad files: bad_inputs_test.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace calibration_flag_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using nlohmann::json;
using Result = ::reshard::testing::RunResult;

Result Reshard(const std::vector<std::string>& args) { return ::reshard::testing::RunBinary(RESHARD_BINARY, args); }

// Files of one test in a folder of their own, removed afterwards.
class Files {
 public:
  Files() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("reshard_calibration_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Files() { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name)) << text;
    return Path(name);
  }
  // A profile that gives NVLink only: no latency, `bytes_per_s` flat over sizes.
  std::string NvlinkProfile(const std::string& name, double bytes_per_s) const {
    // Host issue costs zeroed: the wire alone is compared with its bound.
    json host = json::object();
    for (const char* k : {"event_record_ns", "stream_wait_ns", "kernel_launch_ns", "memcpy_ns", "alloc_ns", "free_ns",
                          "nccl_op_ns", "nccl_group_ns", "nccl_group_op_ns", "event_gpu_ns"})
      host[k] = 0;
    return Write(name + ".json", json{{"name", name},
                                      {"links", {{"nvlink", {{"latency_ns", 0}, {"bytes_per_s", bytes_per_s}}}}},
                                      {"host", host}}
                                     .dump());
  }
  // Tiny Llama TP2 -> TP1 x DP2 on 2x H200; `cluster` is the YAML of the cluster field.
  std::string TinyScenario(const std::string& name, const std::string& cluster) const {
    return Write(name + ".yaml", "name: tiny\nmodel: tiny-llama\ncluster: " + cluster +
                                     "\nsource: {tp: 2}\ndestination: {tp: 1, dp: 2}\n");
  }

 private:
  fs::path dir_;
};

json JsonOf(const std::vector<std::string>& args) {
  const Result r = Reshard(args);
  EXPECT_EQ(r.code, 0) << r.err;
  return r.code == 0 ? json::parse(r.out) : json::object();
}

constexpr double kFast = 4e11, kSlow = 1e11;  // NVLink bytes/s of the two profiles

TEST(CalibrationFlag, ThePredictionFollowsTheProfile) {
  const Files f;
  const std::string fast = f.NvlinkProfile("fast", kFast), slow = f.NvlinkProfile("slow", kSlow);
  // Disaggregated: GPU 0 sends every byte over its one NVLink port, so the
  // lower bound is those bytes / the profile's bandwidth, and with no latency
  // and 1 GiB segments the plan runs within 1 % of it.
  for (const char* verb : {"plan", "simulate"}) {
    const json a = JsonOf({verb, "llama3-8b-disaggregated", "--calibration", fast, "--json"});
    const json b = JsonOf({verb, "llama3-8b-disaggregated", "--calibration", slow, "--json"});
    const json none = JsonOf({verb, "llama3-8b-disaggregated", "--json"});
    const double nvlink_bytes = a["bytes_moved"]["nvlink"].get<double>();
    ASSERT_GT(nvlink_bytes, 16e9) << verb;
    EXPECT_EQ(b["bytes_moved"], a["bytes_moved"]) << verb;
    EXPECT_DOUBLE_EQ(a["lower_bound_s"].get<double>(), nvlink_bytes / kFast) << verb;
    EXPECT_DOUBLE_EQ(b["lower_bound_s"].get<double>(), nvlink_bytes / kSlow) << verb;
    EXPECT_NEAR(a["time_s"].get<double>(), nvlink_bytes / kFast, 0.01 * nvlink_bytes / kFast) << verb;
    EXPECT_NEAR(b["time_s"].get<double>(), nvlink_bytes / kSlow, 0.01 * nvlink_bytes / kSlow) << verb;
    EXPECT_NE(none["time_s"], a["time_s"]) << verb;
  }
  // sweep: every point that moves nothing to host (PCIe binds the others).
  const json sa = JsonOf({"sweep", "llama3-8b-disaggregated", "--calibration", fast, "--segment-bytes", "1GiB",
                          "--offload", "0", "--threads", "1", "--json"});
  const json sb = JsonOf({"sweep", "llama3-8b-disaggregated", "--calibration", slow, "--segment-bytes", "1GiB",
                          "--offload", "0", "--threads", "1", "--json"});
  ASSERT_EQ(sa["points"].size(), sb["points"].size());
  ASSERT_FALSE(sa["points"].empty());
  for (size_t i = 0; i < sa["points"].size(); ++i) {
    if (sa["points"][i]["memory_policy"].get<std::string>().find("host") != std::string::npos) continue;
    EXPECT_DOUBLE_EQ(sb["points"][i]["lower_bound_s"].get<double>(),
                     sa["points"][i]["lower_bound_s"].get<double>() * (kFast / kSlow))
        << i;
  }
  // run and validate report the plan's prediction beside the measurement.
  for (const char* verb : {"run", "validate"}) {
    const json a = JsonOf({verb, "tiny-llama-tp2-to-tp1x2", "--calibration", fast, "--json"});
    const json b = JsonOf({verb, "tiny-llama-tp2-to-tp1x2", "--calibration", slow, "--json"});
    EXPECT_TRUE(a["verified"].get<bool>()) << verb;
    EXPECT_DOUBLE_EQ(b["lower_bound_s"].get<double>(), a["lower_bound_s"].get<double>() * (kFast / kSlow)) << verb;
  }
  // inspect: the cluster is the measured one, with its fingerprint.
  const json ia = JsonOf({"inspect", "tiny-llama-tp2-to-tp1x2", "--calibration", fast, "--json"});
  const json in = JsonOf({"inspect", "tiny-llama-tp2-to-tp1x2", "--json"});
  EXPECT_TRUE(ia["cluster"]["measured"].get<bool>());
  EXPECT_NE(ia["cluster"]["fingerprint"], in["cluster"]["fingerprint"]);
}

TEST(CalibrationFlag, IsTheScenariosCalibrationField) {
  const Files f;
  const std::string fast = f.NvlinkProfile("fast", kFast), slow = f.NvlinkProfile("slow", kSlow);
  const std::string plain = f.TinyScenario("plain", "h200-x2");
  const std::string with_fast = f.TinyScenario("with_fast", "{preset: h200-x2, calibration: " + fast + "}");
  const std::string with_slow = f.TinyScenario("with_slow", "{preset: h200-x2, calibration: " + slow + "}");
  // The flag on a scenario without a profile = the profile in the scenario.
  EXPECT_EQ(JsonOf({"plan", plain, "--calibration", fast, "--json"}), JsonOf({"plan", with_fast, "--json"}));
  EXPECT_EQ(JsonOf({"inspect", plain, "--calibration", fast, "--json"})["cluster"],
            JsonOf({"inspect", with_fast, "--json"})["cluster"]);
  // On a scenario with a profile, the flag's is used instead.
  EXPECT_EQ(JsonOf({"simulate", with_fast, "--calibration", slow, "--json"}), JsonOf({"simulate", with_slow, "--json"}));
  EXPECT_EQ(JsonOf({"inspect", with_fast, "--calibration", slow, "--json"})["cluster"],
            JsonOf({"inspect", with_slow, "--json"})["cluster"]);
}

TEST(CalibrationFlag, APlanJsonTakesItOnlyWithTheScenarioItChecks) {
  const Files f;
  const std::string fast = f.NvlinkProfile("fast", kFast), slow = f.NvlinkProfile("slow", kSlow);
  const std::string plan = f.Path("plan.json"), saved = f.Path("saved.json");
  ASSERT_EQ(Reshard({"plan", "tiny-llama-tp2-to-tp1x2", "--calibration", fast, "-o", plan}).code, 0);
  // Alone: refused before any work, saying why and what to do.
  for (const char* verb : {"simulate", "run", "validate"}) {
    const Result r = Reshard({verb, plan, "--calibration", fast, "--json"});
    EXPECT_EQ(r.code, 2) << verb << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("--calibration")) << verb;
    EXPECT_THAT(r.err, HasSubstr("carries the cluster it was planned for")) << verb;
    EXPECT_THAT(r.err, HasSubstr("--scenario")) << verb;
    EXPECT_TRUE(r.out.empty()) << verb;
  }
  // With --scenario: the profile applies to that scenario, which the plan must match.
  const json predicted = JsonOf({"simulate", plan, "--scenario", "tiny-llama-tp2-to-tp1x2", "--calibration", fast,
                                 "--json"});
  EXPECT_EQ(predicted["time_s"], JsonOf({"simulate", "tiny-llama-tp2-to-tp1x2", "--calibration", fast,
                                         "--json"})["time_s"]);
  Result r = Reshard({"run", plan, "--scenario", "tiny-llama-tp2-to-tp1x2", "--calibration", fast, "--save-plan",
                      saved});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(saved));
  for (const std::vector<std::string>& other :
       {std::vector<std::string>{}, std::vector<std::string>{"--calibration", slow}}) {
    std::vector<std::string> args = {"simulate", plan, "--scenario", "tiny-llama-tp2-to-tp1x2"};
    args.insert(args.end(), other.begin(), other.end());
    r = Reshard(args);
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("cluster_fingerprint: not a plan for scenario"));
  }
}

}  // namespace calibration_flag_test
