// Kernels of the NCCL backend: batched strided copy, pattern fill and check,
// fp8 quantization (see kernels.h).
#include "executor/nccl/kernels.h"

#include <cuda_fp8.h>

#include "executor/quantize_math.h"

#include "executor/nccl/warp_copy.cuh"

namespace reshard::gpu {

namespace {

constexpr int64_t kTile = 1024;  // elements per fill/check tile

struct CopyBatch {
  int32_t count;
  CopyDesc d[kCopyDescsByValue];
};
static_assert(sizeof(CopyBatch) <= 4000, "copy batch must fit the classic kernel parameter limit");

// Offset of byte k of a (plane, row, byte) sequence.
__device__ __forceinline__ int64_t SeqOffset(int64_t k, int64_t row, int64_t plane, int64_t row_stride,
                                             int64_t plane_stride) {
  const int64_t p = k / plane;
  const int64_t rem = k - p * plane;
  const int64_t r = rem / row;
  return p * plane_stride + r * row_stride + (rem - r * row);
}

// Runs [first, first + count) of a pair, count <= 32, one warp: lane j holds
// run j's source and destination offsets; element i of the chunk belongs to
// run i / e. Four loads in flight per lane (index arithmetic per load).
template <typename T>
__device__ __forceinline__ void WarpCopyRuns(const CopyDesc& d, int64_t first, int32_t count, int lane) {
  int64_t so = 0, to = 0;
  if (lane < count) {
    const int64_t k = (first + lane) * d.run;
    so = SeqOffset(k, d.src_row, d.src_plane, d.src_row_stride, d.src_plane_stride);
    to = SeqOffset(k, d.dst_row, d.dst_plane, d.dst_row_stride, d.dst_plane_stride);
  }
  const int32_t e = static_cast<int32_t>(d.run / static_cast<int64_t>(sizeof(T)));
  const int32_t n = count * e;
  for (int32_t base = 0; base < n; base += 128) {
    T v[4];
    int64_t at[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int32_t i = base + u * 32 + lane;
      const int32_t r = min(i / e, count - 1);  // every lane shuffles, valid or not
      const int64_t s_off = __shfl_sync(0xffffffffu, so, r);
      const int64_t t_off = __shfl_sync(0xffffffffu, to, r);
      const int64_t w = static_cast<int64_t>(i - r * e) * static_cast<int64_t>(sizeof(T));
      at[u] = i < n ? t_off + w : -1;
      if (i < n) v[u] = *reinterpret_cast<const T*>(d.src + s_off + w);
    }
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (at[u] >= 0) *reinterpret_cast<T*>(d.dst + at[u]) = v[u];
  }
}

__device__ __forceinline__ void CopyShortRuns(const CopyDesc& d, int64_t c, int lane) {
  const int64_t first = c * d.runs_per_chunk;
  const int32_t count = static_cast<int32_t>(min(static_cast<int64_t>(d.runs_per_chunk), d.runs - first));
  switch (d.vec) {
    case 16: WarpCopyRuns<uint4>(d, first, count, lane); break;
    case 8: WarpCopyRuns<unsigned long long>(d, first, count, lane); break;
    case 4: WarpCopyRuns<unsigned int>(d, first, count, lane); break;
    case 2: WarpCopyRuns<unsigned short>(d, first, count, lane); break;
    default: WarpCopyRuns<unsigned char>(d, first, count, lane); break;
  }
}

__device__ __forceinline__ void CopyChunk(const CopyDesc& d, int64_t global_chunk, int lane) {
  const int64_t c = global_chunk - d.chunk_begin;
  if (d.runs_per_chunk > 1) {
    CopyShortRuns(d, c, lane);
    return;
  }
  const int64_t r = c / d.chunks_per_run;
  const int64_t part = c - r * d.chunks_per_run;
  const int64_t k = r * d.run + part * d.chunk;
  const int64_t n = min(d.chunk, d.run - part * d.chunk);
  const unsigned char* s = d.src + SeqOffset(k, d.src_row, d.src_plane, d.src_row_stride, d.src_plane_stride);
  unsigned char* t = d.dst + SeqOffset(k, d.dst_row, d.dst_plane, d.dst_row_stride, d.dst_plane_stride);
  WarpCopyVec(d.vec, s, t, n, lane);
}

// __grid_constant__: the batch is read in place from parameter space, never
// copied per thread.
__global__ void __launch_bounds__(kBlockThreads) CopyByValueKernel(const __grid_constant__ CopyBatch batch,
                                                                   int64_t total) {
  const int lane = threadIdx.x & 31;
  int i = 0;
  for (int64_t c = FirstChunk(); c < total; c += ChunkStep()) {
    while (batch.d[i].chunk_end <= c) ++i;  // chunks grow, so the pair index only moves forward
    CopyChunk(batch.d[i], c, lane);
  }
}

__global__ void __launch_bounds__(kBlockThreads) CopyFromDeviceKernel(const CopyDesc* descs, int32_t count,
                                                                      int64_t total) {
  const int lane = threadIdx.x & 31;
  for (int64_t c = FirstChunk(); c < total; c += ChunkStep())
    CopyChunk(descs[ChunkOwner(descs, count, c)], c, lane);
}

// Calls visit(g, l) for every element of piece m (g: global index, l: local
// element offset): tiles of kTile elements along dimension 2, one block per
// tile, grid-stride.
template <typename Visit>
__device__ __forceinline__ void ForEachTileElement(const PieceMap& m, Visit visit) {
  const int64_t tiles_per_row = (m.extent[2] + kTile - 1) / kTile;
  const int64_t tiles = m.Rows() * tiles_per_row;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t row = t / tiles_per_row;
    const int64_t col0 = (t - row * tiles_per_row) * kTile;
    const int64_t col1 = min(col0 + kTile, m.extent[2]);
    int64_t g0 = 0, l0 = 0;
    PieceRowStart(m, row, &g0, &l0);
    for (int64_t i = col0 + threadIdx.x; i < col1; i += blockDim.x)
      visit(g0 + i * m.global_stride[2], l0 + i * m.local_stride[2]);
  }
}

__global__ void __launch_bounds__(kBlockThreads) FillKernel(unsigned char* base, const PieceMap m) {
  ForEachTileElement(m, [&](int64_t g, int64_t l) {
    StoreElement(base + l * m.elem_bytes, m.elem_bytes, PieceValue(m, g));
  });
}

// How a check records a mismatch: the first kMaxRecorded reported, or the
// smallest index.
struct RecordFirst {
  CheckSlot* slot;
  __device__ void operator()(int64_t g, uint64_t want, uint64_t got) const {
    const unsigned long long k = atomicAdd(&slot->count, 1ull);
    if (k < kMaxRecorded) slot->first[k] = {g, want, got};
  }
};
struct RecordSmallest {
  MismatchCount* out;
  __device__ void operator()(int64_t g, uint64_t, uint64_t) const {
    atomicAdd(&out->mismatches, 1ull);
    atomicMin(&out->first_index, static_cast<unsigned long long>(g));
  }
};

template <typename Record>
__global__ void __launch_bounds__(kBlockThreads) CheckKernel(const unsigned char* base, const PieceMap m,
                                                             const Record record) {
  ForEachTileElement(m, [&](int64_t g, int64_t l) {
    const uint64_t want = PieceValue(m, g);
    const uint64_t got = LoadElement(base + l * m.elem_bytes, m.elem_bytes);
    if (got != want) record(g, want, got);
  });
}

// The largest |bf16| of a block's elements [r0, r1) x [c0, c1) of plane p,
// reduced over the CTA (max is exact, so any order gives the host's value).
// The max of every thread's `m` over the CTA, returned to all threads.
__device__ float CtaMax(float m) {
  __shared__ float warp_max[kBlockWarps];
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if ((threadIdx.x & 31) == 0) warp_max[threadIdx.x >> 5] = m;
  __syncthreads();
  float all = 0.0f;
  for (int w = 0; w < kBlockWarps; ++w) all = fmaxf(all, warp_max[w]);
  __syncthreads();  // warp_max is reused by the next block
  return all;
}

template <typename Load>
__device__ float BlockAmax(int64_t r0, int64_t r1, int64_t c0, int64_t c1, Load load) {
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
//    subnormal quotient the correction could round differently;
//  * the hardware's cvt.rn.satfinite.e4m3x2.f32 rounds to nearest even and
//    saturates to +-448 as E4M3FromFloat does (checked over every fp32 on an
//    H200 by bench/gpu/quantize_kernel_probe.cu).
__device__ __forceinline__ float DivByScale(float x, float s, float r) {
  const float q = x * r;
  if (fabsf(q) < 0x1p-11f) return copysignf(0.0f, x);
  return fmaf(fmaf(-s, q, x), r, q);
}
__device__ __forceinline__ uint32_t QuantizePair(float a, float b, float s, float r, bool fast) {
  if (!fast) return QuantizeElement(a, s) | static_cast<uint32_t>(QuantizeElement(b, s)) << 8;
  return __nv_cvt_float2_to_fp8x2(make_float2(DivByScale(a, s, r), DivByScale(b, s, r)), __NV_SATFINITE, __NV_E4M3);
}
// Whether DivByScale is exact for scale s (s and 1/s normal).
__device__ __forceinline__ bool FastScale(float s) { return s >= 0x1p-125f && s <= 0x1p125f; }

// The largest |x| of m and the 8 bf16 of a 16-byte chunk.
__device__ __forceinline__ float ChunkAmax(const uint4& v, float m) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int h = 0; h < 4; ++h) {
    m = fmaxf(m, fabsf(BitsFloat(w[h] << 16)));
    m = fmaxf(m, fabsf(BitsFloat(w[h] & 0xFFFF0000u)));
  }
  return m;
}
// The 8 bf16 of a chunk quantized with scale s (rs = 1/s): 8 E4M3 bytes.
__device__ __forceinline__ uint2 QuantizeChunk(const uint4& v, float s, float rs, bool fast) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t q[2] = {0, 0};
#pragma unroll
  for (int h = 0; h < 4; ++h)  // elements 2h, 2h + 1 (little endian)
    q[h / 2] |= QuantizePair(BitsFloat(w[h] << 16), BitsFloat(w[h] & 0xFFFF0000u), s, rs, fast) << (16 * (h % 2));
  return make_uint2(q[0], q[1]);
}

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
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int k = threadIdx.x + i * kBlockThreads;
      if (k < chunks) {
        const int r = k / chunks_per_row, c = k - r * chunks_per_row;
        v[i] = *reinterpret_cast<const uint4*>(base + r * j.in_row + 16 * c);
        m = ChunkAmax(v[i], m);
      }
    }
    const float s = QuantScale(CtaMax(m), j.scale_format);
    const float rs = 1.0f / s;
    const bool fast = HardwareConvert && FastScale(s);
    if (threadIdx.x == 0)
      StoreElement(sc + j.sc_offset + p * j.sc_plane + br * j.sc_row + bc * j.scale_bytes, j.scale_bytes,
                   ScaleStoredBits(s, j.scale_format));
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int k = threadIdx.x + i * kBlockThreads;
      if (k < chunks) {
        const int r = k / chunks_per_row, c = k - r * chunks_per_row;
        *reinterpret_cast<uint2*>(obase + r * j.out_row + 8 * c) = QuantizeChunk(v[i], s, rs, fast);
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
template <int W>
__global__ void __launch_bounds__(kBlockThreads * W) QuantizeKernelWide(const QuantizeJob j, const unsigned char* in,
                                                                        unsigned char* out, unsigned char* sc) {
  constexpr int kThreads = kBlockThreads * W, kRowChunks = 16 * W;
  __shared__ float group_max[kThreads / 16];
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
    float m = 0.0f;
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kRowChunks;
      if (col_ok && r < G.rows) {
        m = ChunkAmax(v[i], m);
      }
    }
    for (int o = 8; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 15) == 0) group_max[threadIdx.x / 16] = m;
    __syncthreads();
    float amax = 0.0f;
    for (int t = my_block; t < kThreads / 16; t += W) amax = fmaxf(amax, group_max[t]);
    __syncthreads();  // group_max is reused by the next iteration
    const float s = QuantScale(amax, j.scale_format);
    const float rs = 1.0f / s;
    const bool fast = FastScale(s);
    if (threadIdx.x < kRowChunks && col_chunk % 16 == 0 && col_ok)
      StoreElement(sc + j.sc_offset + G.p * j.sc_plane + G.br * j.sc_row + (G.g * W + my_block) * j.scale_bytes,
                   j.scale_bytes, ScaleStoredBits(s, j.scale_format));
