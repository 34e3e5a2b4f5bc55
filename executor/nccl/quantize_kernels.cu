// The fp8 quantize kernels of the NCCL backend (see kernels.h), each bit for
// bit the host's QuantizeBlock (executor/quantize_math.h):
//  * QuantizeKernelWide: 128-column blocks (DeepSeek's 128 x 128), up to four
//    side by side per CTA;
//  * QuantizeKernelVec: other blocks that fit a CTA's registers;
//  * QuantizeKernelRow: one-row blocks (MXFP8's 1 x 32), several per warp;
//  * the per-matrix kernels: an amax pass over the whole grid, then a
//    quantize pass;
//  * QuantizeKernel: anything else (unaligned), one CTA per block.
#include <cuda_fp8.h>

#include "executor/nccl/kernels.h"
#include "executor/nccl/quantize.cuh"

namespace reshard::gpu {

namespace {

// Fast path of QuantizeKernel for blocks whose rows are whole 16-byte chunks
// (8 bf16) at 16-byte-aligned addresses and that fit the CTA's registers
// (at most kFastChunks chunks per thread): each thread loads its chunks of the
// block once (uint4), the CTA reduces the amax, then each chunk is quantized
// from registers and written as 8 bytes. One HBM read and one write per
// element; 32-bit index arithmetic. Same arithmetic as QuantizeBlock.
// HardwareConvert = false keeps the per-element software arithmetic (the
// probe's reference).
inline constexpr int kFastChunks = 8;  // 128 x 128 blocks: 2048 chunks / 256 threads
template <bool HardwareConvert>
__global__ void __launch_bounds__(kBlockThreads) QuantizeKernelVec(const QuantizeJob j, const unsigned char* in,
                                                                   unsigned char* out, unsigned char* sc) {
  const int64_t bcols = j.BlockCols(), brows = j.BlockRows();
  for (int64_t b = blockIdx.x; b < j.Blocks(); b += gridDim.x) {
    const int64_t bc = b % bcols, br = (b / bcols) % brows, p = b / (bcols * brows);
    const int64_t r0 = br * j.block_rows, c0 = bc * j.block_cols;
    const int rows = static_cast<int>(min(r0 + j.block_rows, j.rows) - r0);
    const int chunks_per_row = static_cast<int>((min(c0 + j.block_cols, j.cols) - c0) / 8);
    const int chunks = rows * chunks_per_row;
    const unsigned char* base = in + j.in_offset + p * j.in_plane + r0 * j.in_row + 2 * c0;
    unsigned char* obase = out + j.out_offset + p * j.out_plane + r0 * j.out_row + c0;
    uint4 v[kFastChunks];
    __nv_bfloat162 m = ZeroBf162();
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int k = threadIdx.x + i * kBlockThreads;
      if (k < chunks) {
        const int r = k / chunks_per_row, c = k - r * chunks_per_row;
        v[i] = *reinterpret_cast<const uint4*>(base + r * j.in_row + 16 * c);
        m = ChunkAmax2(v[i], m);
      }
    }
    const float s = QuantScale(CtaMax(Amax2Float(m)), j.scale_format);
    const float rs = 1.0f / s;
    const int mode = HardwareConvert ? ScaleMode(s) : kQuantSoftware;
    if (threadIdx.x == 0)
      StoreElement(sc + j.sc_offset + p * j.sc_plane + br * j.sc_row + bc * j.scale_bytes, j.scale_bytes,
                   ScaleStoredBits(s, j.scale_format));
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int k = threadIdx.x + i * kBlockThreads;
      if (k < chunks) {
        const int r = k / chunks_per_row, c = k - r * chunks_per_row;
        *reinterpret_cast<uint2*>(obase + r * j.out_row + 8 * c) = QuantizeChunk(v[i], s, rs, mode);
      }
    }
  }
}

