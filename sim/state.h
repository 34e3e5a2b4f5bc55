// The state of one simulation run, shared by the simulator's source files
// (internal to sim/; callers use sim/simulator.h). Its parts:
//   * OpInfo, the packed per-op facts the event loop reads;
//   * Launches, which ops are issued together and what each launch waits for
//     (built in launches.cc);
//   * EventQueue, issues and flow starts by (time, sequence);
//   * FlowNetwork, flows on ports with max-min fair rates (flow_network.cc,
//     big_component.cc, local_share.cc);
//   * MemoryTimeline, device and host bytes in use and their peaks (memory.cc);
//   * Channel, the one-at-a-time queue of transfers of an ordered GPU pair;
//   * Activity, the counters behind Prediction::by_kind / by_class.
// Simulator::State ties them together: the event loop (simulator.cc), how ops
// start and end (launches.cc) and what it reports (prediction.cc).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "plan/plan.h"
#include "sim/host_issue.h"
#include "sim/indexed_heap.h"
#include "sim/max_min.h"
#include "sim/ports.h"
#include "sim/simulator.h"

namespace reshard {

class SimObserver;

namespace sim_internal {

inline constexpr int kOpKinds = 8;      // OpKind values
inline constexpr int kLinkClasses = 4;  // LinkClass values
inline constexpr double kNsPerS = 1e9;

// What the event loop reads of an op, packed (a Plan Op is ~200 bytes with
// its vectors and label; touching it per event costs cache misses).
struct OpInfo {
  OpKind kind = OpKind::kAlloc;
  int32_t gpu = -1, peer = -1, match = -1, buffer = -1;
  int32_t group = -1;
  int32_t channel = -1;  // a send: its ordered GPU pair's Channel
  int64_t bytes = 0;
  double copy_cap = 0;  // kCopy / kQuantize: bytes/ns its kernel reaches as measured (0: no such cap)
};

// A copy kernel's ceiling over its pairs (bytes/ns): each pair at the rate of
// its run length and the op's share of the copy grid, so the op takes the sum
// of its pairs' times. 0 when the profile has no rates.
double CopyKernelCap(const Op& op, const CopyKernelProfile& profile);
// The bytes a quantize op costs on the device-copy port (its share of HBM).
// Like the copy kernel it is bound by HBM, and it
// reads its bf16 input and writes fp8 values and scales once each, where a
// copy of B bytes reads and writes B each: so it takes as long as a copy of
// half its traffic, (input + output + scales) / 2.
int64_t QuantizeCopyBytes(const Op& op);
// The bf16 bytes a quantize tile's launch works as: its input, scaled up
// where the kernel leaves threads idle. With 128-column blocks a CTA
// quantizes one whole block per iteration (executor/nccl/quantize_kernels.cu:
// QuantizeKernelBlock128, or QuantizeKernelWide<1> where a tile's edge cuts
// blocks), so a cut block costs as a whole one: a 200 x 200 tile of 128 x 128
// blocks costs as 256 x 256.
int64_t QuantizeLaunchBytes(const Plan& plan, const QuantizeTile& t);
// The kernel a tile's blocks run on, as `calibrate` measures it: one-row
// blocks (MXFP8) kMx, a block that covers the whole matrix kTensor, else
// kBlock.
QuantScheme QuantizeKernelScheme(const Plan& plan, const QuantizeTile& t);
// A quantize op's ceiling (bytes/ns of QuantizeCopyBytes) from the measured
// quantize kernel (plan.cluster.quantize_kernel): its tiles are launched one
// after another, each taking the time measured for a launch of its
// QuantizeLaunchBytes on its kernel (QuantizeKernelScheme; the 128 x 128
// rates where that kernel was not measured). 0 when the profile has no rates (the op then runs at
// the device-copy link's rate).
double QuantizeKernelCap(const Plan& plan, const Op& op);

// Launches: one group on one GPU, or one ungrouped op (an ungrouped send/recv
// to self is one launch with both ops), numbered by their first op. Lists are
// CSR: launch l's ops are ops[begin[l] .. begin[l+1]), in op order.
struct Launches {
  std::vector<int32_t> of_op;                  // op -> its launch
  std::vector<int32_t> begin, ops;
  std::vector<int32_t> pending;                // prerequisites (ops outside it) not yet finished
  std::vector<int32_t> running;                // ops of an issued launch not yet ended
  std::vector<int64_t> end_ns;                 // -1 until the launch ended
  std::vector<int32_t> waiter_begin, waiters;  // op -> launches waiting for it (CSR)
  std::vector<int32_t> ready_by;               // the launch whose end made it ready (-1: ready at t = 0)
  std::vector<int32_t> last_op;                // its op that ended last (-1 until it ended)
  int32_t ended = 0;

