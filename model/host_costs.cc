// Host costs, copy- and quantize-kernel rates: interpolation and JSON (see host_costs.h).
#include "model/host_costs.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/json_fields.h"

namespace reshard {

using nlohmann::json;
using namespace json_fields;  // NOLINT: the field readers shared by model/ parsers

namespace {

// The integer fields by JSON name, in file order.
const std::vector<std::pair<const char*, int64_t HostCosts::*>>& IntFields() {
  static const std::vector<std::pair<const char*, int64_t HostCosts::*>> fields = {
      {"event_record_ns", &HostCosts::event_record_ns},   {"stream_wait_ns", &HostCosts::stream_wait_ns},
      {"kernel_launch_ns", &HostCosts::kernel_launch_ns}, {"memcpy_ns", &HostCosts::memcpy_ns},
      {"alloc_ns", &HostCosts::alloc_ns},                 {"free_ns", &HostCosts::free_ns},
      {"nccl_op_ns", &HostCosts::nccl_op_ns},             {"nccl_group_ns", &HostCosts::nccl_group_ns},
      {"nccl_group_op_ns", &HostCosts::nccl_group_op_ns}, {"nccl_connect_ns", &HostCosts::nccl_connect_ns},
      {"event_gpu_ns", &HostCosts::event_gpu_ns},
  };
  return fields;
}
const std::vector<std::pair<const char*, double HostCosts::*>>& RateFields() {
  static const std::vector<std::pair<const char*, double HostCosts::*>> fields = {
      {"pin_bytes_per_s", &HostCosts::pin_bytes_per_s}, {"map_bytes_per_s", &HostCosts::map_bytes_per_s}};
  return fields;
}

// Log-linear in run bytes over points[lo, hi) (one share, sorted by run), clamped.
double RateAtRun(const std::vector<CopyRatePoint>& p, size_t lo, size_t hi, int64_t run_bytes) {
  if (run_bytes <= p[lo].run_bytes) return p[lo].bytes_per_s;
  if (run_bytes >= p[hi - 1].run_bytes) return p[hi - 1].bytes_per_s;
  for (size_t i = lo + 1; i < hi; ++i) {
    if (run_bytes > p[i].run_bytes) continue;
    const double x0 = std::log(static_cast<double>(p[i - 1].run_bytes)), x1 = std::log(static_cast<double>(p[i].run_bytes));
    const double w = (std::log(static_cast<double>(run_bytes)) - x0) / (x1 - x0);
    return p[i - 1].bytes_per_s + w * (p[i].bytes_per_s - p[i - 1].bytes_per_s);
  }
  return p[hi - 1].bytes_per_s;
}

// Calls point(p, fi) for each object of j's "rates" array (fi: its field
// path), after checking the array, each element's type and its keys.
template <typename Point>
void ForEachRate(const json& j, const std::string& file, const std::string& field,
                 std::initializer_list<std::string> keys, Point point) {
  const json& rates = Need(j, "rates", file, field);
  const std::string rf = Dot(field, "rates");
  if (!rates.is_array()) Bad(file, rf, fmt::format("expected an array, got {}", TypeName(rates)));
  for (size_t i = 0; i < rates.size(); ++i) {
    const std::string fi = fmt::format("{}[{}]", rf, i);
    CheckObject(rates[i], file, fi);
    CheckKeys(rates[i], file, fi, std::vector<std::string>(keys));
    point(rates[i], fi);
  }
}

}  // namespace

bool HostCosts::Empty() const {
  for (const auto& [name, m] : IntFields())
    if (this->*m != 0) return false;
  for (const auto& [name, m] : RateFields())
    if (this->*m != 0) return false;
  return true;
}

double CopyKernelProfile::Rate(int64_t run_bytes, double sm_share) const {
  if (rates.empty()) return 0;
  run_bytes = std::max<int64_t>(run_bytes, 1);
  // Runs of points with one share: [begin, end).
  std::vector<std::pair<size_t, size_t>> shares;
  for (size_t i = 0; i < rates.size();) {
    size_t j = i;
    while (j < rates.size() && rates[j].sm_share == rates[i].sm_share) ++j;
    shares.emplace_back(i, j);
    i = j;
  }
  auto share_of = [&](size_t k) { return rates[shares[k].first].sm_share; };
  auto rate_of = [&](size_t k) { return RateAtRun(rates, shares[k].first, shares[k].second, run_bytes); };
  if (sm_share <= share_of(0)) return rate_of(0);
  if (sm_share >= share_of(shares.size() - 1)) return rate_of(shares.size() - 1);
  for (size_t k = 1; k < shares.size(); ++k) {
    if (sm_share > share_of(k)) continue;
    const double w = (sm_share - share_of(k - 1)) / (share_of(k) - share_of(k - 1));
    return rate_of(k - 1) + w * (rate_of(k) - rate_of(k - 1));
  }
  return rate_of(shares.size() - 1);
}

double CopyKernelProfile::FloorNs(double bytes, double piece_bytes) const {
  if (floor_ns <= 0 && !(floor_bytes_per_s > 0)) return 0;
  double fixed = static_cast<double>(floor_ns);
  if (floor_chunk_bytes > 0 && floor_base_ns > 0 && piece_bytes < static_cast<double>(floor_chunk_bytes))
    fixed = static_cast<double>(floor_base_ns) +
            static_cast<double>(floor_ns - floor_base_ns) * piece_bytes / static_cast<double>(floor_chunk_bytes);
  return fixed + (floor_bytes_per_s > 0 ? bytes / floor_bytes_per_s * 1e9 : 0);
}

bool QuantizeKernelProfile::Has(QuantScheme scheme) const {
  return std::any_of(rates.begin(), rates.end(), [&](const QuantizeRatePoint& p) { return p.scheme == scheme; });
}

double QuantizeKernelProfile::Seconds(int64_t input_bytes, QuantScheme scheme) const {
  if (rates.empty() || input_bytes <= 0) return 0;
  if (!Has(scheme)) scheme = QuantScheme::kBlock;
  std::vector<const QuantizeRatePoint*> pts;
  for (const QuantizeRatePoint& p : rates)
    if (p.scheme == scheme) pts.push_back(&p);
  if (pts.empty()) return 0;  // neither this scheme nor 128 x 128 blocks measured
  const double x = std::log(static_cast<double>(input_bytes));
  double rate = pts.back()->bytes_per_s;
  if (input_bytes <= pts.front()->input_bytes) {
    rate = pts.front()->bytes_per_s;
  } else {
    for (size_t i = 1; i < pts.size(); ++i) {
      if (input_bytes > pts[i]->input_bytes) continue;
      const double x0 = std::log(static_cast<double>(pts[i - 1]->input_bytes));
      const double x1 = std::log(static_cast<double>(pts[i]->input_bytes));
      rate = pts[i - 1]->bytes_per_s + (x - x0) / (x1 - x0) * (pts[i]->bytes_per_s - pts[i - 1]->bytes_per_s);
      break;
    }
  }
  return static_cast<double>(input_bytes) / rate;
}

void to_json(json& j, const HostCosts& h) {
  j = json::object();
  for (const auto& [name, m] : IntFields()) j[name] = h.*m;
  for (const auto& [name, m] : RateFields()) j[name] = h.*m;
  j["source"] = h.source;
}

void to_json(json& j, const CopyKernelProfile& c) {
  json rates = json::array();
  for (const CopyRatePoint& p : c.rates)
    rates.push_back({{"run_bytes", p.run_bytes}, {"sm_share", p.sm_share}, {"bytes_per_s", p.bytes_per_s}});
  j = json{{"rates", rates}, {"source", c.source}};
  if (c.floor_ns != 0 || c.floor_bytes_per_s != 0) {  // only when measured
    j["floor_ns"] = c.floor_ns;
    j["floor_bytes_per_s"] = c.floor_bytes_per_s;
  }
  if (c.floor_base_ns != 0 || c.floor_chunk_bytes != 0) {
    j["floor_base_ns"] = c.floor_base_ns;
    j["floor_chunk_bytes"] = c.floor_chunk_bytes;
  }
}

void ApplyHostCostsJson(HostCosts& out, const json& j, const std::string& file, const std::string& field) {
  CheckObject(j, file, field);
  std::vector<std::string> allowed{"source"};
  for (const auto& [name, m] : IntFields()) allowed.emplace_back(name);
  for (const auto& [name, m] : RateFields()) allowed.emplace_back(name);
  CheckKeys(j, file, field, allowed);
  HostCosts h = out;
  for (const auto& [name, m] : IntFields()) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    h.*m = GetInt(*it, file, Dot(field, name));
    // A day per call is beyond any host; larger values would overflow sums.
    if (h.*m < 0 || h.*m > int64_t{86'400'000'000'000})
      Bad(file, Dot(field, name), fmt::format("must be in [0, 8.64e13] ns, got {}", h.*m));
  }
  for (const auto& [name, m] : RateFields()) {
    auto it = j.find(name);
    if (it == j.end()) continue;
    h.*m = GetNumber(*it, file, Dot(field, name));
    if (h.*m != 0 && !(h.*m >= 1e3)) Bad(file, Dot(field, name), fmt::format("must be 0 (not modelled) or >= 1e3, got {}", h.*m));
  }
  if (auto it = j.find("source"); it != j.end()) h.source = GetString(*it, file, Dot(field, "source"));
  out = std::move(h);
}

