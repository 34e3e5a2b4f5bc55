// The planning problem: everything about a refit that does not depend on the
// segment size or the memory policy, built once per MakePlan and shared by
// every candidate plan (planner/segments.h cuts it into segments,
// planner/emitter.h turns those into a Plan).
//
// What it holds: both layouts, the transfer set (planner/transfer_set.h), the
// destination placement and the source chosen for every fragment
// (planner/assign.h), where each shard's buffers sit in the per-(GPU, layer)
// plan buffers (planner/buffer_layout.h), the memory at refit start, and one
// SourcedFragment per (destination rank, fragment), sorted by (sender GPU,
// receiver GPU, sender's plan buffer, destination rank, fragment) so that
// every (sender, receiver) pair is one contiguous run, in the sender's layer
// order.
//
// Complexity: O(F) for the F (destination rank, fragment) pairs, made in
// destination order and then put in sender order by a stable LSD radix sort
// on the high bits of a packed key (2-3 passes of 11 bits); O(F log F) by
// comparison when the key does not fit 64 bits.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layout.h"
#include "model/scenario.h"
#include "planner/assign.h"
#include "planner/buffer_layout.h"
#include "planner/scratch_vector.h"
#include "planner/transfer_set.h"

namespace reshard {

// One (destination rank, fragment) with the source chosen for it.
struct SourcedFragment {
  uint64_t key;  // (src_gpu, dst_gpu, src_slot, dst_rank, frag) packed, for one fast sort
  int32_t src_gpu, dst_gpu;
  int32_t src_slot;   // the sender's plan buffer (layer slot) holding it
  int32_t dst_rank, frag;
  int32_t src_rank, src_piece;  // src_piece: index in the source rank's Shard::pieces
  int64_t elems;      // the fragment's, copied: sorted entries reach fragments in scattered order
};

// Bytes from one GPU to another (sender == receiver: local copies).
struct PairBytes {
  int32_t src_gpu, dst_gpu;
  int64_t bytes;
};

struct Problem {
  // Builds everything; throws what the layout and placement steps throw.
  explicit Problem(const Scenario& s);

  const Scenario& scenario;
  Layout src, dst;
  TransferSet transfer_set;
  std::vector<int32_t> dst_gpu;               // per destination rank
  SourceChoice choice;
  SideBuffers src_buffers, dst_buffers;       // shard buffers -> plan buffers
  int64_t elem_bytes = 2;
  std::vector<GpuMemoryAtStart> memory_at_start;  // per GPU
  ScratchVector<SourcedFragment> sourced;     // sorted by (src_gpu, dst_gpu, src_slot, dst_rank, frag)
  std::vector<PairBytes> pairs;               // byte totals per (sender, receiver), in `sourced` order

  // (destination rank, fragment) pairs.
  int64_t Fragments() const { return static_cast<int64_t>(sourced.size()); }
  const Fragment& FragmentOf(int32_t dst_rank, int32_t frag) const {
    return transfer_set.shard_fragments[dst.rank_shard[dst_rank]][frag];
  }
  // Index of the piece of `src_rank`'s shard that holds `f`.
  int32_t SrcPieceIndex(int32_t src_rank, const Fragment& f) const;
};

}  // namespace reshard
