// Flows on ports (sim/state.h FlowNetwork): putting flows on and off their
// ports, and re-sharing bandwidth where that changed.
//
// Recompute finds the connected components (ports linked by flows, and the
// two directions of a coupled duplex pair) of the ports touched since the last
// call, by BFS, and for each: gives each port its capacity (duplex rate when
// both directions carry flows, else peak), solves max-min fair rates, settles
// the bytes every flow moved at its old rate, and moves the end of every flow
// whose rate changed. O(F_c·k + P_c log P_c) per component of F_c flows of at
// most k ports over P_c ports, plus O(log F) per moved end.
//
// The water-filling is sim/max_min.h's, step for step (the same shares, the
// same subtractions in the same order, the same ties: its result does not
// depend on the order flows or ports are listed in), on the network's own
// arrays instead of a copied problem. What keeps it cheap when a component
// holds thousands of flows (a whole refit in one NCCL group, re-shared at
// every flow start and end):
//  * a port's key in the share heap may lag below its share (shares mostly
//    grow as flows freeze; a share is computed only when it may have dropped
//    or reaches the top): the top is re-keyed until its key is its share, and
//    then no port has a smaller one;
//  * the caps are put in a heap only once the smallest share reaches the
//    smallest cap of the component's flows (before that no cap can bind;
//    each port keeps the smallest cap of its flows);
//  * a port's flows are frozen without a branch per flow;
//  * the largest component is kept between calls instead of found again by
//    a BFS over its flows (big_component.cc), and re-shared only where a
//    change can reach it (local_share.cc);
//  * a flow's bytes are settled only when its rate changes;
//  * another component of many long flows (at least grid_flows flows with, on
//    average, at least grid_lives grids left) that a change reaches between
//    two grid points waits for the next one, as the big one does
//    (big_component.cc, "Other components on the grid").
#include <algorithm>
#include <cmath>
#include <limits>

#include "model/error.h"
#include "sim/state.h"
#include "sim/trace.h"

