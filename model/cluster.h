// The cluster: nodes, GPUs, NVLink domains, links and memory — as data with units.
//
// Link performance lives in LinkProfile (latency, peak bandwidth, and a
// size-dependent efficiency curve, as NCCL's channel ramp-up makes small
// transfers slow). Presets carry datasheet or measured numbers (`measured`
// says which); a calibration profile (JSON, written by `reshard calibrate`)
// replaces them. Every field can be overridden from the scenario.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/host_costs.h"

namespace reshard {

enum class LinkClass : uint8_t { kLocal, kNvlink, kNetwork, kPcie };
std::string_view LinkClassName(LinkClass c);  // "local", "nvlink", "network", "pcie"

struct EfficiencyPoint {
  int64_t bytes;       // transfer size
  double fraction;     // achieved / peak bandwidth at that size, in (0, 1]
  friend bool operator==(const EfficiencyPoint&, const EfficiencyPoint&) = default;
};

struct LinkProfile {
  int64_t latency_ns = 0;              // per-op fixed cost
  double bytes_per_s = 0;              // peak, one direction
  double duplex_bytes_per_s = 0;       // per direction when both directions run at once (0 = same as bytes_per_s)
  std::vector<EfficiencyPoint> efficiency;  // sorted by bytes; empty = always 1
  // While both directions carry transfers: fraction of the duplex rate
  // (duplex_bytes_per_s, or bytes_per_s when 0) one direction's transfer
  // reaches at that size (NCCL's both-ways ramp is slower than one way's).
  // Sorted by bytes; empty = DuplexEfficiency below falls back to the one-way curve.
  std::vector<EfficiencyPoint> duplex_efficiency;
  // Transfers over this link also flow through both GPUs' device-copy ports:
  // NCCL's kernels share SMs and HBM with copy kernels, so a copy running
  // beside a transfer gets what the transfer leaves of the copy rate.
  bool shares_copy_port = false;
  // Ops through one NIC start at least this far apart: each network op is
  // posted by its GPU's NCCL proxy thread, one after another, on both the
  // sending and the receiving side (0: no such limit). An op alone pays only
  // latency_ns.
  int64_t op_gap_ns = 0;

  // Efficiency at `bytes`: log-linear interpolation between points, clamped at the ends.
  double Efficiency(int64_t bytes) const;
  // The same over duplex_efficiency; when that is empty, min(1, bytes_per_s ×
  // Efficiency(bytes) / duplex rate), i.e. the one-way cap limited by the duplex
  // rate. A both-ways transfer then takes latency + bytes / (duplex rate × this).
  double DuplexEfficiency(int64_t bytes) const;
  friend bool operator==(const LinkProfile&, const LinkProfile&) = default;
};

// Fixed memory terms the simulator adds to the plan's own buffers.
struct MemoryOverheads {
  int64_t cuda_context_bytes = 0;      // per GPU
  int64_t nccl_bytes_per_peer = 0;     // per connected peer (all channels)
  friend bool operator==(const MemoryOverheads&, const MemoryOverheads&) = default;
};

struct Cluster {
  std::string name;                    // preset name or "custom"
  int32_t nodes = 1;
  int32_t gpus_per_node = 8;
  int32_t nvlink_domain_nodes = 1;     // nodes per NVLink domain (1 = a node; 18 = GB200 NVL72 rack)
  int32_t nics_per_node = 0;
  int64_t gpu_memory_bytes = 0;        // per GPU
  int64_t host_memory_bytes = 0;       // per node
  LinkProfile nvlink;                  // per GPU port (egress = ingress capacity)
  LinkProfile network;                 // per NIC
  LinkProfile pcie;                    // per GPU, pinned host<->device, each way
  LinkProfile pcie_pageable;           // per GPU, pageable host memory
  LinkProfile device_copy;             // on-device copies (copy engines / copy kernels)
  MemoryOverheads overheads;
  HostCosts host;                      // reshard's executor issuing a plan (model/host_costs.h)
  HostCosts host_python;               // a Megatron-style Python stack issuing the same ops
  CopyKernelProfile copy_kernel;       // copy kernel rates by run length and grid share
  QuantizeKernelProfile quantize_kernel;  // fp8 quantize kernel rates by launch size
  bool measured = false;               // numbers come from `reshard calibrate`, not datasheets
  std::string profile_source;          // "preset h200-x2 (DESIGN measured ceilings)", or the profile path
  // The network link's numbers (size curve, latency, op_gap_ns) were measured
  // across nodes by `reshard calibrate --network` (a profile's
  // "network_calibration"); false: the preset's estimates from published
  // sources, or a profile / scenario that gives them without that record.
  // network_source says how and where (hosts, ranks, date). Labels: neither
  // enters the fingerprint.
  bool network_measured = false;
  std::string network_source;

