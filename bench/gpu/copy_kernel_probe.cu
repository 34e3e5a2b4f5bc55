// Probe of the executor's on-GPU copy kernel on long contiguous runs: the
// warp-per-chunk grid-stride loop (executor/nccl/warp_copy.cuh) with the
// grid size, loads in flight per lane and chunk size varied, against
// cudaMemcpyAsync device-to-device on the same bytes. Tells which launch
// shape reaches the device-copy bound when no transfer shares the GPU.
// Prints one JSON object per line: variant, blocks, unroll, chunk_bytes,
// bytes, median_s, bytes_per_s (each byte read once and written once).
// CUDA failures: GpuError (executor/nccl/gpu_check.h), printed by main.
// Built by bench/CMakeLists.txt (target copy_kernel_probe).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <vector>

#include <cuda_runtime.h>

#include "executor/nccl/gpu_check.h"

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

// One warp copies n bytes (multiple of 16) with U 16-byte loads in flight per lane.
template <int U>
__device__ __forceinline__ void WarpCopyU(const uint4* s, uint4* d, int64_t count, int lane) {
  int64_t i = lane;
  for (; i + 32 * (U - 1) < count; i += 32 * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = s[i + 32 * u];
#pragma unroll
    for (int u = 0; u < U; ++u) d[i + 32 * u] = v[u];
  }
  for (; i < count; i += 32) d[i] = s[i];
}

// Spread: chunk c goes to warp c / blocks of block c % blocks, so a launch
// with fewer chunks than warps still uses every block (every SM).
template <int U, bool Spread>
__global__ void __launch_bounds__(kThreads) ChunkCopy(const unsigned char* src, unsigned char* dst, int64_t bytes,
                                                      int64_t chunk) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = (bytes + chunk - 1) / chunk;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  const int64_t first = Spread ? static_cast<int64_t>(threadIdx.x >> 5) * gridDim.x + blockIdx.x
                               : static_cast<int64_t>(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  for (int64_t c = first; c < chunks; c += warps) {
    const int64_t off = c * chunk;
    const int64_t n = min(chunk, bytes - off);
    WarpCopyU<U>(reinterpret_cast<const uint4*>(src + off), reinterpret_cast<uint4*>(dst + off), n / 16, lane);
  }
}

// Block-strided loop: every thread of the grid walks the whole range (no chunks).
__global__ void __launch_bounds__(kThreads) GridCopy(const uint4* src, uint4* dst, int64_t count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  for (; i + 3 * stride < count; i += 4 * stride) {
    const uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], e = src[i + 3 * stride];
    dst[i] = a;
    dst[i + stride] = b;
    dst[i + 2 * stride] = c;
    dst[i + 3 * stride] = e;
  }
  for (; i < count; i += stride) dst[i] = src[i];
}

struct Shape {
  const char* variant;
  int blocks;
  int unroll;
  int64_t chunk;
};

template <typename Launch>
double MedianSeconds(cudaStream_t s, cudaEvent_t a, cudaEvent_t b, Launch launch) {
  launch();  // warm-up
  RESHARD_GPU(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int r = 0; r < 7; ++r) {
    RESHARD_GPU(cudaEventRecord(a, s));
    launch();
    RESHARD_GPU(cudaEventRecord(b, s));
    RESHARD_GPU(cudaEventSynchronize(b));
    float ms = 0;
    RESHARD_GPU(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e-3);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int Probe() {
  int sms = 0;
  RESHARD_GPU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int64_t bytes = int64_t{1} << 30;
  unsigned char *src = nullptr, *dst = nullptr;
  RESHARD_GPU(cudaMalloc(&src, bytes));
  RESHARD_GPU(cudaMalloc(&dst, bytes));
  RESHARD_GPU(cudaMemset(src, 1, bytes));
  cudaStream_t s;
  cudaEvent_t a, b;
  RESHARD_GPU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  RESHARD_GPU(cudaEventCreate(&a));
  RESHARD_GPU(cudaEventCreate(&b));
  auto report = [&](const char* variant, int blocks, int unroll, int64_t chunk, int64_t n, double sec) {
    std::printf(
        "{\"variant\": \"%s\", \"sms\": %d, \"blocks\": %d, \"unroll\": %d, \"chunk_bytes\": %lld, \"bytes\": %lld, "
        "\"median_s\": %.9g, \"bytes_per_s\": %.6g}\n",
        variant, sms, blocks, unroll, static_cast<long long>(chunk), static_cast<long long>(n), sec, n / sec);
    std::fflush(stdout);
  };
  for (const int64_t n : {bytes, int64_t{16} << 20, int64_t{2} << 20}) {
    report("memcpy", 0, 0, 0, n, MedianSeconds(s, a, b, [&] {
             RESHARD_GPU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
           }));
    for (const int per_sm : {1, 2}) {
      const int blocks = sms * per_sm;
      report("grid", blocks, 4, 0, n, MedianSeconds(s, a, b, [&] {
               GridCopy<<<blocks, kThreads, 0, s>>>(reinterpret_cast<const uint4*>(src), reinterpret_cast<uint4*>(dst),
                                                    n / 16);
             }));
      for (const int64_t chunk : {int64_t{16} << 10, int64_t{64} << 10}) {
        report("chunk", blocks, 4, chunk, n,
               MedianSeconds(s, a, b, [&] { ChunkCopy<4, false><<<blocks, kThreads, 0, s>>>(src, dst, n, chunk); }));
        report("chunk", blocks, 8, chunk, n,
               MedianSeconds(s, a, b, [&] { ChunkCopy<8, false><<<blocks, kThreads, 0, s>>>(src, dst, n, chunk); }));
        report("spread", blocks, 4, chunk, n,
               MedianSeconds(s, a, b, [&] { ChunkCopy<4, true><<<blocks, kThreads, 0, s>>>(src, dst, n, chunk); }));
        report("spread", blocks, 8, chunk, n,
               MedianSeconds(s, a, b, [&] { ChunkCopy<8, true><<<blocks, kThreads, 0, s>>>(src, dst, n, chunk); }));
        report("spread", blocks, 16, chunk, n,
               MedianSeconds(s, a, b, [&] { ChunkCopy<16, true><<<blocks, kThreads, 0, s>>>(src, dst, n, chunk); }));
      }
    }
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return Probe();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "copy_kernel_probe: %s\n", e.what());
    return 1;
  }
}
