// Input checks the verbs share (issue 8, "bad input"): telling a plan.json
// from a scenario, reading a plan and checking it against the scenario it is
// meant for before any work, size and number flags, and output paths checked
// up front so that bad input writes no file. Every problem throws
// InputError(file, field, problem) and becomes exit code 2.
#pragma once

#include <cstdint>
#include <string>

#include "plan/plan.h"

namespace CLI {
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
// (a scenario path or built-in name, "" for none) PlanScenarioProblems (the
// plan was made for that cluster, model and layouts; nothing was edited);
// then Verify (against the scenario's cluster when given).
Plan LoadPlanFile(const std::string& path, const std::string& scenario);

// Stamps the plan of scenario `s` with ScenarioFingerprint(s) (the planner
// does not yet record it itself).
void RecordScenario(Plan& plan, const Scenario& s);

// --segment-bytes for one plan: "" or "auto" -> 0 (the scenario decides);
// otherwise a size > 0 ("64MiB").
int64_t SegmentBytesFlag(const std::string& text);

// An output path given by `flag`, checked before any work: not a directory,
// its directory exists. "" (not given) passes.
void CheckOutputPath(const std::string& path, const std::string& flag);

// CLI11 check: a finite number > 0 (timeouts in seconds).
CLI::Validator PositiveFiniteNumber();

}  // namespace reshard::cli
