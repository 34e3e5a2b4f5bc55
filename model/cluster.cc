// Cluster presets (as a data table), link efficiency curves, fingerprints and
// the JSON forms of clusters and calibration profiles.
#include "model/cluster.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/input_file.h"
#include "model/hash.h"
#include "model/json_fields.h"

namespace reshard {

using nlohmann::json;
using namespace json_fields;  // NOLINT: the field readers shared by model/ parsers

std::string_view LinkClassName(LinkClass c) {
  switch (c) {
    case LinkClass::kLocal: return "local";
    case LinkClass::kNvlink: return "nvlink";
    case LinkClass::kNetwork: return "network";
    case LinkClass::kPcie: return "pcie";
  }
  RESHARD_CHECK(false, "unknown LinkClass");
  return "";
}

// Log-linear interpolation: fraction is linear in log(bytes) between points,
// clamped to the first / last point outside their range. O(log points).
namespace {
double Interpolate(const std::vector<EfficiencyPoint>& efficiency, int64_t bytes) {
  if (efficiency.empty()) return 1.0;
  if (bytes <= efficiency.front().bytes) return efficiency.front().fraction;
  if (bytes >= efficiency.back().bytes) return efficiency.back().fraction;
  auto hi = std::upper_bound(efficiency.begin(), efficiency.end(), bytes,
                             [](int64_t b, const EfficiencyPoint& p) { return b < p.bytes; });
  auto lo = hi - 1;
  double t = (std::log(static_cast<double>(bytes)) - std::log(static_cast<double>(lo->bytes))) /
             (std::log(static_cast<double>(hi->bytes)) - std::log(static_cast<double>(lo->bytes)));
  return lo->fraction + t * (hi->fraction - lo->fraction);
}
}  // namespace

double LinkProfile::Efficiency(int64_t bytes) const { return Interpolate(efficiency, bytes); }

double LinkProfile::DuplexEfficiency(int64_t bytes) const {
  if (!duplex_efficiency.empty()) return Interpolate(duplex_efficiency, bytes);
  const double duplex = duplex_bytes_per_s > 0 ? duplex_bytes_per_s : bytes_per_s;
  if (!(duplex > 0)) return 1.0;
  return std::min(1.0, bytes_per_s * Efficiency(bytes) / duplex);
}

int32_t Cluster::NicOf(int32_t gpu) const {
  if (nics_per_node <= 0) return -1;
  int32_t local = gpu % gpus_per_node;
  // GPUs spread evenly: with 8 GPUs and 4 NICs, GPUs 0,1 use NIC 0, 2,3 NIC 1, ...
  int64_t nic_in_node = static_cast<int64_t>(local) * nics_per_node / gpus_per_node;
  return NodeOf(gpu) * nics_per_node + static_cast<int32_t>(nic_in_node);
}

LinkClass Cluster::Between(int32_t a, int32_t b) const {
  if (a == b) return LinkClass::kLocal;
  return DomainOf(a) == DomainOf(b) ? LinkClass::kNvlink : LinkClass::kNetwork;
}

const LinkProfile& Cluster::Link(LinkClass c) const {
  switch (c) {
    case LinkClass::kLocal: return device_copy;
    case LinkClass::kNvlink: return nvlink;
    case LinkClass::kNetwork: return network;
    case LinkClass::kPcie: return pcie;
  }
  RESHARD_CHECK(false, "unknown LinkClass");
  return nvlink;
}

namespace {

void AppendLink(std::string& out, std::string_view name, const LinkProfile& l) {
  // fmt's "{}" prints the shortest string that round-trips a double: canonical.
  out += fmt::format("{}:latency_ns={};bytes_per_s={};duplex_bytes_per_s={};efficiency=", name, l.latency_ns,
                     l.bytes_per_s, l.duplex_bytes_per_s);
  for (const auto& p : l.efficiency) out += fmt::format("({},{})", p.bytes, p.fraction);
  // Only when present, so fingerprints of profiles without it are unchanged.
  if (!l.duplex_efficiency.empty()) out += ";duplex_efficiency=";
  for (const auto& p : l.duplex_efficiency) out += fmt::format("({},{})", p.bytes, p.fraction);
  if (l.shares_copy_port) out += ";shares_copy_port";
  if (l.op_gap_ns != 0) out += fmt::format(";op_gap_ns={}", l.op_gap_ns);
  out += "\n";
}

}  // namespace

// Hashes what changes a plan's validity or timing; labels (name, measured,
// profile_source) do not enter, so a renamed copy of a cluster matches.
std::string Cluster::Fingerprint() const {
  std::string s = fmt::format(
      "reshard-cluster-v1\nnodes={}\ngpus_per_node={}\nnvlink_domain_nodes={}\nnics_per_node={}\n"
      "gpu_memory_bytes={}\nhost_memory_bytes={}\ncuda_context_bytes={}\nnccl_bytes_per_peer={}\n",
      nodes, gpus_per_node, nvlink_domain_nodes, nics_per_node, gpu_memory_bytes, host_memory_bytes,
      overheads.cuda_context_bytes, overheads.nccl_bytes_per_peer);
  AppendLink(s, "nvlink", nvlink);
  AppendLink(s, "network", network);
  AppendLink(s, "pcie", pcie);
  AppendLink(s, "pcie_pageable", pcie_pageable);
  AppendLink(s, "device_copy", device_copy);
  // Only when present, so fingerprints of clusters without them are unchanged.
  s += FingerprintText("host", host);
  s += FingerprintText("host_python", host_python);
  s += FingerprintText(copy_kernel);
  s += FingerprintText(quantize_kernel);
  return fmt::format("{:016x}", Fnv1a(s));
}

// ---------------------------------------------------------------------------
// Presets, as data. Bandwidths in GB/s (1e9 bytes/s) as datasheets and NCCL
// tests print them; memory in MiB as nvidia-smi prints it.

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

struct CurvePointRow {
  int64_t bytes;
  double achieved_gb_per_s;  // measured (or estimated) end-to-end, latency included
};

struct LinkRow {
  double gb_per_s = 0;         // peak, one direction
  double duplex_gb_per_s = 0;  // per direction, both directions busy (0 = same)
  double latency_us = 0;       // per-op floor
  std::vector<CurvePointRow> curve;
  double op_gap_us = 0;        // ops through one port start at least this far apart (LinkProfile::op_gap_ns)
};

struct PresetRow {
  const char* name;
  int32_t nodes;
  int32_t gpus_per_node;
  int32_t nvlink_domain_nodes;
  int32_t nics_per_node;
  int64_t gpu_memory_mib;
  int64_t host_memory_gib;
  LinkRow nvlink, network, pcie, pcie_pageable, device_copy;
  int64_t cuda_context_mib;
  int64_t nccl_per_peer_mib;
  bool measured;
  const char* source;
};

// Turns measured end-to-end throughput into the efficiency the simulator uses
// with time = latency + bytes / (peak * efficiency): the latency is removed
// first so it is not counted twice. Fractions are capped at 1.
std::vector<EfficiencyPoint> CurveFromThroughput(const LinkRow& r) {
  std::vector<EfficiencyPoint> out;
  const double peak = r.gb_per_s * 1e9;
  for (const auto& p : r.curve) {
    double total_s = static_cast<double>(p.bytes) / (p.achieved_gb_per_s * 1e9);
    double wire_s = total_s - r.latency_us * 1e-6;
    double fraction = wire_s > 0 ? static_cast<double>(p.bytes) / wire_s / peak : 1.0;
    out.push_back({p.bytes, std::min(1.0, fraction)});
  }
  return out;
}

LinkProfile LinkFromRow(const LinkRow& r) {
  LinkProfile l;
  l.latency_ns = std::llround(r.latency_us * 1000);
  l.bytes_per_s = r.gb_per_s * 1e9;
  l.duplex_bytes_per_s = r.duplex_gb_per_s * 1e9;
  l.efficiency = CurveFromThroughput(r);
  l.op_gap_ns = std::llround(r.op_gap_us * 1000);
  return l;
}

// NCCL send/recv over NVLink4 NV18 measured on 2x H200 (DESIGN "Measured ceilings").
const std::vector<CurvePointRow> kNvlink4Measured = {
    {4 * kMiB, 92}, {16 * kMiB, 190}, {64 * kMiB, 295}, {256 * kMiB, 347}, {kGiB, 365}};
// NVLink5 (GB200): twice NVLink4's links per GPU; the ramp scaled by 2 (estimate).
const std::vector<CurvePointRow> kNvlink5Estimate = {
    {4 * kMiB, 184}, {16 * kMiB, 380}, {64 * kMiB, 590}, {256 * kMiB, 694}, {kGiB, 730}};
// NCCL send/recv over one 400G NDR NIC, 48 GB/s peak ("46-48GB/s per NIC",
// https://github.com/NVIDIA/nccl-tests/issues/290). No published GPUDirect
// curve by size was found; this is the lower of two cited shapes (an estimate
// until `calibrate` measures it across nodes): latency + bandwidth with NCCL
// sendrecv's 20.4 us small-message latency over ConnectX-7, and that same
// measurement's curve normalised to its plateau (uccl-project/uccl
// experimental/lite/lite-collective/doc/p2p-design.md, 2x L4 + CX-7).
const std::vector<CurvePointRow> kNdr400Estimate = {
    {64 * 1024, 3.0},  {256 * 1024, 10.1}, {512 * 1024, 16.8}, {kMiB, 25.0},      {4 * kMiB, 34.1},
    {16 * kMiB, 39.8}, {64 * kMiB, 45.1},  {256 * kMiB, 46.6}, {kGiB, 47.5}};
// 800G XDR (ConnectX-8): twice the peak; the same fractions at twice the
// sizes (latency x bandwidth doubles; estimate).
const std::vector<CurvePointRow> kXdr800Estimate = {
    {128 * 1024, 6.0}, {512 * 1024, 20.2}, {kMiB, 33.6},       {2 * kMiB, 49.9},      {8 * kMiB, 68.2},
    {32 * kMiB, 79.7}, {128 * kMiB, 90.2}, {512 * kMiB, 93.1}, {2 * kGiB, 95.0}};
// Network ops start at least 3 us apart per NIC: NCCL's own cost model charges
// a network post 1 us on Intel x86 (2 us on AMD), x3 for the Simple protocol
// p2p uses (NCCL src/graph/tuning.cc, NCCL_NET_OVERHEAD); one proxy thread
// posts them one after another. An estimate from NCCL's model, not measured.
constexpr double kNetOpGapUs = 3.0;

// Host issue costs of reshard's executor and of Megatron-Core's Python issue
// path, measured on one H200 host (reshard calibrate and
// bench/gpu/megatron_issue.py, bench/results/2026-12-01-h200-host-costs/); a
// calibration profile replaces them with the user's own host. The first
// refit's NCCL connection per GPU pair and side is an estimate: 10 ms, the
// low end of the 10-100 ms first sends reported in
// https://github.com/NVIDIA/nccl/issues/415 (NVIDIA measured 214 ms for a
// first ncclSend on a DGX H100 including communicator setup,
// https://github.com/NVIDIA/nccl/issues/1487).
HostCosts PresetHostCosts() {
  HostCosts h;
  h.event_record_ns = 1090;
  h.stream_wait_ns = 268;
  h.kernel_launch_ns = 3728;
  h.memcpy_ns = 1495;
  h.alloc_ns = 772;
  h.free_ns = 453;
  h.nccl_op_ns = 167;
  h.nccl_group_ns = 44853;
  h.nccl_group_op_ns = 193;
  h.event_gpu_ns = 3658;  // bench/results/2026-12-01-h200-whole-refit-events
  h.nccl_connect_ns = 10'000'000;
  h.pin_bytes_per_s = 1.614e9;
  h.map_bytes_per_s = 9.75e11;
  h.source =
      "measured on one H200 host, reshard calibrate 2026-12-01 (bench/results/2026-12-01-h200-host-costs); "
      "nccl_connect_ns estimated from NVIDIA/nccl#415";
  return h;
}
HostCosts PresetPythonCosts() {
  HostCosts h;
  h.event_record_ns = 8024;
  h.stream_wait_ns = 9069;
  h.kernel_launch_ns = 18954;  // a slice + .contiguous() per piece
  h.memcpy_ns = 6117;
  h.alloc_ns = 3592;
  h.free_ns = 770;
  h.nccl_op_ns = 9434;         // a P2POp through batch_isend_irecv
  h.nccl_group_ns = 22603;
  h.nccl_group_op_ns = 130;
  h.nccl_connect_ns = 10'000'000;
  h.pin_bytes_per_s = 1.614e9;
  h.map_bytes_per_s = 9.75e11;
  h.source =
      "measured on one H200 host with PyTorch 2.11, bench/gpu/megatron_issue.py 2026-12-01 "
      "(bench/results/2026-12-01-h200-host-costs); cold terms as the executor's";
  return h;
}

// CUDA context: ~0.5 GiB per GPU with CUDA 12 lazy loading (typical of
// PyTorch processes on Hopper). NCCL per peer: 2 p2p channels per peer x 4 MiB
// Simple buffers, both directions, plus LL/LL128 buffers: ~32 MiB. Both are
// estimates that `reshard calibrate` replaces (ncclCommMemStats).
constexpr int64_t kCudaContextMiB = 512;
constexpr int64_t kNcclPerPeerMiB = 32;

const std::vector<PresetRow>& PresetTable() {
  static const std::vector<PresetRow> table = {
      {.name = "h200-x2",
       .nodes = 1,
       .gpus_per_node = 2,
       .nvlink_domain_nodes = 1,
       .nics_per_node = 0,
       // What cudaMemGetInfo reports as total on an H200 (measured 2026-11-30):
       // nvidia-smi's 143771 MiB less the 616 MiB the driver keeps. Planning
       // against nvidia-smi's figure let a plan overrun the GPU by 0.6 GiB.
       .gpu_memory_mib = 143155,
       .host_memory_gib = 256,
       .nvlink = {.gb_per_s = 365, .duplex_gb_per_s = 358, .latency_us = 23, .curve = kNvlink4Measured},
       .network = {},
       .pcie = {.gb_per_s = 55, .latency_us = 10, .curve = {}},
       .pcie_pageable = {.gb_per_s = 6.6, .latency_us = 10, .curve = {}},
       .device_copy = {.gb_per_s = 2100, .latency_us = 5, .curve = {}},
       .cuda_context_mib = kCudaContextMiB,
       .nccl_per_peer_mib = kNcclPerPeerMiB,
       .measured = true,
       .source = "preset h200-x2 (DESIGN measured ceilings: NCCL p2p, pinned/pageable PCIe, device copy)"},
      {.name = "dgx-h100",
       .nodes = 1,
       .gpus_per_node = 8,
       .nvlink_domain_nodes = 1,
       .nics_per_node = 8,
       .gpu_memory_mib = 81559,  // nvidia-smi total of one H100 SXM 80GB
       .host_memory_gib = 2048,
       .nvlink = {.gb_per_s = 365, .duplex_gb_per_s = 358, .latency_us = 23, .curve = kNvlink4Measured},
       .network = {.gb_per_s = 48, .latency_us = 12, .curve = kNdr400Estimate, .op_gap_us = kNetOpGapUs},
       .pcie = {.gb_per_s = 55, .latency_us = 10, .curve = {}},
       .pcie_pageable = {.gb_per_s = 6.6, .latency_us = 10, .curve = {}},
       .device_copy = {.gb_per_s = 1450, .latency_us = 5, .curve = {}},  // H200's 2.1 TB/s x HBM 3.35/4.8
       .cuda_context_mib = kCudaContextMiB,
       .nccl_per_peer_mib = kNcclPerPeerMiB,
       .measured = false,
       .source = "preset dgx-h100 (DGX H100 datasheet: 8x H100 80GB, NVLink4 NV18, 8x 400G ConnectX-7; "
                 "NVLink curve from h200-x2 measurements; NIC and PCIe are estimates)"},
      {.name = "dgx-h200",
       .nodes = 1,
       .gpus_per_node = 8,
       .nvlink_domain_nodes = 1,
       .nics_per_node = 8,
       .gpu_memory_mib = 143155,  // H200 141GB: cudaMemGetInfo total, as h200-x2
       .host_memory_gib = 2048,
       .nvlink = {.gb_per_s = 365, .duplex_gb_per_s = 358, .latency_us = 23, .curve = kNvlink4Measured},
       .network = {.gb_per_s = 48, .latency_us = 12, .curve = kNdr400Estimate, .op_gap_us = kNetOpGapUs},
       .pcie = {.gb_per_s = 55, .latency_us = 10, .curve = {}},
       .pcie_pageable = {.gb_per_s = 6.6, .latency_us = 10, .curve = {}},
       .device_copy = {.gb_per_s = 2100, .latency_us = 5, .curve = {}},
       .cuda_context_mib = kCudaContextMiB,
       .nccl_per_peer_mib = kNcclPerPeerMiB,
       .measured = false,
       .source = "preset dgx-h200 (DGX H200 datasheet: 8x H200 141GB, NVLink4 NV18, 8x 400G ConnectX-7; "
                 "NVLink, PCIe and copy numbers from h200-x2 measurements; NIC is an estimate)"},
      {.name = "gb200-nvl72",
       .nodes = 18,
       .gpus_per_node = 4,
       .nvlink_domain_nodes = 18,
       .nics_per_node = 4,
       .gpu_memory_mib = 189471,  // B200 in GB200, marketed 186 GB
       .host_memory_gib = 960,    // 2 Grace CPUs x 480 GB LPDDR5X per tray
       .nvlink = {.gb_per_s = 730, .duplex_gb_per_s = 716, .latency_us = 23, .curve = kNvlink5Estimate},
       .network = {.gb_per_s = 96, .latency_us = 12, .curve = kXdr800Estimate, .op_gap_us = kNetOpGapUs},
       .pcie = {.gb_per_s = 375, .latency_us = 10, .curve = {}},  // NVLink-C2C to Grace
       .pcie_pageable = {.gb_per_s = 50, .latency_us = 10, .curve = {}},
       .device_copy = {.gb_per_s = 3500, .latency_us = 5, .curve = {}},
       .cuda_context_mib = kCudaContextMiB,
       .nccl_per_peer_mib = kNcclPerPeerMiB,
       .measured = false,
       .source = "preset gb200-nvl72 (GB200 NVL72 datasheet: 18 trays x 4 GPUs 186GB, NVLink5 1.8 TB/s "
                 "bidirectional, 4x 800G ConnectX-8 per tray, NVLink-C2C host link; achieved bandwidths "
                 "scaled from NVLink4/NDR measurements, all estimates)"},
  };
  return table;
}

Cluster ClusterFromRow(const PresetRow& r) {
  Cluster c;
  c.name = r.name;
  c.nodes = r.nodes;
  c.gpus_per_node = r.gpus_per_node;
  c.nvlink_domain_nodes = r.nvlink_domain_nodes;
  c.nics_per_node = r.nics_per_node;
  c.gpu_memory_bytes = r.gpu_memory_mib * kMiB;
  c.host_memory_bytes = r.host_memory_gib * kGiB;
  c.nvlink = LinkFromRow(r.nvlink);
  c.nvlink.shares_copy_port = true;  // measured on 2x H200: bench/results/2026-11-30-h200x2-nccl-group-probe/
  c.network = LinkFromRow(r.network);
  c.pcie = LinkFromRow(r.pcie);
  c.pcie_pageable = LinkFromRow(r.pcie_pageable);
  c.device_copy = LinkFromRow(r.device_copy);
  c.overheads.cuda_context_bytes = r.cuda_context_mib * kMiB;
  c.overheads.nccl_bytes_per_peer = r.nccl_per_peer_mib * kMiB;
  c.host = PresetHostCosts();
  c.host_python = PresetPythonCosts();
  c.measured = r.measured;
  c.profile_source = r.source;
  return c;
}

}  // namespace

