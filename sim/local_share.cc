// Local re-sharing of the big component (sim/state.h FlowNetwork::ShareLocal):
// only the part of a component that a change can reach through saturated
// ports is water-filled again; the rest of FlowNetwork is in flow_network.cc.
#include <algorithm>
#include <limits>

#include "sim/state.h"

namespace reshard::sim_internal {

// ---- Local re-sharing -------------------------------------------------------
//
// In a big component most flows keep their rate when one flow starts or
// ends: max-min rates are set by saturated ports. A flow's rate is max-min
// fair iff it has a bottleneck: its cap, or a saturated port on which no flow
// is faster. The changes since the last call (flows started, re-capped or
// stopped at a saturated port, ports whose duplex capacity changed) can only
// move rates through saturated ports, so the part re-shared is:
//   R   = the ports forced by a change, the saturated ports of changed flows,
//         closed under "a saturated port crossed by a flow on an R port";
//   F_R = the flows on R ports and the changed flows;
//   the outside ports = the other ports of F_R flows, unsaturated, each
//         offering what the flows outside F_R leave of it.
// Water-filling F_R over R and the outside ports gives every F_R flow a
// bottleneck at its cap or an R port unless an outside port binds (or ends
// within kSaturatedMargin of its capacity): then that port joins R and the
// part is re-shared again. Flows outside F_R keep their bottleneck (a
// saturated port no F_R flow crosses, its flows unchanged), so the result is
// the component's max-min fair rates, and bit for bit those of a full pass:
// the F_R flows' freezes are the full pass's, in the same order and with the
// same subtractions (no flow outside F_R crosses an R port). Cost: the part's
// flows and ports instead of the component's; a part of more than half the
// active flows falls back to the full pass. With a share grid
// (SimOptions::share_grid_ns), that full pass waits for the next grid point
// unless the change falls on one: until then new flows there run on what
// their ports have free (0 where a port is saturated: FlowNetwork::
// RunOnFreeBandwidth) and the others keep their rates (always within the
// capacities), the one place where rates are not max-min fair at every
// instant.

bool FlowNetwork::Region() {
  if (++region_mark_ == 0) {
    std::fill(port_region_.begin(), port_region_.end(), 0);
    std::fill(port_outside_.begin(), port_outside_.end(), 0);
    region_mark_ = 1;
  }
  if (++slot_mark_ == 0) {
    std::fill(slot_stamp_.begin(), slot_stamp_.end(), 0);
    slot_mark_ = 1;
  }
  comp_ports_.clear();
  comp_slots_.clear();
  outside_ports_.clear();
  auto add_port = [&](int32_t q) {
    if (port_region_[q] == region_mark_) return;
    port_region_[q] = region_mark_;
    comp_ports_.push_back(q);
  };
  auto add_slot = [&](int32_t s) {
    if (slot_stamp_[s] == slot_mark_) return false;
    slot_stamp_[s] = slot_mark_;
    comp_slots_.push_back(s);
    return true;
  };
  for (int32_t q : forced_ports_)
    if (in_big_[q]) add_port(q);
  for (int32_t q : extra_ports_) add_port(q);
  for (int32_t id : touched_flows_) {
    const int32_t s = flows[id].slot;
    if (s < 0 || !in_big_[slot_first_port_[s]] || !add_slot(s)) continue;
    for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k)
      if (Saturated(slot_ports_[s][k])) add_port(slot_ports_[s][k]);
  }
  const size_t limit = static_cast<size_t>(active_ / 2);
  for (size_t h = 0; h < comp_ports_.size(); ++h) {
    const int32_t q = comp_ports_[h];
    double load = 0;
    for (const PortFlow& e : ports[q].flows) {
      load += rate_[e.Slot()];
      if (!add_slot(e.Slot())) continue;
      ForOthers(e, q, [&](int32_t p) {
        if (port_region_[p] != region_mark_ && Saturated(p)) add_port(p);
      });
    }
    port_load_[q] = load;  // exact again (the kept sums drift by roundings)
    if (comp_slots_.size() > limit) return false;
  }
  for (int32_t s : comp_slots_) {
    for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k) {
      const int32_t p = slot_ports_[s][k];
      if (port_region_[p] == region_mark_) continue;
      if (port_outside_[p] != region_mark_) {
        port_outside_[p] = region_mark_;
        outside_ports_.push_back(p);
        outside_old_[p] = 0;
        port_unfrozen_[p] = 0;
      }
      outside_old_[p] += rate_[s];
      ++port_unfrozen_[p];
    }
  }
  comp_flows_ = static_cast<int32_t>(comp_slots_.size());
  return true;
}

int32_t FlowNetwork::CheckOutside() {
  for (int32_t q : outside_ports_) outside_new_[q] = 0;
  for (int32_t s : comp_slots_) {
    for (int32_t k = 0; k < kMaxFlowPorts && slot_ports_[s][k] >= 0; ++k) {
      const int32_t p = slot_ports_[s][k];
      if (port_outside_[p] == region_mark_) outside_new_[p] += new_rate_[s];
    }
  }
  for (int32_t q : outside_ports_) {
    if (port_load_[q] - outside_old_[q] + outside_new_[q] >= CapacityOf(q) * (1 - kSaturatedMargin)) return q;
  }
  return -1;
}

bool FlowNetwork::ShareLocal(int64_t t) {
  constexpr int kMaxAttempts = 8;
  extra_ports_.clear();
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    if (!Region()) return false;
    if (comp_slots_.empty()) return true;
    ++rate_updates;
    ++local_updates;
    local_ = true;
    binding_outside_ = -1;
    WaterFill();
    local_ = false;
    const int32_t bind = binding_outside_ >= 0 ? binding_outside_ : CheckOutside();
    for (int32_t s : comp_slots_) frozen_[s] = 0;
    if (bind < 0) {
      for (int32_t s : comp_slots_)
        if (new_rate_[s] != rate_[s]) SetRate(s, t);
      return true;
    }
    extra_ports_.push_back(bind);
  }
  return false;
}

}  // namespace reshard::sim_internal
