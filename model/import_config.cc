// `reshard import nemo-rl` and `reshard import verl`: the frameworks' YAML
// configurations read into an ImportedJob (model/import_job.h).
//
// Both are OmegaConf / Hydra trees: NeMo-RL recipes inherit from the files in
// their `defaults:` key (merged first, the recipe's own keys win), values may
// be `${other.key}` or `${oc.select:other.key,default}` references, and
// command lines override keys with `a.b.c=value`. The tree here does those
// three things; other interpolations (`${mul:...}`) are reported when a field
// the import reads holds one.
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include "model/error.h"
#include "model/import.h"
#include "model/import_job.h"
#include "model/input_file.h"

namespace reshard {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> SplitDots(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = path.find('.', start);
    parts.push_back(path.substr(start, dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// Refuses a key given twice in one mapping, as OmegaConf does (yaml-cpp
// would keep both and lookups would see the first). Works on the parser's
// events, so aliases are not expanded: linear in the text.
class DuplicateKeyCheck : public YAML::EventHandler {
 public:
  explicit DuplicateKeyCheck(std::string path) : path_(std::move(path)) {}
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Child(m, nullptr); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Child(m, nullptr); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string& value) override {
    Child(m, &value);
  }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    stack_.emplace_back().map = false;
  }
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    stack_.emplace_back().map = true;
  }
  void OnSequenceEnd() override { Close(); }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    bool map = false;
    bool at_key = true;  // the next child of a mapping is a key
    std::string key;     // the current key ("" for a complex one)
    std::set<std::string> keys;
  };
  // A scalar (`value`), or null / alias / a whole collection (nullptr).
  void Child(const YAML::Mark& m, const std::string* value) {
    if (stack_.empty() || !stack_.back().map) return;
    Frame& f = stack_.back();
    if (f.at_key) {
      f.key = value != nullptr ? *value : "";
      if (value != nullptr && *value != "<<" && !f.keys.insert(*value).second) {
        std::string field;
        for (const Frame& up : stack_)
          if (up.map) field += (field.empty() ? "" : ".") + up.key;
        throw InputError(path_, field, fmt::format("key '{}' appears twice in one mapping (line {})", *value, m.line + 1));
      }
    }
    f.at_key = !f.at_key;
  }
  void Close() {
    stack_.pop_back();
    if (!stack_.empty()) Child(YAML::Mark(), nullptr);
  }
  std::string path_;
  std::vector<Frame> stack_;
};

YAML::Node LoadYamlFile(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path, "", "no such file");
  // A regular file (not a FIFO or /dev/zero) of at most kMaxTextInputBytes.
  const std::string text = ReadInputFile(path, "configuration");
  try {
    YAML::Node root = YAML::Load(text);
    std::istringstream in(text);
    YAML::Parser parser(in);
    DuplicateKeyCheck check(path);
    parser.HandleNextDocument(check);
    return root;
  } catch (const YAML::Exception& e) {
    throw InputError(path, "", fmt::format("not valid YAML: {} (line {})", e.msg, e.mark.line + 1));
  }
}

// b's keys over a's, recursively for mappings present in both.
void MergeInto(YAML::Node base, const YAML::Node& over) {
  for (auto it = over.begin(); it != over.end(); ++it) {
    const std::string key = it->first.Scalar();
    if (it->second.IsMap() && base[key].IsMap()) {
      MergeInto(base[key], it->second);
    } else {
      base[key] = YAML::Clone(it->second);
    }
  }
}

void SetPath(YAML::Node node, const std::vector<std::string>& parts, size_t i, const YAML::Node& value) {
  if (i + 1 == parts.size()) {
    node[parts[i]] = value;
    return;
  }
  if (!node[parts[i]].IsMap()) node[parts[i]] = YAML::Node(YAML::NodeType::Map);
  SetPath(node[parts[i]], parts, i + 1, value);
}

// A framework configuration with inheritance, overrides and references.
class ConfigTree {
 public:
  // `empty`: no file behind it (a launch script's overrides over the framework's defaults).
  ConfigTree(const std::string& path, bool follow_defaults, bool empty = false) : path_(path) {
    root_ = empty ? YAML::Node(YAML::NodeType::Map) : follow_defaults ? LoadWithDefaults(path, 0) : LoadYamlFile(path);
    if (!root_.IsMap()) throw InputError(path, "", "expected a mapping at the top level");
  }

