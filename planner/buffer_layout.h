// Plan-buffer layout shared by the planner and the baseline plans: where a
// shard's local buffers sit in the per-(GPU, layer) plan buffers, and the
// strided Region of a sub-box of a stored piece. Both plan builders must lay
// out buffers and regions identically so their plans differ only in choices.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "model/box.h"
#include "model/layout.h"
#include "plan/plan.h"

namespace reshard {

// Where each local buffer of a shard sits inside the per-(GPU, layer) plan
// buffers ("slots", layers ascending).
struct SideBuffers {
  std::vector<std::vector<int32_t>> slot_of;     // [shard][local buffer]
  std::vector<std::vector<int64_t>> base_of;     // [shard][local buffer] elems into the slot
  std::vector<std::vector<int32_t>> slot_layer;  // [shard][slot]
  std::vector<std::vector<int64_t>> slot_elems;  // [shard][slot]
};

// O(buffers log buffers) per shard.
SideBuffers LayoutBuffers(const Layout& l);

// Region of box `b` of a piece stored at `off` (elements, box.lo of `pbox`)
// with `stride`; nullopt when it needs more than three levels.
std::optional<Region> BoxRegion(int32_t buffer, int64_t off, const Extents& stride, const Box& pbox, const Box& b,
                                int64_t eb);

// The first dimension of `b` longer than 1, or -1 (a single element).
int OutermostSplitDim(const Box& b);

}  // namespace reshard