  int32_t Count() const { return static_cast<int32_t>(pending.size()); }
};

// Builds the launches of `plan` and their prerequisites (deps and stream
// predecessors outside the launch). O(ops + deps + groups + GPUs).
Launches BuildLaunches(const Plan& plan, const std::vector<OpInfo>& info, int32_t gpus);

// Issues and flow starts; flow ends live in FlowNetwork::ends (their times change).
struct Event {
  enum Kind : uint8_t { kIssue, kFlowStart };
  int64_t t;
  uint64_t seq;
  Kind kind;
  int32_t id;  // launch or flow
};

// Events by (time, sequence): at one instant, in the order they were pushed.
class EventQueue {
 public:
  void Push(int64_t t, Event::Kind k, int32_t id) { queue_.push(Event{t, seq_++, k, id}); }
  bool Empty() const { return queue_.empty(); }
  const Event& Top() const { return queue_.top(); }
  void Pop() { queue_.pop(); }

 private:
  struct Later {
    bool operator()(const Event& a, const Event& b) const { return a.t != b.t ? a.t > b.t : a.seq > b.seq; }
  };
  std::priority_queue<Event, std::vector<Event>, Later> queue_;
  uint64_t seq_ = 0;
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

// Nanoseconds to move `bytes` at `bytes_per_ns`, rounded up. The tolerance
// (1e-12 relative + 1e-6 ns) absorbs floating noise such as 3e6 / (1/3.0),
// so exact hand-derived times stay exact.
int64_t CeilNs(double bytes, double bytes_per_ns);

struct Flow {
  int32_t op = -1, op2 = -1;  // send (or copy/offload/reload), and recv
  Route route;
  int64_t bytes = 0;
  int64_t created_ns = 0;     // rendezvous (both ops issued), or the end of `after`
  int32_t after = -1;         // the transfer before it on its channel, whose end created it (-1: none)
  int64_t run_before = 0;     // bytes of earlier ops of its group run on its channel (Channel)
  double cap = 0;             // bytes/ns ceiling: peak × efficiency
  int32_t slot = -1;          // its index among FlowNetwork's active flows while on its ports
  bool active = false, done = false;
};

// An active flow on a port's list, in 8 bytes (walking a port's flows is the
// water-filling's inner loop): its FlowNetwork slot, where the port sits in
// its route, and the route's other port when there is exactly one (a
// transfer), kNone when there is none, kMany when there are more (read them
// from the slot's route then). A port a route repeats is not its own other.
struct PortFlow {
  static constexpr int32_t kNone = -1, kMany = -2;
  uint32_t word = 0;  // slot | index << 30
  int32_t other = kNone;

  int32_t Slot() const { return static_cast<int32_t>(word & 0x3fffffffu); }
  int32_t Index() const { return static_cast<int32_t>(word >> 30); }
  void SetSlot(int32_t slot) { word = (word & 0xc0000000u) | static_cast<uint32_t>(slot); }
};

struct PortState {
  std::vector<PortFlow> flows;  // active flows on it
  double peak = 0, duplex = 0; // bytes/ns
  int32_t reverse = -1;
  bool coupled = false;
  double rate = 0;             // sum of its flows' rates (bytes/ns), kept for the observer
  int64_t bytes = 0, busy_ns = 0, busy_since = 0;
  uint32_t stamp = 0;          // component mark
};

// Active flows by (finish time, flow id): the next flow end.
class FlowEnds {
 public:
  bool Empty() const { return heap_.Empty(); }
  int64_t TopKey() const { return heap_.TopKey().first; }
  int32_t Top() const { return heap_.TopKey().second; }  // the flow id

