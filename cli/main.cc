// reshard: plan, predict and run the weight refit of RL jobs.
//
// Verbs register themselves (cli/commands.h). This file maps failures to exit
// codes once, for every verb: 0 ok; 2 bad input (InputError or bad flags);
// 3 infeasible (a verb calls ExitWith); 1 internal error (file:line).
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "model/error.h"

namespace {

// After a parse error: "; did you mean '--segment-bytes'?" for each argument
// the verb (or the app, for a misspelt verb) did not expect.
std::string Suggestions(CLI::App& app) {
  CLI::App* cmd = &app;
  for (CLI::App* sub : app.get_subcommands()) cmd = sub;  // the verb that was given, if any
  std::vector<std::string> flags, verbs;
  for (const CLI::Option* opt : cmd->get_options()) {
    for (const std::string& name : opt->get_lnames()) flags.push_back("--" + name);
    for (const std::string& name : opt->get_snames()) flags.push_back("-" + name);
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) verbs.push_back(sub->get_name());
  std::string out;
  for (const std::string& arg : cmd->remaining()) {
    const bool flag = arg.size() > 1 && arg[0] == '-';
    const std::string word = flag ? arg.substr(0, arg.find('=')) : arg;
    const std::string hint = reshard::Suggest(word, flag ? flags : cmd == &app ? verbs : std::vector<std::string>{});
    if (!hint.empty()) out += "; '" + word + "': did you mean '" + hint + "'?";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reshard: plan, predict and run the weight refit of RL jobs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "reshard " RESHARD_VERSION);

  reshard::cli::RegisterCalibrateCommand(app);
  reshard::cli::RegisterImportCommand(app);
  reshard::cli::RegisterInspectCommand(app);
  reshard::cli::RegisterPlanCommand(app);
  reshard::cli::RegisterRunCommand(app);
  reshard::cli::RegisterSimulateCommand(app);
  reshard::cli::RegisterSweepCommand(app);
  reshard::cli::RegisterValidateCommand(app);

  try {
    app.parse(argc, argv);
    return reshard::cli::kExitOk;
  } catch (const CLI::RuntimeError& e) {  // a verb's chosen exit code (ExitWith)
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "error: " << e.what() << Suggestions(app) << "\n(run with --help for usage)\n";
    return reshard::cli::kExitInput;
  } catch (const reshard::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return reshard::cli::kExitInput;
  } catch (const reshard::InternalError& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return reshard::cli::kExitInternal;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return reshard::cli::kExitInternal;
  }
}
