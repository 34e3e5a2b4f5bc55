// What the verbs read and how they refuse bad input before doing any work:
// the plan a verb works on (a plan.json, told from a scenario by its keys, or
// the plan of a scenario), a plan checked against the scenario it is meant
// for, size and number flags, and output paths checked up front so that bad
// input writes no file. Every problem throws InputError(file, field, problem)
// and becomes exit code 2.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "plan/plan.h"

namespace CLI {
class App;
class Validator;
}

namespace reshard::cli {

// True when `path` is a regular file whose text starts (after whitespace)
// with '{' and has, in its first 64 KiB, a key only plans have
// ("format_version", "ops", "buffers", ...): a plan, read by ReadPlan (so a
// truncated or malformed plan gets the plan reader's message). Anything else
// is a scenario argument.
bool LooksLikePlanFile(const std::string& path);

// Reads a plan.json and checks it before any work: ReadPlan; with `scenario`
// (a scenario path or built-in name, "" for none; `calibration` applied to it
// as --calibration does) PlanScenarioProblems (the plan was made for that
// cluster, model and layouts; nothing was edited); then Verify (against the
// scenario's cluster when given).
Plan LoadPlanFile(const std::string& path, const std::string& scenario, const std::string& calibration = "");
// The checks of LoadPlanFile on a plan read from `path`, against scenario `s`
// when not null.
Plan CheckPlanFile(Plan p, const std::string& path, const Scenario* s);

// The plan simulate, run and validate work on, and the flags that choose it.
struct TargetArgs {
  std::string target;         // plan.json, scenario file or built-in name
  std::string scenario;       // --scenario: with a plan.json, the scenario it must have been made for
  std::string calibration;    // --calibration: profile for the scenario (the target's, or --scenario's)
  std::string segment_bytes;  // --segment-bytes: for a scenario
  std::string baseline;       // --baseline NAME: for a scenario, a peer's plan (planner/baseline_plan.h)
};
void AddTargetOptions(CLI::App* cmd, TargetArgs& t);

// A plan.json is read and checked (LoadPlanFile); anything else is a scenario,
// planned. A plan carries the cluster it was planned for, so --calibration
// with a plan.json applies only to --scenario (the cluster the plan must
// match); without --scenario it is refused (exit 2), as is --baseline. A
// scenario that does not fit exits 3 (ExitInfeasible; its JSON when
// `infeasible_json`). `predict_baseline` false: a baseline plan is not
// simulated while planned (for a caller that simulates it itself; its
// summary's predicted time is then 0).
Plan PlanOfTarget(const TargetArgs& t, bool infeasible_json, bool predict_baseline = true);

// Stamps the plan of scenario `s` with ScenarioFingerprint(s) (the planner
// does not yet record it itself).
void RecordScenario(Plan& plan, const Scenario& s);

// A size flag ("64MiB", "1.5GB", 1048576) as ParseBytes reads it; a bare
// K/M/G/T/P ("64M") is refused with both spellings it could mean.
int64_t SizeFlag(const std::string& text, const std::string& flag);

// --segment-bytes for one plan of `s`: "" or "auto" -> 0 (the scenario
// decides); otherwise a size > 0 ("64MiB") that passes CheckSegmentBytes.
int64_t SegmentBytesFlag(const std::string& text, const Scenario& s);

// An output path given by `flag`, checked before any work (CheckOutputFile):
// a regular file or none yet, its directory exists, not one of `inputs` (the
// command's input files). "" (not given) passes.
// The path is remembered for CheckOutputsAgainst.
void CheckOutputPath(const std::string& path, const std::string& flag, const std::vector<std::string>& inputs = {});
// Checks every output CheckOutputPath saw again, against input files known
// only once a scenario was read (its hf_config and calibration profile).
void CheckOutputsAgainst(const std::vector<std::string>& inputs);

// CLI11 check: a finite number in [kMinTimeoutS, kMaxTimeoutS] (timeouts in
// seconds; larger ones would overflow the clocks' nanoseconds, shorter ones
// fail every run before a message can arrive).
inline constexpr double kMinTimeoutS = 1e-3;
inline constexpr double kMaxTimeoutS = 30 * 86400.0;
CLI::Validator PositiveFiniteNumber();

}  // namespace reshard::cli
