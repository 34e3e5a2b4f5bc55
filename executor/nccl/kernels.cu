// Kernels of the NCCL backend: batched strided copy, pattern fill and check
// (see kernels.h); the quantize kernels are in quantize_kernels.cu.
#include "executor/nccl/kernels.h"

#include "executor/quantize_math.h"

#include "executor/nccl/quantize.cuh"
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
  int i = 0;
  for (int64_t c = FirstChunk(); c < total; c += ChunkStep()) {
    i = ChunkOwnerFrom(descs, count, c, i);
    CopyChunk(descs[i], c, lane);
  }
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


// The quantization blocks a piece of quantized values or scales
// (PieceMap::quant) touches, numbered b in [0, Count()): plane, block row,
// block column, in that order.
struct QuantPieceBlocks {
  int64_t rows, cols, p0, r0, c0, np, nr, nc, bi0, bj0, nbi, nbj;
  __device__ explicit QuantPieceBlocks(const PieceMap& m) {
    const QuantMap& q = m.quant;
    // The piece's box in (plane, row, col) of the tensor (values) or of its scales.
    rows = q.role == 1 ? q.rows : (q.rows + q.block_rows - 1) / q.block_rows;
    cols = q.role == 1 ? q.cols : (q.cols + q.block_cols - 1) / q.block_cols;
    p0 = m.base_global / (rows * cols), r0 = m.base_global / cols % rows, c0 = m.base_global % cols;
    np = m.extent[0], nr = m.extent[1], nc = m.extent[2];
    // Blocks: values span [r0/br, ceil((r0+nr)/br)); scales are one block per element.
    bi0 = q.role == 1 ? r0 / q.block_rows : r0, bj0 = q.role == 1 ? c0 / q.block_cols : c0;
    const int64_t bi1 = q.role == 1 ? (r0 + nr + q.block_rows - 1) / q.block_rows : r0 + nr;
    const int64_t bj1 = q.role == 1 ? (c0 + nc + q.block_cols - 1) / q.block_cols : c0 + nc;
    nbi = bi1 - bi0, nbj = bj1 - bj0;
  }
  __device__ int64_t Count() const { return np * nbi * nbj; }
  __device__ void Block(int64_t b, int64_t* pp, int64_t* bi, int64_t* bj) const {
    *pp = b / (nbi * nbj), *bi = bi0 + b / nbj % nbi, *bj = bj0 + b % nbj;
  }
};

__device__ __forceinline__ float PatternAt(const QuantMap& q, int64_t plane, int64_t r, int64_t c) {
  return Bf16ToFloat(FiniteBf16Pattern(q.source, (plane * q.rows + r) * q.cols + c));
}

// The amax of each large block (blockIdx.y) from the fill pattern, the
// block's elements spread over gridDim.x CTAs: fp32 bits raised into
// amax[b] (|x| orders as its bits), zeroed by the caller.
__global__ void __launch_bounds__(kBlockThreads) QuantCheckAmaxKernel(const PieceMap m, unsigned int* amax) {
  const QuantMap& q = m.quant;
  const QuantPieceBlocks B(m);
  int64_t pp, bi, bj;
  B.Block(blockIdx.y, &pp, &bi, &bj);
  const int64_t br0 = bi * q.block_rows, bc0 = bj * q.block_cols;
  const int64_t w = min(bc0 + q.block_cols, q.cols) - bc0, n = (min(br0 + q.block_rows, q.rows) - br0) * w;
  float mx = 0.0f;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x)
    mx = fmaxf(mx, fabsf(PatternAt(q, B.p0 + pp, br0 + k / w, bc0 + k % w)));
  mx = CtaMax(mx);
  if (threadIdx.x == 0 && mx > 0.0f) atomicMax(&amax[blockIdx.y], FloatBits(mx));
}

