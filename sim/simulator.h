// The simulator: predicts a Plan's refit time, per-GPU peak memory and link
// use, by discrete events on an integer-nanosecond clock.
//
// Model (DESIGN.md "Plan semantics", sim/ports.h for the ports,
// sim/max_min.h for the sharing):
//  * Launches. The ops of one group on one GPU form one launch (one NCCL
//    kernel); an op without a group is a launch of its own, except that an
//    ungrouped send/recv pair on one GPU is one launch (as Verify contracts
//    matched pairs; NCCL needs self send/recv in one group). A launch is issued
//    when every op in it is ready: all deps finished and, on each stream, the
//    op before it finished (deps and stream predecessors inside the launch do
//    not count). Its ops "finish" (for deps and stream order) when the launch
//    ends, i.e. when all its ops on that GPU have ended.
//  * Ops. A send and its matching recv rendezvous: when both are issued, both
//    pay the link class's latency_ns at once, then one flow carries the bytes.
//    Transfers of one ordered GPU pair run one at a time, in rendezvous order
//    (NCCL works through a connection's ops in order, also inside a group), so
//    many small ops to one peer pay latency and small-op efficiency each.
//    kCopy / kOffload / kReload pay latency_ns, then flow over the device-copy
//    port / PCIe d2h / PCIe h2d. kAlloc / kFree take no time. A copy kernel
//    also runs no faster than the cluster's copy_kernel rate for its pairs'
//    run lengths at its sm_share (each pair at its rate, times summed).
//    A network transfer waits until the NCCL proxies of both its NICs have
//    posted it, each in its own NIC's order (LinkProfile::op_gap_ns between
//    posts on one NIC; a side does not wait for the other to post).
//  * Host issue (sim/host_issue.h, SimOptions::issue). A launch is issued no
//    earlier than its host thread queued its ops, by the executor's per-call
//    costs (Cluster::host) or a Python stack's (Cluster::host_python), one
//    thread per GPU or one for all; a cold refit adds pinning, mapping and
//    NCCL connections on the host threads. time_ns counts from t = 0, when the
//    host starts issuing.
//  * Bandwidth. Concurrent flows share port capacity max-min fairly
//    (progressive filling), each also capped at peak × Efficiency(op bytes) of
//    its class. Rates are recomputed whenever flows start or end, after all
//    events of the same nanosecond are processed, and only over the connected
//    components (ports linked by flows, and the two directions of a duplex pair)
//    touched; in a component of thousands of flows, only over the part a
//    change can reach through saturated ports (the same rates, bit for bit;
//    flow_network.cc). A flow's bytes are settled when its rate changes; its
//    end is rounded up to the next nanosecond.
//  * Memory. Per GPU: CUDA context + preexisting device buffers at t = 0, then
//    kAlloc / kFree at their issue time, plus nccl_bytes_per_peer the first
//    time a GPU's send/recv is issued with a new peer (connections persist).
//    Host buffers are counted per node, apart.
//  * Ties. At one instant, flow ends run first (by flow id), then issues and
//    flow starts in the order they were scheduled (a sequence number; launches
//    ready at t = 0 by first op id), so results are deterministic; alloc/free
//    at one instant count in that order for the peak.
//
// Complexity: O(E log E) for the event queue (E = events, O(ops)), plus, per
// instant at which flows start or end, O((F_c + P_c) log(F_c + P_c)) to
// water-fill the affected components (F_c flows over P_c ports) and O(log F)
// per flow whose end moves (an indexed heap of flow ends, no stale entries).
// Plans in rounds (a GPU sends and receives one segment at a time) keep
// components small: ~4 M events/s. The worst case is one huge component whose
// flows end at distinct instants (a whole refit as one NCCL group across many
// GPUs) and every port saturates, so that a change reaches every flow:
// O(F^2 log F); 4,032 flows take ~0.4 s (bench/sim_bench.cc). Where only the
// receiving NICs saturate, a change costs the flows of one NIC.
//
// No global state: a Simulator owns its queue and state; several can run at
// once on different threads (the plan is only read).
//
// Source files: simulator.cc (event loop), launches.cc (how ops start and
// end), flow_network.cc + max_min.cc (bandwidth), memory.cc, prediction.cc
// (the result and its JSON), critical_path.cc; sim/state.h holds the run's state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "plan/plan.h"
#include "sim/ports.h"

