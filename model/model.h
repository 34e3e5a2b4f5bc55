// Tensor inventories: which logical tensors a model has, with shapes.
//
// Logical tensors follow Hugging Face naming and shapes ([out, in] for linear
// weights), unfused: q/k/v and gate/up are separate tensors; both trainer and
// engine fuse them differently, which the layouts (model/layout.h) express.
// The experts of one MoE layer form ONE stacked 3-D tensor per projection
// ([experts, rows, cols]), not hundreds of tensors.
//
// Inventories come from built-in presets or from a Hugging Face config.json
// (families llama, mistral, qwen2, qwen3, qwen3_moe, deepseek_v3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/box.h"
#include "model/dtype.h"

namespace reshard {

// What a tensor is; decides how each side shards it.
enum class TensorKind : uint8_t {
  kEmbedding,      // [vocab, hidden], vocab-parallel
  kOutput,         // lm_head [vocab, hidden], vocab-parallel (absent when tied)
  kNorm,           // any norm weight (layer norms, final norm, q/k norm, MLA a-norms): replicated
  kAttnQ,          // q_proj [heads*head_dim, hidden], column-parallel by heads
  kAttnK,          // k_proj [kv_heads*head_dim, hidden], column-parallel by KV heads
  kAttnV,          // v_proj, like k
  kAttnQBias,      // q_proj.bias [heads*head_dim] (qwen2), sharded like q rows
  kAttnKBias,      // k_proj.bias
  kAttnVBias,      // v_proj.bias
  kAttnOut,        // o_proj [hidden, heads*v_head_dim], row-parallel (split dim 1)
  kMlaQDown,       // q_a_proj [q_lora_rank, hidden]: replicated on both sides
  kMlaQUp,         // q_b_proj [heads*qk_head_dim, q_lora_rank]: column-parallel by heads
  kMlaKvDown,      // kv_a_proj_with_mqa [kv_lora_rank+rope_dim, hidden]: replicated
  kMlaKvUp,        // kv_b_proj [heads*(nope+v), kv_lora_rank]: column-parallel by heads
  kMlpGate,        // gate_proj [inter, hidden] (dense or shared expert): column-parallel
  kMlpUp,          // up_proj, like gate
  kMlpDown,        // down_proj [hidden, inter]: row-parallel (split dim 1)
  kRouter,         // mlp.gate.weight [experts, hidden]: replicated
  kRouterBias,     // e_score_correction_bias [experts]: replicated
  kExpertGate,     // stacked [experts, moe_inter, hidden]
  kExpertUp,       // stacked [experts, moe_inter, hidden]
  kExpertDown,     // stacked [experts, hidden, moe_inter]
};
std::string_view TensorKindName(TensorKind k);

struct TensorSpec {
  std::string name;   // HF name; stacked experts: "model.layers.N.mlp.experts.gate_proj.weight"
  TensorKind kind;
  int32_t layer;      // decoder layer; -1 = before the first (embedding), num_layers = after the last (final norm, lm_head)
  Shape shape;
  friend bool operator==(const TensorSpec&, const TensorSpec&) = default;
};

// Architecture numbers (Hugging Face config.json names in comments).
struct ModelConfig {
  std::string name;
  std::string family;            // "llama", "mistral", "qwen2", "qwen3", "qwen3_moe", "deepseek_v3"
  int64_t vocab = 0;             // vocab_size
  int64_t hidden = 0;            // hidden_size
  int64_t intermediate = 0;      // intermediate_size (dense MLP)
  int32_t layers = 0;            // num_hidden_layers
  int32_t heads = 0;             // num_attention_heads
  int32_t kv_heads = 0;          // num_key_value_heads
  int64_t head_dim = 0;          // head_dim (default hidden / heads)
  bool tied_embeddings = false;  // tie_word_embeddings
  bool qkv_bias = false;         // qwen2: q/k/v biases
  bool qk_norm = false;          // qwen3: q_norm, k_norm per layer
  // MoE (experts == 0: dense)
  int32_t experts = 0;           // n_routed_experts / num_experts
  int32_t experts_per_token = 0; // num_experts_per_tok
  int64_t moe_intermediate = 0;  // moe_intermediate_size
  int32_t shared_experts = 0;    // n_shared_experts (deepseek); shared MLP width = shared_experts * moe_intermediate
  int32_t first_dense_layers = 0;// first_k_dense_replace (deepseek); qwen3_moe: 0
  int32_t moe_layer_freq = 1;    // every n-th layer is MoE (after the dense ones); qwen3_moe: decoder_sparse_step
  int32_t moe_layer_offset = 0;  // layer l (>= first_dense_layers) is MoE when (l + offset) % freq == 0:
                                 // deepseek 0 (layer_idx % moe_layer_freq), qwen3_moe 1 ((layer_idx+1) % step)
  std::vector<int32_t> mlp_only_layers;  // qwen3_moe mlp_only_layers: forced dense (sorted, unique)
  bool router_bias = false;      // e_score_correction_bias (deepseek-v3 noaux_tc)
  // MLA (q_lora_rank == 0 and kv_lora_rank == 0: standard attention)
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  // Defaults: BuildModel's config has them filled: head_dim 0 -> hidden / heads (MLA: the q head
  // width qk_nope_head_dim + qk_rope_head_dim); kv_heads 0 -> heads.

