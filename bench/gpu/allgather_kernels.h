// The copy kernel of the all-gather refit baseline (bench/gpu/allgather_run.cc),
// behind a plain launch function so the driver compiles with the host compiler.
// Fill and check are the NCCL backend's (executor/nccl/kernels.h).
//
// Batched strided copy (pack and unpack): each copy is n0 x n1 rows of
// row_bytes contiguous bytes (allgather_copy.h DeviceCopy), rows cut into
// chunks of at most kChunkBytes; one warp copies one chunk with the widest
// vector (up to 16 B) that every address allows (executor/nccl/warp_copy.cuh).
// Descriptors hold arena offsets; the arenas' bases come with each launch. A
// launch spreads the chunks of all its copies over the grid; a warp finds its
// copy by binary search.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "bench/gpu/allgather_copy.h"

namespace reshard::baseline {

// descs: device memory, chunk ranges consecutive from 0 to total_chunks; offsets
// into the arenas that `bases` locates (by value: arenas may move between runs).
cudaError_t LaunchCopies(const DeviceCopy* descs, int32_t count, int64_t total_chunks, const ArenaBases& bases,
                         int32_t max_blocks, cudaStream_t s);
// Launches the copy kernel with no work: loads it (lazy module loading) before memory is measured.
cudaError_t WarmCopyKernel(cudaStream_t s);

}  // namespace reshard::baseline
