// The baseline reshard's executor is compared against: a refit done the way
// PyTorch RL stacks do it, planned on the host.
//
// What such a stack does when every generation rank needs more than its own
// GPU's training shard (colocated Megatron TP2 -> vLLM TP1 x DP2, or EP2 ->
// TP2): walk the training parameters in order, pack each GPU's shard of the
// next parameters into a bucket, all-gather the bucket over the GPUs, and
// copy every gathered parameter into the engine's own buffers (re-ordering
// Megatron's per-group fused QKV into q|k|v, slicing what a TP rank keeps).
// Parameters whose shard is the same on every GPU (replicated norms; under
// EP with DP, everything but the experts) are copied locally, never gathered.
// With one source rank and the engine on other GPUs (disaggregated) the bucket
// is broadcast from the source GPU instead (NeMo-RL's packed broadcast).
//
// The plan is data: a list of steps, each with byte copies (pack, unpack)
// between per-GPU arenas and at most one collective. allgather_run.cc runs
// it with CUDA copy kernels and NCCL; EmulateOnHost runs it with memcpy (the
// tests). Nothing here touches a GPU.
//
// Buckets are counted as PyTorch stacks count them (verl's
// update_weights_bucket_megabytes, slime's update_weight_buffer_size): bytes
// of full (gathered) parameters per bucket, i.e. what lands on each GPU. A
// parameter larger than the bucket travels alone, so the bucket buffer is
// max(bucket, largest gathered parameter). By default each GPU packs its shard
// straight into its own slot of the gathered buffer (in-place all-gather: the
// leanest memory a careful stack gets); --out-of-place packs into a separate
// input first (torch.cat + all_gather_into_tensor).
//
// Memory (BaselineOptions::memory, on by default): the scenario's state at
// refit start is resident as reshard's planner counts it (model/scenario.h
// MemoryAtStart: training weights, optimizer state, kept gradients, KV cache;
// the reserve is never used), and each refit runs in the order of NeMo-RL /
// verl: move `offload_fraction` of the GPU's optimizer state to pinned host
// memory and free it, then allocate the refit's buffers (destination weights,
// bucket, input, staging) and refit; both count in the refit time. The
// fraction follows the scenario as planner/baseline_plan.h's does
// (model/offload.h: none 0, all 1, a fraction itself, auto 0 when the planned
// peak fits in capacity less reserve, else 1).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "executor/pattern.h"
#include "model/scenario.h"

