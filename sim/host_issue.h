// When the host issues each op: the simulator's model of the thread(s) that
// walk a plan and queue its work on the GPUs. An op cannot start on its GPU
// before its host thread has issued it, so a plan of many small ops can be
// bound by the host rather than by any link.
//
// Model: every process has one host thread that walks the plan's issue order
// (plan/issue_order.h, the executor's own walker order) and pays, per call,
// what HostCosts says, exactly in the executor's sequence of calls
// (executor/executor.cc): for each op a stream wait per dependency on another
// (GPU, stream), an event record before and after it (a group's sends and
// receives on a GPU: one pair, EventOwners), and its body (a kernel
// launch for a copy, one copy-engine call per contiguous pair or per plane of
// an offload / reload, an async alloc / free); for a group's sends and
// receives one NCCL call each, then ncclGroupEnd (fixed + per op). The host
// never waits for the GPU (launch queues are assumed deep enough). An op's
// issue time is when its work is queued: after its body call, or for sends
// and receives after their group's ncclGroupEnd.
// A cold refit (the first of a job) also pays, on the host thread, pinning
// the plan's host buffers and mapping its device peak into the pool before
// the first op, and one NCCL connection per new (GPU, peer) pair inside the
// ncclGroupEnd that first uses it (NCCL connects lazily, on the host, one
// peer after another).
// Processes: one per GPU (as training jobs run), or one for every GPU (as
// `reshard run` without mpirun drives them).
// O((ops + deps) log ops) for the issue order, O(ops + deps + copy pairs) for the walk.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/host_costs.h"
#include "plan/plan.h"

namespace reshard {

struct HostIssueOptions {
  bool one_process = false;  // one host thread issues every GPU's ops; false: a process per GPU
  bool cold = false;         // the first refit of a job: pinning, mapping and connections
  // The issuer records an event before and after each op and waits on events
  // for cross-stream dependencies (reshard's executor); Megatron-Core's
  // Python path issues its pieces without (false).
  bool op_events = true;
};

struct HostIssue {
  std::vector<int64_t> op_issue_ns;  // per op: host time its work is queued (0 when costs are empty)
  // Cold only (else empty): per op, the pinning, mapping and connection time
  // its host thread had spent by op_issue_ns (the warm-up in that time).
  std::vector<int64_t> op_cold_ns;
  std::vector<int64_t> process_ns;   // per process: when its host thread finished issuing
  int64_t cold_setup_ns = 0;         // largest per-process pinning + mapping before the first op
  int64_t connect_ns = 0;            // largest per-process time spent connecting peers
  int32_t processes = 0;              // 0: costs empty, host issue not modelled
  // With HostIssueOptions::op_events: OpEventCounts(plan), which it charged
  // (the simulator's event bracket reuses it); else empty.
  std::vector<uint8_t> op_events;
};

// The host-side issue times of `plan` under `costs`. Throws PlanRefused
// (plan/issue_order.h) when the plan has no issue order.
HostIssue HostIssueTimes(const Plan& plan, const HostCosts& costs, const HostIssueOptions& options = {});

// The process that issues `gpu`'s ops: 0 with one process, else the GPU.
inline int32_t IssuingProcess(int32_t gpu, bool one_process) { return one_process ? 0 : gpu; }

}  // namespace reshard
