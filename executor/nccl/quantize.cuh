// Device building blocks of the fp8 quantize kernels (CUDA code only): CTA
// max, the exact fast division by a scale with the hardware E4M3 conversion,
// and the amax / conversion of one 16-byte chunk of 8 bf16. The backend's
// quantize kernels (quantize_kernels.cu) and its quantized-piece check
// (kernels.cu) share them, so both compute a block's scale the same way.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "executor/quantize_math.h"

#include "executor/nccl/warp_copy.cuh"

namespace reshard::gpu {

// A bf16x2 from its bits.
__device__ __forceinline__ __nv_bfloat162 BitsBf162(uint32_t w) {
  __nv_bfloat162 x;
  *reinterpret_cast<uint32_t*>(&x) = w;
  return x;
}

// The max of every thread's `m` over the CTA, returned to all threads (max is
// exact, so any order gives the host's value). Every thread must call it.
__device__ __forceinline__ float CtaMax(float m) {
  __shared__ float warp_max[kBlockWarps];
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  float all = 0.0f;
  for (int w = 0; w < kBlockWarps; ++w) all = fmaxf(all, warp_max[w]);
  __syncthreads();  // warp_max is reused by the next block
  return all;
}

// The largest |bf16| of a block's elements [r0, r1) x [c0, c1), reduced over
// the CTA; load(r, c) reads one element.
template <typename Load>
__device__ __forceinline__ float BlockAmax(int64_t r0, int64_t r1, int64_t c0, int64_t c1, Load load) {
  const int64_t cols = c1 - c0, n = (r1 - r0) * cols;
  float m = 0.0f;
  for (int64_t k = threadIdx.x; k < n; k += blockDim.x) m = fmaxf(m, fabsf(load(r0 + k / cols, c0 + k % cols)));
  return CtaMax(m);
}

// Two elements x / s to E4M3 (low byte: a), bit for bit QuantizeElement's
// without an IEEE division or the bit-by-bit rounding per element:
//  * r = RN(1/s), q = RN(x r) is within an ulp of x / s; with the exact
//    remainder x - s q (one fma), RN(q + (x - s q) r) is RN(x / s)
//    (Markstein's theorem; holds while nothing underflows, so the caller
//    takes this path only for normal s and r);
//  * |q| < 2^-11 means |x / s| < 2^-10, which E4M3 rounds to a signed zero
//    (the tie at 2^-10 goes to the even 0): the sign alone, never the
//    subnormal quotient the correction could round differently (without
//    this test 2,938 of the probe's 199.8 M (bf16, scale) pairs differ on an
//    H200: bench/results/2026-12-02-h200-copy-merge-events);
//  * the hardware's cvt.rn.satfinite.e4m3x2.f32 rounds to nearest even and
//    saturates to +-448 as E4M3FromFloat does (checked over every fp32 on an
//    H200 by bench/gpu/quantize_kernel_probe.cu).
__device__ __forceinline__ float DivByScale(float x, float s, float r) {
  const float q = x * r;
  if (fabsf(q) < 0x1p-11f) return copysignf(0.0f, x);
  return fmaf(fmaf(-s, q, x), r, q);
}
// How a block's values are divided by its scale s (ScaleMode):
//  * kQuantSoftware: QuantizeElement per element (s or 1/s not normal);
//  * kQuantDivide: DivByScale;
//  * kQuantPow2: s is a power of two (E8M0 / UE8M0 scales), so x * (1/s) is
//    x / s exactly, or below 2^-126 where E4M3 rounds both to a signed zero.
enum : int { kQuantSoftware = 0, kQuantDivide = 1, kQuantPow2 = 2 };
__device__ __forceinline__ uint32_t QuantizePair(float a, float b, float s, float r, int mode) {
  if (mode == kQuantSoftware) return QuantizeElement(a, s) | static_cast<uint32_t>(QuantizeElement(b, s)) << 8;
  if (mode == kQuantPow2) return __nv_cvt_float2_to_fp8x2(make_float2(a * r, b * r), __NV_SATFINITE, __NV_E4M3);
  return __nv_cvt_float2_to_fp8x2(make_float2(DivByScale(a, s, r), DivByScale(b, s, r)), __NV_SATFINITE, __NV_E4M3);
}
// Whether DivByScale is exact for scale s (s and 1/s normal).
__device__ __forceinline__ bool FastScale(float s) { return s >= 0x1p-125f && s <= 0x1p125f; }
// The mode for scale s with the hardware conversion.
__device__ __forceinline__ int ScaleMode(float s) {
  if (!FastScale(s)) return kQuantSoftware;
  return (__float_as_uint(s) & 0x7FFFFFu) == 0 ? kQuantPow2 : kQuantDivide;
}

// The largest magnitudes of a 16-byte chunk's 8 bf16 and of m, kept as two
// bf16 (a bf16x2 max on the magnitudes, sign bits cleared: one instruction
// per 4 bytes where fp32 took four). Exact: a max returns one of its inputs,
// and bf16 max keeps subnormals (no flush) and returns the other operand of
// a NaN as the host's compare does (checked over every pair of magnitudes by
// ConvertCheckKernel). The fp32 form per element spilled registers in the
// 128 x 128 kernel and held it at 0.75 of cudaMemcpyAsync's traffic rate on
// an H200 against 0.94-0.98 packed (bench/gpu/quantize_variants_probe.cu).
__device__ __forceinline__ __nv_bfloat162 ChunkAmax2(const uint4& v, __nv_bfloat162 m) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int h = 0; h < 4; ++h) m = __hmax2(m, BitsBf162(w[h] & 0x7FFF7FFFu));
  return m;
}
// The larger half of a ChunkAmax2 result, as fp32 (exact).
__device__ __forceinline__ float Amax2Float(__nv_bfloat162 m) { return fmaxf(__low2float(m), __high2float(m)); }
__device__ __forceinline__ __nv_bfloat162 ZeroBf162() { return BitsBf162(0u); }
// The largest |x| of m and the 8 bf16 of a chunk, as fp32.
__device__ __forceinline__ float ChunkAmax(const uint4& v, float m) {
  return fmaxf(m, Amax2Float(ChunkAmax2(v, ZeroBf162())));
}
// The 8 bf16 of a chunk quantized with scale s (rs = 1/s): 8 E4M3 bytes.
__device__ __forceinline__ uint2 QuantizeChunk(const uint4& v, float s, float rs, int mode) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t q[2] = {0, 0};
#pragma unroll
  for (int h = 0; h < 4; ++h)  // elements 2h, 2h + 1 (little endian)
    q[h / 2] |= QuantizePair(BitsFloat(w[h] << 16), BitsFloat(w[h] & 0xFFFF0000u), s, rs, mode) << (16 * (h % 2));
  return make_uint2(q[0], q[1]);
}

// A chunk divided exactly by s (DivByScale) or, for a power-of-two s,
// multiplied by rs = 1 / s: QuantizeChunk without its software branch, whose
// registers the 128 x 128 kernel's loop cannot afford.
__device__ __forceinline__ uint2 QuantizeChunkFast(const uint4& v, float s, float rs, int mode) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t q[2] = {0, 0};
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    const float a = BitsFloat(w[h] << 16), c = BitsFloat(w[h] & 0xFFFF0000u);
    const float2 f =
        mode == kQuantPow2 ? make_float2(a * rs, c * rs) : make_float2(DivByScale(a, s, rs), DivByScale(c, s, rs));
    q[h / 2] |= static_cast<uint32_t>(__nv_cvt_float2_to_fp8x2(f, __NV_SATFINITE, __NV_E4M3)) << (16 * (h % 2));
  }
  return make_uint2(q[0], q[1]);
}

}  // namespace reshard::gpu
