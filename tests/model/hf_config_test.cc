// Hugging Face config.json reader: published parameter counts of real configs
// (tests/data/hf/<model>/config.json), equality with the presets, family defaults, and errors
// that name the file and the field.
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/error.h"
#include "model/model.h"

namespace reshard {
namespace {

using ::testing::HasSubstr;

std::string DataPath(const std::string& model) {
  return std::string(RESHARD_TEST_DATA_DIR) + "/hf/" + model + "/config.json";
}

int64_t FileParameters(const std::string& model) { return BuildModel(ReadHfConfig(DataPath(model))).Parameters(); }

TEST(HfConfigTest, Llama3_8b) {
  ModelConfig c = ReadHfConfig(DataPath("llama3-8b"));
  EXPECT_EQ(c.name, "llama3-8b");
  EXPECT_EQ(c.family, "llama");
  EXPECT_EQ(c.head_dim, 128);  // absent from the file: hidden / heads
  EXPECT_EQ(FileParameters("llama3-8b"), 8'030'261'248);  // HF model card
}

TEST(HfConfigTest, Mistral7b) {
  // Mistral-7B-v0.1: 2*32000*4096 + 32*(2*4096^2 + 2*1024*4096 + 3*14336*4096 + 2*4096) + 4096
  //   = 262,144,000 + 6,979,584,000 + 4096 = 7,241,732,096
  EXPECT_EQ(ReadHfConfig(DataPath("mistral-7b")).family, "mistral");
  EXPECT_EQ(FileParameters("mistral-7b"), 7'241'732'096);
}

TEST(HfConfigTest, Qwen25_7bHasQkvBiases) {
  // Qwen2.5-7B (7.61 B): 2*152064*3584 = 1,089,994,752
  //   per layer: q,o 2*3584^2 + k,v 2*512*3584 + biases 3584+512+512 = 29,364,736;
  //   mlp 3*18944*3584 = 203,685,888; norms 2*3584 -> 233,057,792 * 28 = 6,525,618,176; + 3584
  ModelConfig c = ReadHfConfig(DataPath("qwen2.5-7b"));
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_EQ(FileParameters("qwen2.5-7b"), 7'615'616'512);
}

TEST(HfConfigTest, Qwen3_8bHasQkNorms) {
  // Qwen3-8B (8.19 B): 2*151936*4096 = 1,244,659,712
  //   per layer: 2*4096^2 + 2*1024*4096 + q/k norm 2*128 + 3*12288*4096 + 2*4096 = 192,946,432
  //   * 36 = 6,946,071,552; + 4096
  ModelConfig c = ReadHfConfig(DataPath("qwen3-8b"));
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.qkv_bias);
  EXPECT_EQ(FileParameters("qwen3-8b"), 8'190'735'360);
}

TEST(HfConfigTest, FilesEqualThePresets) {
  // Where a preset and a real config both exist they must describe the same model.
  for (std::string n : {"llama3-8b", "qwen3-30b-a3b", "deepseek-v3", "kimi-k2"}) {
    SCOPED_TRACE(n);
    ModelConfig file = ReadHfConfig(DataPath(n));
    ModelConfig preset = NormalizeModelConfig(ModelPreset(n));
    EXPECT_EQ(file, preset);
    EXPECT_EQ(BuildModel(file).tensors, BuildModel(preset).tensors);
  }
  EXPECT_EQ(FileParameters("qwen3-30b-a3b"), 30'532'122'624);
  EXPECT_EQ(FileParameters("deepseek-v3"), 671'026'419'200);
}

TEST(HfConfigTest, KimiK2IsFoundByArchitecture) {
  ModelConfig c = ReadHfConfig(DataPath("kimi-k2"));  // model_type "kimi_k2"
  EXPECT_EQ(c.family, "deepseek_v3");
  EXPECT_TRUE(c.IsMla());
  EXPECT_TRUE(c.router_bias);
  EXPECT_EQ(c.first_dense_layers, 1);
}

// A minimal valid config of a family, as a JSON object to mutate: a key in
// `extra` (", \"key\": value, ...") replaces the base's (a key given twice
// is itself an error).
std::string Llama(const std::string& extra = "") {
  std::string base = R"({"model_type": "llama", "vocab_size": 1024, "hidden_size": 256, "intermediate_size": 512,
             "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2)";
  const std::regex key(R"re("(\w+)"\s*:)re");
  for (auto it = std::sregex_iterator(extra.begin(), extra.end(), key); it != std::sregex_iterator(); ++it)
    base = std::regex_replace(base, std::regex(",?\\s*\"" + (*it)[1].str() + R"re("\s*:\s*[^,}]+)re"), "");
  if (base.size() > 1 && base[1] == ',') base.erase(1, 1);
  return base + extra + "}";
}

// Llama's config with another model_type.
std::string WithModelType(const std::string& type, const std::string& extra = "") {
  std::string s = Llama(extra);
  s.replace(s.find("\"llama\""), 7, "\"" + type + "\"");
  return s;
}

InputError ParseError(const std::string& text) {
  try {
    ParseHfConfig(text, "m/config.json");
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "m/config.json");
    return e;
  }
  ADD_FAILURE() << "expected InputError for " << text;
  return InputError("", "", "");
}

TEST(HfConfigTest, MinimalLlamaEqualsTinyLlama) {
  ModelConfig c = ParseHfConfig(Llama(), "x/tiny-llama/config.json");
  EXPECT_EQ(c, NormalizeModelConfig(ModelPreset("tiny-llama")));
}

TEST(HfConfigTest, DefaultsFollowTheConfigClasses) {
  // num_key_value_heads null -> heads; head_dim null -> hidden/heads; tie default false.
  ModelConfig c = ParseHfConfig(R"({"model_type": "mistral", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
      "num_key_value_heads": null, "head_dim": null})", "config.json");
  EXPECT_EQ(c.kv_heads, 8);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_FALSE(c.tied_embeddings);
  // Qwen3Config defaults head_dim to 128 (not hidden/heads = 32).
  ModelConfig q = ParseHfConfig(R"({"model_type": "qwen3", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
      "tie_word_embeddings": true})", "config.json");
  EXPECT_EQ(q.head_dim, 128);
  EXPECT_TRUE(q.tied_embeddings);
  EXPECT_EQ(BuildModel(q).tensors.back().name, "model.norm.weight");
}

TEST(HfConfigTest, Qwen3MoeSparseStepAndMlpOnlyLayers) {
  const std::string base = R"({"model_type": "qwen3_moe", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8, "num_key_value_heads": 2,
      "head_dim": 64, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128)";
  ModelConfig c = ParseHfConfig(base + R"(, "decoder_sparse_step": 2, "mlp_only_layers": [5]})", "config.json");
  std::vector<int> moe;
  for (int l = 0; l < 6; ++l)
    if (c.IsMoeLayer(l)) moe.push_back(l);
  EXPECT_EQ(moe, (std::vector<int>{1, 3}));  // (l+1) % 2 == 0, layer 5 forced dense
  ModelSpec m = BuildModel(c);
  int dense = 0;
  for (const auto& t : m.tensors) dense += t.kind == TensorKind::kMlpGate;
  EXPECT_EQ(dense, 4);
  EXPECT_EQ(ParseError(base + R"(, "mlp_only_layers": [6]})").field(), "mlp_only_layers[0]");
  EXPECT_EQ(ParseError(base + R"(, "mlp_only_layers": "all"})").field(), "mlp_only_layers");
  EXPECT_EQ(ParseError(base + R"(, "mlp_only_layers": [1.5]})").field(), "mlp_only_layers[0]");
  EXPECT_EQ(ParseError(base + R"(, "decoder_sparse_step": 0})").field(), "decoder_sparse_step");
}

TEST(HfConfigTest, DeepseekOptionalFields) {
  const std::string base = R"({"model_type": "deepseek_v3", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
      "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 128, "n_shared_experts": 1,
      "first_k_dense_replace": 1, "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
      "v_head_dim": 32)";
  // tiny-mla is this config with q_lora_rank 128 and noaux_tc routing.
  EXPECT_EQ(ParseHfConfig(base + R"(, "q_lora_rank": 128, "topk_method": "noaux_tc"})", "a/tiny-mla/config.json"),
            NormalizeModelConfig(ModelPreset("tiny-mla")));
  ModelConfig c = ParseHfConfig(base + R"(, "q_lora_rank": null, "topk_method": "greedy"})", "config.json");
  EXPECT_EQ(c.q_lora_rank, 0);
  EXPECT_FALSE(c.router_bias);
  ModelSpec m = BuildModel(c);
  EXPECT_EQ(m.tensors[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(m.tensors[2].kind, TensorKind::kAttnQ);
  ModelConfig dense = ParseHfConfig(R"({"model_type": "deepseek_v3", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8, "n_routed_experts": null,
      "kv_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32})", "config.json");
  EXPECT_FALSE(dense.IsMoe());
  // No q_lora_rank: plain q_proj; no topk_method: transformers' native DeepseekV3 has the bias.
  ModelConfig bare = ParseHfConfig(base + "}", "config.json");
  EXPECT_EQ(bare.q_lora_rank, 0);
  EXPECT_TRUE(bare.router_bias);
  EXPECT_EQ(ParseError(base + R"(, "kv_lora_rank": 0})").field(), "kv_lora_rank");
}

TEST(HfConfigTest, MissingFieldIsNamed) {
  InputError e = ParseError(R"({"model_type": "llama", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_attention_heads": 8})");
  EXPECT_EQ(e.field(), "num_hidden_layers");
  EXPECT_THAT(e.problem(), HasSubstr("missing"));
  EXPECT_EQ(ParseError(R"({"model_type": "qwen3_moe", "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8, "num_experts": 8,
      "num_experts_per_tok": 2})")
                .field(),
            "moe_intermediate_size");
}

TEST(HfConfigTest, WrongTypesAreNamed) {
  InputError s = ParseError(Llama(R"(, "hidden_size": "4096")"));
  EXPECT_EQ(s.field(), "hidden_size");
  EXPECT_THAT(s.problem(), HasSubstr("expected an integer, got a string"));
  EXPECT_EQ(ParseError(Llama(R"(, "num_hidden_layers": 4.5)")).field(), "num_hidden_layers");
  EXPECT_EQ(ParseError(Llama(R"(, "tie_word_embeddings": "yes")")).field(), "tie_word_embeddings");
  EXPECT_EQ(ParseError(Llama(R"(, "num_hidden_layers": 4294967296)")).field(), "num_hidden_layers");
  EXPECT_EQ(ParseError(Llama(R"(, "vocab_size": 18446744073709551615)")).field(), "vocab_size");
  EXPECT_EQ(ParseError(Llama(R"(, "model_type": 3)")).field(), "model_type");
}

TEST(HfConfigTest, ZeroAndNegativeValuesAreNamed) {
  InputError z = ParseError(Llama(R"(, "num_attention_heads": 0)"));
  EXPECT_EQ(z.field(), "num_attention_heads");
  EXPECT_THAT(z.problem(), HasSubstr("must be positive"));
  EXPECT_EQ(ParseError(Llama(R"(, "vocab_size": -5)")).field(), "vocab_size");
  EXPECT_EQ(ParseError(Llama(R"(, "num_key_value_heads": 0)")).field(), "num_key_value_heads");
  EXPECT_EQ(ParseError(Llama(R"(, "head_dim": 0)")).field(), "head_dim");
  EXPECT_EQ(ParseError(Llama(R"(, "num_key_value_heads": 3)")).field(), "num_key_value_heads");
}

TEST(HfConfigTest, UnknownModelTypeSuggests) {
  InputError e = ParseError(R"({"model_type": "qwen3-moe", "architectures": ["Foo"]})");
  EXPECT_EQ(e.field(), "model_type");
  EXPECT_THAT(e.problem(), HasSubstr("did you mean 'qwen3_moe'"));
  EXPECT_EQ(ParseError(R"({"vocab_size": 3})").field(), "model_type");
  // Unknown model_type with a known architecture: refused, the two must agree.
  e = ParseError(WithModelType("my_llama", R"(, "architectures": ["LlamaForCausalLM"])"));
  EXPECT_EQ(e.field(), "model_type");
  EXPECT_THAT(e.problem(), HasSubstr("the two must agree"));
  // No model_type: the architecture decides.
  EXPECT_EQ(ParseHfConfig(R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 1024, "hidden_size": 256,
      "intermediate_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8})", "config.json").family, "llama");
}

TEST(HfConfigTest, ModelTypeAndArchitecturesMustAgree) {
  // MoE model_type (Mixtral) with a dense architecture: refused, not read as dense.
  InputError e = ParseError(WithModelType("mixtral", R"(, "architectures": ["LlamaForCausalLM"])"));
  EXPECT_EQ(e.field(), "model_type");
  EXPECT_THAT(e.problem(), HasSubstr("unsupported model_type 'mixtral'"));
  e = ParseError(Llama(R"(, "architectures": ["Qwen3MoeForCausalLM"])"));
  EXPECT_EQ(e.field(), "architectures[0]");
  EXPECT_THAT(e.problem(), HasSubstr("'Qwen3MoeForCausalLM' is a qwen3_moe architecture, but model_type 'llama'"));
  e = ParseError(Llama(R"(, "architectures": ["MixtralForCausalLM"])"));
  EXPECT_THAT(e.problem(), HasSubstr("not a supported architecture"));
  // Expert fields in a dense family would be ignored: refused.
  e = ParseError(Llama(R"(, "num_local_experts": 8, "num_experts_per_tok": 2)"));
  EXPECT_EQ(e.field(), "num_local_experts");
  EXPECT_THAT(e.problem(), HasSubstr("reshard would ignore the experts"));
  EXPECT_NO_THROW(ParseHfConfig(Llama(R"(, "num_local_experts": 0)"), "config.json"));
}

TEST(HfConfigTest, UnsupportedOptionsAreRejected) {
  EXPECT_EQ(ParseError(Llama(R"(, "attention_bias": true)")).field(), "attention_bias");
  EXPECT_EQ(ParseError(Llama(R"(, "mlp_bias": true)")).field(), "mlp_bias");
  EXPECT_NO_THROW(ParseHfConfig(Llama(R"(, "attention_bias": false)"), "config.json"));
}

TEST(HfConfigTest, BadFilesAreNamed) {
  InputError j = ParseError("{\"model_type\": \"llama\",");
  EXPECT_THAT(j.problem(), HasSubstr("invalid JSON"));
  EXPECT_THAT(ParseError("[1, 2]").problem(), HasSubstr("expected a JSON object"));
  try {
    ReadHfConfig(DataPath("no-such-model"));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), DataPath("no-such-model"));
    EXPECT_THAT(e.problem(), HasSubstr("cannot open"));
  }
}

}  // namespace
}  // namespace reshard
