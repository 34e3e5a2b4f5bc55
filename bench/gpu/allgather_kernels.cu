// Kernels of the all-gather refit baseline (see allgather_kernels.h).
#include "bench/gpu/allgather_kernels.h"

#include <algorithm>

namespace reshard::baseline {

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kTile = 1024;

template <typename T>
__device__ __forceinline__ void WarpCopy(const unsigned char* s, unsigned char* d, int64_t n, int lane) {
  const T* src = reinterpret_cast<const T*>(s);
  T* dst = reinterpret_cast<T*>(d);
  const int64_t count = n / static_cast<int64_t>(sizeof(T));
  int64_t i = lane;
  // Four loads in flight per lane before the stores.
  for (; i + 96 < count; i += 128) {
    const T a = src[i], b = src[i + 32], c = src[i + 64], e = src[i + 96];
    dst[i] = a;
    dst[i + 32] = b;
    dst[i + 64] = c;
    dst[i + 96] = e;
  }
  for (; i < count; i += 32) dst[i] = src[i];
}

__global__ void __launch_bounds__(kThreads) CopyKernel(const DeviceCopy* descs, int32_t count, int64_t total,
                                                       const ArenaBases params) {
  // Indexed by arena: from shared memory (indexing the parameter would copy it to local memory).
  __shared__ ArenaBases bases;
  if (threadIdx.x == 0) bases = params;
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5); c < total; c += warps) {
    int lo = 0, hi = count - 1;  // first copy whose chunk_end > c
    while (lo < hi) {
      const int mid = (lo + hi) / 2;
      if (descs[mid].chunk_end <= c) lo = mid + 1;
      else hi = mid;
    }
    const DeviceCopy& d = descs[lo];
    const unsigned char* s = nullptr;
    unsigned char* t = nullptr;
    int64_t n = 0;
    ChunkAt(d, bases, c, &s, &t, &n);
    switch (d.vec) {
      case 16: WarpCopy<uint4>(s, t, n, lane); break;
      case 8: WarpCopy<unsigned long long>(s, t, n, lane); break;
      case 4: WarpCopy<unsigned int>(s, t, n, lane); break;
      case 2: WarpCopy<unsigned short>(s, t, n, lane); break;
      default: WarpCopy<unsigned char>(s, t, n, lane); break;
    }
  }
}

__global__ void __launch_bounds__(kThreads) FillKernel(unsigned char* base, const PieceMap m) {
  const int64_t tiles_per_row = (m.extent[2] + kTile - 1) / kTile;
  const int64_t tiles = m.Rows() * tiles_per_row;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row = t / tiles_per_row;
    const int64_t col0 = (t - row * tiles_per_row) * kTile;
    const int64_t col1 = min(col0 + kTile, m.extent[2]);
    int64_t g0 = 0, l0 = 0;
    PieceRowStart(m, row, &g0, &l0);
    for (int64_t i = col0 + threadIdx.x; i < col1; i += blockDim.x)
      StoreElement(base + (l0 + i * m.local_stride[2]) * m.elem_bytes, m.elem_bytes,
                   PatternValue(m.tensor, g0 + i * m.global_stride[2], m.elem_bytes));
  }
}

__global__ void __launch_bounds__(kThreads) CheckKernel(const unsigned char* base, const PieceMap m, CheckCounter* out) {
  const int64_t tiles_per_row = (m.extent[2] + kTile - 1) / kTile;
  const int64_t tiles = m.Rows() * tiles_per_row;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row = t / tiles_per_row;
    const int64_t col0 = (t - row * tiles_per_row) * kTile;
    const int64_t col1 = min(col0 + kTile, m.extent[2]);
    int64_t g0 = 0, l0 = 0;
    PieceRowStart(m, row, &g0, &l0);
    for (int64_t i = col0 + threadIdx.x; i < col1; i += blockDim.x) {
      const int64_t g = g0 + i * m.global_stride[2];
      const uint64_t got = LoadElement(base + (l0 + i * m.local_stride[2]) * m.elem_bytes, m.elem_bytes);
      if (got != PatternValue(m.tensor, g, m.elem_bytes)) {
        atomicAdd(&out->mismatches, 1ull);
        atomicMin(&out->first_index, static_cast<unsigned long long>(g));
      }
    }
  }
}

int32_t Blocks(int64_t work, int32_t max_blocks) {
  return static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(work, std::max(max_blocks, 1))));
}

}  // namespace

cudaError_t LaunchCopies(const DeviceCopy* descs, int32_t count, int64_t total_chunks, const ArenaBases& bases,
                         int32_t max_blocks, cudaStream_t s) {
  if (count == 0 || total_chunks == 0) return cudaSuccess;
  CopyKernel<<<Blocks((total_chunks + kWarps - 1) / kWarps, max_blocks), kThreads, 0, s>>>(descs, count, total_chunks,
                                                                                          bases);
  return cudaGetLastError();
}

cudaError_t WarmCopyKernel(cudaStream_t s) {
  CopyKernel<<<1, kThreads, 0, s>>>(nullptr, 0, 0, ArenaBases{});
  return cudaGetLastError();
}

cudaError_t LaunchFill(unsigned char* base, const PieceMap& m, int32_t max_blocks, cudaStream_t s) {
  if (m.Elements() == 0) return cudaSuccess;
  const int64_t tiles = m.Rows() * ((m.extent[2] + kTile - 1) / kTile);
  FillKernel<<<Blocks(tiles, max_blocks), kThreads, 0, s>>>(base, m);
  return cudaGetLastError();
}

cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, CheckCounter* out, int32_t max_blocks,
                        cudaStream_t s) {
  if (m.Elements() == 0) return cudaSuccess;
  const int64_t tiles = m.Rows() * ((m.extent[2] + kTile - 1) / kTile);
  CheckKernel<<<Blocks(tiles, max_blocks), kThreads, 0, s>>>(base, m, out);
  return cudaGetLastError();
}

}  // namespace reshard::baseline