// QuantizeKernelVec over W blocks side by side (128-column blocks of at most
// 128 rows): a CTA of 256 W threads reads rows of 256 W contiguous bytes
// instead of 256, so HBM sees longer runs. Each thread's chunks all lie in
// one block (its column within the CTA's 16 W chunks is fixed), so the amax
// reduces over 16-lane groups, then over the 16 groups of each block. The
// loads of a group are issued together, apart from the amax (interleaving
// them cost 20 % on an H200; bench/gpu/quantize_kernel_probe.cu).
inline constexpr int kWideBlockCols = 128;
template <int W>
struct WideGroup {
  int64_t g, br, p;
  int rows, row_chunks;
  const unsigned char* base;
  unsigned char* obase;
  __device__ WideGroup(const QuantizeJob& j, int64_t b, int64_t groups, int64_t brows, const unsigned char* in,
                       unsigned char* out) {
    g = b % groups, br = (b / groups) % brows, p = b / (groups * brows);
    const int64_t r0 = br * j.block_rows, c0 = g * W * kWideBlockCols;
    rows = static_cast<int>(min(r0 + j.block_rows, j.rows) - r0);
    row_chunks = static_cast<int>((min(c0 + W * kWideBlockCols, j.cols) - c0) / 8);
    base = in + j.in_offset + p * j.in_plane + r0 * j.in_row + 2 * c0;
    obase = out + j.out_offset + p * j.out_plane + r0 * j.out_row + c0;
  }
};
// Registers capped at 64 a thread (launch bounds' minimum CTAs per SM) so
// that 1024 threads stay resident: W = 1 and 2 fit 4 and 2 CTAs per SM,
// whose barrier phases (load, reduce, convert) overlap.
template <int W>
__global__ void __launch_bounds__(kBlockThreads * W, 4 / W) QuantizeKernelWide(const QuantizeJob j, const unsigned char* in,
                                                                        unsigned char* out, unsigned char* sc) {
  constexpr int kThreads = kBlockThreads * W, kRowChunks = 16 * W;
  // Two sets used in turn: a thread writes set p only after the barrier of
  // the iteration that used set 1 - p, which every thread reaches after its
  // reads of set p two iterations ago, so one barrier per block suffices.
  __shared__ float group_max[2][kThreads / 16];
  int parity = 0;
  const int64_t bcols = j.BlockCols(), brows = j.BlockRows(), groups = (bcols + W - 1) / W;
  const int64_t total = j.planes * brows * groups;
  const int col_chunk = threadIdx.x % kRowChunks, my_block = col_chunk / 16;
  auto load = [&](const WideGroup<W>& G, uint4* v) {
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kRowChunks;
      if (col_chunk < G.row_chunks && r < G.rows)
        v[i] = *reinterpret_cast<const uint4*>(G.base + r * j.in_row + 16 * col_chunk);
    }
  };
  uint4 v[kFastChunks];
  int64_t b = blockIdx.x;
  if (b < total) load(WideGroup<W>(j, b, groups, brows, in, out), v);
  for (; b < total; b += gridDim.x) {
    const WideGroup<W> G(j, b, groups, brows, in, out);
    const int64_t nb = b + gridDim.x;
    const bool col_ok = col_chunk < G.row_chunks;
    __nv_bfloat162 m2 = ZeroBf162();
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kRowChunks;
      if (col_ok && r < G.rows) m2 = ChunkAmax2(v[i], m2);
    }
    float m = Amax2Float(m2);
    for (int o = 8; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 15) == 0) group_max[parity][threadIdx.x / 16] = m;
    __syncthreads();
    float amax = 0.0f;
    for (int t = my_block; t < kThreads / 16; t += W) amax = fmaxf(amax, group_max[parity][t]);
    parity ^= 1;
    const float s = QuantScale(amax, j.scale_format);
    const float rs = 1.0f / s;
    const int mode = ScaleMode(s);
    if (threadIdx.x < kRowChunks && col_chunk % 16 == 0 && col_ok)
      StoreElement(sc + j.sc_offset + G.p * j.sc_plane + G.br * j.sc_row + (G.g * W + my_block) * j.scale_bytes,
                   j.scale_bytes, ScaleStoredBits(s, j.scale_format));
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kRowChunks;
      if (col_ok && r < G.rows) {
        *reinterpret_cast<uint2*>(G.obase + r * j.out_row + 8 * col_chunk) = QuantizeChunk(v[i], s, rs, mode);
      }
    }
    if (nb < total) load(WideGroup<W>(j, nb, groups, brows, in, out), v);
  }
}

