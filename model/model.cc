// Tensor inventories: validation of a ModelConfig and the Hugging Face tensor list it implies.
#include <algorithm>
#include <array>
#include <limits>

#include "model/error.h"
#include "model/model.h"

namespace reshard {

std::string_view TensorKindName(TensorKind k) {
  static constexpr std::array<std::string_view, 22> kNames{
      "embedding",   "output",      "norm",         "attn_q",     "attn_k",     "attn_v",
      "attn_q_bias", "attn_k_bias", "attn_v_bias",  "attn_out",   "mla_q_down", "mla_q_up",
      "mla_kv_down", "mla_kv_up",   "mlp_gate",     "mlp_up",     "mlp_down",   "router",
      "router_bias", "expert_gate", "expert_up",    "expert_down"};
  auto i = static_cast<size_t>(k);
  RESHARD_CHECK(i < kNames.size(), "unknown TensorKind");
  return kNames[i];
}

bool ModelConfig::IsMoeLayer(int32_t layer) const {
  if (experts <= 0 || layer < first_dense_layers) return false;
  int32_t freq = std::max<int32_t>(1, moe_layer_freq);
  if ((static_cast<int64_t>(layer) + moe_layer_offset) % freq != 0) return false;
  return !std::binary_search(mlp_only_layers.begin(), mlp_only_layers.end(), layer);
}

int64_t ModelSpec::Parameters() const {
  int64_t total = 0;
  for (const auto& t : tensors)
    RESHARD_CHECK(!__builtin_add_overflow(total, t.shape.Elements(), &total), "parameter count overflows int64");
  return total;
}

namespace {

// The Hugging Face config.json name of each field, so errors point at what the user wrote.
struct FieldNames {
  std::string experts, moe_freq;
};
FieldNames NamesFor(const ModelConfig& c) {
  if (c.family == "qwen3_moe") return {"num_experts", "decoder_sparse_step"};
  return {"n_routed_experts", "moe_layer_freq"};
}

// A dimension value with the config field it comes from (named on overflow).
struct Dim {
  int64_t value;
  const char* field;
};

int64_t CheckedMul(const std::string& source, Dim a, Dim b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a.value, b.value, &r))
    throw InputError(source, a.value >= b.value ? a.field : b.field,
                     "size overflows int64 (" + std::to_string(a.value) + " x " + std::to_string(b.value) + ")");
  return r;
}

int64_t CheckedAdd(const std::string& source, Dim a, Dim b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a.value, b.value, &r))
    throw InputError(source, a.value >= b.value ? a.field : b.field,
                     "size overflows int64 (" + std::to_string(a.value) + " + " + std::to_string(b.value) + ")");
  return r;
}

void RequirePositive(const std::string& source, const char* field, int64_t v) {
  if (v <= 0) throw InputError(source, field, "must be positive, got " + std::to_string(v));
}
void RequireNonNegative(const std::string& source, const char* field, int64_t v) {
  if (v < 0) throw InputError(source, field, "must not be negative, got " + std::to_string(v));
}

// Appends tensors, checking that every element count and the running total fit in int64.
class Inventory {
 public:
  explicit Inventory(const std::string& source) : source_(source) {}

  void Add(std::string name, TensorKind kind, int32_t layer, std::initializer_list<Dim> dims) {
    Shape s;
    s.ndim = static_cast<int>(dims.size());
    RESHARD_CHECK(s.ndim <= kMaxDims);
    int64_t elems = 1;
    Dim largest{0, ""};
    int d = 0;
    for (Dim x : dims) {
      RESHARD_CHECK(x.value > 0, "validated dimension is not positive: " + std::string(x.field));
      s.dim[d++] = x.value;
      if (x.value >= largest.value) largest = x;
      if (__builtin_mul_overflow(elems, x.value, &elems))
        throw InputError(source_, largest.field, "tensor " + name + " has more than 2^63 elements");
    }
    if (__builtin_add_overflow(total_, elems, &total_))
      throw InputError(source_, "num_hidden_layers", "the parameter count overflows int64");
    tensors_.push_back(TensorSpec{std::move(name), kind, layer, s});
  }
  std::vector<TensorSpec> Take() { return std::move(tensors_); }