namespace reshard::sim_internal {

int64_t CeilNs(double bytes, double bytes_per_ns) {
  if (bytes <= 0) return 0;
  const double x = bytes / bytes_per_ns;
  const double y = x - (x * 1e-12 + 1e-6);
  if (y > 0 && y < 0x1p62) {  // ceil by truncation (exact below 2^62)
    const int64_t i = static_cast<int64_t>(y);
    return static_cast<double>(i) < y ? i + 1 : i;
  }
  const double r = std::ceil(y);
  return r <= 0 ? 0 : static_cast<int64_t>(r);
}

void FlowNetwork::Init(const PortModel& model, SimObserver* obs, int32_t max_flows, int64_t share_grid_ns,
                       int32_t grid_flows, double grid_lives) {
  obs_ = obs;
  share_grid_ns_ = share_grid_ns;
  grid_flows_ = grid_flows;
  grid_lives_ = grid_lives;
  const int32_t np = model.NumPorts();
  ports.assign(np, PortState{});
  for (int32_t p = 0; p < np; ++p) {
    PortState& s = ports[p];
    s.peak = model.BytesPerS(p) / kNsPerS;
    s.duplex = model.DuplexBytesPerS(p) / kNsPerS;
    s.reverse = model.Reverse(p);
    s.coupled = model.Coupled(p);
  }
  flows.reserve(max_flows);
  port_capacity_.assign(np, 0);
  port_left_.assign(np, 0);
  port_key_.assign(np, 0);
  port_unfrozen_.assign(np, 0);
  shares_.Resize(np);
  first_count_.assign(np, 0);
  port_comp_.assign(np, 0);
  in_big_.assign(np, 0);
  search_a_.assign(np, 0);
  search_b_.assign(np, 0);
  search_qa_.assign(np, 0);  // Connected queues a port at most once a side
  search_qb_.assign(np, 0);
  near_.assign(kMaxFlowPorts, 0);  // a Freeze lists at most its route's ports; FreezePort grows it
  port_load_.assign(np, 0);
  port_region_.assign(np, 0);
  port_outside_.assign(np, 0);
  outside_old_.assign(np, 0);
  outside_new_.assign(np, 0);
  waiting_.assign(np, 0);
  port_min_cap_.assign(np, std::numeric_limits<double>::infinity());
}

int32_t FlowNetwork::Add(const Flow& f) {
  const int32_t id = static_cast<int32_t>(flows.size());
  flows.push_back(f);
  return id;
}

double FlowNetwork::Rate(int32_t id) const {
  const Flow& f = flows[id];
  return f.slot >= 0 ? rate_[f.slot] : 0.0;
}

double FlowNetwork::Remaining(int32_t id) const {
  const Flow& f = flows[id];
  return f.slot >= 0 ? remaining_[f.slot] : 0.0;
}

int64_t FlowNetwork::FinishNs(int32_t id) const {
  const Flow& f = flows[id];
  return f.slot >= 0 ? finish_ns_[f.slot] : -1;
}

void FlowNetwork::AddBytesLeft(int64_t t, std::vector<double>& per_port) const {
  for (int32_t s = 0; s < active_; ++s) {
    const double left = std::max(0.0, remaining_[s] - rate_[s] * static_cast<double>(t - last_ns_[s]));
    const std::array<int32_t, kMaxFlowPorts>& route = slot_ports_[s];
    const auto n = static_cast<int32_t>(std::find(route.begin(), route.end(), -1) - route.begin());
    ForEachDistinctPort(route, n, [&](int32_t p) { per_port[p] += left; });
  }
}

void FlowNetwork::Start(int32_t id, int64_t t) {
  Flow& f = flows[id];
  f.active = true;
  if (f.route.num_ports == 0) return;  // on no port: never shared, never ends
  const int32_t s = active_++;
  RESHARD_CHECK(s < (1 << 30), "over 2^30 flows at once");
  if (s == static_cast<int32_t>(slot_flow_.size())) {
    const size_t n = slot_flow_.size() + 1;
    slot_flow_.resize(n);
    slot_ports_.resize(n);
    slot_pos_.resize(n);
    frozen_.resize(n);
    slot_stamp_.resize(n);
    remaining_.resize(n);
    rate_.resize(n);
    new_rate_.resize(n);
    cap_.resize(n);
    last_ns_.resize(n);
    finish_ns_.resize(n);
    slot_first_port_.resize(n);
    changed_.resize(n + 1);  // + 1: Share writes one past the count
    ends.heap_.Resize(n);
  }
  f.slot = s;
  slot_flow_[s] = id;
  std::array<int32_t, kMaxFlowPorts> route{-1, -1, -1, -1};
  for (int32_t k = 0; k < f.route.num_ports; ++k) {
    route[k] = f.route.ports[k];
    for (int32_t j = 0; j < k; ++j) repeated_ports_ |= route[j] == route[k];
  }
  slot_ports_[s] = route;
  slot_first_port_[s] = route[0];
  if (big_valid_) JoinBig(f.route);
  ++first_count_[route[0]];
  frozen_[s] = 0;
  slot_stamp_[s] = 0;
  remaining_[s] = static_cast<double>(f.bytes);
  rate_[s] = 0;
  new_rate_[s] = 0;
  cap_[s] = f.cap;
  last_ns_[s] = t;
  finish_ns_[s] = -1;
  touched_flows_.push_back(id);
  for (int32_t k = 0; k < f.route.num_ports; ++k) {
    PortState& p = ports[route[k]];
    if (p.flows.empty()) {
      p.busy_since = t;
      // Its busy reverse drops to the duplex rate.
      if (p.coupled && !ports[p.reverse].flows.empty()) forced_ports_.push_back(p.reverse);
    }
    slot_pos_[s][k] = static_cast<int32_t>(p.flows.size());
    PortFlow e;
    e.word = static_cast<uint32_t>(s) | static_cast<uint32_t>(k) << 30;
    int32_t others = 0;
    for (int32_t j = 0; j < f.route.num_ports; ++j) {
      if (route[j] == route[k]) continue;
      e.other = route[j];
      ++others;
    }
    if (others == 0) e.other = PortFlow::kNone;
    if (others > 1) e.other = PortFlow::kMany;
    p.flows.push_back(e);
    p.bytes += f.bytes;
    port_min_cap_[route[k]] = std::min(port_min_cap_[route[k]], f.cap);
    dirty_.push_back(route[k]);
  }
}

void FlowNetwork::MoveSlot(int32_t from, int32_t to) {
  slot_flow_[to] = slot_flow_[from];
  slot_ports_[to] = slot_ports_[from];
  slot_first_port_[to] = slot_first_port_[from];
  slot_pos_[to] = slot_pos_[from];
  frozen_[to] = frozen_[from];
  slot_stamp_[to] = slot_stamp_[from];
  remaining_[to] = remaining_[from];
  rate_[to] = rate_[from];
  new_rate_[to] = new_rate_[from];
  cap_[to] = cap_[from];
  last_ns_[to] = last_ns_[from];
  finish_ns_[to] = finish_ns_[from];
  for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[to][k] >= 0; ++k)
    ports[slot_ports_[to][k]].flows[slot_pos_[to][k]].SetSlot(to);
  flows[slot_flow_[to]].slot = to;
  ends.heap_.Move(from, to);
}

