#include "cli/inputs.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "cli/common.h"
#include "model/error.h"
#include "model/output_file.h"
#include "model/scenario.h"
#include "planner/planner.h"

namespace reshard::cli {

namespace {

constexpr size_t kSniffBytes = 64 << 10;
constexpr size_t kProblemsShown = 5;

std::string Joined(const std::vector<std::string>& problems) {
  const size_t n = std::min(problems.size(), kProblemsShown);
  std::string s = fmt::format("{}", fmt::join(problems.begin(), problems.begin() + static_cast<std::ptrdiff_t>(n), "; "));
  if (problems.size() > n) s += fmt::format("; ... and {} more", problems.size() - n);
  return s;
}

}  // namespace

bool LooksLikePlanFile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  std::string head(kSniffBytes, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first == std::string::npos || head[first] != '{') return false;
  // A key only a plan has (a scenario's are name, model, dtype, cluster,
  // source, destination, memory, plan). Any of them, since a plan written by
  // another tool may sort its keys and start with a long "buffers" array.
  for (const char* key : {"\"format_version\"", "\"ops\"", "\"buffers\"", "\"tensors\"", "\"sources\"",
                          "\"destinations\"", "\"cluster_fingerprint\"", "\"stream_names\""}) {
    for (size_t at = head.find(key); at != std::string::npos; at = head.find(key, at + 1)) {
      const size_t next = head.find_first_not_of(" \t\r\n", at + std::strlen(key));
      if (next != std::string::npos && head[next] == ':') return true;
    }
  }
  return false;
}

Plan LoadPlanFile(const std::string& path, const std::string& scenario, const std::string& calibration) {
  Plan p = ReadPlan(path);
  std::optional<Scenario> s;
  if (!scenario.empty()) s = LoadScenarioArg(scenario, calibration);
  return CheckPlanFile(std::move(p), path, s ? &*s : nullptr);
}

Plan CheckPlanFile(Plan p, const std::string& path, const Scenario* s) {
  if (s != nullptr) {
    const std::vector<std::string> problems = PlanScenarioProblems(p, *s);
    if (!problems.empty()) {
      // The field names what differs first: the cluster, the tensors, or the rest.
      const std::string& first = problems.front();
      const char* field = first.rfind("made for cluster", 0) == 0                                  ? "cluster_fingerprint"
                          : first.rfind("tensors", 0) == 0 || first.rfind("the plan has", 0) == 0 ? "tensors"
                          : first.rfind("destinations", 0) == 0                                   ? "destinations"
                                                                                                  : "scenario_fingerprint";
      throw InputError(path, field,
                       fmt::format("not a plan for scenario '{}' ({}), refused before any work: {}", s->name, s->path,
                                   Joined(problems)));
    }
  }
  const VerifyResult v = Verify(p, s != nullptr ? &s->cluster : nullptr);
  if (!v.ok())
    throw InputError(path, "", fmt::format("the plan fails Verify ({} problem{}): {}", v.problems.size(),
                                           v.problems.size() == 1 ? "" : "s", Joined(v.problems)));
  return p;
}

void AddTargetOptions(CLI::App* cmd, TargetArgs& t) {
  cmd->add_option("target", t.target, "plan.json, or a scenario file or built-in name (planned first)")->required();
  cmd->add_option("--segment-bytes", t.segment_bytes, "for a scenario: segment size (e.g. 64MiB) or auto");
  AddBaselineOption(cmd, t.baseline);
  cmd->add_option("--scenario", t.scenario,
                  "with a plan.json: the scenario (cluster, model, layouts) it must have been made for; a plan made "
                  "for another one, or edited since, is refused before any work");
  AddCalibrationOption(cmd, t.calibration,
                       "; with a plan.json, applies to --scenario (a plan carries the cluster it was planned for)");
}

