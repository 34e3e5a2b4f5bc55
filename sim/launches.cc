// How the simulator starts and ends ops (the model is in sim/simulator.h):
//   * Launches: the ops of one NCCL group on one GPU are one launch, issued
//     together when all are ready and ended together (BuildLaunches).
//   * Issue: alloc/free change memory at once; a copy kernel is a flow on the
//     GPU's device-copy port; offload/reload a flow on PCIe d2h/h2d; a send
//     or recv connects its peer (NCCL memory) and, once its match is issued
//     too, rendezvous.
//   * Transfers of one ordered GPU pair run one at a time on its Channel; a
//     transfer that continues its group's run on the channel skips the
//     efficiency ramp; both directions of a pair at once run at the both-ways
//     rate; transfers over links that share the copy port also load it.
//   * A flow pays its link's latency, then moves its bytes (FlowNetwork);
//     its end ends its op(s), and a launch whose ops all ended frees the
//     launches waiting for it.
// O(1) per op and per flow event, plus the queue's O(log E).
#include <algorithm>
#include <unordered_map>

#include <fmt/format.h>

#include "sim/state.h"
#include "sim/trace.h"

namespace reshard {

namespace sim_internal {

namespace {

// Launch ids, numbered by their first op. Grouped ops are bucketed by group
// (counting sort when group ids are dense, else a hash map), and within a
// group by GPU through a per-GPU scratch slot: O(ops + groups + GPUs).
std::vector<int32_t> AssignLaunches(const Plan& plan, const std::vector<OpInfo>& info, int32_t gpus) {
  const int32_t nops = static_cast<int32_t>(plan.ops.size());
  std::vector<int32_t> op_launch(nops, -1);
  std::vector<int32_t> first_op;  // temporary launch id -> its first op
  int32_t max_group = -1;
  int64_t grouped = 0;
  for (int32_t i = 0; i < nops; ++i) {
    max_group = std::max(max_group, plan.ops[i].group);
    grouped += plan.ops[i].group >= 0 ? 1 : 0;
  }
  if (grouped > 0 && max_group <= 4 * static_cast<int64_t>(nops)) {
    std::vector<int32_t> start(static_cast<size_t>(max_group) + 2, 0), order(grouped);
    for (int32_t i = 0; i < nops; ++i) {
      if (plan.ops[i].group >= 0) ++start[plan.ops[i].group + 1];
    }
    for (size_t g = 1; g < start.size(); ++g) start[g] += start[g - 1];
    std::vector<int32_t> fill(start.begin(), start.end() - 1);
    for (int32_t i = 0; i < nops; ++i) {
      if (plan.ops[i].group >= 0) order[fill[plan.ops[i].group]++] = i;  // op order within a group
    }
    std::vector<int32_t> gpu_group(gpus, -1), gpu_launch(gpus, -1);
    for (int32_t g = 0; g <= max_group; ++g) {
      for (int32_t k = start[g]; k < start[g + 1]; ++k) {
        const int32_t i = order[k], gpu = info[i].gpu;
        if (gpu_group[gpu] != g) {
          gpu_group[gpu] = g;
          gpu_launch[gpu] = static_cast<int32_t>(first_op.size());
          first_op.push_back(i);
        }
        op_launch[i] = gpu_launch[gpu];
      }
    }
  } else if (grouped > 0) {
    std::unordered_map<int64_t, int32_t> group_launch;  // lookup only
    group_launch.reserve(static_cast<size_t>(grouped));
    for (int32_t i = 0; i < nops; ++i) {
      if (plan.ops[i].group < 0) continue;
      const int64_t key = static_cast<int64_t>(plan.ops[i].group) * gpus + info[i].gpu;
      auto [it, fresh] = group_launch.emplace(key, static_cast<int32_t>(first_op.size()));
      if (fresh) first_op.push_back(i);
      op_launch[i] = it->second;
    }
  }
  for (int32_t i = 0; i < nops; ++i) {
    if (op_launch[i] >= 0) continue;
    const OpInfo& op = info[i];
    if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.peer == op.gpu && op.match < i) {
      op_launch[i] = op_launch[op.match];  // an ungrouped send/recv to self: one launch (as Verify assumes)
    } else {
      op_launch[i] = static_cast<int32_t>(first_op.size());
      first_op.push_back(i);
    }
  }
  // Renumber by first op.
  std::vector<int32_t> at_op(nops, -1), id(first_op.size(), -1);
  for (size_t l = 0; l < first_op.size(); ++l) at_op[first_op[l]] = static_cast<int32_t>(l);
  int32_t next = 0;
  for (int32_t i = 0; i < nops; ++i) {
    if (at_op[i] >= 0) id[at_op[i]] = next++;
  }
  for (int32_t i = 0; i < nops; ++i) op_launch[i] = id[op_launch[i]];
  return op_launch;
}

// A transfer that continues a run of its group's ops on one channel
// (`before` bytes already sent back to back) pays the link latency (per-op
// cost) but not the efficiency ramp again: its bandwidth phase lasts
// T(before + bytes) - T(before), T(S) = S / (rate x efficiency(S)), and at
// least bytes / rate. NCCL pipelines the grouped ops to one peer: 8 grouped
// 256 MiB sends took 7.7x one (bench/results/2026-11-30-h200x2-nccl-group-probe/)
// where T(2 GiB) / T(256 MiB) = 7.75 and 8 isolated ops 8x.
double RunCap(double rate, int64_t before, int64_t bytes, double eff_run, double eff_before) {
  const double t1 = static_cast<double>(before + bytes) / (rate * eff_run);
  const double t0 = static_cast<double>(before) / (rate * eff_before);
  const double dt = std::max(t1 - t0, static_cast<double>(bytes) / rate);
  return static_cast<double>(bytes) / dt;
}

}  // namespace

double CopyKernelCap(const Op& op, const CopyKernelProfile& profile) {
  if (profile.Empty()) return 0;
  double ns = 0, bytes = 0, piece = 0;
  for (const CopyPair& c : op.copies) {
    const double b = static_cast<double>(c.src.Bytes());
    if (b <= 0) continue;
    ns += b / (profile.Rate(CopyRunBytes(c), op.sm_share) / kNsPerS);
    bytes += b;
    piece = std::max(piece, b);
  }
  ns = std::max(ns, profile.FloorNs(bytes, piece));  // one launch for all pairs
  return ns > 0 ? bytes / ns : 0;
}

int64_t QuantizeCopyBytes(const Op& op) {
  int64_t traffic = 0;
  for (const QuantizeTile& t : op.tiles) traffic += t.input.Bytes() + t.output.Bytes() + t.scales.Bytes();
  return traffic / 2;
}

int64_t QuantizeLaunchBytes(const Plan& plan, const QuantizeTile& t) {
  const int64_t bytes = t.input.Bytes();
  if (t.tensor < 0 || t.tensor >= static_cast<int32_t>(plan.tensors.size())) return bytes;
  const PlanTensor& pt = plan.tensors[t.tensor];
  const TensorQuant& q = pt.quant;
  if (q.block_cols != 128 || q.block_rows <= 0 || q.block_rows > 128 || pt.shape.ndim < 1) return bytes;
  const int nd = pt.shape.ndim;
  const int64_t cols = t.box.hi[nd - 1] - t.box.lo[nd - 1];
  const int64_t rows = nd >= 2 ? t.box.hi[nd - 2] - t.box.lo[nd - 2] : 1;
  if (cols <= 0 || rows <= 0) return bytes;
  const int64_t padded = (rows + q.block_rows - 1) / q.block_rows * q.block_rows * ((cols + 127) / 128 * 128);
  return static_cast<int64_t>(static_cast<double>(bytes) * static_cast<double>(padded) /
                              static_cast<double>(rows * cols));
}

QuantScheme QuantizeKernelScheme(const Plan& plan, const QuantizeTile& t) {
  if (t.tensor < 0 || t.tensor >= static_cast<int32_t>(plan.tensors.size())) return QuantScheme::kBlock;
  const PlanTensor& pt = plan.tensors[t.tensor];
  const TensorQuant& q = pt.quant;
  const int nd = pt.shape.ndim;
  if (nd < 1) return QuantScheme::kBlock;
  if (q.block_rows == 1) return QuantScheme::kMx;
  const int64_t rows = nd >= 2 ? pt.shape.dim[nd - 2] : 1, cols = pt.shape.dim[nd - 1];
  return q.block_rows >= rows && q.block_cols >= cols ? QuantScheme::kTensor : QuantScheme::kBlock;
}

double QuantizeKernelCap(const Plan& plan, const Op& op) {
  const QuantizeKernelProfile& profile = plan.cluster.quantize_kernel;
  if (profile.Empty()) return 0;
  double s = 0;
  for (const QuantizeTile& t : op.tiles)
    s += profile.Seconds(QuantizeLaunchBytes(plan, t), QuantizeKernelScheme(plan, t));
  return s > 0 ? static_cast<double>(QuantizeCopyBytes(op)) / (s * kNsPerS) : 0;
}

Launches BuildLaunches(const Plan& plan, const std::vector<OpInfo>& info, int32_t gpus) {
  const int32_t nops = static_cast<int32_t>(plan.ops.size());
  Launches L;
  L.of_op = AssignLaunches(plan, info, gpus);
  std::vector<int32_t> sizes;
  for (int32_t i = 0; i < nops; ++i) {
    const int32_t l = L.of_op[i];
    if (l >= static_cast<int32_t>(sizes.size())) sizes.resize(l + 1, 0);
    ++sizes[l];
  }
  const int32_t nl = static_cast<int32_t>(sizes.size());
  L.begin.assign(nl + 1, 0);
  for (int32_t l = 0; l < nl; ++l) L.begin[l + 1] = L.begin[l] + sizes[l];
  L.ops.assign(nops, -1);
  std::vector<int32_t> fill(L.begin.begin(), L.begin.end() - 1);
  for (int32_t i = 0; i < nops; ++i) L.ops[fill[L.of_op[i]]++] = i;  // op order within a launch

  // Prerequisites: deps and stream predecessors outside the launch.
  int32_t max_stream = 0;
  for (const Op& op : plan.ops) max_stream = std::max(max_stream, op.stream);
  const int64_t streams = max_stream + 1;
  std::vector<int32_t> last_on_stream(static_cast<size_t>(gpus * streams), -1);
  std::vector<std::pair<int32_t, int32_t>> edges;  // (prerequisite op, waiting launch)
  edges.reserve(nops * 2);
  for (int32_t i = 0; i < nops; ++i) {
    const Op& op = plan.ops[i];
    const int32_t l = L.of_op[i];
    for (int32_t d : op.deps) {
      if (L.of_op[d] != l) edges.emplace_back(d, l);
    }
    int32_t& last = last_on_stream[op.gpu * streams + op.stream];
    if (last >= 0 && L.of_op[last] != l) edges.emplace_back(last, l);
    last = i;
  }
  L.pending.assign(nl, 0);
  L.waiter_begin.assign(nops + 1, 0);
  for (auto [d, l] : edges) {
    ++L.waiter_begin[d + 1];
    ++L.pending[l];
  }
  for (int32_t i = 0; i < nops; ++i) L.waiter_begin[i + 1] += L.waiter_begin[i];
  L.waiters.assign(edges.size(), -1);
  std::vector<int32_t> wfill(L.waiter_begin.begin(), L.waiter_begin.end() - 1);
  for (auto [d, l] : edges) L.waiters[wfill[d]++] = l;
  L.running.assign(nl, 0);
  L.end_ns.assign(nl, -1);
  L.ready_by.assign(nl, -1);
  L.last_op.assign(nl, -1);
  return L;
}

}  // namespace sim_internal

