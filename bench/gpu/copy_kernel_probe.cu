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

// Cache hints of the loads and stores (PTX ISA, "ld" / "st" cache operators
// and the L2::256B prefetch size): 0 plain; 1 streaming (ld.global.cs /
// st.global.cs: evict first, the data is used once); 2 loads through the
// non-coherent path without L1 allocation plus a 256-byte L2 prefetch
// (ld.global.nc.L1::no_allocate.L2::256B), plain stores; 3 as 2 with
// streaming stores.
template <int Hint>
__device__ __forceinline__ uint4 Load(const uint4* p) {
  if constexpr (Hint == 1) return __ldcs(p);
  if constexpr (Hint >= 2) {
    uint4 v;
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
  }
  return *p;
}
template <int Hint>
__device__ __forceinline__ void Store(uint4* p, const uint4& v) {
  if constexpr (Hint == 1 || Hint == 3) __stcs(p, v);
  else *p = v;
}

// One warp copies n bytes (multiple of 16) with U 16-byte loads in flight per lane.
template <int U, int Hint = 0>
__device__ __forceinline__ void WarpCopyU(const uint4* s, uint4* d, int64_t count, int lane) {
  int64_t i = lane;
  for (; i + 32 * (U - 1) < count; i += 32 * U) {
    uint4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = Load<Hint>(s + i + 32 * u);
#pragma unroll
    for (int u = 0; u < U; ++u) Store<Hint>(d + i + 32 * u, v[u]);
  }
  for (; i < count; i += 32) Store<Hint>(d + i, Load<Hint>(s + i));
}

// The executor's shape (132 blocks, 8 in flight, 16 KiB chunks spread) with
// cache hints, and with Warps warps per block.
template <int Hint, int Warps>
__global__ void __launch_bounds__(32 * Warps) HintCopy(const unsigned char* src, unsigned char* dst, int64_t bytes,
                                                       int64_t chunk) {
  const int lane = threadIdx.x & 31;
  const int64_t chunks = (bytes + chunk - 1) / chunk;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * Warps;
  for (int64_t c = static_cast<int64_t>(threadIdx.x >> 5) * gridDim.x + blockIdx.x; c < chunks; c += warps) {
    const int64_t off = c * chunk;
    const int64_t n = min(chunk, bytes - off);
    WarpCopyU<8, Hint>(reinterpret_cast<const uint4*>(src + off), reinterpret_cast<uint4*>(dst + off), n / 16, lane);
  }
}

