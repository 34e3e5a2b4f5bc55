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

int main(int argc, char** argv) {
  CLI::App app{"reshard: plan, predict and run the weight refit of RL jobs"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "reshard 0.1.0");

  reshard::cli::RegisterCalibrateCommand(app);
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
    std::cerr << "error: " << e.what() << "\n(run with --help for usage)\n";
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
