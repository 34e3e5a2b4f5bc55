// DTypes, tensor inventories and presets: parameter totals against the Hugging Face numbers,
// the inventory's order and shapes, and config validation errors naming the field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "model/dtype.h"
#include "model/error.h"
#include "model/model.h"

namespace reshard {
namespace {

using ::testing::HasSubstr;

// ---------------------------------------------------------------- dtypes

TEST(DTypeTest, SizesAndNamesRoundTrip) {
  EXPECT_EQ(DTypeBytes(DType::kBF16), 2);
  EXPECT_EQ(DTypeBytes(DType::kFP16), 2);
  EXPECT_EQ(DTypeBytes(DType::kFP32), 4);
  EXPECT_EQ(DTypeBytes(DType::kFP8E4M3), 1);
  EXPECT_EQ(DTypeBytes(DType::kFP8E5M2), 1);
  EXPECT_EQ(DTypeNames(), (std::vector<std::string>{"bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "e8m0"}));
  for (const std::string& n : DTypeNames()) EXPECT_EQ(DTypeName(ParseDType(n, "f", "dtype")), n);
}

TEST(DTypeTest, ParsesAliases) {
  EXPECT_EQ(ParseDType("bfloat16", "f", "dtype"), DType::kBF16);
  EXPECT_EQ(ParseDType("float16", "f", "dtype"), DType::kFP16);
  EXPECT_EQ(ParseDType("float32", "f", "dtype"), DType::kFP32);
  EXPECT_EQ(ParseDType("fp8", "f", "dtype"), DType::kFP8E4M3);
}

TEST(DTypeTest, UnknownNameNamesFileFieldAndSuggests) {
  try {
    ParseDType("fp8_e4m4", "s.yaml", "destination.dtype");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "s.yaml");
    EXPECT_EQ(e.field(), "destination.dtype");
    EXPECT_THAT(e.problem(), HasSubstr("did you mean 'fp8_e4m3'"));
  }
  EXPECT_THROW(ParseDType("int4", "f", "dtype"), InputError);
  EXPECT_THROW(ParseDType("", "f", "dtype"), InputError);
}

// ---------------------------------------------------------------- presets

int64_t PresetParameters(const std::string& name) { return BuildModel(ModelPreset(name)).Parameters(); }

TEST(PresetTest, Llama3_8bMatchesHuggingFace) {
  // HF model card total 8,030,261,248:
  //   embed + lm_head 2 * 128256*4096 = 1,050,673,152
  //   per layer: q,o 2*4096^2 + k,v 2*1024*4096 = 41,943,040; mlp 3*14336*4096 = 176,160,768;
  //   norms 2*4096 -> 218,112,000 * 32 = 6,979,584,000; final norm 4096.
  EXPECT_EQ(PresetParameters("llama3-8b"), 8'030'261'248);
}

TEST(PresetTest, Llama3_70bMatchesHuggingFace) {
  // 2*128256*8192 + 80*(2*8192^2 + 2*1024*8192 + 3*28672*8192 + 2*8192) + 8192 = 70,553,706,496
  EXPECT_EQ(PresetParameters("llama3-70b"), 70'553'706'496);
}

TEST(PresetTest, Llama3_405bMatchesHuggingFace) {
  // 2*128256*16384 + 126*(2*16384^2 + 2*1024*16384 + 3*53248*16384 + 2*16384) + 16384 = 405,853,388,800
  EXPECT_EQ(PresetParameters("llama3-405b"), 405'853'388'800);
}

TEST(PresetTest, Qwen3_30bA3bMatchesHuggingFace) {
  // HF total 30,532,122,624:
  //   embed + lm_head 2*151936*2048 = 622,329,856
  //   per layer: q,o 2*4096*2048 + k,v 2*512*2048 = 18,874,368; q/k norm 2*128; norms 2*2048;
  //   router 128*2048 = 262,144; experts 3*128*768*2048 = 603,979,776 -> 623,120,640 * 48
  //   = 29,909,790,720; final norm 2048.
  EXPECT_EQ(PresetParameters("qwen3-30b-a3b"), 30'532'122'624);
}

TEST(PresetTest, Qwen3_235bA22bMatchesHuggingFace) {
  // 2*151936*4096 + 94*(2*8192*4096 + 2*512*4096 + 2*128 + 2*4096 + 128*4096 + 3*128*1536*4096)
  // + 4096 = 235,093,634,560
  EXPECT_EQ(PresetParameters("qwen3-235b-a22b"), 235'093'634'560);
}

TEST(PresetTest, DeepseekV3Is671bWithoutTheMtpLayer) {
  // DeepSeek-V3 card: 671 B main model + 14 B MTP module = 685 B on HF; the inventory holds the
  // 61 decoder layers only.
  //   embed + lm_head 2*129280*7168 = 1,853,358,080
  //   MLA per layer: q_a 1536*7168 + q_a_norm 1536 + q_b 128*192*1536 + kv_a 576*7168
  //     + kv_a_norm 512 + kv_b 128*256*512 + o 7168*128*128 = 187,107,328; norms 2*7168
  //     -> 187,121,664 * 61 = 11,414,421,504
  //   3 dense MLPs 3 * 3*18432*7168 = 1,189,085,184
  //   58 MoE: router 256*7168 + bias 256 + experts 3*256*2048*7168 + shared 3*2048*7168
  //     = 11,320,164,608 * 58 = 656,569,547,264;  final norm 7168.
  EXPECT_EQ(PresetParameters("deepseek-v3"), 671'026'419'200);
}

TEST(PresetTest, KimiK2IsAboutOneTrillion) {
  // Kimi-K2 card: "1 T total" (1.04 T); deepseek_v3 architecture with 64 heads, 384 experts,
  // 1 dense layer:
  //   embed + lm_head 2*163840*7168 = 2,348,810,240
  //   MLA per layer: 1536*7168 + 1536 + 64*192*1536 + 576*7168 + 512 + 64*256*512 + 7168*64*128
  //     = 101,124,096; norms 2*7168 -> 101,138,432 * 61 = 6,169,444,352
  //   1 dense MLP 3*18432*7168 = 396,361,728
  //   60 MoE: 384*7168 + 384 + 3*384*2048*7168 + 3*2048*7168 = 16,958,226,816 * 60
  //     = 1,017,493,608,960;  final norm 7168.
  EXPECT_EQ(PresetParameters("kimi-k2"), 1'026'408'232'448);
}

TEST(PresetTest, TinyLlamaCountAndEveryTinyModelIsSmall) {
  // 2*1024*256 + 4*(2*256*256 + 2*64*256 + 3*512*256 + 2*256) + 256 = 2,754,816
  EXPECT_EQ(PresetParameters("tiny-llama"), 2'754'816);
  for (const char* n : {"tiny-llama", "tiny-qwen2", "tiny-moe", "tiny-mla"}) {
    int64_t p = PresetParameters(n);
    EXPECT_GT(p, 1'000'000) << n;
    EXPECT_LT(p, 20'000'000) << n;
  }
}

TEST(PresetTest, UnknownPresetSuggestsTheClosest) {
  try {
    ModelPreset("llama3-8B", "s.yaml", "model");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "s.yaml");
    EXPECT_EQ(e.field(), "model");
    EXPECT_THAT(e.problem(), HasSubstr("did you mean 'llama3-8b'"));
  }
}

TEST(PresetTest, NamesAreUniqueAndEachBuilds) {
  std::vector<std::string> names = ModelPresetNames();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const char* required : {"llama3-8b", "llama3-70b", "llama3-405b", "qwen3-30b-a3b", "qwen3-235b-a22b",
                               "deepseek-v3", "kimi-k2", "tiny-llama", "tiny-qwen2", "tiny-moe", "tiny-mla"})
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  for (const std::string& n : names) EXPECT_EQ(ModelPreset(n).name, n);
}

// ---------------------------------------------------------------- inventory structure

// Structural invariants every inventory must satisfy.
void CheckInventory(const ModelSpec& m) {
  const ModelConfig& c = m.config;
  std::set<std::string> names;
  int32_t prev_layer = -1;
  int outputs = 0;
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorSpec& t = m.tensors[i];
    EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
    EXPECT_GE(t.layer, prev_layer) << t.name << ": order is by layer";
    prev_layer = t.layer;
    EXPECT_GT(t.shape.Elements(), 0) << t.name;
    if (t.kind == TensorKind::kEmbedding) {
      EXPECT_EQ(i, 0u);
      EXPECT_EQ(t.layer, -1);
      EXPECT_EQ(t.shape, MakeShape({c.vocab, c.hidden}));
    }
    if (t.kind == TensorKind::kOutput) {
      ++outputs;
      EXPECT_EQ(i, m.tensors.size() - 1);
      EXPECT_EQ(t.layer, c.layers);
      EXPECT_EQ(t.shape, MakeShape({c.vocab, c.hidden}));
    }
    if (t.kind == TensorKind::kExpertGate || t.kind == TensorKind::kExpertUp) {
      EXPECT_EQ(t.shape, MakeShape({c.experts, c.moe_intermediate, c.hidden}));
    }
    if (t.kind == TensorKind::kExpertDown) {
      EXPECT_EQ(t.shape, MakeShape({c.experts, c.hidden, c.moe_intermediate}));
    }
    if (t.kind == TensorKind::kRouter) {
      EXPECT_EQ(t.shape, MakeShape({c.experts, c.hidden}));
    }
    if (t.kind == TensorKind::kRouterBias) {
      EXPECT_EQ(t.shape, MakeShape({c.experts}));
    }
    if (t.kind == TensorKind::kAttnQ) {
      EXPECT_EQ(t.shape.dim[0], c.heads * c.head_dim);
    }
    if (t.kind == TensorKind::kAttnK || t.kind == TensorKind::kAttnV) {
      EXPECT_EQ(t.shape, MakeShape({c.kv_heads * c.head_dim, c.hidden}));
    }
    if (t.kind == TensorKind::kNorm) {
      EXPECT_EQ(t.shape.ndim, 1);
    }
  }
  EXPECT_EQ(outputs, c.tied_embeddings ? 0 : 1);
  EXPECT_EQ(names.count("model.norm.weight"), 1u);
  for (int32_t l = 0; l < c.layers; ++l) {
    std::string p = "model.layers." + std::to_string(l) + ".";
    EXPECT_EQ(names.count(p + "input_layernorm.weight"), 1u);
    EXPECT_EQ(names.count(p + "mlp.experts.gate_proj.weight"), c.IsMoeLayer(l) ? 1u : 0u) << l;
    EXPECT_EQ(names.count(p + "mlp.gate_proj.weight"), c.IsMoeLayer(l) ? 0u : 1u) << l;
  }
  EXPECT_EQ(names.count("model.layers." + std::to_string(c.layers) + ".input_layernorm.weight"), 0u);
}

TEST(InventoryTest, EveryPresetIsWellFormedAndDeterministic) {
  for (const std::string& n : ModelPresetNames()) {
    SCOPED_TRACE(n);
    ModelSpec a = BuildModel(ModelPreset(n));
    CheckInventory(a);
    EXPECT_EQ(a.tensors, BuildModel(ModelPreset(n)).tensors);
    EXPECT_EQ(a.Bytes(DType::kBF16), 2 * a.Parameters());
  }
}

std::map<TensorKind, int> KindCounts(const ModelSpec& m) {
  std::map<TensorKind, int> out;
  for (const auto& t : m.tensors) ++out[t.kind];
  return out;
}

TEST(InventoryTest, Llama3_8bLayerOrderFollowsHuggingFace) {
  ModelSpec m = BuildModel(ModelPreset("llama3-8b"));
  ASSERT_EQ(m.tensors.size(), 1u + 32 * 9 + 2);
  std::vector<std::string> layer0;
  for (size_t i = 1; i <= 9; ++i) layer0.push_back(m.tensors[i].name);
  EXPECT_EQ(layer0, (std::vector<std::string>{
                        "model.layers.0.input_layernorm.weight", "model.layers.0.self_attn.q_proj.weight",
                        "model.layers.0.self_attn.k_proj.weight", "model.layers.0.self_attn.v_proj.weight",
                        "model.layers.0.self_attn.o_proj.weight", "model.layers.0.post_attention_layernorm.weight",
                        "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight",
                        "model.layers.0.mlp.down_proj.weight"}));
  EXPECT_EQ(m.tensors[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(m.tensors[m.tensors.size() - 2].name, "model.norm.weight");
  EXPECT_EQ(m.tensors.back().name, "lm_head.weight");
  EXPECT_EQ(m.tensors[5].shape, MakeShape({4096, 4096}));   // o_proj [hidden, heads*head_dim]
  EXPECT_EQ(m.tensors[9].shape, MakeShape({4096, 14336}));  // down_proj [hidden, inter]
  auto k = KindCounts(m);
  EXPECT_EQ(k[TensorKind::kNorm], 65);
  EXPECT_EQ(k[TensorKind::kAttnQ], 32);
  EXPECT_EQ(k[TensorKind::kMlpDown], 32);
}

TEST(InventoryTest, Qwen2HasQkvBiasesAndTiedEmbeddings) {
  ModelSpec m = BuildModel(ModelPreset("tiny-qwen2"));
  auto k = KindCounts(m);
  EXPECT_EQ(k[TensorKind::kAttnQBias], 4);
  EXPECT_EQ(k[TensorKind::kAttnKBias], 4);
  EXPECT_EQ(k[TensorKind::kAttnVBias], 4);
  EXPECT_EQ(k[TensorKind::kOutput], 0);
  for (const auto& t : m.tensors)
    if (t.kind == TensorKind::kAttnKBias) {
      EXPECT_EQ(t.shape, MakeShape({2 * 32}));
    }
  // Biases sit right after their weights.
  EXPECT_EQ(m.tensors[2].name, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(m.tensors[3].name, "model.layers.0.self_attn.q_proj.bias");
}

TEST(InventoryTest, Qwen3MoeHasQkNormsAndStackedExperts) {
  ModelSpec m = BuildModel(ModelPreset("qwen3-30b-a3b"));
  auto k = KindCounts(m);
  EXPECT_EQ(k[TensorKind::kExpertGate], 48);
  EXPECT_EQ(k[TensorKind::kRouter], 48);
  EXPECT_EQ(k[TensorKind::kRouterBias], 0);
  EXPECT_EQ(k[TensorKind::kMlpGate], 0);  // no dense layer, no shared expert
  EXPECT_EQ(k[TensorKind::kNorm], 48 * 4 + 1);
  const TensorSpec* q_norm = nullptr;
  for (const auto& t : m.tensors)
    if (t.name == "model.layers.7.self_attn.q_norm.weight") q_norm = &t;
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->shape, MakeShape({128}));
  EXPECT_EQ(q_norm->layer, 7);
  // heads*head_dim (4096) differs from hidden (2048).
  for (const auto& t : m.tensors)
    if (t.kind == TensorKind::kAttnOut) {
      EXPECT_EQ(t.shape, MakeShape({2048, 4096}));
    }
}

TEST(InventoryTest, DeepseekV3HasMlaThreeDenseLayersThenMoe) {
  ModelSpec m = BuildModel(ModelPreset("deepseek-v3"));
  EXPECT_EQ(m.config.head_dim, 192);  // normalized: qk_nope + qk_rope
  std::map<std::string, Shape> shape;
  for (const auto& t : m.tensors) shape[t.name] = t.shape;
  const std::string l0 = "model.layers.0.", l3 = "model.layers.3.";
  EXPECT_EQ(shape.at(l0 + "self_attn.q_a_proj.weight"), MakeShape({1536, 7168}));
  EXPECT_EQ(shape.at(l0 + "self_attn.q_a_layernorm.weight"), MakeShape({1536}));
  EXPECT_EQ(shape.at(l0 + "self_attn.q_b_proj.weight"), MakeShape({128 * 192, 1536}));
  EXPECT_EQ(shape.at(l0 + "self_attn.kv_a_proj_with_mqa.weight"), MakeShape({576, 7168}));
  EXPECT_EQ(shape.at(l0 + "self_attn.kv_a_layernorm.weight"), MakeShape({512}));
  EXPECT_EQ(shape.at(l0 + "self_attn.kv_b_proj.weight"), MakeShape({128 * 256, 512}));
  EXPECT_EQ(shape.at(l0 + "self_attn.o_proj.weight"), MakeShape({7168, 128 * 128}));
  EXPECT_EQ(shape.at("model.layers.2.mlp.gate_proj.weight"), MakeShape({18432, 7168}));
  EXPECT_EQ(shape.count(l3 + "mlp.gate_proj.weight"), 0u);
  EXPECT_EQ(shape.at(l3 + "mlp.gate.weight"), MakeShape({256, 7168}));
  EXPECT_EQ(shape.at(l3 + "mlp.gate.e_score_correction_bias"), MakeShape({256}));
  EXPECT_EQ(shape.at(l3 + "mlp.experts.down_proj.weight"), MakeShape({256, 7168, 2048}));
  EXPECT_EQ(shape.at(l3 + "mlp.shared_experts.gate_proj.weight"), MakeShape({2048, 7168}));
  EXPECT_EQ(shape.at(l3 + "mlp.shared_experts.down_proj.weight"), MakeShape({7168, 2048}));
  EXPECT_EQ(shape.count("model.layers.61.input_layernorm.weight"), 0u);  // no MTP layer
  auto k = KindCounts(m);
  EXPECT_EQ(k[TensorKind::kRouterBias], 58);
  EXPECT_EQ(k[TensorKind::kExpertUp], 58);
  EXPECT_EQ(k[TensorKind::kMlpUp], 3 + 58);  // dense + shared experts
  EXPECT_EQ(k[TensorKind::kMlaQDown], 61);
  EXPECT_EQ(k[TensorKind::kAttnQ], 0);
  for (const auto& t : m.tensors)
    if (t.name == "lm_head.weight" || t.name == "model.norm.weight") {
      EXPECT_EQ(t.layer, 61);
    }
}

TEST(InventoryTest, MlaWithoutQLoraUsesAPlainQProj) {
  ModelConfig c = ModelPreset("tiny-mla");
  c.q_lora_rank = 0;  // DeepSeek-V2-Lite style
  ModelSpec m = BuildModel(c);
  auto k = KindCounts(m);
  EXPECT_EQ(k[TensorKind::kMlaQDown], 0);
  EXPECT_EQ(k[TensorKind::kMlaQUp], 0);
  EXPECT_EQ(k[TensorKind::kAttnQ], 4);
  for (const auto& t : m.tensors)
    if (t.kind == TensorKind::kAttnQ) {
      EXPECT_EQ(t.shape, MakeShape({8 * (32 + 16), 256}));
    }
  // q_a (128*256) + q_a_norm (128) + q_b (384*128) replaced by q_proj (384*256), per layer.
  EXPECT_EQ(BuildModel(ModelPreset("tiny-mla")).Parameters() - m.Parameters(),
            4 * (128 * 256 + 128 + 384 * 128 - 384 * 256));
}

TEST(InventoryTest, TinyMlaHasOneDenseLayerThenMoeWithSharedExpert) {
  ModelSpec m = BuildModel(ModelPreset("tiny-mla"));
  EXPECT_FALSE(m.config.IsMoeLayer(0));
  for (int l = 1; l < 4; ++l) EXPECT_TRUE(m.config.IsMoeLayer(l));
  auto k = KindCounts(m);
  EXPECT_EQ(k[TensorKind::kRouterBias], 3);
  EXPECT_EQ(k[TensorKind::kMlpGate], 1 + 3);
}

TEST(MoeLayerRuleTest, DeepseekAndQwenRulesDiffer) {
  ModelConfig c;
  c.experts = 4;
  c.layers = 8;
  c.moe_layer_freq = 2;
  c.first_dense_layers = 1;  // deepseek: layer >= k and layer % freq == 0
  std::vector<int> moe;
  for (int l = 0; l < 8; ++l)
    if (c.IsMoeLayer(l)) moe.push_back(l);
  EXPECT_EQ(moe, (std::vector<int>{2, 4, 6}));
  c.first_dense_layers = 0;
  c.moe_layer_offset = 1;  // qwen3_moe: (layer + 1) % decoder_sparse_step == 0
  c.mlp_only_layers = {5};
  moe.clear();
  for (int l = 0; l < 8; ++l)
    if (c.IsMoeLayer(l)) moe.push_back(l);
  EXPECT_EQ(moe, (std::vector<int>{1, 3, 7}));
  c.experts = 0;
  EXPECT_FALSE(c.IsMoeLayer(1));
}

// ---------------------------------------------------------------- normalization and validation

TEST(NormalizeTest, FillsDefaults) {
  ModelConfig c = ModelPreset("tiny-llama");
  c.head_dim = 0;
  c.kv_heads = 0;
  ModelConfig n = NormalizeModelConfig(c);
  EXPECT_EQ(n.head_dim, 256 / 8);
  EXPECT_EQ(n.kv_heads, 8);
  EXPECT_EQ(BuildModel(c).config.head_dim, 32);
}

// Runs BuildModel on a mutated tiny preset and returns the InputError's field.
template <class F>
InputError BuildError(const std::string& preset, F mutate) {
  ModelConfig c = ModelPreset(preset);
  mutate(c);
  try {
    BuildModel(c, "cfg.json");
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "cfg.json");
    return e;
  }
  ADD_FAILURE() << "expected InputError";
  return InputError("", "", "");
}

TEST(ValidateTest, ErrorsNameTheField) {
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.vocab = 0; }).field(), "vocab_size");
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.hidden = -4; }).field(), "hidden_size");
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.layers = 0; }).field(), "num_hidden_layers");
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.heads = 0; }).field(), "num_attention_heads");
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.intermediate = 0; }).field(), "intermediate_size");
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.kv_heads = -1; }).field(), "num_key_value_heads");
  InputError gqa = BuildError("tiny-llama", [](ModelConfig& c) { c.kv_heads = 3; });
  EXPECT_EQ(gqa.field(), "num_key_value_heads");
  EXPECT_THAT(gqa.problem(), HasSubstr("8 attention heads are not divisible by 3"));
  InputError hd = BuildError("tiny-llama", [](ModelConfig& c) {
    c.head_dim = 0;
    c.heads = 6;
    c.kv_heads = 2;
  });
  EXPECT_EQ(hd.field(), "hidden_size");
  EXPECT_THAT(hd.problem(), HasSubstr("not divisible by num_attention_heads=6"));
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.q_lora_rank = 64; }).field(), "q_lora_rank");
  EXPECT_EQ(BuildError("tiny-llama", [](ModelConfig& c) { c.shared_experts = 1; }).field(), "n_shared_experts");
}