std::vector<std::string> ClusterPresetNames() {
  std::vector<std::string> names;
  for (const auto& r : PresetTable()) names.emplace_back(r.name);
  return names;
}

Cluster ClusterPreset(const std::string& name, const std::string& file, const std::string& field) {
  for (const auto& r : PresetTable())
    if (name == r.name) return ClusterFromRow(r);
  std::string problem = fmt::format("unknown cluster preset '{}'", name);
  std::string s = Suggest(name, ClusterPresetNames());
  if (!s.empty()) problem += fmt::format(" (did you mean '{}'?)", s);
  problem += fmt::format("; presets: {}", fmt::join(ClusterPresetNames(), ", "));
  throw InputError(file, field, problem);
}

// ---------------------------------------------------------------------------
// Validation.

namespace {

void ValidateLink(const LinkProfile& l, const std::string& file, const std::string& field) {
  // Physical ranges, so that bytes / bandwidth and sums of latencies stay
  // far inside int64 nanoseconds: a link is 0 (absent) or 1 MB/s .. 1e16 B/s;
  // a fixed cost is at most a day.
  auto bandwidth = [&](double v, std::string_view name) {
    if (!std::isfinite(v) || v < 0)
      throw InputError(file, Dot(field, name), fmt::format("must be a finite number >= 0, got {}", v));
    if (v != 0 && (v < kMinLinkBytesPerS || v > kMaxLinkBytesPerS))
      throw InputError(file, Dot(field, name),
                       fmt::format("{:g} B/s is outside [{:g}, {:g}] (0 for no such link)", v, kMinLinkBytesPerS,
                                   kMaxLinkBytesPerS));
  };
  bandwidth(l.bytes_per_s, "bytes_per_s");
  bandwidth(l.duplex_bytes_per_s, "duplex_bytes_per_s");
  auto fixed_ns = [&](int64_t v, std::string_view name) {
    if (v < 0 || v > kMaxLinkFixedNs)
      throw InputError(file, Dot(field, name), fmt::format("must be in [0, {:g}] ns (a day), got {}",
                                                           static_cast<double>(kMaxLinkFixedNs), v));
  };
  fixed_ns(l.latency_ns, "latency_ns");
  fixed_ns(l.op_gap_ns, "op_gap_ns");
  auto check_curve = [&](const std::vector<EfficiencyPoint>& curve, std::string_view name) {
    for (size_t i = 0; i < curve.size(); ++i) {
      const auto& p = curve[i];
      std::string f = fmt::format("{}.{}[{}]", field, name, i);
      if (p.bytes <= 0) throw InputError(file, f + ".bytes", "must be > 0");
      if (!(p.fraction > 0 && p.fraction <= 1)) throw InputError(file, f + ".fraction", "must be in (0, 1]");
      if (i > 0 && p.bytes <= curve[i - 1].bytes)
        throw InputError(file, f + ".bytes", "points must be sorted by strictly increasing bytes");
    }
  };
  check_curve(l.efficiency, "efficiency");
  check_curve(l.duplex_efficiency, "duplex_efficiency");
}

}  // namespace