void FlowNetwork::Stop(int32_t id, int64_t t) {
  Flow& f = flows[id];
  if (f.slot >= 0) {
    const int32_t s = f.slot;
    for (int32_t k = 0; k < f.route.num_ports; ++k) {
      const int32_t pid = f.route.ports[k];
      PortState& p = ports[pid];
      const int32_t pos = slot_pos_[s][k];
      if (Saturated(pid)) forced_ports_.push_back(pid);  // its other flows may speed up
      const PortFlow moved = p.flows.back();
      p.flows[pos] = moved;
      p.flows.pop_back();
      if (moved.Slot() != s) slot_pos_[moved.Slot()][moved.Index()] = pos;
      port_load_[pid] -= rate_[s];
      if (cap_[s] <= port_min_cap_[pid]) RefreshMinCap(pid);  // it may have been the smallest
      if (p.flows.empty()) {
        p.busy_ns += t - p.busy_since;
        port_load_[pid] = 0;
        // Its busy reverse gets the one-way rate back.
        if (p.coupled && !ports[p.reverse].flows.empty()) forced_ports_.push_back(p.reverse);
      }
      dirty_.push_back(pid);
    }
    --first_count_[f.route.ports[0]];
    if (big_valid_ && in_big_[f.route.ports[0]]) LeaveBig(f.route);
    ends.heap_.Erase(s);
    const int32_t last = --active_;
    if (s != last) MoveSlot(last, s);
  }
  if (f.active && obs_) obs_->OnFlowRate(t, f.op, f.route, 0);
  f.active = false;
  f.done = true;
  f.slot = -1;
}

void FlowNetwork::SetCap(int32_t id, double cap) {
  Flow& f = flows[id];
  f.cap = cap;
  if (f.slot >= 0) {
    cap_[f.slot] = cap;
    touched_flows_.push_back(id);
    for (int32_t k = 0; k < f.route.num_ports; ++k) {
      RefreshMinCap(f.route.ports[k]);
      dirty_.push_back(f.route.ports[k]);
    }
  }
}

void FlowNetwork::RefreshMinCap(int32_t q) {
  double m = std::numeric_limits<double>::infinity();
  for (const PortFlow& e : ports[q].flows) m = std::min(m, cap_[e.Slot()]);
  port_min_cap_[q] = m;
}

