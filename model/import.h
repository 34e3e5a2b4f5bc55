// Scenarios from the RL frameworks' own configurations: a NeMo-RL recipe, a
// verl trainer config or Megatron-LM / vLLM / torchrun command-line flags
// become a reshard scenario (`reshard import`, docs/import.md).
//
// Each reader maps the framework's keys to a job description (layouts, GPU
// placement, optimizer, KV cache); one common step resolves the model (a
// config.json, else the preset its Hugging Face name denotes), writes the
// scenario's YAML with every value's origin in a comment, and loads that text
// with the scenario reader, so an import either yields a scenario every verb
// accepts or throws InputError. What the input does not say (GPU type, memory
// reserve, whether the KV cache is resident during the refit, ...) is chosen
// and listed in `assumptions`, in the result and at the top of the YAML.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace reshard {

struct ImportOptions {
  std::string hf_config;       // a Hugging Face config.json for the model (wins over the framework's model name)
  std::string model_preset;    // a model preset (wins over the framework's model name)
  std::string cluster_preset;  // "" = dgx-h100, listed as an assumption
  std::string name;            // scenario name; "" = from the input file
  std::string output_path;     // where the scenario will be written: paths in it are relative to its directory
  double reserve_gib = -1;     // memory.reserve_gib; < 0 = the default (2), listed as an assumption
  std::vector<std::string> overrides;  // "a.b.c=value" (Hydra style, '+' prefixes allowed), nemo-rl and verl
  int32_t generation_gpus = 0; // megatron: > 0 puts vLLM on this many GPUs after the trainer's (disaggregated)
};

struct ImportResult {
  std::string name;
  std::string yaml;                      // the scenario text, comments included
  std::vector<std::string> assumptions;  // what the input did not say and the import chose
  std::vector<std::string> ignored;      // megatron: flags that do not bear on the refit
};

// A NeMo-RL recipe (examples/configs/*.yaml): `defaults:` files are merged
// first (relative to the recipe), then the recipe, then `overrides`.
ImportResult ImportNemoRl(const std::string& recipe_path, const ImportOptions& o);
// A verl trainer config (ppo_megatron_trainer.yaml or its flattened
// _generated_ form) with Hydra overrides; keys it leaves out take verl's
// defaults, each listed as an assumption.
// `config_path` may also be a launch script (*.sh, verl's examples/*/run_*.sh):
// its main_ppo command's KEY=VALUE words are the overrides (before `o`'s),
// over verl's defaults (ReadLaunchScript).
ImportResult ImportVerl(const std::string& config_path, const ImportOptions& o);

// A framework's example launch script read without a shell: the KEY=VALUE
// words of its `entry` command ("verl.trainer.main_ppo"), shell variables
// from simple assignments substituted; words that need the shell to evaluate
// are in `skipped`. Throws InputError when the file has no such command.
struct LaunchScript {
  std::vector<std::string> overrides;
  std::vector<std::string> skipped;
  std::string config_name;  // --config-name, when given
};
LaunchScript ReadLaunchScript(const std::string& path, const std::string& entry);
// Megatron-LM training flags, vLLM serving flags and torchrun's --nnodes /
// --nproc-per-node, in any order ("--flag value" or "--flag=value").
ImportResult ImportMegatron(const std::vector<std::string>& args, const ImportOptions& o);

// The model preset a Hugging Face model name denotes (organisation optional,
// case ignored): "meta-llama/Llama-3.1-8B-Instruct" -> "llama3-8b",
// "Qwen/Qwen3-30B-A3B" -> "qwen3-30b-a3b"; "" when no preset has that
// architecture.
std::string PresetForHfName(const std::string& hf_name);

}  // namespace reshard
