// `reshard import` (model/import.h): recipes written like NeMo-RL's and verl's
// own, and Megatron-LM / vLLM flags, become scenarios whose layouts, placement
// and memory state are the job's; what the input leaves out is listed.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstdlib>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>

#include "model/error.h"
#include "model/import.h"
#include "model/layout.h"
#include "model/scenario.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace import_test {

using ::testing::HasSubstr;

const std::string kData = RESHARD_TEST_DATA_DIR;
const std::string kImport = kData + "/import/";
constexpr int64_t kGiB = int64_t{1} << 30;

std::vector<int32_t> Iota(int32_t begin, int32_t count) {
  std::vector<int32_t> v(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) v[static_cast<size_t>(i)] = begin + i;
  return v;
}

// The imported text as every verb reads it.
Scenario Load(const ImportResult& r) { return ParseScenario(r.yaml, kImport + r.name + ".yaml"); }

bool Mentions(const ImportResult& r, const std::string& text) {
  return std::any_of(r.assumptions.begin(), r.assumptions.end(),
                     [&](const std::string& a) { return a.find(text) != std::string::npos; });
}

template <typename F>
InputError ErrorOf(F f) {
  try {
    f();
  } catch (const InputError& e) {
    return e;
  }
  ADD_FAILURE() << "no InputError";
  return InputError("", "", "");
}

TEST(Import, HfNamesDenotePresets) {
  EXPECT_EQ(PresetForHfName("meta-llama/Llama-3.1-8B-Instruct"), "llama3-8b");
  EXPECT_EQ(PresetForHfName("meta-llama/Meta-Llama-3-70B"), "llama3-70b");
  EXPECT_EQ(PresetForHfName("meta-llama/Llama-3.3-70B-Instruct"), "llama3-70b");
  EXPECT_EQ(PresetForHfName("Qwen/Qwen3-30B-A3B"), "qwen3-30b-a3b");
  EXPECT_EQ(PresetForHfName("qwen/qwen3-235b-a22b-instruct-2507"), "qwen3-235b-a22b");
  EXPECT_EQ(PresetForHfName("deepseek-ai/DeepSeek-R1"), "deepseek-v3");
  EXPECT_EQ(PresetForHfName("moonshotai/Kimi-K2-Instruct"), "kimi-k2");
  EXPECT_EQ(PresetForHfName("llama3-8b"), "llama3-8b");  // a preset name is itself
  // Other architectures have no preset: Llama 3.2 3B, Qwen2.5, Qwen3 dense.
  EXPECT_EQ(PresetForHfName("meta-llama/Llama-3.2-3B-Instruct"), "");
  EXPECT_EQ(PresetForHfName("Qwen/Qwen2.5-7B-Instruct"), "");
  EXPECT_EQ(PresetForHfName("Qwen/Qwen3-8B"), "");
}

// NeMo-RL, colocated: Llama-3.1-8B, Megatron TP2 on one 8-GPU node, vLLM TP1;
// the recipe inherits its other keys from `defaults: grpo_base.yaml`.
TEST(Import, NemoRlColocated) {
  const ImportResult r = ImportNemoRl(kImport + "grpo_llama8b_megatron.yaml", {});
  const Scenario s = Load(r);
  EXPECT_EQ(r.name, "grpo_llama8b_megatron");
  EXPECT_EQ(s.model.config.name, "llama3-8b");
  EXPECT_THAT(s.cluster.name, HasSubstr("dgx-h100"));
  EXPECT_EQ(s.cluster.nodes, 1);
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_EQ(s.source.tp, 2);
  EXPECT_EQ(s.source.pp, 1);
  EXPECT_EQ(s.source.dp, 4);  // 8 GPUs / TP2
  EXPECT_EQ(s.destination.tp, 1);
  EXPECT_EQ(s.destination.dp, 8);
  EXPECT_EQ(s.source_gpus, Iota(0, 8));
  EXPECT_EQ(s.destination_gpus, Iota(0, 8));
  EXPECT_EQ(s.dtype, DType::kBF16);
  EXPECT_EQ(s.destination_dtype, DType::kBF16);
  // NeMo-RL moves the optimizer to the host around a colocated refit and builds
  // the KV cache after it.
  EXPECT_EQ(s.memory.optimizer.offload, OffloadMode::kAll);
  EXPECT_EQ(s.memory.optimizer.bytes_per_param, 12);
  EXPECT_TRUE(s.memory.optimizer.distributed);
  EXPECT_EQ(s.memory.kv_cache_bytes, 0);
  EXPECT_EQ(s.memory.reserve_bytes, 2 * kGiB);
  EXPECT_TRUE(Mentions(r, "dgx-h100"));
  EXPECT_TRUE(Mentions(r, "reserve_gib = 2"));
  EXPECT_TRUE(Mentions(r, "offload_before_refit"));
  EXPECT_THAT(r.yaml, HasSubstr("# policy.megatron_cfg.tensor_model_parallel_size"));
}

