// What the framework readers of model/import.h extract from a configuration
// before the common step turns it into a scenario (FinishImport). Internal to
// the importers; each value carries the framework field it came from, which
// the scenario's YAML repeats in a comment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/import.h"

namespace reshard {

// A value read from the input and the field (or flag) it came from.
template <typename T>
struct From {
  T value{};
  std::string origin;  // "policy.megatron_cfg.tensor_model_parallel_size", "--nnodes"; "" = a default
};

struct ImportedJob {
  std::string input;       // file for errors ("<cli>" for flags)
  std::string framework;   // "NeMo-RL", "verl", "Megatron-LM"
  std::string verb;        // "nemo-rl", "verl", "megatron": the import's own name
  std::string name;        // scenario name chosen from the input

  From<std::string> model;            // HF name, local path or config.json, as the framework spells it
  std::string model_dir;              // directory a relative local model path is tried against
  From<std::string> dtype{"bf16", ""};                 // training weights (reshard dtype name)
  From<std::string> destination_dtype{"", ""};         // "" = as the training weights

  From<int32_t> nodes{1, ""}, gpus_per_node{8, ""};    // the whole job: trainer and generation

  // Trainer (Megatron-Core).
  From<int32_t> tp{1, ""}, pp{1, ""}, vpp{1, ""}, ep{1, ""}, cp{1, ""};
  From<int32_t> etp{0, ""};                            // 0 = Megatron's default: tp
  From<int32_t> first_stage_layers{0, ""}, last_stage_layers{0, ""};  // 0 = even split
  From<int32_t> layers_per_virtual_stage{0, ""};       // Megatron's alternative to vpp

  // Generation (vLLM): one engine spans engine_tp x engine_pp x engine_dp GPUs.
  From<int32_t> gen_tp{1, ""}, gen_pp{1, ""}, gen_dp{1, ""};
  From<int32_t> gen_ep{1, ""};                         // vLLM expert parallel size (1 = off)
  From<bool> gen_enable_ep{false, ""};                 // vLLM --enable-expert-parallel

  // Placement: trainer GPUs first, then generation GPUs when not colocated.
  From<bool> colocated{true, ""};
  From<int32_t> train_gpus{0, ""};                     // 0 = all GPUs
  From<int32_t> gen_gpus{0, ""};                       // 0 = all GPUs (colocated)

  // Optimizer state at refit start.
  From<double> optimizer_bytes_per_param{12, ""};
  From<bool> distributed_optimizer{true, ""};
  From<double> optimizer_host_fraction{0, ""};         // share kept in host memory by the trainer itself
  std::string offload = "auto";                        // none | all | auto
  std::string offload_origin;

  // KV cache: resident through the refit, sized from vLLM's memory fraction or given in bytes.
  bool kv_resident = false;
  std::string kv_origin;                               // why resident or not
  From<double> gpu_memory_utilization{0.9, ""};
  From<int64_t> kv_cache_bytes{-1, ""};                // >= 0: given directly

  std::vector<std::string> assumptions;
};

// Resolves the model, checks the layouts against the GPU counts, writes the
// scenario and loads it with the scenario reader (throws InputError naming
// the framework field when something does not fit together).
ImportResult FinishImport(ImportedJob job, const ImportOptions& o);

// Reshard's dtype name for a framework's spelling ("bfloat16", "bf16",
// "float16", "fp8", ...); throws InputError(file, field) for others.
std::string ImportDtype(const std::string& text, const std::string& file, const std::string& field);

}  // namespace reshard
