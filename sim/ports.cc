// The port model and the lower bound (sim/ports.h says what a port is, the
// routes of each op kind and the duplex LP optimum). O(1) per route, O(ops +
// ports) for a plan's loads and bound.
#include "sim/ports.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/error.h"

namespace reshard {

namespace {
constexpr int32_t kGpuPorts = 5;  // nvlink_out, nvlink_in, pcie_h2d, pcie_d2h, copy

// A device copy, an offload or a reload: one port of one GPU.
Route OnePortRoute(LinkClass cls, int32_t port, bool pageable) {
  Route r;
  r.link_class = cls;
  r.num_ports = 1;
  r.ports[0] = port;
  r.pageable = pageable;
  return r;
}
}  // namespace

std::string_view PortKindName(PortKind k) {
  switch (k) {
    case PortKind::kNvlinkOut: return "nvlink_out";
    case PortKind::kNvlinkIn: return "nvlink_in";
    case PortKind::kPcieH2D: return "pcie_h2d";
    case PortKind::kPcieD2H: return "pcie_d2h";
    case PortKind::kDeviceCopy: return "copy";
    case PortKind::kNicOut: return "nic_out";
    case PortKind::kNicIn: return "nic_in";
  }
  return "?";
}

const LinkProfile& ProfileOf(const Cluster& c, LinkClass cls, bool pageable) {
  switch (cls) {
    case LinkClass::kLocal: return c.device_copy;
    case LinkClass::kNvlink: return c.nvlink;
    case LinkClass::kNetwork: return c.network;
    case LinkClass::kPcie: return pageable ? c.pcie_pageable : c.pcie;
  }
  RESHARD_CHECK(false, "unknown link class");
  return c.device_copy;
}

PortModel::PortModel(const Cluster& c) : cluster_(c) {
  gpus_ = c.Gpus();
  RESHARD_CHECK(gpus_ >= 1, fmt::format("cluster has {} GPUs", gpus_));
  nics_ = c.nodes * std::max(c.nics_per_node, 0);
  kind_.reserve(static_cast<size_t>(kGpuPorts) * gpus_ + 2 * static_cast<size_t>(nics_));
  for (int32_t g = 0; g < gpus_; ++g) {
    for (PortKind k : {PortKind::kNvlinkOut, PortKind::kNvlinkIn, PortKind::kPcieH2D, PortKind::kPcieD2H,
                       PortKind::kDeviceCopy}) {
      kind_.push_back(k);
    }
  }
  for (int32_t n = 0; n < nics_; ++n) {
    kind_.push_back(PortKind::kNicOut);
    kind_.push_back(PortKind::kNicIn);
  }
}

int32_t PortModel::Port(PortKind k, int32_t owner) const {
  switch (k) {
    case PortKind::kNvlinkOut:
    case PortKind::kNvlinkIn:
    case PortKind::kPcieH2D:
    case PortKind::kPcieD2H:
    case PortKind::kDeviceCopy:
      RESHARD_CHECK(owner >= 0 && owner < gpus_, fmt::format("GPU {} outside the cluster's {}", owner, gpus_));
      return kGpuPorts * owner + static_cast<int32_t>(k);
    case PortKind::kNicOut:
    case PortKind::kNicIn:
      RESHARD_CHECK(owner >= 0 && owner < nics_,
                    fmt::format("NIC {} outside the cluster's {} (nodes x nics_per_node)", owner, nics_));
      return kGpuPorts * gpus_ + 2 * owner + (k == PortKind::kNicIn ? 1 : 0);
  }
  RESHARD_CHECK(false, "unknown port kind");
  return -1;
}

int32_t PortModel::Owner(int32_t port) const {
  if (port < kGpuPorts * gpus_) return port / kGpuPorts;
  return (port - kGpuPorts * gpus_) / 2;
}

LinkClass PortModel::Class(int32_t port) const {
  switch (kind_[port]) {
    case PortKind::kNvlinkOut:
    case PortKind::kNvlinkIn: return LinkClass::kNvlink;
    case PortKind::kPcieH2D:
    case PortKind::kPcieD2H: return LinkClass::kPcie;
    case PortKind::kDeviceCopy: return LinkClass::kLocal;
    case PortKind::kNicOut:
    case PortKind::kNicIn: return LinkClass::kNetwork;
  }
  return LinkClass::kLocal;
}

std::string PortModel::Name(int32_t port) const {
  const PortKind k = kind_[port];
  if (k == PortKind::kNicOut || k == PortKind::kNicIn) {
    return fmt::format("nic{}.{}", Owner(port), k == PortKind::kNicOut ? "out" : "in");
  }
  return fmt::format("gpu{}.{}", Owner(port), PortKindName(k));
}

double PortModel::BytesPerS(int32_t port) const {
  return ProfileOf(cluster_, Class(port)).bytes_per_s;
}

double PortModel::DuplexBytesPerS(int32_t port) const {
  const LinkProfile& l = ProfileOf(cluster_, Class(port));
  if (kind_[port] == PortKind::kDeviceCopy || l.duplex_bytes_per_s <= 0) return l.bytes_per_s;
  return l.duplex_bytes_per_s;
}

int32_t PortModel::Reverse(int32_t port) const {
  switch (kind_[port]) {
    case PortKind::kNvlinkOut:
    case PortKind::kPcieH2D:
    case PortKind::kNicOut: return port + 1;
    case PortKind::kNvlinkIn:
    case PortKind::kPcieD2H:
    case PortKind::kNicIn: return port - 1;
    case PortKind::kDeviceCopy: return -1;
  }
  return -1;
}

bool PortModel::Coupled(int32_t port) const {
  return Reverse(port) >= 0 && DuplexBytesPerS(port) != BytesPerS(port);
}

Route PortModel::Transfer(int32_t src_gpu, int32_t dst_gpu) const {
  RESHARD_CHECK(src_gpu >= 0 && src_gpu < gpus_ && dst_gpu >= 0 && dst_gpu < gpus_,
                fmt::format("transfer {} -> {} outside the cluster's {} GPUs", src_gpu, dst_gpu, gpus_));
  Route r;
  r.link_class = cluster_.Between(src_gpu, dst_gpu);
  switch (r.link_class) {
    case LinkClass::kLocal:
      r.num_ports = 1;
      r.ports[0] = Port(PortKind::kDeviceCopy, src_gpu);
      break;
    case LinkClass::kNvlink:
      r.num_ports = 2;
      r.ports = {Port(PortKind::kNvlinkOut, src_gpu), Port(PortKind::kNvlinkIn, dst_gpu)};
      break;
    case LinkClass::kNetwork:
      r.num_ports = 2;
      r.ports = {Port(PortKind::kNicOut, cluster_.NicOf(src_gpu)), Port(PortKind::kNicIn, cluster_.NicOf(dst_gpu))};
      break;
    case LinkClass::kPcie:
      RESHARD_CHECK(false, "Cluster::Between returned kPcie");
  }
  return r;
}

Route PortModel::DeviceCopy(int32_t gpu) const {
  return OnePortRoute(LinkClass::kLocal, Port(PortKind::kDeviceCopy, gpu), /*pageable=*/false);
}

Route PortModel::Offload(int32_t gpu, bool pinned) const {
  return OnePortRoute(LinkClass::kPcie, Port(PortKind::kPcieD2H, gpu), !pinned);
}

Route PortModel::Reload(int32_t gpu, bool pinned) const {
  return OnePortRoute(LinkClass::kPcie, Port(PortKind::kPcieH2D, gpu), !pinned);
}

Route PortModel::OfOp(const Plan& /*p*/, const Op& op) const {
  switch (op.kind) {
    case OpKind::kSend: return Transfer(op.gpu, op.peer);
    case OpKind::kRecv: return Transfer(op.peer, op.gpu);
    case OpKind::kCopy:
    case OpKind::kQuantize: return DeviceCopy(op.gpu);
    // Every plan host buffer is pinned (PlanBuffer has no pageable kind).
    case OpKind::kOffload: return Offload(op.gpu, /*pinned=*/true);
    case OpKind::kReload: return Reload(op.gpu, /*pinned=*/true);
    case OpKind::kAlloc:
    case OpKind::kFree: return Route{};
  }
  return Route{};
}

const LinkProfile& PortModel::Profile(const Route& r) const {
  return ProfileOf(cluster_, r.link_class, r.pageable);
}

double PortModel::FlowCapBytesPerS(const Route& r, int64_t bytes) const {
  const LinkProfile& l = Profile(r);
  return l.bytes_per_s * l.Efficiency(bytes);
}

std::vector<int64_t> PortBytes(const PortModel& m, const Plan& p) {
  std::vector<int64_t> bytes(m.NumPorts(), 0);
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree || op.kind == OpKind::kRecv) continue;
    const Route r = m.OfOp(p, op);
    const int64_t b = op.Bytes();
    for (int32_t i = 0; i < r.num_ports; ++i) bytes[r.ports[i]] += b;
  }
  return bytes;
}