// NeMo-RL, generation on its own nodes: Qwen3-30B-A3B PP2 x EP8 on 16 GPUs,
// vLLM TP8 on the 16 after them; the KV cache stays resident.
TEST(Import, NemoRlNonColocatedKvFromFraction) {
  ImportOptions o;
  o.cluster_preset = "dgx-h100";
  o.reserve_gib = 1;
  const ImportResult r = ImportNemoRl(kImport + "grpo_qwen3_30b_noncolocated.yaml", o);
  const Scenario s = Load(r);
  EXPECT_EQ(s.model.config.name, "qwen3-30b-a3b");
  EXPECT_EQ(s.cluster.nodes, 4);
  EXPECT_EQ(s.source.pp, 2);
  EXPECT_EQ(s.source.ep, 8);
  EXPECT_EQ(s.source.etp, 1);
  EXPECT_EQ(s.source.dp, 8);  // 16 / PP2
  EXPECT_EQ(s.destination.tp, 8);
  EXPECT_EQ(s.destination.dp, 2);
  EXPECT_EQ(s.source_gpus, Iota(0, 16));
  EXPECT_EQ(s.destination_gpus, Iota(16, 16));
  EXPECT_EQ(s.memory.optimizer.offload, OffloadMode::kNone);
  EXPECT_EQ(s.memory.reserve_bytes, kGiB);
  EXPECT_FALSE(Mentions(r, "dgx-h100"));  // given
  // KV = 0.8 x GPU memory - the largest destination rank - CUDA context (the
  // YAML keeps four decimals of GiB, so compare to 0.0001 GiB).
  const Layout d = MakeDestinationLayout(s.model, s.destination, s.destination_dtype);
  int64_t weights = 0;
  for (int32_t rank = 0; rank < d.Ranks(); ++rank) weights = std::max(weights, d.RankBytes(rank));
  const double expected = 0.8 * static_cast<double>(s.cluster.gpu_memory_bytes) - static_cast<double>(weights) -
                          static_cast<double>(s.cluster.overheads.cuda_context_bytes);
  EXPECT_NEAR(static_cast<double>(s.memory.kv_cache_bytes), expected, 1e-4 * kGiB);
  EXPECT_GT(s.memory.kv_cache_bytes, 50 * kGiB);
  EXPECT_TRUE(Mentions(r, "KV cache = 0.8"));
  // Two vLLM engines of TP8, modelled as one engine with DP2: said.
  EXPECT_TRUE(Mentions(r, "2 independent engines"));
}

