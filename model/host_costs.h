// What a refit costs beyond the wire, as data of the cluster:
//  * HostCosts: what the host thread that issues a plan's ops spends per call
//    (an op cannot start on its GPU before it is issued), and what only the
//    first refit of a job pays (NCCL connections, pinning host memory, mapping
//    fresh device memory into the allocator's pool);
//  * CopyKernelProfile: the copy kernel's throughput by access pattern (the
//    length of the contiguous runs it copies) and by the share of the GPU's
//    copy grid it may use;
//  * QuantizeKernelProfile: the fp8 quantize kernel's throughput by the size
//    of one launch.
// Presets carry numbers measured on our GPUs or cited (`source` says which);
// `reshard calibrate` measures them. Zero costs and an empty rate table mean
// "not modelled": the simulator then ignores the term.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/quant.h"

namespace reshard {

struct HostCosts {
  // Per call on the issuing host thread (reshard's executor, or the Python
  // stack of a Megatron-style refit for `Cluster::host_python`).
  int64_t event_record_ns = 0;    // cudaEventRecord: each op's start and end
  int64_t stream_wait_ns = 0;     // cudaStreamWaitEvent: a dependency on another stream or GPU
  int64_t kernel_launch_ns = 0;   // one copy kernel launch (a copy op)
  int64_t memcpy_ns = 0;          // one cudaMemcpyAsync on a copy engine (offload / reload)
  int64_t alloc_ns = 0;           // cudaMallocAsync from a warm pool
  int64_t free_ns = 0;            // cudaFreeAsync
  int64_t nccl_op_ns = 0;         // ncclSend / ncclRecv inside a group
  int64_t nccl_group_ns = 0;      // ncclGroupStart + ncclGroupEnd, fixed part
  int64_t nccl_group_op_ns = 0;   // ncclGroupEnd, per send / recv in the group
  // On the GPU, not the host: the stream time of the two events the executor
  // records around each op (its measurement bracket), per op.
  int64_t event_gpu_ns = 0;
  // Paid by the first (cold) refit only.
  int64_t nccl_connect_ns = 0;    // first transfer of an ordered GPU pair (NCCL connects lazily)
  double pin_bytes_per_s = 0;     // pinning the plan's host buffers (0: not modelled)
  double map_bytes_per_s = 0;     // mapping the plan's device peak into the pool (0: not modelled)
  std::string source;             // where the numbers come from

  bool Empty() const;             // every cost zero: host issue not modelled
  friend bool operator==(const HostCosts&, const HostCosts&) = default;
};

// Throughput of the copy kernel copying runs of `run_bytes` contiguous bytes
// with `sm_share` of the copy grid (bytes copied per second: each byte read
// once and written once).
struct CopyRatePoint {
  int64_t run_bytes = 0;
  double sm_share = 1;
  double bytes_per_s = 0;
  friend bool operator==(const CopyRatePoint&, const CopyRatePoint&) = default;
};

struct CopyKernelProfile {
  std::vector<CopyRatePoint> rates;  // sorted by (sm_share, run_bytes)
  // A launch takes at least floor_base_ns + (floor_ns - floor_base_ns) x
  // min(1, piece / floor_chunk_bytes) + bytes / floor_bytes_per_s whatever
  // its share (`piece`: its largest pair): each warp copies a chunk of up to
  // floor_chunk_bytes latency-bound, so copies of a few MiB are not
  // bandwidth-bound, and tiny ones cost about the launch (0: no floor).
  int64_t floor_ns = 0;
  int64_t floor_base_ns = 0;
  int64_t floor_chunk_bytes = 0;
  double floor_bytes_per_s = 0;
  std::string source;

  bool Empty() const { return rates.empty(); }
  // Interpolated: log-linear in run_bytes among the points of one share,
  // then linear in share between the two measured shares around `sm_share`;
  // clamped at the ends. O(points). 0 when empty.
  double Rate(int64_t run_bytes, double sm_share) const;
  // The floor's time for a launch copying `bytes` whose largest pair has
  // `piece_bytes` (0 without a floor).
  double FloorNs(double bytes, double piece_bytes) const;
  friend bool operator==(const CopyKernelProfile&, const CopyKernelProfile&) = default;
};

// Throughput of the fp8 quantize kernel by the bf16 bytes one launch (a
// quantize tile) reads: input bytes per second, its fp8 values and scales
// written within that time.
struct QuantizeRatePoint {
  int64_t input_bytes = 0;
  double bytes_per_s = 0;
  // The block shape the kernel ran: 128 x 128 blocks (the backend's
  // side-by-side kernel), MXFP8's 1 x 32 (the one-row kernel) or one scale per
  // matrix (the two-pass kernels).
  QuantScheme scheme = QuantScheme::kBlock;
  friend bool operator==(const QuantizeRatePoint&, const QuantizeRatePoint&) = default;
};

struct QuantizeKernelProfile {
  std::vector<QuantizeRatePoint> rates;  // sorted by (scheme, input_bytes)
  std::string source;

  bool Empty() const { return rates.empty(); }
  bool Has(QuantScheme scheme) const;  // points measured for this block shape
  // Seconds of one launch reading `input_bytes` of bf16 in blocks of
  // `scheme`: its rate interpolated log-linearly in input_bytes over that
  // scheme's points (the 128 x 128 points when it has none), clamped at the
  // ends. O(points). 0 when empty.
  double Seconds(int64_t input_bytes, QuantScheme scheme = QuantScheme::kBlock) const;
  friend bool operator==(const QuantizeKernelProfile&, const QuantizeKernelProfile&) = default;
};

// JSON: {"event_record_ns": ..., "source": ...} and {"rates": [{"run_bytes",
// "sm_share", "bytes_per_s"}], "floor_ns", "floor_bytes_per_s", "source"}. The readers take the fields present
// (onto `out`), check ranges and sort the rates; they throw InputError(file,
// field, ...).
void to_json(nlohmann::json& j, const HostCosts& h);
void to_json(nlohmann::json& j, const CopyKernelProfile& c);
void ApplyHostCostsJson(HostCosts& out, const nlohmann::json& j, const std::string& file, const std::string& field);
CopyKernelProfile CopyKernelProfileFromJson(const nlohmann::json& j, const std::string& file, const std::string& field);
// {"rates": [{"input_bytes", "bytes_per_s", "scheme"}], "source"}; "scheme"
// ("block", "tensor", "mxfp8") is left out for 128 x 128 blocks.
void to_json(nlohmann::json& j, const QuantizeKernelProfile& q);
QuantizeKernelProfile QuantizeKernelProfileFromJson(const nlohmann::json& j, const std::string& file,
                                                    const std::string& field);
// Canonical text of the fields for fingerprints, led by `name` ("" when empty).
std::string FingerprintText(std::string_view name, const HostCosts& h);
std::string FingerprintText(const CopyKernelProfile& c);
std::string FingerprintText(const QuantizeKernelProfile& q);

}  // namespace reshard
