// The network part of a calibration (`reshard calibrate --network` under a
// launcher, calib/measure_network.h): which ranks ran where, the pair of
// ranks on different nodes that was measured, and the per-op series: k sends
// of one small size in one NCCL group, from one rank to the other. The size
// sweeps of that pair (one way each direction, both ways) are ordinary
// MeasuredSeries of link "network" (calib/profile.h) and fit the network's
// latency, peak and efficiency by size like any link (calib/fit.h).
//
// The per-op cost: per group size k, the median time t(k) of the group;
// a line t = a + c × k through (k, t(k)), least squares weighted by 1 / t
// (calib/host_fit.h FitWeightedLine); op_gap_ns = round(c), at least 0: the
// time each further op of a group adds, the simulator's gap between network
// ops through one NIC (LinkProfile::op_gap_ns). The line is fitted at the
// smallest size measured, where the wire time of k ops is small beside
// their posting. O(samples log samples). No CUDA: tested in CI.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "calib/host_fit.h"

namespace reshard {

struct NetworkRank {
  int32_t rank = 0;
  std::string host;
  int32_t local_rank = 0;
  int32_t device = 0;       // CUDA device index it used
  std::string pci_bus_id;   // "0000:1B:00.0"
};

// One timed group: `ops` ncclSend of `bytes` each (one group, one peer).
struct NetworkOpSample {
  int32_t ops = 0;
  int64_t bytes = 0;
  double seconds = 0;
};

struct NetworkMeasurements {
  std::string launcher;              // LauncherEnv::launcher
  std::string source;                // date, NCCL and CUDA versions, hosts
  std::vector<NetworkRank> ranks;    // every rank of the job, in rank order
  int32_t from = -1, to = -1;        // the measured pair (ranks on different hosts)
  std::vector<NetworkOpSample> ops;  // the per-op series, from -> to
  bool Empty() const { return ranks.empty(); }
  std::vector<std::string> PairHosts() const;  // {host of from, host of to}
};

struct NetworkOpFit {
  int64_t bytes = 0;  // the size fitted (the smallest measured)
  std::vector<std::pair<double, double>> points;  // (ops, median ns)
  WeightedLine line;  // ns = intercept + slope × ops
  int64_t op_gap_ns = 0;
};

// Throws InputError("<measurements>", "network.ops", ...) when the smallest
// size has fewer than two group sizes, or a sample is not positive.
NetworkOpFit FitNetworkOps(std::span<const NetworkOpSample> samples);

// The profile's "network_calibration": {"measured": true, "source", "hosts"
// (of the pair), "ranks" (the pair)}.
nlohmann::json NetworkCalibrationRecord(const NetworkMeasurements& m);

// "measurements.network": launcher, source, ranks, pair, the per-op samples
// grouped by (bytes, ops), and the fit.
nlohmann::json NetworkMeasurementsJson(const NetworkMeasurements& m, const NetworkOpFit& fit);

// Back from "measurements.network"; throws InputError(file, field + ..., ...).
NetworkMeasurements NetworkMeasurementsFromJson(const nlohmann::json& j, const std::string& file,
                                                const std::string& field);

}  // namespace reshard
