// reshard: plan, predict and run the weight refit of RL jobs.
//
// Verbs register themselves (cli/commands.h). This file maps failures to exit
// codes once, for every verb: 0 ok; 2 bad input (InputError or bad flags);
// 3 infeasible (a verb calls ExitWith); 1 internal error (file:line).
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <limits>

#include <malloc.h>
#include <unistd.h>

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

// The verbs that build plans of millions of ops (gigabytes of heap, read in
// scattered order by the simulator).
bool PlanningVerb(int argc, char** argv) {
  if (argc < 2) return false;
  const char* verb = argv[1];
  return std::strcmp(verb, "plan") == 0 || std::strcmp(verb, "simulate") == 0 || std::strcmp(verb, "sweep") == 0;
}

// On transparent huge pages the simulator's scattered reads of gigabytes of
// per-op and per-flow arrays miss the TLB less: a third less user time for
// long simulations (bench/results/2026-12-02-cpu-sim-sweep-speed). glibc puts
// its heap on them only when its hugetlb tunable is set at start, so the
// planning verbs start once more with it set, unless GLIBC_TUNABLES is
// already given (the user's choice wins, and the second start does not
// loop). `plan` too since the freed heap is kept (KeepFreedMemory): on the
// development VM, where a 4 KiB page fault is costly, deepseek-v3's `reshard
// plan` 7.0-8.5 -> 5.6-6.9 s wall, llama3-8b on 8192 GPUs 106-122 -> 63-64
// (bench/results/2026-12-05-cpu-plan-huge-pages); before the heap was kept
// it lost (bench/results/2026-12-02-cpu-plan-speed). On the GPU host it
// changes nothing (bench/results/2026-12-04-devicecpu-auto-vs-sweep).
// Results do not change.
void StartOnHugePages(int argc, char** argv) {
  if (!PlanningVerb(argc, argv) || std::getenv("GLIBC_TUNABLES") != nullptr) return;
  if (setenv("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1", 1) != 0) return;
  execv("/proc/self/exe", argv);  // returns only on failure: go on as we are
  unsetenv("GLIBC_TUNABLES");
}

// A planning verb builds and drops candidate plans of hundreds of MB one
// after another: freed memory stays in the heap for the next one instead of
// going back to the kernel (glibc maps blocks over 32 MiB apart and trims
// the heap top), which would zero every page again when it is faulted back
// in: deepseek-v3 on 512 GPUs spent a third of `reshard plan`'s CPU time
// zeroing pages (bench/results/2026-12-02-cpu-plan-speed). The peak is the
// same memory; results do not change.
void KeepFreedMemory(int argc, char** argv) {
  if (!PlanningVerb(argc, argv)) return;
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
}

}  // namespace

int main(int argc, char** argv) {
  StartOnHugePages(argc, argv);
  KeepFreedMemory(argc, argv);
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