  bool IsMoe() const { return experts > 0; }
  bool IsMla() const { return kv_lora_rank > 0; }
  bool IsMoeLayer(int32_t layer) const;
  friend bool operator==(const ModelConfig&, const ModelConfig&) = default;
};

struct ModelSpec {
  ModelConfig config;
  std::vector<TensorSpec> tensors;  // deterministic order: by layer, then a fixed per-layer order

  int64_t Parameters() const;       // sum of tensor elements (HF total)
  int64_t Bytes(DType t) const { return Parameters() * DTypeBytes(t); }
};

// Builds the inventory of a config. Throws InputError(source, field, ...) when
// the config is inconsistent (e.g. heads not divisible by kv_heads).
// MLA without q compression (q_lora_rank == 0, e.g. DeepSeek-V2-Lite) has a plain
// self_attn.q_proj [heads*(qk_nope_head_dim+qk_rope_head_dim), hidden] of kind kAttnQ
// (column-parallel by heads, head width = config.head_dim).
// Per-layer order: input_layernorm; q(,bias) k(,bias) v(,bias) o [, q_norm, k_norm] or the MLA
// tensors (q_a_proj, q_a_layernorm, q_b_proj | q_proj, kv_a_proj_with_mqa, kv_a_layernorm,
// kv_b_proj, o_proj); post_attention_layernorm; dense gate/up/down or MoE router, router bias,
// stacked experts gate/up/down, shared_experts gate/up/down. Then model.norm, lm_head.
// Element counts are checked: a config whose parameters overflow int64 throws InputError.
ModelSpec BuildModel(const ModelConfig& c, const std::string& source = "<model>");
// The validation BuildModel runs, with the defaults above filled in; throws InputError(source,
// field, ...) naming the Hugging Face config field.
// Also bounds the counts that multiply the work: at most kMaxLayers layers
// and kMaxExperts experts per layer (InputError naming the field).
inline constexpr int32_t kMaxLayers = 16384;
inline constexpr int32_t kMaxExperts = 65536;
ModelConfig NormalizeModelConfig(const ModelConfig& c, const std::string& source = "<model>");

// Presets: llama3-8b, llama3-70b, llama3-405b, qwen3-30b-a3b, qwen3-235b-a22b,
// deepseek-v3, kimi-k2, and tiny test models. Unknown names throw InputError with a suggestion.
std::vector<std::string> ModelPresetNames();
ModelConfig ModelPreset(const std::string& name, const std::string& file = "<model>",
                        const std::string& field = "model");

// Reads a Hugging Face config.json. Throws InputError naming the file and field. The result is
// normalized (NormalizeModelConfig) and named after the file's directory ("qwen3-8b/config.json"
// -> "qwen3-8b"). Family by model_type, else by architectures (kimi_k2 -> deepseek_v3).
// Options that change shapes in ways not modelled (attention_bias on non-qwen2, mlp_bias) are
// rejected; qwen3_moe mlp_only_layers and decoder_sparse_step are supported.
ModelConfig ReadHfConfig(const std::string& path);
ModelConfig ParseHfConfig(const std::string& json_text, const std::string& path);

}  // namespace reshard
