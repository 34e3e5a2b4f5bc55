// FP8 E4M3 quantization arithmetic, bit for bit the same on the host (the
// host backend, and the expected bytes every run is checked against) and on
// the GPU (the NCCL backend's quantize kernel).
//
// E4M3 ("e4m3fn", OCP FP8): sign, 4 exponent bits (bias 7), 3 mantissa bits,
// no infinities, 0x7F/0xFF NaN; largest 448 (0x7E), smallest normal 2^-6,
// subnormals k * 2^-9. Conversion from fp32 rounds to nearest, ties to even,
// and saturates to +-448 (CUDA's __NV_SATFINITE). A block's scale s is its
// amax / 448 in fp32 (value = fp8 * s, DeepSeek's weight_scale_inv), or for
// UE8M0 / E8M0 that rounded up to a power of two; an all-zero block has
// s = 1. Elements are x / s in fp32 (IEEE division, round to nearest).
//
// Quantized tensors are filled with finite bf16 values (pattern.h,
// FiniteBf16Pattern): raw pattern bits hold NaN and infinities.
// Usable from host and CUDA device code; depends on executor/pattern.h only.
#pragma once

#include <cstdint>
#include <cstring>

#include "executor/pattern.h"

namespace reshard {

inline constexpr float kE4M3Max = 448.0f;

RESHARD_HD inline uint32_t FloatBits(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}
RESHARD_HD inline float BitsFloat(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}
RESHARD_HD inline float Bf16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }


// fp32 -> E4M3, round to nearest even, saturating to +-448; NaN -> 0x7F.
RESHARD_HD inline uint8_t E4M3FromFloat(float x) {
  const uint32_t u = FloatBits(x);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint8_t>(sign | 0x7F);  // NaN
  if (a >= 0x43E00000u) return static_cast<uint8_t>(sign | 0x7E);  // >= 448 (and inf): saturate
  const int32_t e = static_cast<int32_t>(a >> 23) - 127;          // unbiased exponent
  uint32_t q;
  if (e >= -6) {
    // Normal: keep 3 of the 23 mantissa bits; a carry out of the mantissa
    // bumps the exponent, which the addition does by itself.
    const uint32_t mant = a & 0x7FFFFFu;
    const uint32_t keep = mant >> 20, rem = mant & 0xFFFFFu;
    q = (static_cast<uint32_t>(e + 7) << 3) + keep;
    if (rem > 0x80000u || (rem == 0x80000u && (keep & 1u))) ++q;
    if (q > 0x7Eu) q = 0x7Eu;  // rounded past 448
  } else {
    // Subnormal: the value in units of 2^-9, rounded; 8 units is the
    // smallest normal, encoded 0x08, which the same integer is.
    if (e < -10) return sign;  // below 2^-10 (half the smallest subnormal, or its tie): zero
    const uint64_t sig = (a & 0x7FFFFFu) | (e > -127 ? 0x800000u : 0u);
    const int32_t shift = 14 - e;  // value = sig * 2^(e-23) = (sig >> shift) units of 2^-9
    const uint64_t keep = sig >> shift, rem = sig & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
    q = static_cast<uint32_t>(keep);
    if (rem > half || (rem == half && (keep & 1u))) ++q;
  }
  return static_cast<uint8_t>(sign | q);
}

// The scale of a block with largest magnitude `amax` (scale_format as
// model/quant.h ScaleFormat: 0 fp32, 1 UE8M0, 2 E8M0).
RESHARD_HD inline float QuantScale(float amax, int32_t scale_format) {
  float s = amax / kE4M3Max;
  if (!(s > 0.0f)) s = 1.0f;  // an all-zero block
  if (scale_format == 0) return s;
  uint32_t u = FloatBits(s);
  if ((u >> 23) == 0) return BitsFloat(0x00800000u);  // subnormal: the smallest normal power of two
  if (u & 0x7FFFFFu) u = (u & 0x7F800000u) + 0x00800000u;  // round up to a power of two
  return BitsFloat(u);
}
// The stored bits of scale `s`: fp32 bits, or for E8M0 its biased exponent.
RESHARD_HD inline uint64_t ScaleStoredBits(float s, int32_t scale_format) {
  const uint32_t u = FloatBits(s);
  return scale_format == 2 ? ((u >> 23) & 0xFFu) : u;
}
RESHARD_HD inline uint8_t QuantizeElement(float x, float scale) { return E4M3FromFloat(x / scale); }