Plan PlanOfTarget(const TargetArgs& t, bool infeasible_json, bool predict_baseline) {
  if (LooksLikePlanFile(t.target)) {
    if (!t.baseline.empty()) throw InputError("<cli>", "--baseline", "applies to a scenario, not to a plan.json");
    if (!t.segment_bytes.empty())
      throw InputError("<cli>", "--segment-bytes",
                       "applies to a scenario; a plan.json's segments were cut when it was planned (plan the "
                       "scenario again with --segment-bytes)");
    if (!t.calibration.empty() && t.scenario.empty())
      throw InputError("<cli>", "--calibration",
                       fmt::format("'{}' is a plan.json, which carries the cluster it was planned for; plan the "
                                   "scenario with --calibration instead, or add --scenario S to check that the plan "
                                   "was made for S with this profile",
                                   t.target));
    return LoadPlanFile(t.target, t.scenario, t.calibration);
  }
  if (!t.scenario.empty())
    throw InputError("<cli>", "--scenario", fmt::format("applies to a plan.json; '{}' is a scenario", t.target));
  const Scenario s = LoadScenarioArg(t.target, t.calibration);
  PlannerOptions po;
  po.segment_bytes = SegmentBytesFlag(t.segment_bytes, s);
  if (!t.baseline.empty()) po.simulate = predict_baseline;
  PlanResult r = PlanScenario(s, po, t.baseline);
  if (!r.ok()) ExitInfeasible(s, r, infeasible_json);
  RecordScenario(r.plan, s);
  return std::move(r.plan);  // not copied: at scale a plan holds millions of ops
}

void RecordScenario(Plan& plan, const Scenario& s) { plan.scenario_fingerprint = ScenarioFingerprint(s); }

int64_t SizeFlag(const std::string& text, const std::string& flag) {
  // "64M", "1G": a bare letter could mean powers of 1000 or 1024; say both spellings.
  static const std::string kLetters = "KkMmGgTtPp";
  const size_t end = text.find_last_not_of(" \t");
  if (end != std::string::npos && end > 0 && kLetters.find(text[end]) != std::string::npos &&
      (std::isdigit(static_cast<unsigned char>(text[end - 1])) || text[end - 1] == ' ' || text[end - 1] == '.')) {
    const std::string number = text.substr(0, end), unit(1, static_cast<char>(std::toupper(text[end])));
    throw InputError("<cli>", flag,
                     fmt::format("'{}' is ambiguous: write {}{}iB (powers of 1024) or {}{}B (powers of 1000)", text,
                                 number, unit, number, unit));
  }
  return ParseBytes(text, "<cli>", flag);
}

int64_t SegmentBytesFlag(const std::string& text, const Scenario& s) {
  if (text.empty() || text == "auto") return 0;
  const int64_t bytes = SizeFlag(text, "--segment-bytes");
  if (bytes <= 0) throw InputError("<cli>", "--segment-bytes", fmt::format("must be > 0 (or 'auto'), got '{}'", text));
  CheckSegmentBytes(s, bytes, "<cli>", "--segment-bytes");
  return bytes;
}

namespace {

// (flag, path) of the outputs checked so far: one verb runs per process.
std::vector<std::pair<std::string, std::string>>& CheckedOutputs() {
  static std::vector<std::pair<std::string, std::string>> outputs;
  return outputs;
}

}  // namespace

void CheckOutputPath(const std::string& path, const std::string& flag, const std::vector<std::string>& inputs) {
  CheckOutputFile(path, "<cli>", flag, inputs);
  if (!path.empty()) CheckedOutputs().emplace_back(flag, path);
}

void CheckOutputsAgainst(const std::vector<std::string>& inputs) {
  for (const auto& [flag, path] : CheckedOutputs()) CheckOutputFile(path, "<cli>", flag, inputs);
}

CLI::Validator PositiveFiniteNumber() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v <= 0)
          return fmt::format("must be a finite number > 0, got '{}'", text);
        if (v < kMinTimeoutS)
          return fmt::format("{} s is less than {:g} s, the shortest wait reshard takes", text, kMinTimeoutS);
        if (v > kMaxTimeoutS)
          return fmt::format("{} s is more than {:g} s (30 days), the longest wait reshard takes", text, kMaxTimeoutS);
        return {};
      },
      "SECONDS>0");
}

}  // namespace reshard::cli
