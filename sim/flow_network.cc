// Flows on ports (sim/state.h FlowNetwork): putting flows on and off their
// ports, and re-sharing bandwidth where that changed.
//
// Recompute finds the connected components (ports linked by flows, and the
// two directions of a coupled duplex pair) of the ports touched since the last
// call, by BFS, and for each: settles the bytes every flow moved at its old
// rate, gives each port its capacity (duplex rate when both directions carry
// flows, else peak), solves max-min fair rates (sim/max_min.h; ties by flow
// and port id), and moves the end of every flow whose rate changed.
// O((F_c + P_c) log(F_c + P_c)) per component of F_c flows over P_c ports,
// plus O(log F) per moved end.
#include <algorithm>
#include <cmath>

#include "sim/state.h"
#include "sim/trace.h"

namespace reshard::sim_internal {

int64_t CeilNs(double bytes, double bytes_per_ns) {
  if (bytes <= 0) return 0;
  const double x = bytes / bytes_per_ns;
  const double r = std::ceil(x - (x * 1e-12 + 1e-6));
  return r <= 0 ? 0 : static_cast<int64_t>(r);
}

void FlowNetwork::Init(const PortModel& model, SimObserver* obs, int32_t max_flows) {
  obs_ = obs;
  ports.assign(model.NumPorts(), PortState{});
  for (int32_t p = 0; p < model.NumPorts(); ++p) {
    PortState& s = ports[p];
    s.peak = model.BytesPerS(p) / kNsPerS;
    s.duplex = model.DuplexBytesPerS(p) / kNsPerS;
    s.reverse = model.Reverse(p);
    s.coupled = model.Coupled(p);
  }
  port_local_.assign(model.NumPorts(), -1);
  flows.reserve(max_flows);
  ends.Resize(max_flows);
}

int32_t FlowNetwork::Add(const Flow& f) {
  const int32_t id = static_cast<int32_t>(flows.size());
  flows.push_back(f);
  return id;
}

void FlowNetwork::Start(int32_t id, int64_t t) {
  Flow& f = flows[id];
  f.active = true;
  f.remaining = static_cast<double>(f.bytes);
  f.last_ns = t;
  for (int32_t k = 0; k < f.route.num_ports; ++k) {
    PortState& p = ports[f.route.ports[k]];
    if (p.flows.empty()) p.busy_since = t;
    f.pos[k] = static_cast<int32_t>(p.flows.size());
    p.flows.push_back(id);
    p.bytes += f.bytes;
    dirty_.push_back(f.route.ports[k]);
  }
}

void FlowNetwork::Stop(int32_t id, int64_t t) {
  Flow& f = flows[id];
  if (f.active) {
    for (int32_t k = 0; k < f.route.num_ports; ++k) {
      const int32_t pid = f.route.ports[k];
      PortState& p = ports[pid];
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
      dirty_.push_back(pid);
    }
    if (obs_) obs_->OnFlowRate(t, f.op, f.route, 0);
  }
  ends.Erase(id);
  f.active = false;
  f.done = true;
  f.rate = 0;
  f.remaining = 0;
}

void FlowNetwork::SetCap(int32_t id, double cap) {
  Flow& f = flows[id];
  f.cap = cap;
  if (f.active)
    for (int32_t k = 0; k < f.route.num_ports; ++k) dirty_.push_back(f.route.ports[k]);
}

void FlowNetwork::Recompute(int64_t t) {
  ++stamp_;
  for (int32_t start : dirty_) {
    if (ports[start].stamp == stamp_) continue;
    comp_ports_.clear();
    comp_flows_.clear();
    bfs_.clear();
    bfs_.push_back(start);
    ports[start].stamp = stamp_;
    for (size_t h = 0; h < bfs_.size(); ++h) {
      const int32_t q = bfs_[h];
      comp_ports_.push_back(q);
      for (int32_t fid : ports[q].flows) {
        Flow& f = flows[fid];
        if (f.stamp == stamp_) continue;
        f.stamp = stamp_;
        comp_flows_.push_back(fid);
        for (int32_t k = 0; k < f.route.num_ports; ++k) {
          const int32_t r = f.route.ports[k];
          if (ports[r].stamp != stamp_) {
            ports[r].stamp = stamp_;
            bfs_.push_back(r);
          }
        }
      }
      const int32_t rev = ports[q].reverse;
      if (ports[q].coupled && ports[rev].stamp != stamp_) {
        ports[rev].stamp = stamp_;
        bfs_.push_back(rev);
      }
    }
    Share(t);
  }
  dirty_.clear();
}

void FlowNetwork::Share(int64_t t) {
  ++rate_updates;
  for (int32_t fid : comp_flows_) {
    Flow& f = flows[fid];
    f.remaining = std::max(0.0, f.remaining - f.rate * static_cast<double>(t - f.last_ns));
    f.last_ns = t;
  }
  // The sharing problem, in discovery order; ties (equal shares, equal caps)
  // fall to the lower port / flow id.
  shared_ports_.resize(comp_ports_.size());
  for (size_t i = 0; i < comp_ports_.size(); ++i) {
    const int32_t q = comp_ports_[i];
    const PortState& p = ports[q];
    port_local_[q] = static_cast<int32_t>(i);
    const bool both = p.coupled && !p.flows.empty() && !ports[p.reverse].flows.empty();
    shared_ports_[i] = SharedPort{both ? p.duplex : p.peak, p.peak * 1e-12, q};
  }
  shared_flows_.resize(comp_flows_.size());
  for (size_t i = 0; i < comp_flows_.size(); ++i) {
    const Flow& f = flows[comp_flows_[i]];
    SharedFlow& s = shared_flows_[i];
    s.num_ports = f.route.num_ports;
    for (int32_t k = 0; k < f.route.num_ports; ++k) s.ports[k] = port_local_[f.route.ports[k]];
    s.cap = f.cap;
    s.tie_id = comp_flows_[i];
  }
  rates_.resize(comp_flows_.size());
  MaxMinFairRates(shared_flows_, shared_ports_, rates_, scratch_);
  for (size_t i = 0; i < comp_flows_.size(); ++i) flows[comp_flows_[i]].new_rate = rates_[i];

  // New finish times for flows whose rate changed.
  for (int32_t fid : comp_flows_) {
    Flow& f = flows[fid];
    if (f.new_rate == f.rate && f.finish_ns >= 0) continue;
    f.rate = f.new_rate;
    const int64_t finish = t + CeilNs(f.remaining, f.rate);
    if (obs_) obs_->OnFlowRate(t, f.op, f.route, f.rate * kNsPerS);
    if (finish != f.finish_ns) {
      f.finish_ns = finish;
      ends.Set(fid, finish);
    }
  }
  for (int32_t q : comp_ports_) {
    PortState& p = ports[q];
    double sum = 0;
    for (int32_t fid : p.flows) sum += flows[fid].rate;
    if (sum != p.rate) {
      p.rate = sum;
      if (obs_) obs_->OnPortRate(t, q, sum * kNsPerS);
    }
  }
}

}  // namespace reshard::sim_internal