void FlowNetwork::Discover(int32_t start) {
  comp_ports_.clear();
  comp_slots_.clear();
  bfs_.clear();
  if (++slot_mark_ == 0) {  // wrapped: clear the marks
    std::fill(slot_stamp_.begin(), slot_stamp_.end(), 0);
    slot_mark_ = 1;
  }
  bfs_.push_back(start);
  ports[start].stamp = stamp_;
  // Without an observer the order does not matter: a flow is taken from the
  // first port of its route (every port of the component is walked), which
  // needs no mark per visit, unless a route repeats a port.
  const bool by_first_port = obs_ == nullptr && !repeated_ports_;
  for (size_t h = 0; h < bfs_.size(); ++h) {
    const int32_t q = bfs_[h];
    comp_ports_.push_back(q);
    auto reach = [&](int32_t r) {
      if (ports[r].stamp != stamp_) {
        ports[r].stamp = stamp_;
        bfs_.push_back(r);
      }
    };
    for (const PortFlow& e : ports[q].flows) {
      const int32_t s = e.Slot();
      if (by_first_port) {
        // From a later port only the first needs finding: walking it
        // finds the rest.
        if (e.Index() != 0) {
          reach(e.other >= 0 ? e.other : slot_ports_[s][0]);
          continue;
        }
      } else {
        if (slot_stamp_[s] == slot_mark_) continue;
        slot_stamp_[s] = slot_mark_;
      }
      comp_slots_.push_back(s);
      ForOthers(e, q, reach);
    }
    const int32_t rev = ports[q].reverse;
    if (ports[q].coupled && ports[rev].stamp != stamp_) {
      ports[rev].stamp = stamp_;
      bfs_.push_back(rev);
    }
  }
  comp_flows_ = static_cast<int32_t>(comp_slots_.size());
}

void FlowNetwork::Recompute(int64_t t) {
  ++stamp_;
  if (stamp_ == 0) {  // wrapped: clear the marks
    for (PortState& p : ports) p.stamp = 0;
    stamp_ = 1;
  }
  // A deferred re-share whose component is no longer kept: its ports are
  // re-shared now, as components of their own.
  if (due_ns_ >= 0 && !big_valid_) {
    dirty_.insert(dirty_.end(), big_ports_.begin(), big_ports_.end());
    due_ns_ = -1;
  }
  if (waiting_due_ns_ >= 0 && t >= waiting_due_ns_) {  // components that waited: found and re-shared now
    for (int32_t p : waiting_ports_) waiting_[p] = 0;
    dirty_.insert(dirty_.end(), waiting_ports_.begin(), waiting_ports_.end());
    waiting_ports_.clear();
    waiting_due_ns_ = -1;
  }
  if (big_valid_) CheckBig();
  bool big_done = false;
  if (due_ns_ >= 0 && t >= due_ns_ && !big_ports_.empty()) {  // the deferred re-share
    due_ns_ = -1;
    big_done = true;
    UseBig();
    Share(t);
  }
  for (size_t i = 0; i < dirty_.size(); ++i) {  // DropBig may append
    const int32_t start = dirty_[i];
    if (ports[start].stamp == stamp_) continue;
    if (big_valid_ && in_big_[start]) {
      if (big_done || due_ns_ >= 0) continue;  // re-shared, or to be at due_ns_
      big_done = true;
      if (obs_ == nullptr && ShareLocal(t)) continue;
      if (obs_ == nullptr && share_grid_ns_ > 0 && t % share_grid_ns_ != 0) {
        due_ns_ = NextGridNs(t);
        continue;
      }
      UseBig();
    } else {
      if (waiting_[start]) continue;  // found and re-shared at waiting_due_ns_
      Discover(start);
      if (WaitsForGrid(t)) {
        for (int32_t q : comp_ports_)
          if (!waiting_[q]) waiting_[q] = 1, waiting_ports_.push_back(q);
        if (waiting_due_ns_ < 0) waiting_due_ns_ = NextGridNs(t);
        continue;
      }
      if (obs_ == nullptr && static_cast<int32_t>(comp_slots_.size()) >= kBigFlows) KeepBig();
    }
    Share(t);
  }
  if ((due_ns_ >= 0 && big_valid_) || waiting_due_ns_ >= 0) RunOnFreeBandwidth(t);
  dirty_.clear();
  touched_flows_.clear();
  forced_ports_.clear();
}

