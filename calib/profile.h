// From what `reshard calibrate` measured on a host to a calibration profile.
//
// CalibrationData holds the raw measurements (timed transfers per link class
// and direction mode, device memory probes); FitCalibration fits every link
// class (calib_fit.h) and derives the memory overheads; CalibrationProfileJson
// writes the profile in the format ApplyProfileJson reads (model/cluster.h,
// calib/README.md) plus the raw data and the fit's residuals under
// "measurements". The one-GPU host-cost, copy-kernel and cold measurements
// (calib/host_data.h) ride along: fitted by calib/host_fit.h into the
// profile's "host" and "copy_kernel" sections, kept raw under
// "measurements.host". No CUDA here: the GPU side is calib/measure_nccl.h and
// calib/measure_host.h.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calib/fit.h"
#include "calib/host_data.h"
#include "calib/host_fit.h"
#include "calib/network.h"
#include "model/cluster.h"

namespace reshard {

// One measured series: transfers of one link class in one direction mode.
struct MeasuredSeries {
  std::string link;     // a profile link: "nvlink", "network", "pcie", "pcie_pageable", "device_copy"
  std::string mode;     // "one_way", "h2d", "d2h" (one direction at a time) or "both_ways"
  std::string method;   // what was timed, e.g. "ncclSend/ncclRecv", "cudaMemcpyAsync D2D"
  std::string timing;   // "cuda_events" or "host_clock"
  std::vector<int32_t> gpus;
  std::vector<LinkSample> samples;  // every timed repetition; both_ways: bytes per direction
  bool BothWays() const { return mode == "both_ways"; }
};

// cudaMemGetInfo readings of one GPU at the steps of the memory probe; -1 = not taken.
struct DeviceMemoryProbe {
  int32_t gpu = -1;
  std::string name;                            // "NVIDIA H200"
  int64_t total_bytes = -1;
  int64_t free_after_context_bytes = -1;       // right after the first cudaFree(0)
  int64_t free_before_nccl_bytes = -1;         // test buffers allocated, no communicator yet
  int64_t free_after_nccl_init_bytes = -1;     // after ncclCommInitAll
  int64_t free_after_first_transfer_bytes = -1;  // after a first send/recv with every peer
};

struct CalibrationData {
  std::string name;    // e.g. "2x NVIDIA H200"
  std::string source;  // how and when: tool versions, host, date
  std::vector<std::pair<std::string, std::string>> environment;  // recorded as is (versions, env vars)
  std::vector<MeasuredSeries> series;
  std::vector<DeviceMemoryProbe> memory;
  int32_t nccl_peers = 0;  // peers each GPU connected to during the probe (0: NCCL not probed)
  HostMeasurements host;   // host costs, copy kernel, cold terms (empty: not measured)
  // `calibrate --network`: the ranks, the measured pair and the per-op series
  // (empty: not measured); its size sweeps are `series` of link "network".
  NetworkMeasurements network;
};

struct SeriesFit {
  size_t series = 0;  // index into CalibrationData::series
  ResidualSummary residuals;  // of the link's final profile against this series
};

struct LinkCalibration {
  std::string link;          // profile link name
  LinkProfile profile;       // what the profile file gets
  LinkFit one_way;           // the fit of every one-direction sample of this link
  bool has_both_ways = false;
  LinkFit both_ways;         // with the one-way latency
};

struct CalibrationFit {
  std::vector<LinkCalibration> links;  // in profile order: nvlink, network, pcie, pcie_pageable, device_copy
  std::vector<SeriesFit> series;       // one per measured series, in order
  MemoryOverheads overheads;
  bool has_cuda_context = false;       // overheads.cuda_context_bytes was measured
  bool has_nccl_per_peer = false;      // overheads.nccl_bytes_per_peer was measured
  // The two parts of nccl_bytes_per_peer × peers, for the record (max over GPUs):
  int64_t nccl_init_bytes = 0;              // ncclCommInitAll
  int64_t nccl_connect_bytes_per_peer = 0;  // the first transfers, per peer
  bool has_host = false;   // data.host was measured: `host` is its fit
  HostFit host;
  bool has_network_ops = false;  // data.network.ops was measured: links' network op_gap_ns is its fit
  NetworkOpFit network_ops;
};

// Fits each link class with one-direction samples (one-way, h2d and d2h
// pooled); both-ways samples give its duplex rate and curve, with the
// one-way latency (kept within the both-ways series' latency bound). Overheads:
// cuda_context_bytes = max over GPUs of total - free after context creation
// (all that is unavailable to the plan: context, driver reserve);
// nccl_bytes_per_peer = max over GPUs of (free before communicator creation -
// free after the first transfers) / peers: the communicator's own memory is
// spread over the peers, as MemoryOverheads has no per-communicator term.
// Host measurements: FitHost (calib/host_fit.h). Network per-op samples:
// FitNetworkOps (calib/network.h) sets the network link's op_gap_ns. Throws
// InputError for a series naming an unknown link or mode, one that cannot be
// fitted, or per-op samples without a network size sweep.
CalibrationFit FitCalibration(const CalibrationData& data, const FitOptions& options = {});

// {"name", "measured": true, "source", "links", "memory", "host",
// "copy_kernel", "network_calibration", "measurements"}; sections not
// measured are left out.
nlohmann::json CalibrationProfileJson(const CalibrationData& data, const CalibrationFit& fit,
                                      const FitOptions& options = {});

// The measurements back from a profile CalibrationProfileJson wrote (its
// "measurements": series with every sample, memory probes, environment), so
// a profile can be re-fitted without GPUs; "measurements.host" when present
// (then "series" may be empty). Throws InputError(file, field, ...).
CalibrationData CalibrationDataFromJson(const nlohmann::json& profile, const std::string& file);

// `calibrate --merge BASE`: BASE's profile with what `update` measured put
// over it, so parts measured on different machines (links and host costs on
// one GPU host, the network across nodes) make one profile. A link, a
// memory field and the host / copy_kernel / quantize_kernel /
// network_calibration sections of `update` replace BASE's; under
// "measurements", the series of the links `update` measured replace BASE's
// series of those links, "environment" is merged key by key (update wins),
// "memory" only when `update` probed GPUs, and every other key of `update`
// replaces BASE's. "name" stays BASE's (when
// it has one), "source" is BASE's then update's, "measured" is true only if
// both are. Throws InputError(base_file, field, ...) when BASE is no profile
// object or its "measurements.series" is not a list.
nlohmann::json MergeProfileJson(const nlohmann::json& base, const nlohmann::json& update, const std::string& base_file);

}  // namespace reshard