// NeMo-RL's DeepSeek-V3 recipe shape: a local checkpoint path, CP4, uneven
// first / last pipeline stages, 512 GPUs.
TEST(Import, NemoRlUnevenStagesAndLocalModel) {
  const InputError e = ErrorOf([] { ImportNemoRl(kImport + "grpo_dsv3_megatron.yaml", {}); });
  EXPECT_EQ(e.field(), "policy.model_name");
  EXPECT_THAT(e.problem(), HasSubstr("'/path/to/dsv3' is a local path with no config.json"));
  EXPECT_THAT(e.problem(), HasSubstr("--hf-config"));

  ImportOptions o;
  o.hf_config = kData + "/hf/deepseek-v3/config.json";
  const Scenario s = Load(ImportNemoRl(kImport + "grpo_dsv3_megatron.yaml", o));
  EXPECT_EQ(s.cluster.nodes, 64);
  EXPECT_EQ(s.source.tp, 8);
  EXPECT_EQ(s.source.cp, 4);
  EXPECT_EQ(s.source.pp, 16);
  EXPECT_EQ(s.source.ep, 32);
  EXPECT_EQ(s.source.dp, 1);  // 512 / (8 x 4 x 16)
  // 61 layers: 3 first, 2 last, the 14 others share 56 evenly.
  std::vector<int32_t> stages(16, 4);
  stages.front() = 3;
  stages.back() = 2;
  EXPECT_EQ(s.source.pp_layers, stages);
  EXPECT_EQ(s.destination.tp, 32);
  EXPECT_EQ(s.destination.dp, 16);

  // The same with --model, and first / last stages that cannot be shared evenly.
  o = {};
  o.model_preset = "deepseek-v3";
  o.overrides = {"policy.megatron_cfg.num_layers_in_first_pipeline_stage=4"};
  const InputError uneven = ErrorOf([&] { ImportNemoRl(kImport + "grpo_dsv3_megatron.yaml", o); });
  EXPECT_EQ(uneven.field(), "policy.megatron_cfg.num_layers_in_first_pipeline_stage");
  EXPECT_THAT(uneven.problem(), HasSubstr("cannot share the remaining 55 evenly"));
}

// A key given twice in one mapping is refused (OmegaConf refuses it too;
// yaml-cpp alone would read the first), with its dotted path; a FIFO or
// /dev/zero is refused before it is read, not hung on.
TEST(Import, DuplicateKeysAndNonRegularFilesAreRefused) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/reshard_import_dup.yaml";
  auto write = [&](const std::string& text) { std::ofstream(path) << text; };
  write("defaults: grpo_base.yaml\npolicy:\n  megatron_cfg: {enabled: true, tensor_model_parallel_size: 2,\n"
        "    tensor_model_parallel_size: 4}\n");
  InputError e = ErrorOf([&] { ImportNemoRl(path, {}); });
  EXPECT_EQ(e.file(), path);
  EXPECT_EQ(e.field(), "policy.megatron_cfg.tensor_model_parallel_size");
  EXPECT_THAT(e.problem(), HasSubstr("appears twice in one mapping (line 4)"));
  write("cluster: {num_nodes: 1}\npolicy: {model_name: x}\ncluster: {num_nodes: 2}\n");
  e = ErrorOf([&] { ImportVerl(path, {}); });
  EXPECT_EQ(e.field(), "cluster");
  // Aliases are not expanded by the check: a billion-laughs tree is read at once.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c)
    bomb += fmt::format("{}: &{} [*{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}, *{}]\n", c, c, char(c - 1), char(c - 1),
                        char(c - 1), char(c - 1), char(c - 1), char(c - 1), char(c - 1), char(c - 1), char(c - 1));
  write(bomb + "b: 1\n");
  e = ErrorOf([&] { ImportVerl(path, {}); });
  EXPECT_EQ(e.field(), "b");
  std::filesystem::remove(path);
  e = ErrorOf([] { ImportVerl("/dev/zero", {}); });
  EXPECT_THAT(e.problem(), HasSubstr("is a character device, not a regular file"));
}

