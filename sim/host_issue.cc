// Host issue times (model in host_issue.h).
#include "sim/host_issue.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

#include "plan/issue_order.h"

namespace reshard {

namespace {

int64_t SecondsToNs(double s) { return static_cast<int64_t>(std::ceil(s * 1e9)); }

// Host calls of an op's body (not counting its event records and waits).
int64_t BodyNs(const Plan& plan, const Op& op, const HostCosts& c) {
  switch (op.kind) {
    case OpKind::kAlloc: return plan.buffers[op.buffer].space == MemorySpace::kDevice ? c.alloc_ns : 0;
    case OpKind::kFree: return plan.buffers[op.buffer].space == MemorySpace::kDevice ? c.free_ns : 0;
    case OpKind::kCopy: return c.kernel_launch_ns;
    case OpKind::kQuantize: return static_cast<int64_t>(op.tiles.size()) * c.kernel_launch_ns;  // a launch per tile
    case OpKind::kOffload:
    case OpKind::kReload: {
      // The executor issues one cudaMemcpyAsync per contiguous pair and one
      // cudaMemcpy2DAsync per plane of a strided one.
      int64_t calls = 0;
      for (const CopyPair& p : op.copies) calls += p.src.Contiguous() && p.dst.Contiguous() ? 1 : p.src.planes;
      return calls * c.memcpy_ns;
    }
    case OpKind::kSend:
    case OpKind::kRecv: return c.nccl_op_ns;
  }
  return 0;
}

}  // namespace

HostIssue HostIssueTimes(const Plan& plan, const HostCosts& c, const HostIssueOptions& o) {
  const int32_t gpus = plan.Gpus();
  const int32_t nops = static_cast<int32_t>(plan.ops.size());
  HostIssue out;
  out.op_issue_ns.assign(nops, 0);
  if (c.Empty() || nops == 0) return out;  // not modelled: processes stays 0
  out.processes = o.one_process ? 1 : gpus;
  out.process_ns.assign(out.processes, 0);
  std::vector<int64_t>& clock = out.process_ns;
  std::vector<int64_t> cold_spent(out.processes, 0);  // per process: warm-up time so far
  if (o.cold) out.op_cold_ns.assign(nops, 0);

  if (o.cold) {
    // Pin the host buffers and map the device peak of each process's GPUs.
    std::vector<double> pin_bytes(out.processes, 0), map_bytes(out.processes, 0);
    for (const PlanBuffer& b : plan.buffers) {
      if (b.gpu < 0 || b.gpu >= gpus) continue;
      const int32_t p = IssuingProcess(b.gpu, o.one_process);
      (b.space == MemorySpace::kHost ? pin_bytes : map_bytes)[p] += static_cast<double>(b.bytes);
    }
    for (int32_t p = 0; p < out.processes; ++p) {
      if (c.pin_bytes_per_s > 0) clock[p] += SecondsToNs(pin_bytes[p] / c.pin_bytes_per_s);
      // Every device buffer mapped once: an upper bound on the pool's growth
      // to the plan's peak (buffers freed and reused map nothing new).
      if (c.map_bytes_per_s > 0) clock[p] += SecondsToNs(map_bytes[p] / c.map_bytes_per_s);
      out.cold_setup_ns = std::max(out.cold_setup_ns, clock[p]);
      cold_spent[p] = clock[p];
    }
  }

  const int64_t event_ns = o.op_events ? c.event_record_ns : 0;
  // Per op, its waits on other streams' events: counted in one pass in op order over a compact (GPU, stream) per
  // op, not per dependency at the scattered ~200-byte Op it names as the issue order visits them.
  std::vector<int32_t> cross_waits;
  if (o.op_events) {
    std::vector<uint64_t> where(nops);
    for (int32_t i = 0; i < nops; ++i)
      where[i] = static_cast<uint64_t>(static_cast<uint32_t>(plan.ops[i].gpu)) << 32 |
                 static_cast<uint32_t>(plan.ops[i].stream);
    cross_waits.assign(nops, 0);
    for (int32_t i = 0; i < nops; ++i)
      for (int32_t d : plan.ops[i].deps) cross_waits[i] += where[d] != where[i] ? 1 : 0;
  }
  auto waits = [&](const Op& op) { return o.op_events ? cross_waits[op.id] * c.stream_wait_ns : int64_t{0}; };
  // Allocs and frees record one event (after) or none (OpEventCounts).
  if (o.op_events) out.op_events = OpEventCounts(plan);
  const std::vector<uint8_t>& events = out.op_events;
  auto local_op = [&](const Op& op) {
    const int32_t p = IssuingProcess(op.gpu, o.one_process);
    int64_t& t = clock[p];
    const int n = o.op_events ? events[op.id] : 0;
    t += waits(op) + (n == 2 ? event_ns : 0) + BodyNs(plan, op, c);
    out.op_issue_ns[op.id] = t;
    if (o.cold) out.op_cold_ns[op.id] = cold_spent[p];
    t += n >= 1 ? event_ns : 0;
  };
  std::unordered_set<int64_t> connected;  // (gpu, peer, side), lookup only
  std::vector<int32_t> group_ops(out.processes, 0);
  std::vector<int32_t> touched;
  std::vector<int64_t> connect_total(out.processes, 0);
  ForEachIssueStep(plan, [&](const IssueStep& step) {
    for (int32_t id : step.before) local_op(plan.ops[id]);
    if (!step.comm.empty()) {
      touched.clear();
      for (int32_t id : step.comm) {
        const Op& op = plan.ops[id];
        const int32_t p = IssuingProcess(op.gpu, o.one_process);
        if (group_ops[p]++ == 0) touched.push_back(p);
        clock[p] += waits(op) + (events.empty() || events[id] == 2 ? event_ns : 0);  // OpStart (its group's owner)
      }
      for (int32_t id : step.comm) {
        const Op& op = plan.ops[id];
        const int32_t p = IssuingProcess(op.gpu, o.one_process);
        clock[p] += c.nccl_op_ns;
        // NCCL connects a send and a receive side per peer and communicator,
        // each on its own host.
        const int64_t key =
            ((static_cast<int64_t>(CommLane(plan, op.stream)) * gpus + op.gpu) * gpus + op.peer) * 2 +
            (op.kind == OpKind::kSend ? 1 : 0);
        if (o.cold && c.nccl_connect_ns > 0 && connected.insert(key).second) {
          clock[p] += c.nccl_connect_ns;  // inside this ncclGroupEnd
          connect_total[p] += c.nccl_connect_ns;
          cold_spent[p] += c.nccl_connect_ns;
        }
      }
      for (int32_t p : touched) clock[p] += c.nccl_group_ns + c.nccl_group_op_ns * group_ops[p];
      for (int32_t id : step.comm) {
        const Op& op = plan.ops[id];
        const int32_t p = IssuingProcess(op.gpu, o.one_process);
        out.op_issue_ns[id] = clock[p];  // queued at ncclGroupEnd
        if (o.cold) out.op_cold_ns[id] = cold_spent[p];
      }
      for (int32_t id : step.comm)  // OpEnd: the owner records the group's end
        if (events.empty() || events[id] == 2) clock[IssuingProcess(plan.ops[id].gpu, o.one_process)] += event_ns;
      for (int32_t p : touched) group_ops[p] = 0;
    }
    for (int32_t id : step.after) local_op(plan.ops[id]);
  });
  for (int32_t p = 0; p < out.processes; ++p) out.connect_ns = std::max(out.connect_ns, connect_total[p]);
  return out;
}

}  // namespace reshard
