// CUDA kernels of the all-gather refit baseline (bench/gpu/allgather_baseline.cc),
// behind plain launch functions so the driver compiles with the host compiler.
//
//  * Batched strided copy (pack and unpack): each copy is n0 x n1 rows of
//    row_bytes contiguous bytes (allgather_plan.h ByteCopy), rows cut into
//    chunks of at most kChunkBytes; one warp copies one chunk with the widest
//    vector (up to 16 B) that every address allows. Descriptors hold arena
//    offsets; the arenas' bases come with each launch. A launch spreads the chunks
//    of all its copies over the grid; a warp finds its copy by binary search.
//  * Fill / check of the pattern (executor/pattern.h) over one PieceMap, tiles
//    of 1024 elements along the innermost dimension, grid-stride.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "bench/gpu/allgather_copy.h"
#include "executor/pattern.h"

namespace reshard::baseline {

// descs: device memory, chunk ranges consecutive from 0 to total_chunks; offsets
// into the arenas that `bases` locates (by value: arenas may move between runs).
cudaError_t LaunchCopies(const DeviceCopy* descs, int32_t count, int64_t total_chunks, const ArenaBases& bases,
                         int32_t max_blocks, cudaStream_t s);
// Launches the copy kernel with no work: loads it (lazy module loading) before memory is measured.
cudaError_t WarmCopyKernel(cudaStream_t s);

struct CheckCounter {
  unsigned long long mismatches;
  unsigned long long first_index;  // smallest mismatching global index (ULLONG_MAX: none)
};
cudaError_t LaunchFill(unsigned char* base, const PieceMap& m, int32_t max_blocks, cudaStream_t s);
cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, CheckCounter* out, int32_t max_blocks,
                        cudaStream_t s);

}  // namespace reshard::baseline