TEST(Import, NemoRlOverridesAndErrors) {
  ImportOptions o;
  o.overrides = {"policy.megatron_cfg.tensor_model_parallel_size=4", "++cluster.num_nodes=2",
                 "policy.generation.vllm_cfg.precision=fp8"};
  const Scenario s = Load(ImportNemoRl(kImport + "grpo_llama8b_megatron.yaml", o));
  EXPECT_EQ(s.source.tp, 4);
  EXPECT_EQ(s.source.dp, 4);  // 16 / TP4
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.destination_dtype, DType::kFP8E4M3);

  // The base recipe trains with DTensor, not Megatron-Core.
  InputError e = ErrorOf([] { ImportNemoRl(kImport + "grpo_base.yaml", {}); });
  EXPECT_EQ(e.field(), "policy.megatron_cfg.enabled");
  // A model with no preset and no config.json.
  o = {};
  o.overrides = {"policy.model_name=Qwen/Qwen2.5-7B-Instruct"};
  e = ErrorOf([&] { ImportNemoRl(kImport + "grpo_llama8b_megatron.yaml", o); });
  EXPECT_EQ(e.field(), "policy.model_name");
  EXPECT_THAT(e.problem(), HasSubstr("huggingface-cli download Qwen/Qwen2.5-7B-Instruct config.json"));
  // A size given as an expression the import cannot evaluate.
  o.overrides = {"policy.megatron_cfg.tensor_model_parallel_size=${mul:2,2}"};
  e = ErrorOf([&] { ImportNemoRl(kImport + "grpo_llama8b_megatron.yaml", o); });
  EXPECT_EQ(e.field(), "policy.megatron_cfg.tensor_model_parallel_size");
  EXPECT_THAT(e.problem(), HasSubstr("cannot evaluate"));
  // Layouts that do not divide the GPUs name the framework field.
  o.overrides = {"policy.megatron_cfg.tensor_model_parallel_size=3"};
  e = ErrorOf([&] { ImportNemoRl(kImport + "grpo_llama8b_megatron.yaml", o); });
  EXPECT_EQ(e.field(), "policy.megatron_cfg.tensor_model_parallel_size");
  EXPECT_THAT(e.problem(), HasSubstr("8 GPUs are not a multiple of tp x cp x pp = 3"));
  // A layout the scenario reader refuses: Megatron cannot split 8 KV groups over TP16.
  o.overrides = {"cluster.num_nodes=2", "policy.megatron_cfg.tensor_model_parallel_size=16"};
  e = ErrorOf([&] { ImportNemoRl(kImport + "grpo_llama8b_megatron.yaml", o); });
  EXPECT_THAT(e.problem(), HasSubstr("the imported scenario is not valid"));
}

// verl, hybrid engine (colocated): Qwen3-30B-A3B TP2 x EP8 on 16 GPUs, vLLM
// TP4; with optimizer_offload the state is in host memory during the sync.
TEST(Import, VerlHybridEngine) {
  ImportResult r = ImportVerl(kImport + "ppo_megatron_qwen3_30b.yaml", {});
  Scenario s = Load(r);
  EXPECT_EQ(s.model.config.name, "qwen3-30b-a3b");
  EXPECT_EQ(s.cluster.nodes, 2);
  EXPECT_EQ(s.source.tp, 2);
  EXPECT_EQ(s.source.ep, 8);
  EXPECT_EQ(s.source.dp, 8);
  EXPECT_EQ(s.destination.tp, 4);
  EXPECT_EQ(s.destination.dp, 4);
  EXPECT_EQ(s.source_gpus, s.destination_gpus);
  EXPECT_EQ(s.memory.optimizer.bytes_per_param, 12);
  EXPECT_EQ(s.memory.optimizer.offload, OffloadMode::kNone);
  EXPECT_EQ(s.memory.kv_cache_bytes, 0);  // free_cache_engine: rebuilt after the weights

  ImportOptions o;
  o.overrides = {"actor_rollout_ref.actor.megatron.optimizer_offload=true",
                 "actor_rollout_ref.rollout.free_cache_engine=false"};
  r = ImportVerl(kImport + "ppo_megatron_qwen3_30b.yaml", o);
  s = Load(r);
  EXPECT_EQ(s.memory.optimizer.bytes_per_param, 12);
  EXPECT_EQ(s.memory.optimizer.on_host, 1);  // optimizer_offload: the state lives on the host
  EXPECT_GT(s.memory.kv_cache_bytes, 0);  // 0.5 of the GPU less the weights
  EXPECT_TRUE(Mentions(r, "KV cache = 0.5"));
}