// 128 x 128 blocks of a job whose rows and columns are whole blocks (every
// weight the planner tiles for DeepSeek-style scales): one block per CTA
// iteration, 256 threads of 8 chunks each (a thread's chunks in one column,
// 16 rows apart), loaded for the next block before this one's stores; the
// amax packed (ChunkAmax2), reduced by a warp's shuffles and one barrier; the
// rare scales that need QuantizeElement re-read their block in a separate
// loop, so nothing in the main loop spills (64 registers, 4 CTAs per SM).
// On an H200: 0.96 of cudaMemcpyAsync's traffic rate at 16 CTAs per SM of
// grid, where QuantizeKernelWide<1> (bounds checks, 16-lane groups, the
// software branch inline) moved 0.79 (bench/gpu/quantize_variants_probe.cu).
inline constexpr int kBlock128Rows = kBlockThreads / 16;  // rows one pass of the CTA covers
__global__ void __launch_bounds__(kBlockThreads, 4) QuantizeKernelBlock128(const QuantizeJob j, const unsigned char* in,
                                                                          unsigned char* out, unsigned char* sc) {
  constexpr int kChunks = 128 / kBlock128Rows, kWarps = kBlockThreads / 32;
  __shared__ float warp_max[2][kWarps];  // two sets used in turn: one barrier per block
  int parity = 0;
  const int64_t bcols = j.BlockCols(), brows = j.BlockRows(), total = j.planes * brows * bcols;
  const int col = threadIdx.x % 16, row0 = threadIdx.x / 16;
  auto in_block = [&](int64_t b) {
    const int64_t bc = b % bcols, br = (b / bcols) % brows, p = b / (bcols * brows);
    return in + j.in_offset + p * j.in_plane + br * 128 * j.in_row + 256 * bc + 16 * col;
  };
  uint4 v[kChunks];
  auto load = [&](int64_t b) {
    const unsigned char* at = in_block(b);
#pragma unroll
    for (int i = 0; i < kChunks; ++i) v[i] = *reinterpret_cast<const uint4*>(at + (row0 + i * kBlock128Rows) * j.in_row);
  };
  int64_t b = blockIdx.x;
  if (b < total) load(b);
  for (; b < total; b += gridDim.x) {
    __nv_bfloat162 m2 = ZeroBf162();
#pragma unroll
    for (int i = 0; i < kChunks; ++i) m2 = ChunkAmax2(v[i], m2);
    float m = Amax2Float(m2);
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) warp_max[parity][threadIdx.x >> 5] = m;
    __syncthreads();
    float amax = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) amax = fmaxf(amax, warp_max[parity][w]);
    parity ^= 1;
    const float s = QuantScale(amax, j.scale_format);
    const float rs = 1.0f / s;
    const int mode = ScaleMode(s);
    const int64_t bc = b % bcols, br = (b / bcols) % brows, p = b / (bcols * brows);
    if (threadIdx.x == 0)
      StoreElement(sc + j.sc_offset + p * j.sc_plane + br * j.sc_row + bc * j.scale_bytes, j.scale_bytes,
                   ScaleStoredBits(s, j.scale_format));
    unsigned char* at = out + j.out_offset + p * j.out_plane + br * 128 * j.out_row + 128 * bc + 8 * col;
    if (mode == kQuantSoftware) {  // s or 1 / s not normal: v is dead here, the block is read again
#pragma unroll 1
      for (int i = 0; i < kChunks; ++i) {
        const int r = row0 + i * kBlock128Rows;
        const uint4 x = *reinterpret_cast<const uint4*>(in_block(b) + r * j.in_row);
        *reinterpret_cast<uint2*>(at + r * j.out_row) = QuantizeChunk(x, s, rs, kQuantSoftware);
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunks; ++i)
        *reinterpret_cast<uint2*>(at + (row0 + i * kBlock128Rows) * j.out_row) = QuantizeChunkFast(v[i], s, rs, mode);
    }
    if (b + gridDim.x < total) load(b + gridDim.x);
  }
}

