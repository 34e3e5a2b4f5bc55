#include "sim/simulator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "sim/trace.h"

namespace reshard {

namespace {

constexpr int kKinds = 7;    // OpKind values
constexpr int kClasses = 4;  // LinkClass values
constexpr double kNsPerS = 1e9;

// Nanoseconds to move `bytes` at `bytes_per_ns`, rounded up. The tolerance
// (1e-12 relative + 1e-6 ns) absorbs floating noise such as 3e6 / (1/3.0),
// so exact hand-derived times stay exact.
int64_t CeilNs(double bytes, double bytes_per_ns) {
  if (bytes <= 0) return 0;
  const double x = bytes / bytes_per_ns;
  const double r = std::ceil(x - (x * 1e-12 + 1e-6));
  return r <= 0 ? 0 : static_cast<int64_t>(r);
}

// Issues and flow starts; flow ends live in an IndexedHeap (their times change).
struct Event {
  enum Kind : uint8_t { kIssue, kFlowStart };
  int64_t t;
  uint64_t seq;
  Kind kind;
  int32_t id;  // launch or flow
};
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.t != b.t ? a.t > b.t : a.seq > b.seq;
  }
};

// Binary min-heap of ids by (key, id) that knows where each id sits, so a
// key moves in O(log n) and no stale entries pile up. Used for flow ends (a
// component of F flows re-rated F times would otherwise leave F^2 entries)
// and for the ports' fair shares while water-filling.
template <typename Key>
class IndexedHeap {
 public:
  void Resize(size_t ids) { pos_.resize(ids, -1); }
  bool Empty() const { return heap_.empty(); }
  int32_t Top() const { return heap_.front().id; }
  Key TopKey() const { return heap_.front().key; }
  void Set(int32_t id, Key key) {
    if (pos_[id] < 0) {
      pos_[id] = static_cast<int32_t>(heap_.size());
      heap_.push_back({key, id});
      Up(pos_[id]);
    } else {
      const int32_t i = pos_[id];
      const Entry old = heap_[i];
      heap_[i].key = key;
      if (Less(heap_[i], old)) Up(i); else Down(i);
    }
  }
  void Erase(int32_t id) {
    const int32_t i = pos_[id];
    if (i < 0) return;
    pos_[id] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == static_cast<int32_t>(heap_.size())) return;
    Place(i, last);
    Up(i);
    Down(pos_[last.id]);
  }
  void Clear() {
    for (const Entry& e : heap_) pos_[e.id] = -1;
    heap_.clear();
  }

 private:
  struct Entry {
    Key key;
    int32_t id;
  };
  static bool Less(const Entry& a, const Entry& b) { return a.key != b.key ? a.key < b.key : a.id < b.id; }
  void Place(int32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.id] = i;
  }
  void Up(int32_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const int32_t parent = (i - 1) / 2;
      if (!Less(e, heap_[parent])) break;
      Place(i, heap_[parent]);
      i = parent;
    }
    Place(i, e);
  }
  void Down(int32_t i) {
    const Entry e = heap_[i];
    const int32_t n = static_cast<int32_t>(heap_.size());
    while (true) {
      int32_t c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && Less(heap_[c + 1], heap_[c])) ++c;
      if (!Less(heap_[c], e)) break;
      Place(i, heap_[c]);
      i = c;
    }
    Place(i, e);
  }
  std::vector<Entry> heap_;
  std::vector<int32_t> pos_;  // id -> index in heap_, -1 when absent
};

// Counts how long at least one member of a category runs.
struct Activity {
  int64_t count = 0, bytes = 0, sum_ns = 0, active_ns = 0;
  int64_t running = 0, since = 0;
  void Start(int64_t t) {
    if (running++ == 0) since = t;
  }
  void Stop(int64_t t) {
    if (--running == 0) active_ns += t - since;
  }
};

}  // namespace

struct Simulator::State {
  struct Flow {
    int32_t op = -1, op2 = -1;  // send (or copy/offload/reload), and recv
    Route route;
    int64_t bytes = 0;
    int64_t created_ns = 0;     // rendezvous (both ops issued)
    int64_t run_before = 0;     // bytes of earlier ops of its group run on its channel (Channel)
    double cap = 0;             // bytes/ns ceiling: peak × efficiency
    double remaining = 0;       // bytes
    double rate = 0;            // bytes/ns
    double new_rate = 0;
    int64_t last_ns = 0;        // when `remaining` was last settled
    int64_t finish_ns = -1;
    uint32_t stamp = 0;         // component / frozen marks
    uint32_t frozen = 0;
    std::array<int32_t, 4> pos{-1, -1, -1, -1};  // index in each port's flow list
    bool active = false, done = false;
  };
  struct PortState {
    std::vector<int32_t> flows;  // active flows (in bandwidth phase)
    double peak = 0, duplex = 0; // bytes/ns
    int32_t reverse = -1;
    bool coupled = false;
    double rate = 0;             // current sum of flow rates (bytes/ns)
    int64_t bytes = 0, busy_ns = 0, busy_since = 0;
    uint32_t stamp = 0;
    // water-filling scratch
    double remcap = 0;
    int32_t unfrozen = 0;
    uint32_t touched = 0;
  };