TEST(Import, VerlDefaultsAreListed) {
  const ImportResult r = ImportVerl(kImport + "ppo_megatron_minimal.yaml", {});
  const Scenario s = Load(r);
  EXPECT_EQ(s.model.config.name, "llama3-8b");
  EXPECT_EQ(s.source.tp, 4);
  EXPECT_EQ(s.destination.tp, 2);  // verl's rollout default
  EXPECT_EQ(s.cluster.gpus_per_node, 8);
  EXPECT_TRUE(Mentions(r, "actor_rollout_ref.rollout.tensor_model_parallel_size not set: verl's default 2"));
  EXPECT_TRUE(Mentions(r, "trainer.n_gpus_per_node not set: verl's default 8"));
  EXPECT_TRUE(Mentions(r, "Hydra `defaults:` are not expanded"));

  ImportOptions o;
  o.overrides = {"actor_rollout_ref.actor.strategy=fsdp"};
  const InputError e = ErrorOf([&] { ImportVerl(kImport + "ppo_megatron_minimal.yaml", o); });
  EXPECT_EQ(e.field(), "actor_rollout_ref.actor.strategy");
}

// torchrun + Megatron-LM training flags and a vLLM server on 8 GPUs of its own.
TEST(Import, MegatronAndVllmFlags) {
  ImportOptions o;
  o.generation_gpus = 8;
  const std::vector<std::string> args = {
      "torchrun", "--nnodes", "2", "--nproc_per_node=8", "pretrain_gpt.py", "--tensor-model-parallel-size", "4",
      "--pipeline-model-parallel-size", "2", "--use-distributed-optimizer", "--bf16", "--seq-length", "4096",
      "--lr", "1e-5", "vllm", "serve", "meta-llama/Llama-3.1-70B-Instruct", "--tensor-parallel-size", "8",
      "--gpu-memory-utilization", "0.9"};
  const ImportResult r = ImportMegatron(args, o);
  const Scenario s = Load(r);
  EXPECT_EQ(s.model.config.name, "llama3-70b");
  EXPECT_EQ(s.cluster.nodes, 3);  // 16 trainer GPUs + 8 generation GPUs
  EXPECT_EQ(s.source.tp, 4);
  EXPECT_EQ(s.source.pp, 2);
  EXPECT_EQ(s.source.dp, 2);
  EXPECT_EQ(s.source_gpus, Iota(0, 16));
  EXPECT_EQ(s.destination.tp, 8);
  EXPECT_EQ(s.destination_gpus, Iota(16, 8));
  EXPECT_TRUE(s.memory.optimizer.distributed);
  EXPECT_GT(s.memory.kv_cache_bytes, 50 * kGiB);
  EXPECT_THAT(r.ignored, ::testing::UnorderedElementsAre("--seq-length", "--lr"));

  // Without --bf16 Megatron trains in fp32; colocated by default; fp8 serving.
  const ImportResult c = ImportMegatron({"--tensor-model-parallel-size=2", "--nnodes=1", "--nproc-per-node=2",
                                         "--model", "llama3-8b", "--quantization", "fp8"},
                                        {});
  const Scenario cs = Load(c);
  EXPECT_EQ(cs.dtype, DType::kFP32);
  EXPECT_EQ(cs.destination_dtype, DType::kFP8E4M3);
  EXPECT_EQ(cs.source_gpus, cs.destination_gpus);
  EXPECT_FALSE(cs.memory.optimizer.distributed);
  EXPECT_TRUE(Mentions(c, "colocated"));

  const InputError e = ErrorOf([] { ImportMegatron({"--tensor-model-parallel-size", "two"}, {}); });
  EXPECT_EQ(e.field(), "--tensor-model-parallel-size");
}

// Held-out files from NeMo-RL and verl, unchanged, in the folder RESHARD_REAL_RECIPES names
// (docs/import.md lists them with their sources; they are not part of the repository): the
// importer reads what users have, or says what is missing. Skipped when the folder is not given.
std::string RealRecipes() {
  const char* dir = std::getenv("RESHARD_REAL_RECIPES");
  return dir == nullptr || *dir == '\0' ? std::string() : std::string(dir) + "/";
}

