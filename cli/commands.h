// The verbs of the `reshard` command. Each lives in cli/<verb>_cmd.cc and adds
// its subcommand to the app; cli/main.cc calls every Register function. A verb
// signals an exit code other than 0 with ExitWith (cli/common.h); input errors
// are thrown as reshard::InputError and become exit code 2 in main.
#pragma once

namespace CLI {
class App;
}

namespace reshard::cli {

void RegisterCalibrateCommand(CLI::App& app);
void RegisterImportCommand(CLI::App& app);
void RegisterInspectCommand(CLI::App& app);
void RegisterPlanCommand(CLI::App& app);
void RegisterRunCommand(CLI::App& app);
void RegisterSimulateCommand(CLI::App& app);
void RegisterSweepCommand(CLI::App& app);
void RegisterValidateCommand(CLI::App& app);

}  // namespace reshard::cli
