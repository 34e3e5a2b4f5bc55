// What a simulation reports: the Prediction gathered from a finished run
// (refit time, peaks, per-port use, phases by op kind and link class, the
// lower bounds and plan efficiency), and its JSON form. O(ops + ports).
#include <algorithm>
#include <limits>

#include <nlohmann/json.hpp>

#include "model/error.h"
#include "sim/state.h"
#include "sim/topology_bound.h"
#include "sim/trace.h"

namespace reshard {

using sim_internal::kNsPerS;

Prediction Simulator::State::Collect() const {
  Prediction pr;
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  int32_t last_op = -1;
  for (int32_t i = 0; i < nops; ++i) {
    first = std::min(first, op_start_ns[i]);
    if (op_end_ns[i] > last || last_op < 0) last_op = i;
    last = std::max(last, op_end_ns[i]);
  }
  if (nops == 0) first = 0;
  pr.time_ns = last;  // from the call: the host starts issuing at t = 0
  pr.time_s = static_cast<double>(pr.time_ns) / kNsPerS;
  pr.gpu_span_ns = last - first;
  pr.issue_model = host.processes == 0 ? "none" : std::string(IssueModelName(opt.issue));
  pr.one_process = opt.one_process;
  pr.cold = opt.cold;
  for (int64_t t : host.process_ns) pr.host_issue_ns = std::max(pr.host_issue_ns, t);
  pr.cold_setup_ns = host.cold_setup_ns;
  pr.connect_ns = host.connect_ns;
  pr.critical_path = CriticalPathOf(last_op);
  RESHARD_CHECK(pr.critical_path.TotalNs() == pr.time_ns, "critical path terms do not sum to the refit time");
  pr.peak_bytes = memory.device_peak;
  pr.peak_parts.reserve(pr.peak_bytes.size());
  for (size_t g = 0; g < pr.peak_bytes.size(); ++g) pr.peak_parts.push_back(memory.PeakParts(static_cast<int32_t>(g)));
  pr.peak_host_bytes = memory.host_peak;
  pr.bytes_moved = CountBytesMoved(plan);  // the planner's and executor's definition
  for (int32_t q = 0; q < ports.NumPorts(); ++q) {
    const sim_internal::PortState& p = net.ports[q];
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
  auto phase = [](std::string_view name, const sim_internal::Activity& a) {
    return PhaseUse{std::string(name), a.count, a.bytes, a.active_ns, a.sum_ns};
  };
  for (int k = 0; k < sim_internal::kOpKinds; ++k) {
    if (kind_use[k].count != 0) pr.by_kind.push_back(phase(OpKindName(static_cast<OpKind>(k)), kind_use[k]));
  }
  for (int c = 0; c < sim_internal::kLinkClasses; ++c) {
    if (class_use[c].count != 0) pr.by_class.push_back(phase(LinkClassName(static_cast<LinkClass>(c)), class_use[c]));
  }
  pr.events = events;
  pr.rate_updates = net.rate_updates;
  const PortBound& rb = routing_bound;
  pr.routing_bound_s = rb.time_s;
  pr.routing_bound_port = rb.port_name;
  if (opt.lower_bound) {
    const TopologyBound lb = TopologyLowerBound(plan);
    pr.lower_bound_s = lb.time_s;
    pr.lower_bound_port = lb.binding;
    pr.plan_efficiency = PlanEfficiency(lb.time_s, pr.time_s);
  }
  if (opt.record_op_times) {
    pr.op_start_ns = op_start_ns;
    pr.op_end_ns = op_end_ns;
  }
  if (obs) obs->OnEnd(last);
  return pr;
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

void to_json(nlohmann::json& j, const MemoryParts& m) {
  j = nlohmann::json{{"context_bytes", m.context_bytes},
                     {"source_weights_bytes", m.source_weights_bytes},
                     {"destination_weights_bytes", m.destination_weights_bytes},
                     {"optimizer_bytes", m.optimizer_bytes},
                     {"gradients_bytes", m.gradients_bytes},
                     {"kv_cache_bytes", m.kv_cache_bytes},
                     {"staging_bytes", m.staging_bytes},
                     {"nccl_bytes", m.nccl_bytes}};
}

void to_json(nlohmann::json& j, const CriticalPath& c) {
  auto s = [](int64_t ns) { return static_cast<double>(ns) / kNsPerS; };
  j = nlohmann::json{{"wire_s", s(c.wire_ns)},           {"copy_s", s(c.copy_ns)},   {"offload_s", s(c.offload_ns)},
                     {"host_issue_s", s(c.host_issue_ns)}, {"event_s", s(c.event_ns)}, {"warm_up_s", s(c.warm_up_ns)},
                     {"ops", c.ops}};
}

void to_json(nlohmann::json& j, const Prediction& p) {
  j = nlohmann::json{
      {"time_s", p.time_s},
      {"time_ns", p.time_ns},
      {"gpu_span_s", static_cast<double>(p.gpu_span_ns) / kNsPerS},
      {"host", {{"issue_model", p.issue_model},
                {"one_process", p.one_process},
                {"cold", p.cold},
                {"issue_s", static_cast<double>(p.host_issue_ns) / kNsPerS},
                {"cold_setup_s", static_cast<double>(p.cold_setup_ns) / kNsPerS},
                {"connect_s", static_cast<double>(p.connect_ns) / kNsPerS}}},
      {"critical_path", p.critical_path},
      {"peak_bytes", p.peak_bytes},
      {"peak_parts", p.peak_parts},
      {"peak_host_bytes", p.peak_host_bytes},
      {"bytes_moved", p.bytes_moved},
      {"lower_bound_s", p.lower_bound_s},
      {"lower_bound_port", p.lower_bound_port},
      {"plan_efficiency", p.plan_efficiency},
      {"routing_bound_s", p.routing_bound_s},
      {"routing_bound_port", p.routing_bound_port},
      {"events", p.events},
      {"links", p.ports},
      {"phases", {{"by_kind", p.by_kind}, {"by_class", p.by_class}}},
  };
}

}  // namespace reshard
