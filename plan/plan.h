// The Plan: the contract between planner, simulator and executor.
//
// A Plan is a plain value: buffers (device or host memory on one GPU), and ops
// on (GPU, stream) queues with dependencies and group ids. Semantics both
// consumers honour (DESIGN.md, "Plan semantics"):
//  1. Ops on one (gpu, stream) run in the order they appear in `ops`.
//  2. An op starts only after all its `deps` finished (cross-stream = event).
//  3. Ops sharing a `group` id are issued together (one NCCL group; concurrent
//     flows in the simulator). A send and its matching recv share a group.
//  4. A buffer exists between its kAlloc and kFree op; `preexisting` buffers
//     exist from the start (no kAlloc), buffers without kFree live to the end.
//     Replaying alloc/free gives the memory timeline.
//  5. Verify(): acyclic; every send has a matching recv of equal bytes; every
//     access stays inside its buffer and inside the buffer's lifetime; the
//     cluster fingerprint matches.
// It also says what the bytes mean: `sources` lists what each source buffer
// holds (filled before a run), `destinations` what each destination buffer
// must hold afterwards (checked after a run).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/box.h"
#include "model/cluster.h"
#include "model/dtype.h"
#include "model/quant.h"

namespace reshard {

struct Scenario;  // model/scenario.h

enum class OpKind : uint8_t { kAlloc, kFree, kCopy, kSend, kRecv, kOffload, kReload, kQuantize };
enum class MemorySpace : uint8_t { kDevice, kHost };
enum class BufferRole : uint8_t {
  kSourceWeights,       // training weights (preexisting)
  kDestinationWeights,  // generation weights (filled by the plan; survive)
  kOptimizer,           // optimizer state on device (preexisting; may be offloaded)
  kGradients,           // gradient buffers (preexisting when kept)
  kKvCache,             // KV cache placeholder (preexisting on destination GPUs)
  kStaging,             // pack/unpack/segment buffers
  kHost,                // pinned host memory (offload targets)
};
std::string_view OpKindName(OpKind k);
std::string_view BufferRoleName(BufferRole r);
std::string_view MemorySpaceName(MemorySpace s);  // "device", "host"

// Conventional streams; a plan may use more (stream_names lists them).
inline constexpr int32_t kStreamCompute = 0;  // pack / unpack / local copies
inline constexpr int32_t kStreamComm = 1;     // NCCL send / recv
inline constexpr int32_t kStreamHost = 2;     // offload / reload over PCIe
// A stream of this name sends and receives through each GPU's second NCCL
// communicator (same ranks): one communicator runs its launches one after
// another, so the groups of two lanes can run at once (the first lane's
// transfers start while the second's packs still run).
inline constexpr std::string_view kCommLane2StreamName = "comm2";

struct PlanBuffer {
  int32_t id = -1;
  int32_t gpu = -1;
  MemorySpace space = MemorySpace::kDevice;
  BufferRole role = BufferRole::kStaging;
  int64_t bytes = 0;
  int32_t layer = -1;        // decoder layer it belongs to, -1 if none / several
  bool preexisting = false;  // allocated before the refit starts
  std::string name;
  friend bool operator==(const PlanBuffer&, const PlanBuffer&) = default;
};

// A strided byte region of one buffer, up to 3 levels: `planes` blocks of
// `rows` rows of `row_bytes` contiguous bytes. Bytes are enumerated in
// (plane, row, byte) order; a copy writes the source's sequence into the
// destination's sequence, so both sides need equal Bytes() but not shapes.
struct Region {
  int32_t buffer = -1;
  int64_t offset_bytes = 0;
  int64_t row_bytes = 0;
  int64_t rows = 1;
  int64_t row_stride_bytes = 0;
  int64_t planes = 1;
  int64_t plane_stride_bytes = 0;

