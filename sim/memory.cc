// The simulator's memory timeline (sim/state.h): device bytes per GPU and
// plan host bytes per node as allocs and frees are issued, their peaks, and
// NCCL's per-peer buffers the first time a GPU talks to a peer through a
// communicator (each lane, plan/plan.h CommLane, has its own; connections
// persist for the refit), with the parts (buffer roles, context, NCCL) that
// make up each GPU's peak. O(1) per change.
#include <algorithm>

#include <fmt/format.h>

#include "model/error.h"
#include "sim/state.h"
#include "sim/trace.h"

namespace reshard::sim_internal {

void MemoryTimeline::Init(const Plan& plan, SimObserver* obs) {
  plan_ = &plan;
  obs_ = obs;
  gpus_ = plan.cluster.Gpus();
  device.assign(gpus_, plan.cluster.overheads.cuda_context_bytes);
  parts.assign(gpus_, Parts{});
  for (Parts& p : parts) p[kContextPart] = plan.cluster.overheads.cuda_context_bytes;
  host.assign(plan.cluster.nodes, 0);
  for (const PlanBuffer& b : plan.buffers) {
    if (!b.preexisting) continue;
    RESHARD_CHECK(b.gpu >= 0 && b.gpu < gpus_, fmt::format("buffer {} on gpu {} outside the cluster", b.id, b.gpu));
    if (b.space == MemorySpace::kDevice) {
      device[b.gpu] += b.bytes;
      parts[b.gpu][static_cast<int>(b.role)] += b.bytes;
    } else {
      host[plan.cluster.NodeOf(b.gpu)] += b.bytes;
    }
  }
  device_peak = device;
  peak_parts = parts;
  host_peak = host;
  lanes_ = UsesCommLane2(plan) ? 2 : 1;
  if (gpus_ <= 16384 && plan.cluster.overheads.nccl_bytes_per_peer != 0) {
    peer_bits_.assign((static_cast<size_t>(lanes_) * gpus_ * gpus_ + 63) / 64, 0);
  }
}

void MemoryTimeline::Add(int32_t gpu, int part, int64_t bytes, int64_t t) {
  device[gpu] += bytes;
  parts[gpu][part] += bytes;
  if (device[gpu] > device_peak[gpu]) {
    device_peak[gpu] = device[gpu];
    peak_parts[gpu] = parts[gpu];
  }
  if (obs_) obs_->OnMemory(t, gpu, device[gpu]);
}

MemoryParts MemoryTimeline::PeakParts(int32_t gpu) const {
  const Parts& p = peak_parts[gpu];
  auto role = [&](BufferRole r) { return p[static_cast<int>(r)]; };
  MemoryParts m;
  m.context_bytes = p[kContextPart];
  m.source_weights_bytes = role(BufferRole::kSourceWeights);
  m.destination_weights_bytes = role(BufferRole::kDestinationWeights);
  m.optimizer_bytes = role(BufferRole::kOptimizer);
  m.gradients_bytes = role(BufferRole::kGradients);
  m.kv_cache_bytes = role(BufferRole::kKvCache);
  m.staging_bytes = role(BufferRole::kStaging) + role(BufferRole::kHost);  // kHost on a device: a staging copy
  m.nccl_bytes = p[kNcclPart];
  return m;
}

void MemoryTimeline::BufferChange(int32_t buffer, int64_t sign, int64_t t) {
  const PlanBuffer& b = plan_->buffers[buffer];
  if (b.space == MemorySpace::kDevice) {
    Add(b.gpu, static_cast<int>(b.role), sign * b.bytes, t);
  } else {
    const int32_t node = plan_->cluster.NodeOf(b.gpu);
    host[node] += sign * b.bytes;
    host_peak[node] = std::max(host_peak[node], host[node]);
  }
}

void MemoryTimeline::ConnectPeer(int32_t gpu, int32_t peer, int32_t lane, int64_t t) {
  const int64_t per_peer = plan_->cluster.overheads.nccl_bytes_per_peer;
  if (peer == gpu || per_peer == 0) return;
  const int64_t key = (static_cast<int64_t>(std::min(lane, lanes_ - 1)) * gpus_ + gpu) * gpus_ + peer;
  if (!peer_bits_.empty()) {
    uint64_t& word = peer_bits_[key / 64];
    const uint64_t bit = uint64_t{1} << (key % 64);
    if (word & bit) return;
    word |= bit;
  } else if (!peer_set_.insert(key).second) {
    return;
  }
  Add(gpu, kNcclPart, per_peer, t);
}

}  // namespace reshard::sim_internal
