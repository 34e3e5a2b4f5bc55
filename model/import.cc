// The common step of `reshard import` (model/import.h): from a framework's job
// description to a scenario that the scenario reader accepts.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/cluster.h"
#include "model/error.h"
#include "model/import.h"
#include "model/import_job.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/scenario.h"

namespace reshard {

namespace fs = std::filesystem;

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// Hugging Face repositories whose architecture a preset describes (lower case,
// organisation removed). Fine-tunes and renamed releases keep the shapes of
// their base: Llama 3 and 3.1 share them (8B, 70B, 405B), as do 3.3-70B,
// DeepSeek V3 / V3.1 / R1 and the Kimi K2 releases.
const std::map<std::string, std::string>& HfNames() {
  static const std::map<std::string, std::string> names = {
      {"meta-llama-3-8b", "llama3-8b"},
      {"meta-llama-3-8b-instruct", "llama3-8b"},
      {"llama-3.1-8b", "llama3-8b"},
      {"llama-3.1-8b-instruct", "llama3-8b"},
      {"meta-llama-3.1-8b", "llama3-8b"},
      {"meta-llama-3.1-8b-instruct", "llama3-8b"},
      {"meta-llama-3-70b", "llama3-70b"},
      {"meta-llama-3-70b-instruct", "llama3-70b"},
      {"llama-3.1-70b", "llama3-70b"},
      {"llama-3.1-70b-instruct", "llama3-70b"},
      {"meta-llama-3.1-70b", "llama3-70b"},
      {"meta-llama-3.1-70b-instruct", "llama3-70b"},
      {"llama-3.3-70b-instruct", "llama3-70b"},
      {"llama-3.1-405b", "llama3-405b"},
      {"llama-3.1-405b-instruct", "llama3-405b"},
      {"meta-llama-3.1-405b", "llama3-405b"},
      {"meta-llama-3.1-405b-instruct", "llama3-405b"},
      {"qwen3-30b-a3b", "qwen3-30b-a3b"},
      {"qwen3-30b-a3b-base", "qwen3-30b-a3b"},
      {"qwen3-30b-a3b-instruct-2507", "qwen3-30b-a3b"},
      {"qwen3-30b-a3b-thinking-2507", "qwen3-30b-a3b"},
      {"qwen3-235b-a22b", "qwen3-235b-a22b"},
      {"qwen3-235b-a22b-instruct-2507", "qwen3-235b-a22b"},
      {"qwen3-235b-a22b-thinking-2507", "qwen3-235b-a22b"},
      {"deepseek-v3", "deepseek-v3"},
      {"deepseek-v3-base", "deepseek-v3"},
      {"deepseek-v3-0324", "deepseek-v3"},
      {"deepseek-v3.1", "deepseek-v3"},
      {"deepseek-v3.1-base", "deepseek-v3"},
      {"deepseek-r1", "deepseek-v3"},
      {"deepseek-r1-0528", "deepseek-v3"},
      {"kimi-k2-base", "kimi-k2"},
      {"kimi-k2-instruct", "kimi-k2"},
      {"kimi-k2-instruct-0905", "kimi-k2"},
  };
  return names;
}

bool LooksLikePath(const std::string& m) {
  return !m.empty() && (m[0] == '/' || m[0] == '.' || m[0] == '~' || m.ends_with(".json") ||
                        std::count(m.begin(), m.end(), '/') > 1);
}

// A config.json the model name points to: the file itself or a directory that
// holds one, as given or relative to `dir`; "~/" is the home directory.
std::string LocalConfig(std::string m, const std::string& dir) {
  if (m.starts_with("~/")) {
    const char* home = std::getenv("HOME");
    if (home == nullptr) return "";
    m = std::string(home) + m.substr(1);
  }
  std::vector<fs::path> tries = {fs::path(m)};
  if (fs::path(m).is_relative() && !dir.empty()) tries.push_back(fs::path(dir) / m);
  std::error_code ec;
  for (const fs::path& p : tries) {
    if (fs::is_regular_file(p, ec) && p.extension() == ".json") return p.string();
    if (fs::is_directory(p, ec) && fs::is_regular_file(p / "config.json", ec)) return (p / "config.json").string();
  }
  return "";
}

// A path as the scenario at `scenario_path` should spell it: relative to its
// directory when that is simple, else absolute.
std::string PathFromScenario(const std::string& path, const std::string& scenario_path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  const fs::path base = fs::absolute(fs::path(scenario_path).parent_path(), ec);
  fs::path rel = abs.lexically_normal().lexically_relative(base.lexically_normal());
  if (!rel.empty() && *rel.begin() != "..") return rel.string();
  return abs.lexically_normal().string();
}

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
  return out + "\"";
}

