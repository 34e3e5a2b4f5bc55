// Built-in model presets: the Hugging Face config.json numbers of public models, and tiny
// models for end-to-end tests on CPU. Parameter totals are checked in tests/model/model_test.cc.
#include <functional>
#include <utility>

#include "model/error.h"
#include "model/model.h"

namespace reshard {

namespace {

ModelConfig Llama3(std::string name, int64_t hidden, int64_t inter, int32_t layers, int32_t heads) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = "llama";
  c.vocab = 128256;
  c.hidden = hidden;
  c.intermediate = inter;
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = 8;
  c.head_dim = 128;
  return c;
}

// meta-llama/Meta-Llama-3-8B, -70B, Llama-3.1-405B.
ModelConfig Llama3_8b() { return Llama3("llama3-8b", 4096, 14336, 32, 32); }
ModelConfig Llama3_70b() { return Llama3("llama3-70b", 8192, 28672, 80, 64); }
ModelConfig Llama3_405b() { return Llama3("llama3-405b", 16384, 53248, 126, 128); }

ModelConfig Qwen3Moe(std::string name, int64_t hidden, int64_t inter, int64_t moe_inter, int32_t layers,
                     int32_t heads) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = "qwen3_moe";
  c.vocab = 151936;
  c.hidden = hidden;
  c.intermediate = inter;  // unused: every layer is MoE (decoder_sparse_step 1, no mlp_only_layers)
  c.layers = layers;
  c.heads = heads;
  c.kv_heads = 4;
  c.head_dim = 128;
  c.qk_norm = true;
  c.experts = 128;
  c.experts_per_token = 8;
  c.moe_intermediate = moe_inter;
  c.moe_layer_freq = 1;
  c.moe_layer_offset = 1;
  return c;
}
// Qwen/Qwen3-30B-A3B, Qwen/Qwen3-235B-A22B.
ModelConfig Qwen3_30b() { return Qwen3Moe("qwen3-30b-a3b", 2048, 6144, 768, 48, 32); }
ModelConfig Qwen3_235b() { return Qwen3Moe("qwen3-235b-a22b", 4096, 12288, 1536, 94, 64); }

// deepseek_v3 architecture (MLA + MoE with a shared expert and noaux_tc router bias).
ModelConfig DeepseekV3Like(std::string name) {
  ModelConfig c;
  c.name = std::move(name);
  c.family = "deepseek_v3";
  c.hidden = 7168;
  c.intermediate = 18432;
  c.layers = 61;  // num_hidden_layers; the MTP layer (index 61) is not part of the inventory
  c.experts_per_token = 8;
  c.moe_intermediate = 2048;
  c.shared_experts = 1;
  c.moe_layer_freq = 1;
  c.router_bias = true;
  c.q_lora_rank = 1536;
  c.kv_lora_rank = 512;
  c.qk_nope_head_dim = 128;
  c.qk_rope_head_dim = 64;
  c.v_head_dim = 128;
  return c;
}
// deepseek-ai/DeepSeek-V3.
ModelConfig DeepseekV3() {
  ModelConfig c = DeepseekV3Like("deepseek-v3");
  c.vocab = 129280;
  c.heads = c.kv_heads = 128;
  c.experts = 256;
  c.first_dense_layers = 3;
  return c;
}
// moonshotai/Kimi-K2-Instruct (model_type kimi_k2, DeepseekV3ForCausalLM).
ModelConfig KimiK2() {
  ModelConfig c = DeepseekV3Like("kimi-k2");
  c.vocab = 163840;
  c.heads = c.kv_heads = 64;
  c.experts = 384;
  c.first_dense_layers = 1;
  return c;
}

// Tiny models (< 20 M parameters) for end-to-end runs on CPU.
ModelConfig TinyLlama() {
  ModelConfig c;
  c.name = "tiny-llama";
  c.family = "llama";
  c.vocab = 1024;
  c.hidden = 256;
  c.intermediate = 512;
  c.layers = 4;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_dim = 32;
  return c;
}
ModelConfig TinyQwen2() {
  ModelConfig c = TinyLlama();
  c.name = "tiny-qwen2";
  c.family = "qwen2";
  c.qkv_bias = true;
  c.tied_embeddings = true;  // as the small Qwen2.5 models
  return c;
}
// qwen3_moe style: head_dim * heads != hidden (as in Qwen3-30B-A3B), q/k norms, all layers MoE.
ModelConfig TinyMoe() {
  ModelConfig c;
  c.name = "tiny-moe";
  c.family = "qwen3_moe";
  c.vocab = 1024;
  c.hidden = 256;
  c.intermediate = 512;
  c.layers = 4;
  c.heads = 8;
  c.kv_heads = 2;
  c.head_dim = 64;
  c.qk_norm = true;
  c.experts = 8;
  c.experts_per_token = 2;
  c.moe_intermediate = 128;
  c.moe_layer_offset = 1;
  return c;
}
// deepseek_v3 style: MLA, one dense layer then MoE with a shared expert and a router bias.
ModelConfig TinyMla() {
  ModelConfig c;
  c.name = "tiny-mla";
  c.family = "deepseek_v3";
  c.vocab = 1024;
  c.hidden = 256;
  c.intermediate = 512;
  c.layers = 4;
  c.heads = c.kv_heads = 8;
  c.experts = 8;
  c.experts_per_token = 2;
  c.moe_intermediate = 128;
  c.shared_experts = 1;
  c.first_dense_layers = 1;
  c.router_bias = true;
  c.q_lora_rank = 128;
  c.kv_lora_rank = 64;
  c.qk_nope_head_dim = 32;
  c.qk_rope_head_dim = 16;
  c.v_head_dim = 32;
  return c;
}

using Factory = ModelConfig (*)();
// Listing order is the order ModelPresetNames returns (and Suggest's tie-break).
constexpr std::pair<const char*, Factory> kPresets[] = {
    {"llama3-8b", Llama3_8b},       {"llama3-70b", Llama3_70b},       {"llama3-405b", Llama3_405b},
    {"qwen3-30b-a3b", Qwen3_30b},   {"qwen3-235b-a22b", Qwen3_235b},  {"deepseek-v3", DeepseekV3},
    {"kimi-k2", KimiK2},            {"tiny-llama", TinyLlama},        {"tiny-qwen2", TinyQwen2},
    {"tiny-moe", TinyMoe},          {"tiny-mla", TinyMla},
};

}  // namespace

std::vector<std::string> ModelPresetNames() {
  std::vector<std::string> out;
  for (const auto& [name, f] : kPresets) out.emplace_back(name);
  return out;
}

ModelConfig ModelPreset(const std::string& name, const std::string& file, const std::string& field) {
  for (const auto& [preset, factory] : kPresets)
    if (name == preset) return factory();
  std::string problem = "unknown model preset '" + name + "'";
  if (std::string s = Suggest(name, ModelPresetNames()); !s.empty()) problem += " (did you mean '" + s + "'?)";
  std::string list;
  for (const auto& n : ModelPresetNames()) list += (list.empty() ? "" : ", ") + n;
  throw InputError(file, field, problem + "; known presets: " + list + "; or use {hf_config: path/config.json}");
}

}  // namespace reshard