// Checks a piece of quantized values or scales (PieceMap::quant): each
// quantization block the piece touches gets `parts` CTAs (grid-stride over
// block x part); its scale from the fill pattern (the same reduction as
// QuantizeKernel; from amax[b] when QuantCheckAmaxKernel ran, else reduced
// by the one CTA of the block), then each element of the block inside the
// piece (values, converted as the quantize kernels do: bit for bit
// QuantizeElement) or the block's one scale (scales) compared.
template <typename Record>
__global__ void __launch_bounds__(kBlockThreads) QuantCheckKernel(const unsigned char* base, const PieceMap m,
                                                                  const Record record, const unsigned int* amax,
                                                                  int32_t parts) {
  const QuantMap& q = m.quant;
  const QuantPieceBlocks B(m);
  for (int64_t wi = blockIdx.x; wi < B.Count() * parts; wi += gridDim.x) {
    const int64_t b = wi / parts, part = wi % parts;
    int64_t pp, bi, bj;
    B.Block(b, &pp, &bi, &bj);
    const int64_t plane = B.p0 + pp;
    const int64_t br0 = bi * q.block_rows, bc0 = bj * q.block_cols;
    const int64_t br1 = min(br0 + q.block_rows, q.rows), bc1 = min(bc0 + q.block_cols, q.cols);
    auto pattern = [&](int64_t r, int64_t c) { return PatternAt(q, plane, r, c); };
    const float s = QuantScale(amax != nullptr ? BitsFloat(amax[b]) : BlockAmax(br0, br1, bc0, bc1, pattern),
                               q.scale_format);
    if (q.role == 2) {
      if (threadIdx.x != 0 || part != 0) continue;
      const int64_t l = m.offset_elems + pp * m.local_stride[0] + (bi - B.r0) * m.local_stride[1] +
                        (bj - B.c0) * m.local_stride[2];
      const uint64_t want = ScaleStoredBits(s, q.scale_format);
      const uint64_t got = LoadElement(base + l * m.elem_bytes, m.elem_bytes);
      if (got != want) record((plane * B.rows + bi) * B.cols + bj, want, got);
      continue;
    }
    // Values: the block's elements inside the piece.
    const float rs = 1.0f / s;
    const int mode = ScaleMode(s);
    const int64_t ir0 = max(br0, B.r0), ir1 = min(br1, B.r0 + B.nr), ic0 = max(bc0, B.c0), ic1 = min(bc1, B.c0 + B.nc);
    const int64_t w = ic1 - ic0, n = (ir1 - ir0) * w;
    for (int64_t k = part * blockDim.x + threadIdx.x; k < n; k += static_cast<int64_t>(parts) * blockDim.x) {
      const int64_t r = ir0 + k / w, c = ic0 + k % w;
      const int64_t l = m.offset_elems + pp * m.local_stride[0] + (r - B.r0) * m.local_stride[1] +
                        (c - B.c0) * m.local_stride[2];
      const float x = pattern(r, c);
      const uint64_t want = QuantizePair(x, x, s, rs, mode) & 0xFFu;
      const uint64_t got = base[l];
      if (got != want) record((plane * B.rows + r) * B.cols + c, want, got);
    }
  }
}

// Blocks of at least this many elements are checked by several CTAs each.
inline constexpr int64_t kSplitCheckElems = int64_t{1} << 16;

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
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  return WarmQuantizeKernels(s);
}

cudaError_t LaunchFill(unsigned char* base, const PieceMap& m, cudaStream_t s, int32_t max_blocks) {
  if (m.Elements() == 0) return cudaSuccess;
  FillKernel<<<LaunchBlocks(Tiles(m), max_blocks), kBlockThreads, 0, s>>>(base, m);
  return cudaGetLastError();
}

cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, CheckSlot* slot, cudaStream_t s,
                        int32_t max_blocks) {
  if (m.Elements() == 0) return cudaSuccess;
  if (m.quant.role != 0) {
    const int64_t blocks = QuantCheckBlocks(m);
    const QuantMap& q = m.quant;
    const int64_t block_elems = std::min(q.block_rows, q.rows) * std::min(q.block_cols, q.cols);
    if (block_elems >= kSplitCheckElems && blocks <= kCheckAmaxBlocks) {
      // Large blocks: the amax by many CTAs per block, then `parts` CTAs per block compare.
      const int32_t parts = static_cast<int32_t>(
          std::clamp<int64_t>(std::max<int64_t>(1, max_blocks / blocks), 1, block_elems / (kSplitCheckElems / 4)));
      QuantCheckAmaxKernel<<<dim3(parts, static_cast<unsigned>(blocks)), kBlockThreads, 0, s>>>(m, slot->block_amax);
      QuantCheckKernel<<<LaunchBlocks(blocks * parts, max_blocks), kBlockThreads, 0, s>>>(
          base, m, RecordFirst{slot}, slot->block_amax, parts);
      return cudaGetLastError();
    }
    QuantCheckKernel<<<LaunchBlocks(blocks, max_blocks), kBlockThreads, 0, s>>>(base, m, RecordFirst{slot}, nullptr, 1);
    return cudaGetLastError();
  }
  CheckKernel<<<LaunchBlocks(Tiles(m), max_blocks), kBlockThreads, 0, s>>>(base, m, RecordFirst{slot});
  return cudaGetLastError();
}

cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, MismatchCount* out, cudaStream_t s,
                        int32_t max_blocks) {
  if (m.Elements() == 0) return cudaSuccess;
  if (m.quant.role != 0) {
    QuantCheckKernel<<<LaunchBlocks(QuantCheckBlocks(m), max_blocks), kBlockThreads, 0, s>>>(
        base, m, RecordSmallest{out}, nullptr, 1);
    return cudaGetLastError();
  }
  CheckKernel<<<LaunchBlocks(Tiles(m), max_blocks), kBlockThreads, 0, s>>>(base, m, RecordSmallest{out});
  return cudaGetLastError();
}

}  // namespace reshard::gpu