 private:
  const std::string& source_;
  int64_t total_ = 0;
  std::vector<TensorSpec> tensors_;
};

}  // namespace

ModelConfig NormalizeModelConfig(const ModelConfig& in, const std::string& source) {
  ModelConfig c = in;
  const FieldNames names = NamesFor(c);
  RequirePositive(source, "vocab_size", c.vocab);
  RequirePositive(source, "hidden_size", c.hidden);
  RequirePositive(source, "num_hidden_layers", c.layers);
  RequirePositive(source, "num_attention_heads", c.heads);
  RequireNonNegative(source, "num_key_value_heads", c.kv_heads);
  RequireNonNegative(source, "head_dim", c.head_dim);
  RequireNonNegative(source, "intermediate_size", c.intermediate);
  // Counts that multiply the work (tensors, pieces) are bounded before any
  // inventory is built: published models have under 200 layers and 400 experts.
  if (c.layers > kMaxLayers)
    throw InputError(source, "num_hidden_layers",
                     std::to_string(c.layers) + " layers would mean " + std::to_string(int64_t{c.layers} * 9) +
                         "+ tensors; reshard reads models of at most " + std::to_string(kMaxLayers) + " layers");

  if (c.kv_heads == 0) c.kv_heads = c.heads;
  if (c.heads % c.kv_heads != 0)
    throw InputError(source, "num_key_value_heads",
                     std::to_string(c.heads) + " attention heads are not divisible by " +
                         std::to_string(c.kv_heads) + " key/value heads");

  // MLA
  RequireNonNegative(source, "q_lora_rank", c.q_lora_rank);
  RequireNonNegative(source, "kv_lora_rank", c.kv_lora_rank);
  if (c.IsMla()) {
    RequireNonNegative(source, "qk_nope_head_dim", c.qk_nope_head_dim);
    RequirePositive(source, "qk_rope_head_dim", c.qk_rope_head_dim);
    RequirePositive(source, "v_head_dim", c.v_head_dim);
    if (c.qkv_bias) throw InputError(source, "attention_bias", "q/k/v biases are not supported with MLA");
    if (c.qk_norm) throw InputError(source, "kv_lora_rank", "q/k norms are not supported with MLA");
    // The q head width (what heads shard); HF's own head_dim for deepseek is the rope width.
    c.head_dim = CheckedAdd(source, {c.qk_nope_head_dim, "qk_nope_head_dim"}, {c.qk_rope_head_dim, "qk_rope_head_dim"});
  } else {
    if (c.q_lora_rank > 0)
      throw InputError(source, "q_lora_rank", "q_lora_rank > 0 needs MLA attention (kv_lora_rank > 0)");
    if (c.head_dim == 0) {
      if (c.hidden % c.heads != 0)
        throw InputError(source, "hidden_size",
                         std::to_string(c.hidden) + " is not divisible by num_attention_heads=" +
                             std::to_string(c.heads) + " (head_dim defaults to hidden_size / num_attention_heads)");
      c.head_dim = c.hidden / c.heads;
    }
  }

  // MoE
  RequireNonNegative(source, names.experts.c_str(), c.experts);
  if (c.experts > kMaxExperts)
    throw InputError(source, names.experts, std::to_string(c.experts) + " experts per layer; reshard reads models of at most " +
                                                std::to_string(kMaxExperts));
  RequireNonNegative(source, "n_shared_experts", c.shared_experts);
  RequireNonNegative(source, "first_k_dense_replace", c.first_dense_layers);
  RequireNonNegative(source, "moe_intermediate_size", c.moe_intermediate);
  if (c.IsMoe()) {
    if (c.experts_per_token <= 0 || c.experts_per_token > c.experts)
      throw InputError(source, "num_experts_per_tok",
                       "must be in [1, " + std::to_string(c.experts) + "], got " + std::to_string(c.experts_per_token));
    RequirePositive(source, "moe_intermediate_size", c.moe_intermediate);
    RequirePositive(source, names.moe_freq.c_str(), c.moe_layer_freq);
    RequireNonNegative(source, names.moe_freq.c_str(), c.moe_layer_offset);
    if (c.first_dense_layers > c.layers)
      throw InputError(source, "first_k_dense_replace",
                       std::to_string(c.first_dense_layers) + " exceeds num_hidden_layers=" + std::to_string(c.layers));
    std::sort(c.mlp_only_layers.begin(), c.mlp_only_layers.end());
    c.mlp_only_layers.erase(std::unique(c.mlp_only_layers.begin(), c.mlp_only_layers.end()), c.mlp_only_layers.end());
    for (int32_t l : c.mlp_only_layers)
      if (l < 0 || l >= c.layers)
        throw InputError(source, "mlp_only_layers",
                         "layer " + std::to_string(l) + " is outside [0, " + std::to_string(c.layers) + ")");
  } else {
    if (c.shared_experts > 0)
      throw InputError(source, "n_shared_experts", "shared experts need routed experts (" + names.experts + " > 0)");
    if (c.router_bias) throw InputError(source, "topk_method", "a router bias needs routed experts (" + names.experts + " > 0)");
    // Dense model: MoE-only fields are meaningless; clear them so equal models compare equal.
    c.experts_per_token = 0;
    c.first_dense_layers = 0;
    c.moe_layer_freq = 1;
    c.moe_layer_offset = 0;
    c.mlp_only_layers.clear();
  }
  bool any_dense = false;
  for (int32_t l = 0; l < c.layers && !any_dense; ++l) any_dense = !c.IsMoeLayer(l);
  if (any_dense) RequirePositive(source, "intermediate_size", c.intermediate);
  return c;
}