// out[0]: non-NaN fp32 patterns whose hardware E4M3 differs from
// E4M3FromFloat; out[1]: (bf16 x, scale) pairs of the kernel's domain whose
// fast quantization differs from QuantizeElement; out[2]: pairs of bf16
// magnitudes whose packed max differs from the host's.
__global__ void __launch_bounds__(kBlockThreads) ConvertCheckKernel(uint64_t first, uint64_t count, const float* scales,
                                                                    int32_t scale_count, unsigned long long* out) {
  unsigned long long bad_convert = 0, bad_divide = 0;
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    const float x = BitsFloat(static_cast<uint32_t>(first + i));
    if (isnan(x)) continue;  // the hardware writes 0x7F for both signs; quantized tensors hold no NaN
    const uint32_t hw = __nv_cvt_float2_to_fp8x2(make_float2(x, 0.0f), __NV_SATFINITE, __NV_E4M3) & 0xFFu;
    bad_convert += hw != E4M3FromFloat(x);
  }
  const uint64_t pairs = static_cast<uint64_t>(scale_count) << 16;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < pairs; i += step) {
    const float sc = scales[i >> 16], x = Bf16ToFloat(static_cast<uint16_t>(i & 0xFFFFu));
    // The kernel's domain: fast scales, |x| at most the block's amax (so
    // |x / s| <= 448, within a rounding of the scale).
    if (!FastScale(sc) || !(static_cast<double>(fabsf(x)) <= 448.0 * static_cast<double>(sc))) continue;
    bad_divide += (QuantizePair(x, x, sc, 1.0f / sc, ScaleMode(sc)) & 0xFFu) != QuantizeElement(x, sc);
  }
  // Every pair of bf16 magnitudes (a, b), at least one not a NaN: the packed
  // max (ChunkAmax2) against the host's compare (a NaN never wins; for
  // non-negative bf16 the bit patterns order as the values, subnormals too).
  unsigned long long bad_amax = 0;
  for (uint64_t i = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (uint64_t{1} << 30); i += step) {
    const uint32_t a = static_cast<uint32_t>(i & 0x7FFFu), b = static_cast<uint32_t>(i >> 15);
    const bool a_nan = a > 0x7F80u, b_nan = b > 0x7F80u;
    if (a_nan && b_nan) continue;
    const uint32_t want = a_nan ? b : b_nan ? a : max(a, b);
    const __nv_bfloat162 got = __hmax2(BitsBf162(a), BitsBf162(b));
    bad_amax += (*reinterpret_cast<const uint32_t*>(&got) & 0xFFFFu) != want;
  }
  if (bad_convert) atomicAdd(&out[0], bad_convert);
  if (bad_divide) atomicAdd(&out[1], bad_divide);
  if (bad_amax) atomicAdd(&out[2], bad_amax);
}

// Whether the chunked kernels can read `j`: 16-byte aligned bf16 rows and
// 8-byte aligned fp8 rows of whole chunks (8 elements).
bool ChunksAligned(const QuantizeJob& j, const unsigned char* in, const unsigned char* out) {
  const auto addr = [](const unsigned char* x) { return reinterpret_cast<uintptr_t>(x); };
  return j.cols % 8 == 0 && (addr(in) + j.in_offset) % 16 == 0 && j.in_row % 16 == 0 && j.in_plane % 16 == 0 &&
         (addr(out) + j.out_offset) % 8 == 0 && j.out_row % 8 == 0 && j.out_plane % 8 == 0;
}
// Whether QuantizeKernelVec can run `j`: aligned chunks, blocks of whole
// chunks small enough for the CTA's registers.
bool QuantizeVecFits(const QuantizeJob& j, const unsigned char* in, const unsigned char* out) {
  const int64_t bcols = min(j.block_cols, j.cols);
  return j.block_cols % 8 == 0 && bcols * min(j.block_rows, j.rows) <= 8 * kFastChunks * kBlockThreads &&
         ChunksAligned(j, in, out);
}

