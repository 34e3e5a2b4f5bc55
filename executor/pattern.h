// The fill pattern: what every element of every tensor holds during a run.
//
// Element `index` (global, row-major) of tensor `tensor` holds the low
// `elem_bytes` bytes of Mix(tensor, index), a fixed 64-bit mixing function
// (splitmix64's finaliser, applied twice). Sources are filled with it before
// a run and every destination element is compared with it afterwards, so a
// byte that lands at the wrong offset, in the wrong tensor, or not at all is
// caught (a wrong value survives with probability 2^-(8*elem_bytes) per
// element). Values are compared as bits: NaN patterns are fine.
//
// Everything here is usable from host code and from CUDA device code; the
// header depends on <cstdint> and model/box.h only (no Plan), so the NCCL
// backend's kernels include it directly.
#pragma once

#include <cstdint>
#include <cstring>

#include "model/box.h"

#if defined(__CUDACC__)
#define RESHARD_HD __host__ __device__
#else
#define RESHARD_HD
#endif

namespace reshard {

// splitmix64 (Steele, Lea, Flood 2014): a bijection on 64-bit words with good
// avalanche; the constants are the published ones.
RESHARD_HD inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The 64 pattern bits of (tensor, index). Keying the index with a mixed tensor
// id keeps tensors apart: Mix(t, i) == Mix(u, j) needs i ^ j == K(t) ^ K(u).
RESHARD_HD inline uint64_t PatternBits64(int32_t tensor, int64_t index) {
  const uint64_t key = SplitMix64(static_cast<uint64_t>(static_cast<uint32_t>(tensor)));
  return SplitMix64(key ^ static_cast<uint64_t>(index));
}

// The value bits an element of `elem_bytes` (1, 2, 4 or 8) bytes holds.
RESHARD_HD inline uint64_t PatternValue(int32_t tensor, int64_t index, int32_t elem_bytes) {
  const uint64_t v = PatternBits64(tensor, index);
  return elem_bytes >= 8 ? v : (v & ((uint64_t{1} << (8 * elem_bytes)) - 1));
}

// A finite bf16 for element (tensor, index): random sign and 7 mantissa bits,
// an exponent in [2^-15, 2^16] so blocks mix values near their amax with
// ones that become E4M3 subnormals or zero.
RESHARD_HD inline uint16_t FiniteBf16Pattern(int32_t tensor, int64_t index) {
  const uint64_t v = PatternBits64(tensor, index);
  const uint32_t sign = static_cast<uint32_t>(v >> 63) << 15;
  const uint32_t exponent = 112u + static_cast<uint32_t>((v >> 7) & 31u);
  return static_cast<uint16_t>(sign | (exponent << 7) | static_cast<uint32_t>(v & 0x7Fu));
}

// A quantized destination piece (executor/quantize_math.h): role 1 = fp8
// values, 2 = their scales, of bf16 tensor `source` quantized as a [planes,
// rows, cols] matrix in block_rows x block_cols blocks; 0 = plain content.
struct QuantMap {
  int32_t role = 0;
  int32_t source = -1;
  int32_t scale_format = 0;  // 0 fp32, 1 UE8M0 (fp32), 2 E8M0 (one byte)
  int64_t planes = 1, rows = 1, cols = 1, block_rows = 1, block_cols = 1;
};

// Where the elements of one content piece live, flattened to plain numbers
// so host loops and device kernels enumerate them the same way.
//
// The piece's used dimensions are right-aligned into 3 (a 1-D piece of n
// elements becomes extents {1, 1, n}), so dimension 2 is always the
// innermost and the longest run a loop can stride over. Element (i0, i1, i2)
// of the box (0 <= i_d < extent[d]) is
//   global index  g = base_global + i0*global_stride[0] + i1*global_stride[1] + i2*global_stride[2]
//   local element l = offset_elems + i0*local_stride[0] + i1*local_stride[1] + i2*local_stride[2]
// with base_global the row-major index of the box's low corner.
struct PieceMap {
  int32_t tensor = -1;
  int32_t elem_bytes = 1;
  int64_t extent[3] = {1, 1, 1};
  int64_t global_stride[3] = {0, 0, 0};
  int64_t local_stride[3] = {0, 0, 0};
  int64_t base_global = 0;
  int64_t offset_elems = 0;
  int32_t finite_bf16 = 0;  // 1: a tensor the plan quantizes, filled with FiniteBf16Pattern
  QuantMap quant;           // role != 0: expected values come from quantize_math.h