  const std::vector<std::string>& Notes() const { return notes_; }
  const YAML::Node& Root() const { return root_; }

  // "a.b.c=value" (Hydra: a leading '+' or '++' adds a key; the value is YAML).
  void Override(const std::string& assignment) {
    size_t eq = assignment.find('=');
    std::string key = assignment.substr(0, eq);
    while (!key.empty() && key[0] == '+') key.erase(0, 1);
    if (eq == std::string::npos || key.empty()) {
      throw InputError("<cli>", assignment, "an override is KEY=VALUE, e.g. policy.megatron_cfg.tensor_model_parallel_size=4");
    }
    const std::string text = assignment.substr(eq + 1);
    YAML::Node value;
    try {
      value = YAML::Load(text);
    } catch (const YAML::Exception&) {
      value = YAML::Node(text);
    }
    SetPath(root_, SplitDots(key), 0, value);
  }

  // The value at a dotted path with references followed; nullopt when absent or null.
  std::optional<YAML::Node> Get(const std::string& path, int depth = 0) const {
    YAML::Node n = Lookup(path);
    if (!n.IsDefined() || n.IsNull()) return std::nullopt;
    if (n.IsScalar() && n.Scalar() == "???") return std::nullopt;  // Hydra's "mandatory, not set": the default applies
    if (!n.IsScalar()) return n;
    const std::string s = n.Scalar();
    if (s.find("${") == std::string::npos) return n;
    if (depth > 16) throw InputError(path_, path, "references nest too deep (a cycle?)");
    if (s.starts_with("${") && s.ends_with("}") && s.find("${", 2) == std::string::npos) {
      std::string ref = s.substr(2, s.size() - 3);
      std::optional<std::string> fallback;
      if (ref.starts_with("oc.select:")) {
        ref = ref.substr(10);
        if (size_t comma = ref.find(','); comma != std::string::npos) {
          fallback = ref.substr(comma + 1);
          ref = ref.substr(0, comma);
        }
      }
      if (ref.find(':') == std::string::npos && !ref.starts_with(".")) {
        if (auto v = Get(ref, depth + 1)) return v;
        if (fallback && *fallback != "null") return YAML::Node(*fallback);
        return std::nullopt;
      }
    }
    throw InputError(path_, path, fmt::format("cannot evaluate '{}'; override it with {}=VALUE", s, path));
  }

  std::optional<std::string> String(const std::string& path) const {
    auto n = Get(path);
    if (!n) return std::nullopt;
    if (!n->IsScalar()) throw InputError(path_, path, "expected a single value");
    return n->Scalar();
  }
  std::optional<int64_t> Int(const std::string& path) const {
    auto s = String(path);
    if (!s) return std::nullopt;
    try {
      size_t used = 0;
      const long long v = std::stoll(*s, &used);
      if (used == s->size()) return v;
    } catch (const std::exception&) {
    }
    throw InputError(path_, path, fmt::format("expected a whole number, got '{}'", *s));
  }
  std::optional<double> Number(const std::string& path) const {
    auto s = String(path);
    if (!s) return std::nullopt;
    try {
      size_t used = 0;
      const double v = std::stod(*s, &used);
      if (used == s->size()) return v;
    } catch (const std::exception&) {
    }
    throw InputError(path_, path, fmt::format("expected a number, got '{}'", *s));
  }
  std::optional<bool> Bool(const std::string& path) const {
    auto s = String(path);
    if (!s) return std::nullopt;
    if (*s == "true" || *s == "True" || *s == "yes" || *s == "on") return true;
    if (*s == "false" || *s == "False" || *s == "no" || *s == "off") return false;
    throw InputError(path_, path, fmt::format("expected true or false, got '{}'", *s));
  }

 private:
  YAML::Node Lookup(const std::string& path) const {
    YAML::Node cur = YAML::Clone(root_);
    for (const std::string& part : SplitDots(path)) {
      if (!cur.IsMap()) return YAML::Node();
      YAML::Node next = cur[part];
      if (!next.IsDefined()) return YAML::Node();
      cur.reset(next);
    }
    return cur;
  }

