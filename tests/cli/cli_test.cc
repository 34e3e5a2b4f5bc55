// Runs the built `reshard` binary: exit codes (0 ok, 2 bad input, 3 does not
// fit), messages on stderr, and the fields of `inspect --json`.
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

#include "tests/common/run_binary.h"

namespace {

using ::testing::HasSubstr;
using nlohmann::json;

const std::string kData = RESHARD_TEST_DATA_DIR;

using Result = ::reshard::testing::RunResult;

// Runs `reshard ARGS...`, capturing stdout and stderr separately.
Result Reshard(const std::vector<std::string>& args) { return ::reshard::testing::RunBinary(RESHARD_BINARY, args); }

TEST(Cli, InspectBuiltinHuman) {
  const Result r = Reshard({"inspect", "llama3-8b-tp2-to-tp1x2"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("8,030,261,248 parameters"));
  EXPECT_THAT(r.out, HasSubstr("colocated"));
  EXPECT_THAT(r.out, HasSubstr("fits: yes"));
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(Cli, InspectJsonFields) {
  const Result r = Reshard({"inspect", "builtin:llama3-8b-tp2-to-tp1x2", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["parameters"], 8030261248);
  EXPECT_EQ(j["model_bytes"], int64_t{8030261248} * 2);
  ASSERT_EQ(j["source_bytes"].size(), 2u);
  ASSERT_EQ(j["destination_bytes"].size(), 2u);
  // TP2 source: each GPU holds about half; TP1 x DP2 destination: each GPU all of it.
  for (int g = 0; g < 2; ++g) {
    EXPECT_EQ(j["destination_bytes"][g], j["model_bytes"]);
    EXPECT_GE(j["source_bytes"][g].get<int64_t>(), j["model_bytes"].get<int64_t>() / 2);
    EXPECT_LT(j["source_bytes"][g].get<int64_t>(), j["model_bytes"].get<int64_t>() / 2 + (1 << 20));
  }
  ASSERT_EQ(j["memory_at_start"].size(), 2u);
  const json& m = j["memory_at_start"][1];
  EXPECT_EQ(m["gpu"], 1);
  EXPECT_EQ(m["training_weights_bytes"], j["source_bytes"][1]);
  EXPECT_EQ(m["kv_cache_bytes"], int64_t{10} << 30);
  EXPECT_EQ(m["total_bytes"].get<int64_t>(),
            m["training_weights_bytes"].get<int64_t>() + m["gradients_bytes"].get<int64_t>() +
                m["optimizer_bytes"].get<int64_t>() + m["kv_cache_bytes"].get<int64_t>() +
                m["reserve_bytes"].get<int64_t>() + m["context_bytes"].get<int64_t>());
  EXPECT_EQ(m["free_bytes"].get<int64_t>(), m["capacity_bytes"].get<int64_t>() - m["total_bytes"].get<int64_t>());
  EXPECT_EQ(j["fits"], true);
}

TEST(Cli, InspectFileAndJsonScenario) {
  Result r = Reshard({"inspect", kData + "/scenarios/hf-llama3-8b.yaml", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["parameters"], 8030261248);
  EXPECT_EQ(j["source_bytes"].size(), 16u);  // one entry per GPU of the 2-node cluster
  EXPECT_EQ(j["destination_bytes"][0], 0);   // destination on GPUs 12-15 only
  EXPECT_GT(j["destination_bytes"][12].get<int64_t>(), 0);
  EXPECT_EQ(j["destination_dtype"], "fp8_e4m3");
  r = Reshard({"inspect", kData + "/scenarios/hf-llama3-8b.json", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["source_bytes"], j["source_bytes"]);
}

TEST(Cli, InspectAtScaleSummarises) {
  const Result r = Reshard({"inspect", "deepseek-v3-pp16ep16-to-tp32dp8"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("512 GPUs used of 512"));
  EXPECT_THAT(r.out, HasSubstr("fullest GPUs"));
  EXPECT_THAT(r.out, HasSubstr("disaggregated"));
}

TEST(Cli, DoesNotFitExits3) {
  Result r = Reshard({"inspect", kData + "/scenarios/does-not-fit.yaml"});
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, HasSubstr("GPU 0 needs"));
  EXPECT_THAT(r.err, HasSubstr("missing"));
  r = Reshard({"inspect", kData + "/scenarios/does-not-fit.yaml", "--json"});
  EXPECT_EQ(r.code, 3);
  const json j = json::parse(r.out);  // JSON is still printed
  EXPECT_EQ(j["fits"], false);
  EXPECT_EQ(j["worst_gpu"], 0);
  EXPECT_GT(j["missing_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(j["missing_bytes"].get<int64_t>(),
            j["memory_at_start"][0]["total_bytes"].get<int64_t>() - j["memory_at_start"][0]["capacity_bytes"].get<int64_t>());
}

TEST(Cli, EveryBadScenarioExits2WithItsMessage) {
  std::ifstream in(kData + "/bad_scenarios/expected.txt");
  std::string line;
  int cases = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    ASSERT_NE(tab, std::string::npos) << line;
    const std::string file = line.substr(0, tab), fragment = line.substr(tab + 1);
    const Result r = Reshard({"inspect", kData + "/bad_scenarios/" + file});
    EXPECT_EQ(r.code, 2) << file << ": " << r.err;
    EXPECT_THAT(r.err, HasSubstr("error: ")) << file;
    EXPECT_THAT(r.err, HasSubstr(fragment)) << file;
    EXPECT_TRUE(r.out.empty()) << file;
    ++cases;
  }
  EXPECT_GE(cases, 20);
}

TEST(Cli, UnknownScenarioAndBadFlagsExit2) {
  Result r = Reshard({"inspect", "llama3-8b-tp2-to-tp1x3"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("did you mean 'llama3-8b-tp2-to-tp1x2'?"));
  r = Reshard({"inspect", "builtin:nope"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown built-in scenario 'nope'"));
  r = Reshard({"inspect", "llama3-8b-tp2-to-tp1x2", "--jsn"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--jsn"));
  r = Reshard({"inspekt", "x"});
  EXPECT_EQ(r.code, 2);
  r = Reshard({});
  EXPECT_EQ(r.code, 2);
  r = Reshard({"inspect"});
  EXPECT_EQ(r.code, 2);
}

TEST(Cli, HelpAndVersionExit0) {
  Result r = Reshard({"--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("inspect"));
  r = Reshard({"inspect", "--help"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("--json"));
  r = Reshard({"--version"});
  EXPECT_EQ(r.code, 0);
  EXPECT_THAT(r.out, HasSubstr("reshard"));
}

}  // namespace