  // What the event loop reads of an op, packed (a Plan Op is ~200 bytes with
  // its vectors and label; touching it per event costs cache misses).
  struct OpInfo {
    OpKind kind = OpKind::kAlloc;
    int32_t gpu = -1, peer = -1, match = -1, buffer = -1;
    int64_t bytes = 0;
  };

  const Plan& plan;
  SimOptions opt;
  PortModel ports;
  SimObserver* obs;
  int32_t gpus = 0, nodes = 0, nops = 0;

  // Launches (one group on one GPU, or one ungrouped op), CSR lists.
  std::vector<int32_t> op_launch, launch_begin, launch_ops;
  std::vector<int32_t> launch_pending, launch_running;
  std::vector<int64_t> launch_end;
  std::vector<int32_t> waiter_begin, waiters;  // op -> launches waiting for it
  int32_t launches_ended = 0;

  std::vector<OpInfo> info;
  std::vector<int64_t> op_start, op_end;
  std::vector<uint8_t> op_issued;
  std::vector<Flow> flows;
  std::vector<PortState> port;

  std::priority_queue<Event, std::vector<Event>, Later> queue;
  IndexedHeap<int64_t> ends;  // active flows by finish time
  uint64_t seq = 0;
  int64_t events = 0, rate_updates = 0;
  std::vector<int32_t> dirty;
  uint32_t stamp = 0;

  std::vector<int64_t> mem, peak, host_mem, host_peak;
  // Connected (gpu, peer) pairs: a bitset of gpus^2 bits up to 16384 GPUs
  // (32 MiB), a hash set beyond.
  std::vector<uint64_t> peer_bits;
  std::unordered_set<int64_t> peer_set;
  // Per ordered GPU pair (src * gpus + dst): transfers waiting for the one in flight.
  struct Channel {
    std::vector<int32_t> pending;  // send op ids, FIFO from `head`
    size_t head = 0;
    bool busy = false;
    int32_t flow = -1;             // the transfer in flight
    int32_t group = -1;            // NCCL group of the current run of back-to-back ops
    int64_t run_bytes = 0;         // bytes of that run so far, the transfer in flight included
  };
  std::unordered_map<int64_t, Channel> channels;  // lookup only, never iterated
  std::array<Activity, kKinds> kind_use{};
  std::array<Activity, kClasses> class_use{};

  // Water-filling scratch.
  std::vector<int32_t> comp_ports, comp_flows, bfs;
  std::vector<std::pair<double, int32_t>> by_cap;
  IndexedHeap<double> shares;  // water-filling: ports by fair share
  std::vector<int32_t> touched_ports;
  uint32_t touch_mark = 1;

  State(const Plan& p, SimOptions o) : plan(p), opt(o), ports(p.cluster), obs(o.observer) {}

  [[noreturn]] void Bad(int32_t op, const std::string& problem) const {
    throw InputError("<plan " + plan.name + ">", fmt::format("ops[{}]", op), problem);
  }

  void Push(int64_t t, Event::Kind k, int32_t id) {
    queue.push(Event{t, seq++, k, id});
  }

  // ---- setup ---------------------------------------------------------------

