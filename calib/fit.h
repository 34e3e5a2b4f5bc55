// Fits measured transfer times of one link class to the simulator's link model
// (model/cluster.h LinkProfile): a transfer of b bytes alone on its link takes
//
//   t(b) = latency + b / (peak × eff(b)),
//
// eff a piecewise log-linear curve through (bytes, fraction) points, clamped at
// its ends. `reshard calibrate` measures (bytes, seconds) samples on GPUs
// (calib/measure_nccl.h); this file turns them into a LinkProfile and
// says how well the profile reproduces them. Pure C++ (Eigen), tested in CI.
//
// The fit, in three steps (n samples, s distinct sizes):
//  1. Per size, the median of its samples (robust to the odd slow repetition).
//  2. Latency = intercept and peak = 1 / slope of two least-squares lines
//     t = a + b/B, each minimising relative error (rows weighted by 1/t):
//     the latency from the smallest sizes (b ≤ 16 × smallest, where t is
//     almost flat), the peak from the largest (b ≥ largest / 16, where the
//     curve has levelled off): the asymptotic bandwidth. The latency is
//     rounded to whole ns (as the simulator stores it) and kept below 99 % of
//     the fastest median, so every size leaves wire time, and below
//     t - b / peak at every size whose wire time b / peak is at most 90 % of
//     its time (beyond that the difference is noise), so no size needs more
//     than the peak (on-device copies of a few KiB cost more than the fixed
//     cost a 16 MiB copy shows: those small sizes get low fractions instead).
//     The peak is raised to the fastest wire rate b / (t - latency) above the
//     small sizes if that is higher; fractions are capped at 1.
//  3. Efficiency points: fraction_i = b_i / ((t_i - latency) × peak) puts the
//     model exactly through size i. Knots are chosen greedily, the smallest
//     and largest size first, then the size the current curve misses most,
//     until every size is within `max_relative_error` (or `max_points` are
//     used). Residuals: model / median - 1 at every size.
// O(n log n + s² log s); s is ~20.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/cluster.h"

namespace reshard {

struct LinkSample {
  int64_t bytes = 0;   // bytes one direction moved
  double seconds = 0;  // time of the whole transfer
};

struct FitOptions {
  // Use this latency instead of fitting one (the both-ways fit reuses the
  // one-way latency, as a LinkProfile has a single latency).
  std::optional<int64_t> fixed_latency_ns;
  // An upper bound on a fitted latency: the both-ways series' own bound
  // (LinkFit::latency_cap_ns), so the shared latency suits both series.
  std::optional<int64_t> max_latency_ns;
  // Stop adding efficiency points once every size is this close (relative);
  // 0 (with max_points 0): a point at every measured size.
  double max_relative_error = 0.01;
  // At most this many efficiency points (0 = as many as needed; at least 2).
  int32_t max_points = 0;
};

struct SizeResidual {
  int64_t bytes = 0;
  int32_t samples = 0;
  double median_s = 0;         // measured
  double min_s = 0, max_s = 0; // spread of the samples
  double model_s = 0;          // the fitted profile's time
  double relative_error = 0;   // model_s / median_s - 1
};

struct ResidualSummary {
  std::vector<SizeResidual> sizes;  // by increasing bytes
  double max_abs_relative_error = 0;
  double rms_relative_error = 0;
};

struct LinkFit {
  int64_t latency_ns = 0;
  double bytes_per_s = 0;              // the peak of the model (asymptotic bandwidth)
  double slope_bytes_per_s = 0;        // 1 / slope of the large-size line (0: no usable slope)
  double latency_line_ns = 0;          // intercept of the small-size line before clamping
  int64_t latency_cap_ns = 0;          // the bound it was clamped to (step 2), from this series alone
  bool latency_fixed = false;          // FitOptions::fixed_latency_ns was used
  std::vector<EfficiencyPoint> efficiency;
  ResidualSummary residuals;

  // latency_ns, bytes_per_s and efficiency as a one-way LinkProfile.
  LinkProfile Profile() const;
};

// Fits samples of one link class and one direction mode. `what` names the
// series in errors ("nvlink.one_way"). Throws InputError("<measurements>",
// what, ...) for: no samples; bytes ≤ 0; seconds not finite or ≤ 0; fewer
// than two distinct sizes; a negative fixed latency.
LinkFit FitLink(std::span<const LinkSample> samples, const FitOptions& options = {},
                const std::string& what = "samples");

// Puts a both-ways fit into `profile`: duplex_bytes_per_s and
// duplex_efficiency (fractions of duplex_bytes_per_s). The fit must use the
// profile's latency (FitOptions::fixed_latency_ns), else RESHARD_CHECK fails.
void SetDuplex(LinkProfile& profile, const LinkFit& duplex_fit);

// The model's time for `bytes`: latency + bytes / (peak × Efficiency(bytes)),
// or, with `both_ways`, latency + bytes / (duplex rate × DuplexEfficiency(bytes)).
double ModelSeconds(const LinkProfile& profile, int64_t bytes, bool both_ways = false);

// Residuals of `profile` against samples (medians per size), one-way or both ways.
ResidualSummary Residuals(const LinkProfile& profile, std::span<const LinkSample> samples, bool both_ways = false);

}  // namespace reshard
