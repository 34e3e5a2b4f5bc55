// Candidate 128 x 128 fp8 quantize kernels, timed against the backend's
// (issue 19: the quantize kernel at >= 0.8 of cudaMemcpyAsync's traffic rate).
// Each candidate quantizes one whole block per CTA iteration (T threads, 2048 /
// T chunks of 8 bf16 each), prefetching the next block into registers, and
// varies one thing:
//  * T and the registers per thread (occupancy: 256 threads x 8 chunks, 512 x
//    4, 1024 x 2);
//  * the amax: fp32 per element (the backend's ChunkAmax) or packed bf16x2
//    max of magnitudes (exact: the max of bf16 values is one of them);
//  * the division: exact per element (the backend's DivByScale), "lazy"
//    (q = RN(x * RN(1/s)) converted directly, the exact path only for a chunk
//    of a warp where some q lies within 16 fp32 ulps of an E4M3 rounding
//    boundary), or a diagnostic x * (1/s) alone (wrong bytes for fp32 scales:
//    it shows what the division costs).
// Every candidate's bytes and scales are compared with the backend's on the
// validate pattern and on weight-like values; one JSON line per (candidate,
// grid).
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "executor/nccl/gpu_check.h"
#include "executor/nccl/kernels.h"
#include "executor/nccl/quantize.cuh"
#include "executor/pattern.h"
#include "executor/quantize_math.h"

namespace {

using reshard::QuantizeJob;
using namespace reshard;
using namespace reshard::gpu;

__global__ void FillKernel(uint16_t* x, int64_t n, int kind) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint16_t v = reshard::FiniteBf16Pattern(7, i);
    if (kind == 1) v = static_cast<uint16_t>((v & 0x807Fu) | ((113u + ((v >> 7) & 15u) % 12u) << 7));
    x[i] = v;
  }
}

enum : int { kDivExact = 0, kDivLazy = 1, kDivMulOnly = 2 };

// Whether fp32 q may round to another E4M3 value than a float within a few
// ulps of it: E4M3's rounding boundaries (midpoints of normals and of
// subnormals, and 2^-10) all have mantissa bits 18..0 zero; values below
// 2^-12 round to a signed zero whatever their neighbours.
__device__ __forceinline__ bool NearBoundary(float q) {
  const uint32_t b = __float_as_uint(q);
  return ((b + 16u) & 0x7FFFFu) <= 32u && fabsf(q) >= 0x1p-12f;
}