// Freezing flows at `rate` (the current level, or a cap at or below it)
// raises the share of every other port they leave, except, through
// rounding, a port whose key is within 1e-9 of the rate: its share L/u >= key
// becomes (L - r) / (u - 1) = L/u + (L/u - r) / (u - 1), for r <= key (1 -
// 1e-9) a rise far beyond the few roundings of L - r and the division (for u
// below 10^6). So the freezes list the ports they leave whose key is at most
// rate / (1 - 1e-9) (many ports tie at the level: equal capacities, equal
// counts), and LowerNear gives those their share as key if it dropped below;
// every other key stays at or below its port's share and is raised when it
// reaches the top.

// Freezes slot `s` at its cap `rate`: takes it off the capacity and the
// unfrozen count of each of its ports.
void FlowNetwork::Freeze(int32_t s, double rate) {
  frozen_[s] = 1;
  new_rate_[s] = rate;
  --left_;
  const double near = rate / (1 - 1e-9);
  near_count_ = 0;
  for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k) {
    const int32_t p = slot_ports_[s][k];
    port_left_[p] -= rate;
    --port_unfrozen_[p];
    if (port_key_[p] <= near) near_[near_count_++] = p;
  }
}

// Freezes every unfrozen flow on port `q` at `rate`. Branch-free per flow
// (about half the flows on a port were frozen by their other port, at
// random): a frozen flow subtracts 0.0, which leaves every capacity as it
// is. The port's own state is not read again and is left alone.
void FlowNetwork::FreezePort(int32_t q, double rate) {
  const std::vector<PortFlow>& list = ports[q].flows;
  // Grown only: a resize down and up again zero-filled it on every call (1.7 % of deepseek-v3's planning).
  const size_t most = list.size() * (kMaxFlowPorts - 1) + 1;
  if (near_.size() < most) near_.resize(most);
  int32_t left = left_, n = 0;
  double unused = 0;
  const double near = rate / (1 - 1e-9);
  for (const PortFlow& e : list) {
    const int32_t s = e.Slot();
    const int32_t live = 1 - frozen_[s];
    frozen_[s] = 1;
    const double r = live ? rate : 0.0;
    *(live ? &new_rate_[s] : &unused) = rate;  // no read of new_rate_, no branch
    left -= live;
    ForOthers(e, q, [&](int32_t p) {
      port_left_[p] -= r;
      port_unfrozen_[p] -= live;
      near_[n] = p;
      n += live & (port_key_[p] <= near ? 1 : 0);
    });
  }
  near_count_ = n;
  left_ = left;
}

// As MaxMinFairRates: the share is max(0, capacity left) / unfrozen flows.
inline double FlowNetwork::ShareOf(int32_t q) const {
  return std::max(0.0, port_left_[q]) / port_unfrozen_[q];
}

// The ports a freeze listed (near_, perhaps twice) whose share dropped below
// their key get it as key.
void FlowNetwork::LowerNear() {
  for (int32_t i = 0; i < near_count_; ++i) {
    const int32_t q = near_[i];
    if (port_unfrozen_[q] == 0) continue;
    const double share = ShareOf(q);
    if (share < port_key_[q]) {
      port_key_[q] = share;
      shares_.Set(q, share);
    }
  }
}