std::string Range(int32_t begin, int32_t count) {
  return count == 1 ? std::to_string(begin) : fmt::format("\"{}-{}\"", begin, begin + count - 1);
}

// Scenario YAML, one "key: value  # origin" line at a time.
class YamlText {
 public:
  void Comment(const std::string& c) { text_ += "# " + c + "\n"; }
  void Blank() { text_ += "\n"; }
  void Line(int indent, const std::string& key, const std::string& value, const std::string& origin = "") {
    std::string line = std::string(static_cast<size_t>(indent), ' ') + key + ":" + (value.empty() ? "" : " " + value);
    if (!origin.empty()) line += std::string(line.size() < 34 ? 34 - line.size() : 1, ' ') + "# " + origin;
    text_ += line + "\n";
  }
  const std::string& Text() const { return text_; }

 private:
  std::string text_;
};

std::string FormatNumber(double v) {
  std::string s = fmt::format("{:.4f}", v);
  while (s.back() == '0') s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

std::string Origin(const std::string& origin, const std::string& fallback = "default") {
  return origin.empty() ? fallback : origin;
}

struct Resolved {
  ModelConfig config;
  std::string yaml;     // "llama3-8b" or "{hf_config: path}"
  std::string origin;
};

Resolved ResolveModel(const ImportedJob& job, const ImportOptions& o, const std::string& scenario_path) {
  Resolved r;
  if (!o.hf_config.empty()) {
    r.config = ReadHfConfig(o.hf_config);
    r.yaml = "{hf_config: " + Quote(PathFromScenario(o.hf_config, scenario_path)) + "}";
    r.origin = "--hf-config";
    return r;
  }
  if (!o.model_preset.empty()) {
    r.config = ModelPreset(o.model_preset, "<cli>", "--model");
    r.yaml = o.model_preset;
    r.origin = "--model";
    return r;
  }
  const std::string& m = job.model.value;
  if (m.empty()) {
    throw InputError(job.input, job.model.origin, "no model given; pass --hf-config path/config.json or --model PRESET");
  }
  if (std::string local = LocalConfig(m, job.model_dir); !local.empty()) {
    r.config = ReadHfConfig(local);
    r.yaml = "{hf_config: " + Quote(PathFromScenario(local, scenario_path)) + "}";
    r.origin = job.model.origin + ": " + m;
    return r;
  }
  if (std::string preset = PresetForHfName(m); !preset.empty()) {
    r.config = ModelPreset(preset);
    r.yaml = preset;
    r.origin = job.model.origin + ": " + m;
    return r;
  }
  std::string presets;
  for (const std::string& p : ModelPresetNames()) {
    if (!p.starts_with("tiny-")) presets += (presets.empty() ? "" : ", ") + p;
  }
  if (LooksLikePath(m)) {
    throw InputError(job.input, job.model.origin,
                     fmt::format("'{}' is a local path with no config.json in it; pass the model's config.json with "
                                 "--hf-config, or --model PRESET ({})", m, presets));
  }
  throw InputError(job.input, job.model.origin,
                   fmt::format("no built-in preset has the architecture of '{}' (presets: {}); pass its config.json "
                               "with --hf-config (`huggingface-cli download {} config.json`), or --model PRESET",
                               m, presets, m));
}

// Megatron's split with explicit first / last stage sizes: the other stages
// share the remaining layers evenly (and must divide them).
std::vector<int32_t> UnevenStages(const ImportedJob& job, int32_t layers) {
  const int32_t pp = job.pp.value, first = job.first_stage_layers.value, last = job.last_stage_layers.value;
  const std::string field = Origin(job.first_stage_layers.origin.empty() ? job.last_stage_layers.origin
                                                                          : job.first_stage_layers.origin);
  if (job.vpp.value > 1) {
    throw InputError(job.input, field,
                     "uneven first / last pipeline stages with virtual pipeline stages: write source.pp_layers in "
                     "the scenario by hand (one entry per virtual chunk)");
  }
  const int32_t middle = pp - (first > 0 ? 1 : 0) - (last > 0 ? 1 : 0);
  const int32_t rest = layers - first - last;
  if (rest < 0 || (middle == 0 && rest != 0) || (middle > 0 && rest % middle != 0)) {
    throw InputError(job.input, field,
                     fmt::format("{} layers with {} on the first and {} on the last of {} pipeline stages: the other "
                                 "stages cannot share the remaining {} evenly", layers, first, last, pp, rest));
  }
  std::vector<int32_t> stages(static_cast<size_t>(pp), middle > 0 ? rest / middle : 0);
  if (first > 0) stages.front() = first;
  if (last > 0) stages.back() = last;
  return stages;
}

void NeedDivides(const ImportedJob& job, int32_t gpus, int32_t group, const std::string& what,
                 const std::string& field) {
  if (group <= 0 || gpus % group != 0) {
    throw InputError(job.input, field, fmt::format("{} GPUs are not a multiple of {} = {}", gpus, what, group));
  }
}

struct Layouts {
  int32_t total = 0, train = 0, gen = 0;
  int32_t dp = 1, gen_dp = 1, engines = 1, gen_ep = 1, etp = 1, vpp = 1, ep = 1;
  std::vector<int32_t> pp_layers;
};

Layouts PlanLayouts(ImportedJob& job, const ModelConfig& cfg) {
  Layouts l;
  l.total = job.nodes.value * job.gpus_per_node.value;
  l.train = job.train_gpus.value > 0 ? job.train_gpus.value : l.total;
  l.gen = job.gen_gpus.value > 0 ? job.gen_gpus.value : l.total;
  if (!job.colocated.value && l.train + l.gen > l.total) {
    throw InputError(job.input, Origin(job.gen_gpus.origin),
                     fmt::format("{} trainer GPUs and {} generation GPUs do not fit in {} nodes x {} GPUs", l.train,
                                 l.gen, job.nodes.value, job.gpus_per_node.value));
  }
  const int32_t tp = job.tp.value, pp = job.pp.value, cp = job.cp.value;
  NeedDivides(job, l.train, tp * cp * pp, "tp x cp x pp", Origin(job.tp.origin));
  l.dp = l.train / (tp * cp * pp);
  l.vpp = job.vpp.value;
  if (job.layers_per_virtual_stage.value > 0) {
    const int32_t per = job.layers_per_virtual_stage.value;
    if (cfg.layers % (pp * per) != 0) {
      throw InputError(job.input, job.layers_per_virtual_stage.origin,
                       fmt::format("{} layers are not a multiple of pp x layers per virtual stage = {}", cfg.layers,
                                   pp * per));
    }
    l.vpp = cfg.layers / (pp * per);
    job.vpp = {l.vpp, job.layers_per_virtual_stage.origin};
  }
  if (job.first_stage_layers.value > 0 || job.last_stage_layers.value > 0) l.pp_layers = UnevenStages(job, cfg.layers);
  l.ep = job.ep.value;
  l.etp = job.etp.value > 0 ? job.etp.value : tp;
  if (!cfg.IsMoe() && (l.ep > 1 || l.etp > 1)) {
    if (l.ep > 1) job.assumptions.push_back(fmt::format("{} = {} ignored: the model has no experts", job.ep.origin, l.ep));
    l.ep = 1;
    l.etp = 1;
  }

  const int32_t gtp = job.gen_tp.value, gpp = job.gen_pp.value;
  NeedDivides(job, l.gen, gtp * gpp, "generation tp x pp", Origin(job.gen_tp.origin));
  l.gen_dp = l.gen / (gtp * gpp);
  const int32_t engine_dp = std::max(1, job.gen_dp.value);
  const int32_t engine_ep = std::max(1, job.gen_ep.value);
  NeedDivides(job, l.gen, gtp * gpp * engine_dp, "generation tp x pp x dp (one engine)", Origin(job.gen_dp.origin));
  l.engines = l.gen / (gtp * gpp * engine_dp);
  const bool ep_on = job.gen_enable_ep.value || engine_ep > 1;
  if (cfg.IsMoe() && ep_on) {
    l.gen_ep = gtp * l.gen_dp;
    if (l.engines > 1) {
      job.assumptions.push_back(fmt::format(
          "destination.ep = tp x dp = {}: reshard puts whole experts on every rank of one expert group spanning all "
          "{} generation GPUs; the job runs {} engines with an expert group of {} each, so its ranks hold {}x more "
          "expert bytes than the scenario's", l.gen_ep, l.gen, l.engines, gtp * engine_dp, l.engines));
    }
  } else if (cfg.IsMoe() && l.engines > 1) {
    job.assumptions.push_back(fmt::format(
        "destination.dp = {}: reshard shards every expert over tp x dp = {} ranks (vLLM data parallelism within one "
        "engine); the job runs {} independent engines of {} GPUs, each holding every expert, so its ranks hold {}x "
        "more expert bytes than the scenario's", l.gen_dp, gtp * l.gen_dp, l.engines, gtp * gpp * engine_dp,
        l.engines));
  }
  return l;
}

// Destination weights of the largest rank, for the KV cache left by vLLM's share.
int64_t LargestDestinationRank(const Scenario& s) {
  const Layout d = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  int64_t most = 0;
  for (int32_t r = 0; r < d.Ranks(); ++r) most = std::max(most, d.RankBytes(r));
  return most;
}

std::string Emit(const ImportedJob& job, const Resolved& model, const Cluster& cluster, const std::string& cluster_name,
                 const Layouts& l, int64_t kv_bytes, double reserve_gib, const std::vector<std::string>& assumptions) {
  YamlText y;
  y.Comment(fmt::format("Imported by `reshard import {}` from {} ({}).", job.verb,
                        job.input == "<cli>" ? "command-line flags" : fs::path(job.input).filename().string(),
                        job.framework));
  if (!assumptions.empty()) {
    y.Comment("Assumptions (the input does not say; check them):");
    for (const std::string& a : assumptions) y.Comment("  - " + a);
  }
  y.Line(0, "name", job.name);
  y.Line(0, "model", model.yaml, model.origin);
  y.Line(0, "dtype", job.dtype.value, Origin(job.dtype.origin));
  y.Line(0, "cluster", "");
  y.Line(2, "preset", cluster_name);
  y.Line(2, "nodes", std::to_string(job.nodes.value), Origin(job.nodes.origin));
  if (job.gpus_per_node.value != cluster.gpus_per_node || !job.gpus_per_node.origin.empty()) {
    y.Line(2, "gpus_per_node", std::to_string(job.gpus_per_node.value), Origin(job.gpus_per_node.origin));
  }
  const bool all_train = l.train == l.total, all_gen = l.gen == l.total;
  y.Line(0, "source", "");
  y.Line(2, "engine", "megatron");
  y.Line(2, "tp", std::to_string(job.tp.value), Origin(job.tp.origin));
  y.Line(2, "pp", std::to_string(job.pp.value), Origin(job.pp.origin));
  if (l.vpp > 1) y.Line(2, "vpp", std::to_string(l.vpp), Origin(job.vpp.origin));
  if (job.cp.value > 1) y.Line(2, "cp", std::to_string(job.cp.value), Origin(job.cp.origin));
  if (l.ep > 1 || l.etp > 1) {
    y.Line(2, "ep", std::to_string(l.ep), Origin(job.ep.origin));
    y.Line(2, "etp", std::to_string(l.etp), job.etp.value > 0 ? Origin(job.etp.origin) : "Megatron's default: tp");
  }
  y.Line(2, "dp", std::to_string(l.dp), "GPUs / (tp x cp x pp)");
  if (!l.pp_layers.empty()) {
    std::string list;
    for (int32_t n : l.pp_layers) list += (list.empty() ? "" : ", ") + std::to_string(n);
    y.Line(2, "pp_layers", "[" + list + "]", Origin(job.first_stage_layers.origin.empty() ? job.last_stage_layers.origin
                                                                                           : job.first_stage_layers.origin));
  }
  y.Line(2, "gpus", all_train ? "all" : Range(0, l.train), Origin(job.train_gpus.origin, "trainer GPUs"));
  y.Line(0, "destination", "");
  y.Line(2, "engine", "vllm");
  y.Line(2, "tp", std::to_string(job.gen_tp.value), Origin(job.gen_tp.origin));
  if (job.gen_pp.value > 1) y.Line(2, "pp", std::to_string(job.gen_pp.value), Origin(job.gen_pp.origin));
  y.Line(2, "dp", std::to_string(l.gen_dp), "GPUs / (tp x pp)");
  if (l.gen_ep > 1) {
    y.Line(2, "ep", std::to_string(l.gen_ep), Origin(job.gen_ep.origin.empty() ? job.gen_enable_ep.origin : job.gen_ep.origin));
  }
  if (!job.destination_dtype.value.empty() && job.destination_dtype.value != job.dtype.value) {
    y.Line(2, "dtype", job.destination_dtype.value, Origin(job.destination_dtype.origin));
  }
  const std::string gen_gpus = job.colocated.value ? (all_gen ? "all" : Range(0, l.gen))
                                                   : Range(l.train, l.gen);
  y.Line(2, "gpus", gen_gpus,
         job.colocated.value ? Origin(job.colocated.origin, "colocated") + ": colocated"
                             : Origin(job.gen_gpus.origin, "generation GPUs") + ": after the trainer's");
  y.Line(0, "memory", "");
  y.Line(2, "optimizer", "");
  y.Line(4, "bytes_per_param", FormatNumber(job.optimizer_bytes_per_param.value),
         Origin(job.optimizer_bytes_per_param.origin));
  y.Line(4, "distributed", job.distributed_optimizer.value ? "true" : "false", Origin(job.distributed_optimizer.origin));
  const double on_host = job.optimizer_host_fraction.value;
  if (on_host > 0)
    y.Line(4, "on_host", on_host >= 1 ? "true" : FormatNumber(on_host), Origin(job.optimizer_host_fraction.origin));
  y.Line(4, "offload", on_host >= 1 ? "none" : job.offload,
         on_host >= 1 ? "the state is on the host already" : Origin(job.offload_origin));
  y.Line(2, "kv_cache_gib", FormatNumber(static_cast<double>(kv_bytes) / (1 << 30)), job.kv_origin);
  y.Line(2, "reserve_gib", FormatNumber(reserve_gib), "assumed");
  y.Line(0, "plan", "");
  y.Line(2, "segment_bytes", "auto");
  return y.Text();
}

}  // namespace