CopyKernelProfile CopyKernelProfileFromJson(const json& j, const std::string& file, const std::string& field) {
  CheckObject(j, file, field);
  CheckKeys(j, file, field, {"rates", "floor_ns", "floor_base_ns", "floor_chunk_bytes", "floor_bytes_per_s", "source"});
  CopyKernelProfile c;
  if (auto it = j.find("floor_ns"); it != j.end()) {
    c.floor_ns = GetInt(*it, file, Dot(field, "floor_ns"));
    if (c.floor_ns < 0 || c.floor_ns > int64_t{1'000'000'000}) Bad(file, Dot(field, "floor_ns"), "must be in [0, 1e9] ns");
  }
  for (const auto& [key, out] : {std::pair<const char*, int64_t*>{"floor_base_ns", &c.floor_base_ns},
                                 std::pair<const char*, int64_t*>{"floor_chunk_bytes", &c.floor_chunk_bytes}}) {
    auto it = j.find(key);
    if (it == j.end()) continue;
    *out = GetInt(*it, file, Dot(field, key));
    if (*out < 0 || *out > int64_t{1'000'000'000}) Bad(file, Dot(field, key), "must be in [0, 1e9]");
  }
  if (c.floor_base_ns > c.floor_ns) Bad(file, Dot(field, "floor_base_ns"), "must be at most floor_ns");
  if (auto it = j.find("floor_bytes_per_s"); it != j.end()) {
    c.floor_bytes_per_s = GetNumber(*it, file, Dot(field, "floor_bytes_per_s"));
    if (c.floor_bytes_per_s != 0 && !(c.floor_bytes_per_s >= 1e3))
      Bad(file, Dot(field, "floor_bytes_per_s"), "must be 0 or >= 1e3");
  }
  if (auto it = j.find("source"); it != j.end()) c.source = GetString(*it, file, Dot(field, "source"));
  ForEachRate(j, file, field, {"run_bytes", "sm_share", "bytes_per_s"}, [&](const json& p, const std::string& fi) {
    CopyRatePoint r;
    r.run_bytes = GetInt(Need(p, "run_bytes", file, fi), file, fi + ".run_bytes");
    r.sm_share = GetNumber(Need(p, "sm_share", file, fi), file, fi + ".sm_share");
    r.bytes_per_s = GetNumber(Need(p, "bytes_per_s", file, fi), file, fi + ".bytes_per_s");
    if (r.run_bytes <= 0) Bad(file, fi + ".run_bytes", "must be > 0");
    if (!(r.sm_share > 0 && r.sm_share <= 1)) Bad(file, fi + ".sm_share", "must be in (0, 1]");
    if (!(r.bytes_per_s >= 1e3)) Bad(file, fi + ".bytes_per_s", "must be >= 1e3");
    for (const CopyRatePoint& q : c.rates)
      if (q.run_bytes == r.run_bytes && q.sm_share == r.sm_share)
        Bad(file, fi, fmt::format("a second point for run_bytes {} at sm_share {}", r.run_bytes, r.sm_share));
    c.rates.push_back(r);
  });
  std::sort(c.rates.begin(), c.rates.end(), [](const CopyRatePoint& a, const CopyRatePoint& b) {
    return a.sm_share != b.sm_share ? a.sm_share < b.sm_share : a.run_bytes < b.run_bytes;
  });
  return c;
}

void to_json(json& j, const QuantizeKernelProfile& q) {
  json rates = json::array();
  for (const QuantizeRatePoint& p : q.rates) {
    json r{{"input_bytes", p.input_bytes}, {"bytes_per_s", p.bytes_per_s}};
    if (p.scheme != QuantScheme::kBlock) r["scheme"] = QuantSchemeName(p.scheme);
    rates.push_back(std::move(r));
  }
  j = json{{"rates", rates}, {"source", q.source}};
}

QuantizeKernelProfile QuantizeKernelProfileFromJson(const json& j, const std::string& file, const std::string& field) {
  CheckObject(j, file, field);
  CheckKeys(j, file, field, {"rates", "source"});
  QuantizeKernelProfile q;
  if (auto it = j.find("source"); it != j.end()) q.source = GetString(*it, file, Dot(field, "source"));
  ForEachRate(j, file, field, {"input_bytes", "bytes_per_s", "scheme"}, [&](const json& p, const std::string& fi) {
    QuantizeRatePoint r;
    if (auto it = p.find("scheme"); it != p.end())
      r.scheme = ParseQuantScheme(GetString(*it, file, fi + ".scheme"), file, fi + ".scheme");
    r.input_bytes = GetInt(Need(p, "input_bytes", file, fi), file, fi + ".input_bytes");
    r.bytes_per_s = GetNumber(Need(p, "bytes_per_s", file, fi), file, fi + ".bytes_per_s");
    if (r.input_bytes <= 0) Bad(file, fi + ".input_bytes", "must be > 0");
    if (!(r.bytes_per_s >= 1e3 && r.bytes_per_s <= 1e16)) Bad(file, fi + ".bytes_per_s", "must be in [1e3, 1e16]");
    for (const QuantizeRatePoint& o : q.rates)
      if (o.input_bytes == r.input_bytes && o.scheme == r.scheme)
        Bad(file, fi, fmt::format("a second {} point for input_bytes {}", QuantSchemeName(r.scheme), r.input_bytes));
    q.rates.push_back(r);
  });
  std::sort(q.rates.begin(), q.rates.end(), [](const QuantizeRatePoint& a, const QuantizeRatePoint& b) {
    return a.scheme != b.scheme ? a.scheme < b.scheme : a.input_bytes < b.input_bytes;
  });
  return q;
}

std::string FingerprintText(std::string_view name, const HostCosts& h) {
  if (h.Empty()) return "";
  std::string s = fmt::format("{}:", name);
  for (const auto& [key, m] : IntFields()) s += fmt::format("{}={};", key, h.*m);
  for (const auto& [key, m] : RateFields()) s += fmt::format("{}={};", key, h.*m);
  return s + "\n";
}

std::string FingerprintText(const CopyKernelProfile& c) {
  if (c.Empty()) return "";
  std::string s = "copy_kernel:";
  for (const CopyRatePoint& p : c.rates) s += fmt::format("({},{},{})", p.run_bytes, p.sm_share, p.bytes_per_s);
  if (c.floor_ns != 0 || c.floor_bytes_per_s != 0) s += fmt::format(";floor={},{}", c.floor_ns, c.floor_bytes_per_s);
  if (c.floor_base_ns != 0 || c.floor_chunk_bytes != 0) s += fmt::format(";base={},{}", c.floor_base_ns, c.floor_chunk_bytes);
  return s + "\n";
}

std::string FingerprintText(const QuantizeKernelProfile& q) {
  if (q.Empty()) return "";
  std::string s = "quantize_kernel:";
  for (const QuantizeRatePoint& p : q.rates) {
    if (p.scheme == QuantScheme::kBlock) s += fmt::format("({},{})", p.input_bytes, p.bytes_per_s);
    else s += fmt::format("({}:{},{})", QuantSchemeName(p.scheme), p.input_bytes, p.bytes_per_s);
  }
  return s + "\n";
}

}  // namespace reshard
