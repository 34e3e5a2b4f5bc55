// From the one-GPU measurements (calib/host_data.h) to the profile's "host"
// and "copy_kernel" sections (model/host_costs.h HostCosts, CopyKernelProfile).
//
//  * Per-call costs: the median over batches of the per-call host time
//    (memcpy_ns pools host->device and device->host).
//  * NCCL: per group size (ops = sends + recvs), the median enqueue time
//    (ncclGroupStart + the calls) and GroupEnd time; two lines
//    t = a + b * ops, least squares weighted by 1 / t (relative error, as
//    the sizes span 2 ... 1024 ops): nccl_op_ns = enqueue slope,
//    nccl_group_op_ns = GroupEnd slope, nccl_group_ns = both intercepts
//    (each clamped at 0). Taken from the executor's communicator kind
//    (non-blocking) when measured.
//  * pin_bytes_per_s / map_bytes_per_s: 1 / slope of the same weighted line
//    through (bytes, median seconds) per size of cudaHostAlloc / a fresh
//    pool's growth (one size: bytes / seconds). nccl_connect_ns needs two
//    GPUs and is never written here.
//  * copy_kernel: per (run_bytes, sm_share), bytes / median time over the
//    pack, unpack and contiguous samples (the planner's copies are strided
//    on one side); both-strided and the size curve stay in the measurements.
// O(samples log samples).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calib/host_data.h"
#include "model/host_costs.h"

namespace reshard {

// y = intercept + slope * x through (x, y) points, rows weighted by 1 / y.
struct WeightedLine {
  double intercept = 0;
  double slope = 0;
  double max_abs_relative_error = 0;  // of the line against the points
};
// Needs two distinct x and every y > 0, else RESHARD_CHECK fails.
WeightedLine FitWeightedLine(const std::vector<std::pair<double, double>>& points);

struct NcclGroupFit {
  std::vector<std::pair<double, double>> enqueue, end;  // (ops, median ns) per group size
  WeightedLine enqueue_line, end_line;
  size_t series = 0;  // index into HostMeasurements::nccl_groups
};

struct HostFit {
  HostCosts host;                    // the fields measured; nccl_connect_ns stays 0
  std::vector<std::string> measured; // JSON names of the fields `host` has from measurements
  bool has_nccl = false;
  NcclGroupFit nccl;
  double set_device_ns = 0;          // cudaSetDevice (not a HostCosts field; the executor calls it per op)
  CopyKernelProfile copy_kernel;     // empty when not measured
  QuantizeKernelProfile quantize_kernel;  // input bytes / median time per launch size; empty when not measured
};

// Throws InputError("<measurements>", ...) for a group series with fewer
// than two group sizes or a cold series with no usable slope.
HostFit FitHost(const HostMeasurements& m);

// The profile's "host" object: the measured fields and "source" (absent
// fields keep the preset's values when the profile is applied); null when
// nothing was measured.
nlohmann::json HostSectionJson(const HostFit& fit);

// What the fit derived, for "measurements.host_fit": the NCCL lines and
// points, per-call medians, the cold rates.
nlohmann::json HostFitJson(const HostMeasurements& m, const HostFit& fit);

}  // namespace reshard
