// One strided copy of the all-gather baseline as its copy kernel sees it: arena
// offsets and strides, cut into chunks (one warp each). Shared by the CUDA kernel
// (allgather_kernels.cu) and the host emulation (allgather_plan.cc), so the tests
// exercise the kernel's own index arithmetic. No CUDA headers: host code includes it.
#pragma once

#include <algorithm>
#include <cstdint>

#include "executor/pattern.h"  // RESHARD_HD

namespace reshard::baseline {

inline constexpr int64_t kChunkBytes = int64_t{32} << 10;
inline constexpr int kCopyArenas = 5;           // arenas a copy may address (allgather_plan.h kArenas)
inline constexpr int64_t kArenaBaseAlign = 16;  // every arena base is at least this aligned

// Where each arena of one GPU starts, passed to every launch. Descriptors hold
// arena offsets, not pointers: a run that allocates its refit buffers anew
// (after the optimizer offload, allgather_run.cc) reuses its descriptors.
struct ArenaBases {  // trivial (the kernel keeps one in shared memory): value-initialise, ArenaBases{}
  unsigned char* base[kCopyArenas];
};

// n0 x n1 rows of row_bytes contiguous bytes; row (i0, i1) starts at
// src_offset + i0 * src_stride0 + i1 * src_stride1 of arena src_arena (likewise dst).
struct DeviceCopy {
  int64_t src_offset = 0, dst_offset = 0;  // bytes into the arenas
  int32_t src_arena = 0, dst_arena = 0;    // index into ArenaBases
  int64_t n1 = 1;  // row r is (r / n1, r % n1)
  int64_t row_bytes = 0;
  int64_t src_stride0 = 0, src_stride1 = 0, dst_stride0 = 0, dst_stride1 = 0;
  int64_t chunk_bytes = 0;  // bytes per warp task, a multiple of vec
  int64_t chunks_per_row = 0;
  int64_t chunk_begin = 0, chunk_end = 0;  // this copy's chunks in its launch
  int32_t vec = 1;                         // bytes per load/store: 1, 2, 4, 8 or 16
};

// Builds the descriptor; its chunks are [chunk_begin, chunk_end). The vector width
// is the largest power of two <= 16 dividing every offset and stride the copy uses
// (arena bases are kArenaBaseAlign-aligned, so it divides the addresses too).
inline DeviceCopy MakeDeviceCopy(int32_t src_arena, int64_t src_offset, int32_t dst_arena, int64_t dst_offset,
                                 int64_t n0, int64_t n1, int64_t row_bytes, int64_t src_stride0, int64_t src_stride1,
                                 int64_t dst_stride0, int64_t dst_stride1, int64_t chunk_begin) {
  DeviceCopy d;
  d.src_offset = src_offset;
  d.dst_offset = dst_offset;
  d.src_arena = src_arena;
  d.dst_arena = dst_arena;
  d.n1 = n1;
  d.row_bytes = row_bytes;
  d.src_stride0 = src_stride0, d.src_stride1 = src_stride1;
  d.dst_stride0 = dst_stride0, d.dst_stride1 = dst_stride1;
  uint64_t bits = static_cast<uint64_t>(src_offset | dst_offset | row_bytes);
  if (n0 > 1) bits |= static_cast<uint64_t>(src_stride0 | dst_stride0);
  if (n1 > 1) bits |= static_cast<uint64_t>(src_stride1 | dst_stride1);
  d.vec = 16;
  while (bits % static_cast<uint64_t>(d.vec) != 0) d.vec /= 2;
  d.chunk_bytes = std::min(kChunkBytes, row_bytes);
  d.chunks_per_row = (row_bytes + d.chunk_bytes - 1) / d.chunk_bytes;
  d.chunk_begin = chunk_begin;
  d.chunk_end = chunk_begin + n0 * n1 * d.chunks_per_row;
  return d;
}

// Chunk `c` (chunk_begin <= c < chunk_end) of a copy: n bytes from *s to *t.
RESHARD_HD inline void ChunkAt(const DeviceCopy& d, const ArenaBases& a, int64_t c, const unsigned char** s,
                               unsigned char** t, int64_t* n) {
  const int64_t k = c - d.chunk_begin;
  const int64_t row = k / d.chunks_per_row;
  const int64_t part = k - row * d.chunks_per_row;
  const int64_t i0 = row / d.n1, i1 = row - i0 * d.n1;
  const int64_t at = part * d.chunk_bytes;
  const int64_t left = d.row_bytes - at;
  *n = left < d.chunk_bytes ? left : d.chunk_bytes;
  *s = a.base[d.src_arena] + d.src_offset + i0 * d.src_stride0 + i1 * d.src_stride1 + at;
  *t = a.base[d.dst_arena] + d.dst_offset + i0 * d.dst_stride0 + i1 * d.dst_stride1 + at;
}

}  // namespace reshard::baseline