using sim_internal::kNsPerS;

void Simulator::State::Issue(int32_t l, int64_t t) {
  launches.running[l] = launches.begin[l + 1] - launches.begin[l];
  for (int32_t k = launches.begin[l]; k < launches.begin[l + 1]; ++k) {
    const int32_t i = launches.ops[k];
    const OpInfo& op = info[i];
    op_start_ns[i] = t;
    op_issued[i] = 1;
    kind_use[static_cast<int>(op.kind)].Start(t);
    if (obs) obs->OnOpStart(t, plan.ops[i]);
    switch (op.kind) {
      case OpKind::kAlloc:
        memory.BufferChange(op.buffer, +1, t);
        EndOp(i, t);
        break;
      case OpKind::kFree:
        memory.BufferChange(op.buffer, -1, t);
        EndOp(i, t);
        break;
      case OpKind::kCopy:
      case OpKind::kQuantize:
      case OpKind::kOffload:
      case OpKind::kReload: NewFlow(i, -1, OpRoute(i), t); break;
      case OpKind::kSend:
      case OpKind::kRecv:
        memory.ConnectPeer(op.gpu, op.peer, CommLane(plan, plan.ops[i].stream), t);
        if (op_issued[op.match]) Rendezvous(op.kind == OpKind::kSend ? i : op.match, t);
        break;
    }
  }
}

