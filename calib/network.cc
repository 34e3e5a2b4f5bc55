// The network part of a calibration: per-op fit and JSON (see network.h).
#include "calib/network.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/json_fields.h"

namespace reshard {

using nlohmann::json;
using namespace json_fields;

std::vector<std::string> NetworkMeasurements::PairHosts() const {
  std::vector<std::string> out;
  for (int32_t r : {from, to})
    if (r >= 0 && r < static_cast<int32_t>(ranks.size())) out.push_back(ranks[r].host);
  return out;
}

NetworkOpFit FitNetworkOps(std::span<const NetworkOpSample> samples) {
  NetworkOpFit fit;
  if (samples.empty()) throw InputError("<measurements>", "network.ops", "no per-op samples");
  for (const NetworkOpSample& s : samples)
    if (s.ops < 1 || s.bytes < 1 || !(s.seconds > 0) || !std::isfinite(s.seconds))
      throw InputError("<measurements>", "network.ops",
                       fmt::format("sample of {} ops x {} bytes in {} s: each must be positive", s.ops, s.bytes, s.seconds));
  fit.bytes = std::min_element(samples.begin(), samples.end(), [](const auto& a, const auto& b) {
                return a.bytes < b.bytes;
              })->bytes;
  std::map<int32_t, std::vector<double>> by_ops;
  for (const NetworkOpSample& s : samples)
    if (s.bytes == fit.bytes) by_ops[s.ops].push_back(s.seconds * 1e9);
  if (by_ops.size() < 2)
    throw InputError("<measurements>", "network.ops",
                     fmt::format("at {} bytes only {} group size(s) were measured: the per-op cost needs two", fit.bytes,
                                 by_ops.size()));
  for (auto& [ops, ns] : by_ops) {
    std::sort(ns.begin(), ns.end());
    const size_t n = ns.size();
    const double median = n % 2 == 1 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2;
    fit.points.emplace_back(static_cast<double>(ops), median);
  }
  fit.line = FitWeightedLine(fit.points);
  fit.op_gap_ns = std::max<int64_t>(0, std::llround(fit.line.slope));
  return fit;
}

json NetworkCalibrationRecord(const NetworkMeasurements& m) {
  return {{"measured", true}, {"source", m.source}, {"hosts", m.PairHosts()}, {"ranks", {m.from, m.to}}};
}

json NetworkMeasurementsJson(const NetworkMeasurements& m, const NetworkOpFit& fit) {
  json ranks = json::array();
  for (const NetworkRank& r : m.ranks)
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"local_rank", r.local_rank},
                     {"device", r.device},
                     {"pci_bus_id", r.pci_bus_id}});
  // Samples grouped by (bytes, ops), as the link series group theirs by size.
  std::map<std::pair<int64_t, int32_t>, std::vector<double>> groups;
  for (const NetworkOpSample& s : m.ops) groups[{s.bytes, s.ops}].push_back(s.seconds);
  json ops = json::array();
  for (const auto& [key, seconds] : groups)
    ops.push_back({{"bytes", key.first}, {"ops", key.second}, {"samples_s", seconds}});
  json points = json::array();
  for (const auto& [k, ns] : fit.points) points.push_back({{"ops", static_cast<int64_t>(k)}, {"median_ns", ns}});
  return {{"launcher", m.launcher},
          {"source", m.source},
          {"ranks", ranks},
          {"pair", {m.from, m.to}},
          {"ops", ops},
          {"op_fit",
           {{"model", "median ns of a group of k sends = intercept_ns + op_gap_ns x k, weighted by 1 / t, at the smallest size"},
            {"bytes", fit.bytes},
            {"points", points},
            {"intercept_ns", fit.line.intercept},
            {"slope_ns_per_op", fit.line.slope},
            {"max_abs_relative_error", fit.line.max_abs_relative_error},
            {"op_gap_ns", fit.op_gap_ns}}}};
}

