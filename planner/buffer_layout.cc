#include "planner/buffer_layout.h"

#include <algorithm>

namespace reshard {

SideBuffers LayoutBuffers(const Layout& l) {
  SideBuffers sb;
  const size_t n = l.shards.size();
  sb.slot_of.resize(n), sb.base_of.resize(n), sb.slot_layer.resize(n), sb.slot_elems.resize(n);
  for (size_t s = 0; s < n; ++s) {
    const auto& bufs = l.shards[s].buffers;
    auto& layers = sb.slot_layer[s];
    for (const auto& b : bufs) layers.push_back(b.layer);
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    sb.slot_elems[s].assign(layers.size(), 0);
    for (const auto& b : bufs) {
      const int32_t slot = static_cast<int32_t>(std::lower_bound(layers.begin(), layers.end(), b.layer) - layers.begin());
      sb.slot_of[s].push_back(slot);
      sb.base_of[s].push_back(sb.slot_elems[s][slot]);
      sb.slot_elems[s][slot] += b.elems;
    }
  }
  return sb;
}

// Region of box `b` of a piece stored at `off` (elements, box.lo of `pbox`)
// with `stride`; nullopt when it needs more than three levels.
std::optional<Region> BoxRegion(int32_t buffer, int64_t off, const Extents& stride, const Box& pbox, const Box& b,
                                int64_t eb) {
  struct Level {
    int64_t ext, st;
  };
  Level lv[kMaxDims];
  int n = 0;
  for (int d = 0; d < b.ndim; ++d) {
    off += (b.lo[d] - pbox.lo[d]) * stride[d];
    const int64_t ext = b.hi[d] - b.lo[d];
    if (ext > 1) lv[n++] = {ext, stride[d]};
  }
  // Coalesce from the inside: an outer level whose stride is the inner span merges.
  for (int i = n - 1; i > 0; --i) {
    if (lv[i - 1].st == lv[i].ext * lv[i].st) {
      lv[i - 1] = {lv[i - 1].ext * lv[i].ext, lv[i].st};
      for (int j = i; j + 1 < n; ++j) lv[j] = lv[j + 1];
      --n;
    }
  }
  Region r;
  r.buffer = buffer;
  r.offset_bytes = off * eb;
  r.row_bytes = eb;
  if (n > 0 && lv[n - 1].st == 1) {
    r.row_bytes = lv[n - 1].ext * eb;
    --n;
  }
  if (n > 2) return std::nullopt;
  if (n >= 1) r.rows = lv[n - 1].ext, r.row_stride_bytes = lv[n - 1].st * eb;
  if (n == 2) r.planes = lv[0].ext, r.plane_stride_bytes = lv[0].st * eb;
  if (r.rows == 1) r.row_stride_bytes = r.row_bytes;
  if (r.planes == 1) r.plane_stride_bytes = r.row_bytes * r.rows;
  return r;
}

int OutermostSplitDim(const Box& b) {
  for (int d = 0; d < b.ndim; ++d)
    if (b.hi[d] - b.lo[d] > 1) return d;
  return -1;
}

}  // namespace reshard