 private:
  friend class FlowNetwork;
  IndexedHeap<std::pair<int64_t, int32_t>> heap_;  // by slot; keys are distinct (flow ids)
};

// Flows in their bandwidth phase on the ports, with max-min fair rates
// (sim/max_min.h) re-shared per connected component of touched ports, and
// each active flow's end time in `ends`.
//
// Layout: `flows` holds every flow ever added (by id, what launches read);
// the state of the flows on their ports lives apart in dense arrays indexed
// by slot 0 .. active-1 (a stopped flow's slot takes the last one), so that
// re-sharing a component of F flows scans F slots, not F scattered flows.
class FlowNetwork {
 public:
  // share_grid_ns: 0, or the grid on which a big component whose change
  // reaches most of its flows is re-shared (SimOptions::share_grid_ns).
  // grid_flows / grid_lives: a component of at least grid_flows flows whose
  // flows have on average at least grid_lives grids left is re-shared on the
  // grid too (SimOptions::share_grid_flows, share_grid_lives); 0: never.
  void Init(const PortModel& ports, SimObserver* obs, int32_t max_flows, int64_t share_grid_ns = 0,
            int32_t grid_flows = 0, double grid_lives = 0);

  int32_t Add(const Flow& f);             // a new flow (not yet on its ports); returns its id
  void Start(int32_t id, int64_t t);      // puts a flow with bytes on its ports
  void Stop(int32_t id, int64_t t);       // takes it off (if on) and marks it done
  void SetCap(int32_t id, double cap);    // a new ceiling, re-shared at the next Recompute
  bool Dirty() const { return !dirty_.empty(); }
  // When a deferred re-share (of the big component, or of components waiting
  // for the grid) is due (-1: none); the event loop calls Recompute then.
  int64_t DueNs() const {
    if (waiting_due_ns_ < 0) return due_ns_;
    return due_ns_ < 0 ? waiting_due_ns_ : std::min(due_ns_, waiting_due_ns_);
  }
  // Re-shares bandwidth in every component that holds a port touched since
  // the last call; settles bytes moved and moves the flows' ends.
  void Recompute(int64_t t);
  // An active flow's state (tests): rate (bytes/ns), bytes left when last
  // settled, end time (-1: none yet). 0 / 0 / -1 for a flow not on its ports.
  double Rate(int32_t id) const;
  double Remaining(int32_t id) const;
  int64_t FinishNs(int32_t id) const;
  // Adds each active flow's bytes left at t (at its rate since it was last
  // settled) to each port of its route (once per port). O(active flows).
  void AddBytesLeft(int64_t t, std::vector<double>& per_port) const;

  std::vector<Flow> flows;
  std::vector<PortState> ports;
  FlowEnds ends;
  int64_t rate_updates = 0;   // sharing passes (one per component, or per part of the big one)
  int64_t local_updates = 0;  // those over a part of the big component (ShareLocal)