template <int T, int MinCtas, int Div, bool Packed>
__global__ void __launch_bounds__(T, MinCtas) CandidateKernel(const QuantizeJob j, const unsigned char* in,
                                                              unsigned char* out, unsigned char* sc) {
  constexpr int C = 2048 / T;  // chunks per thread
  constexpr int W = T / 32;
  __shared__ float warp_max[2][W];
  int parity = 0;
  const int64_t bcols = j.BlockCols(), total = j.BlockRows() * bcols;
  auto base_of = [&](int64_t b) { return in + (b / bcols) * 128 * j.in_row + 2 * 128 * (b % bcols); };
  const int col = threadIdx.x % 16, row0 = threadIdx.x / 16;
  uint4 v[C];
  int64_t b = blockIdx.x;
  auto load = [&](int64_t blk) {
    const unsigned char* p = base_of(blk);
#pragma unroll
    for (int i = 0; i < C; ++i) v[i] = *reinterpret_cast<const uint4*>(p + (row0 + i * (T / 16)) * j.in_row + 16 * col);
  };
  if (b < total) load(b);
  for (; b < total; b += gridDim.x) {
    float m;
    if constexpr (Packed) {
      __nv_bfloat162 m2 = __float2bfloat162_rn(0.0f);
#pragma unroll
      for (int i = 0; i < C; ++i) m2 = ChunkAmax2(v[i], m2);
      m = fmaxf(__low2float(m2), __high2float(m2));
    } else {
      m = 0.0f;
#pragma unroll
      for (int i = 0; i < C; ++i) m = ChunkAmax(v[i], m);
    }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) warp_max[parity][threadIdx.x >> 5] = m;
    __syncthreads();
    float amax = 0.0f;
#pragma unroll
    for (int w = 0; w < W; ++w) amax = fmaxf(amax, warp_max[parity][w]);
    parity ^= 1;
    const float s = QuantScale(amax, j.scale_format);
    const float rs = 1.0f / s;
    const int mode = ScaleMode(s);
    const int64_t br = b / bcols, bc = b % bcols;
    if (threadIdx.x == 0) StoreElement(sc + br * j.sc_row + bc * j.scale_bytes, j.scale_bytes, ScaleStoredBits(s, j.scale_format));
    unsigned char* obase = out + br * 128 * j.out_row + 128 * bc;
    if (mode == kQuantSoftware) {
      // s or 1 / s not a normal number (rare): QuantizeElement per element,
      // reading the block again so that v is dead here.
#pragma unroll 1
      for (int i = 0; i < C; ++i) {
        const int r = row0 + i * (T / 16);
        const uint4 x = *reinterpret_cast<const uint4*>(base_of(b) + r * j.in_row + 16 * col);
        *reinterpret_cast<uint2*>(obase + r * j.out_row + 8 * col) = QuantizeChunk(x, s, rs, kQuantSoftware);
      }
    } else {
#pragma unroll
      for (int i = 0; i < C; ++i) {
        uint2 q;
        if (Div == kDivExact) {
          q = QuantizeChunkFast(v[i], s, rs, mode);
        } else {
          const uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
          uint32_t o[2] = {0, 0};
          bool near = false;
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const float a = BitsFloat(w[h] << 16) * rs, c = BitsFloat(w[h] & 0xFFFF0000u) * rs;
            if (Div == kDivLazy) near |= NearBoundary(a) | NearBoundary(c);
            o[h / 2] |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(make_float2(a, c), __NV_SATFINITE, __NV_E4M3))
                        << (16 * (h % 2));
          }
          q = make_uint2(o[0], o[1]);
          if (Div == kDivLazy && mode == kQuantDivide && __any_sync(0xffffffffu, near)) q = QuantizeChunkFast(v[i], s, rs, mode);
        }
        *reinterpret_cast<uint2*>(obase + (row0 + i * (T / 16)) * j.out_row + 8 * col) = q;
      }
    }
    if (b + gridDim.x < total) load(b + gridDim.x);
  }
}

struct Candidate {
  const char* name;
  void (*launch)(const QuantizeJob&, const unsigned char*, unsigned char*, unsigned char*, int, cudaStream_t);
};
template <int T, int MinCtas, int Div, bool Packed>
void Launch(const QuantizeJob& j, const unsigned char* in, unsigned char* out, unsigned char* sc, int blocks,
            cudaStream_t s) {
  CandidateKernel<T, MinCtas, Div, Packed><<<blocks, T, 0, s>>>(j, in, out, sc);
}

