// Device kernels of the NCCL backend (executor/nccl/kernels.cu), behind plain
// C++ launch functions so host code compiles with the host compiler. Library
// reshard_gpu_kernels: the backend and the GPU bench programs (the all-gather
// baseline) launch the same kernels.
//
//  * Batched strided copy: one launch copies a list of (src, dst) pairs of
//    strided byte regions (plan/plan.h Region). Each pair is cut into runs
//    contiguous on both sides (length L = gcd of the row lengths, as
//    executor/region_walk.h) and runs into chunks of at most 16 KiB; one warp
//    copies one chunk with the widest vector (up to 16 B) every address of
//    the pair allows. Runs shorter than kShortRunBytes are grouped instead,
//    up to 32 runs per chunk (one lane computes each run's two addresses,
//    the warp shares them by shuffle): a warp that copied one 768-byte run
//    at a time moved 0.25 TB/s on an H200. Chunks of all pairs are spread
//    evenly over the grid.
//  * Fill / check: element (i0, i1, i2) of a content piece (executor/pattern.h
//    PieceMap) is written / compared with the pattern; tiles of 1024 elements
//    along the innermost dimension, one block per tile (grid-stride).
//    Checks count every mismatch and record either the first kMaxRecorded
//    that threads report (which ones, beyond the count, depends on timing) or
//    the smallest mismatching index. Pieces of quantized values or scales
//    (PieceMap::quant) are checked one quantization block per CTA: its scale
//    recomputed from the pattern, then its elements (or its scale) compared;
//    a large block (one scale per matrix) is spread over many CTAs, its amax
//    reduced into the check's slot first.
//  * Quantize (quantize_kernels.cu): one CTA per 2-D quantization block, or
//    per up to four 128-column blocks side by side (grid-stride), one pass:
//    the amax by a CTA reduction, the scale, then every element converted to
//    E4M3; one-row blocks (MXFP8) a few lanes each; one scale per matrix in
//    two passes over the grid (executor/quantize_math.h, bit for bit the
//    host's; aligned blocks by the hardware conversion and a reciprocal with
//    one correction step, the same bytes).
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "executor/pattern.h"
#include "executor/quantize_math.h"