  // NeMo-RL: `defaults: base.yaml` (or a list of them), relative to the file, merged first.
  YAML::Node LoadWithDefaults(const std::string& path, int depth) {
    if (depth > 8) throw InputError(path, "defaults", "defaults nest too deep (a cycle?)");
    YAML::Node own = LoadYamlFile(path);
    if (!own.IsMap()) return own;
    YAML::Node merged(YAML::NodeType::Map);
    if (YAML::Node d = own["defaults"]) {
      std::vector<std::string> bases;
      if (d.IsScalar()) bases.push_back(d.Scalar());
      if (d.IsSequence()) {
        for (const YAML::Node& e : d) {
          if (e.IsScalar()) bases.push_back(e.Scalar());
        }
      }
      for (const std::string& b : bases) {
        const fs::path base = fs::path(path).parent_path() / b;
        std::error_code ec;
        if (!fs::is_regular_file(base, ec)) {
          notes_.push_back(fmt::format("defaults '{}' not found beside {}: keys it would set take the import's "
                                       "defaults", b, fs::path(path).filename().string()));
          continue;
        }
        MergeInto(merged, LoadWithDefaults(base.string(), depth + 1));
      }
      own.remove("defaults");
    }
    MergeInto(merged, own);
    return merged;
  }

  std::string path_;
  YAML::Node root_;
  std::vector<std::string> notes_;
};

// Reads `path` into `dst` when set; otherwise keeps dst and, with a `fallback`
// (the framework's own default), records it as an assumption.
template <typename T, typename Get>
void Read(ImportedJob& job, From<T>& dst, const std::string& path, Get get, std::optional<T> fallback = std::nullopt,
          const std::string& framework_default = "") {
  if (auto v = get(path)) {
    dst = {static_cast<T>(*v), path};
    return;
  }
  if (fallback) {
    dst = {*fallback, path + " (" + framework_default + ")"};
    job.assumptions.push_back(fmt::format("{} not set: {}", path, framework_default));
  }
}

void ReadCount(const ConfigTree& t, ImportedJob& job, From<int32_t>& dst, const std::string& path,
               std::optional<int32_t> fallback = std::nullopt, const std::string& framework_default = "") {
  if (auto v = t.Int(path); v && (*v < 1 || *v > (int64_t{1} << 30))) {
    throw InputError(job.input, path, fmt::format("must be >= 1, got {}", *v));
  }
  Read<int32_t>(job, dst, path, [&](const std::string& p) { return t.Int(p); }, fallback, framework_default);
}

std::string Stem(const std::string& path) {
  std::string s = fs::path(path).stem().string();
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '-';
  }
  return s.empty() ? "imported" : s;
}

ImportedJob NewJob(const std::string& path, const char* framework, const char* verb) {
  ImportedJob job;
  job.input = path;
  job.framework = framework;
  job.verb = verb;
  job.name = Stem(path);
  job.model_dir = fs::path(path).parent_path().string();
  return job;
}

// Megatron optimizer state per parameter: fp32 master weights and the
// optimizer's moments (Adam: 2, SGD: 1), each at its dtype when the
// precision-aware optimizer sets one.
void ReadMegatronOptimizer(const ConfigTree& t, ImportedJob& job, const std::string& prefix) {
  const std::string kind = t.String(prefix + ".optimizer").value_or("adam");
  auto bytes = [&](const std::string& key) -> double {
    auto d = t.String(prefix + "." + key);
    if (!d || !t.Bool(prefix + ".use_precision_aware_optimizer").value_or(false)) return 4;
    const std::string dt = ImportDtype(*d, job.input, prefix + "." + key);
    return dt == "fp32" ? 4 : dt.starts_with("fp8") ? 1 : 2;
  };
  double per_param = bytes("main_params_dtype");
  if (kind == "adam") {
    per_param += bytes("exp_avg_dtype") + bytes("exp_avg_sq_dtype");
  } else if (kind == "sgd") {
    per_param += 4;
  } else {
    throw InputError(job.input, prefix + ".optimizer", fmt::format("unknown optimizer '{}' (adam or sgd)", kind));
  }
  job.optimizer_bytes_per_param = {per_param, prefix + ".optimizer: " + kind};
  Read<bool>(job, job.distributed_optimizer, prefix + ".use_distributed_optimizer",
             [&](const std::string& p) { return t.Bool(p); });
  if (t.Bool(prefix + ".optimizer_cpu_offload").value_or(false)) {
    job.optimizer_host_fraction = {t.Number(prefix + ".optimizer_offload_fraction").value_or(1.0),
                                   prefix + ".optimizer_offload_fraction"};
  }
}

}  // namespace