TEST(ValidateTest, MoeAndMlaErrors) {
  EXPECT_EQ(BuildError("tiny-moe", [](ModelConfig& c) { c.experts_per_token = 9; }).field(), "num_experts_per_tok");
  EXPECT_EQ(BuildError("tiny-moe", [](ModelConfig& c) { c.moe_intermediate = 0; }).field(), "moe_intermediate_size");
  EXPECT_EQ(BuildError("tiny-moe", [](ModelConfig& c) { c.experts = -2; }).field(), "num_experts");
  EXPECT_EQ(BuildError("tiny-moe", [](ModelConfig& c) { c.moe_layer_freq = 0; }).field(), "decoder_sparse_step");
  EXPECT_EQ(BuildError("tiny-moe", [](ModelConfig& c) { c.mlp_only_layers = {4}; }).field(), "mlp_only_layers");
  EXPECT_EQ(BuildError("tiny-mla", [](ModelConfig& c) { c.first_dense_layers = 5; }).field(), "first_k_dense_replace");
  EXPECT_EQ(BuildError("tiny-mla", [](ModelConfig& c) { c.moe_layer_freq = 0; }).field(), "moe_layer_freq");
  EXPECT_EQ(BuildError("tiny-mla", [](ModelConfig& c) { c.qk_rope_head_dim = 0; }).field(), "qk_rope_head_dim");
  EXPECT_EQ(BuildError("tiny-mla", [](ModelConfig& c) { c.v_head_dim = -1; }).field(), "v_head_dim");
  // A MoE model whose every layer is MoE needs no dense intermediate size.
  ModelConfig c = ModelPreset("tiny-moe");
  c.intermediate = 0;
  EXPECT_NO_THROW(BuildModel(c));
  c.mlp_only_layers = {2};
  EXPECT_THROW(BuildModel(c), InputError);
}