namespace reshard {

class SimObserver;  // sim/trace.h

// Which host thread issues the plan's ops (sim/host_issue.h): none (the GPUs
// see every op at once), reshard's executor (Cluster::host), or a
// Megatron-style Python stack (Cluster::host_python).
enum class IssueModel : uint8_t { kNone, kExecutor, kPython };
std::string_view IssueModelName(IssueModel m);  // "none", "executor", "python"

struct SimOptions {
  // Not owned; called synchronously; must not change results. With one, every
  // component is re-shared at every change (it sees every rate): the share
  // grid below is not used, so a trace has the exact rule's times.
  SimObserver* observer = nullptr;
  bool record_op_times = true;      // fill Prediction::op_start_ns / op_end_ns
  IssueModel issue = IssueModel::kExecutor;
  bool one_process = false;         // one host thread issues every GPU's ops; false: a process per GPU
  bool cold = false;                // the first refit of a job: pinning, mapping, NCCL connections
  // Compute the routing-independent lower bound (sim/topology_bound.h); callers
  // that only compare candidates' times leave it out.
  bool lower_bound = true;
  // A component of >= 512 flows in which a change reaches most flows through
  // saturated ports (e.g. every NIC saturated by one NCCL group across the
  // cluster) is re-shared on this grid instead of at every change. Until the
  // grid point a flow that starts there runs on what its ports have free
  // (what an ended flow left), or waits where a port is saturated; bandwidth
  // a flow frees is handed out at most this much later. 0: re-share at every
  // change. The grid is the longer of this and share_grid_share of the plan's
  // routing bound (its busiest port at peak), at most share_grid_max_ns: a
  // wait costs at most one grid, so its error stays a like share of a long
  // refit (docs/cost-model.md: deepseek-v3 at 64 us +0.02 % from the exact
  // rule at 0.45 of the CPU time of 16 us).
  int64_t share_grid_ns = 16000;
  double share_grid_share = 1.0 / 2048;
  int64_t share_grid_max_ns = 64000;
  // Another component (not the big one) of at least share_grid_flows flows,
  // reached by a change between grid points, waits for the grid too where its
  // flows have on average at least share_grid_lives grids left (a wait is a
  // small share of their life; shorter flows would be reordered): llama3-70b
  // colocated on 8192 GPUs simulates in 4 CPU-s instead of 12, its prediction
  // within 0.001 % (docs/cost-model.md). 0: never.
  int32_t share_grid_flows = 256;
  double share_grid_lives = 64;
};

// The share grid of a plan whose routing bound is `routing_bound_s`: 0 when
// share_grid_ns is 0 (exact), else share_grid_share of the bound rounded
// down to whole microseconds, within [share_grid_ns, share_grid_max_ns].
int64_t ShareGridNs(const SimOptions& o, double routing_bound_s);

struct PortUse {
  int32_t port = -1;
  std::string name;                 // "gpu0.nvlink_out"
  LinkClass link_class = LinkClass::kLocal;
  double capacity_bytes_per_s = 0;  // peak
  int64_t bytes = 0;                // carried
  int64_t busy_ns = 0;              // time with at least one flow on it
  double busy_fraction = 0;         // busy_ns / time_ns
  double average_bytes_per_s = 0;   // bytes / time_s (over the whole refit)
  double utilisation = 0;           // average_bytes_per_s / capacity
};

// One row of the breakdown: ops of one kind, or flows of one link class.
struct PhaseUse {
  std::string name;                 // "send", "copy", ... or "nvlink", "network", ...
  int64_t count = 0;                // ops (or flows)
  int64_t bytes = 0;
  int64_t active_ns = 0;            // wall time with at least one of them running
  int64_t sum_ns = 0;               // summed durations (issue -> end; flows: rendezvous -> end)
};

// Where the predicted time went: the chain of waits that set time_ns, walked
// back from the op that ended last (sim/critical_path.cc). Each stretch of the
// chain is charged to the one rule that set it, so the terms sum to time_ns:
// an op's flow from its creation to its end (latency, NIC posts, bandwidth
// under sharing) to its kind's term; a launch's event brackets to event_ns;
// then the chain continues into what made the op start last: the transfer
// before it on its GPU pair, the prerequisite launch that ended last, or,
// when the host issued the launch after it was ready on the GPU, the host
// thread from t = 0 (its warm-up part to warm_up_ns, the rest to
// host_issue_ns). At a tie the GPU side is followed. A term's share is how
// much of the refit waited on it, not how much removing it would save:
// another chain may be nearly as long.
struct CriticalPath {
  int64_t wire_ns = 0;        // send/recv over NVLink, network or PCIe (latency, NIC posts, bandwidth)
  int64_t copy_ns = 0;        // copy kernels and device copies (send to self)
  int64_t offload_ns = 0;     // offload / reload between GPU and host memory
  int64_t host_issue_ns = 0;  // a host thread issuing ops (its warm-up excluded)
  int64_t event_ns = 0;       // the executor's event brackets on the stream
  int64_t warm_up_ns = 0;     // cold: pinning, mapping and NCCL connections on the host thread
  int64_t ops = 0;            // ops whose flows lie on the chain
  int64_t TotalNs() const { return wire_ns + copy_ns + offload_ns + host_issue_ns + event_ns + warm_up_ns; }
};

struct Prediction {
  int64_t time_ns = 0;              // from the call (t = 0: the host starts issuing) to the last op end
  double time_s = 0;
  int64_t gpu_span_ns = 0;          // first op start to last op end
  // The host side (sim/host_issue.h): which model, and its busiest thread.
  std::string issue_model = "none";
  bool one_process = false;
  bool cold = false;
  int64_t host_issue_ns = 0;        // when the busiest host thread issued its last op
  int64_t cold_setup_ns = 0;        // cold: pinning + mapping before the first op (busiest process)
  int64_t connect_ns = 0;           // cold: NCCL connections on the busiest process's host thread
  CriticalPath critical_path;       // time_ns by term; TotalNs() == time_ns
  std::vector<int64_t> peak_bytes;  // per GPU, device memory, everything counted
  std::vector<MemoryParts> peak_parts;  // per GPU, at its (first) peak; Total() == peak_bytes
  std::vector<int64_t> peak_host_bytes;  // per node, plan host buffers
  BytesMoved bytes_moved;           // by link class (a send/recv pair counts once)
  std::vector<PortUse> ports;       // ports that carried bytes, by port id
  std::vector<PhaseUse> by_kind;    // by op kind (kinds present)
  std::vector<PhaseUse> by_class;   // by link class of flows (classes present)
  int64_t events = 0;               // events processed
  int64_t rate_updates = 0;         // water-filling passes (one per affected component)
  // No plan of these contents on this cluster is faster (sim/topology_bound.h);
  // 0 when SimOptions::lower_bound is off. The port(s) of its binding cut.
  double lower_bound_s = 0;
  std::string lower_bound_port;
  double plan_efficiency = 0;       // lower_bound_s / time_s (1 for an empty plan)
  // This plan's own routing bound: max over ports of its bytes / bandwidth
  // (sim/ports.h), and that port. >= lower_bound_s.
  double routing_bound_s = 0;
  std::string routing_bound_port;
  std::vector<int64_t> op_start_ns; // per op: when the GPU could start it (with record_op_times)
  std::vector<int64_t> op_end_ns;   // per op: when its own work ended
};

class Simulator {
 public:
  // Keeps a reference to `plan`: it must outlive the simulator.
  explicit Simulator(const Plan& plan, SimOptions options = {}) : plan_(plan), options_(options) {}

