// The NCCL backend's device memory: each device's stream-ordered pool
// (cudaMallocAsync / cudaFreeAsync on the op's stream) and what is measured
// of it. Why a pool and not cudaMalloc / cudaFree: cudaFree synchronises the
// device, which would serialise every stream at each free of a staging
// buffer and measure something the plan did not say.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <cuda_runtime_api.h>

#include "plan/plan.h"

namespace reshard {

// Device memory in use on the current device, everything counted (other
// processes too): cudaMemGetInfo's total - free.
int64_t DeviceUsedBytes();

// `device`'s default pool, set up for a run: freed blocks stay in the pool (no
// trips to the driver mid-run), and the pool adds no hidden cross-stream
// dependencies for reuse (RESHARD_POOL_INTERNAL_DEPS=1 lets it, an experiment).
cudaMemPool_t OpenRunPool(int device);

uint64_t PoolAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr);
inline int64_t PoolReservedBytes(cudaMemPool_t pool) {
  return static_cast<int64_t>(PoolAttribute(pool, cudaMemPoolAttrReservedMemCurrent));
}
// Resets the reserved and used high-water marks to the current values.
void ResetPoolHighWater(cudaMemPool_t pool);

// Per plan GPU, the most device memory the plan's buffers hold at once
// (preexisting ones included), replaying its allocs and frees in the walker's
// issue order; 0 for GPUs `is_local` rejects. O((ops + deps) log ops): the
// issue order.
std::vector<int64_t> PlanDevicePeakBytes(const Plan& plan, const std::function<bool(int32_t)>& is_local);

// Grows `pool` to `peak_bytes` before timing, as one block allocated, filled
// with `poison` and freed again on `stream` (the pool keeps it), so no
// allocation of the timed run waits for the driver to map fresh memory, and
// no buffer carved from that memory starts out holding bytes of an earlier
// run (a staging or destination buffer that is read before it is written then
// shows the poison, not stale right answers). The pool's unused memory is
// trimmed first, so what it holds afterwards is that one poisoned block. A
// run that needs more (fragmentation, no reuse across streams without a
// dependency) still grows the pool, unpoisoned, and the sampled peak shows it.
// Synchronises `stream`: call it before the clock starts.
void GrowPool(cudaMemPool_t pool, int device, int64_t peak_bytes, cudaStream_t stream, unsigned char poison);

}  // namespace reshard
