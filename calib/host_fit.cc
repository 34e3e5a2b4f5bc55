// One-GPU measurements -> the profile's host costs and copy-kernel rates (see host_fit.h).
#include "calib/host_fit.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"

namespace reshard {

namespace {

using nlohmann::json;

int64_t RoundNs(double ns) { return std::llround(std::max(0.0, ns)); }

// (x, median of the y of each x), by increasing x.
std::vector<std::pair<double, double>> MediansByX(const std::multimap<double, double>& xy) {
  std::vector<std::pair<double, double>> out;
  for (auto it = xy.begin(); it != xy.end();) {
    auto [lo, hi] = xy.equal_range(it->first);
    std::vector<double> ys;
    for (auto k = lo; k != hi; ++k) ys.push_back(k->second);
    out.push_back({it->first, MedianOf(ys)});
    it = hi;
  }
  return out;
}

size_t DistinctX(const std::vector<std::pair<double, double>>& p) {
  std::vector<double> xs;
  for (const auto& [x, y] : p) xs.push_back(x);
  std::sort(xs.begin(), xs.end());
  return static_cast<size_t>(std::unique(xs.begin(), xs.end()) - xs.begin());
}

// Bytes per second of a cold series: 1 / slope of seconds against bytes
// (medians per size), or bytes / seconds with one size.
double ColdRate(const HostMeasurements& m, const char* what, json* detail) {
  std::multimap<double, double> xy;
  for (const ColdSample& c : m.cold)
    if (c.what == what) xy.insert({static_cast<double>(c.bytes), c.seconds});
  if (xy.empty()) return 0;
  const auto points = MediansByX(xy);
  double rate = 0;
  if (points.size() == 1) {
    rate = points[0].first / points[0].second;
  } else {
    const WeightedLine line = FitWeightedLine(points);
    if (!(line.slope > 0))
      throw InputError("<measurements>", fmt::format("host.cold ({})", what),
                       fmt::format("no positive slope of seconds against bytes (slope {})", line.slope));
    rate = 1 / line.slope;
    (*detail)["intercept_s"] = line.intercept;
    (*detail)["max_abs_relative_error"] = line.max_abs_relative_error;
  }
  json pts = json::array();
  for (const auto& [b, s] : points) pts.push_back({{"bytes", static_cast<int64_t>(b)}, {"median_s", s}});
  (*detail)["points"] = pts;
  (*detail)["bytes_per_s"] = rate;
  return rate;
}

void CallMedians(const HostMeasurements& m, std::map<std::string, std::vector<double>>& batches) {
  for (const HostCallSeries& s : m.calls)
    batches[s.call].insert(batches[s.call].end(), s.batch_ns.begin(), s.batch_ns.end());
}

}  // namespace

WeightedLine FitWeightedLine(const std::vector<std::pair<double, double>>& points) {
  RESHARD_CHECK(DistinctX(points) >= 2, "a line needs two distinct x");
  // Minimise sum ((a + b x - y) / y)^2: normal equations with weights 1 / y^2.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : points) {
    RESHARD_CHECK(y > 0, "line points need y > 0");
    const double w = 1 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  const double det = sw * sxx - sx * sx;
  WeightedLine l;
  l.slope = (sw * sxy - sx * sy) / det;
  l.intercept = (sy - l.slope * sx) / sw;
  for (const auto& [x, y] : points)
    l.max_abs_relative_error = std::max(l.max_abs_relative_error, std::abs((l.intercept + l.slope * x) / y - 1));
  return l;
}

HostFit FitHost(const HostMeasurements& m) {
  HostFit fit;
  HostCosts& h = fit.host;
  std::map<std::string, std::vector<double>> batches;
  CallMedians(m, batches);
  auto take = [&](const char* name, std::initializer_list<const char*> calls, int64_t HostCosts::*field) {
    std::vector<double> all;
    for (const char* c : calls)
      if (auto it = batches.find(c); it != batches.end()) all.insert(all.end(), it->second.begin(), it->second.end());
    if (all.empty()) return;
    h.*field = RoundNs(MedianOf(all));
    fit.measured.push_back(name);
  };
  take("event_record_ns", {kCallEventRecord}, &HostCosts::event_record_ns);
  take("stream_wait_ns", {kCallStreamWait}, &HostCosts::stream_wait_ns);
  take("kernel_launch_ns", {kCallKernelLaunch}, &HostCosts::kernel_launch_ns);
  take("memcpy_ns", {kCallMemcpyH2D, kCallMemcpyD2H}, &HostCosts::memcpy_ns);
  take("alloc_ns", {kCallAlloc}, &HostCosts::alloc_ns);
  take("free_ns", {kCallFree}, &HostCosts::free_ns);
  if (auto it = batches.find(kCallSetDevice); it != batches.end()) fit.set_device_ns = MedianOf(it->second);

  if (!m.nccl_groups.empty()) {
    size_t pick = 0;
    for (size_t i = 0; i < m.nccl_groups.size(); ++i)
      if (m.nccl_groups[i].executor_default) pick = i;
    const NcclGroupSeries& g = m.nccl_groups[pick];
    std::multimap<double, double> enqueue, end;
    for (const NcclGroupSample& s : g.samples) {
      enqueue.insert({static_cast<double>(s.ops), s.enqueue_ns});
      end.insert({static_cast<double>(s.ops), s.end_ns});
    }
    fit.nccl.series = pick;
    fit.nccl.enqueue = MediansByX(enqueue);
    fit.nccl.end = MediansByX(end);
    if (fit.nccl.enqueue.size() < 2)
      throw InputError("<measurements>", fmt::format("host.nccl_groups[{}]", pick),
                       fmt::format("needs groups of at least two sizes, got {}", fit.nccl.enqueue.size()));
    fit.nccl.enqueue_line = FitWeightedLine(fit.nccl.enqueue);
    fit.nccl.end_line = FitWeightedLine(fit.nccl.end);
    h.nccl_op_ns = RoundNs(fit.nccl.enqueue_line.slope);
    h.nccl_group_op_ns = RoundNs(fit.nccl.end_line.slope);
    h.nccl_group_ns = RoundNs(fit.nccl.enqueue_line.intercept) + RoundNs(fit.nccl.end_line.intercept);
    fit.has_nccl = true;
    for (const char* name : {"nccl_op_ns", "nccl_group_ns", "nccl_group_op_ns"}) fit.measured.push_back(name);
  }
  json unused;
  h.pin_bytes_per_s = ColdRate(m, kColdHostAlloc, &unused);
  if (h.pin_bytes_per_s > 0) fit.measured.push_back("pin_bytes_per_s");
  h.map_bytes_per_s = ColdRate(m, kColdPoolGrow, &unused);
  if (h.map_bytes_per_s > 0) fit.measured.push_back("map_bytes_per_s");
  h.source = m.source;

  // Copy kernel: pooled pack / unpack / contiguous samples per (share, run).
  std::map<std::pair<double, int64_t>, std::pair<int64_t, std::vector<double>>> cells;
  for (const CopyKernelSample& c : m.copies) {
    if (c.pattern != kPatternPack && c.pattern != kPatternUnpack && c.pattern != kPatternContiguous) continue;
    auto& [bytes, seconds] = cells[{c.sm_share, c.run_bytes}];
    RESHARD_CHECK(bytes == 0 || bytes == c.bytes, "copy samples of one cell copy the same bytes");
    bytes = c.bytes;
    seconds.insert(seconds.end(), c.seconds.begin(), c.seconds.end());
  }
  for (const auto& [key, cell] : cells)
    fit.copy_kernel.rates.push_back({key.second, key.first, static_cast<double>(cell.first) / MedianOf(cell.second)});
  if (!fit.copy_kernel.rates.empty())
    fit.copy_kernel.source = m.source + "; copy kernel rates: bytes copied / median time, pack and unpack pooled";
  // The event bracket's GPU time: bracketed 256 B copies minus plain ones (share 1).
  {
    std::vector<double> bracketed, plain;
    for (const CopyKernelSample& c : m.copies) {
      if (c.pattern == kPatternBracketed) bracketed.insert(bracketed.end(), c.seconds.begin(), c.seconds.end());
      if (c.pattern == kPatternSize && c.bytes == 256 && c.sm_share == 1.0)
        plain.insert(plain.end(), c.seconds.begin(), c.seconds.end());
    }
    if (!bracketed.empty() && !plain.empty()) {
      const double ns = (MedianOf(bracketed) - MedianOf(plain)) * 1e9;
      fit.host.event_gpu_ns = std::max<int64_t>(0, std::llround(ns));
      fit.measured.push_back("event_gpu_ns");
    }
  }
  // The floor: time = floor_ns + bytes / floor_bytes_per_s by least squares
  // over the medians of the contiguous copies of at most kFloorMaxBytes (both
  // shares pooled: small copies do not fill even a quarter of the grid).
  // Below one chunk per warp (kFloorChunkBytes: the copy kernel's kCopyChunkBytes in
  // executor/nccl/kernels.h) a copy costs
  // about its launch: floor_base_ns, the median of the smallest copy measured.
  constexpr int64_t kFloorMaxBytes = int64_t{16} << 20, kFloorChunkBytes = int64_t{16} << 10;
  std::map<int64_t, std::vector<double>> sizes, small;
  for (const CopyKernelSample& c : m.copies) {
    if (c.pattern != kPatternSize) continue;
    auto& bucket = c.bytes <= kFloorMaxBytes && c.bytes >= (int64_t{1} << 20) ? sizes : small;
    bucket[c.bytes].insert(bucket[c.bytes].end(), c.seconds.begin(), c.seconds.end());
  }
  if (sizes.size() >= 2 && !fit.copy_kernel.rates.empty()) {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto& [bytes, seconds] : sizes) {
      const double x = static_cast<double>(bytes), y = MedianOf(seconds);
      n += 1, sx += x, sy += y, sxx += x * x, sxy += x * y;
    }
    const double slope = (n * sxy - sx * sy) / (n * sxx - sx * sx);  // seconds per byte
    const double intercept = (sy - slope * sx) / n;
    if (slope > 0 && intercept > 0) {
      fit.copy_kernel.floor_ns = static_cast<int64_t>(std::llround(intercept * 1e9));
      fit.copy_kernel.floor_bytes_per_s = 1.0 / slope;
      fit.copy_kernel.source += "; floor: least squares over contiguous copies of 1-16 MiB";
      if (!small.empty() && small.begin()->first <= 4096) {
        const double base_ns = MedianOf(small.begin()->second) * 1e9;
        if (base_ns > 0 && base_ns < static_cast<double>(fit.copy_kernel.floor_ns)) {
          fit.copy_kernel.floor_base_ns = std::llround(base_ns);
          fit.copy_kernel.floor_chunk_bytes = kFloorChunkBytes;
          fit.copy_kernel.source += fmt::format("; below {} KiB a copy scales from its launch ({} B copy)",
                                                kFloorChunkBytes >> 10, small.begin()->first);
        }
      }
    }
  }
  // Quantize kernel: input bytes / median time, per block shape and launch size.
  std::map<std::pair<QuantScheme, int64_t>, std::vector<double>> quantize;
  for (const CopyKernelSample& c : m.copies) {
    std::optional<QuantScheme> scheme;
    if (c.pattern == kPatternQuantize) scheme = QuantScheme::kBlock;
    if (c.pattern == kPatternQuantizeMx) scheme = QuantScheme::kMx;
    if (c.pattern == kPatternQuantizeTensor) scheme = QuantScheme::kTensor;
    if (!scheme) continue;
    auto& cell = quantize[{*scheme, c.bytes}];
    cell.insert(cell.end(), c.seconds.begin(), c.seconds.end());
  }
  for (const auto& [key, seconds] : quantize)
    if (MedianOf(seconds) > 0)
      fit.quantize_kernel.rates.push_back({key.second, static_cast<double>(key.second) / MedianOf(seconds), key.first});
  if (!fit.quantize_kernel.rates.empty())
    fit.quantize_kernel.source = m.source + "; quantize kernel rates: bf16 bytes read / median time per launch";
  return fit;
}

