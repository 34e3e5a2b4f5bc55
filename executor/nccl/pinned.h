// The NCCL backend's pinned host buffers (the plan's offload targets) kept
// between runs: a training job pins them once and refits every step, so
// `validate --repeat N` pins them once too (pinning 90 GiB took 57 s of
// system time per run). Freed when the backend is destroyed or a plan no
// longer uses them; the backend poisons a reused buffer (PoisonHost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>

#include <cuda_runtime_api.h>

namespace reshard {

class PinnedHostBuffers {
 public:
  PinnedHostBuffers() = default;
  PinnedHostBuffers(const PinnedHostBuffers&) = delete;
  PinnedHostBuffers& operator=(const PinnedHostBuffers&) = delete;
  ~PinnedHostBuffers() { FreeAll(); }

  // Frees every kept buffer for which `reusable(id, gpu, bytes)` is false;
  // returns the first error (the others are still freed).
  cudaError_t KeepOnly(const std::function<bool(int32_t id, int32_t gpu, int64_t bytes)>& reusable);
  // The kept buffer of plan buffer `id` (no longer kept), or nullptr.
  void* Take(int32_t id);
  // Keeps `ptr` (cudaHostAlloc'd) for the next run.
  void Put(int32_t id, int32_t gpu, int64_t bytes, void* ptr) { kept_[id] = {gpu, bytes, ptr}; }
  int64_t Bytes() const;
  void FreeAll();

 private:
  struct Kept {
    int32_t gpu = -1;
    int64_t bytes = 0;
    void* ptr = nullptr;
  };
  std::map<int32_t, Kept> kept_;  // by plan buffer id
};

// Fills host memory with `value`, a few threads at once: one thread fills
// about 10 GB/s, and offload buffers reach 100 GiB.
void PoisonHost(void* p, size_t bytes, unsigned char value);

}  // namespace reshard