// Blocks of one row and 8 L columns (MXFP8's 1 x 32: L = 4), L a power of two
// up to 32: L lanes per block, one 16-byte chunk each, the amax reduced over
// those lanes by shuffles (no CTA barrier), so a warp quantizes 32 / L blocks
// at once. Chunk g of the grid-stride walk is column chunk g % S of padded row
// g / S (S = L x blocks per row, so every L-lane group is one block; the
// chunks past the row's end hold nothing). kRowUnroll chunks per thread are
// loaded before any is converted. 32-bit indices (QuantizeRowFits).
inline constexpr int kRowUnroll = 4;
template <int L>
__global__ void __launch_bounds__(kBlockThreads) QuantizeKernelRow(const QuantizeJob j, const unsigned char* in,
                                                                   unsigned char* out, unsigned char* sc) {
  const uint32_t row_chunks = static_cast<uint32_t>(j.cols / 8);
  const uint32_t row_slots = static_cast<uint32_t>(j.BlockCols()) * L;
  const uint32_t rows = static_cast<uint32_t>(j.rows);
  const uint32_t total = static_cast<uint32_t>(j.planes) * rows * row_slots;
  const uint32_t stride = gridDim.x * blockDim.x;
  const uint32_t lane = threadIdx.x & 31u;
  const bool leader = threadIdx.x % L == 0;
  // The loop bound is the warp's (its first lane's) so all 32 lanes shuffle.
  for (uint32_t g0 = blockIdx.x * blockDim.x + threadIdx.x - lane; g0 < total; g0 += kRowUnroll * stride) {
    uint4 v[kRowUnroll];
    int64_t out_at[kRowUnroll], sc_at[kRowUnroll];
    bool live[kRowUnroll], has[kRowUnroll];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const uint32_t g = g0 + lane + u * stride;
      live[u] = g < total;
      has[u] = false;
      if (live[u]) {
        const uint32_t R = g / row_slots, c = g - R * row_slots;
        const uint32_t p = R / rows, r = R - p * rows;
        out_at[u] = j.out_offset + p * j.out_plane + r * j.out_row + 8 * static_cast<int64_t>(c);
        sc_at[u] = j.sc_offset + p * j.sc_plane + r * j.sc_row + static_cast<int64_t>(c / L) * j.scale_bytes;
        has[u] = c < row_chunks;
        if (has[u])
          v[u] = *reinterpret_cast<const uint4*>(in + j.in_offset + p * j.in_plane + r * j.in_row +
                                                 16 * static_cast<int64_t>(c));
      }
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      float m = has[u] ? ChunkAmax(v[u], 0.0f) : 0.0f;
#pragma unroll
      for (int o = L / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
      const float s = QuantScale(m, j.scale_format);
      const float rs = 1.0f / s;
      if (has[u]) *reinterpret_cast<uint2*>(out + out_at[u]) = QuantizeChunk(v[u], s, rs, ScaleMode(s));
      if (live[u] && leader) StoreElement(sc + sc_at[u], j.scale_bytes, ScaleStoredBits(s, j.scale_format));
    }
  }
}

// Lanes per block of QuantizeKernelRow for `j` (0: it cannot run j).
int RowLanes(const QuantizeJob& j, const unsigned char* in, const unsigned char* out) {
  if (j.block_rows != 1 || j.block_cols % 8 != 0 || !ChunksAligned(j, in, out)) return 0;
  const int64_t lanes = j.block_cols / 8;
  if (lanes > 32 || (lanes & (lanes - 1)) != 0) return 0;
  const int64_t slots = j.planes * j.rows * j.BlockCols() * lanes;
  return slots < (int64_t{1} << 31) ? static_cast<int>(lanes) : 0;  // 32-bit walk, with room for the stride
}