ImportResult ImportNemoRl(const std::string& recipe_path, const ImportOptions& o) {
  ConfigTree t(recipe_path, /*follow_defaults=*/true);
  for (const std::string& ov : o.overrides) t.Override(ov);
  ImportedJob job = NewJob(recipe_path, "NeMo-RL recipe", "nemo-rl");
  job.assumptions = t.Notes();

  if (!t.Bool("policy.megatron_cfg.enabled").value_or(false)) {
    throw InputError(recipe_path, "policy.megatron_cfg.enabled",
                     "the recipe does not train with Megatron-Core (DTensor / FSDP2 instead); reshard's source "
                     "layouts are Megatron-Core's: set policy.megatron_cfg.enabled=true with its parallel sizes");
  }
  const std::string backend = t.String("policy.generation.backend").value_or("vllm");
  if (backend != "vllm") {
    throw InputError(recipe_path, "policy.generation.backend",
                     fmt::format("generation backend '{}': reshard's destination layouts are vLLM's", backend));
  }
  job.model = {t.String("policy.model_name").value_or(""), "policy.model_name"};
  if (auto p = t.String("policy.precision")) job.dtype = {ImportDtype(*p, recipe_path, "policy.precision"), "policy.precision"};

  const std::string m = "policy.megatron_cfg.";
  ReadCount(t, job, job.tp, m + "tensor_model_parallel_size");
  ReadCount(t, job, job.pp, m + "pipeline_model_parallel_size");
  ReadCount(t, job, job.vpp, m + "virtual_pipeline_model_parallel_size");
  ReadCount(t, job, job.cp, m + "context_parallel_size");
  ReadCount(t, job, job.ep, m + "expert_model_parallel_size");
  ReadCount(t, job, job.etp, m + "expert_tensor_parallel_size");
  ReadCount(t, job, job.first_stage_layers, m + "num_layers_in_first_pipeline_stage");
  ReadCount(t, job, job.last_stage_layers, m + "num_layers_in_last_pipeline_stage");
  ReadMegatronOptimizer(t, job, m + "optimizer");

  const std::string v = "policy.generation.vllm_cfg.";
  ReadCount(t, job, job.gen_tp, v + "tensor_parallel_size");
  ReadCount(t, job, job.gen_pp, v + "pipeline_parallel_size");
  ReadCount(t, job, job.gen_ep, v + "expert_parallel_size");
  // NeMo-RL: vLLM's expert group is tp x dp, so an engine's data parallel size is ep / tp.
  if (job.gen_ep.value > job.gen_tp.value) job.gen_dp = {job.gen_ep.value / job.gen_tp.value, job.gen_ep.origin + " / tp"};
  if (auto p = t.String(v + "precision")) job.destination_dtype = {ImportDtype(*p, recipe_path, v + "precision"), v + "precision"};
  Read<double>(job, job.gpu_memory_utilization, v + "gpu_memory_utilization",
               [&](const std::string& p) { return t.Number(p); });

  ReadCount(t, job, job.gpus_per_node, "cluster.gpus_per_node", 1, "NeMo-RL's default 1");
  ReadCount(t, job, job.nodes, "cluster.num_nodes", 1, "NeMo-RL's default 1");
  job.colocated = {t.Bool("policy.generation.colocated.enabled").value_or(true), "policy.generation.colocated.enabled"};
  if (!job.colocated.value) {
    const std::string r = "policy.generation.colocated.resources.";
    if (job.nodes.value == 1) {
      const auto gen = t.Int(r + "gpus_per_node");
      if (!gen || *gen < 1 || *gen >= job.gpus_per_node.value) {
        throw InputError(recipe_path, r + "gpus_per_node",
                         fmt::format("generation on its own GPUs of one node needs 1..{} GPUs here",
                                     job.gpus_per_node.value - 1));
      }
      job.gen_gpus = {static_cast<int32_t>(*gen), r + "gpus_per_node"};
    } else {
      const auto gen_nodes = t.Int(r + "num_nodes");
      if (!gen_nodes || *gen_nodes < 1 || *gen_nodes >= job.nodes.value) {
        throw InputError(recipe_path, r + "num_nodes",
                         fmt::format("generation on its own nodes needs 1..{} nodes here", job.nodes.value - 1));
      }
      job.gen_gpus = {static_cast<int32_t>(*gen_nodes) * job.gpus_per_node.value, r + "num_nodes"};
    }
    job.train_gpus = {job.nodes.value * job.gpus_per_node.value - job.gen_gpus.value, "the GPUs generation leaves"};
  }

  if (job.colocated.value) {
    job.offload = "all";
    job.offload_origin = "NeMo-RL offloads it around a colocated refit";
    job.assumptions.push_back(
        "optimizer.offload = all: NeMo-RL moves the optimizer state to host memory before a colocated refit "
        "(offload_before_refit) and back after it; here the refit moves it, overlapped with the transfers, so the "
        "predicted time includes that move. offload: auto lets the planner move only what memory needs; "
        "bytes_per_param: 0 times the transfers alone");
    job.kv_resident = false;
    job.kv_origin = "NeMo-RL allocates vLLM's KV cache after a colocated refit";
  } else {
    job.offload = "none";
    job.offload_origin = "the trainer's GPUs receive nothing";
    job.kv_resident = true;
    job.kv_origin = "generation GPUs keep their KV cache";
  }
  return FinishImport(std::move(job), o);
}

