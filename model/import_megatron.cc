// `reshard import megatron`: Megatron-LM training flags, vLLM serving flags
// and torchrun's node flags read into an ImportedJob (model/import_job.h).
// The three tools spell their flags differently (Megatron
// --tensor-model-parallel-size, vLLM --tensor-parallel-size), so one mixed
// argument list is unambiguous. Flags that do not bear on the refit are
// collected in `ignored`.
#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/error.h"
#include "model/import.h"
#include "model/import_job.h"
#include "model/scenario.h"

namespace reshard {

namespace {

// Flags without a value (present = true).
bool IsSwitch(const std::string& flag) {
  static const std::vector<std::string> switches = {
      "--use-distributed-optimizer", "--bf16", "--fp16", "--optimizer-cpu-offload", "--use-precision-aware-optimizer",
      "--enable-expert-parallel", "--sequence-parallel", "--overlap-grad-reduce", "--overlap-param-gather",
      "--enforce-eager", "--trust-remote-code", "--use-mcore-models", "--swiglu", "--disable-bias-linear",
      "--untie-embeddings-and-output-weights", "--enable-prefix-caching", "--enable-chunked-prefill", "-ep"};
  for (const std::string& s : switches) {
    if (flag == s) return true;
  }
  return false;
}

// "--nproc_per_node" and "--nproc-per-node" are the same flag; short vLLM aliases map to long names.
std::string Canonical(std::string flag) {
  for (size_t i = 2; i < flag.size(); ++i) {
    if (flag[i] == '_') flag[i] = '-';
  }
  static const std::map<std::string, std::string> aliases = {
      {"-tp", "--tensor-parallel-size"}, {"-pp", "--pipeline-parallel-size"}, {"-dp", "--data-parallel-size"},
      {"-ep", "--enable-expert-parallel"}, {"--tp", "--tensor-model-parallel-size"},
      {"--pp", "--pipeline-model-parallel-size"}};
  auto it = aliases.find(flag);
  return it == aliases.end() ? flag : it->second;
}

struct Flags {
  std::map<std::string, std::string> values;   // canonical flag -> value ("true" for switches)
  std::map<std::string, std::string> spelled;  // canonical flag -> as written
  std::vector<std::string> positionals;
};

Flags Parse(const std::vector<std::string>& args) {
  Flags f;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a[0] != '-' || a == "--") {
      if (a != "--") f.positionals.push_back(a);
      continue;
    }
    std::string flag = a, value;
    bool has_value = false;
    if (size_t eq = a.find('='); eq != std::string::npos) {
      flag = a.substr(0, eq);
      value = a.substr(eq + 1);
      has_value = true;
    }
    const std::string canon = Canonical(flag);
    if (!has_value) {
      if (IsSwitch(canon) || IsSwitch(flag) || i + 1 >= args.size() || (args[i + 1].size() > 1 && args[i + 1][0] == '-' &&
                                                                          !std::isdigit(static_cast<unsigned char>(args[i + 1][1])))) {
        value = "true";
      } else {
        value = args[++i];
      }
    }
    f.values[canon] = value;
    f.spelled[canon] = flag;
  }
  return f;
}

class FlagReader {
 public:
  explicit FlagReader(const Flags& f) : f_(f) {}

  std::optional<std::string> Get(const std::string& flag) {
    used_.push_back(flag);
    auto it = f_.values.find(flag);
    if (it == f_.values.end()) return std::nullopt;
    return it->second;
  }
  void Count(From<int32_t>& dst, const std::string& flag) {
    if (auto v = Get(flag)) {
      try {
        size_t used = 0;
        const long n = std::stol(*v, &used);
        if (used == v->size() && n >= 1 && n <= (1L << 30)) {
          dst = {static_cast<int32_t>(n), flag};
          return;
        }
      } catch (const std::exception&) {
      }
      throw InputError("<cli>", flag, fmt::format("expected a whole number >= 1, got '{}'", *v));
    }
  }
  std::optional<double> Number(const std::string& flag) {
    auto v = Get(flag);
    if (!v) return std::nullopt;
    try {
      size_t used = 0;
      const double n = std::stod(*v, &used);
      if (used == v->size()) return n;
    } catch (const std::exception&) {
    }
    throw InputError("<cli>", flag, fmt::format("expected a number, got '{}'", *v));
  }
  bool Switch(const std::string& flag) {
    auto v = Get(flag);
    return v && *v != "false" && *v != "False" && *v != "0";
  }
  std::vector<std::string> Unused() const {
    std::vector<std::string> out;
    for (const auto& [flag, value] : f_.values) {
      if (std::find(used_.begin(), used_.end(), flag) == used_.end()) out.push_back(f_.spelled.at(flag));
    }
    return out;
  }

 private:
  const Flags& f_;
  std::vector<std::string> used_;
};

}  // namespace

