// The simulator's event loop (the model is in sim/simulator.h): checks the
// plan's ops, builds the launches, then processes events on an integer-
// nanosecond clock until none is left. At each instant: flow ends first (by
// flow id), then issues and flow starts in the order they were queued, until
// none is left at that instant; then bandwidth is re-shared once over the
// components that changed. A run that stops with launches never issued is a
// deadlock, reported with the first op that never started and what it waits
// for. O(E log E) for E events (O(ops)), plus the re-sharing (flow_network.cc).
#include "sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/error.h"
#include "plan/issue_order.h"
#include "sim/state.h"
#include "sim/trace.h"

namespace reshard {

void Simulator::State::Bad(int32_t op, const std::string& problem) const {
  throw InputError("<plan " + plan.name + ">", fmt::format("ops[{}]", op), problem);
}

void Simulator::State::CheckOps() {
  const int32_t nbuf = static_cast<int32_t>(plan.buffers.size());
  info.resize(nops);
  for (int32_t i = 0; i < nops; ++i) {
    const Op& op = plan.ops[i];
    info[i] = OpInfo{op.kind, op.gpu, op.peer, op.match, op.buffer, op.group, -1, op.Bytes()};
    if (op.kind == OpKind::kCopy) info[i].copy_cap = sim_internal::CopyKernelCap(op, plan.cluster.copy_kernel);
    if (op.kind == OpKind::kQuantize) {
      info[i].bytes = sim_internal::QuantizeCopyBytes(op);
      info[i].copy_cap = sim_internal::QuantizeKernelCap(plan, op);
    }
    if (op.id != i) Bad(i, fmt::format("id is {}, expected its index {}", op.id, i));
    if (op.gpu < 0 || op.gpu >= gpus) Bad(i, fmt::format("gpu {} outside the cluster's {} GPUs", op.gpu, gpus));
    if (op.stream < 0) Bad(i, fmt::format("stream {} is negative", op.stream));
    for (int32_t d : op.deps) {
      if (d < 0 || d >= nops || d == i) Bad(i, fmt::format("dependency {} is not another op", d));
    }
    switch (op.kind) {
      case OpKind::kAlloc:
      case OpKind::kFree:
        if (op.buffer < 0 || op.buffer >= nbuf) Bad(i, fmt::format("buffer {} does not exist", op.buffer));
        if (plan.buffers[op.buffer].gpu < 0 || plan.buffers[op.buffer].gpu >= gpus) {
          Bad(i, fmt::format("buffer {} is on gpu {}, outside the cluster", op.buffer, plan.buffers[op.buffer].gpu));
        }
        break;
      case OpKind::kSend:
      case OpKind::kRecv: {
        if (op.peer < 0 || op.peer >= gpus) Bad(i, fmt::format("peer {} outside the cluster", op.peer));
        if (op.match < 0 || op.match >= nops) Bad(i, fmt::format("match {} is not an op", op.match));
        const Op& m = plan.ops[op.match];
        const OpKind want = op.kind == OpKind::kSend ? OpKind::kRecv : OpKind::kSend;
        if (m.kind != want || m.match != i || m.gpu != op.peer || m.peer != op.gpu) {
          Bad(i, fmt::format("match {} is not the {} of this op", op.match, OpKindName(want)));
        }
        if (m.Bytes() != op.Bytes()) Bad(i, fmt::format("{} bytes but its match {} has {}", op.Bytes(), op.match, m.Bytes()));
        break;
      }
      default: break;
    }
  }
  BuildChannels();
}

// One Channel per ordered GPU pair that a send uses, numbered in op order: a
// table by pair up to 2,048 GPUs (16 MiB), a hash map beyond.
void Simulator::State::BuildChannels() {
  constexpr int32_t kTableGpus = 2048;
  std::vector<int32_t> table;
  std::unordered_map<int64_t, int32_t> map;  // lookup only
  if (gpus <= kTableGpus) table.assign(static_cast<size_t>(gpus) * gpus, -1);
  auto find = [&](int32_t a, int32_t b, bool create) {
    const int64_t key = static_cast<int64_t>(a) * gpus + b;
    int32_t* slot = nullptr;
    if (!table.empty()) {
      slot = &table[key];
    } else if (create) {
      slot = &map.try_emplace(key, -1).first->second;
    } else {
      const auto it = map.find(key);
      return it == map.end() ? -1 : it->second;
    }
    if (*slot < 0 && create) {
      *slot = static_cast<int32_t>(channels.size());
      channels.emplace_back();
    }
    return *slot;
  };
  for (int32_t i = 0; i < nops; ++i)
    if (info[i].kind == OpKind::kSend) info[i].channel = find(info[i].gpu, info[i].peer, true);
  for (int32_t i = 0; i < nops; ++i) {
    if (info[i].kind != OpKind::kSend) continue;
    channels[info[i].channel].reverse = find(info[i].peer, info[i].gpu, false);
  }
}

void Simulator::State::Process(const sim_internal::Event& e) {
  switch (e.kind) {
    case sim_internal::Event::kIssue:
      ++events;
      Issue(e.id, e.t);
      break;
    case sim_internal::Event::kFlowStart:
      ++events;
      StartFlow(e.id, e.t);
      break;
  }
}

void Simulator::State::Deadlock() const {
  const std::vector<int32_t>& of_op = launches.of_op;
  // The lowest op that never started, and what it waits for.
  for (int32_t i = 0; i < nops; ++i) {
    const Op& op = plan.ops[i];
    if (op_issued[i]) continue;
    std::vector<std::string> waits;
    for (int32_t d : op.deps) {
      if (of_op[d] != of_op[i] && launches.end_ns[of_op[d]] < 0) waits.push_back(fmt::format("dependency op {}", d));
    }
    for (int32_t j = i - 1; j >= 0; --j) {
      const Op& prev = plan.ops[j];
      if (prev.gpu == op.gpu && prev.stream == op.stream) {
        if (of_op[j] != of_op[i] && launches.end_ns[of_op[j]] < 0) {
          waits.push_back(fmt::format("op {} before it on stream {}", j, op.stream));
        }
        break;
      }
    }
    for (int32_t k = launches.begin[of_op[i]]; k < launches.begin[of_op[i] + 1]; ++k) {
      if (launches.ops[k] != i && waits.empty()) waits.push_back(fmt::format("op {} of its group {}", launches.ops[k], op.group));
    }
    Bad(i, fmt::format("the plan deadlocks: {} on gpu {} stream {} never starts; it waits for {}", OpKindName(op.kind),
                       op.gpu, op.stream, waits.empty() ? std::string("nothing?") : fmt::format("{}", fmt::join(waits, ", "))));
  }
  for (int32_t i = 0; i < nops; ++i) {
    const Op& op = plan.ops[i];
    if (op_end_ns[i] < 0 && (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)) {
      Bad(i, fmt::format("the plan deadlocks: {} on gpu {} waits for its match op {} on gpu {}, which never starts",
                         OpKindName(op.kind), op.gpu, op.match, op.peer));
    }
  }
  RESHARD_CHECK(false, "simulation stopped with unfinished launches but no waiting op");
}

Prediction Simulator::State::Run() {
  gpus = plan.cluster.Gpus();
  nops = static_cast<int32_t>(plan.ops.size());
  CheckOps();
  launches = sim_internal::BuildLaunches(plan, info, gpus);
  routing_bound = LowerBoundOfLoads(ports, PortBytes(ports, plan));
  net.Init(ports, obs, nops, ShareGridNs(opt, routing_bound.time_s), opt.share_grid_flows, opt.share_grid_lives);
  if (give_up_ns != std::numeric_limits<int64_t>::max()) CountUnstartedBytes();
  memory.Init(plan, obs);
  op_start_ns.assign(nops, -1);
  op_end_ns.assign(nops, -1);
  op_issued.assign(nops, 0);
  op_flow.assign(nops, -1);

  if (obs) {
    obs->OnBegin(plan, ports);
    for (int32_t g = 0; g < gpus; ++g) obs->OnMemory(0, g, memory.device[g]);
  }
  const int32_t nl = launches.Count();
  launch_host_ns.assign(nl, 0);
  if (opt.issue != IssueModel::kNone) {
    const HostCosts& costs = opt.issue == IssueModel::kPython ? plan.cluster.host_python : plan.cluster.host;
    host = HostIssueTimes(plan, costs, HostIssueOptions{opt.one_process, opt.cold, opt.issue == IssueModel::kExecutor});
    for (int32_t i = 0; i < nops; ++i)
      launch_host_ns[launches.of_op[i]] = std::max(launch_host_ns[launches.of_op[i]], host.op_issue_ns[i]);
    // The executor's event bracket: each op's two events take stream time
    // before the launch's work can start (Cluster::host.event_gpu_ns).
    // Allocs and frees have one event or none (OpEventCounts): half a
    // bracket per event.
    if (opt.issue == IssueModel::kExecutor && costs.event_gpu_ns > 0) {
      const std::vector<uint8_t> op_events = host.op_events.empty() ? OpEventCounts(plan) : std::move(host.op_events);
      launch_gpu_ns.assign(nl, 0);
      for (int32_t l = 0; l < nl; ++l)
        for (int32_t k = launches.begin[l]; k < launches.begin[l + 1]; ++k)
          launch_gpu_ns[l] += costs.event_gpu_ns * op_events[launches.ops[k]] / 2;
    }
  }
  for (int32_t l = 0; l < nl; ++l) {
    if (launches.pending[l] == 0) queue.Push(IssueAt(l, 0), sim_internal::Event::kIssue, l);
  }
  // Each instant: flow ends (by flow id), then queued events (by sequence),
  // until none is left at this instant; then rates are re-shared once.
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  while (!queue.Empty() || !net.ends.Empty() || net.DueNs() >= 0) {
    const int64_t t = std::min({queue.Empty() ? kNever : queue.Top().t, net.ends.Empty() ? kNever : net.ends.TopKey(),
                                net.DueNs() >= 0 ? net.DueNs() : kNever});
    // Every event at t leaves an op that ends at t or later, so the plan ends after give_up_ns.
    if (t > give_up_ns || (events >= next_bound_check && UnstartedBytesEndAfter(t))) {
      gave_up = true;
      return Prediction{};
    }
    while (true) {
      if (!net.ends.Empty() && net.ends.TopKey() == t) {
        ++events;
        FinishFlow(net.ends.Top(), t);
      } else if (!queue.Empty() && queue.Top().t == t) {
        const sim_internal::Event e = queue.Top();
        queue.Pop();
        Process(e);
      } else {
        break;
      }
    }
    if (net.Dirty() || net.DueNs() == t) net.Recompute(t);
  }
  if (launches.ended != nl) Deadlock();
  return Collect();
}

Prediction Simulator::Run() const {
  State state(plan_, options_);
  return state.Run();
}

// O(ops) once: each flow's bytes on each port of its route, as NewFlow will make it.
void Simulator::State::CountUnstartedBytes() {
  unstarted_bytes.assign(static_cast<size_t>(ports.NumPorts()), 0);
  for (int32_t i = 0; i < nops; ++i) {
    const Route r = OpRoute(i);
    ForEachDistinctPort(r.ports, r.num_ports, [&](int32_t p) { unstarted_bytes[p] += info[i].bytes; });
  }
  for (int32_t p = 0; p < ports.NumPorts(); ++p)
    if (unstarted_bytes[p] > 0) unstarted_ports.push_back(p);
  next_bound_check = 0;
}

// O(active flows + ports with bytes); the next check that many events later (O(1) per event, the flows in flight
// being at most a few per port).
bool Simulator::State::UnstartedBytesEndAfter(int64_t t) {
  if (unstarted_ports.empty()) return false;
  constexpr int64_t kMinEvents = 4096;
  next_bound_check = events + std::max<int64_t>(kMinEvents, static_cast<int64_t>(unstarted_ports.size()));
  bytes_left.assign(unstarted_bytes.size(), 0.0);
  net.AddBytesLeft(t, bytes_left);
  double most_ns = 0;
  for (const int32_t p : unstarted_ports) {
    const double fastest = std::max(net.ports[p].peak, net.ports[p].duplex);  // bytes/ns
    most_ns = std::max(most_ns, (static_cast<double>(unstarted_bytes[p]) + bytes_left[p]) / fastest);
  }
  // Rounding: the bytes left are computed, so a hair less is asked of them.
  return static_cast<double>(t) + most_ns * (1 - 1e-9) > static_cast<double>(give_up_ns) + 1;
}

std::optional<Prediction> Simulator::RunWithin(double limit_s) const {
  State state(plan_, options_);
  // Past ceil(limit) ns the plan's time (whole ns) is above limit_s.
  if (limit_s < 1e9) state.give_up_ns = static_cast<int64_t>(std::ceil(std::max(0.0, limit_s) * 1e9));
  Prediction p = state.Run();
  if (state.gave_up) return std::nullopt;
  return p;
}

std::string_view IssueModelName(IssueModel m) {
  switch (m) {
    case IssueModel::kNone: return "none";
    case IssueModel::kExecutor: return "executor";
    case IssueModel::kPython: return "python";
  }
  return "?";
}

int64_t ShareGridNs(const SimOptions& o, double routing_bound_s) {
  if (o.share_grid_ns <= 0) return 0;
  const double share_ns = routing_bound_s * 1e9 * o.share_grid_share;
  // An infinite or NaN bound (no port carries bytes at a finite rate) takes the largest grid.
  const int64_t grid = !(share_ns < 1e15) ? o.share_grid_max_ns : static_cast<int64_t>(share_ns) / 1000 * 1000;
  return std::max(o.share_grid_ns, std::min(grid, o.share_grid_max_ns));
}

Prediction Simulate(const Plan& plan, const SimOptions& options) {
  return Simulator(plan, options).Run();
}

std::optional<Prediction> SimulateWithin(const Plan& plan, double limit_s, const SimOptions& options) {
  return Simulator(plan, options).RunWithin(limit_s);
}

}  // namespace reshard
