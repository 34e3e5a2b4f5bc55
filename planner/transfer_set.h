// Transfer set: for every piece of every destination shard, which source
// pieces can supply which part of it.
//
// Idea: per tensor, the source pieces of all distinct source shards are
// grouped by identical box (DP replicas share a Shard, and replicas across
// shards hold the same box); each distinct box is a "holder set": the list of
// (source shard, piece) pairs that hold exactly that box. A destination piece
// box D is cut into fragments D ∩ B over the holder boxes B that overlap it.
// When those intersections overlap each other (holder boxes that partially
// overlap, e.g. two differently sharded replicas), D is refined into the grid
// of all their cut points and each cell gets the union of the holders that
// contain it. Work is done once per distinct (tensor, destination box), not per
// destination rank.
//
// Complexity: sorting O(P log P) for P source pieces; each destination box
// query is O(log B + k) over the B distinct holder boxes of its tensor (an
// interval sweep along the tensor's most-split dimension with a prefix maximum
// of the interval ends), k the boxes scanned.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/box.h"
#include "model/layout.h"
#include "model/model.h"

namespace reshard {

struct HolderSet {
  // (source shard, index into that shard's pieces), sorted; every entry holds
  // the whole of every fragment that names this set.
  std::vector<std::pair<int32_t, int32_t>> holders;
};

struct Fragment {
  Box box;                 // region of the tensor, inside the destination piece's box
  int32_t tensor = -1;
  int32_t dst_piece = -1;  // index into the destination Shard::pieces
  int32_t holder_set = -1; // index into TransferSet::holder_sets
  int64_t elems = 0;       // Volume(box)
};

struct TransferSet {
  std::vector<HolderSet> holder_sets;
  // Per destination shard: its fragments, ordered by (dst_piece, box). The
  // fragments of one destination piece tile its box exactly.
  std::vector<std::vector<Fragment>> shard_fragments;
};

// Throws InternalError when a destination element has no source (the layouts
// of one model always cover every tensor).
TransferSet BuildTransferSet(const ModelSpec& model, const Layout& source, const Layout& destination);

// The planner's unit of work is a (destination rank, fragment) pair: the
// sourced fragments, segments' parts and the plan's ops, pieces and JSON all
// grow linearly with their count. Measured with `reshard plan S -o P` on the
// 2-core development machine (llama3-8b, TP8 -> TP2 on dgx-h200 nodes; 497,000
// pairs on 1024 GPUs): peak 1.4 KB a pair (685 MB), 22 us of CPU a pair
// (11 s: planning 4 s, the simulation and 0.5 GB of plan.json the rest). 2^23
// pairs (llama3-8b on ~16,000 GPUs) thus stay near 12 GB and a few minutes:
// inside a 24 GiB machine, with room for plans heavier per pair (more ops).
inline constexpr int64_t kMaxPlanFragments = int64_t{1} << 23;
inline constexpr int64_t kPlanBytesPerFragment = 1400;

// Sum over destination ranks of their shard's fragments. O(ranks).
int64_t DestinationFragments(const Layout& destination, const TransferSet& ts);
// Throws InputError(file, "destination", ...) when DestinationFragments
// exceeds kMaxPlanFragments, naming the count, the limit and the memory it
// would take, before anything of that size is allocated.
void CheckPlanFragments(const Layout& destination, const TransferSet& ts, const std::string& file);

}  // namespace reshard
