// `reshard import nemo-rl RECIPE.yaml [KEY=VALUE...]`, `reshard import verl
// CONFIG.yaml [KEY=VALUE...]` and `reshard import megatron FLAGS...`: write a
// scenario from the framework's own configuration (model/import.h), with the
// origin of every value in a comment and the assumptions listed. Without -o
// the scenario goes to stdout.
#include <memory>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/inputs.h"
#include "model/error.h"
#include "model/import.h"
#include "model/output_file.h"

namespace reshard::cli {

namespace {

struct ImportCmdOptions {
  std::string input;                    // nemo-rl, verl: the config file
  std::vector<std::string> overrides;   // nemo-rl, verl: KEY=VALUE
  std::string output;
  bool json = false;
  ImportOptions import;
};

void Report(const ImportCmdOptions& o, const ImportResult& r) {
  if (!o.output.empty()) {
    WriteFileAtomically(o.output, r.yaml);  // a temporary file renamed over -o once whole
  }
  if (o.json) {
    nlohmann::json j;
    j["name"] = r.name;
    j["scenario_path"] = o.output.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.output);
    j["assumptions"] = r.assumptions;
    j["ignored"] = r.ignored;
    if (o.output.empty()) j["scenario_yaml"] = r.yaml;
    PrintJson(j);
    return;
  }
  if (o.output.empty()) {
    std::cout << r.yaml;
  } else {
    std::cout << fmt::format("wrote {} (scenario '{}')\n", o.output, r.name);
    if (!r.assumptions.empty()) {
      std::cout << "assumptions (the input does not say; check them, they are also at the top of the file):\n";
      for (const std::string& a : r.assumptions) std::cout << "  - " << a << "\n";
    }
  }
  if (!r.ignored.empty()) {
    std::string list;
    for (const std::string& f : r.ignored) list += (list.empty() ? "" : " ") + f;
    std::cerr << "ignored (no bearing on the refit): " << list << "\n";
  }
  if (!o.output.empty()) std::cout << fmt::format("next: reshard inspect {0}; reshard plan {0}\n", o.output);
}

void AddCommon(CLI::App* cmd, ImportCmdOptions& o, bool model_flag) {
  cmd->add_option("-o,--output", o.output, "write the scenario here (default: print it)");
  cmd->add_option("--hf-config", o.import.hf_config, "the model's Hugging Face config.json (instead of its name)")
      ->check(CLI::ExistingFile);
  if (model_flag) cmd->add_option("--model", o.import.model_preset, "a model preset (instead of the config's model)");
  cmd->add_option("--cluster", o.import.cluster_preset,
                  "cluster preset: h200-x2, dgx-h100 (default), dgx-h200, gb200-nvl72");
  cmd->add_option("--name", o.import.name, "scenario name (default: the input file's name)");
  cmd->add_option("--reserve-gib", o.import.reserve_gib, "memory.reserve_gib (default 2)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--json", o.json, "machine-readable output (every field: docs/json.md)");
}

}  // namespace

void RegisterImportCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "import", "write a scenario from a NeMo-RL recipe, a verl config or Megatron-LM / vLLM flags (docs/import.md)");
  cmd->require_subcommand(1);
  auto opts = std::make_shared<ImportCmdOptions>();

  // nemo-rl and verl: a config file and KEY=VALUE overrides.
  using Importer = ImportResult (*)(const std::string&, const ImportOptions&);
  auto config_verb = [&](const char* name, const char* help, const char* framework, Importer importer) {
    CLI::App* verb = cmd->add_subcommand(name, help);
    verb->add_option("config", opts->input, "the config YAML")->required();
    verb->add_option("overrides", opts->overrides, fmt::format("KEY=VALUE overrides, as on {}'s command line", framework));
    AddCommon(verb, *opts, true);
    verb->callback([opts, importer] {
      CheckOutputPath(opts->output, "-o", {opts->input, opts->import.hf_config});
      opts->import.output_path = opts->output;
      opts->import.overrides = opts->overrides;
      Report(*opts, importer(opts->input, opts->import));
    });
  };
  config_verb("nemo-rl", "a NeMo-RL recipe (examples/configs/*.yaml), with KEY=VALUE overrides", "NeMo-RL", ImportNemoRl);
  config_verb("verl", "a verl trainer config (ppo_megatron_trainer.yaml), with KEY=VALUE overrides", "verl", ImportVerl);

  CLI::App* megatron = cmd->add_subcommand(
      "megatron", "Megatron-LM training flags, vLLM serving flags (--model, --tensor-parallel-size, ...) and torchrun's "
                  "--nnodes / --nproc-per-node, mixed");
  megatron->allow_extras();
  AddCommon(megatron, *opts, false);
  megatron->add_option("--generation-gpus", opts->import.generation_gpus,
                       "vLLM on this many GPUs after the trainer's (default: colocated)")
      ->check(CLI::PositiveNumber);
  megatron->callback([opts, megatron] {
    CheckOutputPath(opts->output, "-o", {opts->import.hf_config});
    opts->import.output_path = opts->output;
    Report(*opts, ImportMegatron(megatron->remaining(), opts->import));
  });
}

}  // namespace reshard::cli
