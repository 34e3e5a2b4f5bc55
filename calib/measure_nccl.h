// Measures this host's GPU links for `reshard calibrate` (CUDA runtime + NCCL).
//
// One process drives every visible GPU (ncclCommInitAll); NVLink SHARP stays
// off (NCCL_NVLS_ENABLE=0 unless the environment sets it). Measured, each size
// from 4 KiB up to max_bytes (×2 steps; ×4 with quick), after an untimed pass
// over all sizes, warmed up and then timed over several repetitions (the fit
// takes the median):
//  * nvlink: ncclSend/ncclRecv GPU 0 -> 1 alone, and 0 <-> 1 both at once
//    (CUDA events on both GPUs, the longer interval). Only with 2+ GPUs.
//    network: not measured (one process, one host).
//  * pcie: pinned host <-> device copies on GPU 0, h2d, d2h, both at once
//    (cudaMemcpyAsync on two streams, CUDA events).
//  * pcie_pageable: the same from pageable host memory; these copies block the
//    calling thread, so they are timed with the host clock (both at once: two
//    threads released together).
//  * device_copy: cudaMemcpyAsync device-to-device on GPU 0 (copy throughput).
//  * memory: cudaMemGetInfo on each GPU right after its context is created
//    (first cudaFree(0)), after the test buffers are allocated, after
//    ncclCommInitAll, and after a first send/recv with every peer.
// The result is raw data; calib/profile.h fits it.
// CUDA / NCCL failures throw GpuError (executor/nccl/gpu_error.h) naming the
// call, file and line and the library's message.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "calib/profile.h"

namespace reshard {

// No GPU to measure (no device, no driver): the CLI exits 2 with this message.
class CalibrationUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CalibrateOptions {
  int64_t min_bytes = int64_t{4} << 10;
  int64_t max_bytes = int64_t{1} << 30;
  bool quick = false;  // ×4 size steps and fewer repetitions (about a quarter of the time)
  // Called with one line per finished series (progress on stderr); may be empty.
  std::function<void(const std::string&)> progress;
};

// Throws InputError("<cli>", "--max-bytes", ...) for sizes out of range or
// that do not fit in GPU memory, CalibrationUnavailable without GPUs.
CalibrationData MeasureNccl(const CalibrateOptions& options);

}  // namespace reshard