#pragma unroll
    for (int i = 0; i < kFastChunks; ++i) {
      const int r = (threadIdx.x + i * kThreads) / kRowChunks;
      if (col_ok && r < G.rows) {
        *reinterpret_cast<uint2*>(G.obase + r * j.out_row + 8 * col_chunk) = QuantizeChunk(v[i], s, rs, fast);
      }
    }
    if (nb < total) load(WideGroup<W>(j, nb, groups, brows, in, out), v);
  }
}

// out[0]: non-NaN fp32 patterns whose hardware E4M3 differs from
// E4M3FromFloat; out[1]: (bf16 x, scale) pairs of the kernel's domain whose
// fast quantization differs from QuantizeElement.
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
    bad_divide += (QuantizePair(x, x, sc, 1.0f / sc, true) & 0xFFu) != QuantizeElement(x, sc);
  }
  if (bad_convert) atomicAdd(&out[0], bad_convert);
  if (bad_divide) atomicAdd(&out[1], bad_divide);
}

// Whether QuantizeKernelVec can run `j`: 16-byte aligned bf16 rows and
// 8-byte aligned fp8 rows of whole chunks, small enough blocks.
bool QuantizeVecFits(const QuantizeJob& j, const unsigned char* in, const unsigned char* out) {
  const auto addr = [](const unsigned char* x) { return reinterpret_cast<uintptr_t>(x); };
  const int64_t bcols = min(j.block_cols, j.cols);
  return j.block_cols % 8 == 0 && j.cols % 8 == 0 && bcols * min(j.block_rows, j.rows) <= 8 * kFastChunks * kBlockThreads &&
         (addr(in) + j.in_offset) % 16 == 0 && j.in_row % 16 == 0 && j.in_plane % 16 == 0 &&
         (addr(out) + j.out_offset) % 8 == 0 && j.out_row % 8 == 0 && j.out_plane % 8 == 0;
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

// Checks a piece of quantized values or scales (PieceMap::quant): one CTA per
// quantization block the piece touches; its scale from the fill pattern (the
// same reduction as QuantizeKernel), then each element of the block inside
// the piece (values) or the block's one scale (scales) compared.
template <typename Record>
__global__ void __launch_bounds__(kBlockThreads) QuantCheckKernel(const unsigned char* base, const PieceMap m,
                                                                  const Record record) {
  const QuantMap& q = m.quant;
  // The piece's box in (plane, row, col) of the tensor (values) or of its scales.
  const int64_t rows = q.role == 1 ? q.rows : (q.rows + q.block_rows - 1) / q.block_rows;
  const int64_t cols = q.role == 1 ? q.cols : (q.cols + q.block_cols - 1) / q.block_cols;
  const int64_t p0 = m.base_global / (rows * cols), r0 = m.base_global / cols % rows, c0 = m.base_global % cols;
  const int64_t np = m.extent[0], nr = m.extent[1], nc = m.extent[2];
  // Blocks: values span [r0/br, ceil((r0+nr)/br)); scales are one block per element.
  const int64_t bi0 = q.role == 1 ? r0 / q.block_rows : r0, bj0 = q.role == 1 ? c0 / q.block_cols : c0;
  const int64_t bi1 = q.role == 1 ? (r0 + nr + q.block_rows - 1) / q.block_rows : r0 + nr;
  const int64_t bj1 = q.role == 1 ? (c0 + nc + q.block_cols - 1) / q.block_cols : c0 + nc;
  const int64_t nbi = bi1 - bi0, nbj = bj1 - bj0;
  for (int64_t b = blockIdx.x; b < np * nbi * nbj; b += gridDim.x) {
    const int64_t pp = b / (nbi * nbj), bi = bi0 + b / nbj % nbi, bj = bj0 + b % nbj, plane = p0 + pp;
    const int64_t br0 = bi * q.block_rows, bc0 = bj * q.block_cols;
    const int64_t br1 = min(br0 + q.block_rows, q.rows), bc1 = min(bc0 + q.block_cols, q.cols);
    auto pattern = [&](int64_t r, int64_t c) {
      return Bf16ToFloat(FiniteBf16Pattern(q.source, (plane * q.rows + r) * q.cols + c));
    };
    const float s = QuantScale(BlockAmax(br0, br1, bc0, bc1, pattern), q.scale_format);
    if (q.role == 2) {
      if (threadIdx.x != 0) continue;
      const int64_t l = m.offset_elems + pp * m.local_stride[0] + (bi - r0) * m.local_stride[1] + (bj - c0) * m.local_stride[2];
      const uint64_t want = ScaleStoredBits(s, q.scale_format);
      const uint64_t got = LoadElement(base + l * m.elem_bytes, m.elem_bytes);
      if (got != want) record((plane * rows + bi) * cols + bj, want, got);
      continue;
    }
    // Values: the block's elements inside the piece.
    const int64_t ir0 = max(br0, r0), ir1 = min(br1, r0 + nr), ic0 = max(bc0, c0), ic1 = min(bc1, c0 + nc);
    const int64_t w = ic1 - ic0, n = (ir1 - ir0) * w;
    for (int64_t k = threadIdx.x; k < n; k += blockDim.x) {
      const int64_t r = ir0 + k / w, c = ic0 + k % w;
      const int64_t l = m.offset_elems + pp * m.local_stride[0] + (r - r0) * m.local_stride[1] + (c - c0) * m.local_stride[2];
      const uint64_t want = QuantizeElement(pattern(r, c), s);
      const uint64_t got = base[l];
      if (got != want) record((plane * rows + r) * cols + c, want, got);
    }
  }
}

int64_t QuantCheckBlocks(const PieceMap& m) {
  const QuantMap& q = m.quant;
  if (q.role == 2) return m.Elements();
  const int64_t r0 = m.base_global / q.cols % q.rows, c0 = m.base_global % q.cols;
  const int64_t nbi = (r0 + m.extent[1] + q.block_rows - 1) / q.block_rows - r0 / q.block_rows;
  const int64_t nbj = (c0 + m.extent[2] + q.block_cols - 1) / q.block_cols - c0 / q.block_cols;
  return m.extent[0] * nbi * nbj;
}

__global__ void __launch_bounds__(kBlockThreads) UploadKernel(unsigned long long* dst, const unsigned long long* src,
                                                             int64_t words) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < words;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

int64_t Tiles(const PieceMap& m) { return m.Rows() * ((m.extent[2] + kTile - 1) / kTile); }

__global__ void GateKernel(const volatile int* flag, long long max_ns) {
  if (max_ns <= 0) return;
  unsigned long long start = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    if (*flag != 0) return;
    unsigned long long now = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (static_cast<long long>(now - start) > max_ns) return;
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t LaunchGate(const volatile int* flag, long long max_ns, cudaStream_t s) {
  GateKernel<<<1, 1, 0, s>>>(flag, max_ns);
  return cudaGetLastError();
}

cudaError_t LaunchCopy(const CopyDesc* descs, int32_t count, int64_t total_chunks, bool descs_on_device,
                       cudaStream_t s, int32_t max_blocks) {
  if (count == 0 || total_chunks == 0) return cudaSuccess;
  const int32_t blocks = LaunchBlocks((total_chunks + kBlockWarps - 1) / kBlockWarps, max_blocks);
  if (descs_on_device) {
    CopyFromDeviceKernel<<<blocks, kBlockThreads, 0, s>>>(descs, count, total_chunks);
  } else {
    CopyBatch batch{};
    batch.count = count;
    for (int32_t i = 0; i < count; ++i) batch.d[i] = descs[i];
    CopyByValueKernel<<<blocks, kBlockThreads, 0, s>>>(batch, total_chunks);
  }
  return cudaGetLastError();
}

cudaError_t LaunchUploadDescs(CopyDesc* device, const CopyDesc* host_mapped, int32_t count, cudaStream_t s) {
  static_assert(sizeof(CopyDesc) % sizeof(unsigned long long) == 0, "descriptors upload as 8-byte words");
  const int64_t words = static_cast<int64_t>(count) * sizeof(CopyDesc) / sizeof(unsigned long long);
  if (words == 0) return cudaSuccess;
  UploadKernel<<<LaunchBlocks((words + kBlockThreads - 1) / kBlockThreads, 16), kBlockThreads, 0, s>>>(
      reinterpret_cast<unsigned long long*>(device), reinterpret_cast<const unsigned long long*>(host_mapped), words);
  return cudaGetLastError();
}

cudaError_t WarmKernels(cudaStream_t s) {
  CopyBatch batch{};
  CopyByValueKernel<<<1, kBlockThreads, 0, s>>>(batch, 0);
  CopyFromDeviceKernel<<<1, kBlockThreads, 0, s>>>(nullptr, 0, 0);
  UploadKernel<<<1, kBlockThreads, 0, s>>>(nullptr, nullptr, 0);
  PieceMap empty;
  empty.extent[0] = 0;
  FillKernel<<<1, kBlockThreads, 0, s>>>(nullptr, empty);
  CheckKernel<<<1, kBlockThreads, 0, s>>>(nullptr, empty, RecordFirst{nullptr});
  QuantizeJob none;
  QuantizeKernel<<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelVec<true><<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelWide<1><<<1, kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelWide<2><<<1, 2 * kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  QuantizeKernelWide<4><<<1, 4 * kBlockThreads, 0, s>>>(none, nullptr, nullptr, nullptr);
  return cudaGetLastError();
}

cudaError_t LaunchConvertCheck(uint64_t first, uint64_t count, const float* scales, int32_t scale_count,
                               unsigned long long* out, cudaStream_t s) {
  ConvertCheckKernel<<<1024, kBlockThreads, 0, s>>>(first, count, scales, scale_count, out);
  return cudaGetLastError();
}

cudaError_t LaunchFill(unsigned char* base, const PieceMap& m, cudaStream_t s, int32_t max_blocks) {
  if (m.Elements() == 0) return cudaSuccess;
  FillKernel<<<LaunchBlocks(Tiles(m), max_blocks), kBlockThreads, 0, s>>>(base, m);
  return cudaGetLastError();
}

cudaError_t LaunchQuantize(const QuantizeJob& j, const unsigned char* in, unsigned char* out, unsigned char* sc,
                           cudaStream_t s, int32_t max_blocks, QuantizePath path) {
  if (j.Blocks() == 0) return cudaSuccess;
  if (path != QuantizePath::kGeneric && QuantizeVecFits(j, in, out)) {
    // 128-column blocks: as many side by side as the job has, up to 4.
    if (j.block_cols == kWideBlockCols && j.block_rows <= 128 && path != QuantizePath::kVecSoftware &&
        path != QuantizePath::kVecHardware) {
      int w = path == QuantizePath::kWide1 ? 1 : path == QuantizePath::kWide2 ? 2 : 4;
      if (path == QuantizePath::kAuto) w = j.BlockCols() >= 4 ? 4 : j.BlockCols() >= 2 ? 2 : 1;
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

cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, CheckSlot* slot, cudaStream_t s,
                        int32_t max_blocks) {
  if (m.Elements() == 0) return cudaSuccess;
  if (m.quant.role != 0) {
    QuantCheckKernel<<<LaunchBlocks(QuantCheckBlocks(m), max_blocks), kBlockThreads, 0, s>>>(base, m, RecordFirst{slot});
    return cudaGetLastError();
  }
  CheckKernel<<<LaunchBlocks(Tiles(m), max_blocks), kBlockThreads, 0, s>>>(base, m, RecordFirst{slot});
  return cudaGetLastError();
}

cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, MismatchCount* out, cudaStream_t s,
                        int32_t max_blocks) {
  if (m.Elements() == 0) return cudaSuccess;
  if (m.quant.role != 0) {
    QuantCheckKernel<<<LaunchBlocks(QuantCheckBlocks(m), max_blocks), kBlockThreads, 0, s>>>(base, m,
                                                                                              RecordSmallest{out});
    return cudaGetLastError();
  }
  CheckKernel<<<LaunchBlocks(Tiles(m), max_blocks), kBlockThreads, 0, s>>>(base, m, RecordSmallest{out});
  return cudaGetLastError();
}

}  // namespace reshard::gpu
