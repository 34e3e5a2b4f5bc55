#include "planner/memory_ledger.h"

#include <algorithm>
#include <utility>

#include "planner/buffer_layout.h"

namespace reshard {

double HostMoveSeconds(const Cluster& c, int64_t bytes) {
  const LinkProfile& l = c.pcie;
  return l.bytes_per_s > 0 ? l.latency_ns * 1e-9 + bytes / (l.bytes_per_s * l.Efficiency(bytes)) : 0;
}

MemoryLedger::MemoryLedger(Plan& plan, const Cluster& c, const std::vector<GpuMemoryAtStart>& mem,
                           const std::vector<int32_t>& peers)
    : plan_(plan), c_(c), gpus_(c.Gpus()) {
  for (int32_t g = 0; g < c.Gpus(); ++g) {
    GpuLedger& st = gpus_[g];
    const int64_t nccl = static_cast<int64_t>(peers[g]) * c.overheads.nccl_bytes_per_peer;
    st.budget = c.gpu_memory_bytes - mem[g].reserve - mem[g].overheads - nccl;
    st.overhead = mem[g].overheads + nccl;
  }
  for (const PlanBuffer& b : plan.buffers)
    if (b.preexisting && b.space == MemorySpace::kDevice) gpus_[b.gpu].live += b.bytes;
  // The state at the start must fit already (releases cannot help before it).
  for (GpuLedger& st : gpus_) {
    st.peak = st.live;
    if (st.live > st.budget) st.start_missing = st.live - st.budget;
  }
}

int64_t MemoryLedger::PlannedPeak(int32_t gpu) const {
  const GpuLedger& st = gpus_[gpu];
  return st.peak + (st.peak > 0 ? st.overhead : 0);
}

// The free of a pending release, on `stream` (after the move it waits for).
int32_t MemoryLedger::EmitRelease(Release& r, int32_t stream) {
  if (r.op >= 0) return r.op;
  r.op = AppendMemoryOp(plan_, OpKind::kFree, r.buffer, stream, {r.after});
  r.stream = stream;
  return r.op;
}

// A device allocation of `bytes` on `gpu` and `stream`: waits for enough
// releases to fit. A release moved to host is freed on the allocating
// stream, right before the allocation that needs its room: the executor's
// stream-ordered pool reuses a block freed on another stream only once
// that stream's queue is done (qwen3 on 2x H200: an allocation waited
// 400 ms for the whole optimizer offload queued on the host stream).
void MemoryLedger::Account(int32_t gpu, int64_t bytes, std::vector<int32_t>& deps, int32_t stream) {
  GpuLedger& st = gpus_[gpu];
  const size_t frees_before = st.frees_used, opt_before = st.opt_used;
  while (st.live + bytes > st.budget && st.frees_used < st.frees.size()) {
    st.live -= st.frees[st.frees_used].bytes;
    EmitRelease(st.frees[st.frees_used++], stream);
  }
  while (st.live + bytes > st.budget && st.opt_used < st.opt_frees.size()) {
    st.live -= st.opt_frees[st.opt_used].bytes;
    EmitRelease(st.opt_frees[st.opt_used++], stream);
  }
  // Releases on one stream finish in order (ops of a stream run in id
  // order): depending on the latest taken on each stream is enough, for this
  // allocation's takes and earlier ones'.
  auto taken = [&](int32_t op) {
    const auto s = static_cast<size_t>(plan_.ops[op].stream);
    if (st.taken_last.size() <= s) st.taken_last.resize(s + 1, -1);
    st.taken_last[s] = std::max(st.taken_last[s], op);
  };
  for (size_t k = frees_before; k < st.frees_used; ++k) taken(st.frees[k].op);
  for (size_t k = opt_before; k < st.opt_used; ++k) taken(st.opt_frees[k].op);
  for (int32_t op : st.taken_last)
    if (op >= 0) deps.push_back(op);
  st.live += bytes;
  if (st.live > st.budget) st.shortfall = std::max(st.shortfall, st.live - st.budget);
  st.peak = std::max(st.peak, st.live);
}

int32_t MemoryLedger::Alloc(int32_t buffer, int32_t stream) {
  std::vector<int32_t> deps;
  Account(plan_.buffers[buffer].gpu, plan_.buffers[buffer].bytes, deps, stream);
  return AppendMemoryOp(plan_, OpKind::kAlloc, buffer, stream, std::move(deps));
}

void MemoryLedger::RecordFree(int32_t gpu, int32_t op, int64_t bytes) {
  gpus_[gpu].frees.push_back(Release{op, bytes, plan_.ops[op].stream});
}

void MemoryLedger::MoveToHost(int32_t buffer, int32_t stream, std::vector<int32_t> deps, bool optimizer) {
  const int32_t gpu = plan_.buffers[buffer].gpu;
  const int64_t bytes = plan_.buffers[buffer].bytes;
  const int32_t offload = AppendMoveToHost(plan_, buffer, stream, std::move(deps));
  auto& v = optimizer ? gpus_[gpu].opt_frees : gpus_[gpu].frees;
  v.push_back(Release{-1, bytes, stream, buffer, offload});
  gpus_[gpu].host_s += HostMoveSeconds(c_, bytes);
}

void MemoryLedger::EmitPendingReleases() {
  for (GpuLedger& st : gpus_) {
    for (Release& r : st.frees) EmitRelease(r, r.stream);
    for (Release& r : st.opt_frees) EmitRelease(r, r.stream);
  }
}

}  // namespace reshard