ModelSpec BuildModel(const ModelConfig& config, const std::string& source) {
  ModelSpec m;
  m.config = NormalizeModelConfig(config, source);
  const ModelConfig& c = m.config;
  const FieldNames names = NamesFor(c);
  Inventory inv(source);

  const Dim vocab{c.vocab, "vocab_size"}, hidden{c.hidden, "hidden_size"};
  const Dim q_rows{CheckedMul(source, {c.heads, "num_attention_heads"}, {c.head_dim, "head_dim"}), "num_attention_heads"};
  const Dim kv_rows{CheckedMul(source, {c.kv_heads, "num_key_value_heads"}, {c.head_dim, "head_dim"}),
                    "num_key_value_heads"};
  const Dim head_dim{c.head_dim, "head_dim"};
  const Dim experts{c.experts, names.experts.c_str()};
  const Dim moe_inter{c.moe_intermediate, "moe_intermediate_size"};
  const Dim inter{c.intermediate, "intermediate_size"};

  inv.Add("model.embed_tokens.weight", TensorKind::kEmbedding, -1, {vocab, hidden});
  for (int32_t l = 0; l < c.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    inv.Add(p + "input_layernorm.weight", TensorKind::kNorm, l, {hidden});
    if (c.IsMla()) {
      const Dim q_lora{c.q_lora_rank, "q_lora_rank"}, kv_lora{c.kv_lora_rank, "kv_lora_rank"};
      const Dim kv_up_rows{
          CheckedMul(source, {c.heads, "num_attention_heads"}, {CheckedAdd(source, {c.qk_nope_head_dim, "qk_nope_head_dim"}, {c.v_head_dim, "v_head_dim"}), "v_head_dim"}),
          "num_attention_heads"};
      const Dim o_cols{CheckedMul(source, {c.heads, "num_attention_heads"}, {c.v_head_dim, "v_head_dim"}),
                       "num_attention_heads"};
      if (c.q_lora_rank > 0) {
        inv.Add(p + "self_attn.q_a_proj.weight", TensorKind::kMlaQDown, l, {q_lora, hidden});
        inv.Add(p + "self_attn.q_a_layernorm.weight", TensorKind::kNorm, l, {q_lora});
        inv.Add(p + "self_attn.q_b_proj.weight", TensorKind::kMlaQUp, l, {q_rows, q_lora});
      } else {
        inv.Add(p + "self_attn.q_proj.weight", TensorKind::kAttnQ, l, {q_rows, hidden});
      }
      inv.Add(p + "self_attn.kv_a_proj_with_mqa.weight", TensorKind::kMlaKvDown, l,
              {{CheckedAdd(source, kv_lora, {c.qk_rope_head_dim, "qk_rope_head_dim"}), "kv_lora_rank"}, hidden});
      inv.Add(p + "self_attn.kv_a_layernorm.weight", TensorKind::kNorm, l, {kv_lora});
      inv.Add(p + "self_attn.kv_b_proj.weight", TensorKind::kMlaKvUp, l, {kv_up_rows, kv_lora});
      inv.Add(p + "self_attn.o_proj.weight", TensorKind::kAttnOut, l, {hidden, o_cols});
    } else {
      inv.Add(p + "self_attn.q_proj.weight", TensorKind::kAttnQ, l, {q_rows, hidden});
      if (c.qkv_bias) inv.Add(p + "self_attn.q_proj.bias", TensorKind::kAttnQBias, l, {q_rows});
      inv.Add(p + "self_attn.k_proj.weight", TensorKind::kAttnK, l, {kv_rows, hidden});
      if (c.qkv_bias) inv.Add(p + "self_attn.k_proj.bias", TensorKind::kAttnKBias, l, {kv_rows});
      inv.Add(p + "self_attn.v_proj.weight", TensorKind::kAttnV, l, {kv_rows, hidden});
      if (c.qkv_bias) inv.Add(p + "self_attn.v_proj.bias", TensorKind::kAttnVBias, l, {kv_rows});
      inv.Add(p + "self_attn.o_proj.weight", TensorKind::kAttnOut, l, {hidden, q_rows});
      if (c.qk_norm) {
        inv.Add(p + "self_attn.q_norm.weight", TensorKind::kNorm, l, {head_dim});
        inv.Add(p + "self_attn.k_norm.weight", TensorKind::kNorm, l, {head_dim});
      }
    }
    inv.Add(p + "post_attention_layernorm.weight", TensorKind::kNorm, l, {hidden});
    if (c.IsMoeLayer(l)) {
      inv.Add(p + "mlp.gate.weight", TensorKind::kRouter, l, {experts, hidden});
      if (c.router_bias) inv.Add(p + "mlp.gate.e_score_correction_bias", TensorKind::kRouterBias, l, {experts});
      inv.Add(p + "mlp.experts.gate_proj.weight", TensorKind::kExpertGate, l, {experts, moe_inter, hidden});
      inv.Add(p + "mlp.experts.up_proj.weight", TensorKind::kExpertUp, l, {experts, moe_inter, hidden});
      inv.Add(p + "mlp.experts.down_proj.weight", TensorKind::kExpertDown, l, {experts, hidden, moe_inter});
      if (c.shared_experts > 0) {
        const Dim shared{CheckedMul(source, {c.shared_experts, "n_shared_experts"}, moe_inter), "n_shared_experts"};
        inv.Add(p + "mlp.shared_experts.gate_proj.weight", TensorKind::kMlpGate, l, {shared, hidden});
        inv.Add(p + "mlp.shared_experts.up_proj.weight", TensorKind::kMlpUp, l, {shared, hidden});
        inv.Add(p + "mlp.shared_experts.down_proj.weight", TensorKind::kMlpDown, l, {hidden, shared});
      }
    } else {
      inv.Add(p + "mlp.gate_proj.weight", TensorKind::kMlpGate, l, {inter, hidden});
      inv.Add(p + "mlp.up_proj.weight", TensorKind::kMlpUp, l, {inter, hidden});
      inv.Add(p + "mlp.down_proj.weight", TensorKind::kMlpDown, l, {hidden, inter});
    }
  }
  inv.Add("model.norm.weight", TensorKind::kNorm, c.layers, {hidden});
  if (!c.tied_embeddings) inv.Add("lm_head.weight", TensorKind::kOutput, c.layers, {vocab, hidden});
  m.tensors = inv.Take();
  return m;
}

}  // namespace reshard