void ValidateCluster(const Cluster& c, const std::string& file, const std::string& field) {
  auto positive = [&](int64_t v, std::string_view name) {
    if (v <= 0) throw InputError(file, Dot(field, name), fmt::format("must be > 0, got {}", v));
  };
  positive(c.nodes, "nodes");
  positive(c.gpus_per_node, "gpus_per_node");
  positive(c.nvlink_domain_nodes, "nvlink_domain_nodes");
  positive(c.gpu_memory_bytes, "gpu_memory");
  if (c.nics_per_node < 0) throw InputError(file, Dot(field, "nics_per_node"), "must be >= 0");
  if (c.host_memory_bytes < 0) throw InputError(file, Dot(field, "host_memory"), "must be >= 0");
  if (static_cast<int64_t>(c.nodes) * c.gpus_per_node > kMaxClusterGpus)
    throw InputError(file, Dot(field, "nodes"),
                     fmt::format("{} nodes x {} GPUs would need {} GPUs; reshard plans clusters of at most {}",
                                 c.nodes, c.gpus_per_node, static_cast<int64_t>(c.nodes) * c.gpus_per_node,
                                 kMaxClusterGpus));
  if (c.gpu_memory_bytes > kMaxMemoryBytes)
    throw InputError(file, Dot(field, "gpu_memory"),
                     fmt::format("{} bytes is more than 1 PiB per GPU", c.gpu_memory_bytes));
  if (c.host_memory_bytes > kMaxMemoryBytes)
    throw InputError(file, Dot(field, "host_memory"),
                     fmt::format("{} bytes is more than 1 PiB per node", c.host_memory_bytes));
  if (c.overheads.cuda_context_bytes > kMaxMemoryBytes)
    throw InputError(file, Dot(field, "cuda_context"),
                     fmt::format("{} bytes is more than 1 PiB per GPU", c.overheads.cuda_context_bytes));
  if (c.overheads.nccl_bytes_per_peer > kMaxMemoryBytes)
    throw InputError(file, Dot(field, "nccl_per_peer"),
                     fmt::format("{} bytes is more than 1 PiB per peer", c.overheads.nccl_bytes_per_peer));
  ValidateLink(c.nvlink, file, Dot(field, "nvlink"));
  ValidateLink(c.network, file, Dot(field, "network"));
  ValidateLink(c.pcie, file, Dot(field, "pcie"));
  ValidateLink(c.pcie_pageable, file, Dot(field, "pcie_pageable"));
  ValidateLink(c.device_copy, file, Dot(field, "device_copy"));
  // Links that the topology needs must have bandwidth.
  if (c.gpus_per_node * static_cast<int64_t>(c.nvlink_domain_nodes) > 1 && c.nvlink.bytes_per_s <= 0)
    throw InputError(file, Dot(field, "nvlink.bytes_per_s"), "must be > 0: NVLink domains hold several GPUs");
  if (c.nodes > c.nvlink_domain_nodes) {
    if (c.nics_per_node <= 0)
      throw InputError(file, Dot(field, "nics_per_node"),
                       fmt::format("must be > 0: {} nodes span several NVLink domains of {} node(s)", c.nodes,
                                   c.nvlink_domain_nodes));
    if (c.network.bytes_per_s <= 0)
      throw InputError(file, Dot(field, "network.bytes_per_s"),
                       "must be > 0: the cluster spans several NVLink domains");
  }
  if (c.device_copy.bytes_per_s <= 0) throw InputError(file, Dot(field, "device_copy.bytes_per_s"), "must be > 0");
  if (c.pcie.bytes_per_s <= 0) throw InputError(file, Dot(field, "pcie.bytes_per_s"), "must be > 0");
}