// A send and its recv are both issued. The ops of one ordered GPU pair run
// one at a time in issue order (NCCL works through a connection's ops in
// order: 8 grouped sends of 256 MiB take 8x one; bench/results/
// 2026-11-30-h200x2-nccl-group-probe.md), so the flow starts when the pair's
// previous transfer ends.
void Simulator::State::Rendezvous(int32_t send, int64_t t) {
  sim_internal::Channel& ch = channels[info[send].channel];
  if (ch.busy) {
    ch.pending.push_back(send);
    return;
  }
  ch.busy = true;
  ch.group = info[send].group;
  ch.run_bytes = info[send].bytes;
  ch.flow = NewFlow(send, info[send].match, TransferRoute(send), t);
  BothWays(info[send].channel);
}

void Simulator::State::NextOnChannel(int32_t send, int64_t t) {
  sim_internal::Channel& ch = channels[info[send].channel];
  if (ch.head == ch.pending.size()) {
    ch.busy = false;
    ch.flow = -1;
    ch.pending.clear();
    ch.head = 0;
    BothWays(info[send].channel);
    return;
  }
  const int32_t next = ch.pending[ch.head++];
  // The next op of the same group continues the run (Flow::run_before).
  int64_t before = 0;
  if (info[next].group == ch.group) {
    before = ch.run_bytes;
    ch.run_bytes += info[next].bytes;
  } else {
    ch.group = info[next].group;
    ch.run_bytes = info[next].bytes;
  }
  ch.flow = NewFlow(next, info[next].match, TransferRoute(next), t, before, op_flow[send]);
  BothWays(info[next].channel);
}

