// The components of the flow network (sim/state.h FlowNetwork) that are not
// re-shared at every change: the big component kept between calls, and other
// components of many long flows that wait for the share grid; with the flows
// that start while a re-share waits. Finding and water-filling components is
// in flow_network.cc, re-sharing a part of the big one in local_share.cc.
#include <algorithm>
#include <limits>

#include "sim/state.h"

namespace reshard::sim_internal {
// ---- Other components on the grid -----------------------------------------
//
// Only one component is kept between calls (the big one, below); others of
// hundreds of flows (every NIC of a node's rail in a round of 8192 GPUs, one
// per pipeline stage) are found by a BFS and re-shared at each change. Where
// a change reaches such a component between two grid points and its flows
// are long (at least grid_lives grids left on average: a wait is then a small
// share of their life), it waits for the next grid point as the big one does:
// its ports are listed and it is found and re-shared then. Where its flows
// are short (the relays of a refit of a few ms: ~5 grids each) it is
// re-shared at once: a wait of up to a grid per flow would reorder them
// (docs/cost-model.md). A component found for the first time has no flow with
// an end yet, so it is always shared at once. O(F) per component of F flows.
bool FlowNetwork::WaitsForGrid(int64_t t) const {
  if (grid_flows_ <= 0 || obs_ != nullptr || share_grid_ns_ <= 0 || comp_flows_ < grid_flows_ ||
      t % share_grid_ns_ == 0)
    return false;
  double left_ns = 0;
  int64_t timed = 0;
  for (int32_t s : comp_slots_) {
    if (finish_ns_[s] < 0) continue;
    left_ns += static_cast<double>(finish_ns_[s] - t);
    ++timed;
  }
  return timed > 0 && left_ns >= grid_lives_ * static_cast<double>(share_grid_ns_) * static_cast<double>(timed);
}

// While a component's re-share waits for the grid, a flow that started
// (or was re-capped) in it runs at once on what its ports have free: the
// smallest of capacity - load over its ports, at most its cap (for a re-capped
// flow, on top of its rate). Mostly it takes over what a flow that ended on
// the same ports left (the next transfer of a channel, the other lane of a
// pair), so the bandwidth is not left idle until the grid point; the rates
// stay within every port's capacity. In the order the flows were touched.
// O(touched flows x ports per route).
void FlowNetwork::RunOnFreeBandwidth(int64_t t) {
  for (int32_t id : touched_flows_) {
    const int32_t s = flows[id].slot;
    if (s < 0) continue;
    const int32_t first = slot_first_port_[s];
    if (!((due_ns_ >= 0 && big_valid_ && in_big_[first]) || waiting_[first])) continue;
    double free = std::numeric_limits<double>::infinity();
    for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k) {
      const int32_t p = slot_ports_[s][k];
      free = Saturated(p) ? 0.0 : std::min(free, CapacityOf(p) - port_load_[p]);  // saturated: it waits
    }
    const double rate = std::min(cap_[s], rate_[s] + free);
    if (rate <= rate_[s]) continue;
    new_rate_[s] = rate;
    SetRate(s, t);
  }
}

// ---- The big component, kept between calls --------------------------------
//
// A component of thousands of flows (every NIC of a refit in one NCCL group)
// mostly stays one component while flows come and go. Its ports are kept
// (in_big_) while that is known to be exact: a flow that starts inside it,
// or joins it to ports without flows, keeps it; one that joins it to another
// component drops it; one that stops may split it, which CheckBig rules out
// by finding, in a bounded search, a path between the ports it leaves. A port
// left without flows leaves it (unless its coupled reverse still carries
// flows). Only without an observer (which wants the BFS order).

namespace {
constexpr int64_t kBigSearchEntries = 4096;  // port-list entries one CheckBig search may read
}  // namespace

bool FlowNetwork::Alone(int32_t p) const {
  const PortState& s = ports[p];
  return s.flows.empty() && (!s.coupled || ports[s.reverse].flows.empty());
}

void FlowNetwork::JoinBig(const Route& r) {
  bool inside = false, outside = false;
  for (int32_t k = 0; k < r.num_ports; ++k) (in_big_[r.ports[k]] ? inside : outside) = true;
  if (!inside) return;
  if (!outside) return;
  for (int32_t k = 0; k < r.num_ports; ++k) {
    const int32_t p = r.ports[k];
    if (in_big_[p]) continue;
    if (!Alone(p)) {  // joins another component
      big_valid_ = false;
      return;
    }
  }
  for (int32_t k = 0; k < r.num_ports; ++k) {
    const int32_t p = r.ports[k];
    if (in_big_[p]) continue;
    in_big_[p] = 1;
    big_ports_.push_back(p);
    const PortState& ps = ports[p];
    if (ps.coupled && !in_big_[ps.reverse]) {
      in_big_[ps.reverse] = 1;
      big_ports_.push_back(ps.reverse);
    }
  }
}