  // Simulates the plan from scratch (each call is independent). Throws
  // InputError when the plan is malformed (bad ids, unmatched sends,
  // zero-bandwidth links in use) or deadlocks (names an op that never starts).
  Prediction Run() const;
  // As Run, but nullopt as soon as the plan is sure to take longer than
  // `limit_s` (a candidate that cannot beat the plan in hand is not run to its
  // end): the clock passes it, or the clock plus some port's bytes still to
  // cross it (flows not yet started, and what flows in flight have left), at
  // that port's fastest rate, does. A prediction it
  // returns ends at most 1 ns after limit_s (the whole ns above it). Whatever
  // Run would throw after it gave up is not found.
  std::optional<Prediction> RunWithin(double limit_s) const;

 private:
  struct State;  // the event queue, flows, ports and memory of one run
  const Plan& plan_;
  SimOptions options_;
};

Prediction Simulate(const Plan& plan, const SimOptions& options = {});
// Simulator(plan, options).RunWithin(limit_s).
std::optional<Prediction> SimulateWithin(const Plan& plan, double limit_s, const SimOptions& options = {});

// DESIGN's result fields plus ports and phases. Plan-level fields
// (segment_bytes, offload_fraction) are the caller's to add.
void to_json(nlohmann::json& j, const Prediction& p);
void to_json(nlohmann::json& j, const PortUse& u);
void to_json(nlohmann::json& j, const PhaseUse& u);
void to_json(nlohmann::json& j, const MemoryParts& m);
void to_json(nlohmann::json& j, const CriticalPath& c);

}  // namespace reshard