Route Simulator::State::OpRoute(int32_t i) const {
  const OpInfo& op = info[i];
  switch (op.kind) {
    case OpKind::kCopy:
    case OpKind::kQuantize: return ports.DeviceCopy(op.gpu);
    // Every plan host buffer is pinned (PlanBuffer has no pageable kind).
    case OpKind::kOffload: return ports.Offload(op.gpu);
    case OpKind::kReload: return ports.Reload(op.gpu);
    case OpKind::kSend: return TransferRoute(i);
    default: return Route{};
  }
}

// While a pair's two directions both carry a transfer, each runs at the
// link's both-ways rate and ramp (DuplexEfficiency: NCCL's both-ways curve
// is lower than one way's at the same size); alone, at the one-way cap.
// Called whenever a transfer of the pair starts or ends.
void Simulator::State::BothWays(int32_t channel) {
  const int32_t reverse = channels[channel].reverse;
  if (reverse == channel) return;  // a GPU to itself
  const int32_t forth = channels[channel].flow;
  const int32_t back = reverse < 0 ? -1 : channels[reverse].flow;
  const bool both = forth >= 0 && back >= 0;
  for (const int32_t id : {forth, back}) {
    if (id < 0) continue;
    const Flow& f = net.flows[id];
    if (f.done || f.bytes <= 0) continue;
    const double cap = TransferCap(f, both);
    if (!(cap > 0) || cap == f.cap) continue;
    net.SetCap(id, cap);
  }
}

