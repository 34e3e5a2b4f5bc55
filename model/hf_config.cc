// Reader of Hugging Face config.json files for the llama, mistral, qwen2, qwen3, qwen3_moe and
// deepseek_v3 families. Defaults follow transformers' config classes where a field may be absent;
// the fields that decide tensor shapes are required. Every error names the file and the field.
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/input_file.h"
#include "model/model.h"

namespace reshard {

namespace {

using Json = nlohmann::json;

// model_type -> family; architectures[] is consulted when model_type is absent or unknown
// (Kimi-K2 says model_type "kimi_k2" with architecture DeepseekV3ForCausalLM).
constexpr std::pair<const char*, const char*> kModelTypes[] = {
    {"llama", "llama"}, {"mistral", "mistral"},     {"qwen2", "qwen2"},
    {"qwen3", "qwen3"}, {"qwen3_moe", "qwen3_moe"}, {"deepseek_v3", "deepseek_v3"},
};
constexpr std::pair<const char*, const char*> kArchitectures[] = {
    {"LlamaForCausalLM", "llama"},         {"MistralForCausalLM", "mistral"},
    {"Qwen2ForCausalLM", "qwen2"},         {"Qwen3ForCausalLM", "qwen3"},
    {"Qwen3MoeForCausalLM", "qwen3_moe"}, {"DeepseekV3ForCausalLM", "deepseek_v3"},
};

std::string TypeName(const Json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "an integer";
  if (v.is_number_float()) return "a float";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "null";
}

// Typed access to one config object. Absent and null are the same ("use the default"), as in
// transformers where `"head_dim": null` means "derive it".
class Reader {
 public:
  Reader(const Json& j, std::string path) : j_(j), path_(std::move(path)) {}
  const std::string& path() const { return path_; }

  const Json* Find(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  bool Has(const char* key) const { return Find(key) != nullptr; }

  [[noreturn]] void Fail(const std::string& field, const std::string& problem) const {
    throw InputError(path_, field, problem);
  }

  // An integer >= min_value (and <= max_value), or nullopt when absent.
  std::optional<int64_t> OptInt(const char* key, int64_t min_value,
                                int64_t max_value = std::numeric_limits<int64_t>::max()) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    int64_t x = 0;
    if (v->is_number_unsigned()) {
      if (v->get<uint64_t>() > static_cast<uint64_t>(max_value))
        Fail(key, "value " + v->dump() + " is too large (at most " + std::to_string(max_value) + ")");
      x = static_cast<int64_t>(v->get<uint64_t>());
    } else if (v->is_number_integer()) {
      x = v->get<int64_t>();
    } else {
      Fail(key, "expected an integer, got " + TypeName(*v) + " (" + v->dump() + ")");
    }
    if (x > max_value) Fail(key, "value " + std::to_string(x) + " is too large (at most " + std::to_string(max_value) + ")");
    if (x < min_value)
      Fail(key, min_value == 1 ? "must be positive, got " + std::to_string(x)
                               : "must be at least " + std::to_string(min_value) + ", got " + std::to_string(x));
    return x;
  }
  int64_t Int(const char* key, int64_t min_value, int64_t max_value = std::numeric_limits<int64_t>::max()) const {
    auto x = OptInt(key, min_value, max_value);
    if (!x) Fail(key, "missing required field");
    return *x;
  }
  int32_t Int32(const char* key, int64_t min_value) const {
    return static_cast<int32_t>(Int(key, min_value, std::numeric_limits<int32_t>::max()));
  }
  int32_t OptInt32(const char* key, int64_t min_value, int32_t fallback) const {
    return static_cast<int32_t>(OptInt(key, min_value, std::numeric_limits<int32_t>::max()).value_or(fallback));
  }
  bool OptBool(const char* key, bool fallback) const {
    const Json* v = Find(key);
    if (!v) return fallback;
    if (!v->is_boolean()) Fail(key, "expected a boolean, got " + TypeName(*v) + " (" + v->dump() + ")");
    return v->get<bool>();
  }
  std::optional<std::string> OptString(const char* key) const {
    const Json* v = Find(key);
    if (!v) return std::nullopt;
    if (!v->is_string()) Fail(key, "expected a string, got " + TypeName(*v) + " (" + v->dump() + ")");
    return v->get<std::string>();
  }