namespace reshard::gpu {

// One pair of a copy batch, with its geometry normalised on the host.
struct CopyDesc {
  const unsigned char* src = nullptr;  // region start (offset applied)
  unsigned char* dst = nullptr;
  int64_t run = 0;            // L: bytes contiguous on both sides
  int64_t chunk = 0;          // bytes per warp task (<= run)
  int64_t chunks_per_run = 0;
  int64_t chunk_begin = 0;    // first global chunk index of this pair in its launch
  int64_t chunk_end = 0;
  int64_t src_row = 0, src_plane = 0, src_row_stride = 0, src_plane_stride = 0;  // plane = row * rows bytes
  int64_t dst_row = 0, dst_plane = 0, dst_row_stride = 0, dst_plane_stride = 0;
  int64_t runs = 0;           // runs of the pair (bytes / run)
  int32_t vec = 1;            // bytes per load/store: 1, 2, 4, 8 or 16
  int32_t runs_per_chunk = 1; // > 1: a chunk is that many whole short runs (chunk == run)
};

// Pairs passed by value in the kernel's parameters (the batch stays under
// the classic 4 KiB parameter limit); larger batches are read from device memory.
inline constexpr int kCopyDescsByValue = 24;
// 16 KiB chunks: a copy of a few MiB still has a chunk for most warps of the
// grid (a 16 MiB copy on 264 blocks: 0.91 TB/s with 64 KiB chunks, 1.54 with
// 16 KiB; 1 GiB: 1.95 and 1.97; bench/gpu/copy_kernel_probe.cu).
inline constexpr int64_t kCopyChunkBytes = 16 << 10;
inline constexpr int64_t kShortRunBytes = 8 << 10;        // below: several runs per chunk
inline constexpr int64_t kShortRunChunkBytes = 16 << 10;  // bytes per chunk of short runs (at most 32 runs)

// Blocks of a launch with `work` units (at least 1, at most max(max_blocks, 1)).
inline int32_t LaunchBlocks(int64_t work, int32_t max_blocks) {
  return static_cast<int32_t>(std::max<int64_t>(1, std::min<int64_t>(work, std::max(max_blocks, 1))));
}

// Launches the copies of `count` descriptors whose chunk ranges
// [chunk_begin, chunk_end) are consecutive from 0 to total_chunks. `descs` is
// host memory when count <= kCopyDescsByValue (copied into the launch's
// parameters), else device memory. Returns the launch's error.
cudaError_t LaunchCopy(const CopyDesc* descs, int32_t count, int64_t total_chunks, bool descs_on_device,
                       cudaStream_t s, int32_t max_blocks);

// Copies `count` descriptors from pinned, mapped host memory to device memory
// with a small kernel (SM loads through UVA). Not cudaMemcpyAsync: a copy
// engine would queue this behind any large offload already queued on it.
cudaError_t LaunchUploadDescs(CopyDesc* device, const CopyDesc* host_mapped, int32_t count, cudaStream_t s);

// One thread that spins until *flag != 0 (host-mapped memory) or about
// `max_ns` pass: holds a stream while the host queues work behind it
// (calibrate times queued launches this way).
cudaError_t LaunchGate(const volatile int* flag, long long max_ns, cudaStream_t s);

// Launches every kernel the backend uses once with no work. The first launch
// of a kernel loads its module (CUDA's lazy loading), which waits for all
// work already queued on the device: inside a timed run that stalled every
// stream behind a long offload. Called before timing.
cudaError_t WarmKernels(cudaStream_t s);
cudaError_t WarmQuantizeKernels(cudaStream_t s);  // the quantize kernels' part of WarmKernels

inline constexpr int kMaxRecorded = 16;
struct DeviceMismatch {
  int64_t index;
  unsigned long long expected;
  unsigned long long got;
};
// Large quantization blocks (one scale per matrix) a quantized piece's check
// reduces with many CTAs per block first: at most this many blocks per piece.
inline constexpr int kCheckAmaxBlocks = 512;
// Every mismatch counted, the first kMaxRecorded reported recorded; zeroed
// by the caller (block_amax is the check's own scratch).
struct CheckSlot {
  unsigned long long count;
  DeviceMismatch first[kMaxRecorded];
  unsigned int block_amax[kCheckAmaxBlocks];  // fp32 bits of each large block's amax
};
// Every mismatch counted and the smallest mismatching global index (start
// it at {0, ULLONG_MAX}: ULLONG_MAX stays when there is none).
struct MismatchCount {
  unsigned long long mismatches;
  unsigned long long first_index;
};

// Which quantize kernel runs a job: kAuto takes, at aligned addresses, for
// one scale per matrix the two-pass kernels (kTensor), for one-row blocks of
// 8-256 columns the lanes-per-block kernel (kRow), for 128 x 128 blocks of a
// job of whole blocks the one-block-per-iteration kernel (kBlock128), for
// other 128-column blocks the side-by-side kernel with one block per CTA
// (kWide1; kWide2 / kWide4 put 2 or 4 side by side), for other blocks the
// vectorized one-block kernel, all with the hardware E4M3 conversion; else
// the generic kernel. The others force a path where it applies, else the
// generic kernel (bench/gpu/quantize_kernel_probe.cu compares them; every
// path writes the same bytes).
enum class QuantizePath { kAuto, kGeneric, kVecSoftware, kVecHardware, kWide1, kWide2, kWide4, kRow, kTensor, kBlock128 };

// Quantizes job `j` (byte offsets into in / out / sc, the buffers' bases).
// CTAs per SM a quantize launch may use (the backend's and calibrate's
// max_blocks = SMs x this): the 128-column kernels with at most 64 registers a
// thread keep 4 CTAs of 256 threads resident per SM, and a grid of 16 per SM
// moved 0.767 of cudaMemcpyAsync's traffic rate on an H200 against 0.754 with
// 8 (kWide1; bench/gpu/quantize_kernel_probe.cu).
inline constexpr int32_t kQuantizeCtasPerSm = 16;
cudaError_t LaunchQuantize(const QuantizeJob& j, const unsigned char* in, unsigned char* out, unsigned char* sc,
                           cudaStream_t s, int32_t max_blocks, QuantizePath path = QuantizePath::kAuto);

// Compares the hardware fp32 -> E4M3 conversion the quantize kernel uses with
// E4M3FromFloat for every fp32 bit pattern in [first, first + count), and
// DivByScale with the IEEE division for every bf16 x against `scales`, and
// the packed bf16 max of the amax with the host's compare for every pair of
// magnitudes: mismatches counted into out[0], out[1], out[2] (device memory,
// zeroed by the caller).
cudaError_t LaunchConvertCheck(uint64_t first, uint64_t count, const float* scales, int32_t scale_count,
                               unsigned long long* out, cudaStream_t s);

cudaError_t LaunchFill(unsigned char* base, const PieceMap& m, cudaStream_t s, int32_t max_blocks);
cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, CheckSlot* slot, cudaStream_t s,
                        int32_t max_blocks);
cudaError_t LaunchCheck(const unsigned char* base, const PieceMap& m, MismatchCount* out, cudaStream_t s,
                        int32_t max_blocks);

}  // namespace reshard::gpu
