// The NCCL backend's stream-ordered pool (see pool.h).
#include "executor/nccl/pool.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "plan/issue_order.h"
#include "executor/nccl/gpu_check.h"

namespace reshard {

int64_t DeviceUsedBytes() {
  size_t free_b = 0, total_b = 0;
  RESHARD_GPU(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(total_b - free_b);
}

cudaMemPool_t OpenRunPool(int device) {
  cudaMemPool_t pool = nullptr;
  RESHARD_GPU(cudaDeviceGetDefaultMemPool(&pool, device));
  uint64_t keep = UINT64_MAX;
  RESHARD_GPU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  const char* internal = std::getenv("RESHARD_POOL_INTERNAL_DEPS");
  int allow = internal != nullptr && std::string(internal) == "1" ? 1 : 0;
  RESHARD_GPU(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &allow));
  return pool;
}

uint64_t PoolAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = 0;
  RESHARD_GPU(cudaMemPoolGetAttribute(pool, attr, &v));
  return v;
}

void ResetPoolHighWater(cudaMemPool_t pool) {
  uint64_t zero = 0;
  RESHARD_GPU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &zero));
  RESHARD_GPU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero));
}

std::vector<int64_t> PlanDevicePeakBytes(const Plan& plan, const std::function<bool(int32_t)>& is_local) {
  std::vector<int64_t> cur(plan.Gpus(), 0), peak(plan.Gpus(), 0);
  for (const PlanBuffer& b : plan.buffers)
    if (b.preexisting && b.space == MemorySpace::kDevice && is_local(b.gpu)) cur[b.gpu] += b.bytes;
  peak = cur;
  for (const IssueStep& step : IssueOrder(plan))
    for (const std::vector<int32_t>* list : {&step.before, &step.comm, &step.after})
      for (int32_t id : *list) {
        const Op& op = plan.ops[id];
        if ((op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) || !is_local(op.gpu)) continue;
        const PlanBuffer& b = plan.buffers[op.buffer];
        if (b.space != MemorySpace::kDevice) continue;
        cur[op.gpu] += op.kind == OpKind::kAlloc ? b.bytes : -b.bytes;
        peak[op.gpu] = std::max(peak[op.gpu], cur[op.gpu]);
      }
  return peak;
}

void GrowPool(cudaMemPool_t pool, int device, int64_t peak_bytes, cudaStream_t stream, unsigned char poison) {
  RESHARD_GPU(cudaSetDevice(device));
  RESHARD_GPU(cudaStreamSynchronize(stream));
  RESHARD_GPU(cudaMemPoolTrimTo(pool, 0));  // unused memory of an earlier run goes back, unpoisoned
  const int64_t want = peak_bytes - PoolReservedBytes(pool);
  if (want <= 0) return;
  void* block = nullptr;
  RESHARD_GPU(cudaMallocAsync(&block, static_cast<size_t>(want), stream));
  RESHARD_GPU(cudaMemsetAsync(block, poison, static_cast<size_t>(want), stream));
  RESHARD_GPU(cudaFreeAsync(block, stream));
  RESHARD_GPU(cudaStreamSynchronize(stream));
}

}  // namespace reshard