 private:
  // The component of port `start` (not yet marked) into comp_ports_ /
  // comp_slots_; with an observer, in BFS discovery order (the order of its
  // calls).
  void Discover(int32_t start);
  // The big component kept between calls (big_component.cc says when).
  static constexpr int32_t kBigFlows = 512;  // flows a component needs to be kept
  bool Alone(int32_t port) const;             // no flows on it nor on its coupled reverse
  void JoinBig(const Route& r);               // before a flow on `r` starts
  void LeaveBig(const Route& r);              // after a flow on `r` stopped
  void CheckBig();
  bool Connected(int32_t u, int32_t v);
  void KeepBig();
  void DropBig();
  void UseBig();
  // Max-min rates of the component into new_rate_, then settles its flows
  // and moves the ends of those whose rate changed.
  void Share(int64_t t);
  // Re-shares only the part of the big component that the changes since the
  // last call can reach (flow_network.cc "Local re-sharing"); false when that
  // part is most of the component (the caller re-shares all of it).
  bool ShareLocal(int64_t t);
  bool Region();                          // the part into comp_ports_ / comp_slots_; false: too big
  int32_t CheckOutside();                 // an outside port the new rates would load near capacity, or -1
  void SetRate(int32_t s, int64_t t);     // settles slot s at its old rate, takes new_rate_, moves its end
  void RunOnFreeBandwidth(int64_t t);     // flows touched in a component while its re-share waits
  bool WaitsForGrid(int64_t t) const;     // the component found is re-shared at the next grid point
  int64_t NextGridNs(int64_t t) const { return (t / share_grid_ns_ + 1) * share_grid_ns_; }
  double CapacityOf(int32_t q) const {
    const PortState& p = ports[q];
    return p.coupled && !ports[p.reverse].flows.empty() ? p.duplex : p.peak;
  }
  bool Saturated(int32_t q) const { return port_load_[q] >= CapacityOf(q) * (1 - kSaturatedMargin); }
  static constexpr double kSaturatedMargin = 1e-6;
  void WaterFill();
  void Freeze(int32_t s, double rate);
  void FreezePort(int32_t q, double rate);
  void LowerNear();
  double ShareOf(int32_t q) const;
  void MoveSlot(int32_t from, int32_t to);
  // Calls f(port) for each other port of the route of `e`, on port `q`'s list.
  template <typename F>
  void ForOthers(const PortFlow& e, int32_t q, F&& f) const {
    if (e.other >= 0) {
      f(e.other);
    } else if (e.other == PortFlow::kMany) {
      for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[e.Slot()][k] >= 0; ++k)
        if (slot_ports_[e.Slot()][k] != q) f(slot_ports_[e.Slot()][k]);
    }
  }

  SimObserver* obs_ = nullptr;
  std::vector<int32_t> dirty_;
  uint32_t stamp_ = 0, slot_mark_ = 0;  // port marks per Recompute; slot marks per BFS (routes repeating a port)
  // Per port: the smallest cap of its flows (+inf without flows), kept exact
  // as flows start, stop and are re-capped (a stop that may take the smallest
  // away, or a re-cap, reads the port's list again: O(its flows), as the
  // re-share that follows); a component's smallest is the share below which
  // no cap can bind (WaterFill).
  std::vector<double> port_min_cap_;
  void RefreshMinCap(int32_t q);  // recomputed from the port's flows
  bool repeated_ports_ = false;  // some route lists a port twice

  // Active flows by slot.
  int32_t active_ = 0;
  std::vector<int32_t> slot_flow_;
  std::vector<std::array<int32_t, kMaxFlowPorts>> slot_ports_, slot_pos_;  // route ports (-1 past the last); index in each port's list
  std::vector<int32_t> slot_first_port_;
  std::vector<uint8_t> frozen_;
  std::vector<uint32_t> slot_stamp_;
  std::vector<double> remaining_, rate_, new_rate_, cap_;  // bytes, bytes/ns
  std::vector<int64_t> last_ns_, finish_ns_;               // when `remaining` was settled; -1: no end yet

  // The component and the water-filling state, by port id.
  std::vector<int32_t> comp_ports_, comp_slots_, bfs_;
  int32_t comp_flows_ = 0;          // flows in the component (comp_slots_ may be left empty)
  std::vector<int32_t> first_count_;  // per port: active flows whose route starts there
  std::vector<uint32_t> port_comp_;   // per port: comp_mark_ when in the component being shared
  uint32_t comp_mark_ = 0;
  bool big_valid_ = false, big_stale_ = false;  // stale: big_ports_ lists ports that left
  std::vector<int32_t> big_ports_;
  std::vector<uint8_t> in_big_;
  std::vector<int32_t> big_checks_;  // groups [n, port 1 .. port n] that must stay linked
  std::vector<uint32_t> search_a_, search_b_;
  uint32_t search_mark_ = 0;
  std::vector<int32_t> search_qa_, search_qb_;
  std::vector<double> port_capacity_, port_left_;
  std::vector<double> port_key_;  // the port's key in shares_ (at most its share)
  std::vector<int32_t> port_unfrozen_;
  std::vector<int32_t> near_;  // ports whose share the last freeze may have lowered: the first near_count_
  int32_t near_count_ = 0;
  std::vector<int32_t> changed_;  // slots whose rate changed, listed by Share
  std::vector<std::pair<int32_t, double>> initial_shares_;
  IndexedHeap<double> shares_;  // ports by (fair share, id); a key may lag below the share
  std::vector<MaxMinScratch::CapEntry> by_cap_;
  int32_t left_ = 0;