// One scale per matrix (per plane): four launches in stream order. The scale
// slot of each plane first holds the amax's fp32 bits (|x| orders as its bit
// pattern; the fill and real weights hold no NaN): zeroed, raised by an
// atomicMax per CTA, read by every CTA of the quantize pass, and finally
// replaced by the scale's stored bits. blockIdx.y is the plane.
__device__ __forceinline__ unsigned int* PlaneSlot(const QuantizeJob& j, unsigned char* sc, int64_t p) {
  return reinterpret_cast<unsigned int*>(sc + j.sc_offset + p * j.sc_plane);
}
__global__ void __launch_bounds__(kBlockThreads) TensorZeroKernel(const QuantizeJob j, unsigned char* sc) {
  for (int64_t p = threadIdx.x; p < j.planes; p += blockDim.x) *PlaneSlot(j, sc, p) = 0u;
}
// Calls f(u, chunk address) for kRowUnroll chunks of plane blockIdx.y at a
// time, the loads issued together; ok[u] says which exist.
template <typename F>
__device__ __forceinline__ void ForPlaneChunks(const QuantizeJob& j, const unsigned char* in, F f) {
  const uint32_t row_chunks = static_cast<uint32_t>(j.cols / 8);
  const uint32_t n = static_cast<uint32_t>(j.rows) * row_chunks;
  const uint32_t stride = gridDim.x * blockDim.x;
  const int64_t p = blockIdx.y;
  for (uint32_t k0 = blockIdx.x * blockDim.x + threadIdx.x; k0 < n; k0 += kRowUnroll * stride) {
    uint4 v[kRowUnroll];
    uint32_t at[kRowUnroll][2];
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u) {
      const uint32_t k = k0 + u * stride;
      at[u][0] = k < n ? k / row_chunks : ~0u;
      at[u][1] = k - at[u][0] * row_chunks;
      if (k < n) v[u] = *reinterpret_cast<const uint4*>(in + j.in_offset + p * j.in_plane + at[u][0] * j.in_row +
                                                        16 * static_cast<int64_t>(at[u][1]));
    }
#pragma unroll
    for (int u = 0; u < kRowUnroll; ++u)
      if (at[u][0] != ~0u) f(v[u], p, at[u][0], at[u][1]);
  }
}
__global__ void __launch_bounds__(kBlockThreads) TensorAmaxKernel(const QuantizeJob j, const unsigned char* in,
                                                                  unsigned char* sc) {
  float m = 0.0f;
  ForPlaneChunks(j, in, [&](const uint4& v, int64_t, uint32_t, uint32_t) { m = ChunkAmax(v, m); });
  m = CtaMax(m);
  if (threadIdx.x == 0 && m > 0.0f) atomicMax(PlaneSlot(j, sc, blockIdx.y), FloatBits(m));
}
__global__ void __launch_bounds__(kBlockThreads) QuantizeKernelTensor(const QuantizeJob j, const unsigned char* in,
                                                                      unsigned char* out, const unsigned char* sc) {
  if (blockIdx.y >= j.planes) return;
  const float s = QuantScale(
      BitsFloat(*reinterpret_cast<const unsigned int*>(sc + j.sc_offset + blockIdx.y * j.sc_plane)), j.scale_format);
  const float rs = 1.0f / s;
  const int mode = ScaleMode(s);
  ForPlaneChunks(j, in, [&](const uint4& v, int64_t p, uint32_t r, uint32_t c) {
    *reinterpret_cast<uint2*>(out + j.out_offset + p * j.out_plane + r * j.out_row + 8 * static_cast<int64_t>(c)) =
        QuantizeChunk(v, s, rs, mode);
  });
}
__global__ void __launch_bounds__(kBlockThreads) TensorScaleKernel(const QuantizeJob j, unsigned char* sc) {
  for (int64_t p = threadIdx.x; p < j.planes; p += blockDim.x) {
    unsigned int* slot = PlaneSlot(j, sc, p);
    *slot = static_cast<unsigned int>(ScaleStoredBits(QuantScale(BitsFloat(*slot), j.scale_format), j.scale_format));
  }
}

// Whether the per-matrix kernels can run `j`: one block per plane, 4-byte
// scales at 4-byte aligned slots (the amax goes there first), planes within a
// grid's y range, chunk indices within 32 bits.
bool TensorFits(const QuantizeJob& j, const unsigned char* in, const unsigned char* out, const unsigned char* sc) {
  return j.block_rows >= j.rows && j.block_cols >= j.cols && j.scale_bytes == 4 && j.planes <= 65535 &&
         (reinterpret_cast<uintptr_t>(sc) + j.sc_offset) % 4 == 0 && j.sc_plane % 4 == 0 &&
         j.rows * (j.cols / 8) < (int64_t{1} << 31) && ChunksAligned(j, in, out);
}

