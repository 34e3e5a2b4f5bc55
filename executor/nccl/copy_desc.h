// How the NCCL backend hands one copy pair of a plan op (plan/plan.h CopyPair)
// to its batched copy kernel (kernels.h CopyDesc). Host code only.
#pragma once

#include <cstdint>

#include "executor/nccl/kernels.h"
#include "plan/plan.h"

namespace reshard {

// Same row bytes, rows and planes: a copy engine can do the pair as one 2-D
// copy per plane.
bool SameShape(const Region& a, const Region& b);

// The kernel's descriptor of pair `c` whose first bytes are `src` / `dst`: runs
// contiguous on both sides (L = gcd of the row lengths), chunks of them, the
// widest vector every address and stride allows; its chunks are numbered
// [chunk_begin, chunk_end). O(1).
gpu::CopyDesc DescribeCopy(const CopyPair& c, const unsigned char* src, unsigned char* dst, int64_t chunk_begin);

}  // namespace reshard