namespace reshard::baseline {

enum class Transport : uint8_t {
  kBucketed,   // buckets of `bucket_bytes` gathered bytes
  kPerTensor,  // one collective per parameter, sent straight from the parameter (no pack)
  kFlat,       // the same bytes as one send/recv per GPU pair (the ceiling), then unpack
};
enum class Collective : uint8_t { kAllGather, kBroadcast };
std::string_view TransportName(Transport t);    // "bucketed", "per_tensor", "flat"
std::string_view CollectiveName(Collective c);  // "all_gather", "broadcast"

struct BaselineOptions {
  Transport transport = Transport::kBucketed;
  int64_t bucket_bytes = int64_t{256} << 20;  // gathered bytes per bucket (kBucketed)
  bool out_of_place = false;                  // kBucketed: pack into a separate input buffer
  // Model the scenario's memory (optimizer state, offload, KV cache, reserve).
  // false: weights and the refit's own buffers only (allgather_baseline --no-memory).
  bool memory = true;
  // Optimizer state moved to host before the refit (0..1). Unset: from the
  // scenario (model/offload.h BaselineOffloadFractions).
  std::optional<double> offload_fraction;
};

// Device memory of one GPU a plan addresses, by role. Offsets in copies are bytes into these.
enum class Arena : uint8_t {
  kSource,       // training weights: every local buffer of the GPU's source rank, moved ones first
  kDestination,  // generation weights: every local buffer of the GPU's destination rank
  kBucket,       // gathered / broadcast bucket (per-tensor: one gathered parameter)
  kInput,        // out-of-place: this GPU's packed contribution
  kStaging,      // flat: what the other GPUs sent, one slot per peer
};
inline constexpr int kArenas = 5;
std::string_view ArenaName(Arena a);

// n0 x n1 rows of row_bytes contiguous bytes; row (i0, i1) starts at
// offset + i0 * stride0 + i1 * stride1 on each side.
struct ByteCopy {
  Arena src_arena = Arena::kSource;
  Arena dst_arena = Arena::kDestination;
  int64_t src_offset = 0, dst_offset = 0;
  int64_t n0 = 1, n1 = 1, row_bytes = 0;
  int64_t src_stride0 = 0, src_stride1 = 0, dst_stride0 = 0, dst_stride1 = 0;
  int64_t Bytes() const { return n0 * n1 * row_bytes; }
};

enum class StepKind : uint8_t { kLocal, kAllGather, kBroadcast, kFlat };

// One point-to-point message of a flat exchange.
struct FlatSend {
  int32_t from = 0, to = 0;
  int64_t src_offset = 0;  // in the sender's source arena
  int64_t dst_offset = 0;  // in the receiver's staging arena
  int64_t bytes = 0;
};

// pack -> collective -> unpack, on one stream per GPU.
struct Step {
  StepKind kind = StepKind::kLocal;
  std::vector<int32_t> buffers;        // source buffers the collective moves, in walk order
  std::vector<int32_t> local_buffers;  // source buffers copied on the GPU itself
  // All-gather / broadcast: each contributing GPU sends send_bytes from
  // (send_arena, send_offset[gpu]); every GPU receives into kBucket at 0
  // (all-gather: GPU g's contribution at g * send_bytes, as ncclAllGather).
  Arena send_arena = Arena::kBucket;
  std::vector<int64_t> send_offset;    // per GPU
  int64_t send_bytes = 0;
  int32_t root = -1;                   // broadcast
  std::vector<FlatSend> sends;         // flat
  std::vector<std::vector<ByteCopy>> pack;    // per GPU, before the collective
  std::vector<std::vector<ByteCopy>> unpack;  // per GPU, after it (incl. local copies)
  int64_t GatheredBytes(int32_t gpus) const;  // bytes the collective lands on each GPU
};

struct SourceBuffer {
  std::string name;
  int64_t bytes = 0;
  int64_t offset = 0;  // in the source arena of every GPU with a source rank
  bool moved = false;  // differs between GPUs (all-gather) or needed elsewhere (broadcast)
};

// Memory of one GPU around the refit (BaselineOptions::memory). Device bytes.
struct GpuMemoryPlan {
  int64_t optimizer_bytes = 0;   // the GPU's optimizer state (MemoryAtStart, as reshard's planner and baseline)
  int64_t offload_bytes = 0;     // offload_fraction x optimizer_bytes, rounded: to pinned host, then freed
  int64_t gradient_bytes = 0;    // gradients kept through the refit (memory.keep_gradients)
  int64_t kv_cache_bytes = 0;    // destination GPUs: resident through the refit
  int64_t reserve_bytes = 0;     // never used by the refit (the GPU run holds it, untouched)
  int64_t descriptor_bytes = 0;  // the copy kernel's descriptors (allgather_copy.h DeviceCopy), resident
  int32_t nccl_peers = 0;        // NCCL peers the run connects: ring neighbours, or every flat peer
  int64_t overhead_bytes = 0;    // CUDA context + nccl_peers x NCCL buffers (cluster overheads): planned, not allocated
  // In use when the refit starts (weights, optimizer, gradients, KV cache,
  // descriptors, overheads; not the reserve), and at most during it:
  // max(start, start - offload + destination + bucket + input + staging).
  int64_t start_bytes = 0;
  int64_t planned_peak_bytes = 0;
};

struct RefitPlan {
  std::string scenario;
  Collective collective = Collective::kAllGather;
  BaselineOptions options;
  int32_t gpus = 0;
  int32_t elem_bytes = 2;
  std::vector<int32_t> source_rank;       // per GPU, -1 = none
  std::vector<int32_t> destination_rank;  // per GPU, -1 = none
  std::vector<SourceBuffer> source_buffers;  // identical buffer lists on every source rank
  int64_t moved_bytes = 0;                   // per contributing GPU: bytes of its moved buffers
  std::vector<std::array<int64_t, kArenas>> arena_bytes;  // per GPU
  std::vector<Step> steps;
  // Pattern pieces, element offsets relative to the start of the source / destination arena.
  std::vector<std::vector<PieceMap>> fill;   // per GPU
  std::vector<std::vector<PieceMap>> check;  // per GPU
  std::vector<std::string> tensor_names;     // by tensor id
  // Memory (BaselineOptions::memory; otherwise memory_modelled is false, the
  // fraction 0 and `memory` empty).
  bool memory_modelled = false;
  double offload_fraction = 0;
  int64_t capacity_bytes = 0;         // per GPU (the scenario's cluster)
  std::vector<GpuMemoryPlan> memory;  // per GPU
  bool planned_fits = true;           // planned peak <= capacity - reserve on every GPU
  int32_t missing_gpu = -1;           // when not: the GPU missing the most (lowest id on ties)
  int64_t missing_bytes = 0;

  int64_t ArenaBytes(int32_t gpu, Arena a) const { return arena_bytes[static_cast<size_t>(gpu)][static_cast<size_t>(a)]; }
  int64_t CheckedElements(int32_t gpu) const;
  int64_t RefitBufferBytes(int32_t gpu) const;  // destination + bucket + input + staging arenas
  int32_t Collectives() const;  // steps with a collective
};

// Plans the refit of scenario `s` (colocated: every GPU holds one source and one
// destination rank -> all-gather; or one source rank whose GPU differs from the
// destination GPUs -> broadcast). The GPUs are 0..N-1 of the union of both sides.
// Throws InputError(s.path, field, ...) for scenarios this baseline does not model
// (pipeline parallelism, several ranks on a GPU, a dtype change). A planned peak
// over capacity is a result (planned_fits), not an error.
// Complexity: O(steps * pieces_per_buffer * destination_pieces_per_tensor) plus
// O(pieces) per GPU; milliseconds for llama3-8b.
RefitPlan PlanRefit(const Scenario& s, const BaselineOptions& o);

// Runs the plan in host memory with memcpy (fill, steps, check). Returns the
// number of destination elements that do not hold the pattern (0 = verified).
// Needs the arenas in host memory: small models only.
int64_t EmulateOnHost(const RefitPlan& p);

}  // namespace reshard::baseline