json HostSectionJson(const HostFit& fit) {
  if (fit.measured.empty()) return nullptr;
  const json all = fit.host;
  json j = json::object();
  for (const std::string& name : fit.measured) j[name] = all.at(name);
  j["source"] = fit.host.source;
  return j;
}

json HostFitJson(const HostMeasurements& m, const HostFit& fit) {
  std::map<std::string, std::vector<double>> batches;
  CallMedians(m, batches);
  json calls = json::object();
  for (const auto& [call, v] : batches) calls[call] = MedianOf(v);
  json j = {{"per_call_median_ns", calls}};
  if (fit.has_nccl) {
    auto points = [](const std::vector<std::pair<double, double>>& p) {
      json a = json::array();
      for (const auto& [ops, ns] : p) a.push_back({{"ops", static_cast<int64_t>(ops)}, {"median_ns", ns}});
      return a;
    };
    auto line = [](const WeightedLine& l) {
      return json{{"intercept_ns", l.intercept}, {"slope_ns_per_op", l.slope},
                  {"max_abs_relative_error", l.max_abs_relative_error}};
    };
    j["nccl"] = {{"series", fit.nccl.series},
                 {"model", "enqueue = a + nccl_op_ns x ops; group end = b + nccl_group_op_ns x ops; "
                           "nccl_group_ns = a + b (ops = sends + recvs)"},
                 {"enqueue", points(fit.nccl.enqueue)},
                 {"end", points(fit.nccl.end)},
                 {"enqueue_line", line(fit.nccl.enqueue_line)},
                 {"end_line", line(fit.nccl.end_line)}};
  }
  json pin, map, register_detail;
  if (ColdRate(m, kColdHostAlloc, &pin) > 0) j["pin_host_alloc"] = pin;
  if (ColdRate(m, kColdHostRegister, &register_detail) > 0) j["pin_host_register"] = register_detail;
  if (ColdRate(m, kColdPoolGrow, &map) > 0) j["pool_grow"] = map;
  if (m.launch_queue_depth >= 0) j["launch_queue_depth"] = m.launch_queue_depth;
  return j;
}

}  // namespace reshard