std::string PartialDomainWarning(const Cluster& c) {
  const int32_t d = c.nvlink_domain_nodes;
  if (d <= 1 || c.nodes % d == 0) return "";
  const int32_t full = c.nodes / d, rest = c.nodes % d;
  const std::string multiples =
      full > 0 ? fmt::format("{} or {}", full * d, (full + 1) * d) : fmt::format("{}", d);
  return fmt::format(
      "cluster {}: {} nodes is not a multiple of its NVLink domain of {} nodes: planned as {} full domain(s) and one "
      "of {} node(s); set cluster.nodes to a multiple of {} ({}) or cluster.nvlink_domain_nodes to the "
      "allocation's real domain size",
      c.name, c.nodes, d, full, rest, d, multiples);
}

// ---------------------------------------------------------------------------
// JSON.

namespace {


const std::vector<std::string> kLinkNames = {"nvlink", "network", "pcie", "pcie_pageable", "device_copy"};

// The link member of each name in kLinkNames.
LinkProfile Cluster::*LinkMember(const std::string& name) {
  if (name == "nvlink") return &Cluster::nvlink;
  if (name == "network") return &Cluster::network;
  if (name == "pcie") return &Cluster::pcie;
  if (name == "pcie_pageable") return &Cluster::pcie_pageable;
  RESHARD_CHECK(name == "device_copy", name);
  return &Cluster::device_copy;
}

void OverheadsToJson(json& j, const MemoryOverheads& o) {
  j = json{{"cuda_context_bytes", o.cuda_context_bytes}, {"nccl_bytes_per_peer", o.nccl_bytes_per_peer}};
}

void ApplyOverheadsJson(MemoryOverheads& o, const json& j, const std::string& file, const std::string& field,
                        bool require_all) {
  CheckObject(j, file, field);
  CheckKeys(j, file, field, {"cuda_context_bytes", "nccl_bytes_per_peer"});
  auto get = [&](const char* key, int64_t& out) {
    auto it = j.find(key);
    if (it == j.end()) {
      if (require_all) Bad(file, Dot(field, key), "missing field");
      return;
    }
    out = GetInt(*it, file, Dot(field, key));
    if (out < 0) Bad(file, Dot(field, key), "must be >= 0");
    if (out > kMaxMemoryBytes) Bad(file, Dot(field, key), fmt::format("{} bytes is more than 1 PiB", out));
  };
  get("cuda_context_bytes", o.cuda_context_bytes);
  get("nccl_bytes_per_peer", o.nccl_bytes_per_peer);
}

// "host", "host_python", "copy_kernel" and "quantize_kernel" of a cluster or
// profile, when present.
void ApplyCostsJson(Cluster& c, const json& j, const std::string& file, const std::string& field) {
  if (auto it = j.find("host"); it != j.end()) ApplyHostCostsJson(c.host, *it, file, Dot(field, "host"));
  if (auto it = j.find("host_python"); it != j.end())
    ApplyHostCostsJson(c.host_python, *it, file, Dot(field, "host_python"));
  if (auto it = j.find("copy_kernel"); it != j.end())
    c.copy_kernel = CopyKernelProfileFromJson(*it, file, Dot(field, "copy_kernel"));
  if (auto it = j.find("quantize_kernel"); it != j.end())
    c.quantize_kernel = QuantizeKernelProfileFromJson(*it, file, Dot(field, "quantize_kernel"));
}

// Where the network link's numbers come from after a profile is applied:
// its "network_calibration" record ({"measured", "source", "hosts",
// "ranks"}, written by `reshard calibrate --network`), or, when the profile
// gives links.network without one, the profile itself, not marked measured.
// A profile without either leaves the cluster's (the preset's) as they are.
void ApplyNetworkCalibrationJson(Cluster& c, const json& j, const std::string& path) {
  const auto rec = j.find("network_calibration");
  if (rec == j.end()) {
    if (auto links = j.find("links"); links != j.end() && links->contains("network")) {
      c.network_measured = false;
      c.network_source = fmt::format("{}: links.network given without a network_calibration record", path);
    }
    return;
  }
  const std::string f = "network_calibration";
  CheckObject(*rec, path, f);
  CheckKeys(*rec, path, f, {"measured", "source", "hosts", "ranks"});
  const bool measured = GetBool(Need(*rec, "measured", path, f), path, Dot(f, "measured"));
  std::string text = path;
  if (auto it = rec->find("source"); it != rec->end()) text += ": " + GetString(*it, path, Dot(f, "source"));
  std::vector<std::string> hosts;
  if (auto it = rec->find("hosts"); it != rec->end()) {
    if (!it->is_array()) Bad(path, Dot(f, "hosts"), fmt::format("expected an array, got {}", TypeName(*it)));
    for (size_t i = 0; i < it->size(); ++i) hosts.push_back(GetString((*it)[i], path, fmt::format("{}.hosts[{}]", f, i)));
  }
  std::vector<int64_t> ranks;
  if (auto it = rec->find("ranks"); it != rec->end()) {
    if (!it->is_array()) Bad(path, Dot(f, "ranks"), fmt::format("expected an array, got {}", TypeName(*it)));
    for (size_t i = 0; i < it->size(); ++i) {
      ranks.push_back(GetInt((*it)[i], path, fmt::format("{}.ranks[{}]", f, i)));
      if (ranks.back() < 0) Bad(path, fmt::format("{}.ranks[{}]", f, i), "must be >= 0");
    }
  }
  if (!ranks.empty() || !hosts.empty())
    text += fmt::format(" (ranks {} on hosts {})", fmt::join(ranks, ", "), fmt::join(hosts, ", "));
  if (measured && !(j.contains("links") && j.at("links").contains("network")))
    Bad(path, Dot(f, "measured"), "says the network was measured, but the profile has no links.network");
  c.network_measured = measured;
  c.network_source = text;
}

}  // namespace

