// The all-gather baseline's copy kernel (see allgather_kernels.h).
#include "bench/gpu/allgather_kernels.h"

#include "executor/nccl/kernels.h"
#include "executor/nccl/warp_copy.cuh"

namespace reshard::baseline {

namespace {

using gpu::kBlockThreads;
using gpu::kBlockWarps;

__global__ void __launch_bounds__(kBlockThreads) CopyKernel(const DeviceCopy* descs, int32_t count, int64_t total,
                                                            const ArenaBases params) {
  // Indexed by arena: from shared memory (indexing the parameter would copy it to local memory).
  __shared__ ArenaBases bases;
  if (threadIdx.x == 0) bases = params;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  for (int64_t c = gpu::FirstChunk(); c < total; c += gpu::ChunkStep()) {
    const DeviceCopy& d = descs[gpu::ChunkOwner(descs, count, c)];
    const unsigned char* s = nullptr;
    unsigned char* t = nullptr;
    int64_t n = 0;
    ChunkAt(d, bases, c, &s, &t, &n);
    gpu::WarpCopyVec(d.vec, s, t, n, lane);
  }
}

}  // namespace

cudaError_t LaunchCopies(const DeviceCopy* descs, int32_t count, int64_t total_chunks, const ArenaBases& bases,
                         int32_t max_blocks, cudaStream_t s) {
  if (count == 0 || total_chunks == 0) return cudaSuccess;
  CopyKernel<<<gpu::LaunchBlocks((total_chunks + kBlockWarps - 1) / kBlockWarps, max_blocks), kBlockThreads, 0, s>>>(
      descs, count, total_chunks, bases);
  return cudaGetLastError();
}

cudaError_t WarmCopyKernel(cudaStream_t s) {
  CopyKernel<<<1, kBlockThreads, 0, s>>>(nullptr, 0, 0, ArenaBases{});
  return cudaGetLastError();
}

}  // namespace reshard::baseline