// One CTA per quantization block (grid-stride): amax, scale, then every
// element x / scale to E4M3 (executor/quantize_math.h, as QuantizeBlock).
__global__ void __launch_bounds__(kBlockThreads) QuantizeKernel(const QuantizeJob j, const unsigned char* in,
                                                                unsigned char* out, unsigned char* sc) {
  const int64_t bcols = j.BlockCols(), brows = j.BlockRows();
  for (int64_t b = blockIdx.x; b < j.Blocks(); b += gridDim.x) {
    const int64_t bc = b % bcols, br = (b / bcols) % brows, p = b / (bcols * brows);
    const int64_t r0 = br * j.block_rows, c0 = bc * j.block_cols;
    const int64_t r1 = min(r0 + j.block_rows, j.rows), c1 = min(c0 + j.block_cols, j.cols);
    const unsigned char* base = in + j.in_offset + p * j.in_plane;
    auto load = [&](int64_t r, int64_t c) {
      return Bf16ToFloat(*reinterpret_cast<const uint16_t*>(base + r * j.in_row + 2 * c));
    };
    const float s = QuantScale(BlockAmax(r0, r1, c0, c1, load), j.scale_format);
    if (threadIdx.x == 0)
      StoreElement(sc + j.sc_offset + p * j.sc_plane + br * j.sc_row + bc * j.scale_bytes, j.scale_bytes,
                   ScaleStoredBits(s, j.scale_format));
    unsigned char* obase = out + j.out_offset + p * j.out_plane;
    const int64_t cols = c1 - c0, n = (r1 - r0) * cols;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int64_t r = r0 + k / cols, c = c0 + k % cols;
      obase[r * j.out_row + c] = QuantizeElement(load(r, c), s);
    }
  }
}

}  // namespace

cudaError_t WarmQuantizeKernels(cudaStream_t s) {
  QuantizeJob none;
  none.planes = 0;
  QuantizeKernel<<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelVec<true><<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelWide<1><<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelBlock128<<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelWide<2><<<1, 2 * kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelWide<4><<<1, 4 * kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelRow<4><<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  TensorZeroKernel<<<1, kBlockThreads, 0, s>>>(none, nullptr);
  TensorAmaxKernel<<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr);
  QuantizeKernelTensor<<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  TensorScaleKernel<<<1, kBlockThreads, 0, s>>>(none, nullptr);
  return cudaGetLastError();
}

cudaError_t LaunchConvertCheck(uint64_t first, uint64_t count, const float* scales, int32_t scale_count,
                               unsigned long long* out, cudaStream_t s) {
  ConvertCheckKernel<<<1024, kBlockThreads, 0, s>>>(first, count, scales, scale_count, out);
  return cudaGetLastError();
}

namespace {
template <int L>
void LaunchRow(const QuantizeJob& j, const unsigned char* in, unsigned char* out, unsigned char* sc, cudaStream_t s,
               int32_t max_blocks) {
  const int64_t slots = j.planes * j.rows * j.BlockCols() * L;
  QuantizeKernelRow<L><<<LaunchBlocks((slots + kBlockThreads * kRowUnroll - 1) / (kBlockThreads * kRowUnroll),
                                      max_blocks),
                         kBlockThreads, 0, s>>>(j, in, out, sc);
}
}  // namespace