NetworkMeasurements NetworkMeasurementsFromJson(const json& j, const std::string& file, const std::string& field) {
  CheckObject(j, file, field);
  CheckKeys(j, file, field, {"launcher", "source", "ranks", "pair", "ops", "op_fit"});
  NetworkMeasurements m;
  if (auto it = j.find("launcher"); it != j.end()) m.launcher = GetString(*it, file, Dot(field, "launcher"));
  if (auto it = j.find("source"); it != j.end()) m.source = GetString(*it, file, Dot(field, "source"));
  auto array = [&](const json& a, const std::string& f) -> const json& {
    if (!a.is_array()) Bad(file, f, fmt::format("expected an array, got {}", TypeName(a)));
    return a;
  };
  auto small = [&](const json& v, const std::string& f, int64_t lo) {
    const int64_t x = GetInt(v, file, f);
    if (x < lo || x >= (int64_t{1} << 30)) Bad(file, f, fmt::format("must be in [{}, 2^30), got {}", lo, x));
    return static_cast<int32_t>(x);
  };
  const std::string rf = Dot(field, "ranks");
  const json& ranks = array(Need(j, "ranks", file, field), rf);
  for (size_t i = 0; i < ranks.size(); ++i) {
    const std::string f = fmt::format("{}[{}]", rf, i);
    CheckObject(ranks[i], file, f);
    CheckKeys(ranks[i], file, f, {"rank", "host", "local_rank", "device", "pci_bus_id"});
    NetworkRank r;
    r.rank = small(Need(ranks[i], "rank", file, f), Dot(f, "rank"), 0);
    if (r.rank != static_cast<int32_t>(i)) Bad(file, Dot(f, "rank"), fmt::format("expected rank {} (rank order), got {}", i, r.rank));
    r.host = GetString(Need(ranks[i], "host", file, f), file, Dot(f, "host"));
    if (auto it = ranks[i].find("local_rank"); it != ranks[i].end()) r.local_rank = small(*it, Dot(f, "local_rank"), 0);
    if (auto it = ranks[i].find("device"); it != ranks[i].end()) r.device = small(*it, Dot(f, "device"), 0);
    if (auto it = ranks[i].find("pci_bus_id"); it != ranks[i].end()) r.pci_bus_id = GetString(*it, file, Dot(f, "pci_bus_id"));
    m.ranks.push_back(r);
  }
  const std::string pf = Dot(field, "pair");
  const json& pair = array(Need(j, "pair", file, field), pf);
  if (pair.size() != 2) Bad(file, pf, fmt::format("expected two ranks, got {}", pair.size()));
  m.from = small(pair[0], pf + "[0]", 0);
  m.to = small(pair[1], pf + "[1]", 0);
  const auto n = static_cast<int32_t>(m.ranks.size());
  if (m.from >= n || m.to >= n || m.from == m.to)
    Bad(file, pf, fmt::format("ranks {} and {} must be two of the {} ranks listed", m.from, m.to, n));
  const std::string of = Dot(field, "ops");
  const json& ops = array(Need(j, "ops", file, field), of);
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string f = fmt::format("{}[{}]", of, i);
    CheckObject(ops[i], file, f);
    CheckKeys(ops[i], file, f, {"bytes", "ops", "samples_s"});
    const int64_t bytes = GetInt(Need(ops[i], "bytes", file, f), file, Dot(f, "bytes"));
    if (bytes < 1 || bytes > (int64_t{1} << 40)) Bad(file, Dot(f, "bytes"), fmt::format("must be in [1, 1 TiB], got {}", bytes));
    const int32_t k = small(Need(ops[i], "ops", file, f), Dot(f, "ops"), 1);
    const json& samples = array(Need(ops[i], "samples_s", file, f), Dot(f, "samples_s"));
    if (samples.empty()) Bad(file, Dot(f, "samples_s"), "is empty: a group size needs at least one timed sample");
    for (size_t t = 0; t < samples.size(); ++t) {
      const std::string ft = fmt::format("{}.samples_s[{}]", f, t);
      const double s = GetNumber(samples[t], file, ft);
      if (s < 1e-7 || s > 3600) Bad(file, ft, fmt::format("must be a time in [1e-07, 3600] seconds, got {}", s));
      m.ops.push_back({k, bytes, s});
    }
  }
  return m;
}

}  // namespace reshard