ImportResult ImportVerl(const std::string& config_path, const ImportOptions& o) {
  const bool script = config_path.ends_with(".sh");
  LaunchScript launch;
  if (script) launch = ReadLaunchScript(config_path, "verl.trainer.main_ppo");
  ConfigTree t(config_path, /*follow_defaults=*/false, /*empty=*/script);
  for (const std::string& ov : launch.overrides) t.Override(ov);
  for (const std::string& ov : o.overrides) t.Override(ov);
  ImportedJob job = NewJob(config_path, script ? "verl launch script" : "verl config", "verl");
  if (script) {
    job.assumptions.push_back(fmt::format("read as verl.trainer.main_ppo's {} override(s) over verl's defaults "
                                          "(config {}); the shell was not run",
                                          launch.overrides.size(),
                                          launch.config_name.empty() ? "ppo_trainer.yaml" : launch.config_name));
    for (const std::string& w : launch.skipped)
      job.assumptions.push_back(fmt::format("{}: needs the shell to evaluate, not read; pass KEY=VALUE to set it", w));
  }
  if (YAML::Node d = t.Root()["defaults"]; d && d.IsSequence()) {
    job.assumptions.push_back("Hydra `defaults:` are not expanded: keys this file leaves out take verl's defaults "
                              "(listed below); the flattened _generated_ppo_megatron_trainer.yaml has them all");
  }
  const std::string a = "actor_rollout_ref.actor.", mg = "actor_rollout_ref.actor.megatron.",
                    ro = "actor_rollout_ref.rollout.";
  const std::string strategy = t.String(a + "strategy").value_or("megatron");
  if (strategy != "megatron") {
    throw InputError(config_path, a + "strategy",
                     fmt::format("the actor trains with '{}'; reshard's source layouts are Megatron-Core's "
                                 "(strategy: megatron, ppo_megatron_trainer.yaml)", strategy));
  }
  const std::string engine = t.String(ro + "name").value_or("vllm");
  if (engine != "vllm" && engine != "sglang") {
    throw InputError(config_path, ro + "name", fmt::format("rollout engine '{}': reshard's destination layouts are "
                                                           "vLLM's", engine));
  }
  if (engine == "sglang") job.assumptions.push_back("rollout.name = sglang: sharded like vLLM (same TP / DP / EP rules)");
  job.model = {t.String("actor_rollout_ref.model.path").value_or(""), "actor_rollout_ref.model.path"};
  if (auto p = t.String(mg + "dtype")) job.dtype = {ImportDtype(*p, config_path, mg + "dtype"), mg + "dtype"};

  ReadCount(t, job, job.tp, mg + "tensor_model_parallel_size", 1, "verl's default 1");
  ReadCount(t, job, job.pp, mg + "pipeline_model_parallel_size", 1, "verl's default 1");
  ReadCount(t, job, job.vpp, mg + "virtual_pipeline_model_parallel_size");
  ReadCount(t, job, job.cp, mg + "context_parallel_size", 1, "verl's default 1");
  ReadCount(t, job, job.ep, mg + "expert_model_parallel_size", 1, "verl's default 1");
  ReadCount(t, job, job.etp, mg + "expert_tensor_parallel_size");
  job.optimizer_bytes_per_param = {12, a + "optim.optimizer: adam (fp32 master + 2 moments)"};
  if (const std::string kind = t.String(a + "optim.optimizer").value_or("adam"); kind == "sgd") {
    job.optimizer_bytes_per_param = {8, a + "optim.optimizer: sgd (fp32 master + momentum)"};
  } else if (kind != "adam" && kind != "adamw") {
    throw InputError(config_path, a + "optim.optimizer", fmt::format("unknown optimizer '{}' (adam or sgd)", kind));
  }
  Read<bool>(job, job.distributed_optimizer, mg + "use_distributed_optimizer",
             [&](const std::string& p) { return t.Bool(p); }, true, "verl's default true");
  job.offload = "none";
  job.offload_origin = "verl keeps it where the step left it";
  if (t.Bool(mg + "optimizer_offload").value_or(false)) {
    job.optimizer_host_fraction = {1, mg + "optimizer_offload: true (in host memory during the refit)"};
  }
  if (t.Bool(mg + "param_offload").value_or(false)) {
    job.assumptions.push_back(mg + "param_offload = true: verl loads the training weights back to the GPUs for the "
                              "weight sync; the scenario has them there from the start");
  }

  ReadCount(t, job, job.gen_tp, ro + "tensor_model_parallel_size", 2, "verl's default 2");
  ReadCount(t, job, job.gen_pp, ro + "pipeline_model_parallel_size", 1, "verl's default 1");
  ReadCount(t, job, job.gen_dp, ro + "data_parallel_size", 1, "verl's default 1");
  ReadCount(t, job, job.gen_ep, ro + "expert_parallel_size", 1, "verl's default 1");
  if (auto p = t.String(ro + "dtype")) job.destination_dtype = {ImportDtype(*p, config_path, ro + "dtype"), ro + "dtype"};
  Read<double>(job, job.gpu_memory_utilization, ro + "gpu_memory_utilization",
               [&](const std::string& p) { return t.Number(p); }, 0.5, "verl's default 0.5");

  ReadCount(t, job, job.gpus_per_node, "trainer.n_gpus_per_node", 8, "verl's default 8");
  ReadCount(t, job, job.nodes, "trainer.nnodes", 1, "verl's default 1");
  job.colocated = {t.Bool("actor_rollout_ref.hybrid_engine").value_or(true), "actor_rollout_ref.hybrid_engine"};
  const bool free_cache = t.Bool(ro + "free_cache_engine").value_or(true);
  if (!job.colocated.value) {
    // verl's disaggregated recipes (one-step off-policy, fully async) size the rollout's own pool.
    const auto gen_nodes = t.Int("rollout.nnodes");
    const auto gen_per_node = t.Int("rollout.n_gpus_per_node");
    if (!gen_nodes || !gen_per_node || *gen_nodes < 1 || *gen_per_node != job.gpus_per_node.value) {
      throw InputError(config_path, "rollout.nnodes",
                       "hybrid_engine is false: give the rollout's own pool, rollout.nnodes >= 1 and "
                       "rollout.n_gpus_per_node equal to trainer.n_gpus_per_node");
    }
    job.train_gpus = {job.nodes.value * job.gpus_per_node.value, "trainer.nnodes x trainer.n_gpus_per_node"};
    job.gen_gpus = {static_cast<int32_t>(*gen_nodes) * job.gpus_per_node.value, "rollout.nnodes"};
    job.nodes = {job.nodes.value + static_cast<int32_t>(*gen_nodes), "trainer.nnodes + rollout.nnodes"};
    job.kv_resident = true;
    job.kv_origin = "the rollout GPUs keep their KV cache";
  } else if (free_cache) {
    job.kv_resident = false;
    job.kv_origin = ro + "free_cache_engine: vLLM's KV cache is rebuilt after the weights";
  } else {
    job.kv_resident = true;
    job.kv_origin = ro + "free_cache_engine false: the KV cache stays";
  }
  return FinishImport(std::move(job), o);
}

}  // namespace reshard
