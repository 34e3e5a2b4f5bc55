#include "cli/common.h"
#include "cli/inputs.h"
#include "cli/json_reports.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "planner/baseline_plan.h"
#include "sim/simulator.h"

namespace reshard::cli {

void ExitWith(int code) { throw CLI::RuntimeError(code); }

namespace {

Scenario ReadScenarioArg(const std::string& arg) {
  constexpr std::string_view kPrefix = "builtin:";
  if (arg.rfind(kPrefix, 0) == 0) return BuiltinScenario(arg.substr(kPrefix.size()));
  std::error_code ec;
  if (std::filesystem::exists(arg, ec)) return LoadScenario(arg);
  const std::vector<std::string> names = BuiltinScenarioNames();
  for (const auto& n : names)
    if (n == arg) return BuiltinScenario(arg);
  std::string problem = "no such scenario file or built-in scenario";
  std::string s = Suggest(arg, names);
  if (!s.empty()) problem += fmt::format(" (did you mean '{}'?)", s);
  problem += fmt::format("; built-ins: {}", fmt::join(names, ", "));
  throw InputError(arg, "", problem);
}

}  // namespace

Scenario LoadScenarioArg(const std::string& arg, const std::string& calibration) {
  Scenario s = ReadScenarioArg(arg);
  CheckOutputsAgainst(s.input_files);  // -o over the scenario's hf_config or profile would destroy it
  if (!calibration.empty()) ApplyCalibrationFlag(s.cluster, calibration);
  const std::string warning = PartialDomainWarning(s.cluster);
  if (!warning.empty()) std::cerr << "warning: " << warning << "\n";
  return s;
}

void ApplyCalibrationFlag(Cluster& cluster, const std::string& calibration) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(calibration, ec))
    throw InputError(calibration, "", "no such calibration profile (--calibration FILE)");
  ApplyProfileFile(cluster, calibration);  // throws InputError(calibration, field, problem)
}

void AddCalibrationOption(CLI::App* cmd, std::string& calibration, const std::string& extra_help) {
  cmd->add_option("--calibration", calibration,
                  "calibration profile (JSON, from `reshard calibrate`) used instead of the scenario's "
                  "cluster.calibration: its links and memory overheads replace the scenario's" +
                      extra_help);
}

void AddScenarioOptions(CLI::App* cmd, ScenarioArgs& a) {
  cmd->add_option("scenario", a.scenario, "scenario file or built-in name")->required();
  AddCalibrationOption(cmd, a.calibration);
}

void AddBaselineOption(CLI::App* cmd, std::string& baseline) {
  cmd->add_option("--baseline", baseline,
                  "plan as a peer does instead: megatron (Megatron-Core / NeMo-RL: round-robin sources, every "
                  "piece its own send/recv in one NCCL group, no memory bound)")
      ->check(CLI::IsMember(BaselineNames()));
}

PlanResult PlanScenario(const Scenario& s, const PlannerOptions& po, const std::string& baseline) {
  if (baseline.empty()) return MakePlan(s, po);
  if (po.segment_bytes > 0)
    throw InputError("<cli>", "--segment-bytes", fmt::format("the {} baseline has no segments", baseline));
  BaselineOptions bo;
  bo.simulate = po.simulate;
  PlanResult r = MakeBaselinePlan(s, baseline, bo);
  if (!r.message.empty()) std::cerr << "warning: " << baseline << " baseline: " << r.message << "\n";
  return r;
}

void ExitInfeasible(const Scenario& s, const PlanResult& r, bool json) {
  if (json) {
    PrintJson(InfeasibleJson(s, r));
  } else {
    std::cerr << "infeasible: " << r.message << "\n";
  }
  ExitWith(kExitInfeasible);
}

nlohmann::json InfeasibleJson(const Scenario& s, const PlanResult& r) {
  return {{"scenario", s.name}, {"fits", false}, {"gpu", r.gpu}, {"missing_bytes", r.missing_bytes},
          {"message", r.message}};
}

int64_t UsableBytes(const Cluster& c, int64_t reserve_bytes) { return c.gpu_memory_bytes - reserve_bytes; }

std::string PeakAboveUsable(const std::vector<int64_t>& peak_bytes, const Cluster& c, int64_t reserve_bytes) {
  const int64_t usable = UsableBytes(c, reserve_bytes);
  int32_t worst = -1;
  for (size_t g = 0; g < peak_bytes.size(); ++g) {
    if (peak_bytes[g] > usable && (worst < 0 || peak_bytes[g] > peak_bytes[static_cast<size_t>(worst)]))
      worst = static_cast<int32_t>(g);
  }
  if (worst < 0) return "";
  const int64_t peak = peak_bytes[static_cast<size_t>(worst)];
  std::string message = fmt::format("GPU {} peaks at {}, {} above the {} it may use", worst, FormatBytes(peak),
                                    FormatBytes(peak - usable), FormatBytes(usable));
  if (reserve_bytes > 0)
    message += fmt::format(" (capacity {} less reserve {})", FormatBytes(c.gpu_memory_bytes), FormatBytes(reserve_bytes));
  return message + ": this plan would run out of memory";
}

