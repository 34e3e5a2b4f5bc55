// Walking two strided byte regions of equal size in step (plan/plan.h
// Region: `planes` x `rows` x `row_bytes`, enumerated plane, row, byte).
//
// The byte sequences of both sides are cut into runs of L = gcd of the two
// row lengths: every run is contiguous on both sides, so a copy is a list of
// memcpy(dst + a, src + b, L). O(bytes / L) offset computations.
#pragma once

#include <cstdint>
#include <numeric>

#include "plan/plan.h"

namespace reshard {

// Offset (bytes from the buffer start) of byte k of region r's sequence.
inline int64_t RegionByteOffset(const Region& r, int64_t k) {
  const int64_t plane_bytes = r.row_bytes * r.rows;
  const int64_t plane = k / plane_bytes;
  const int64_t rem = k - plane * plane_bytes;
  const int64_t row = rem / r.row_bytes;
  return r.offset_bytes + plane * r.plane_stride_bytes + row * r.row_stride_bytes + (rem - row * r.row_bytes);
}

// Calls f(src_offset, dst_offset, length) for runs covering both sequences.
template <typename F>
void ForEachRun(const Region& src, const Region& dst, F&& f) {
  const int64_t total = src.Bytes();
  if (total == 0) return;
  if (src.Contiguous() && dst.Contiguous()) {
    f(src.offset_bytes, dst.offset_bytes, total);
    return;
  }
  // A contiguous side can be viewed with any row length, so only the other side's rows cut runs.
  const int64_t ls = src.Contiguous() ? total : src.row_bytes;
  const int64_t ld = dst.Contiguous() ? total : dst.row_bytes;
  const int64_t run = std::gcd(ls, ld);
  for (int64_t k = 0; k < total; k += run) f(RegionByteOffset(src, k), RegionByteOffset(dst, k), run);
}

}  // namespace reshard
