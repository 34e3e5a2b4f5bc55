// Descriptors of the NCCL backend's copy kernel (see copy_desc.h).
#include "executor/nccl/copy_desc.h"

#include <algorithm>
#include <numeric>

namespace reshard {

namespace {

// Geometry of one side of a copy for the kernel: contiguous regions become
// one row of all their bytes.
struct Side {
  int64_t row, plane, row_stride, plane_stride;
  int64_t run_limit;  // longest stretch contiguous in memory that a run may span
};
Side SideOf(const Region& r) {
  if (r.Contiguous()) return {r.Bytes(), r.Bytes(), 0, 0, r.Bytes()};
  return {r.row_bytes, r.row_bytes * r.rows, r.rows > 1 ? r.row_stride_bytes : 0,
          r.planes > 1 ? r.plane_stride_bytes : 0, r.row_bytes};
}

int32_t VecBytes(uint64_t alignment_bits) {
  int32_t v = 16;
  while (v > 1 && (alignment_bits & static_cast<uint64_t>(v - 1)) != 0) v /= 2;
  return v;
}

}  // namespace

bool SameShape(const Region& a, const Region& b) {
  return a.row_bytes == b.row_bytes && a.rows == b.rows && a.planes == b.planes;
}

gpu::CopyDesc DescribeCopy(const CopyPair& c, const unsigned char* src, unsigned char* dst, int64_t chunk_begin) {
  const int64_t bytes = c.src.Bytes();
  const Side a = SideOf(c.src), b = SideOf(c.dst);
  gpu::CopyDesc d;
  d.src = src;
  d.dst = dst;
  d.run = std::gcd(a.run_limit, b.run_limit);
  d.runs = bytes / d.run;
  d.chunk = std::min(d.run, gpu::kCopyChunkBytes);
  d.chunks_per_run = (d.run + d.chunk - 1) / d.chunk;
  if (d.run < gpu::kShortRunBytes && d.runs > 1)
    d.runs_per_chunk = static_cast<int32_t>(
        std::min<int64_t>({32, d.runs, std::max<int64_t>(1, gpu::kShortRunChunkBytes / d.run)}));
  d.src_row = a.row;
  d.src_plane = a.plane;
  d.src_row_stride = a.row_stride;
  d.src_plane_stride = a.plane_stride;
  d.dst_row = b.row;
  d.dst_plane = b.plane;
  d.dst_row_stride = b.row_stride;
  d.dst_plane_stride = b.plane_stride;
  const uint64_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                        static_cast<uint64_t>(d.run | d.chunk | a.row | a.row_stride | a.plane_stride | b.row |
                                              b.row_stride | b.plane_stride);
  d.vec = VecBytes(bits);
  d.chunk_begin = chunk_begin;
  d.chunk_end = chunk_begin +
                (d.runs_per_chunk > 1 ? (d.runs + d.runs_per_chunk - 1) / d.runs_per_chunk : d.runs * d.chunks_per_run);
  return d;
}

}  // namespace reshard
