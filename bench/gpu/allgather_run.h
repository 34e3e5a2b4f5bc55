// The GPU run of the all-gather refit baseline (allgather_plan.h's plan on real
// GPUs, measured the way reshard's executor is measured).
//
// One process drives every GPU of the host (ncclCommInitAll, one stream per
// GPU). Source shards are filled on device with the pattern of
// executor/pattern.h; the destination weights are allocated on every GPU; each
// step runs pack -> ncclAllGather (or ncclBroadcast, or the flat
// ncclSend/ncclRecv) -> unpack; every destination element is then checked on
// device. Measured: refit time (CUDA events on each GPU, the max over GPUs, per
// timed run), the extra device memory beyond source + destination weights (our
// own allocations counted exactly, NCCL's measured with cudaMemGetInfo before
// communicator creation and after its first collectives), and how many
// destination elements are wrong.
//
// Memory modelled (the default): before timing, each GPU holds the scenario's
// state at refit start (GpuMemoryPlan): source weights, optimizer state (two
// device buffers: the part kept on device and the part the offload moves),
// kept gradients, the KV cache, and the reserve as a buffer nobody touches;
// plus pinned host memory for the offloaded part. Each timed run does what
// NeMo-RL / verl do: copy the offloaded part to host and free it
// (cudaFreeAsync), allocate the refit's buffers (destination, bucket, input,
// staging: cudaMallocAsync from the device's pool, which reuses what the
// offload freed, as reshard's executor does), refit. Untimed after each run:
// poison and free the refit's buffers, re-allocate the offloaded part and copy
// it back, so every run starts from the same state. NCCL is connected by one
// refit before the start state is built (a job's refit communicator exists
// from its earlier steps), so its buffers are measured on their own and are
// present in every run. Not modelled: weights and the refit's buffers only,
// all allocated once.
//
// An allocation that fails is a result (DoesNotFit), not an error; CUDA / NCCL
// errors throw GpuError (executor/nccl/gpu_check.h).
#pragma once

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench/gpu/allgather_plan.h"

namespace reshard::baseline {

// An allocation that failed. free_bytes / total_bytes: the device's at the
// failure (-1 for pinned host memory).
struct DoesNotFit : std::runtime_error {
  DoesNotFit(int gpu_, std::string what_, int64_t bytes_, std::string phase_, int64_t free_, int64_t total_);
  int gpu;
  std::string allocation;
  int64_t bytes;
  std::string phase;  // before the refit (setup), at refit start, during the refit, restoring after a run
  int64_t free_bytes, total_bytes;
};

// What one GPU measured.
struct GpuResult {
  int gpu = 0;
  int64_t weights_bytes = 0;        // source + destination arenas
  int64_t extra_tracked_bytes = 0;  // our allocations that serve the refit (bucket, input, staging, descriptors)
  int64_t nccl_bytes = 0;           // NCCL's own device memory (cudaMemGetInfo)
  int64_t verification_bytes = 0;   // check counters (not part of a refit)
  size_t device_total_bytes = 0;
  int64_t device_used_peak_bytes = 0;       // cudaMemGetInfo, sampled
  std::array<double, 3> breakdown_s{};      // pack, collective, unpack of the profiled run
  // Memory modelled only.
  int64_t device_used_at_start_bytes = 0;
  uint64_t pool_used_high_bytes = 0;  // the pool holds the offloaded part between runs, the refit's buffers during them
  uint64_t pool_reserved_high_bytes = 0;
};

// A destination tensor with wrong elements on one GPU.
struct CheckFailure {
  int gpu = 0;
  std::string tensor;
  unsigned long long mismatches = 0;
  unsigned long long first_index = 0;  // the smallest wrong global element index
};

struct RunResult {
  std::vector<double> times_s;          // per timed run: refit time, max over GPUs
  std::vector<double> flat_times_s;     // flat: start to the end of the exchange
  std::vector<double> host_times_s;     // host clock around each timed run
  std::vector<double> offload_times_s;  // memory modelled: start to the end of the offload copy
  std::vector<GpuResult> gpus;
  int64_t mismatches = 0;               // all wrong destination elements (last timed run)
  std::vector<CheckFailure> failures;   // the first 16
  int warmup = 0, runs = 0;
  int nccl_version = 0;
  std::string device;                   // name of CUDA device 0
  std::string nccl_nvls_enable;         // NCCL_NVLS_ENABLE as run ("" when unset)
};

// Runs `p` on GPUs 0..p.gpus-1: `warmup` untimed runs (the first step by step,
// sampling memory), one profiled run (phases), `runs` timed runs; checks the
// destination after the last. Throws DoesNotFit, GpuError, InputError (too few GPUs).
RunResult RunOnGpus(const RefitPlan& p, int warmup, int runs);

}  // namespace reshard::baseline
