// GpuState: what the NCCL backend keeps for each GPU this process drives:
// its device, streams, communicator, allocator pool and memory counters.
// Shared by the backend (backend.cc), its communicators and waits (comms.h)
// and its pool (pool.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "executor/nccl/kernels.h"

namespace reshard {

struct GpuState {
  int32_t gpu = -1;  // plan GPU (= NCCL rank)
  int device = -1;   // CUDA device
  int sms = 1;
  std::vector<cudaStream_t> streams;  // one per plan stream, kept across runs
  cudaEvent_t ref = nullptr;          // t = 0 of the timed run
  ncclComm_t comm = nullptr;
  ncclComm_t comm2 = nullptr;  // lane 1 (plan stream "comm2"): split from comm, made when a plan uses it
  cudaMemPool_t pool = nullptr;
  int64_t context_bytes = 0, comm_bytes = 0;
  int64_t start_used = 0, start_reserved = 0, reserved_high = 0, used_high = 0;
  std::atomic<int64_t> sampled_peak{0};
  int64_t host_bytes = 0, host_peak = 0;
  int64_t alloc_retries = 0;  // allocations the pool refused at first (this run)
  int64_t alloc_drains = 0;   // of those, the ones that fit only after the GPU drained
  std::vector<int32_t> issued_frees;  // free ops of device buffers issued this run, in order
  // Descriptors of copy batches too large for kernel parameters: pinned,
  // mapped host memory and its device copy, one slot per descriptor of the run.
  gpu::CopyDesc* arena_device = nullptr;
  gpu::CopyDesc* arena_host = nullptr;
  int64_t arena_capacity = 0, arena_cursor = 0;
};

using GpuStates = std::vector<std::unique_ptr<GpuState>>;

}  // namespace reshard