TEST(ValidateTest, TenTrillionParametersDoNotWrap) {
  // A llama-shaped 10 T model: the count must equal the formula evaluated in 128-bit.
  ModelConfig c = ModelPreset("llama3-405b");
  c.hidden = 65536;
  c.intermediate = 229376;
  c.heads = 512;
  c.kv_heads = 64;
  c.head_dim = 128;
  c.layers = 200;
  __extension__ typedef __int128 Wide;  // 128-bit: the reference cannot wrap
  Wide h = c.hidden, v = c.vocab, f = c.intermediate, q = 512 * 128, kv = 64 * 128;
  Wide expect = 2 * v * h + c.layers * (2 * q * h + 2 * kv * h + 3 * f * h + 2 * h) + h;
  ModelSpec m = BuildModel(c);
  EXPECT_EQ(static_cast<Wide>(m.Parameters()), expect);
  EXPECT_GT(m.Parameters(), 10'000'000'000'000);
}

TEST(ValidateTest, OverflowingSizesThrowInputError) {
  ModelConfig c = ModelPreset("tiny-llama");
  c.vocab = int64_t{1} << 40;
  c.hidden = int64_t{1} << 30;  // embedding has 2^70 elements
  c.heads = 1 << 20;
  c.kv_heads = 1 << 20;
  c.head_dim = 1;
  EXPECT_THROW(BuildModel(c), InputError);

  // Every tensor fits, the total does not: 3 * 16 * 2^60 > 2^63.
  ModelConfig d = ModelPreset("tiny-llama");
  d.hidden = int64_t{1} << 20;
  d.intermediate = int64_t{1} << 40;
  d.layers = 16;
  d.heads = d.kv_heads = 1;
  d.head_dim = 1;
  try {
    BuildModel(d, "big.json");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "num_hidden_layers");
    EXPECT_THAT(e.problem(), HasSubstr("overflows"));
  }

  ModelConfig e = ModelPreset("tiny-llama");
  e.heads = e.kv_heads = 1 << 30;
  e.head_dim = int64_t{1} << 40;  // heads * head_dim overflows before any tensor is built
  EXPECT_THROW(BuildModel(e), InputError);
}

TEST(TensorKindTest, NamesAreDistinct) {
  std::set<std::string_view> names;
  for (int k = 0; k <= static_cast<int>(TensorKind::kExpertDown); ++k)
    EXPECT_TRUE(names.insert(TensorKindName(static_cast<TensorKind>(k))).second);
  EXPECT_EQ(TensorKindName(TensorKind::kRouterBias), "router_bias");
}

}  // namespace
}  // namespace reshard