void FlowNetwork::LeaveBig(const Route& r) {
  const size_t group = big_checks_.size();
  big_checks_.push_back(0);
  for (int32_t k = 0; k < r.num_ports; ++k) {
    const int32_t p = r.ports[k];
    if (Alone(p)) {  // a component of its own (with its reverse)
      if (in_big_[p]) {
        in_big_[p] = 0;
        big_stale_ = true;
      }
      if (ports[p].coupled && in_big_[ports[p].reverse]) {
        in_big_[ports[p].reverse] = 0;
        big_stale_ = true;
      }
      continue;
    }
    // A port without flows hangs on its coupled reverse.
    const int32_t rep = ports[p].flows.empty() ? ports[p].reverse : p;
    bool seen = false;
    for (size_t i = group + 1; i < big_checks_.size(); ++i) seen |= big_checks_[i] == rep;
    if (!seen) big_checks_.push_back(rep);
  }
  big_checks_[group] = static_cast<int32_t>(big_checks_.size() - group - 1);
}

void FlowNetwork::CheckBig() {
  for (size_t i = 0; i < big_checks_.size() && big_valid_;) {
    const int32_t n = big_checks_[i];
    for (int32_t j = 2; j <= n && big_valid_; ++j) big_valid_ = Connected(big_checks_[i + 1], big_checks_[i + j]);
    i += 1 + n;
  }
  big_checks_.clear();
  if (!big_valid_) return;
  if (big_stale_) {
    // Drops the ports that left, and the second listing of a port that left
    // and joined again before this check (JoinBig lists it anew): counted
    // twice, its flows would make UseBig's count exceed the flows.
    size_t kept = 0;
    for (int32_t p : big_ports_)
      if (in_big_[p] == 1) {
        in_big_[p] = 2;
        big_ports_[kept++] = p;
      }
    big_ports_.resize(kept);
    for (int32_t p : big_ports_) in_big_[p] = 1;
    big_stale_ = false;
  }
  int32_t flows_in = 0;
  for (int32_t q : big_ports_) flows_in += first_count_[q];
  if (flows_in == 0) DropBig();
}

// Whether ports `u` and `v` are linked by flows (and coupled pairs): a
// search from both ends, the smaller frontier first, that gives up (false)
// after kBigSearchEntries port-list entries.
bool FlowNetwork::Connected(int32_t u, int32_t v) {
  if (u == v) return true;
  if (++search_mark_ == 0) {
    std::fill(search_a_.begin(), search_a_.end(), 0);
    std::fill(search_b_.begin(), search_b_.end(), 0);
    search_mark_ = 1;
  }
  // Each side queues a port at most once: queues of one slot a port (sized in Init), filled by index (a push_back
  // per port reached was 1.5 % of deepseek-v3's planning instructions).
  search_qa_[0] = u, search_qb_[0] = v;
  size_t na = 1, nb = 1;
  search_a_[u] = search_mark_;
  search_b_[v] = search_mark_;
  size_t ha = 0, hb = 0;
  int64_t read = 0;
  while (ha < na && hb < nb) {
    const bool from_a = na - ha <= nb - hb;
    int32_t* queue = from_a ? search_qa_.data() : search_qb_.data();
    size_t& n = from_a ? na : nb;
    std::vector<uint32_t>& mine = from_a ? search_a_ : search_b_;
    const std::vector<uint32_t>& theirs = from_a ? search_b_ : search_a_;
    const int32_t q = queue[from_a ? ha++ : hb++];
    auto reach = [&](int32_t r) {
      if (theirs[r] == search_mark_) return true;
      if (mine[r] != search_mark_) {
        mine[r] = search_mark_;
        queue[n++] = r;
      }
      return false;
    };
    bool met = false;
    for (const PortFlow& e : ports[q].flows) {
      ForOthers(e, q, [&](int32_t r) { met |= reach(r); });
      if (met) return true;
    }
    if (ports[q].coupled && reach(ports[q].reverse)) return true;
    read += static_cast<int64_t>(ports[q].flows.size());
    if (read > kBigSearchEntries) return false;
  }
  return false;
}

void FlowNetwork::KeepBig() {
  DropBig();
  big_ports_ = comp_ports_;
  for (int32_t q : big_ports_) in_big_[q] = 1;
  big_valid_ = true;
}

void FlowNetwork::DropBig() {
  if (due_ns_ >= 0) {  // its deferred re-share: now, per component
    dirty_.insert(dirty_.end(), big_ports_.begin(), big_ports_.end());
    due_ns_ = -1;
  }
  for (int32_t q : big_ports_) in_big_[q] = 0;
  big_ports_.clear();
  big_checks_.clear();
  big_valid_ = false;
  big_stale_ = false;
}

// The big component as the one to share: its ports marked as the BFS would
// mark them; its flows, when a minority of the active ones, listed from the
// ports their route starts at.
void FlowNetwork::UseBig() {
  comp_ports_ = big_ports_;
  comp_slots_.clear();
  int32_t n = 0;
  for (int32_t q : comp_ports_) {
    ports[q].stamp = stamp_;
    n += first_count_[q];
  }
  if (n > active_ / 2) {
    comp_flows_ = n;
    return;
  }
  for (int32_t q : comp_ports_) {
    for (const PortFlow& e : ports[q].flows)
      if (e.Index() == 0) comp_slots_.push_back(e.Slot());
  }
  comp_flows_ = n;
}

}  // namespace reshard::sim_internal
