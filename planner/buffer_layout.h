// Plan buffers shared by reshard's planner and the baseline plans: where a
// shard's local buffers sit in the per-(GPU, layer) plan buffers, the buffers
// and content every refit plan starts from, the strided Region of a sub-box
// of a stored piece, and the memory ops both builders emit (alloc, free, move
// to host). Both plan builders lay out buffers and regions through these, so
// their plans differ only in choices.
#pragma once

#include <charconv>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/box.h"
#include "model/layout.h"
#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {

// Where each local buffer of a shard sits inside the per-(GPU, layer) plan
// buffers ("slots", layers ascending).
struct SideBuffers {
  std::vector<std::vector<int32_t>> slot_of;     // [shard][local buffer]
  std::vector<std::vector<int64_t>> base_of;     // [shard][local buffer] elems into the slot
  std::vector<std::vector<int32_t>> slot_layer;  // [shard][slot]
  std::vector<std::vector<int64_t>> slot_elems;  // [shard][slot]

  // The slot holding piece `p` of `shard`, and the element offset of the
  // piece's box.lo inside that slot.
  int32_t SlotOf(int32_t shard, const Piece& p) const { return slot_of[shard][p.buffer]; }
  int64_t OffsetIn(int32_t shard, const Piece& p) const { return base_of[shard][p.buffer] + p.offset; }
};

// O(buffers log buffers) per shard.
SideBuffers LayoutBuffers(const Layout& l);

// Region of box `b` of a piece stored at `off` (elements, box.lo of `pbox`)
// with `stride`; nullopt when it needs more than three levels.
std::optional<Region> BoxRegion(int32_t buffer, int64_t off, const Extents& stride, const Box& pbox, const Box& b,
                                int64_t eb);

// The first dimension of `b` longer than 1, or -1 (a single element).
int OutermostSplitDim(const Box& b);

// The plan's header from `s`: name, cluster and its fingerprint, stream
// names, tensors.
void StartPlan(Plan& p, const Scenario& s, std::vector<std::string> stream_names);

// The copy kernel's share of the SMs (Op::sm_share) where copies overlap
// transfers: on a GPU that sends or receives, copies leave SMs to NCCL's
// kernels. 66 blocks (half of an H200's 132 SMs x 1) was the fastest cap for
// llama3-8b TP2 -> TP1x2 on 2x H200: 25.5 ms against 28.6 uncapped, 27.7 at
// 32 blocks, 26.1 at 100 (bench/results/2026-11-30-h200x2-refit-session2/,
// measured with four loads in flight per lane; the kernel now keeps eight).
inline constexpr double kCopyShareBesideTransfers = 0.5;
// Sets every copy on a GPU with sends or receives to another GPU to
// kCopyShareBesideTransfers, the others to the whole grid (1). O(ops).
void ShareCopiesWithTransfers(Plan& p);

// Appends a buffer to `p`; returns its id.
int32_t AddPlanBuffer(Plan& p, int32_t gpu, MemorySpace space, BufferRole role, int64_t bytes, int32_t layer,
                      bool preexisting, std::string name);

// The optimizer states of a parameter: ceil(bytes_per_param / 4), at least 1
// (Adam's fp32 master weights and two moments at 12 bytes: 3). A plan may
// hold a slot's optimizer state as one buffer per state (PyTorch keeps each
// state of a parameter a tensor of its own), so that an offload frees it
// state by state (planner/emitter.h, OptimizerStatesUnder).
int32_t OptimizerStates(double bytes_per_param);

// State j of a slot of `slot_bytes` split into `states` buffers: equal
// parts, the last taking the rounding.
int64_t OptimizerStateBytes(int64_t slot_bytes, int32_t states, int32_t j);

// The bytes of one GPU's optimizer buffers, in order: `optimizer_bytes` over
// its slots in proportion to their elements (the last slot takes the
// rounding), each slot in `states` buffers (OptimizerStateBytes).
std::vector<int64_t> OptimizerBufferBytes(int64_t optimizer_bytes, const std::vector<int64_t>& slot_elems,
                                          int32_t states);

// "emb" for layer -1 (embeddings, head, final norm), else "L<layer>".
std::string LayerName(int32_t layer);

// An op label or buffer name from text and integers, written as fmt's "{}"
// writes them, without parsing a format string: a plan has one per op and
// buffer (deepseek-v3 on 512 GPUs: ~1.2 M per emitted candidate; as
// fmt::format they were 6 % of its planning's instructions).
namespace label_detail {
inline void Append(std::string& s, std::string_view v) { s.append(v); }
template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>)
void Append(std::string& s, T v) {
  char buf[24];
  s.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}
}  // namespace label_detail
template <class... Parts>
std::string Label(const Parts&... parts) {
  std::string s;
  (label_detail::Append(s, parts), ...);
  return s;
}

// The per-rank plan buffers a refit starts from. A rank's buffers are
// consecutive ids, one per slot (planner/buffer_layout.h's SideBuffers).
struct RefitBuffers {
  std::vector<int32_t> src_first;   // per source rank: its first source-weight buffer
  std::vector<int32_t> opt_first;   // per source rank: its first optimizer buffer
  std::vector<int32_t> opt_slots;   // per source rank: how many optimizer buffers it has (0: none)
  std::vector<int32_t> dst_first;   // per destination rank: its first destination-weight buffer
};

// Adds to `p`, in this order: per source rank, its weights per slot, its
// GPU's optimizer state split over the slots in proportion to their elements
// (`optimizer_states` buffers per slot: OptimizerBufferBytes), and its GPU's
// gradients (the GPU's state goes with its first rank); per destination
// rank, its GPU's KV cache (first rank on the GPU) and its weights per slot
// (allocated by the plan). Then p.sources and
// p.destinations (unless `content` is false: the buffers only): what every
// source buffer holds and every destination buffer must hold. O(buffers +
// pieces).
RefitBuffers AddRefitBuffers(Plan& p, const Scenario& s, const Layout& src, const Layout& dst,
                             const SideBuffers& src_buffers, const SideBuffers& dst_buffers,
                             const std::vector<int32_t>& dst_gpu, const std::vector<GpuMemoryAtStart>& mem,
                             int32_t optimizer_states, bool content = true);

// An alloc or free of `buffer` on its GPU's `stream`; returns the op id.
int32_t AppendMemoryOp(Plan& p, OpKind kind, int32_t buffer, int32_t stream, std::vector<int32_t> deps);

// Moves device `buffer` to a new host buffer on `stream`: the host buffer's
// alloc, then the offload (after `deps`). Returns the offload's op id; the
// device buffer's free is the caller's.
int32_t AppendMoveToHost(Plan& p, int32_t buffer, int32_t stream, std::vector<int32_t> deps);

}  // namespace reshard