void to_json(json& j, const LinkProfile& l) {
  json eff = json::array();
  for (const auto& p : l.efficiency) eff.push_back({{"bytes", p.bytes}, {"fraction", p.fraction}});
  j = json{{"latency_ns", l.latency_ns},
           {"bytes_per_s", l.bytes_per_s},
           {"duplex_bytes_per_s", l.duplex_bytes_per_s},
           {"efficiency", eff}};
  if (!l.duplex_efficiency.empty()) {  // only when present: older readers and files stay unchanged
    json duplex = json::array();
    for (const auto& p : l.duplex_efficiency) duplex.push_back({{"bytes", p.bytes}, {"fraction", p.fraction}});
    j["duplex_efficiency"] = duplex;
  }
  if (l.shares_copy_port) j["shares_copy_port"] = true;  // only when set, as above
  if (l.op_gap_ns != 0) j["op_gap_ns"] = l.op_gap_ns;
}

LinkProfile LinkProfileFromJson(const json& j, const std::string& file, const std::string& field) {
  CheckObject(j, file, field);
  CheckKeys(j, file, field,
            {"latency_ns", "bytes_per_s", "duplex_bytes_per_s", "efficiency", "duplex_efficiency", "shares_copy_port",
             "op_gap_ns"});
  LinkProfile l;
  l.latency_ns = GetInt(Need(j, "latency_ns", file, field), file, Dot(field, "latency_ns"));
  l.bytes_per_s = GetNumber(Need(j, "bytes_per_s", file, field), file, Dot(field, "bytes_per_s"));
  if (auto it = j.find("duplex_bytes_per_s"); it != j.end())
    l.duplex_bytes_per_s = GetNumber(*it, file, Dot(field, "duplex_bytes_per_s"));
  if (auto it = j.find("op_gap_ns"); it != j.end()) l.op_gap_ns = GetInt(*it, file, Dot(field, "op_gap_ns"));
  auto read_curve = [&](const char* key, std::vector<EfficiencyPoint>& curve) {
    auto it = j.find(key);
    if (it == j.end()) return;
    std::string f = Dot(field, key);
    if (!it->is_array()) Bad(file, f, fmt::format("expected an array, got {}", TypeName(*it)));
    for (size_t i = 0; i < it->size(); ++i) {
      std::string fi = fmt::format("{}[{}]", f, i);
      const json& p = (*it)[i];
      CheckObject(p, file, fi);
      CheckKeys(p, file, fi, {"bytes", "fraction"});
      curve.push_back({GetInt(Need(p, "bytes", file, fi), file, fi + ".bytes"),
                       GetNumber(Need(p, "fraction", file, fi), file, fi + ".fraction")});
    }
  };
  read_curve("efficiency", l.efficiency);
  read_curve("duplex_efficiency", l.duplex_efficiency);
  if (auto it = j.find("shares_copy_port"); it != j.end()) {
    if (!it->is_boolean()) Bad(file, Dot(field, "shares_copy_port"), fmt::format("expected true or false, got {}", TypeName(*it)));
    l.shares_copy_port = it->get<bool>();
  }
  ValidateLink(l, file, field);
  return l;
}