// One tile of a quantize op, flattened to plain numbers (byte offsets into
// three buffers) so host loops and device kernels walk it the same way:
// element (p, r, c) of the tile is read at in + p*in_plane + r*in_row + 2c,
// written at out + p*out_plane + r*out_row + c; block (p, i, j) has its
// scale at sc + p*sc_plane + i*sc_row + j*scale_bytes. block_rows/cols are
// the tensor's; the tile starts on a block boundary. Built from a plan's
// QuantizeTile by QuantizeJobOf (executor.h).
struct QuantizeJob {
  int32_t in_buffer = -1, out_buffer = -1, sc_buffer = -1;  // plan buffer ids
  int64_t planes = 1, rows = 0, cols = 0;
  int64_t block_rows = 1, block_cols = 1;
  int32_t scale_format = 0, scale_bytes = 4;
  int64_t in_offset = 0, in_row = 0, in_plane = 0;
  int64_t out_offset = 0, out_row = 0, out_plane = 0;
  int64_t sc_offset = 0, sc_row = 0, sc_plane = 0;
  RESHARD_HD int64_t BlockRows() const { return (rows + block_rows - 1) / block_rows; }
  RESHARD_HD int64_t BlockCols() const { return (cols + block_cols - 1) / block_cols; }
  RESHARD_HD int64_t Blocks() const { return planes * BlockRows() * BlockCols(); }
};

// Quantizes block `b` (in (plane, block row, block col) order) of a job:
// one pass for amax, one to write. Host and device (one thread).
RESHARD_HD inline void QuantizeBlock(const QuantizeJob& j, int64_t b, const unsigned char* in, unsigned char* out,
                                     unsigned char* sc) {
  const int64_t bc = b % j.BlockCols(), rest = b / j.BlockCols();
  const int64_t br = rest % j.BlockRows(), p = rest / j.BlockRows();
  const int64_t r0 = br * j.block_rows, c0 = bc * j.block_cols;
  const int64_t r1 = r0 + j.block_rows < j.rows ? r0 + j.block_rows : j.rows;
  const int64_t c1 = c0 + j.block_cols < j.cols ? c0 + j.block_cols : j.cols;
  float amax = 0.0f;
  for (int64_t r = r0; r < r1; ++r) {
    const unsigned char* row = in + j.in_offset + p * j.in_plane + r * j.in_row;
    for (int64_t c = c0; c < c1; ++c) {
      const float v = Bf16ToFloat(static_cast<uint16_t>(LoadElement(row + 2 * c, 2)));
      const float m = v < 0 ? -v : v;
      amax = m > amax ? m : amax;
    }
  }
  const float s = QuantScale(amax, j.scale_format);
  StoreElement(sc + j.sc_offset + p * j.sc_plane + br * j.sc_row + bc * j.scale_bytes, j.scale_bytes,
               ScaleStoredBits(s, j.scale_format));
  for (int64_t r = r0; r < r1; ++r) {
    const unsigned char* row = in + j.in_offset + p * j.in_plane + r * j.in_row;
    unsigned char* orow = out + j.out_offset + p * j.out_plane + r * j.out_row;
    for (int64_t c = c0; c < c1; ++c)
      orow[c] = QuantizeElement(Bf16ToFloat(static_cast<uint16_t>(LoadElement(row + 2 * c, 2))), s);
  }
}

// The expected content of quantized tensors, from the fill pattern: the scale
// of block (plane, i, j) of the values of bf16 tensor `source` (a logical
// [planes, rows, cols] matrix), the same arithmetic as QuantizeBlock.
RESHARD_HD inline float ExpectedBlockScale(const PieceMap& m, int64_t plane, int64_t i, int64_t j) {
  const QuantMap& q = m.quant;
  const int64_t r0 = i * q.block_rows, c0 = j * q.block_cols;
  const int64_t r1 = r0 + q.block_rows < q.rows ? r0 + q.block_rows : q.rows;
  const int64_t c1 = c0 + q.block_cols < q.cols ? c0 + q.block_cols : q.cols;
  float amax = 0.0f;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) {
      const float v = Bf16ToFloat(FiniteBf16Pattern(q.source, (plane * q.rows + r) * q.cols + c));
      const float a = v < 0 ? -v : v;
      amax = a > amax ? a : amax;
    }
  return QuantScale(amax, q.scale_format);
}

}  // namespace reshard
