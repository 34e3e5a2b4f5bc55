// A refit scenario: model, cluster, both layouts, GPU placement, memory state
// at refit start and planning options — read from YAML or JSON (DESIGN.md,
// "Scenario file"). Every error names the file, the field and the problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cluster.h"
#include "model/dtype.h"
#include "model/layout.h"
#include "model/model.h"
#include "model/quant.h"

namespace reshard {

enum class OffloadMode : uint8_t { kNone, kAll, kAuto, kFraction };

struct OptimizerConfig {
  double bytes_per_param = 12;   // Adam: fp32 master + 2 moments
  bool distributed = true;       // Megatron distributed optimizer: sharded over DP
  OffloadMode offload = OffloadMode::kAuto;
  double fraction = 0;           // for kFraction, in [0, 1]
  // Share of the state that lives in host memory through training and refit
  // (Megatron's optimizer_cpu_offload, verl's optimizer_offload): never on
  // the GPU, so neither counted there nor moved by the refit. 1 = all on the host.
  double on_host = 0;
  double OnDevice() const { return 1.0 - on_host; }  // share of the state on the GPUs
};

struct MemoryConfig {
  OptimizerConfig optimizer;
  bool keep_gradients = false;   // false: gradient buffers are freed before refit (NeMo-RL default)
  double grad_bytes_per_param = 4;
  int64_t kv_cache_bytes = 0;    // per destination GPU, resident through the refit
  int64_t reserve_bytes = 0;     // per GPU, never planned into
};

struct PlanOptions {
  int64_t segment_bytes = 0;     // 0 = auto
  // Pieces at least this large, contiguous on a side, are sent / received in
  // place on that side (one p2p op each); smaller ones are packed into
  // segments. -1 = auto (the planner chooses).
  int64_t direct_min_bytes = -1;
  // FP8 destinations: where the refit quantizes (planner/quantize.h); auto:
  // the planner plans both and keeps the faster.
  enum class QuantizeAt : uint8_t { kAuto, kSource, kDestination };
  QuantizeAt quantize_at = QuantizeAt::kAuto;
};

struct Scenario {
  std::string name;
  std::string path;              // file it was read from ("<builtin:NAME>" for built-ins)
  ModelSpec model;
  DType dtype = DType::kBF16;    // training weights
  DType destination_dtype = DType::kBF16;
  // Set when destination_dtype is fp8_e4m3: how the refit quantizes.
  std::optional<QuantConfig> quantization;
  Cluster cluster;
  SourceParallel source;
  DestinationParallel destination;
  std::vector<int32_t> source_gpus;       // source rank r lives on GPU source_gpus[r]
  std::vector<int32_t> destination_gpus;  // destination rank r on destination_gpus[r] (initial placement)
  bool destination_placement_free = false;// planner may permute destination ranks over destination_gpus
  MemoryConfig memory;
  PlanOptions plan;
  // The files it was read from: the scenario file (not for built-ins), its
  // model.hf_config and cluster.calibration, so a command can refuse an
  // output path that would overwrite one of them.
  std::vector<std::string> input_files;
};

// Reads a scenario (YAML, or JSON by content). HF config paths resolve
// relative to the scenario file. Throws InputError naming file and field.
Scenario LoadScenario(const std::string& path);
Scenario ParseScenario(const std::string& text, const std::string& path);
// Built-in scenarios (the README's main job runs one without any file).
std::vector<std::string> BuiltinScenarioNames();
Scenario BuiltinScenario(const std::string& name);

// Stable hash (16 hex digits) of what a plan is made for: the cluster's
// Fingerprint(), both dtypes, every tensor's name and shape, and both layouts
// with their GPU lists (not the memory state or planning options). Plans
// record it; a plan run against a scenario with another one is refused
// (model/scenario_fingerprint.cc).
std::string ScenarioFingerprint(const Scenario& s);

// Sizes like "256MiB", "4 GiB", "1.5GB", 1048576. Throws InputError on junk,
// negative values, NaN/inf, or overflow of int64.
int64_t ParseBytes(const std::string& text, const std::string& file, const std::string& field);

// A segment size for scenario `s` (plan.segment_bytes or --segment-bytes),
// checked against the work it implies: at least kMinSegmentBytes, at most a
// GPU's memory, and at most kMaxSegments segments for the destination's
// bytes. Throws InputError(file, field, ...) with the numbers.
inline constexpr int64_t kMinSegmentBytes = 4096;
inline constexpr int64_t kMaxSegments = int64_t{1} << 17;
void CheckSegmentBytes(const Scenario& s, int64_t segment_bytes, const std::string& file, const std::string& field);
// CheckSegmentBytes's problem with a size, "" when it has none;
// `destination_bytes`: DestinationBytes(s) (one layout built for many sizes).
std::string SegmentBytesProblem(const Scenario& s, int64_t segment_bytes, int64_t destination_bytes);
// The bytes of every destination rank, summed (each replica counts).
int64_t DestinationBytes(const Scenario& s, const std::string& file);

// Memory of one GPU when the refit starts, before the plan allocates anything.
struct GpuMemoryAtStart {
  int32_t gpu = 0;
  int64_t training_weights = 0;
  int64_t gradients = 0;
  int64_t optimizer = 0;          // resident on device (before any offload the planner chooses)
  int64_t kv_cache = 0;
  int64_t reserve = 0;
  int64_t overheads = 0;          // CUDA context
  int64_t Total() const { return training_weights + gradients + optimizer + kv_cache + reserve + overheads; }
};
std::vector<GpuMemoryAtStart> MemoryAtStart(const Scenario& s, const Layout& source);

// "Does not fit" is a result, not an error.
struct Feasibility {
  bool fits = true;
  int32_t gpu = -1;               // the GPU missing the most bytes
  int64_t missing_bytes = 0;
  std::string message;            // "GPU 3 needs 151.2 GiB but has 139.8 GiB: 11.4 GiB missing"
};
Feasibility CheckStartFits(const Scenario& s, const std::vector<GpuMemoryAtStart>& mem);
// Bytes of destination weights each GPU receives at least: its ranks' shards,
// or with a free placement the smallest shard per rank it hosts.
std::vector<int64_t> DestinationFloorBytes(const Scenario& s, const Layout& destination);
// Whatever the plan, a GPU holds during the refit at least what it holds at
// the start, less the optimizer state it may offload, plus the destination
// weights it receives: the floor no plan can go below.
Feasibility CheckRefitFloor(const Scenario& s, const std::vector<GpuMemoryAtStart>& mem,
                            const std::vector<int64_t>& destination_bytes);
// Both checks on the scenario's own layouts, O(GPUs + ranks).
Feasibility CheckRefitFits(const Scenario& s);

std::string FormatBytes(int64_t bytes);  // "8.03 GB (7.48 GiB)"-style human form

}  // namespace reshard