  int64_t Bytes() const { return row_bytes * rows * planes; }
  bool Contiguous() const;  // one run of bytes
  int64_t End() const;      // one past the last byte touched (relative to buffer start)
  friend bool operator==(const Region&, const Region&) = default;
};
Region ContiguousRegion(int32_t buffer, int64_t offset_bytes, int64_t bytes);

struct CopyPair {
  Region src, dst;
  friend bool operator==(const CopyPair&, const CopyPair&) = default;
};
// The length of the contiguous runs a copy moves: the gcd of both sides'
// runs (a contiguous side is one run of all its bytes), as the copy kernel
// splits it (executor/nccl/copy_desc.h). What sets its throughput.
int64_t CopyRunBytes(const CopyPair& c);
// Whether two regions (of one buffer; the buffer ids are not compared) share a
// byte. Exact for the shapes plans use: contiguous spans, rows of one stride
// (in O(1): row offsets compared modulo the stride), rows of two strides (a
// walk over the side with fewer rows), planes against the planes whose spans
// reach them; past 2^16 rows walked and plane pairs met, regions whose spans
// overlap count as overlapping. Assumes shapes Verify accepts (non-negative
// strides, rows and planes >= 1).
bool RegionsOverlap(const Region& a, const Region& b);

// One tile a kQuantize op quantizes: box `box` of FP8 tensor `tensor` (a
// PlanTensor with quant.role kValues, whose blocks it covers whole), read as
// bf16 from `input`, written as fp8 to `output` and its blocks' scales to
// `scales`. The box is [rows, cols] or [planes, rows, cols]; `input` and
// `output` hold its elements in (plane, row, col) order, so they have the
// box's planes and rows and row_bytes = cols x 2 and cols x 1; `scales` holds
// the scale box (ScaleBox) the same way with the scale dtype's bytes.
struct QuantizeTile {
  int32_t tensor = -1;
  Box box;
  Region input, output, scales;
  friend bool operator==(const QuantizeTile&, const QuantizeTile&) = default;
};

struct Op {
  int32_t id = -1;           // == index in Plan::ops
  OpKind kind = OpKind::kCopy;
  int32_t gpu = -1;
  int32_t stream = 0;
  int32_t group = -1;        // ops with equal group >= 0 are issued together
  std::vector<int32_t> deps; // op ids that must finish first
  int32_t buffer = -1;       // kAlloc / kFree
  std::vector<CopyPair> copies;  // kCopy: a batch run as one launch; kOffload / kReload: device<->host pairs
  std::vector<QuantizeTile> tiles;  // kQuantize: tiles quantized by one launch (one pass per block)
  Region region;             // kSend: bytes sent; kRecv: bytes received (contiguous)
  int32_t peer = -1;         // kSend / kRecv: the other GPU
  int32_t match = -1;        // kSend / kRecv: id of the matching op on the peer
  int32_t segment = -1;      // segment id (reporting, traces)
  // kCopy: the share of the GPU's copy grid (SMs x blocks per SM) its kernel
  // may use, in (0, 1]: less leaves SMs to NCCL kernels running beside it.
  double sm_share = 1.0;
  std::string label;         // short human tag, e.g. "seg 12 L3"

  int64_t Bytes() const;     // bytes moved (copies summed); 0 for alloc/free
  friend bool operator==(const Op&, const Op&) = default;
};

// What a buffer holds: box `box` of tensor `tensor` stored at `offset_elems`
// with per-dimension strides (elements), as model/layout.h's Piece.
struct ContentPiece {
  int32_t buffer = -1;
  int32_t tensor = -1;
  Box box;
  int64_t offset_elems = 0;
  Extents stride_elems{0, 0, 1};
  friend bool operator==(const ContentPiece&, const ContentPiece&) = default;
};

// A quantized tensor of the destination: the values (fp8_e4m3) of tensor
// `of` (bf16, the one sources hold) in blocks of block_rows x block_cols
// (model/quant.h), whose scales are tensor `scales`; or those scales
// (role kScales, `of` = the values tensor), one per block.
enum class QuantRole : uint8_t { kNone, kValues, kScales };
struct TensorQuant {
  QuantRole role = QuantRole::kNone;
  int32_t of = -1;
  int32_t scales = -1;                     // kValues
  int64_t block_rows = 0, block_cols = 0;  // kValues
  ScaleFormat scale_format = ScaleFormat::kFP32;  // kValues
  friend bool operator==(const TensorQuant&, const TensorQuant&) = default;
};

struct PlanTensor {
  std::string name;
  Shape shape;
  DType dtype = DType::kBF16;
  TensorQuant quant;  // role kNone: plain bytes, moved as they are
  friend bool operator==(const PlanTensor&, const PlanTensor&) = default;
};

struct BytesMoved {
  int64_t local = 0, nvlink = 0, network = 0, pcie = 0;
  friend bool operator==(const BytesMoved&, const BytesMoved&) = default;
};
// `bytes_moved` as every output writes it: {local, nvlink, network, pcie}.
// A template so plan.json's ordered writer and the plain --json outputs share it
// (found by nlohmann's ADL: `j["bytes_moved"] = m`).
template <class Json>
void to_json(Json& j, const BytesMoved& b) {
  j = Json::object();
  j["local"] = b.local;
  j["nvlink"] = b.nvlink;
  j["network"] = b.network;
  j["pcie"] = b.pcie;
}
template <class Json>
void from_json(const Json& j, BytesMoved& b) {
  b = {j.at("local").template get<int64_t>(), j.at("nvlink").template get<int64_t>(),
       j.at("network").template get<int64_t>(), j.at("pcie").template get<int64_t>()};
}

// How close a plan (or a run) comes to its lower bound: lower_bound_s / time_s,
// 1 for an empty plan (time 0).
inline double PlanEfficiency(double lower_bound_s, double time_s) {
  return time_s > 0 ? lower_bound_s / time_s : 1.0;
}


// One GPU's device memory at the moment of its peak, by what holds it. The
// parts sum to the peak. The scenario's reserve is no part: it is memory no
// plan may use, so peaks are compared with capacity less the reserve.
struct MemoryParts {
  int64_t context_bytes = 0;              // CUDA context (Cluster::overheads)
  int64_t source_weights_bytes = 0;       // training weights
  int64_t destination_weights_bytes = 0;  // generation weights allocated so far
  int64_t optimizer_bytes = 0;            // optimizer state still on the GPU
  int64_t gradients_bytes = 0;
  int64_t kv_cache_bytes = 0;
  int64_t staging_bytes = 0;              // pack / unpack / segment buffers
  int64_t nccl_bytes = 0;                 // NCCL's buffers per connected peer
  int64_t Total() const {
    return context_bytes + source_weights_bytes + destination_weights_bytes + optimizer_bytes + gradients_bytes +
           kv_cache_bytes + staging_bytes + nccl_bytes;
  }
  friend bool operator==(const MemoryParts&, const MemoryParts&) = default;
};

// What the planner chose and predicted; consumers may ignore it.
struct PlanSummary {
  int64_t segment_bytes = 0;
  int64_t direct_min_bytes = 0;       // pieces at least this large went in place where contiguous
  double offload_fraction = 0;
  std::string memory_policy;          // e.g. "dest-per-layer+source-to-host+optimizer-offload-0.25"
  BytesMoved bytes_moved;
  double lower_bound_s = 0;           // no plan of these contents on this cluster is faster
  double routing_bound_s = 0;         // this plan's own routing: max over ports of bytes / bandwidth
  double predicted_time_s = 0;
  std::vector<int64_t> predicted_peak_bytes;  // per GPU
  friend bool operator==(const PlanSummary&, const PlanSummary&) = default;
};

struct Plan {
  int32_t format_version = 1;
  std::string name;                   // scenario name
  Cluster cluster;                    // the plan runs on this cluster only (fingerprint)
  std::string cluster_fingerprint;    // Cluster::Fingerprint() at planning time
  std::string scenario_fingerprint;   // ScenarioFingerprint() of the scenario planned ("" when unknown)
  std::vector<std::string> stream_names{"compute", "comm", "host"};
  std::vector<PlanTensor> tensors;
  std::vector<PlanBuffer> buffers;    // id == index
  std::vector<Op> ops;                // id == index; per-(gpu,stream) order = order here
  std::vector<ContentPiece> sources;       // content of source buffers at start
  std::vector<ContentPiece> destinations;  // required content of destination buffers at end
  PlanSummary summary;