  void CheckOps() {
    const int32_t nbuf = static_cast<int32_t>(plan.buffers.size());
    info.resize(nops);
    for (int32_t i = 0; i < nops; ++i) {
      const Op& op = plan.ops[i];
      info[i] = OpInfo{op.kind, op.gpu, op.peer, op.match, op.buffer, op.Bytes()};
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
  }

  // Launch ids, numbered by their first op. Grouped ops are bucketed by group
  // (counting sort when group ids are dense, else a hash map), and within a
  // group by GPU through a per-GPU scratch slot: O(ops + groups + GPUs).
  void AssignLaunches() {
    op_launch.assign(nops, -1);
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
  }

  void BuildLaunches() {
    AssignLaunches();
    std::vector<int32_t> sizes;
    for (int32_t i = 0; i < nops; ++i) {
      const int32_t l = op_launch[i];
      if (l >= static_cast<int32_t>(sizes.size())) sizes.resize(l + 1, 0);
      ++sizes[l];
    }
    const int32_t nl = static_cast<int32_t>(sizes.size());
    launch_begin.assign(nl + 1, 0);
    for (int32_t l = 0; l < nl; ++l) launch_begin[l + 1] = launch_begin[l] + sizes[l];
    launch_ops.assign(nops, -1);
    std::vector<int32_t> fill(launch_begin.begin(), launch_begin.end() - 1);
    for (int32_t i = 0; i < nops; ++i) launch_ops[fill[op_launch[i]]++] = i;  // op order within a launch

    // Prerequisites: deps and stream predecessors outside the launch.
    int32_t max_stream = 0;
    for (const Op& op : plan.ops) max_stream = std::max(max_stream, op.stream);
    const int64_t streams = max_stream + 1;
    std::vector<int32_t> last_on_stream(static_cast<size_t>(gpus * streams), -1);
    std::vector<std::pair<int32_t, int32_t>> edges;  // (prerequisite op, waiting launch)
    edges.reserve(nops * 2);
    for (int32_t i = 0; i < nops; ++i) {
      const Op& op = plan.ops[i];
      const int32_t l = op_launch[i];
      for (int32_t d : op.deps) {
        if (op_launch[d] != l) edges.emplace_back(d, l);
      }
      int32_t& last = last_on_stream[op.gpu * streams + op.stream];
      if (last >= 0 && op_launch[last] != l) edges.emplace_back(last, l);
      last = i;
    }
    launch_pending.assign(nl, 0);
    waiter_begin.assign(nops + 1, 0);
    for (auto [d, l] : edges) {
      ++waiter_begin[d + 1];
      ++launch_pending[l];
    }
    for (int32_t i = 0; i < nops; ++i) waiter_begin[i + 1] += waiter_begin[i];
    waiters.assign(edges.size(), -1);
    std::vector<int32_t> wfill(waiter_begin.begin(), waiter_begin.end() - 1);
    for (auto [d, l] : edges) waiters[wfill[d]++] = l;
    launch_running.assign(nl, 0);
    launch_end.assign(nl, -1);
  }

  void SetupPorts() {
    port.assign(ports.NumPorts(), PortState{});
    for (int32_t p = 0; p < ports.NumPorts(); ++p) {
      PortState& s = port[p];
      s.peak = ports.BytesPerS(p) / kNsPerS;
      s.duplex = ports.DuplexBytesPerS(p) / kNsPerS;
      s.reverse = ports.Reverse(p);
      s.coupled = ports.Coupled(p);
    }
  }

  void SetupMemory() {
    mem.assign(gpus, plan.cluster.overheads.cuda_context_bytes);
    host_mem.assign(nodes, 0);
    for (const PlanBuffer& b : plan.buffers) {
      if (!b.preexisting) continue;
      RESHARD_CHECK(b.gpu >= 0 && b.gpu < gpus, fmt::format("buffer {} on gpu {} outside the cluster", b.id, b.gpu));
      if (b.space == MemorySpace::kDevice) {
        mem[b.gpu] += b.bytes;
      } else {
        host_mem[plan.cluster.NodeOf(b.gpu)] += b.bytes;
      }
    }
    peak = mem;
    host_peak = host_mem;
    if (gpus <= 16384 && plan.cluster.overheads.nccl_bytes_per_peer != 0) {
      peer_bits.assign((static_cast<size_t>(gpus) * gpus + 63) / 64, 0);
    }
  }

  // ---- memory --------------------------------------------------------------

  void AddMemory(int32_t gpu, int64_t bytes, int64_t t) {
    mem[gpu] += bytes;
    peak[gpu] = std::max(peak[gpu], mem[gpu]);
    if (obs) obs->OnMemory(t, gpu, mem[gpu]);
  }

  void BufferChange(const OpInfo& op, int64_t sign, int64_t t) {
    const PlanBuffer& b = plan.buffers[op.buffer];
    if (b.space == MemorySpace::kDevice) {
      AddMemory(b.gpu, sign * b.bytes, t);
    } else {
      const int32_t node = plan.cluster.NodeOf(b.gpu);
      host_mem[node] += sign * b.bytes;
      host_peak[node] = std::max(host_peak[node], host_mem[node]);
    }
  }

  void ConnectPeer(int32_t gpu, int32_t peer, int64_t t) {
    const int64_t per_peer = plan.cluster.overheads.nccl_bytes_per_peer;
    if (peer == gpu || per_peer == 0) return;
    const int64_t key = static_cast<int64_t>(gpu) * gpus + peer;
    if (!peer_bits.empty()) {
      uint64_t& word = peer_bits[key / 64];
      const uint64_t bit = uint64_t{1} << (key % 64);
      if (word & bit) return;
      word |= bit;
    } else if (!peer_set.insert(key).second) {
      return;
    }
    AddMemory(gpu, per_peer, t);
  }

  // ---- ops, launches, flows ------------------------------------------------

  void Issue(int32_t l, int64_t t) {
    launch_running[l] = launch_begin[l + 1] - launch_begin[l];
    for (int32_t k = launch_begin[l]; k < launch_begin[l + 1]; ++k) {
      const int32_t i = launch_ops[k];
      const OpInfo& op = info[i];
      op_start[i] = t;
      op_issued[i] = 1;
      kind_use[static_cast<int>(op.kind)].Start(t);
      if (obs) obs->OnOpStart(t, plan.ops[i]);
      switch (op.kind) {
        case OpKind::kAlloc:
          BufferChange(op, +1, t);
          EndOp(i, t);
          break;
        case OpKind::kFree:
          BufferChange(op, -1, t);
          EndOp(i, t);
          break;
        case OpKind::kCopy: NewFlow(i, -1, ports.DeviceCopy(op.gpu), t); break;
        // Every plan host buffer is pinned (PlanBuffer has no pageable kind).
        case OpKind::kOffload: NewFlow(i, -1, ports.Offload(op.gpu), t); break;
        case OpKind::kReload: NewFlow(i, -1, ports.Reload(op.gpu), t); break;
        case OpKind::kSend:
        case OpKind::kRecv:
          ConnectPeer(op.gpu, op.peer, t);
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
  void Rendezvous(int32_t send, int64_t t) {
    Channel& ch = channels[static_cast<int64_t>(info[send].gpu) * gpus + info[send].peer];
    if (ch.busy) {
      ch.pending.push_back(send);
      return;
    }
    ch.busy = true;
    ch.group = plan.ops[send].group;
    ch.run_bytes = info[send].bytes;
    ch.flow = NewFlow(send, info[send].match, TransferRoute(send), t);
    BothWays(info[send].gpu, info[send].peer);
  }

  // While a pair's two directions both carry a transfer, each runs at the
  // link's both-ways rate and ramp (DuplexEfficiency: NCCL's both-ways curve
  // is lower than one way's at the same size); alone, at the one-way cap.
  // Called whenever a transfer of the pair starts or ends.
  void BothWays(int32_t a, int32_t b) {
    if (a == b) return;
    const auto fwd = channels.find(static_cast<int64_t>(a) * gpus + b);
    const auto rev = channels.find(static_cast<int64_t>(b) * gpus + a);
    const int32_t forth = fwd == channels.end() ? -1 : fwd->second.flow;
    const int32_t back = rev == channels.end() ? -1 : rev->second.flow;
    const bool both = forth >= 0 && back >= 0;
    for (const int32_t id : {forth, back}) {
      if (id < 0) continue;
      Flow& f = flows[id];
      if (f.done || f.bytes <= 0) continue;
      const double cap = TransferCap(f, both);
      if (!(cap > 0) || cap == f.cap) continue;
      f.cap = cap;
      if (f.active)
        for (int32_t k = 0; k < f.route.num_ports; ++k) dirty.push_back(f.route.ports[k]);
    }
  }

  // A transfer over a link that shares_copy_port also draws on both GPUs'
  // copy ports: NCCL's kernels share SMs and HBM with copy kernels. Measured on 2x H200
  // (bench/results/2026-11-30-h200x2-nccl-group-probe.md): a 2 GiB device copy
  // under 2 GiB both-ways NVLink ran at 1.33-1.51 TB/s (alone 1.95-2.12)
  // while NVLink kept 335-342 GB/s (alone 364): copy + NVLink in + out stayed
  // within the copy port's rate.
  Route TransferRoute(int32_t send) const {
    const int32_t a = info[send].gpu, b = info[send].peer;
    Route r = ports.Transfer(a, b);
    if (r.link_class == LinkClass::kLocal || !ports.Profile(r).shares_copy_port) return r;
    for (const int32_t g : {a, b}) {
      const int32_t q = ports.DeviceCopy(g).ports[0];
      if (port[q].peak > 0) r.ports[r.num_ports++] = q;
    }
    return r;
  }

  void NextOnChannel(int32_t send, int64_t t) {
    Channel& ch = channels[static_cast<int64_t>(info[send].gpu) * gpus + info[send].peer];
    if (ch.head == ch.pending.size()) {
      ch.busy = false;
      ch.flow = -1;
      ch.pending.clear();
      ch.head = 0;
      BothWays(info[send].gpu, info[send].peer);
      return;
    }
    const int32_t next = ch.pending[ch.head++];
    // The next op of the same group continues the run (Flow::run_before).
    int64_t before = 0;
    if (plan.ops[next].group == ch.group) {
      before = ch.run_bytes;
      ch.run_bytes += info[next].bytes;
    } else {
      ch.group = plan.ops[next].group;
      ch.run_bytes = info[next].bytes;
    }
    ch.flow = NewFlow(next, info[next].match, TransferRoute(next), t, before);
    BothWays(info[next].gpu, info[next].peer);
  }

  // A transfer that continues a run of its group's ops on one channel
  // (`before` bytes already sent back to back) pays the link latency (per-op
  // cost) but not the efficiency ramp again: its bandwidth phase lasts
  // T(before + bytes) - T(before), T(S) = S / (rate x efficiency(S)), and at
  // least bytes / rate. NCCL pipelines the grouped ops to one peer: 8 grouped
  // 256 MiB sends took 7.7x one (bench/results/2026-11-30-h200x2-nccl-group-
  // probe.md) where T(2 GiB) / T(256 MiB) = 7.75 and 8 isolated ops 8x.
  static double RunCap(double rate, int64_t before, int64_t bytes, double eff_run, double eff_before) {
    const double t1 = static_cast<double>(before + bytes) / (rate * eff_run);
    const double t0 = static_cast<double>(before) / (rate * eff_before);
    const double dt = std::max(t1 - t0, static_cast<double>(bytes) / rate);
    return static_cast<double>(bytes) / dt;
  }

  double TransferCap(const Flow& f, bool both) const {
    const LinkProfile& prof = ports.Profile(f.route);
    if (both) {
      const double duplex = (prof.duplex_bytes_per_s > 0 ? prof.duplex_bytes_per_s : prof.bytes_per_s) / kNsPerS;
      if (f.run_before <= 0) return duplex * prof.DuplexEfficiency(f.bytes);
      return RunCap(duplex, f.run_before, f.bytes, prof.DuplexEfficiency(f.run_before + f.bytes),
                    prof.DuplexEfficiency(f.run_before));
    }
    if (f.run_before <= 0) return ports.FlowCapBytesPerS(f.route, f.bytes) / kNsPerS;
    return RunCap(prof.bytes_per_s / kNsPerS, f.run_before, f.bytes,
                  prof.Efficiency(f.run_before + f.bytes), prof.Efficiency(f.run_before));
  }

  int32_t NewFlow(int32_t op, int32_t op2, const Route& r, int64_t t, int64_t run_before = 0) {
    Flow f;
    f.op = op;
    f.op2 = op2;
    f.route = r;
    f.bytes = info[op].bytes;
    f.created_ns = t;
    f.run_before = run_before;
    const LinkProfile& prof = ports.Profile(r);
    if (f.bytes > 0) {
      for (int32_t k = 0; k < r.num_ports; ++k) {
        if (!(port[r.ports[k]].peak > 0) || !(port[r.ports[k]].duplex > 0)) {
          Bad(op, fmt::format("moves {} bytes over {}, which has no bandwidth", f.bytes, ports.Name(r.ports[k])));
        }
      }
      f.cap = op2 >= 0 ? TransferCap(f, false) : ports.FlowCapBytesPerS(r, f.bytes) / kNsPerS;
      if (!(f.cap > 0)) Bad(op, fmt::format("{} link efficiency at {} bytes is not positive", LinkClassName(r.link_class), f.bytes));
    }
    Activity& a = class_use[static_cast<int>(r.link_class)];
    ++a.count;
    a.bytes += f.bytes;
    a.Start(t);
    const int32_t id = static_cast<int32_t>(flows.size());
    flows.push_back(f);
    Push(t + std::max<int64_t>(prof.latency_ns, 0), Event::kFlowStart, id);
    return id;
  }

  void StartFlow(int32_t id, int64_t t) {
    Flow& f = flows[id];
    if (f.bytes <= 0) {
      FinishFlow(id, t);
      return;
    }
    f.active = true;
    f.remaining = static_cast<double>(f.bytes);
    f.last_ns = t;
    for (int32_t k = 0; k < f.route.num_ports; ++k) {
      PortState& p = port[f.route.ports[k]];
      if (p.flows.empty()) p.busy_since = t;
      f.pos[k] = static_cast<int32_t>(p.flows.size());
      p.flows.push_back(id);
      p.bytes += f.bytes;
      dirty.push_back(f.route.ports[k]);
    }
  }

  void FinishFlow(int32_t id, int64_t t) {
    Flow& f = flows[id];
    if (f.active) {
      for (int32_t k = 0; k < f.route.num_ports; ++k) {
        const int32_t pid = f.route.ports[k];
        PortState& p = port[pid];
        const int32_t pos = f.pos[k];
        const int32_t moved_flow = p.flows.back();
        p.flows[pos] = moved_flow;
        p.flows.pop_back();
        if (moved_flow != id) {
          Flow& m = flows[moved_flow];
          for (int32_t q = 0; q < m.route.num_ports; ++q)
            if (m.route.ports[q] == pid) m.pos[q] = pos;
        }
        if (p.flows.empty()) p.busy_ns += t - p.busy_since;
        dirty.push_back(pid);
      }
      if (obs) obs->OnFlowRate(t, f.op, f.route, 0);
    }
    ends.Erase(id);
    f.active = false;
    f.done = true;
    f.rate = 0;
    f.remaining = 0;
    Activity& a = class_use[static_cast<int>(f.route.link_class)];
    a.sum_ns += t - f.created_ns;
    a.Stop(t);
    EndOp(f.op, t);
    if (f.op2 >= 0) {
      EndOp(f.op2, t);
      NextOnChannel(f.op, t);
    }
  }

  void EndOp(int32_t i, int64_t t) {
    const OpInfo& op = info[i];
    op_end[i] = t;
    Activity& a = kind_use[static_cast<int>(op.kind)];
    ++a.count;
    a.bytes += op.bytes;
    a.sum_ns += t - op_start[i];
    a.Stop(t);
    if (obs) obs->OnOpEnd(t, plan.ops[i], op_start[i]);
    const int32_t l = op_launch[i];
    if (--launch_running[l] == 0) EndLaunch(l, t);
  }

  void EndLaunch(int32_t l, int64_t t) {
    launch_end[l] = t;
    ++launches_ended;
    for (int32_t k = launch_begin[l]; k < launch_begin[l + 1]; ++k) {
      const int32_t i = launch_ops[k];
      for (int32_t w = waiter_begin[i]; w < waiter_begin[i + 1]; ++w) {
        if (--launch_pending[waiters[w]] == 0) Push(t, Event::kIssue, waiters[w]);
      }
    }
  }

  // ---- bandwidth sharing -----------------------------------------------------

  // Re-shares bandwidth in every component that holds a dirty port.
  void Recompute(int64_t t) {
    ++stamp;
    for (int32_t start : dirty) {
      if (port[start].stamp == stamp) continue;
      comp_ports.clear();
      comp_flows.clear();
      bfs.clear();
      bfs.push_back(start);
      port[start].stamp = stamp;
      for (size_t h = 0; h < bfs.size(); ++h) {
        const int32_t q = bfs[h];
        comp_ports.push_back(q);
        for (int32_t fid : port[q].flows) {
          Flow& f = flows[fid];
          if (f.stamp == stamp) continue;
          f.stamp = stamp;
          comp_flows.push_back(fid);
          for (int32_t k = 0; k < f.route.num_ports; ++k) {
            const int32_t r = f.route.ports[k];
            if (port[r].stamp != stamp) {
              port[r].stamp = stamp;
              bfs.push_back(r);
            }
          }
        }
        const int32_t rev = port[q].reverse;
        if (port[q].coupled && port[rev].stamp != stamp) {
          port[rev].stamp = stamp;
          bfs.push_back(rev);
        }
      }
      WaterFill(t);
    }
    dirty.clear();
  }

  // Max-min fair rates with per-flow caps by progressive filling: all unfrozen
  // flows rise together; the next to stop is either the flow with the smallest
  // cap or every flow on the port with the smallest fair share (remaining
  // capacity / unfrozen flows). A heap over ports (lazy deletion) and the
  // flows sorted by cap give O((F + P) log(F + P)) per component; caps at or
  // above a flow's smallest port capacity can never bind and are left out.
  void WaterFill(int64_t t) {
    ++rate_updates;
    const uint32_t mark = stamp;
    for (int32_t fid : comp_flows) {
      Flow& f = flows[fid];
      f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(t - f.last_ns));
      f.last_ns = t;
    }
    // Ports by (fair share, port id), smallest first.
    shares.Clear();
    auto heap_push = [&](int32_t q) {
      const PortState& p = port[q];
      shares.Set(q, std::max(0.0, p.remcap) / p.unfrozen);
    };
    for (int32_t q : comp_ports) {
      PortState& p = port[q];
      const bool both = p.coupled && !p.flows.empty() && !port[p.reverse].flows.empty();
      p.remcap = both ? p.duplex : p.peak;
      p.unfrozen = static_cast<int32_t>(p.flows.size());
      if (p.unfrozen > 0) heap_push(q);
    }
    by_cap.clear();
    for (int32_t fid : comp_flows) {
      const Flow& f = flows[fid];
      double limit = std::numeric_limits<double>::infinity();
      for (int32_t k = 0; k < f.route.num_ports; ++k) limit = std::min(limit, port[f.route.ports[k]].remcap);
      if (f.cap < limit) by_cap.emplace_back(f.cap, fid);
    }
    // A heap, not a sort: usually ports freeze most flows and few caps are popped.
    std::make_heap(by_cap.begin(), by_cap.end(), std::greater<>());

    auto freeze = [&](int32_t fid, double rate) {
      Flow& f = flows[fid];
      f.frozen = mark;
      f.new_rate = rate;
      for (int32_t k = 0; k < f.route.num_ports; ++k) {
        const int32_t q = f.route.ports[k];
        PortState& p = port[q];
        p.remcap -= rate;
        --p.unfrozen;
        if (p.touched != touch_mark) {
          p.touched = touch_mark;
          touched_ports.push_back(q);
        }
      }
    };
    auto flush = [&]() {  // re-key the ports whose share changed
      for (int32_t q : touched_ports) {
        if (port[q].unfrozen > 0) heap_push(q);
        else shares.Erase(q);
      }
      touched_ports.clear();
      ++touch_mark;
    };
    auto pop_cap = [&]() {
      std::pop_heap(by_cap.begin(), by_cap.end(), std::greater<>());
      by_cap.pop_back();
    };
    size_t left = comp_flows.size();
    while (left > 0) {
      const double share_next = shares.Empty() ? std::numeric_limits<double>::infinity() : shares.TopKey();
      // The smallest cap binds first when it is at or below the next share;
      // caps above it are not looked at (flows frozen by ports stay in the heap).
      int32_t capped = -1;
      while (!by_cap.empty() && by_cap.front().first <= share_next) {
        if (flows[by_cap.front().second].frozen != mark) {
          capped = by_cap.front().second;
          break;
        }
        pop_cap();
      }
      if (capped >= 0) {
        const double cap = by_cap.front().first;
        pop_cap();
        freeze(capped, cap);
        --left;
        flush();
        continue;
      }
      RESHARD_CHECK(!shares.Empty(), "water-filling lost a flow");
      const int32_t q = shares.Top();
      const double share = shares.TopKey();
      shares.Erase(q);
      // Every unfrozen flow on q stops at `share` (a tiny floor keeps rates positive).
      const double rate = std::max(share, port[q].peak * 1e-12);
      for (int32_t fid : port[q].flows) {
        if (flows[fid].frozen == mark) continue;
        freeze(fid, rate);
        --left;
      }
      flush();
    }
    // New finish times for flows whose rate changed.
    for (int32_t fid : comp_flows) {
      Flow& f = flows[fid];
      if (f.new_rate == f.rate && f.finish_ns >= 0) continue;
      f.rate = f.new_rate;
      const int64_t finish = t + CeilNs(f.remaining, f.rate);
      if (obs) obs->OnFlowRate(t, f.op, f.route, f.rate * kNsPerS);
      if (finish != f.finish_ns) {
        f.finish_ns = finish;
        ends.Set(fid, finish);
      }
    }
    for (int32_t q : comp_ports) {
      PortState& p = port[q];
      double sum = 0;
      for (int32_t fid : p.flows) sum += flows[fid].rate;
      if (sum != p.rate) {
        p.rate = sum;
        if (obs) obs->OnPortRate(t, q, sum * kNsPerS);
      }
    }
  }

  // ---- main loop -------------------------------------------------------------

  void Process(const Event& e) {
    switch (e.kind) {
      case Event::kIssue:
        ++events;
        Issue(e.id, e.t);
        break;
      case Event::kFlowStart:
        ++events;
        StartFlow(e.id, e.t);
        break;
    }
  }

  [[noreturn]] void Deadlock() const {
    // The lowest op that never started, and what it waits for.
    for (int32_t i = 0; i < nops; ++i) {
      const Op& op = plan.ops[i];
      if (op_issued[i]) continue;
      std::vector<std::string> waits;
      for (int32_t d : op.deps) {
        if (op_launch[d] != op_launch[i] && launch_end[op_launch[d]] < 0) waits.push_back(fmt::format("dependency op {}", d));
      }
      for (int32_t j = i - 1; j >= 0; --j) {
        const Op& prev = plan.ops[j];
        if (prev.gpu == op.gpu && prev.stream == op.stream) {
          if (op_launch[j] != op_launch[i] && launch_end[op_launch[j]] < 0) {
            waits.push_back(fmt::format("op {} before it on stream {}", j, op.stream));
          }
          break;
        }
      }
      for (int32_t k = launch_begin[op_launch[i]]; k < launch_begin[op_launch[i] + 1]; ++k) {
        if (launch_ops[k] != i && waits.empty()) waits.push_back(fmt::format("op {} of its group {}", launch_ops[k], op.group));
      }
      Bad(i, fmt::format("the plan deadlocks: {} on gpu {} stream {} never starts; it waits for {}", OpKindName(op.kind),
                         op.gpu, op.stream, waits.empty() ? std::string("nothing?") : fmt::format("{}", fmt::join(waits, ", "))));
    }
    for (int32_t i = 0; i < nops; ++i) {
      const Op& op = plan.ops[i];
      if (op_end[i] < 0 && (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)) {
        Bad(i, fmt::format("the plan deadlocks: {} on gpu {} waits for its match op {} on gpu {}, which never starts",
                           OpKindName(op.kind), op.gpu, op.match, op.peer));
      }
    }
    RESHARD_CHECK(false, "simulation stopped with unfinished launches but no waiting op");
  }

  Prediction Run() {
    gpus = plan.cluster.Gpus();
    nodes = plan.cluster.nodes;
    nops = static_cast<int32_t>(plan.ops.size());
    CheckOps();
    BuildLaunches();
    SetupPorts();
    SetupMemory();
    op_start.assign(nops, -1);
    op_end.assign(nops, -1);
    op_issued.assign(nops, 0);
    flows.reserve(nops);
    ends.Resize(nops);
    shares.Resize(port.size());

    if (obs) {
      obs->OnBegin(plan, ports);
      for (int32_t g = 0; g < gpus; ++g) obs->OnMemory(0, g, mem[g]);
    }
    const int32_t nl = static_cast<int32_t>(launch_pending.size());
    for (int32_t l = 0; l < nl; ++l) {
      if (launch_pending[l] == 0) Push(0, Event::kIssue, l);
    }
    // Each instant: flow ends (by flow id), then queued events (by sequence),
    // until none is left at this instant; then rates are re-shared once.
    while (!queue.empty() || !ends.Empty()) {
      const int64_t t = std::min(queue.empty() ? std::numeric_limits<int64_t>::max() : queue.top().t,
                                 ends.Empty() ? std::numeric_limits<int64_t>::max() : ends.TopKey());
      while (true) {
        if (!ends.Empty() && ends.TopKey() == t) {
          ++events;
          FinishFlow(ends.Top(), t);
        } else if (!queue.empty() && queue.top().t == t) {
          const Event e = queue.top();
          queue.pop();
          Process(e);
        } else {
          break;
        }
      }
      if (!dirty.empty()) Recompute(t);
    }
    if (launches_ended != nl) Deadlock();
    return Collect();
  }

  Prediction Collect() {
    Prediction pr;
    int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
    for (int32_t i = 0; i < nops; ++i) {
      first = std::min(first, op_start[i]);
      last = std::max(last, op_end[i]);
    }
    if (nops == 0) first = 0;
    pr.time_ns = last - first;
    pr.time_s = static_cast<double>(pr.time_ns) / kNsPerS;
    pr.peak_bytes = peak;
    pr.peak_host_bytes = host_peak;
    pr.bytes_moved = CountBytesMoved(plan);  // the planner's and executor's definition
    for (int32_t q = 0; q < ports.NumPorts(); ++q) {
      const PortState& p = port[q];
      if (p.bytes == 0) continue;
      PortUse u;
      u.port = q;
      u.name = ports.Name(q);
      u.link_class = ports.Class(q);
      u.capacity_bytes_per_s = ports.BytesPerS(q);
      u.bytes = p.bytes;
      u.busy_ns = p.busy_ns;
      if (pr.time_ns > 0) {
        u.busy_fraction = static_cast<double>(p.busy_ns) / static_cast<double>(pr.time_ns);
        u.average_bytes_per_s = static_cast<double>(p.bytes) / pr.time_s;
        u.utilisation = u.capacity_bytes_per_s > 0 ? u.average_bytes_per_s / u.capacity_bytes_per_s : 0;
      }
      pr.ports.push_back(std::move(u));
    }
    for (int k = 0; k < kKinds; ++k) {
      const Activity& a = kind_use[k];
      if (a.count == 0) continue;
      pr.by_kind.push_back(PhaseUse{std::string(OpKindName(static_cast<OpKind>(k))), a.count, a.bytes, a.active_ns, a.sum_ns});
    }
    for (int c = 0; c < kClasses; ++c) {
      const Activity& a = class_use[c];
      if (a.count == 0) continue;
      pr.by_class.push_back(
          PhaseUse{std::string(LinkClassName(static_cast<LinkClass>(c))), a.count, a.bytes, a.active_ns, a.sum_ns});
    }
    pr.events = events;
    pr.rate_updates = rate_updates;
    const PortBound lb = LowerBoundOfLoads(ports, PortBytes(ports, plan));
    pr.lower_bound_s = lb.time_s;
    pr.lower_bound_port = lb.port_name;
    pr.plan_efficiency = PlanEfficiency(lb.time_s, pr.time_s);
    if (opt.record_op_times) {
      pr.op_start_ns = op_start;
      pr.op_end_ns = op_end;
    }
    if (obs) obs->OnEnd(last);
    return pr;
  }
};

Prediction Simulator::Run() const {
  State state(plan_, options_);
  return state.Run();
}

Prediction Simulate(const Plan& plan, const SimOptions& options) {
  return Simulator(plan, options).Run();
}

void to_json(nlohmann::json& j, const PortUse& u) {
  j = nlohmann::json{{"port", u.name},
                     {"class", LinkClassName(u.link_class)},
                     {"capacity_bytes_per_s", u.capacity_bytes_per_s},
                     {"bytes", u.bytes},
                     {"busy_s", static_cast<double>(u.busy_ns) / kNsPerS},
                     {"busy_fraction", u.busy_fraction},
                     {"average_bytes_per_s", u.average_bytes_per_s},
                     {"utilisation", u.utilisation}};
}

void to_json(nlohmann::json& j, const PhaseUse& u) {
  j = nlohmann::json{{"name", u.name},
                     {"count", u.count},
                     {"bytes", u.bytes},
                     {"active_s", static_cast<double>(u.active_ns) / kNsPerS},
                     {"sum_s", static_cast<double>(u.sum_ns) / kNsPerS}};
}

void to_json(nlohmann::json& j, const Prediction& p) {
  j = nlohmann::json{
      {"time_s", p.time_s},
      {"time_ns", p.time_ns},
      {"peak_bytes", p.peak_bytes},
      {"peak_host_bytes", p.peak_host_bytes},
      {"bytes_moved", p.bytes_moved},
      {"lower_bound_s", p.lower_bound_s},
      {"lower_bound_port", p.lower_bound_port},
      {"plan_efficiency", p.plan_efficiency},
      {"events", p.events},
      {"links", p.ports},
      {"phases", {{"by_kind", p.by_kind}, {"by_class", p.by_class}}},
  };
}

}  // namespace reshard