double DuplexPairSeconds(double a, double b, double peak, double duplex) {
  const double lo = std::min(a, b), hi = std::max(a, b);
  if (lo <= 0) return hi / peak;
  if (duplex > peak / 2) return lo / duplex + (hi - lo) / peak;
  return (lo + hi) / peak;
}

double PortSeconds(const PortModel& m, int32_t port, const std::vector<int64_t>& bytes) {
  const double mine = static_cast<double>(bytes[port]);
  if (mine <= 0) return 0;
  const double peak = m.BytesPerS(port);
  RESHARD_CHECK(peak > 0, fmt::format("port {} carries {} bytes but has no bandwidth", m.Name(port), bytes[port]));
  const int32_t rev = m.Reverse(port);
  const double other = rev >= 0 ? static_cast<double>(bytes[rev]) : 0;
  if (rev < 0 || other <= 0 || !m.Coupled(port)) return mine / peak;
  // Both directions carry bytes: the pair's LP optimum (see the header).
  return DuplexPairSeconds(mine, other, peak, m.DuplexBytesPerS(port));
}

PortBound LowerBoundOfLoads(const PortModel& m, const std::vector<int64_t>& bytes) {
  RESHARD_CHECK(static_cast<int32_t>(bytes.size()) == m.NumPorts(), "one load per port");
  PortBound b;
  for (int32_t port = 0; port < m.NumPorts(); ++port) {
    if (bytes[port] <= 0) continue;
    const double s = PortSeconds(m, port, bytes);
    // Strictly greater: ties keep the lowest port id (deterministic).
    if (s > b.time_s || b.port < 0) {
      b.time_s = s;
      b.port = port;
      b.port_bytes = bytes[port];
    }
  }
  if (b.port >= 0) b.port_name = m.Name(b.port);
  return b;
}

PortBound LowerBound(const Plan& p) {
  const PortModel m(p.cluster);
  return LowerBoundOfLoads(m, PortBytes(m, p));
}

}  // namespace reshard
