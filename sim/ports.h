// The port model shared by the simulator and the planner.
//
// A port is one direction of one physical resource with a capacity in
// bytes/s. Per GPU: NVLink egress and ingress (Cluster::nvlink), PCIe
// host->device and device->host (Cluster::pcie), and a device-copy port
// (Cluster::device_copy). Per NIC (Cluster::NicOf): egress and ingress
// (Cluster::network). A transfer is a flow over the ports of its route:
//   send/recv a->b, Between(a,b) = kNvlink:  nvlink_out(a), nvlink_in(b)
//                  Between(a,b) = kNetwork: nic_out(NicOf(a)), nic_in(NicOf(b))
//                  a == b (kLocal):          device_copy(a)
//   kCopy -> device_copy(gpu); kOffload -> pcie_d2h(gpu); kReload -> pcie_h2d(gpu).
// Network flows use the NICs of both ends, not NVLink. Duplex: when both
// directions of a GPU's NVLink (of a NIC, of a GPU's PCIe) carry flows at
// once, each direction has duplex_bytes_per_s instead of bytes_per_s.
//
// Device copies: device_copy.bytes_per_s is copy throughput, i.e. bytes copied
// per second as cudaMemcpy D2D / nvbandwidth report it (each byte is read once
// and written once, so HBM traffic is twice that). A B-byte copy occupies the
// port for B / bytes_per_s.
//
// The routing bound (DESIGN.md's lower bound of one plan's routing; the bound
// over every routing is sim/topology_bound.h): max over ports of bytes /
// bandwidth. For a duplex pair carrying e bytes one way and i the other
// (e >= i), with peak P and duplex rate D, the least time is the LP optimum
//   T = i/D + (e-i)/P   if D > P/2 (overlap the smaller direction fully),
//   T = (e+i)/P         otherwise,
// which is e/D in the balanced case e == i (DESIGN's "duplex rate where both
// directions carry bytes") and never exceeds what the simulator can achieve.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/cluster.h"
#include "plan/plan.h"

namespace reshard {

enum class PortKind : uint8_t { kNvlinkOut, kNvlinkIn, kPcieH2D, kPcieD2H, kDeviceCopy, kNicOut, kNicIn };
std::string_view PortKindName(PortKind k);  // "nvlink_out", "nvlink_in", "pcie_h2d", "pcie_d2h", "copy", "nic_out", "nic_in"

// The ports one transfer crosses (one or two), its link class and whether
// PCIe traffic is pageable (plan host buffers are pinned: pageable is false).
struct Route {
  LinkClass link_class = LinkClass::kLocal;
  int32_t num_ports = 0;
  std::array<int32_t, 4> ports{-1, -1, -1, -1};  // the simulator adds the GPUs' copy ports to transfers
  bool pageable = false;
  friend bool operator==(const Route&, const Route&) = default;
};

class PortModel {
 public:
  explicit PortModel(const Cluster& c);

  const Cluster& cluster() const { return cluster_; }
  int32_t NumPorts() const { return static_cast<int32_t>(kind_.size()); }
  int32_t Nics() const { return nics_; }

  // Port ids: GPU g's ports are 5g .. 5g+4 (nvlink_out, nvlink_in, pcie_h2d,
  // pcie_d2h, copy), then NIC n's are 5G + 2n (out) and 5G + 2n + 1 (in).
  int32_t Port(PortKind k, int32_t owner) const;
  PortKind Kind(int32_t port) const { return kind_[port]; }
  int32_t Owner(int32_t port) const;         // the GPU, or the NIC index
  LinkClass Class(int32_t port) const;       // kNvlink, kPcie, kLocal (copy), kNetwork
  std::string Name(int32_t port) const;      // "gpu3.nvlink_out", "nic5.nic_in"
  double BytesPerS(int32_t port) const;      // peak capacity
  // Capacity per direction while the reverse direction also carries flows;
  // equals BytesPerS when the profile has no duplex penalty (0 = same).
  double DuplexBytesPerS(int32_t port) const;
  int32_t Reverse(int32_t port) const;       // the opposite direction; -1 for copy ports
  // True when the port's capacity depends on whether its reverse is busy.
  bool Coupled(int32_t port) const;

  Route Transfer(int32_t src_gpu, int32_t dst_gpu) const;  // a send/recv pair
  Route DeviceCopy(int32_t gpu) const;
  Route Offload(int32_t gpu, bool pinned = true) const;    // device -> host
  Route Reload(int32_t gpu, bool pinned = true) const;     // host -> device
  // Route of a plan op: kSend/kRecv (the pair's route, sender first),
  // kCopy, kOffload, kReload. Alloc/free have no route (num_ports == 0).
  Route OfOp(const Plan& p, const Op& op) const;

  const LinkProfile& Profile(const Route& r) const;
  // Per-flow ceiling: the link class's peak × Efficiency(bytes) (bytes/s).
  double FlowCapBytesPerS(const Route& r, int64_t bytes) const;

 private:
  Cluster cluster_;
  int32_t gpus_ = 0, nics_ = 0;
  std::vector<PortKind> kind_;
};

const LinkProfile& ProfileOf(const Cluster& c, LinkClass cls, bool pageable = false);

// The DESIGN lower bound of a set of per-port loads.
struct PortBound {
  double time_s = 0;        // 0 for a plan that moves nothing
  int32_t port = -1;        // the binding port (-1 when nothing moves)
  std::string port_name;
  int64_t port_bytes = 0;   // bytes the binding port must carry
};

// Bytes each port must carry for plan `p` (indexed by port id). A send/recv
// pair counts once (from its send).
std::vector<int64_t> PortBytes(const PortModel& m, const Plan& p);
// The least seconds of a coupled port pair carrying `a` bytes one way and `b`
// the other, at `peak` bytes/s each way alone and `duplex` each way while both
// carry bytes: the LP optimum above. O(1).
double DuplexPairSeconds(double a, double b, double peak, double duplex);
// Seconds port `port` needs at least for its bytes, given its reverse's bytes.
double PortSeconds(const PortModel& m, int32_t port, const std::vector<int64_t>& bytes);
PortBound LowerBoundOfLoads(const PortModel& m, const std::vector<int64_t>& bytes);
// max over ports of (bytes / bandwidth), duplex-aware. O(ops + ports).
PortBound LowerBound(const Plan& p);

}  // namespace reshard