std::string PresetForHfName(const std::string& hf_name) {
  std::string n = Lower(hf_name);
  while (!n.empty() && n.back() == '/') n.pop_back();
  if (size_t slash = n.rfind('/'); slash != std::string::npos) n = n.substr(slash + 1);
  for (const std::string& preset : ModelPresetNames()) {
    if (n == preset) return preset;
  }
  auto it = HfNames().find(n);
  return it == HfNames().end() ? "" : it->second;
}

std::string ImportDtype(const std::string& text, const std::string& file, const std::string& field) {
  std::string t = Lower(text);
  if (t.starts_with("torch.")) t = t.substr(6);
  if (t == "bfloat16" || t == "bf16") return "bf16";
  if (t == "float16" || t == "fp16" || t == "half") return "fp16";
  if (t == "float32" || t == "fp32" || t == "float") return "fp32";
  if (t == "fp8" || t == "fp8_e4m3" || t == "float8_e4m3fn") return "fp8_e4m3";
  if (t == "fp8_e5m2" || t == "float8_e5m2") return "fp8_e5m2";
  throw InputError(file, field, fmt::format("unknown precision '{}' (bfloat16, float16, float32 or fp8)", text));
}

ImportResult FinishImport(ImportedJob job, const ImportOptions& o) {
  const std::string scenario_path =
      !o.output_path.empty() ? o.output_path
                             : (fs::path(job.input == "<cli>" ? "." : fs::path(job.input).parent_path()) /
                                (job.name + ".yaml")).string();
  if (!o.name.empty()) job.name = o.name;
  const Resolved model = ResolveModel(job, o, scenario_path);

  std::string cluster_name = o.cluster_preset;
  if (cluster_name.empty()) {
    cluster_name = "dgx-h100";
    job.assumptions.push_back("cluster preset dgx-h100 (H100 80 GB, NVLink 4, 8 x 400 Gb/s NICs per node): the input "
                              "does not name the GPU; pass --cluster h200-x2 | dgx-h200 | gb200-nvl72");
  }
  const Cluster cluster = ClusterPreset(cluster_name, "<cli>", "--cluster");
  const Layouts layouts = PlanLayouts(job, model.config);

  double reserve_gib = o.reserve_gib;
  if (reserve_gib < 0) {
    reserve_gib = 2;
    job.assumptions.push_back("memory.reserve_gib = 2 kept free on every GPU (allocator fragmentation, activations "
                              "left over); pass --reserve-gib");
  }
  if (job.optimizer_host_fraction.value > 0) {
    job.assumptions.push_back(fmt::format("{} = {}: that share of the optimizer state stays in host memory "
                                          "(memory.optimizer.on_host), so the GPUs hold only the rest",
                                          job.optimizer_host_fraction.origin,
                                          FormatNumber(job.optimizer_host_fraction.value)));
  }

  auto load = [&](int64_t kv_bytes) {
    const std::string text = Emit(job, model, cluster, cluster_name, layouts, kv_bytes, reserve_gib, job.assumptions);
    try {
      return std::pair{ParseScenario(text, scenario_path), text};
    } catch (const InputError& e) {
      throw InputError(job.input, e.field(),
                       fmt::format("the imported scenario is not valid: {} (scenario field {}; see the origin "
                                   "comments of `reshard import` output)", e.problem(), e.field()));
    }
  };

  int64_t kv_bytes = 0;
  if (job.kv_resident && job.kv_cache_bytes.value >= 0) kv_bytes = job.kv_cache_bytes.value;
  auto [scenario, text] = load(kv_bytes);
  if (job.kv_resident && job.kv_cache_bytes.value < 0) {
    const int64_t weights = LargestDestinationRank(scenario);
    const int64_t share = static_cast<int64_t>(job.gpu_memory_utilization.value *
                                               static_cast<double>(scenario.cluster.gpu_memory_bytes));
    kv_bytes = std::max<int64_t>(0, share - weights - scenario.cluster.overheads.cuda_context_bytes);
    job.assumptions.push_back(fmt::format(
        "KV cache = {} x GPU memory {} - destination weights {} - CUDA context {} = {}; vLLM also leaves out its "
        "activation peak, so the real cache is a little smaller",
        FormatNumber(job.gpu_memory_utilization.value) + " (" +
            Origin(job.gpu_memory_utilization.origin, "vLLM's default gpu_memory_utilization") + ")",
        FormatBytes(scenario.cluster.gpu_memory_bytes), FormatBytes(weights),
        FormatBytes(scenario.cluster.overheads.cuda_context_bytes), FormatBytes(kv_bytes)));
    std::tie(scenario, text) = load(kv_bytes);
  }

  ImportResult r;
  r.name = job.name;
  r.yaml = text;
  r.assumptions = job.assumptions;
  return r;
}

}  // namespace reshard