void to_json(json& j, const Cluster& c) {
  json links = json::object();
  for (const auto& name : kLinkNames) links[name] = c.*LinkMember(name);
  json overheads;
  OverheadsToJson(overheads, c.overheads);
  j = json{{"name", c.name},
           {"nodes", c.nodes},
           {"gpus_per_node", c.gpus_per_node},
           {"nvlink_domain_nodes", c.nvlink_domain_nodes},
           {"nics_per_node", c.nics_per_node},
           {"gpu_memory_bytes", c.gpu_memory_bytes},
           {"host_memory_bytes", c.host_memory_bytes},
           {"links", links},
           {"overheads", overheads},
           {"measured", c.measured},
           {"profile_source", c.profile_source},
           {"fingerprint", c.Fingerprint()}};
  // Only when present: files of clusters without them stay unchanged.
  if (!c.host.Empty()) j["host"] = c.host;
  if (!c.host_python.Empty()) j["host_python"] = c.host_python;
  if (!c.copy_kernel.Empty()) j["copy_kernel"] = c.copy_kernel;
  if (!c.quantize_kernel.Empty()) j["quantize_kernel"] = c.quantize_kernel;
  if (c.network_measured) {
    j["network_measured"] = true;
    j["network_source"] = c.network_source;
  }
}