 private:
  const Json& j_;
  std::string path_;
};

// model_type values that name a family by another name (Kimi-K2 is DeepSeek-V3's architecture).
constexpr std::pair<const char*, const char*> kModelTypeAliases[] = {{"kimi_k2", "deepseek_v3"}};

std::string SupportedList() {
  std::string list;
  for (const auto& [type, family] : kModelTypes) list += (list.empty() ? "" : ", ") + std::string(type);
  return list;
}

// The family, from model_type (which must be supported) and architectures
// (which must agree with it): a config that says one thing in one field and
// another in the other is refused rather than read as either. Without
// model_type, the architectures decide.
std::string Family(const Reader& r) {
  std::optional<std::string> model_type = r.OptString("model_type");
  std::vector<std::string> archs;
  if (const Json* a = r.Find("architectures")) {
    if (!a->is_array()) r.Fail("architectures", "expected an array, got " + TypeName(*a));
    for (size_t i = 0; i < a->size(); ++i) {
      if (!(*a)[i].is_string())
        r.Fail("architectures[" + std::to_string(i) + "]", "expected a string, got " + TypeName((*a)[i]));
      archs.push_back((*a)[i].get<std::string>());
    }
  }
  auto arch_family = [](const std::string& arch) -> std::string {
    for (const auto& [name, family] : kArchitectures)
      if (arch == name) return family;
    return "";
  };
  std::string family;
  if (!model_type) {
    for (const std::string& a : archs)
      if (family.empty()) family = arch_family(a);
    if (family.empty())
      r.Fail("model_type", "missing, and no supported architecture in 'architectures'; supported model_type: " + SupportedList());
    model_type = family;
  }
  for (const auto& [type, fam] : kModelTypes)
    if (*model_type == type) family = fam;
  for (const auto& [type, fam] : kModelTypeAliases)
    if (*model_type == type) family = fam;
  if (family.empty()) {
    std::vector<std::string> types;
    for (const auto& [type, fam] : kModelTypes) types.emplace_back(type);
    std::string problem = "unsupported model_type '" + *model_type + "'";
    if (std::string s = Suggest(*model_type, types); !s.empty()) problem += " (did you mean '" + s + "'?)";
    r.Fail("model_type", problem + "; supported: " + SupportedList() +
                             " (architectures does not override it: the two must agree)");
  }
  for (size_t i = 0; i < archs.size() && r.Has("model_type"); ++i) {
    const std::string f = arch_family(archs[i]);
    if (f != family)
      r.Fail("architectures[" + std::to_string(i) + "]",
             "'" + archs[i] + "' is " + (f.empty() ? "not a supported architecture" : "a " + f + " architecture") +
                 ", but model_type '" + *model_type + "' is the " + family +
                 " family; the two must agree");
  }
  // Expert fields in a dense family would be silently ignored: refuse them.
  const bool moe_family = family == "qwen3_moe" || family == "deepseek_v3";
  if (!moe_family)
    for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts", "num_experts_per_tok",
                            "moe_intermediate_size", "n_shared_experts"})
      if (const Json* v = r.Find(key); v && !(v->is_number() && *v == 0))
        r.Fail(key, "an expert (MoE) field, but model_type '" + *model_type + "' is the dense " + family +
                        " family; reshard would ignore the experts (supported MoE model_type: qwen3_moe, deepseek_v3)");
  return family;
}

// Shape-changing options reshard does not model yet: reject rather than miscount.
void RejectUnsupported(const Reader& r) {
  if (r.OptBool("attention_bias", false))
    r.Fail("attention_bias", "true is not supported (o_proj bias has no tensor kind); only qwen2's q/k/v biases are");
  if (r.OptBool("mlp_bias", false)) r.Fail("mlp_bias", "true is not supported");
}

std::string DefaultName(const std::string& path) {
  std::filesystem::path p(path);
  std::string dir = p.parent_path().filename().string();
  return dir.empty() ? p.stem().string() : dir;
}

}  // namespace

