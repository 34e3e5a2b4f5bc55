// The one-GPU measurements of `reshard calibrate` besides the links (CUDA
// runtime + NCCL, GPU 0; calib/host_data.h says what each sample is):
//  * host: what the executor's host thread spends per call, host steady_clock
//    over `calls` calls in batches (the GPU drained before each batch, so
//    neither a full launch queue nor a busy GPU is timed): cudaEventRecord,
//    cudaStreamWaitEvent (on events still pending), DescribeCopy + LaunchCopy
//    of a small copy, cudaMemcpyAsync of 4 KiB pinned <-> device,
//    cudaMallocAsync / cudaFreeAsync of 1 MiB from the executor's warmed pool,
//    cudaSetDevice; NCCL groups of 1 ... 512 send/recv pairs to self on a
//    one-rank communicator (non-blocking, as the executor creates them, and
//    blocking); how many launches queue behind a held stream before a launch
//    call blocks.
//  * copy_kernel: the executor's copy kernel (gpu::LaunchCopy, descriptors
//    from DescribeCopy) on copies of `copy_bytes` whose contiguous runs are
//    64 B ... 1 MiB or the whole copy, strided rows on one side or both, at
//    shares 1/8, 1/4, 1/2, 1 of the copy grid; CUDA events around 4 ... 64
//    launches queued behind a held stream (no launch latency timed), the
//    median of the repetitions; plus contiguous copies of 1 ... 64 MiB (the
//    size curve).
//  * quantize_kernel: the fp8 quantize kernel (gpu::LaunchQuantize) on bf16
//    matrices of 1 MiB, 4 MiB ... quantize_max_bytes in 128 x 128 blocks,
//    MXFP8's 1 x 32 blocks and one scale per matrix, timed as the copy kernel
//    (kPatternQuantize* samples).
//  * cold: cudaHostAlloc and cudaHostRegister of 1, 4, 16 GiB (up to
//    pin_max_bytes), a fresh pool grown by cudaMallocAsync of the same sizes.
// CUDA / NCCL failures throw GpuError; no GPU: CalibrationUnavailable.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "calib/host_data.h"

namespace reshard {

struct HostCalibrateOptions {
  bool host = true;
  bool copy_kernel = true;
  bool quantize_kernel = true;
  bool cold = true;
  bool quick = false;                             // fewer calls and repetitions
  int32_t calls = 20000;                          // per host-call series
  int64_t copy_bytes = int64_t{256} << 20;        // bytes per copy-kernel launch
  int64_t quantize_max_bytes = int64_t{1} << 30;  // largest bf16 input of a quantize launch
  int64_t pin_max_bytes = int64_t{16} << 30;      // largest pin / pool-grow size
  int32_t copy_blocks_per_sm = 1;                 // the executor's default (NcclBackendOptions)
  std::function<void(const std::string&)> progress;
};

// Throws InputError("<cli>", ...) for options out of range or sizes that do
// not fit in GPU memory, CalibrationUnavailable without a GPU.
HostMeasurements MeasureHost(const HostCalibrateOptions& options);

}  // namespace reshard
