// Device building blocks of the batched copy kernels (CUDA code only): the
// NCCL backend's (kernels.cu) and the all-gather baseline's
// (bench/gpu/allgather_kernels.cu). A launch spreads the chunks of all its
// copies over the grid, one warp per chunk.
#pragma once

#include <cstdint>

namespace reshard::gpu {

inline constexpr int kBlockThreads = 256;
inline constexpr int kBlockWarps = kBlockThreads / 32;

// One warp copies n bytes (a multiple of sizeof(T)) from s to d, T-wide.
// Eight loads in flight per lane before the stores (memory-level
// parallelism): on an H200 this took a 1 GiB copy on 264 blocks from 1.95 to
// 1.97-1.98 TB/s and on 132 blocks from 1.79 to 2.02 TB/s
// (bench/gpu/copy_kernel_probe.cu).
template <typename T>
__device__ __forceinline__ void WarpCopy(const unsigned char* s, unsigned char* d, int64_t n, int lane) {
  constexpr int kInFlight = 8;
  const T* src = reinterpret_cast<const T*>(s);
  T* dst = reinterpret_cast<T*>(d);
  const int64_t count = n / static_cast<int64_t>(sizeof(T));
  int64_t i = lane;
  for (; i + 32 * (kInFlight - 1) < count; i += 32 * kInFlight) {
    T v[kInFlight];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) v[u] = src[i + 32 * u];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) dst[i + 32 * u] = v[u];
  }
  for (; i < count; i += 32) dst[i] = src[i];
}

// The first chunk of the calling warp and the step between its chunks. Chunk
// c goes to warp c / blocks of block c % blocks: a launch with fewer chunks
// than warps still spreads them over every block, hence every SM (a 16 MiB
// copy on 264 blocks: 0.91 TB/s numbered block-major, 1.54 spread).
__device__ __forceinline__ int64_t FirstChunk() {
  return static_cast<int64_t>(threadIdx.x >> 5) * gridDim.x + blockIdx.x;
}
__device__ __forceinline__ int64_t ChunkStep() { return static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5); }

// WarpCopy with `vec` bytes per load and store (16, 8, 4, 2, else 1).
__device__ __forceinline__ void WarpCopyVec(int32_t vec, const unsigned char* s, unsigned char* d, int64_t n,
                                            int lane) {
  switch (vec) {
    case 16: WarpCopy<uint4>(s, d, n, lane); break;
    case 8: WarpCopy<unsigned long long>(s, d, n, lane); break;
    case 4: WarpCopy<unsigned int>(s, d, n, lane); break;
    case 2: WarpCopy<unsigned short>(s, d, n, lane); break;
    default: WarpCopy<unsigned char>(s, d, n, lane); break;
  }
}

// The first of `count` descriptors (chunk ranges consecutive and ascending)
// whose chunk_end > c: binary search, O(log count).
template <typename Desc>
__device__ __forceinline__ int ChunkOwner(const Desc* descs, int32_t count, int64_t c) {
  int lo = 0, hi = count - 1;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (descs[mid].chunk_end <= c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// ChunkOwner for a warp whose chunks only grow: the owner of c at or after
// `from` (the owner of the warp's previous chunk), by an exponential then a
// binary search, O(log distance) dependent loads instead of O(log count)
// (a copy of ~1,000 pairs read 10 descriptors before each 16 KiB chunk).
template <typename Desc>
__device__ __forceinline__ int ChunkOwnerFrom(const Desc* descs, int32_t count, int64_t c, int from) {
  if (descs[from].chunk_end > c) return from;
  int lo = from + 1, hi = lo, step = 1;  // invariant: descs[lo - 1].chunk_end <= c
  while (hi < count - 1 && descs[hi].chunk_end <= c) {
    lo = hi + 1;
    step *= 2;
    hi = min(count - 1, lo + step - 1);
  }
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (descs[mid].chunk_end <= c) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

}  // namespace reshard::gpu