float MedianMs(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main() {
  int sms = 0;
  RESHARD_GPU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  RESHARD_GPU(cudaStreamCreate(&s));
  cudaEvent_t a, b;
  RESHARD_GPU(cudaEventCreate(&a));
  RESHARD_GPU(cudaEventCreate(&b));
  QuantizeJob j;
  j.rows = 53248;
  j.cols = 4096;
  j.block_rows = j.block_cols = 128;
  j.in_row = 2 * j.cols;
  j.out_row = j.cols;
  const int64_t n = j.rows * j.cols, in_bytes = 2 * n;
  unsigned char *in = nullptr, *out = nullptr, *sc = nullptr, *copy = nullptr;
  RESHARD_GPU(cudaMalloc(&in, in_bytes));
  RESHARD_GPU(cudaMalloc(&out, n));
  RESHARD_GPU(cudaMalloc(&copy, in_bytes));
  const int reps = 15;
  auto time_it = [&](auto launch) {
    std::vector<float> ms;
    launch();
    for (int r = 0; r < reps; ++r) {
      RESHARD_GPU(cudaEventRecord(a, s));
      launch();
      RESHARD_GPU(cudaEventRecord(b, s));
      RESHARD_GPU(cudaEventSynchronize(b));
      float t = 0;
      RESHARD_GPU(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    return MedianMs(ms);
  };
  const float copy_ms = time_it([&] { RESHARD_GPU(cudaMemcpyAsync(copy, in, in_bytes, cudaMemcpyDeviceToDevice, s)); });
  std::printf("{\"variant\": \"memcpy_d2d\", \"bytes\": %lld, \"median_ms\": %.4f, \"traffic_tb_s\": %.3f}\n",
              static_cast<long long>(in_bytes), copy_ms, 2.0 * in_bytes / (copy_ms * 1e-3) / 1e12);
  const Candidate candidates[] = {
      {"t256_exact", Launch<256, 4, kDivExact, false>},
      {"t256_exact_packed", Launch<256, 4, kDivExact, true>},
      {"t256_lazy", Launch<256, 4, kDivLazy, false>},
      {"t256_lazy_packed", Launch<256, 4, kDivLazy, true>},
      {"t256_mulonly_packed", Launch<256, 4, kDivMulOnly, true>},
      {"t512_exact", Launch<512, 3, kDivExact, false>},
      {"t512_lazy_packed", Launch<512, 3, kDivLazy, true>},
      {"t512_mulonly_packed", Launch<512, 3, kDivMulOnly, true>},
      {"t1024_exact", Launch<1024, 2, kDivExact, false>},
      {"t1024_lazy_packed", Launch<1024, 2, kDivLazy, true>},
      {"t1024_mulonly_packed", Launch<1024, 2, kDivMulOnly, true>},
  };
  std::vector<unsigned char> ref_out(n), got_out(n);
  for (int format : {0, 1}) {  // fp32 scales, UE8M0 scales
    j.scale_format = format;
    j.scale_bytes = format == 0 ? 4 : 1;
    j.sc_row = j.scale_bytes * j.BlockCols();
    const int64_t sc_bytes = j.sc_row * j.BlockRows();
    RESHARD_GPU(cudaFree(sc));
    RESHARD_GPU(cudaMalloc(&sc, sc_bytes));
    std::vector<unsigned char> ref_sc(sc_bytes), got_sc(sc_bytes);
    for (int kind : {0, 1}) {
      FillKernel<<<sms * 8, 256, 0, s>>>(reinterpret_cast<uint16_t*>(in), n, kind);
      RESHARD_GPU(cudaGetLastError());
      auto fetch = [&](std::vector<unsigned char>& o, std::vector<unsigned char>& c) {
        RESHARD_GPU(cudaMemcpyAsync(o.data(), out, n, cudaMemcpyDeviceToHost, s));
        RESHARD_GPU(cudaMemcpyAsync(c.data(), sc, sc_bytes, cudaMemcpyDeviceToHost, s));
        RESHARD_GPU(cudaStreamSynchronize(s));
      };
      auto report = [&](const char* name, int per_sm, float ms, bool same) {
        std::printf("{\"variant\": \"%s\", \"scales\": \"%s\", \"fill\": \"%s\", \"ctas_per_sm\": %d, "
                    "\"median_ms\": %.4f, \"traffic_tb_s\": %.3f, \"of_memcpy\": %.3f, \"same_bytes\": %s}\n",
                    name, format == 0 ? "fp32" : "ue8m0", kind == 0 ? "pattern" : "weights", per_sm, ms,
                    1.5 * in_bytes / (ms * 1e-3) / 1e12, (1.5 * in_bytes / ms) / (2.0 * in_bytes / copy_ms),
                    same ? "true" : "false");
        std::fflush(stdout);
      };
      // The backend's auto path (the reference bytes) at its grid and at 32 per SM.
      for (int per_sm : {16, 32}) {
        RESHARD_GPU(cudaMemsetAsync(out, 0xA5, n, s));
        const float ms = time_it([&] { RESHARD_GPU(LaunchQuantize(j, in, out, sc, s, sms * per_sm)); });
        fetch(got_out, got_sc);
        if (per_sm == 16) ref_out = got_out, ref_sc = got_sc;
        report("backend_auto", per_sm, ms, got_out == ref_out && got_sc == ref_sc);
      }
      for (const Candidate& c : candidates)
        for (int per_sm : {4, 8, 16, 32}) {
          RESHARD_GPU(cudaMemsetAsync(out, 0xA5, n, s));
          const float ms = time_it([&] {
            c.launch(j, in, out, sc, sms * per_sm, s);
            RESHARD_GPU(cudaGetLastError());
          });
          fetch(got_out, got_sc);
          report(c.name, per_sm, ms, got_out == ref_out && got_sc == ref_sc);
        }
    }
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return Main();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantize_variants_probe: %s\n", e.what());
    return 1;
  }
}