  int32_t Gpus() const { return nodes * gpus_per_node; }
  int32_t NodeOf(int32_t gpu) const { return gpu / gpus_per_node; }
  int32_t DomainOf(int32_t gpu) const { return NodeOf(gpu) / nvlink_domain_nodes; }
  int32_t NicOf(int32_t gpu) const;    // node-global NIC index a GPU uses (GPUs spread evenly over NICs)
  LinkClass Between(int32_t a, int32_t b) const;  // kLocal, kNvlink (same domain) or kNetwork
  const LinkProfile& Link(LinkClass c) const;

  // Stable hash of the topology, memory and link numbers; plans record it so a
  // plan made for another cluster is refused.
  std::string Fingerprint() const;
  friend bool operator==(const Cluster&, const Cluster&) = default;
};

std::vector<std::string> ClusterPresetNames();  // h200-x2, dgx-h100, dgx-h200, gb200-nvl72, ...
Cluster ClusterPreset(const std::string& name, const std::string& file = "<cluster>",
                      const std::string& field = "cluster.preset");

// Bounds on what a cluster may say, so that counts, bytes and nanoseconds
// derived from it cannot overflow and planning cannot run away: GPUs in all,
// memory per GPU or node, link bandwidth (when present) and fixed costs.
inline constexpr int64_t kMaxClusterGpus = int64_t{1} << 17;
inline constexpr int64_t kMaxMemoryBytes = int64_t{1} << 50;  // 1 PiB
inline constexpr double kMinLinkBytesPerS = 1e6;
inline constexpr double kMaxLinkBytesPerS = 1e16;
inline constexpr int64_t kMaxLinkFixedNs = int64_t{86'400} * 1'000'000'000;  // a day

// Checks counts, sizes and that every link the topology needs has bandwidth
// (NVLink when a domain holds several GPUs, the network when there are several
// domains). Throws InputError(file, field + ".<name>", ...).
void ValidateCluster(const Cluster& c, const std::string& file, const std::string& field = "cluster");

// "" when the nodes fill whole NVLink domains; else a warning naming the
// numbers: DomainOf then makes the last domain a partial one (128 GB200
// nodes in domains of 18: 7 full racks and one of 2 nodes), which a real
// allocation rarely is.
std::string PartialDomainWarning(const Cluster& c);

// JSON with units in field names (bytes, bytes_per_s, latency_ns). FromJson
// throws InputError(file, field, ...) on bad or missing fields.
void to_json(nlohmann::json& j, const Cluster& c);
Cluster ClusterFromJson(const nlohmann::json& j, const std::string& file);
void to_json(nlohmann::json& j, const LinkProfile& l);
LinkProfile LinkProfileFromJson(const nlohmann::json& j, const std::string& file, const std::string& field);

// Calibration profile: {"name", "measured", "links": {"nvlink": LinkProfile, ...},
// "memory": {"cuda_context_bytes", "nccl_bytes_per_peer"}, "host": HostCosts,
// "host_python": HostCosts, "copy_kernel": CopyKernelProfile,
// "network_calibration": {"measured", "source", "hosts", "ranks"}}, each part
// optional. Applied onto a cluster. A profile that gives links.network without
// a measured "network_calibration" leaves network_measured false.
void ApplyProfileFile(Cluster& c, const std::string& path);
void ApplyProfileJson(Cluster& c, const nlohmann::json& j, const std::string& path);
nlohmann::json ProfileJson(const Cluster& c);

}  // namespace reshard