int64_t ReserveOfTarget(const std::string& target, const std::string& scenario) {
  // The scenario was loaded (and warned about) once already: read quietly.
  // A calibration profile changes links and overheads, never the reserve.
  if (!LooksLikePlanFile(target)) return ReadScenarioArg(target).memory.reserve_bytes;
  return scenario.empty() ? 0 : ReadScenarioArg(scenario).memory.reserve_bytes;
}

void ExitPeakAboveUsable(const std::string& message) {
  std::cerr << "infeasible: " << message << "\n";
  ExitWith(kExitInfeasible);
}

void PrintJson(const nlohmann::json& j) { std::cout << j.dump(2) << "\n"; }

void PrintPeakParts(const std::vector<MemoryParts>& parts, const std::vector<int64_t>& peak_bytes, const Cluster& c,
                    int64_t reserve_bytes) {
  if (parts.empty() || parts.size() != peak_bytes.size()) return;
  const size_t g = static_cast<size_t>(std::max_element(peak_bytes.begin(), peak_bytes.end()) - peak_bytes.begin());
  const MemoryParts& m = parts[g];
  const int64_t usable = UsableBytes(c, reserve_bytes);
  std::cout << fmt::format("peak of GPU {} by part (the highest peak):\n", g);
  const std::pair<const char*, int64_t> rows[] = {
      {"training weights", m.source_weights_bytes}, {"generation weights", m.destination_weights_bytes},
      {"optimizer state", m.optimizer_bytes},       {"gradients", m.gradients_bytes},
      {"KV cache", m.kv_cache_bytes},               {"staging buffers", m.staging_bytes},
      {"NCCL buffers", m.nccl_bytes},               {"CUDA context", m.context_bytes}};
  for (const auto& [name, bytes] : rows) std::cout << fmt::format("  {:<20} {:>12}\n", name, FormatBytes(bytes));
  std::cout << fmt::format("  {:<20} {:>12}  of {} usable ({:.1f} %)\n", "= peak", FormatBytes(m.Total()),
                           FormatBytes(usable), 100.0 * static_cast<double>(m.Total()) / static_cast<double>(usable));
  std::cout << fmt::format("  {:<20} {:>12}  never planned into\n", "+ reserve", FormatBytes(reserve_bytes));
  std::cout << fmt::format("  {:<20} {:>12}  of capacity {}\n", "= held", FormatBytes(m.Total() + reserve_bytes),
                           FormatBytes(c.gpu_memory_bytes));
}

void AddPeakMemoryJson(nlohmann::json& j, const std::vector<MemoryParts>& parts, const Cluster& c,
                       int64_t reserve_bytes) {
  j["peak_parts"] = parts;
  j["capacity_bytes"] = c.gpu_memory_bytes;
  j["reserve_bytes"] = reserve_bytes;
  j["usable_bytes"] = UsableBytes(c, reserve_bytes);
}

std::string CopySplit(int64_t copy_bytes, int64_t local_bytes) {
  if (local_bytes <= 0 || copy_bytes < local_bytes) return "";
  return fmt::format(" ({} local + {} into/out of staging)", FormatBytes(local_bytes),
                     FormatBytes(copy_bytes - local_bytes));
}

nlohmann::json PlanSummaryJson(const PlanSummary& s) {
  nlohmann::json j;
  j["time_s"] = s.predicted_time_s;
  j["peak_bytes"] = s.predicted_peak_bytes;
  j["bytes_moved"] = s.bytes_moved;
  j["lower_bound_s"] = s.lower_bound_s;
  j["plan_efficiency"] = PlanEfficiency(s.lower_bound_s, s.predicted_time_s);
  j["routing_bound_s"] = s.routing_bound_s;
  j["segment_bytes"] = s.segment_bytes;
  j["offload_fraction"] = s.offload_fraction;
  return j;
}

nlohmann::json MemoryAtStartJson(const std::vector<GpuMemoryAtStart>& mem, int64_t capacity_bytes) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& m : mem) {
    out.push_back({{"gpu", m.gpu},
                   {"training_weights_bytes", m.training_weights},
                   {"gradients_bytes", m.gradients},
                   {"optimizer_bytes", m.optimizer},
                   {"kv_cache_bytes", m.kv_cache},
                   {"reserve_bytes", m.reserve},
                   {"context_bytes", m.overheads},
                   {"total_bytes", m.Total()},
                   {"capacity_bytes", capacity_bytes},
                   {"free_bytes", capacity_bytes - m.Total()}});
  }
  return out;
}

std::string FormatCount(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string FormatGpuSet(const std::vector<int32_t>& gpus) {
  std::string out;
  for (size_t i = 0; i < gpus.size();) {
    size_t j = i;
    while (j + 1 < gpus.size() && gpus[j + 1] == gpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", gpus[i]) : fmt::format("{}-{}", gpus[i], gpus[j]);
    i = j + 1;
  }
  return out;
}

}  // namespace reshard::cli
