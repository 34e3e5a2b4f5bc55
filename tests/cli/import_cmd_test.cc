// `reshard import`: the scenario it writes plans (exit 0) with the recipe's
// layouts; --json lists the assumptions; bad recipes exit 2 naming the field.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace import_cmd_test {

using ::testing::HasSubstr;
using nlohmann::json;

const std::string kImport = std::string(RESHARD_TEST_DATA_DIR) + "/import/";

::reshard::testing::RunResult Reshard(const std::vector<std::string>& args) {
  return ::reshard::testing::RunBinary(RESHARD_BINARY, args);
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("reshard_import_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Imports with `args`, then plans the written file; returns plan --json.
json ImportThenPlan(const std::vector<std::string>& args, const std::string& name) {
  const std::string path = TempPath(name + ".yaml");
  std::vector<std::string> full = args;
  full.insert(full.begin() + 2, {"-o", path});
  const auto imported = Reshard(full);
  EXPECT_EQ(imported.code, 0) << imported.err;
  EXPECT_THAT(imported.out, HasSubstr("wrote " + path));
  const auto planned = Reshard({"plan", path, "--json", "--no-simulate"});
  EXPECT_EQ(planned.code, 0) << planned.err << ReadText(path);
  std::filesystem::remove(path);
  return planned.code == 0 ? json::parse(planned.out) : json::object();
}

// Colocated Llama-3.1-8B TP2 -> vLLM TP1 on one DGX node: every byte stays in
// the node (no network), the optimizer is offloaded to host memory over PCIe.
TEST(ImportCmd, NemoRlRecipePlans) {
  const json p = ImportThenPlan({"import", "nemo-rl", kImport + "grpo_llama8b_megatron.yaml"}, "nemo");
  ASSERT_TRUE(p.contains("bytes_moved")) << p.dump();
  EXPECT_EQ(p["scenario"], "grpo_llama8b_megatron");
  EXPECT_EQ(p["peak_bytes"].size(), 8u);
  EXPECT_EQ(p["bytes_moved"]["network"], 0);
  EXPECT_GT(p["bytes_moved"]["nvlink"].get<int64_t>(), 0);
  EXPECT_GT(p["bytes_moved"]["pcie"].get<int64_t>(), 0);  // offload: all
  EXPECT_EQ(p["offload_fraction"], 1.0);
}

// Trainer and generation on different nodes: the bytes cross the network.
TEST(ImportCmd, NemoRlNonColocatedPlansOverTheNetwork) {
  const json p =
      ImportThenPlan({"import", "nemo-rl", kImport + "grpo_qwen3_30b_noncolocated.yaml"}, "nemo_disagg");
  ASSERT_TRUE(p.contains("bytes_moved")) << p.dump();
  EXPECT_EQ(p["peak_bytes"].size(), 32u);
  EXPECT_GT(p["bytes_moved"]["network"].get<int64_t>(), 0);
  EXPECT_EQ(p["bytes_moved"]["local"], 0);
}

TEST(ImportCmd, VerlConfigWithOverridesPlans) {
  const json p = ImportThenPlan({"import", "verl", kImport + "ppo_megatron_qwen3_30b.yaml",
                                 "actor_rollout_ref.rollout.tensor_model_parallel_size=8"},
                                "verl");
  ASSERT_TRUE(p.contains("bytes_moved")) << p.dump();
  EXPECT_EQ(p["peak_bytes"].size(), 16u);
  EXPECT_GT(p["bytes_moved"]["local"].get<int64_t>(), 0);
}

TEST(ImportCmd, MegatronFlagsPlan) {
  const json p = ImportThenPlan({"import", "megatron", "--cluster", "h200-x2", "--tensor-model-parallel-size", "2",
                                 "--nnodes", "1", "--nproc-per-node", "2", "--bf16", "--use-distributed-optimizer",
                                 "--model", "meta-llama/Meta-Llama-3-8B-Instruct", "--tensor-parallel-size", "1"},
                                "megatron");
  ASSERT_TRUE(p.contains("bytes_moved")) << p.dump();
  EXPECT_EQ(p["peak_bytes"].size(), 2u);
}

TEST(ImportCmd, JsonListsAssumptionsAndPrintsTheScenario) {
  const auto r = Reshard({"import", "verl", kImport + "ppo_megatron_minimal.yaml", "--json", "--cluster", "dgx-h200"});
  ASSERT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["name"], "ppo_megatron_minimal");
  EXPECT_TRUE(j["scenario_path"].is_null());
  EXPECT_THAT(j["scenario_yaml"].get<std::string>(), HasSubstr("preset: dgx-h200"));
  EXPECT_THAT(j["assumptions"].dump(), HasSubstr("verl's default 2"));
  EXPECT_TRUE(j["ignored"].empty());
}

TEST(ImportCmd, BadInputExits2NamingTheField) {
  auto r = Reshard({"import", "nemo-rl", kImport + "grpo_dsv3_megatron.yaml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("policy.model_name: '/path/to/dsv3' is a local path with no config.json"));
  r = Reshard({"import", "nemo-rl", kImport + "no-such-recipe.yaml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("no such file"));
  r = Reshard({"import", "verl", kImport + "ppo_megatron_minimal.yaml", "--model", "llama3-9b"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("did you mean 'llama3-8b'"));
  r = Reshard({"import", "megatron", "--tensor-model-parallel-size", "3", "--nproc-per-node", "8", "--model",
               "llama3-8b"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--tensor-model-parallel-size: 8 GPUs are not a multiple of tp x cp x pp = 3"));
}

// -o is written like every other output: whole or not at all, never over the
// recipe it reads; a failed import leaves an existing file untouched.
TEST(ImportCmd, OutputIsAtomicAndNeverAnInput) {
  const std::string recipe = kImport + "grpo_llama8b_megatron.yaml";
  const std::string path = TempPath("atomic.yaml");
  {
    std::ofstream(path) << "previous contents\n";
  }
  auto r = Reshard({"import", "nemo-rl", kImport + "grpo_dsv3_megatron.yaml", "-o", path});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(ReadText(path), "previous contents\n");
  r = Reshard({"import", "nemo-rl", recipe, "-o", path});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(ReadText(path), HasSubstr("Imported by `reshard import nemo-rl`"));
  // No temporary file left beside the output.
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  for (const auto& e : std::filesystem::directory_iterator(dir))
    EXPECT_EQ(e.path().filename().string().find("." + std::filesystem::path(path).filename().string() + ".tmp"),
              std::string::npos)
        << e.path();
  std::filesystem::remove(path);

  const std::string copy = TempPath("recipe.yaml");
  std::filesystem::copy_file(recipe, copy, std::filesystem::copy_options::overwrite_existing);
  const std::string before = ReadText(copy);
  r = Reshard({"import", "nemo-rl", copy, "-o", copy});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("is an input of this command"));
  EXPECT_EQ(ReadText(copy), before);
  std::filesystem::remove(copy);
}

}  // namespace import_cmd_test