TEST(Import, RealRecipesNemoRl) {
  const std::string kReal = RealRecipes();
  if (kReal.empty()) GTEST_SKIP() << "RESHARD_REAL_RECIPES is not set";
  ImportResult r = ImportNemoRl(kReal + "nemo-rl/grpo_math_8B_megatron.yaml", {});
  Scenario s = Load(r);
  EXPECT_EQ(s.model.config.name, "llama3-8b");  // meta-llama/Llama-3.1-8B-Instruct
  EXPECT_EQ(s.cluster.Gpus(), 8);
  EXPECT_EQ(s.source.tp, 1);
  EXPECT_EQ(s.source.pp, 2);
  EXPECT_EQ(s.source.dp, 4);  // 8 GPUs / (tp 1 x pp 2)
  EXPECT_EQ(s.destination.tp, 1);
  EXPECT_EQ(s.source_gpus, s.destination_gpus);  // colocated
  EXPECT_EQ(s.memory.optimizer.offload, OffloadMode::kAll);

  r = ImportNemoRl(kReal + "nemo-rl/grpo_math_qwen30ba3b_megatron.yaml", {});
  s = Load(r);
  EXPECT_EQ(s.model.config.name, "qwen3-30b-a3b");
  EXPECT_EQ(s.cluster.Gpus(), 64);
  EXPECT_EQ(s.source.tp, 2);
  EXPECT_EQ(s.source.ep, 8);
  EXPECT_EQ(s.destination.tp, 4);

  r = ImportNemoRl(kReal + "nemo-rl/grpo_math_70B_megatron.yaml", {});
  s = Load(r);
  EXPECT_EQ(s.model.config.name, "llama3-70b");  // meta-llama/Llama-3.3-70B-Instruct
  EXPECT_EQ(s.source.tp, 4);
  EXPECT_EQ(s.source.pp, 4);
  EXPECT_EQ(s.destination.tp, 8);

  // Qwen2.5-1.5B has no preset: the message says what to pass.
  try {
    ImportNemoRl(kReal + "nemo-rl/grpo_math_1B_megatron.yaml", {});
    ADD_FAILURE() << "imported a model without a preset";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("policy.model_name"));
    EXPECT_THAT(e.what(), HasSubstr("--hf-config"));
  }
}

TEST(Import, RealRecipesVerl) {
  const std::string kReal = RealRecipes();
  if (kReal.empty()) GTEST_SKIP() << "RESHARD_REAL_RECIPES is not set";
  // A launch script: its main_ppo overrides over verl's defaults.
  ImportResult r = ImportVerl(kReal + "verl/run_qwen3moe-30b_megatron_96gb.sh", {});
  Scenario s = Load(r);
  EXPECT_EQ(s.model.config.name, "qwen3-30b-a3b");  // MODEL_PATH=Qwen/Qwen3-30B-A3B-Base
  EXPECT_EQ(s.cluster.Gpus(), 8);                   // NNODES=${NNODES:-1}, NGPUS_PER_NODES=${...:-8}
  EXPECT_EQ(s.source.ep, 8);                        // COMMON_EP=${COMMON_EP:-8}
  EXPECT_EQ(s.destination.tp, 4);                   // INFER_TP=${INFER_TP:-4}
  EXPECT_EQ(s.memory.optimizer.on_host, 1);         // optimizer_offload=${offload} = True
  EXPECT_TRUE(Mentions(r, "needs the shell to evaluate"));  // $((...)) values are named, not guessed

  try {
    ImportVerl(kReal + "verl/run_qwen2-7b_math_megatron.sh", {});
    ADD_FAILURE() << "imported Qwen2-7B without a preset";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("Qwen/Qwen2-7B-Instruct"));
    EXPECT_THAT(e.what(), HasSubstr("--hf-config"));
  }
  // The flattened config: a local model path (a message), then with --model it imports;
  // its `???` (Hydra's mandatory) rollout.name takes verl's default.
  EXPECT_THROW(ImportVerl(kReal + "verl/_generated_ppo_megatron_trainer.yaml", {}), InputError);
  ImportOptions o;
  o.model_preset = "llama3-8b";
  r = ImportVerl(kReal + "verl/_generated_ppo_megatron_trainer.yaml", o);
  s = Load(r);
  EXPECT_EQ(s.model.config.name, "llama3-8b");
}

}  // namespace import_test
}  // namespace reshard