void FlowNetwork::WaterFill() {
  // Ports with flows, their capacity and first share (as MaxMinFairRates).
  initial_shares_.clear();
  // No cap binds below the smallest cap on the component's ports (with a
  // part's outside ports: every flow of the part crosses one or the other).
  double cap_floor = std::numeric_limits<double>::infinity();
  for (int32_t q : comp_ports_) {
    const PortState& p = ports[q];
    if (p.flows.empty()) continue;
    cap_floor = std::min(cap_floor, port_min_cap_[q]);
    port_capacity_[q] = CapacityOf(q);
    port_left_[q] = port_capacity_[q];
    port_unfrozen_[q] = static_cast<int32_t>(p.flows.size());
    port_key_[q] = ShareOf(q);
    initial_shares_.emplace_back(q, port_key_[q]);
  }
  // A part of a component: its outside ports offer what the flows outside
  // the part leave (their unfrozen counts are the part's flows, from Region).
  if (local_) {
    for (int32_t q : outside_ports_) {
      port_capacity_[q] = std::max(0.0, CapacityOf(q) - (port_load_[q] - outside_old_[q]));
      port_left_[q] = port_capacity_[q];
      port_key_[q] = ShareOf(q);
      initial_shares_.emplace_back(q, port_key_[q]);
      cap_floor = std::min(cap_floor, port_min_cap_[q]);
    }
  }
  shares_.Build(initial_shares_);
  left_ = comp_flows_;

  // Caps that can bind, (cap, flow id) smallest first: those below the
  // smallest capacity of the flow's ports. Gathered (from the unfrozen flows
  // of the ports still in the heap) once the smallest share reaches
  // cap_floor; frozen flows are skipped when popped.
  bool caps_built = false;
  by_cap_.clear();
  auto later = [](const MaxMinScratch::CapEntry& a, const MaxMinScratch::CapEntry& b) {
    return a.cap != b.cap ? a.cap > b.cap : a.tie_id > b.tie_id;
  };
  auto cap_of = [&](int32_t s, double limit) {
    for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k)
      limit = std::min(limit, port_capacity_[slot_ports_[s][k]]);
    if (cap_[s] < limit) by_cap_.push_back({cap_[s], slot_flow_[s], s});
  };
  auto build_caps = [&]() {
    caps_built = true;
    if (local_) {  // the part's flows are listed
      for (int32_t s : comp_slots_)
        if (!frozen_[s]) cap_of(s, std::numeric_limits<double>::infinity());
      std::make_heap(by_cap_.begin(), by_cap_.end(), later);
      return;
    }
    for (int32_t q : comp_ports_) {
      if (ports[q].flows.empty() || !shares_.Contains(q)) continue;
      for (const PortFlow& e : ports[q].flows) {
        const int32_t s = e.Slot();
        if (frozen_[s]) continue;
        double limit = port_capacity_[q];
        ForOthers(e, q, [&](int32_t p) { limit = std::min(limit, port_capacity_[p]); });
        // A flow on several heap ports is listed more than once; the copies
        // after the first are popped as frozen.
        if (cap_[s] < limit) by_cap_.push_back({cap_[s], slot_flow_[s], s});
      }
    }
    std::make_heap(by_cap_.begin(), by_cap_.end(), later);
  };
  auto pop_cap = [&]() {
    std::pop_heap(by_cap_.begin(), by_cap_.end(), later);
    by_cap_.pop_back();
  };

  while (left_ > 0) {
    // The smallest share: a top whose key lags is re-keyed first.
    double share_next = std::numeric_limits<double>::infinity();
    while (!shares_.Empty()) {
      const int32_t q = shares_.Top();
      if (port_unfrozen_[q] == 0) {  // every flow on it is frozen
        shares_.Erase(q);
        continue;
      }
      const double share = ShareOf(q);
      if (port_key_[q] != share) {
        port_key_[q] = share;
        shares_.Set(q, share);
        continue;
      }
      share_next = share;
      break;
    }
    if (!caps_built && share_next >= cap_floor) build_caps();
    int32_t capped = -1;
    while (!by_cap_.empty() && by_cap_.front().cap <= share_next) {
      if (!frozen_[by_cap_.front().flow]) {
        capped = by_cap_.front().flow;
        break;
      }
      pop_cap();
    }
    if (capped >= 0) {
      const double cap = by_cap_.front().cap;
      pop_cap();
      Freeze(capped, cap);
      LowerNear();
      continue;
    }
    RESHARD_CHECK(!shares_.Empty(), "water-filling lost a flow");
    const int32_t q = shares_.Top();
    if (local_ && port_outside_[q] == region_mark_) {  // the part is not closed
      binding_outside_ = q;
      return;
    }
    shares_.Erase(q);
    // Every unfrozen flow on q stops at its share (floored: rates stay positive).
    const double rate = std::max(share_next, ports[q].peak * 1e-12);
    FreezePort(q, rate);
    LowerNear();
  }
}