// A transfer over a link that shares_copy_port also draws on both GPUs'
// copy ports: NCCL's kernels share SMs and HBM with copy kernels. Measured on 2x H200
// (bench/results/2026-11-30-h200x2-nccl-group-probe/): a 2 GiB device copy
// under 2 GiB both-ways NVLink ran at 1.33-1.51 TB/s (alone 1.95-2.12)
// while NVLink kept 335-342 GB/s (alone 364): copy + NVLink in + out stayed
// within the copy port's rate.
Route Simulator::State::TransferRoute(int32_t send) const {
  const int32_t a = info[send].gpu, b = info[send].peer;
  Route r = ports.Transfer(a, b);
  if (r.link_class == LinkClass::kLocal || !ports.Profile(r).shares_copy_port) return r;
  for (const int32_t g : {a, b}) {
    const int32_t q = ports.DeviceCopy(g).ports[0];
    if (net.ports[q].peak > 0) r.ports[r.num_ports++] = q;
  }
  return r;
}

// A transfer's ceiling in bytes/ns: one way or both ways, from the start of
// its run on the channel or continuing it (RunCap).
double Simulator::State::TransferCap(const Flow& f, bool both) const {
  const LinkProfile& prof = ports.Profile(f.route);
  if (both) {
    const double duplex = (prof.duplex_bytes_per_s > 0 ? prof.duplex_bytes_per_s : prof.bytes_per_s) / kNsPerS;
    if (f.run_before <= 0) return duplex * prof.DuplexEfficiency(f.bytes);
    return sim_internal::RunCap(duplex, f.run_before, f.bytes, prof.DuplexEfficiency(f.run_before + f.bytes),
                                prof.DuplexEfficiency(f.run_before));
  }
  if (f.run_before <= 0) return ports.FlowCapBytesPerS(f.route, f.bytes) / kNsPerS;
  return sim_internal::RunCap(prof.bytes_per_s / kNsPerS, f.run_before, f.bytes,
                              prof.Efficiency(f.run_before + f.bytes), prof.Efficiency(f.run_before));
}

// A flow for op (and its recv op2, for a transfer): it starts moving bytes
// after the link's latency.
int32_t Simulator::State::NewFlow(int32_t op, int32_t op2, const Route& r, int64_t t, int64_t run_before,
                                  int32_t after) {
  Flow f;
  f.op = op;
  f.op2 = op2;
  f.after = after;
  f.route = r;
  f.bytes = info[op].bytes;
  f.created_ns = t;
  f.run_before = run_before;
  const LinkProfile& prof = ports.Profile(r);
  if (f.bytes > 0) {
    for (int32_t k = 0; k < r.num_ports; ++k) {
      if (!(net.ports[r.ports[k]].peak > 0) || !(net.ports[r.ports[k]].duplex > 0)) {
        Bad(op, fmt::format("moves {} bytes over {}, which has no bandwidth", f.bytes, ports.Name(r.ports[k])));
      }
    }
    f.cap = op2 >= 0 ? TransferCap(f, false) : ports.FlowCapBytesPerS(r, f.bytes) / kNsPerS;
    // A copy kernel measured as such: its runs, share and floor (its launch's
    // fixed time included) replace the device-copy link's size curve and latency.
    if (info[op].copy_cap > 0) f.cap = std::min(prof.bytes_per_s / kNsPerS, info[op].copy_cap);
    if (!(f.cap > 0)) Bad(op, fmt::format("{} link efficiency at {} bytes is not positive", LinkClassName(r.link_class), f.bytes));
  }
  sim_internal::Activity& a = class_use[static_cast<int>(r.link_class)];
  ++a.count;
  a.bytes += f.bytes;
  a.Start(t);
  const int32_t id = net.Add(f);
  op_flow[op] = id;
  if (op2 >= 0) op_flow[op2] = id;
  const int64_t latency = info[op].copy_cap > 0 ? 0 : std::max<int64_t>(prof.latency_ns, 0);
  queue.Push(NetworkPost(op, op2, r, prof, t) + latency, sim_internal::Event::kFlowStart, id);
  return id;
}

