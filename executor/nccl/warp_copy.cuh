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
template <typename T>
__device__ __forceinline__ void WarpCopy(const unsigned char* s, unsigned char* d, int64_t n, int lane) {
  const T* src = reinterpret_cast<const T*>(s);
  T* dst = reinterpret_cast<T*>(d);
  const int64_t count = n / static_cast<int64_t>(sizeof(T));
  int64_t i = lane;
  // Four loads in flight per lane before the stores: memory-level parallelism.
  for (; i + 96 < count; i += 128) {
    const T a = src[i], b = src[i + 32], c = src[i + 64], e = src[i + 96];
    dst[i] = a;
    dst[i + 32] = b;
    dst[i + 64] = c;
    dst[i + 96] = e;
  }
  for (; i < count; i += 32) dst[i] = src[i];
}

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

}  // namespace reshard::gpu