cudaError_t LaunchQuantize(const QuantizeJob& j, const unsigned char* in, unsigned char* out, unsigned char* sc,
                           cudaStream_t s, int32_t max_blocks, QuantizePath path) {
  if (j.Blocks() == 0) return cudaSuccess;
  if ((path == QuantizePath::kAuto || path == QuantizePath::kTensor) && TensorFits(j, in, out, sc)) {
    const int64_t chunks = j.rows * (j.cols / 8);
    // The grid's CTAs shared among the planes.
    const int32_t per_plane = static_cast<int32_t>(std::max<int64_t>(1, max_blocks / j.planes));
    const dim3 grid(LaunchBlocks((chunks + kBlockThreads * kRowUnroll - 1) / (kBlockThreads * kRowUnroll), per_plane),
                    static_cast<unsigned>(j.planes));
    TensorZeroKernel<<<1, kBlockThreads, 0, s>>>(j, sc);
    TensorAmaxKernel<<<grid, kBlockThreads, 0, s>>>(j, in, sc);
    QuantizeKernelTensor<<<grid, kBlockThreads, 0, s>>>(j, in, out, sc);
    TensorScaleKernel<<<1, kBlockThreads, 0, s>>>(j, sc);
    return cudaGetLastError();
  }
  if (path == QuantizePath::kAuto || path == QuantizePath::kRow) {
    switch (RowLanes(j, in, out)) {
      case 1: LaunchRow<1>(j, in, out, sc, s, max_blocks); return cudaGetLastError();
      case 2: LaunchRow<2>(j, in, out, sc, s, max_blocks); return cudaGetLastError();
      case 4: LaunchRow<4>(j, in, out, sc, s, max_blocks); return cudaGetLastError();
      case 8: LaunchRow<8>(j, in, out, sc, s, max_blocks); return cudaGetLastError();
      case 16: LaunchRow<16>(j, in, out, sc, s, max_blocks); return cudaGetLastError();
      case 32: LaunchRow<32>(j, in, out, sc, s, max_blocks); return cudaGetLastError();
      default: break;
    }
  }
  if (path != QuantizePath::kGeneric && path != QuantizePath::kRow && path != QuantizePath::kTensor &&
      QuantizeVecFits(j, in, out)) {
    // Whole 128 x 128 blocks: one per CTA iteration.
    if ((path == QuantizePath::kAuto || path == QuantizePath::kBlock128) && j.block_rows == 128 &&
        j.block_cols == 128 && j.rows % 128 == 0 && j.cols % 128 == 0) {
      QuantizeKernelBlock128<<<LaunchBlocks(j.Blocks(), max_blocks), kBlockThreads, 0, s>>>(j, in, out, sc);
      return cudaGetLastError();
    }
    // 128-column blocks: as many side by side as the job has, up to 4.
    if (j.block_cols == kWideBlockCols && j.block_rows <= 128 && path != QuantizePath::kVecSoftware &&
        path != QuantizePath::kVecHardware) {
      int w = path == QuantizePath::kWide1 ? 1 : path == QuantizePath::kWide2 ? 2 : 4;
      // Auto: one block per CTA. With 64 registers a thread, four CTAs of 256
      // threads per SM overlap their load / reduce / convert phases; on an
      // H200 that beat 2 and 4 blocks side by side (0.754 of the HBM bound
      // against 0.741 and 0.720, 8 CTAs per SM of grid).
      if (path == QuantizePath::kAuto) w = 1;
      const int64_t groups = j.planes * j.BlockRows() * ((j.BlockCols() + w - 1) / w);
      const int32_t blocks = LaunchBlocks(groups, std::max(1, max_blocks / w));
      if (w == 4) QuantizeKernelWide<4><<<blocks, 4 * kBlockThreads, 0, s>>>(j, in, out, sc);
      else if (w == 2) QuantizeKernelWide<2><<<blocks, 2 * kBlockThreads, 0, s>>>(j, in, out, sc);
      else QuantizeKernelWide<1><<<blocks, kBlockThreads, 0, s>>>(j, in, out, sc);
      return cudaGetLastError();
    }
    if (path == QuantizePath::kVecSoftware)
      QuantizeKernelVec<false><<<LaunchBlocks(j.Blocks(), max_blocks), kBlockThreads, 0, s>>>(j, in, out, sc);
    else
      QuantizeKernelVec<true><<<LaunchBlocks(j.Blocks(), max_blocks), kBlockThreads, 0, s>>>(j, in, out, sc);
    return cudaGetLastError();
  }
  QuantizeKernel<<<LaunchBlocks(j.Blocks(), max_blocks), kBlockThreads, 0, s>>>(j, in, out, sc);
  return cudaGetLastError();
}

}  // namespace reshard::gpu
