// NcclBackend: runs a Plan on real GPUs with CUDA streams and events and NCCL
// grouped send/recv. Built only when CMake finds CUDA and NCCL
// (RESHARD_HAVE_NCCL, library reshard_executor_nccl); this header has no CUDA
// types, so host-compiled code (the CLI) can include it.
//
// Mapping of the plan onto the machine:
//  * every plan stream of a GPU is a CUDA stream (non-blocking); an op's
//    OpStart / OpEnd are CUDA events on its stream (per-op times), and OpEnd
//    is the event other streams wait for (cudaStreamWaitEvent);
//  * a plan group is one ncclGroupStart / ncclGroupEnd; NCCL rank = plan GPU;
//  * copies: device <-> device pairs run as one batched strided-copy kernel
//    per op (executor/nccl/kernels.h); pairs touching pinned host memory
//    (offload / reload) use cudaMemcpy2DAsync per plane (copy engines);
//  * device buffers come from the device's stream-ordered pool
//    (cudaMallocAsync / cudaFreeAsync on the op's stream), preexisting ones
//    allocated before timing. Why not cudaMalloc / cudaFree: cudaFree
//    synchronises the device, which would serialise every stream at each
//    free of a staging buffer and measure something the plan did not say.
//    Host buffers are pinned (cudaHostAlloc) before timing; their alloc /
//    free ops only account (pinning is a one-off setup cost in a real job);
//  * sources are filled and destinations checked by kernels on the device;
//    only counts and the first few mismatches come back.
//
// Memory per GPU: `context_bytes` = device memory in use once the CUDA
// context exists; `comm_bytes` = what communicator creation and the peer
// warm-up added; `peak_bytes` = the most in use during the run: the larger of
// cudaMemGetInfo sampled by a host thread and (memory in use outside the
// pool at the start + the pool's reserved high-water mark);
// `plan_peak_bytes` = the pool's used high-water mark (the plan's own device
// buffers, exactly, as the GPU executed the allocs and frees). Used memory
// counts everything on the device, including other processes: run on
// dedicated GPUs.
//
// Modes:
//  * one process drives every GPU of the plan (ncclCommInitAll; plan GPU g is
//    CUDA device g; the plan must fit on this host);
//  * one process per GPU, or per equal block of GPUs, under mpirun / srun
//    (`mpi` set): rank 0 creates the ncclUniqueId and broadcasts it through
//    MPI; each process creates the communicators of its GPUs (ncclCommInitRank
//    inside one group). Plan GPU g is device g % gpus_per_node of its node when
//    the process sees the whole node, else the g-th of the process's block
//    among the devices it sees (CUDA_VISIBLE_DEVICES set by the launcher).
//    Without MPI compiled in, MpiSession refuses multi-process launches.
// NVLink SHARP (NVLS) stays off: NCCL_NVLS_ENABLE=0 is set before the first
// communicator is created unless the environment already sets it. Likewise
// CUDA_DEVICE_MAX_CONNECTIONS=32 (hardware queues per device; with the default
// 8, streams share queues and a long offload on the host stream was seen to
// hold up the compute and NCCL streams for its whole duration on H200), and
// CUDA_MODULE_LOADING=EAGER; the backend also launches each of its kernels
// once before timing: under lazy loading the first launch of a kernel waits
// for all work queued on the device, which stalled a whole offload plan.
//
// CUDA / NCCL failures throw GpuError naming the call, file, line and the
// library's message (one macro at the boundary, executor/nccl/backend.cc).
//
// Failures of other ranks (issue 8, item 4): communicators are non-blocking
// (ncclConfig_t::blocking = 0; `nonblocking_comms`), so no NCCL call blocks
// the walker; every wait (group launch, end of the run, warm-up, cleanup)
// polls cudaStreamQuery and ncclCommGetAsyncError. An asynchronous NCCL error
// or a wait longer than `timeout_s` (default 300 s; the CLI takes
// RESHARD_NCCL_TIMEOUT_S or --timeout) aborts every communicator with
// ncclCommAbort, which also ends NCCL kernels still waiting for a peer, and
// throws GpuError naming the op each stuck GPU is in. The run's buffers are
// then released; the next run creates new communicators. `fault` (the CLI's
// RESHARD_FAULT="gpu=G,op=N") makes GPU G issue no work (sends, receives,
// copies) from op N on, so its peers time out: the drill for all of this.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "executor/backend.h"

namespace reshard {

class GpuError : public RunError {
 public:
  using RunError::RunError;
};

struct NcclBackendOptions {
  const MpiSession* mpi = nullptr;       // several processes; nullptr: this process drives every GPU
  double memory_sample_period_s = 1e-3;  // cudaMemGetInfo sampling during the run; 0: off
  int64_t warmup_bytes = 64 << 20;       // largest warm-up message per connected pair
  // Grow the allocator's pool to the plan's peak before timing, so no
  // allocation of the timed run waits for the driver to map fresh memory
  // (about 2 ms per GB on H200, synchronous on the issuing thread). A refit
  // runs every training step and finds its memory mapped; false times the
  // growth too.
  bool warm_pool = true;
  // Thread blocks per SM of the copy kernel: few enough that NCCL's kernels
  // find room on every SM while copies and transfers overlap.
  int32_t copy_blocks_per_sm = 2;
  // Upper bound on the copy kernel's blocks over the whole GPU (0: none; -1:
  // half the SMs), so pack/unpack leave SMs to NCCL while they overlap
  // transfers. llama3-8b TP2 -> TP1x2 on 2x H200: 28.6 ms uncapped, 27.7 at
  // 32 blocks, 25.5 at 66 (half of 132 SMs), 26.1 at 100
  // (bench/results/2026-11-30-h200x2-refit-session2.md).
  int32_t copy_max_blocks = -1;
  // Host <-> device pairs (offload / reload) through the copy kernel (SM
  // loads and stores over PCIe via UVA) instead of cudaMemcpy*Async on a copy
  // engine. For experiments: copy engines queue work in order, so a large
  // offload queued first delays every later copy-engine transfer.
  bool host_copies_by_kernel = false;
  // Longest wait for any GPU work or NCCL call before the communicators are
  // aborted and the run fails (a peer died, or a fault was injected).
  double timeout_s = 300;
  // Non-blocking communicators (every wait bounded, ncclGroupEnd included).
  // false: ncclCommInitAll / blocking calls, as before (RESHARD_NCCL_BLOCKING=1).
  bool nonblocking_comms = true;
  FaultInjection fault;  // drills: this GPU stops issuing work at this op (backend.h)
};

std::unique_ptr<Backend> MakeNcclBackend(const NcclBackendOptions& options = {});

// CUDA devices this process sees; 0 when there is no driver or no GPU. Never throws.
int32_t CudaDeviceCount();
// "NCCL 2.28.9 (built against 2.28.9), CUDA runtime 13.0, driver 13.0".
std::string GpuStackVersion();

// NCCL settings reshard runs with unless the user set them (call before a
// communicator exists): NCCL_NVLS_ENABLE=0 (NVLink SHARP off), and
// NCCL_P2P_NVL_CHUNKSIZE=262144: on 2x H200, grouped p2p ops of 208-256 MiB
// move 353-357 GB/s each way with 256 KiB chunks against 311-316 with
// NCCL's 512 KiB default, 1 GiB ops the same
// (bench/results/2026-11-30-h200x2-nccl-group-probe.md).
void ApplyNcclEnvDefaults();

}  // namespace reshard