  RESHARD_HD int64_t Elements() const { return extent[0] * extent[1] * extent[2]; }
  RESHARD_HD int64_t Rows() const { return extent[0] * extent[1]; }  // runs along dimension 2
};

// The pattern value of a plain piece's element with global index g.
RESHARD_HD inline uint64_t PieceValue(const PieceMap& m, int64_t g) {
  return m.finite_bf16 ? FiniteBf16Pattern(m.tensor, g) : PatternValue(m.tensor, g, m.elem_bytes);
}

// Global index and local element of the `row`-th row (dims 0,1 flattened)
// and column i2 of a piece.
RESHARD_HD inline void PieceRowStart(const PieceMap& m, int64_t row, int64_t* global, int64_t* local) {
  const int64_t i0 = row / m.extent[1];
  const int64_t i1 = row - i0 * m.extent[1];
  *global = m.base_global + i0 * m.global_stride[0] + i1 * m.global_stride[1];
  *local = m.offset_elems + i0 * m.local_stride[0] + i1 * m.local_stride[1];
}

// Builds the map of a piece: `box` of a tensor of shape `shape` stored at
// `offset_elems` with per-dimension `stride_elems`. Unused dimensions of the
// box must be [0, 1). Host only.
inline PieceMap MakePieceMap(int32_t tensor, const Shape& shape, int32_t elem_bytes, const Box& box,
                             int64_t offset_elems, const Extents& stride_elems) {
  PieceMap m;
  m.tensor = tensor;
  m.elem_bytes = elem_bytes;
  m.offset_elems = offset_elems;
  // Row-major strides of the tensor over its used dimensions.
  int64_t dense[kMaxDims] = {1, 1, 1};
  for (int d = shape.ndim - 2; d >= 0; --d) dense[d] = dense[d + 1] * shape.dim[d + 1];
  const int shift = kMaxDims - shape.ndim;  // used dim d goes to slot d + shift
  for (int d = 0; d < shape.ndim; ++d) {
    m.extent[d + shift] = box.hi[d] > box.lo[d] ? box.hi[d] - box.lo[d] : 0;
    m.global_stride[d + shift] = dense[d];
    m.local_stride[d + shift] = stride_elems[d];
    m.base_global += box.lo[d] * dense[d];
  }
  return m;
}

// Calls f(global_index, local_element) for every element of the piece in
// row-major box order. O(elements). Host only.
template <typename F>
void ForEachElement(const PieceMap& m, F&& f) {
  for (int64_t i0 = 0; i0 < m.extent[0]; ++i0)
    for (int64_t i1 = 0; i1 < m.extent[1]; ++i1) {
      int64_t g = m.base_global + i0 * m.global_stride[0] + i1 * m.global_stride[1];
      int64_t l = m.offset_elems + i0 * m.local_stride[0] + i1 * m.local_stride[1];
      for (int64_t i2 = 0; i2 < m.extent[2]; ++i2, g += m.global_stride[2], l += m.local_stride[2]) f(g, l);
    }
}

// Little-endian load/store of an element of `elem_bytes` bytes (every
// platform reshard runs on is little-endian, host and GPU alike). memcpy of a
// constant size compiles to one load/store on both sides and keeps the host
// compiler's aliasing rules happy.
RESHARD_HD inline uint64_t LoadElement(const unsigned char* p, int32_t elem_bytes) {
  switch (elem_bytes) {
    case 1: return *p;
    case 2: { uint16_t v; memcpy(&v, p, 2); return v; }
    case 4: { uint32_t v; memcpy(&v, p, 4); return v; }
    default: { uint64_t v; memcpy(&v, p, 8); return v; }
  }
}
RESHARD_HD inline void StoreElement(unsigned char* p, int32_t elem_bytes, uint64_t value) {
  switch (elem_bytes) {
    case 1: *p = static_cast<unsigned char>(value); break;
    case 2: { const uint16_t v = static_cast<uint16_t>(value); memcpy(p, &v, 2); break; }
    case 4: { const uint32_t v = static_cast<uint32_t>(value); memcpy(p, &v, 4); break; }
    default: memcpy(p, &value, 8); break;
  }
}

}  // namespace reshard