  // Local re-sharing: per port the summed rate of its flows (kept as rates
  // change), the changes since the last Recompute, and the part re-shared.
  std::vector<double> port_load_;
  std::vector<int32_t> touched_flows_;  // flow ids started or re-capped
  std::vector<int32_t> forced_ports_;   // capacity changed, or lost a flow while saturated
  std::vector<int32_t> extra_ports_;    // outside ports the last attempt found binding
  std::vector<uint32_t> port_region_, port_outside_;  // region_mark_ when in the part / outside it
  uint32_t region_mark_ = 0;
  std::vector<int32_t> outside_ports_;
  std::vector<double> outside_old_, outside_new_;  // per outside port: the part's flows' old / new rates on it
  bool local_ = false;   // WaterFill on a part: outside ports must not bind
  int64_t share_grid_ns_ = 0;
  int64_t due_ns_ = -1;  // the big component's deferred re-share
  // Other components waiting for the grid (WaitsForGrid): their ports, found
  // and re-shared again at waiting_due_ns_.
  int32_t grid_flows_ = 0;
  double grid_lives_ = 0;
  std::vector<int32_t> waiting_ports_;
  std::vector<uint8_t> waiting_;  // per port
  int64_t waiting_due_ns_ = -1;
  int32_t binding_outside_ = -1;
};

// Device bytes per GPU and plan host bytes per node, with their peaks;
// NCCL's per-peer memory on a GPU's first send/recv with each peer.
class MemoryTimeline {
 public:
  // CUDA context + preexisting buffers at t = 0.
  void Init(const Plan& plan, SimObserver* obs);
  void Add(int32_t gpu, int part, int64_t bytes, int64_t t);
  void BufferChange(int32_t buffer, int64_t sign, int64_t t);  // alloc (+1) / free (-1)
  void ConnectPeer(int32_t gpu, int32_t peer, int32_t lane, int64_t t);  // lane: CommLane (own buffers)

  std::vector<int64_t> device, device_peak;  // per GPU
  std::vector<int64_t> host, host_peak;      // per node
  // Per GPU, device bytes by part: BufferRole values, then the CUDA context
  // and NCCL's per-peer buffers; `peak_parts` as they were at device_peak.
  static constexpr int kContextPart = 7, kNcclPart = 8, kParts = 9;
  using Parts = std::array<int64_t, kParts>;
  std::vector<Parts> parts, peak_parts;
  MemoryParts PeakParts(int32_t gpu) const;

 private:
  const Plan* plan_ = nullptr;
  SimObserver* obs_ = nullptr;
  int32_t gpus_ = 0;
  int32_t lanes_ = 1;  // NCCL communicators per GPU (CommLane)
  // Connected (gpu, peer) pairs: a bitset of gpus^2 bits up to 16384 GPUs
  // (32 MiB), a hash set beyond.
  std::vector<uint64_t> peer_bits_;
  std::unordered_set<int64_t> peer_set_;
};

// Per ordered GPU pair that some send uses: transfers waiting for the one in flight.
struct Channel {
  int32_t reverse = -1;          // the pair's other direction (-1: no send uses it)
  std::vector<int32_t> pending;  // send op ids, FIFO from `head`
  size_t head = 0;
  bool busy = false;
  int32_t flow = -1;             // the transfer in flight
  int32_t group = -1;            // NCCL group of the current run of back-to-back ops
  int64_t run_bytes = 0;         // bytes of that run so far, the transfer in flight included
};

}  // namespace sim_internal

struct Simulator::State {
  using OpInfo = sim_internal::OpInfo;
  using Flow = sim_internal::Flow;