ImportResult ImportMegatron(const std::vector<std::string>& args, const ImportOptions& o) {
  const Flags flags = Parse(args);
  FlagReader r(flags);
  ImportedJob job;
  job.input = "<cli>";
  job.framework = "Megatron-LM / vLLM flags";
  job.verb = "megatron";
  job.name = "imported-megatron";

  // The model: vLLM's --model, or `vllm serve MODEL`.
  if (auto m = r.Get("--model")) {
    job.model = {*m, "--model"};
  } else {
    for (size_t i = 0; i + 1 < flags.positionals.size(); ++i) {
      if (flags.positionals[i] == "serve") job.model = {flags.positionals[i + 1], "vllm serve MODEL"};
    }
  }
  if (job.model.origin.empty()) job.model.origin = "--model";

  // Training weights: Megatron trains in fp32 unless --bf16 or --fp16.
  if (r.Switch("--bf16")) {
    job.dtype = {"bf16", "--bf16"};
  } else if (r.Switch("--fp16")) {
    job.dtype = {"fp16", "--fp16"};
  } else {
    job.dtype = {"fp32", "neither --bf16 nor --fp16: Megatron's fp32"};
  }
  if (auto d = r.Get("--dtype"); d && *d != "auto") job.destination_dtype = {ImportDtype(*d, "<cli>", "--dtype"), "--dtype"};
  if (auto q = r.Get("--quantization"); q) {
    if (*q != "fp8") throw InputError("<cli>", "--quantization", fmt::format("'{}': only fp8 is modelled", *q));
    job.destination_dtype = {"fp8_e4m3", "--quantization fp8"};
  }

  r.Count(job.tp, "--tensor-model-parallel-size");
  r.Count(job.pp, "--pipeline-model-parallel-size");
  r.Count(job.vpp, "--virtual-pipeline-model-parallel-size");
  r.Count(job.layers_per_virtual_stage, "--num-layers-per-virtual-pipeline-stage");
  r.Count(job.cp, "--context-parallel-size");
  r.Count(job.ep, "--expert-model-parallel-size");
  r.Count(job.etp, "--expert-tensor-parallel-size");
  r.Count(job.first_stage_layers, "--decoder-first-pipeline-num-layers");
  r.Count(job.last_stage_layers, "--decoder-last-pipeline-num-layers");

  const std::optional<std::string> given = r.Get("--optimizer");
  const std::string optimizer = given.value_or("adam");
  if (optimizer == "adam") {
    job.optimizer_bytes_per_param = {12, given ? "--optimizer adam (fp32 master + 2 moments)"
                                               : "Megatron's default adam (fp32 master + 2 moments)"};
  } else if (optimizer == "sgd") {
    job.optimizer_bytes_per_param = {8, "--optimizer sgd (fp32 master + momentum)"};
  } else {
    throw InputError("<cli>", "--optimizer", fmt::format("unknown optimizer '{}' (adam or sgd)", optimizer));
  }
  const bool distributed = r.Switch("--use-distributed-optimizer");
  job.distributed_optimizer = {distributed, distributed ? "--use-distributed-optimizer" : "no --use-distributed-optimizer"};
  if (r.Switch("--optimizer-cpu-offload")) {
    job.optimizer_host_fraction = {r.Number("--optimizer-offload-fraction").value_or(1.0), "--optimizer-offload-fraction"};
  }

  r.Count(job.gen_tp, "--tensor-parallel-size");
  r.Count(job.gen_pp, "--pipeline-parallel-size");
  r.Count(job.gen_dp, "--data-parallel-size");
  job.gen_enable_ep = {r.Switch("--enable-expert-parallel"), "--enable-expert-parallel"};
  if (auto u = r.Number("--gpu-memory-utilization")) job.gpu_memory_utilization = {*u, "--gpu-memory-utilization"};
  if (auto kv = r.Get("--kv-cache-memory")) job.kv_cache_bytes = {ParseBytes(*kv, "<cli>", "--kv-cache-memory"), "--kv-cache-memory"};

  r.Count(job.nodes, "--nnodes");
  r.Count(job.gpus_per_node, "--nproc-per-node");
  if (job.gpus_per_node.origin.empty()) {
    job.assumptions.push_back("--nproc-per-node not given: 8 GPUs per node");
  }
  const int32_t train = job.nodes.value * job.gpus_per_node.value;
  if (o.generation_gpus > 0) {
    job.colocated = {false, "--generation-gpus"};
    job.train_gpus = {train, "--nnodes x --nproc-per-node"};
    job.gen_gpus = {o.generation_gpus, "--generation-gpus"};
    const int32_t total = train + o.generation_gpus;
    job.nodes = {(total + job.gpus_per_node.value - 1) / job.gpus_per_node.value, "trainer nodes + generation nodes"};
    job.kv_resident = true;
    job.kv_origin = job.kv_cache_bytes.value >= 0 ? "--kv-cache-memory" : "the generation GPUs keep their KV cache";
  } else {
    job.colocated = {true, "no --generation-gpus"};
    job.kv_resident = false;
    job.kv_origin = "a colocated engine wakes its KV cache after the weights";
    job.assumptions.push_back("colocated: vLLM runs on the trainer's GPUs, asleep during training and woken weights "
                              "first (KV cache after the refit); pass --generation-gpus N for an engine on N GPUs of "
                              "its own");
  }
  job.offload = job.colocated.value ? "auto" : "none";
  job.offload_origin = job.colocated.value ? "the planner chooses" : "the trainer's GPUs receive nothing";

  ImportResult result = FinishImport(std::move(job), o);
  result.ignored = r.Unused();
  for (const std::string& p : flags.positionals) {
    if (p != "serve" && p != "vllm" && p != "torchrun" && p != "python" && p != "python3" && !p.ends_with(".py") &&
        p != r.Get("--model").value_or("") ) {
      bool is_model = false;
      for (size_t i = 0; i + 1 < flags.positionals.size(); ++i) is_model |= flags.positionals[i] == "serve" && flags.positionals[i + 1] == p;
      if (!is_model) result.ignored.push_back(p);
    }
  }
  return result;
}

}  // namespace reshard