ModelConfig ParseHfConfig(const std::string& json_text, const std::string& path) {
  Json j;
  try {
    j = ParseJsonInput(json_text, path);  // nesting capped, duplicate keys refused
  } catch (const Json::exception& e) {  // parse_error, and out_of_range.406 (number overflow)
    throw InputError(path, "", std::string("invalid JSON: ") + e.what());
  }
  if (!j.is_object()) throw InputError(path, "", "expected a JSON object, got " + TypeName(j));
  if (j.contains("text_config") && !j.contains("hidden_size"))
    throw InputError(path, "text_config", "multimodal configs are not supported; pass the text model's config.json");
  Reader r(j, path);

  ModelConfig c;
  c.name = DefaultName(path);
  c.family = Family(r);
  c.vocab = r.Int("vocab_size", 1);
  c.hidden = r.Int("hidden_size", 1);
  c.intermediate = r.Int("intermediate_size", 1);
  c.layers = r.Int32("num_hidden_layers", 1);
  c.heads = r.Int32("num_attention_heads", 1);
  c.kv_heads = r.OptInt32("num_key_value_heads", 1, c.heads);  // transformers: None -> num_attention_heads
  RejectUnsupported(r);

  const bool mla = c.family == "deepseek_v3";
  if (!mla) {
    // qwen3's config class defaults head_dim to 128; the others derive hidden / heads.
    int64_t fallback = c.family == "qwen3" ? 128 : 0;
    c.head_dim = r.OptInt("head_dim", 1).value_or(fallback);
  }
  c.tied_embeddings = r.OptBool("tie_word_embeddings", false);  // false in all six config classes
  c.qkv_bias = c.family == "qwen2";                              // Qwen2Attention: q/k/v bias=True always
  c.qk_norm = c.family == "qwen3" || c.family == "qwen3_moe";

  if (c.family == "qwen3_moe") {
    c.experts = r.Int32("num_experts", 0);
    if (c.experts > 0) {
      c.experts_per_token = r.Int32("num_experts_per_tok", 1);
      c.moe_intermediate = r.Int("moe_intermediate_size", 1);
    }
    c.moe_layer_freq = r.OptInt32("decoder_sparse_step", 1, 1);
    c.moe_layer_offset = 1;  // Qwen3MoeDecoderLayer: (layer_idx + 1) % decoder_sparse_step == 0
    if (const Json* v = r.Find("mlp_only_layers")) {
      if (!v->is_array()) r.Fail("mlp_only_layers", "expected an array of layer indices, got " + TypeName(*v));
      for (size_t i = 0; i < v->size(); ++i) {
        const Json& e = (*v)[i];
        std::string field = "mlp_only_layers[" + std::to_string(i) + "]";
        if (!e.is_number_integer()) r.Fail(field, "expected an integer layer index, got " + TypeName(e));
        int64_t l = e.get<int64_t>();
        if (l < 0 || l >= c.layers)
          r.Fail(field, "layer " + std::to_string(l) + " is outside [0, " + std::to_string(c.layers) + ")");
        c.mlp_only_layers.push_back(static_cast<int32_t>(l));
      }
    }
  } else if (mla) {
    // DeepSeek-V3 remote code: n_routed_experts None -> dense; n_shared_experts None -> none.
    c.experts = r.OptInt32("n_routed_experts", 0, 0);
    if (c.experts > 0) {
      c.experts_per_token = r.Int32("num_experts_per_tok", 1);
      c.moe_intermediate = r.Int("moe_intermediate_size", 1);
      c.shared_experts = r.OptInt32("n_shared_experts", 0, 0);
      c.first_dense_layers = r.OptInt32("first_k_dense_replace", 0, 0);
      c.moe_layer_freq = r.OptInt32("moe_layer_freq", 1, 1);
      // noaux_tc routing carries e_score_correction_bias; transformers' native DeepseekV3 always
      // has it, so an absent topk_method means a bias too.
      std::optional<std::string> topk = r.OptString("topk_method");
      c.router_bias = !topk || *topk == "noaux_tc";
    }
    c.q_lora_rank = r.OptInt("q_lora_rank", 0).value_or(0);  // null: plain q_proj (DeepSeek-V2-Lite style)
    c.kv_lora_rank = r.Int("kv_lora_rank", 1);
    c.qk_nope_head_dim = r.Int("qk_nope_head_dim", 0);
    c.qk_rope_head_dim = r.Int("qk_rope_head_dim", 1);
    c.v_head_dim = r.Int("v_head_dim", 1);
  }
  // Cross-field checks (divisibility, ranges, overflow) with the same file name.
  return NormalizeModelConfig(c, path);
}

ModelConfig ReadHfConfig(const std::string& path) {
  const std::string s = ReadInputFile(path, "Hugging Face config file");
  if (s.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(path, "", "the Hugging Face config file is empty (expected a JSON object)");
  if (const size_t nul = s.find('\0'); nul != std::string::npos)
    throw InputError(path, "", "not a Hugging Face config.json: binary data (NUL byte at offset " + std::to_string(nul) + ")");
  return ParseHfConfig(s, path);
}

}  // namespace reshard
