// See op_events.h.
#include "executor/nccl/op_events.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/error.h"
#include "plan/issue_order.h"

namespace reshard::gpu {

void OpEvents::Reset(const Plan& plan) {
  counts_ = OpEventCounts(plan);
  owner_ = EventOwners(plan);
  start_.assign(plan.ops.size(), nullptr);
  end_.assign(plan.ops.size(), nullptr);
  unstamped_.clear();
  last_stamped_.clear();
}

void OpEvents::Create(const Op& op) {
  if (counts_[op.id] == 2) RESHARD_GPU(cudaEventCreate(&start_[op.id]));
  if (counts_[op.id] >= 1) RESHARD_GPU(cudaEventCreate(&end_[op.id]));
}

void OpEvents::Start(int32_t op, int32_t gpu, int32_t stream, cudaStream_t s) {
  if (owner_[op] != op) return;  // stamped by its group's owner
  if (counts_[op] == 0) {
    const auto it = last_stamped_.find(StreamKey(gpu, stream));
    unstamped_.push_back({op, it == last_stamped_.end() ? -1 : it->second});
    return;
  }
  if (start_[op] != nullptr) RESHARD_GPU(cudaEventRecord(start_[op], s));
}

void OpEvents::End(int32_t op, int32_t gpu, int32_t stream, cudaStream_t s) {
  if (end_[op] == nullptr) return;
  RESHARD_GPU(cudaEventRecord(end_[op], s));
  last_stamped_[StreamKey(gpu, stream)] = op;
}

void OpEvents::Wait(int32_t op, cudaStream_t s) const {
  const int32_t o = owner_[op];
  RESHARD_CHECK(end_[o] != nullptr, fmt::format("op {} is waited for across streams but has no event", op));
  RESHARD_GPU(cudaStreamWaitEvent(s, end_[o], 0));
}

std::vector<OpTime> OpEvents::Times(const Plan& plan, const std::function<bool(int32_t)>& local,
                                    const std::function<cudaEvent_t(int32_t)>& ref) const {
  std::vector<OpTime> out;
  std::vector<double> end_s(plan.ops.size(), 0.0);
  for (const Op& op : plan.ops) {
    if (!local(op.gpu) || counts_[op.id] == 0) continue;
    float start_ms = 0, end_ms = 0;
    RESHARD_GPU(cudaEventElapsedTime(&end_ms, ref(op.gpu), end_[op.id]));
    start_ms = end_ms;
    if (start_[op.id] != nullptr) RESHARD_GPU(cudaEventElapsedTime(&start_ms, ref(op.gpu), start_[op.id]));
    end_s[op.id] = end_ms * 1e-3;
    out.push_back({op.id, op.gpu, start_ms * 1e-3, end_ms * 1e-3});
  }
  // A group's other ops: its owner's stamps (out holds every owner by now).
  std::vector<size_t> at(plan.ops.size(), 0);
  for (size_t k = 0; k < out.size(); ++k) at[out[k].op] = k;
  for (const Op& op : plan.ops) {
    const int32_t o = owner_[op.id];
    if (o == op.id || !local(op.gpu)) continue;
    const OpTime& ot = out[at[o]];
    end_s[op.id] = ot.end_s;
    out.push_back({op.id, op.gpu, ot.start_s, ot.end_s});
  }
  for (const auto& [op, before] : unstamped_) {
    double t = before >= 0 ? end_s[before] : 0.0;
    for (int32_t d : plan.ops[op].deps) t = std::max(t, end_s[d]);
    end_s[op] = t;
    out.push_back({op, plan.ops[op].gpu, t, t});
  }
  std::sort(out.begin(), out.end(), [](const OpTime& a, const OpTime& b) { return a.op < b.op; });
  return out;
}

bool OpEvents::Running(int32_t op) const {
  if (op < 0 || static_cast<size_t>(op) >= end_.size()) return false;
  op = owner_[op];
  if (start_[op] == nullptr || end_[op] == nullptr) return false;
  const bool running = cudaEventQuery(start_[op]) == cudaSuccess && cudaEventQuery(end_[op]) == cudaErrorNotReady;
  (void)cudaGetLastError();  // cudaErrorNotReady is an answer, not an error
  return running;
}

void OpEvents::Destroy(FirstGpuError& errors) {
  for (std::vector<cudaEvent_t>* list : {&start_, &end_})
    for (cudaEvent_t& e : *list)
      if (e != nullptr) {
        RESHARD_GPU_CLEANUP(errors, cudaEventDestroy(e));
        e = nullptr;
      }
}

}  // namespace reshard::gpu