Cluster ClusterFromJson(const json& j, const std::string& file) {
  const std::string field = "cluster";
  CheckObject(j, file, field);
  CheckKeys(j, file, field,
            {"name", "nodes", "gpus_per_node", "nvlink_domain_nodes", "nics_per_node", "gpu_memory_bytes",
             "host_memory_bytes", "links", "overheads", "host", "host_python", "copy_kernel", "quantize_kernel", "measured",
             "profile_source", "network_measured", "network_source", "fingerprint"});
  Cluster c;
  auto int32 = [&](const char* key) {
    int64_t v = GetInt(Need(j, key, file, field), file, Dot(field, key));
    if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
      Bad(file, Dot(field, key), "out of range");
    return static_cast<int32_t>(v);
  };
  c.name = GetString(Need(j, "name", file, field), file, Dot(field, "name"));
  c.nodes = int32("nodes");
  c.gpus_per_node = int32("gpus_per_node");
  c.nvlink_domain_nodes = int32("nvlink_domain_nodes");
  c.nics_per_node = int32("nics_per_node");
  c.gpu_memory_bytes = GetInt(Need(j, "gpu_memory_bytes", file, field), file, Dot(field, "gpu_memory_bytes"));
  c.host_memory_bytes = GetInt(Need(j, "host_memory_bytes", file, field), file, Dot(field, "host_memory_bytes"));
  const json& links = Need(j, "links", file, field);
  CheckObject(links, file, Dot(field, "links"));
  CheckKeys(links, file, Dot(field, "links"), kLinkNames);
  for (const auto& name : kLinkNames)
    c.*LinkMember(name) = LinkProfileFromJson(Need(links, name, file, Dot(field, "links")), file,
                                              Dot(field, "links." + name));
  ApplyOverheadsJson(c.overheads, Need(j, "overheads", file, field), file, Dot(field, "overheads"), true);
  ApplyCostsJson(c, j, file, field);
  if (auto it = j.find("measured"); it != j.end()) c.measured = GetBool(*it, file, Dot(field, "measured"));
  if (auto it = j.find("profile_source"); it != j.end())
    c.profile_source = GetString(*it, file, Dot(field, "profile_source"));
  if (auto it = j.find("network_measured"); it != j.end())
    c.network_measured = GetBool(*it, file, Dot(field, "network_measured"));
  if (auto it = j.find("network_source"); it != j.end())
    c.network_source = GetString(*it, file, Dot(field, "network_source"));
  ValidateCluster(c, file, field);
  if (auto it = j.find("fingerprint"); it != j.end()) {
    std::string fp = GetString(*it, file, Dot(field, "fingerprint"));
    if (fp != c.Fingerprint())
      Bad(file, Dot(field, "fingerprint"),
          fmt::format("'{}' does not match the cluster's fields (fingerprint {}); was the file edited?", fp,
                      c.Fingerprint()));
  }
  return c;
}

