// NcclBackend: runs a Plan on real GPUs: every plan stream a CUDA stream, an
// op's start and end CUDA events, a plan group one NCCL group (NCCL rank =
// plan GPU), device buffers from the stream-ordered pool. One process drives
// every GPU of the plan, or each process under mpirun / srun drives its block
// (`mpi`). Built only when CMake finds CUDA and NCCL (RESHARD_HAVE_NCCL,
// library reshard_executor_nccl); no CUDA types here, so host-compiled code
// (the CLI) includes it. Failures throw GpuError (gpu_error.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "executor/backend.h"
#include "executor/nccl/gpu_error.h"

namespace reshard {

struct NcclBackendOptions {
  const MpiSession* mpi = nullptr;       // several processes; nullptr: this process drives every GPU
  double memory_sample_period_s = 1e-3;  // cudaMemGetInfo sampling during the run; 0: off
  int64_t warmup_bytes = 64 << 20;       // largest warm-up message per connected pair
  // Grow the allocator's pool to the plan's peak before timing, so no
  // allocation of the timed run waits for the driver to map fresh memory
  // (about 2 ms per GB on H200, synchronous on the issuing thread). A refit
  // runs every training step and finds its memory mapped; false times the
  // growth too. The grown memory is poisoned before the clock starts (pool.h
  // GrowPool); with false, buffers allocated during the run get fresh memory
  // from the driver, unpoisoned (preexisting buffers are poisoned either way).
  bool warm_pool = true;
  // Thread blocks per SM of the copy kernel; the copy grid is SMs x
  // copy_blocks_per_sm blocks. One block of 8 warps, each with eight 16-byte
  // loads in flight, per SM: a copy-bound llama3-8b refit on one H200 took
  // 8.46 ms on 132 blocks and 8.64 on 264 (1 GiB copies: 2.03 vs 1.97 TB/s,
  // bench/results/2026-12-02-h200-copy-kernel/).
  int32_t copy_blocks_per_sm = 1;
  // Blocks of a copy launch (CopyBlocks). -1: the plan's share of the copy
  // grid (Op::sm_share: the planner gives half, 66 blocks on an H200,
  // to copies that overlap transfers so pack / unpack leave SMs to NCCL, and
  // the whole grid where none does). An experiment override otherwise
  // (RESHARD_COPY_MAX_BLOCKS): 0 the whole grid, N > 0 at most N blocks,
  // whatever the plan says. llama3-8b TP2 -> TP1x2 on 2x H200: 28.6 ms
  // uncapped, 27.7 at 32 blocks, 25.5 at 66 (half of 132 SMs), 26.1 at 100
  // (bench/results/2026-11-30-h200x2-refit-session2/); copy-bound refits on
  // one H200 took 30-45 % longer at 66 blocks than with the whole grid.
  int32_t copy_max_blocks = -1;
  // Host <-> device pairs (offload / reload) through the copy kernel (SM
  // loads and stores over PCIe via UVA) instead of cudaMemcpy*Async on a copy
  // engine. For experiments: copy engines queue work in order, so a large
  // offload queued first delays every later copy-engine transfer.
  bool host_copies_by_kernel = false;
  // Longest wait for any GPU work or NCCL call before the communicators are
  // aborted and the run fails (a peer died, or a fault was injected); the CLI
  // takes RESHARD_NCCL_TIMEOUT_S or --timeout.
  double timeout_s = 300;
  // Non-blocking communicators: every wait bounded, ncclGroupEnd included
  // (comms.h). false (RESHARD_NCCL_BLOCKING=1): blocking communicators
  // (ncclCommInitAll / ncclCommInitRank), whose calls may block without bound.
  bool nonblocking_comms = true;
  // Drills (the CLI's RESHARD_FAULT="gpu=G,op=N"): GPU G issues no work from
  // op N on, so its peers time out and the run is aborted.
  FaultInjection fault;
  // Test hook: the copy op with this id issues nothing, a missing write for
  // the byte check to catch (the host backend's lose_receive). -1: off.
  int32_t drop_copy_op = -1;
};

std::unique_ptr<Backend> MakeNcclBackend(const NcclBackendOptions& options = {});

// Blocks of one copy launch on a GPU of `sms` SMs, whose copy grid is
// sms * blocks_per_sm blocks: max(1, lround(sm_share * grid)) with the plan's
// share (max_blocks < 0); the whole grid (0); min(grid, max_blocks) (> 0).
inline int32_t CopyBlocks(int32_t sms, int32_t blocks_per_sm, int32_t max_blocks, double sm_share) {
  const int64_t grid = static_cast<int64_t>(std::max(sms, 1)) * std::max(blocks_per_sm, 1);
  int64_t blocks = grid;
  const double share = sm_share > 0 ? std::min(sm_share, 1.0) : 0.0;  // NaN: 0, so one block
  if (max_blocks < 0) blocks = std::llround(share * static_cast<double>(grid));
  else if (max_blocks > 0) blocks = std::min<int64_t>(grid, max_blocks);
  return static_cast<int32_t>(std::max<int64_t>(blocks, 1));
}

// CUDA devices this process sees; 0 when there is no driver or no GPU. Never throws.
int32_t CudaDeviceCount();
// "NCCL 2.28.9 (built against 2.28.9), CUDA runtime 13.0, driver 13.0".
std::string GpuStackVersion();

// NCCL settings reshard runs with unless the user set them (call before a
// communicator exists): NCCL_NVLS_ENABLE=0 (NVLink SHARP off), and
// NCCL_P2P_NVL_CHUNKSIZE=262144: on 2x H200, grouped p2p ops of 208-256 MiB
// move 353-357 GB/s each way with 256 KiB chunks against 311-316 with
// NCCL's 512 KiB default, 1 GiB ops the same
// (bench/results/2026-11-30-h200x2-nccl-group-probe/).
void ApplyNcclEnvDefaults();

}  // namespace reshard