  int32_t Gpus() const { return cluster.Gpus(); }
  friend bool operator==(const Plan&, const Plan&) = default;
};

// The NCCL communicator lane of `stream`: 1 for kCommLane2StreamName, else 0.
int32_t CommLane(const Plan& p, int32_t stream);
// Whether any send or recv of `p` uses lane 1 (executors then make the
// second communicator).
bool UsesCommLane2(const Plan& p);

// Plan building (planners): append a buffer / an op, giving it the next id;
// an op's deps are sorted and deduplicated. Return the id.
int32_t AppendBuffer(Plan& p, PlanBuffer b);
int32_t AppendOp(Plan& p, Op op);

// Bytes the refit moves, by link class — the one definition behind every
// `bytes_moved` that planner, simulator and executor report: sends by the
// class between their two GPUs (a send to the same GPU is local), offloads
// and reloads as PCIe, and copies as local only when neither side is a
// staging buffer (packing into and unpacking out of staging re-copies bytes
// that the send already counts). O(ops + copy pairs).
BytesMoved CountBytesMoved(const Plan& p);
// Whether `op` is a copy that moves bytes by itself (see CountBytesMoved).
bool IsPlacementCopy(const Plan& p, const Op& op);

// JSON round trip: PlanFromJson(PlanToJson(p)) == p. PlanFromJson throws
// InputError(file, field, ...) on malformed input. The file format (compact,
// one line per element) is described in docs/plan-format.md.
nlohmann::json PlanToJson(const Plan& p);
Plan PlanFromJson(const nlohmann::json& j, const std::string& file);
void WritePlan(const Plan& p, const std::string& path);
Plan ReadPlan(const std::string& path);

struct VerifyResult {
  bool ok() const { return problems.empty(); }
  std::vector<std::string> problems;  // each names the op / buffer at fault
};
// Checks DESIGN's plan semantics. `expected` (optional) is the cluster the
// plan is about to run on; a fingerprint mismatch is a problem.
VerifyResult Verify(const Plan& p, const Cluster* expected = nullptr);
// Verify's last step, on a plan that passed the others: every byte of every
// destination piece is written exactly once (by a receive, copy or reload),
// and no byte of a destination buffer is written twice. Interval union per
// buffer, O(R log R) for R contiguous byte runs. plan/verify_coverage.cc.
std::vector<std::string> DestinationCoverageProblems(const Plan& p);

// Plans from elsewhere: why `p` is not a plan for scenario `s` (empty when it
// is). Compares the cluster (fingerprint, and which fields differ), the
// tensors (names, shapes, dtypes: hand edits of sizes show here even when
// Verify passes) and Plan::scenario_fingerprint with ScenarioFingerprint(s)
// (layouts, GPU lists). O(tensors). plan/fingerprint.cc.
std::vector<std::string> PlanScenarioProblems(const Plan& p, const Scenario& s);

std::string ToString(const Plan& p);  // readable listing: buffers, then ops per GPU and stream
std::string ToDot(const Plan& p);     // GraphViz of ops and dependencies (small plans)

}  // namespace reshard
