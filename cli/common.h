// Helpers shared by the verbs of the `reshard` command: exit codes, loading a
// scenario argument (a path or a built-in name, optionally with another
// calibration profile), reporting a scenario that does not fit, JSON output,
// and small human-readable formatting.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/scenario.h"
#include "planner/planner.h"

namespace CLI {
class App;
}

namespace reshard::cli {

// Exit codes (DESIGN, "CLI").
inline constexpr int kExitOk = 0;
inline constexpr int kExitInternal = 1;   // broken invariant (InternalError)
inline constexpr int kExitInput = 2;      // bad input (InputError, bad flags)
inline constexpr int kExitInfeasible = 3; // does not fit in memory

// Ends the running verb; main returns `code`. (Throws CLI::RuntimeError, the
// CLI11 way for a callback to set the exit code.)
[[noreturn]] void ExitWith(int code);

// A scenario argument: "builtin:NAME"; else a path; else a bare built-in name
// when no such file exists. Unknown names throw InputError with a suggestion.
// With `calibration` (--calibration FILE) the scenario's cluster takes that
// profile instead of its cluster.calibration (ApplyCalibrationFlag).
Scenario LoadScenarioArg(const std::string& arg, const std::string& calibration = "");

// --calibration FILE: the profile is read like a scenario's cluster.calibration
// (ApplyProfileFile, model/cluster.h) and applied last, over the cluster as the
// scenario describes it: every link and memory overhead the profile gives
// replaces the scenario's (from its preset, its own cluster.calibration or an
// explicit field); the topology and what the profile leaves out stay. A file
// that is missing or bad throws InputError naming it.
void ApplyCalibrationFlag(Cluster& cluster, const std::string& calibration);
void AddCalibrationOption(CLI::App* cmd, std::string& calibration, const std::string& extra_help = "");

// A scenario positional argument and its --calibration (plan, inspect, sweep).
struct ScenarioArgs {
  std::string scenario;
  std::string calibration;
  Scenario Load() const { return LoadScenarioArg(scenario, calibration); }
};
void AddScenarioOptions(CLI::App* cmd, ScenarioArgs& a);

// `--baseline NAME` (plan, simulate, run, validate): plan the scenario the way
// a peer does (planner/baseline_plan.h: "megatron") instead of with reshard's planner.
void AddBaselineOption(CLI::App* cmd, std::string& baseline);
// The plan of a scenario: MakePlan(s, po), or with `baseline` set the named
// baseline plan (po.simulate carries over; a segment size is refused, the
// baseline has none). A baseline whose peak exceeds some GPU's memory is
// still returned, with a warning on stderr.
PlanResult PlanScenario(const Scenario& s, const PlannerOptions& po, const std::string& baseline);
// A plan that does not fit: with `json` the verb's JSON (scenario, fits false,
// gpu, missing_bytes, message) on stdout, else "infeasible: ..." on stderr;
// then exit 3.
[[noreturn]] void ExitInfeasible(const Scenario& s, const PlanResult& r, bool json);

// The memory a plan may peak at on one GPU: its capacity less the scenario's
// reserve (which the planner never plans into). A plan.json does not carry
// the reserve: 0 there.
int64_t UsableBytes(const Cluster& c, int64_t reserve_bytes);
// "" when every peak fits its GPU's usable memory, else "GPU g peaks at X,
// Y above the Z it may use (capacity C less reserve R)" for the GPU most over.
std::string PeakAboveUsable(const std::vector<int64_t>& peak_bytes, const Cluster& c, int64_t reserve_bytes);
// The reserve of a verb's target: the scenario's memory.reserve; for a
// plan.json, that of the scenario given with --scenario, else 0.
int64_t ReserveOfTarget(const std::string& target, const std::string& scenario);
// After a verb printed a peak above what a GPU may use: "infeasible: MESSAGE"
// on stderr, exit 3.
[[noreturn]] void ExitPeakAboveUsable(const std::string& message);

// "local" bytes, defined once for every verb's output: refit bytes whose
// source and destination are on the same GPU, copied there from the training
// buffer to the generation buffer (bytes_moved.local). Copies into and out of
// staging buffers are not local bytes: they are counted with the copy ops.
inline constexpr const char* kLocalBytesDefinition =
    "local = refit bytes whose source and destination share a GPU, copied there; copies into and out of staging "
    "are counted apart";

// The parts of the highest GPU's peak (weights, optimizer, gradients, KV
// cache, staging, NCCL, context), then the reserve, against capacity less
// reserve and capacity. Nothing when `parts` is empty (not simulated).
void PrintPeakParts(const std::vector<MemoryParts>& parts, const std::vector<int64_t>& peak_bytes, const Cluster& c,
                    int64_t reserve_bytes);
// The memory fields shared by plan and simulate: peak_parts (per GPU),
// capacity_bytes, reserve_bytes, usable_bytes (docs/json.md).
void AddPeakMemoryJson(nlohmann::json& j, const std::vector<MemoryParts>& parts, const Cluster& c,
                       int64_t reserve_bytes);
// The "op copy" row's bytes split into local and staging copies, e.g.
// " (15.0 GiB local + 13.0 GiB into/out of staging)"; "" when not split.
std::string CopySplit(int64_t copy_bytes, int64_t local_bytes);

// Writes j to stdout, 2-space indented, with a final newline.
void PrintJson(const nlohmann::json& j);

// DESIGN's result fields of a plan's own prediction: time_s, peak_bytes,
// bytes_moved, lower_bound_s, plan_efficiency, routing_bound_s, segment_bytes,
// offload_fraction.
nlohmann::json PlanSummaryJson(const PlanSummary& s);

// Per-GPU memory at refit start as JSON objects with units in the names
// (training_weights_bytes, ..., context_bytes, total_bytes, capacity_bytes, free_bytes; docs/json.md).
nlohmann::json MemoryAtStartJson(const std::vector<GpuMemoryAtStart>& mem, int64_t capacity_bytes);

// 8030261248 -> "8,030,261,248".
std::string FormatCount(int64_t n);
// GPU ids in their order, runs of consecutive ids collapsed: {0,1,2,3,8} -> "0-3,8".
std::string FormatGpuSet(const std::vector<int32_t>& gpus);

}  // namespace reshard::cli
