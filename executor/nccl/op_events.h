// The CUDA events of a run's ops on the NCCL backend: start and end stamps of
// each op with GPU work, one pair for all of an NCCL group's ops on a GPU
// (EventOwners: its first op's, which the others share), the end event an op
// on another stream waits for, and no event for an alloc or free that
// nothing on another stream waits for (OpEventCounts, plan/issue_order.h:
// each event takes stream time). Ops without events are stamped when their
// stream reached them. The caller sets the CUDA device before each call that
// records or creates.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "executor/backend.h"
#include "executor/nccl/gpu_check.h"
#include "plan/plan.h"

namespace reshard::gpu {

class OpEvents {
 public:
  // Forgets the previous run (its events must have been destroyed).
  void Reset(const Plan& plan);
  // Creates op's events (on the current device).
  void Create(const Op& op);
  void Start(int32_t op, int32_t gpu, int32_t stream, cudaStream_t s);
  void End(int32_t op, int32_t gpu, int32_t stream, cudaStream_t s);
  // Stream `s` waits for op's end (an op another stream waits for has one).
  void Wait(int32_t op, cudaStream_t s) const;
  // Times of the ops `local` accepts, from `ref(gpu)`: an op with two events
  // its stamps; with one, its end for both; without, the latest of its
  // stream's last stamp before it and its dependencies' ends, in issue order
  // (topological, so those are known by then). Sorted by op id.
  std::vector<OpTime> Times(const Plan& plan, const std::function<bool(int32_t)>& local,
                            const std::function<cudaEvent_t(int32_t)>& ref) const;
  // Whether op started and has not finished (only ops with both stamps tell).
  bool Running(int32_t op) const;
  void Destroy(FirstGpuError& errors);

 private:
  static int64_t StreamKey(int32_t gpu, int32_t stream) {
    return static_cast<int64_t>(gpu) << 32 | static_cast<uint32_t>(stream);
  }
  std::vector<uint8_t> counts_;                  // per op: OpEventCounts
  std::vector<int32_t> owner_;                   // per op: EventOwners
  std::vector<cudaEvent_t> start_, end_;         // per op (null: not recorded)
  // Ops without events in issue order, each with the last op stamped on its
  // stream before it (-1: none); that last op per (GPU, stream).
  std::vector<std::pair<int32_t, int32_t>> unstamped_;
  std::unordered_map<int64_t, int32_t> last_stamped_;
};

}  // namespace reshard::gpu
