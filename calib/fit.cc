// Least-squares fit of calibration measurements to LinkProfiles (see calib_fit.h).
#include "calib/fit.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>
#include <fmt/format.h>

#include "model/error.h"

namespace reshard {

namespace {

constexpr const char* kFile = "<measurements>";

// The samples of one size, sorted by time.
struct SizeGroup {
  int64_t bytes = 0;
  std::vector<double> seconds;
  double Median() const {
    const size_t n = seconds.size();
    return n % 2 == 1 ? seconds[n / 2] : 0.5 * (seconds[n / 2 - 1] + seconds[n / 2]);
  }
};

std::vector<SizeGroup> GroupBySize(std::span<const LinkSample> samples, const std::string& what) {
  if (samples.empty()) throw InputError(kFile, what, "no samples");
  std::vector<LinkSample> sorted(samples.begin(), samples.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    const LinkSample& s = sorted[i];
    if (s.bytes <= 0) throw InputError(kFile, fmt::format("{}[{}].bytes", what, i), fmt::format("must be > 0, got {}", s.bytes));
    if (!std::isfinite(s.seconds) || s.seconds <= 0)
      throw InputError(kFile, fmt::format("{}[{}].seconds", what, i),
                       fmt::format("must be a finite time > 0, got {}", s.seconds));
  }
  std::sort(sorted.begin(), sorted.end(), [](const LinkSample& a, const LinkSample& b) {
    return a.bytes != b.bytes ? a.bytes < b.bytes : a.seconds < b.seconds;
  });
  std::vector<SizeGroup> groups;
  for (const LinkSample& s : sorted) {
    if (groups.empty() || groups.back().bytes != s.bytes) groups.push_back({s.bytes, {}});
    groups.back().seconds.push_back(s.seconds);
  }
  return groups;
}

struct Line {
  double intercept_s = 0;
  double seconds_per_byte = 0;
};

// Least squares t = a + b·x over sizes [first, last), rows weighted by 1/t so
// the error minimised is relative (times span orders of magnitude). Bytes are
// scaled by the largest size to keep the system well conditioned.
Line FitLine(const std::vector<SizeGroup>& g, const std::vector<double>& median, size_t first, size_t last) {
  const Eigen::Index rows = static_cast<Eigen::Index>(last - first);
  const double scale = static_cast<double>(g[last - 1].bytes);
  Eigen::MatrixXd a(rows, 2);
  Eigen::VectorXd rhs(rows);
  for (Eigen::Index r = 0; r < rows; ++r) {
    const size_t i = first + static_cast<size_t>(r);
    const double w = 1.0 / median[i];
    a(r, 0) = w;
    a(r, 1) = w * static_cast<double>(g[i].bytes) / scale;
    rhs(r) = 1.0;  // w × t
  }
  const Eigen::Vector2d x = a.colPivHouseholderQr().solve(rhs);
  return {x(0), x(1) / scale};
}

}  // namespace

LinkProfile LinkFit::Profile() const {
  LinkProfile l;
  l.latency_ns = latency_ns;
  l.bytes_per_s = bytes_per_s;
  l.efficiency = efficiency;
  return l;
}

double ModelSeconds(const LinkProfile& profile, int64_t bytes, bool both_ways) {
  const double latency_s = static_cast<double>(profile.latency_ns) * 1e-9;
  if (both_ways) {
    const double duplex = profile.duplex_bytes_per_s > 0 ? profile.duplex_bytes_per_s : profile.bytes_per_s;
    return latency_s + static_cast<double>(bytes) / (duplex * profile.DuplexEfficiency(bytes));
  }
  return latency_s + static_cast<double>(bytes) / (profile.bytes_per_s * profile.Efficiency(bytes));
}

namespace {

ResidualSummary ResidualsOf(const LinkProfile& profile, const std::vector<SizeGroup>& groups, bool both_ways) {
  ResidualSummary r;
  double sum_sq = 0;
  for (const SizeGroup& g : groups) {
    SizeResidual s;
    s.bytes = g.bytes;
    s.samples = static_cast<int32_t>(g.seconds.size());
    s.median_s = g.Median();
    s.min_s = g.seconds.front();
    s.max_s = g.seconds.back();
    s.model_s = ModelSeconds(profile, g.bytes, both_ways);
    s.relative_error = s.model_s / s.median_s - 1;
    r.max_abs_relative_error = std::max(r.max_abs_relative_error, std::fabs(s.relative_error));
    sum_sq += s.relative_error * s.relative_error;
    r.sizes.push_back(s);
  }
  r.rms_relative_error = std::sqrt(sum_sq / static_cast<double>(groups.size()));
  return r;
}

}  // namespace

ResidualSummary Residuals(const LinkProfile& profile, std::span<const LinkSample> samples, bool both_ways) {
  return ResidualsOf(profile, GroupBySize(samples, "samples"), both_ways);
}

LinkFit FitLink(std::span<const LinkSample> samples, const FitOptions& options, const std::string& what) {
  const std::vector<SizeGroup> groups = GroupBySize(samples, what);
  const size_t s = groups.size();
  if (s < 2)
    throw InputError(kFile, what,
                     fmt::format("needs at least two distinct sizes to separate latency from bandwidth, got only "
                                 "{} bytes",
                                 groups.front().bytes));
  if (options.fixed_latency_ns && *options.fixed_latency_ns < 0)
    throw InputError(kFile, what + ".latency_ns", fmt::format("must be >= 0, got {}", *options.fixed_latency_ns));
  if (options.max_latency_ns && *options.max_latency_ns < 0)
    throw InputError(kFile, what + ".max_latency_ns", fmt::format("must be >= 0, got {}", *options.max_latency_ns));
  std::vector<double> median(s);
  for (size_t i = 0; i < s; ++i) median[i] = groups[i].Median();
  const double fastest_s = *std::min_element(median.begin(), median.end());

  // Step 2: the two regimes. Each has at least two sizes.
  size_t small_end = 0;
  while (small_end < s && groups[small_end].bytes <= 16 * groups.front().bytes) ++small_end;
  small_end = std::max<size_t>(small_end, 2);
  size_t large_begin = s;
  while (large_begin > 0 && groups[large_begin - 1].bytes * 16 >= groups.back().bytes) --large_begin;
  large_begin = std::min(large_begin, s - 2);

  LinkFit fit;
  const Line large = FitLine(groups, median, large_begin, s);
  if (large.seconds_per_byte > 0 && std::isfinite(large.seconds_per_byte))
    fit.slope_bytes_per_s = 1.0 / large.seconds_per_byte;
  {
    const Line small = FitLine(groups, median, 0, small_end);
    fit.latency_line_ns = small.intercept_s * 1e9;
    // Below 99 % of the fastest median, so every size keeps some wire time;
    // and below t - b / peak at every size, so no size needs more than the
    // peak (small copies can pay a fixed cost that larger ones hide, or a
    // size that fits in L2 runs faster: then the small sizes get low
    // fractions instead of the peak being inflated).
    double cap_s = 0.99 * fastest_s;
    if (fit.slope_bytes_per_s > 0) {
      for (size_t i = 0; i < s; ++i) {
        const double wire_s = static_cast<double>(groups[i].bytes) / fit.slope_bytes_per_s;
        // Only sizes whose fixed cost is at least 10 % of their time: where
        // the wire time dominates, t - b / peak is within the noise.
        if (wire_s <= 0.9 * median[i]) cap_s = std::min(cap_s, median[i] - wire_s);
      }
    }
    fit.latency_cap_ns = static_cast<int64_t>(std::max(0.0, std::floor(cap_s * 1e9)));
    int64_t cap_ns = fit.latency_cap_ns;
    if (options.max_latency_ns) cap_ns = std::min(cap_ns, *options.max_latency_ns);
    fit.latency_ns = static_cast<int64_t>(std::clamp(std::round(fit.latency_line_ns), 0.0, static_cast<double>(cap_ns)));
  }
  if (options.fixed_latency_ns) {
    fit.latency_ns = *options.fixed_latency_ns;
    fit.latency_fixed = true;
  }
  const double latency_s = static_cast<double>(fit.latency_ns) * 1e-9;

  // Wire rate b / (t - latency) at each size (0 where the latency eats it all).
  std::vector<double> wire(s, 0.0);
  for (size_t i = 0; i < s; ++i)
    if (median[i] > latency_s) wire[i] = static_cast<double>(groups[i].bytes) / (median[i] - latency_s);
  // The peak: the asymptote, or the fastest wire rate above the small sizes
  // if higher (noise; a mid-size bump). Small sizes are left out: there
  // t - latency is tiny and its rate meaningless; they are clamped to 1.
  double fastest_wire = 0;
  for (size_t i = std::min(small_end, s - 1); i < s; ++i) fastest_wire = std::max(fastest_wire, wire[i]);
  if (!(fastest_wire > 0))
    throw InputError(kFile, what,
                     fmt::format("a latency of {} ns leaves no transfer time at the largest sizes", fit.latency_ns));
  const double peak = std::max(fit.slope_bytes_per_s, fastest_wire);
  fit.bytes_per_s = peak;

  // Step 3: the fraction that puts the model through each size; a size the
  // latency alone exceeds gets 1 (the model cannot be faster; its residual shows).
  std::vector<double> fraction(s);
  for (size_t i = 0; i < s; ++i)
    fraction[i] = wire[i] > 0 ? std::clamp(wire[i] / peak, std::numeric_limits<double>::min(), 1.0) : 1.0;

  // A tolerance of 0 (or less) asks for a knot at every size.
  std::vector<bool> is_knot(s, options.max_relative_error <= 0 && options.max_points <= 0);
  is_knot.front() = is_knot.back() = true;
  int32_t knots = static_cast<int32_t>(std::count(is_knot.begin(), is_knot.end(), true));
  LinkProfile model = fit.Profile();
  for (;;) {
    model.efficiency.clear();
    for (size_t i = 0; i < s; ++i)
      if (is_knot[i]) model.efficiency.push_back({groups[i].bytes, fraction[i]});
    if (options.max_points > 0 && knots >= std::max(options.max_points, 2)) break;
    // The size the curve misses most (ties: the smaller size).
    size_t worst = s;
    double worst_error = options.max_relative_error;
    for (size_t i = 0; i < s; ++i) {
      if (is_knot[i]) continue;
      const double e = std::fabs(ModelSeconds(model, groups[i].bytes) / median[i] - 1);
      if (e > worst_error) worst = i, worst_error = e;
    }
    if (worst == s) break;
    is_knot[worst] = true;
    ++knots;
  }
  fit.efficiency = model.efficiency;
  fit.residuals = ResidualsOf(model, groups, /*both_ways=*/false);
  return fit;
}

void SetDuplex(LinkProfile& profile, const LinkFit& duplex_fit) {
  RESHARD_CHECK(duplex_fit.latency_ns == profile.latency_ns,
                fmt::format("the both-ways fit used latency {} ns, the profile has {} ns", duplex_fit.latency_ns,
                            profile.latency_ns));
  profile.duplex_bytes_per_s = duplex_fit.bytes_per_s;
  profile.duplex_efficiency = duplex_fit.efficiency;
}

}  // namespace reshard