// ---------------------------------------------------------------------------
// Calibration profiles.

void ApplyProfileJson(Cluster& c, const json& j, const std::string& path) {
  CheckObject(j, path, "");
  // "measurements": the raw data and fit residuals `reshard calibrate` keeps
  // next to the profile (read by people and notebooks; ignored here).
  CheckKeys(j, path, "",
            {"name", "measured", "source", "links", "memory", "host", "host_python", "copy_kernel", "quantize_kernel",
             "network_calibration", "measurements"});
  std::string name, source;
  if (auto it = j.find("name"); it != j.end()) name = GetString(*it, path, "name");
  if (auto it = j.find("source"); it != j.end()) source = GetString(*it, path, "source");
  bool measured = true;  // profiles are written by `reshard calibrate` unless they say otherwise
  if (auto it = j.find("measured"); it != j.end()) measured = GetBool(*it, path, "measured");
  Cluster out = c;
  if (auto it = j.find("links"); it != j.end()) {
    CheckObject(*it, path, "links");
    CheckKeys(*it, path, "links", kLinkNames);
    for (const auto& link : kLinkNames)
      if (auto l = it->find(link); l != it->end()) out.*LinkMember(link) = LinkProfileFromJson(*l, path, "links." + link);
  }
  if (auto it = j.find("memory"); it != j.end()) ApplyOverheadsJson(out.overheads, *it, path, "memory", false);
  ApplyCostsJson(out, j, path, "");
  ApplyNetworkCalibrationJson(out, j, path);
  out.measured = measured;
  out.profile_source = path;
  if (!name.empty() || !source.empty()) {
    std::string detail = name;
    if (!source.empty()) detail += (detail.empty() ? "" : ": ") + source;
    out.profile_source += " (" + detail + ")";
  }
  ValidateCluster(out, path, "links");
  c = std::move(out);
}

void ApplyProfileFile(Cluster& c, const std::string& path) {
  const std::string text = ReadInputFile(path, "calibration profile");
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(path, "", "calibration profile is empty (expected a JSON object)");
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    throw InputError(path, "", fmt::format("not a JSON calibration profile: binary data (NUL byte at offset {})", nul));
  json j;
  try {
    j = ParseJsonInput(text, path);  // nesting capped, duplicate keys refused
  } catch (const json::exception& e) {  // parse_error, and out_of_range.406 (number overflow)
    throw InputError(path, "", fmt::format("not valid JSON: {}", e.what()));
  }
  ApplyProfileJson(c, j, path);
}

json ProfileJson(const Cluster& c) {
  json links = json::object();
  for (const auto& name : kLinkNames) links[name] = c.*LinkMember(name);
  json memory;
  OverheadsToJson(memory, c.overheads);
  json j{{"name", c.name}, {"measured", c.measured}, {"source", c.profile_source}, {"links", links}, {"memory", memory}};
  if (!c.host.Empty()) j["host"] = c.host;
  if (!c.host_python.Empty()) j["host_python"] = c.host_python;
  if (!c.copy_kernel.Empty()) j["copy_kernel"] = c.copy_kernel;
  if (!c.quantize_kernel.Empty()) j["quantize_kernel"] = c.quantize_kernel;
  if (c.network_measured) j["network_calibration"] = {{"measured", true}, {"source", c.network_source}};
  return j;
}

}  // namespace reshard
