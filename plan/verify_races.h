// Verify's byte-race sweep: which accesses of one buffer touch the same bytes
// with at least one of them writing. Verify then asks whether each such pair
// is ordered on the buffer's GPU (plan/verify.cc, step 7).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "plan/plan.h"

namespace reshard {

struct ByteAccess {
  int32_t buffer = -1;
  int32_t op = -1;
  const Region* region = nullptr;  // well formed and inside the buffer
  bool write = false;
  int64_t begin = 0, end = 0;      // the region's span (ForEachByteConflict sets them)
};

// Calls conflict(x, y) for every two accesses of one buffer by different ops,
// at least one writing, whose bytes overlap (RegionsOverlap); x comes first in
// (buffer, offset, op) order. A pair of ops with several such regions is met
// once per pair of regions. Buffers nothing writes are skipped.
// O(A log A + C) for A accesses of written buffers and C pairs whose spans
// overlap: a sweep by offset over each buffer keeps the accesses whose span
// is still open, and a read is compared with open writes only.
void ForEachByteConflict(std::vector<ByteAccess> accesses,
                         const std::function<void(const ByteAccess&, const ByteAccess&)>& conflict);

}  // namespace reshard