// Settles slot s's bytes at its old rate (a flow's bytes are settled only
// when its rate changes), gives it new_rate_[s] and moves its end.
void FlowNetwork::SetRate(int32_t s, int64_t t) {
  const double old = rate_[s], now = new_rate_[s];
  remaining_[s] = std::max(0.0, remaining_[s] - old * static_cast<double>(t - last_ns_[s]));
  last_ns_[s] = t;
  for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k) port_load_[slot_ports_[s][k]] += now - old;
  rate_[s] = now;
  const int64_t finish = t + CeilNs(remaining_[s], now);
  if (obs_) {
    const Flow& f = flows[slot_flow_[s]];
    obs_->OnFlowRate(t, f.op, f.route, now * kNsPerS);
  }
  if (finish != finish_ns_[s]) {
    finish_ns_[s] = finish;
    ends.heap_.Set(s, {finish, slot_flow_[s]});
  }
}

void FlowNetwork::Share(int64_t t) {
  ++rate_updates;
  WaterFill();
  const int32_t n = comp_flows_;
  // A component with most active flows is walked in slot order (a slot is in
  // it when the first port of its route is), which reads the slot arrays in
  // sequence.
  const bool scan = obs_ == nullptr && n > active_ / 2;
  if (scan) {
    if (++comp_mark_ == 0) {
      std::fill(port_comp_.begin(), port_comp_.end(), 0);
      comp_mark_ = 1;
    }
    for (int32_t q : comp_ports_) port_comp_[q] = comp_mark_;
  }
  const int32_t m = scan ? active_ : n;
  // Lists a flow when its rate changed (a new flow's rate, 0, always does).
  int32_t changed = 0;
  auto settle = [&](int32_t s) {
    frozen_[s] = 0;
    changed_[changed] = s;
    changed += new_rate_[s] != rate_[s] ? 1 : 0;
  };
  if (obs_) {
    // In discovery order (the order of the observer's calls).
    for (int32_t s : comp_slots_) {
      frozen_[s] = 0;
      if (new_rate_[s] != rate_[s]) SetRate(s, t);
    }
  } else if (scan) {
    for (int32_t s = 0; s < m; ++s)
      if (port_comp_[slot_first_port_[s]] == comp_mark_) settle(s);
  } else {
    for (int32_t s : comp_slots_) settle(s);
  }
  if (!obs_) {
    for (int32_t i = 0; i < changed; ++i) SetRate(changed_[i], t);
  }
  if (!obs_) return;
  for (int32_t q : comp_ports_) {
    PortState& p = ports[q];
    double sum = 0;
    for (const PortFlow& e : p.flows) sum += rate_[e.Slot()];
    if (sum != p.rate) {
      p.rate = sum;
      obs_->OnPortRate(t, q, sum * kNsPerS);
    }
  }
}

}  // namespace reshard::sim_internal
