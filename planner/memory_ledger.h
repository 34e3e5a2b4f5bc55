// Device memory accounting of a plan while it is emitted, so that the plan's
// peak is bounded whatever the timing of its ops.
//
// Idea: every device allocation and release is accounted in emission order
// against the GPU's budget (capacity − reserve − CUDA context − NCCL peer
// buffers). A release (a buffer moved to host, a staging slot freed) is
// recorded but its free is not emitted yet; an allocation that would exceed
// the budget takes the earliest recorded releases until it fits, emits their
// frees on its own stream right before itself and depends on them. Since an
// allocation runs only after the frees that make its room, the live bytes at
// any moment are at most the accounted ones. Releases nobody needed are freed
// at the end, on their own stream. Optimizer releases (the offload queued at
// the start) are taken only after the others. An allocation that takes no
// release still counts on the room of those earlier allocations took (one
// may take more than it needs): it runs after the latest free taken on each
// stream (frees of one stream finish in order). Without that, a
// destination layer allocated on the compute stream ran before the free a
// relay buffer's allocation on the comm stream had taken, 0.6 GiB above the
// budget (llama3-405b on 128 H100 with sender relays). What no release can cover is
// recorded as missing bytes: the plan does not fit.
//
// Complexity: O(1) amortised per allocation and per release (each release is
// taken once), plus a dependency per stream per allocation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/cluster.h"
#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {

// Seconds of one device -> host move of `bytes` over `c`'s PCIe link (0 if
// the cluster has no PCIe rate).
double HostMoveSeconds(const Cluster& c, int64_t bytes);

class MemoryLedger {
 public:
  // Starts from the preexisting device buffers of `plan`; `peers[g]` is the
  // number of NCCL peers of GPU g (each costs nccl_bytes_per_peer).
  MemoryLedger(Plan& plan, const Cluster& c, const std::vector<GpuMemoryAtStart>& mem,
               const std::vector<int32_t>& peers);

  // Emits the alloc of device `buffer` on `stream`, after the releases it
  // needs (emitted first, on the same stream). Returns the alloc's op id.
  int32_t Alloc(int32_t buffer, int32_t stream);

  // A free already emitted (op `op` releases `bytes` on `gpu`).
  void RecordFree(int32_t gpu, int32_t op, int64_t bytes);

  // Moves device `buffer` to host on `stream` after `deps`; its free is left
  // to the allocation that needs the room, or to EmitPendingReleases.
  // `optimizer`: optimizer state (taken after the other releases).
  void MoveToHost(int32_t buffer, int32_t stream, std::vector<int32_t> deps, bool optimizer);

  // The frees no allocation needed, each on its own stream.
  void EmitPendingReleases();

  // Per GPU: the most device memory the plan can reach, overheads included
  // (0 for a GPU the plan does not use).
  int64_t PlannedPeak(int32_t gpu) const;
  int64_t MissingBytes(int32_t gpu) const { return std::max(gpus_[gpu].start_missing, gpus_[gpu].shortfall); }
  // Bytes missing before any allocation (no release can help), and the most
  // an allocation was short after taking every release recorded before it.
  int64_t StartMissingBytes(int32_t gpu) const { return gpus_[gpu].start_missing; }
  int64_t ShortfallBytes(int32_t gpu) const { return gpus_[gpu].shortfall; }
  // Seconds of host-stream (PCIe) work queued on the GPU.
  double HostSeconds(int32_t gpu) const { return gpus_[gpu].host_s; }

 private:
  struct Release {
    int32_t op;       // the free; -1 while pending (EmitRelease emits it)
    int64_t bytes;
    int32_t stream;
    int32_t buffer = -1, after = -1;  // pending: the buffer and the op it is freed after
  };
  struct GpuLedger {
    int64_t live = 0, peak = 0, budget = 0, overhead = 0, start_missing = 0, shortfall = 0;
    std::vector<Release> opt_frees, frees;  // optimizer releases (prologue), others in emission order
    size_t opt_used = 0, frees_used = 0;    // releases already taken by allocations
    // Per stream (index), the latest free taken by any allocation so far (-1:
    // none): every later allocation runs after it, since it counts on its room.
    std::vector<int32_t> taken_last;
    double host_s = 0;
  };

  int32_t EmitRelease(Release& r, int32_t stream);
  void Account(int32_t gpu, int64_t bytes, std::vector<int32_t>& deps, int32_t stream);

  Plan& plan_;
  const Cluster& c_;
  std::vector<GpuLedger> gpus_;
};

}  // namespace reshard