// Hopper's bulk copies (TMA; PTX cp.async.bulk): one lane per warp moves
// its chunks global -> shared -> global through two shared buffers, the load
// of a chunk waited on an mbarrier, its store left in flight while the next
// chunk loads (the buffer reused once its store has read it:
// cp.async.bulk.wait_group.read 1). No registers hold data; the SM issues
// two instructions per chunk. bytes must be a multiple of Chunk.
template <int Warps, int Chunk>
__global__ void __launch_bounds__(32 * Warps) TmaCopy(const unsigned char* src, unsigned char* dst, int64_t bytes) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ __align__(8) uint64_t bars[2 * Warps];
  const int warp = threadIdx.x >> 5;
  if ((threadIdx.x & 31) != 0) return;
  unsigned char* buf = smem + static_cast<size_t>(warp) * 2 * Chunk;
  uint64_t* bar = bars + 2 * warp;
  const uint32_t bar_addr[2] = {static_cast<uint32_t>(__cvta_generic_to_shared(bar)),
                                static_cast<uint32_t>(__cvta_generic_to_shared(bar + 1))};
  const uint32_t buf_addr[2] = {static_cast<uint32_t>(__cvta_generic_to_shared(buf)),
                                static_cast<uint32_t>(__cvta_generic_to_shared(buf + Chunk))};
  for (int b = 0; b < 2; ++b) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar_addr[b]));
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  uint32_t parity[2] = {0, 0};
  const int64_t chunks = bytes / Chunk;
  int k = 0;
  for (int64_t c = static_cast<int64_t>(warp) * gridDim.x + blockIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * Warps, ++k) {
    const int b = k & 1;
    asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");  // buffer b's store (chunk k - 2) has read it
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar_addr[b]), "r"(Chunk) : "memory");
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(buf_addr[b]),
        "l"(src + c * Chunk), "r"(Chunk), "r"(bar_addr[b])
        : "memory");
    asm volatile(
        "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(
            bar_addr[b]),
        "r"(parity[b])
        : "memory");
    parity[b] ^= 1;
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + c * Chunk), "r"(buf_addr[b]),
                 "r"(Chunk)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
  }
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
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
  // Cache hints and warps per block on the executor's shape; every size
  // measured from HBM (a 2x-L2 buffer written before each repetition would
  // be fairer for the small sizes; 1 GiB is far beyond the 50 MB L2).
  const char* const hint_names[] = {"hint_plain", "hint_streaming", "hint_nc_l2_256", "hint_nc_l2_256_cs"};
  for (const int64_t n : {bytes, int64_t{256} << 20}) {
    report("memcpy", 0, 0, 0, n, MedianSeconds(s, a, b, [&] {
             RESHARD_GPU(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToDevice, s));
           }));
    const int64_t chunk = int64_t{16} << 10;
    auto hint_row = [&](int h, int warps, auto kernel) {
      char name[64];
      std::snprintf(name, sizeof name, "%s_w%d", hint_names[h], warps);
      report(name, sms, 8, chunk, n,
             MedianSeconds(s, a, b, [&] { kernel<<<sms, 32 * warps, 0, s>>>(src, dst, n, chunk); }));
    };
    hint_row(0, 8, HintCopy<0, 8>);
    hint_row(1, 8, HintCopy<1, 8>);
    hint_row(2, 8, HintCopy<2, 8>);
    hint_row(3, 8, HintCopy<3, 8>);
    hint_row(0, 12, HintCopy<0, 12>);
    hint_row(0, 16, HintCopy<0, 16>);
    hint_row(2, 12, HintCopy<2, 12>);
    hint_row(2, 16, HintCopy<2, 16>);
    auto tma_row = [&](int warps, int chunk_bytes, auto kernel) {
      const int smem = warps * 2 * chunk_bytes;
      RESHARD_GPU(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
      char name[64];
      std::snprintf(name, sizeof name, "tma_w%d", warps);
      for (int per_sm : {1, 2}) {
        if (per_sm * smem > 220 * 1024) continue;
        report(name, sms * per_sm, 0, chunk_bytes, n,
               MedianSeconds(s, a, b, [&] { kernel<<<sms * per_sm, 32 * warps, smem, s>>>(src, dst, n); }));
      }
    };
    tma_row(8, 8 << 10, TmaCopy<8, 8 << 10>);
    tma_row(4, 16 << 10, TmaCopy<4, 16 << 10>);
    tma_row(12, 8 << 10, TmaCopy<12, 8 << 10>);
    tma_row(16, 4 << 10, TmaCopy<16, 4 << 10>);
    tma_row(6, 16 << 10, TmaCopy<6, 16 << 10>);
  }
  // The bulk copy checked: the destination equals the source.
  {
    std::vector<unsigned char> hs(1 << 20), hd(1 << 20);
    const int64_t offs[] = {0, bytes / 2, bytes - (1 << 20)};
    for (int64_t off : offs) {
      for (size_t i = 0; i < hs.size(); ++i) hs[i] = static_cast<unsigned char>((i * 2654435761u + off) >> 13);
      RESHARD_GPU(cudaMemcpy(src + off, hs.data(), hs.size(), cudaMemcpyHostToDevice));
    }
    RESHARD_GPU(cudaMemsetAsync(dst, 0, bytes, s));
    TmaCopy<8, 8 << 10><<<sms, 256, 8 * 2 * (8 << 10), s>>>(src, dst, bytes);
    RESHARD_GPU(cudaGetLastError());
    RESHARD_GPU(cudaStreamSynchronize(s));
    bool same = true;
    for (int64_t off : offs) {
      RESHARD_GPU(cudaMemcpy(hs.data(), src + off, hs.size(), cudaMemcpyDeviceToHost));
      RESHARD_GPU(cudaMemcpy(hd.data(), dst + off, hd.size(), cudaMemcpyDeviceToHost));
      same = same && hs == hd;
    }
    std::printf("{\"check\": \"tma_copy\", \"same\": %s}\n", same ? "true" : "false");
  }
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