// A network transfer is posted by the NCCL proxy of each of its GPUs' NICs,
// each proxy one op after another (LinkProfile::op_gap_ns): each side posts
// when its own NIC is free to, and stays busy op_gap_ns; the transfer starts
// its latency when both sides have posted. The two proxies are threads of
// different hosts: a side waiting for its peer does not hold its own NIC, so
// NIC a posting its next op does not wait for NIC b's queue (coupling them
// chained the posts of a colocated all-to-all into a convoy: qwen3-235b's
// 128 NICs took 35 ms to reach full rate). Other flows start at t.
int64_t Simulator::State::NetworkPost(int32_t op, int32_t op2, const Route& r, const LinkProfile& prof, int64_t t) {
  if (op2 < 0 || r.link_class != LinkClass::kNetwork || prof.op_gap_ns <= 0) return t;
  const int32_t a = plan.cluster.NicOf(info[op].gpu), b = plan.cluster.NicOf(info[op2].gpu);
  if (nic_free_ns.empty()) nic_free_ns.assign(static_cast<size_t>(plan.cluster.nodes) * plan.cluster.nics_per_node, 0);
  auto post = [&](int32_t nic) {
    const int64_t at = std::max(t, nic_free_ns[nic]);
    nic_free_ns[nic] = at + prof.op_gap_ns;
    return at;
  };
  const int64_t sent = post(a);
  return a == b ? sent : std::max(sent, post(b));
}

void Simulator::State::StartFlow(int32_t id, int64_t t) {
  const Flow& f = net.flows[id];
  if (f.bytes <= 0) {
    FinishFlow(id, t);
    return;
  }
  if (!unstarted_bytes.empty())  // as CountUnstartedBytes counted them
    ForEachDistinctPort(f.route.ports, f.route.num_ports, [&](int32_t p) { unstarted_bytes[p] -= f.bytes; });
  net.Start(id, t);
}

void Simulator::State::FinishFlow(int32_t id, int64_t t) {
  net.Stop(id, t);
  const Flow& f = net.flows[id];
  sim_internal::Activity& a = class_use[static_cast<int>(f.route.link_class)];
  a.sum_ns += t - f.created_ns;
  a.Stop(t);
  EndOp(f.op, t);
  if (f.op2 >= 0) {
    EndOp(f.op2, t);
    NextOnChannel(f.op, t);
  }
}

void Simulator::State::EndOp(int32_t i, int64_t t) {
  const OpInfo& op = info[i];
  op_end_ns[i] = t;
  sim_internal::Activity& a = kind_use[static_cast<int>(op.kind)];
  ++a.count;
  a.bytes += op.bytes;
  a.sum_ns += t - op_start_ns[i];
  a.Stop(t);
  if (obs) obs->OnOpEnd(t, plan.ops[i], op_start_ns[i]);
  const int32_t l = launches.of_op[i];
  if (--launches.running[l] == 0) {
    launches.last_op[l] = i;
    EndLaunch(l, t);
  }
}

void Simulator::State::EndLaunch(int32_t l, int64_t t) {
  launches.end_ns[l] = t;
  ++launches.ended;
  for (int32_t k = launches.begin[l]; k < launches.begin[l + 1]; ++k) {
    const int32_t i = launches.ops[k];
    for (int32_t w = launches.waiter_begin[i]; w < launches.waiter_begin[i + 1]; ++w) {
      const int32_t next = launches.waiters[w];
      // Ready on the GPU, but not before its host thread issued it.
      if (--launches.pending[next] == 0) {
        launches.ready_by[next] = l;
        queue.Push(IssueAt(next, t), sim_internal::Event::kIssue, next);
      }
    }
  }
}

}  // namespace reshard