  State(const Plan& p, SimOptions o) : plan(p), opt(o), ports(p.cluster), obs(o.observer) {}

  // The event loop (simulator.cc). Stops once the clock passes give_up_ns,
  // setting gave_up (its result is then empty).
  Prediction Run();
  int64_t give_up_ns = std::numeric_limits<int64_t>::max();
  bool gave_up = false;
  // Giving up before the clock gets there (RunWithin): per port, the bytes
  // of flows not yet started and those left of flows in flight, which cross
  // it after the clock at its fastest rate at most; once the clock plus the
  // busiest port's share of them passes give_up_ns the plan ends after it.
  // Checked every so many events.
  std::vector<int64_t> unstarted_bytes;  // per port; empty: not tracked
  std::vector<int32_t> unstarted_ports;  // the ports with any at the start
  std::vector<double> bytes_left;        // scratch of the check, per port
  int64_t next_bound_check = std::numeric_limits<int64_t>::max();
  void CountUnstartedBytes();
  bool UnstartedBytesEndAfter(int64_t t);
  Route OpRoute(int32_t op) const;  // the route of the flow op creates (num_ports 0: none)
  void CheckOps();
  void Process(const sim_internal::Event& e);
  [[noreturn]] void Deadlock() const;
  [[noreturn]] void Bad(int32_t op, const std::string& problem) const;

  // Ops and launches starting and ending (launches.cc).
  void Issue(int32_t launch, int64_t t);
  void Rendezvous(int32_t send, int64_t t);
  void NextOnChannel(int32_t send, int64_t t);
  void BuildChannels();
  void BothWays(int32_t channel);
  Route TransferRoute(int32_t send) const;
  double TransferCap(const Flow& f, bool both) const;
  int32_t NewFlow(int32_t op, int32_t op2, const Route& r, int64_t t, int64_t run_before = 0, int32_t after = -1);
  int64_t NetworkPost(int32_t op, int32_t op2, const Route& r, const LinkProfile& prof, int64_t t);
  void StartFlow(int32_t id, int64_t t);
  void FinishFlow(int32_t id, int64_t t);
  void EndOp(int32_t op, int64_t t);
  void EndLaunch(int32_t launch, int64_t t);

  // The result (prediction.cc) and its critical path (critical_path.cc).
  Prediction Collect() const;
  CriticalPath CriticalPathOf(int32_t last_op) const;

  const Plan& plan;
  SimOptions opt;
  PortModel ports;
  SimObserver* obs;
  int32_t gpus = 0, nops = 0;
  PortBound routing_bound;  // the plan's busiest port at peak (before the run: it sets the share grid)

  std::vector<OpInfo> info;
  std::vector<int64_t> nic_free_ns;     // per NIC: when its proxy can post the next network op
  std::vector<int64_t> launch_host_ns;  // per launch: when the host has issued all its ops (0 without a host model)
  std::vector<int64_t> launch_gpu_ns;   // per launch: stream time of its ops' event brackets (empty: none)
  // When launch l, ready on its GPU at t, can start: after its host issued
  // it, plus its event brackets.
  int64_t IssueAt(int32_t l, int64_t t) const {
    return std::max(t, launch_host_ns[l]) + (launch_gpu_ns.empty() ? 0 : launch_gpu_ns[l]);
  }
  HostIssue host;
  std::vector<int64_t> op_start_ns, op_end_ns;
  std::vector<uint8_t> op_issued;
  std::vector<int32_t> op_flow;  // per op: its flow (-1: none, e.g. alloc / free)
  sim_internal::Launches launches;
  sim_internal::EventQueue queue;
  sim_internal::FlowNetwork net;
  sim_internal::MemoryTimeline memory;
  std::vector<sim_internal::Channel> channels;  // by OpInfo::channel
  std::array<sim_internal::Activity, sim_internal::kOpKinds> kind_use{};
  std::array<sim_internal::Activity, sim_internal::kLinkClasses> class_use{};
  int64_t events = 0;
};

}  // namespace reshard
