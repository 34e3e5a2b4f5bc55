// Calibration measurements -> fitted link profiles, overheads and profile JSON.
#include "calib/profile.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/cluster.h"
#include "model/error.h"

namespace reshard {

namespace {

using nlohmann::json;

constexpr std::array<const char*, 5> kLinks = {"nvlink", "network", "pcie", "pcie_pageable", "device_copy"};
constexpr std::array<const char*, 4> kModes = {"one_way", "h2d", "d2h", "both_ways"};

json ResidualsJson(const ResidualSummary& r) {
  return {{"max_abs_relative_error", r.max_abs_relative_error}, {"rms_relative_error", r.rms_relative_error}};
}

json LinkFitJson(const LinkFit& f) {
  json j = ResidualsJson(f.residuals);
  j["latency_ns"] = f.latency_ns;
  j["latency_fixed"] = f.latency_fixed;
  j["latency_line_ns"] = f.latency_line_ns;
  j["latency_cap_ns"] = f.latency_cap_ns;
  j["bytes_per_s"] = f.bytes_per_s;
  j["slope_bytes_per_s"] = f.slope_bytes_per_s;
  j["efficiency_points"] = f.efficiency.size();
  return j;
}

}  // namespace

CalibrationFit FitCalibration(const CalibrationData& data, const FitOptions& options) {
  for (size_t i = 0; i < data.series.size(); ++i) {
    const MeasuredSeries& s = data.series[i];
    const std::string field = fmt::format("series[{}]", i);
    if (std::find(kLinks.begin(), kLinks.end(), s.link) == kLinks.end())
      throw InputError("<measurements>", field + ".link", fmt::format("unknown link '{}'", s.link));
    if (std::find(kModes.begin(), kModes.end(), s.mode) == kModes.end())
      throw InputError("<measurements>", field + ".mode", fmt::format("unknown mode '{}'", s.mode));
  }
  CalibrationFit fit;
  for (const char* link : kLinks) {
    std::vector<LinkSample> one, both;
    for (const MeasuredSeries& s : data.series) {
      if (s.link != link) continue;
      auto& into = s.BothWays() ? both : one;
      into.insert(into.end(), s.samples.begin(), s.samples.end());
    }
    if (one.empty()) continue;  // not measured: the profile leaves the preset's numbers
    LinkCalibration c;
    c.link = link;
    FitOptions one_options = options;
    if (!both.empty()) {
      // One latency serves both: keep it within what the both-ways series allows.
      one_options.max_latency_ns = FitLink(both, options, std::string(link) + ".both_ways").latency_cap_ns;
    }
    c.one_way = FitLink(one, one_options, std::string(link) + ".one_way");
    c.profile = c.one_way.Profile();
    // Not measured by calibrate (yet): NVLink transfers and copy kernels share
    // SMs and HBM (bench/results/2026-11-30-h200x2-nccl-group-probe/).
    c.profile.shares_copy_port = c.link == "nvlink";
    if (!both.empty()) {
      FitOptions o = options;
      o.fixed_latency_ns = c.one_way.latency_ns;
      c.both_ways = FitLink(both, o, std::string(link) + ".both_ways");
      c.has_both_ways = true;
      SetDuplex(c.profile, c.both_ways);
    }
    fit.links.push_back(std::move(c));
  }
  for (size_t i = 0; i < data.series.size(); ++i) {
    const MeasuredSeries& s = data.series[i];
    if (s.samples.empty()) continue;
    auto it = std::find_if(fit.links.begin(), fit.links.end(), [&](const LinkCalibration& c) { return c.link == s.link; });
    if (it == fit.links.end()) continue;  // both-ways only: nothing to compare against
    fit.series.push_back({i, Residuals(it->profile, s.samples, s.BothWays())});
  }

  if (!data.host.Empty()) {
    fit.host = FitHost(data.host);
    fit.has_host = true;
  }
  if (!data.network.ops.empty()) {
    auto it = std::find_if(fit.links.begin(), fit.links.end(), [](const LinkCalibration& c) { return c.link == "network"; });
    if (it == fit.links.end())
      throw InputError("<measurements>", "network.ops", "per-op samples without a network size sweep (series of link 'network')");
    fit.network_ops = FitNetworkOps(data.network.ops);
    fit.has_network_ops = true;
    it->profile.op_gap_ns = fit.network_ops.op_gap_ns;
  }
  for (const DeviceMemoryProbe& m : data.memory) {
    if (m.total_bytes >= 0 && m.free_after_context_bytes >= 0) {
      fit.overheads.cuda_context_bytes =
          std::max(fit.overheads.cuda_context_bytes, m.total_bytes - m.free_after_context_bytes);
      fit.has_cuda_context = true;
    }
    if (data.nccl_peers > 0 && m.free_before_nccl_bytes >= 0 && m.free_after_first_transfer_bytes >= 0) {
      const int64_t used = std::max<int64_t>(0, m.free_before_nccl_bytes - m.free_after_first_transfer_bytes);
      fit.overheads.nccl_bytes_per_peer = std::max(fit.overheads.nccl_bytes_per_peer, used / data.nccl_peers);
      fit.has_nccl_per_peer = true;
      if (m.free_after_nccl_init_bytes >= 0) {
        fit.nccl_init_bytes =
            std::max(fit.nccl_init_bytes, m.free_before_nccl_bytes - m.free_after_nccl_init_bytes);
        fit.nccl_connect_bytes_per_peer =
            std::max(fit.nccl_connect_bytes_per_peer,
                     (m.free_after_nccl_init_bytes - m.free_after_first_transfer_bytes) / data.nccl_peers);
      }
    }
  }
  return fit;
}

json CalibrationProfileJson(const CalibrationData& data, const CalibrationFit& fit, const FitOptions& options) {
  json links = json::object();
  json link_fits = json::object();
  for (const LinkCalibration& c : fit.links) {
    links[c.link] = c.profile;
    json f = {{"one_way", LinkFitJson(c.one_way)}};
    if (c.has_both_ways) f["both_ways"] = LinkFitJson(c.both_ways);
    link_fits[c.link] = f;
  }
  json memory = json::object();
  if (fit.has_cuda_context) memory["cuda_context_bytes"] = fit.overheads.cuda_context_bytes;
  if (fit.has_nccl_per_peer) memory["nccl_bytes_per_peer"] = fit.overheads.nccl_bytes_per_peer;

  json series = json::array();
  for (const SeriesFit& sf : fit.series) {
    const MeasuredSeries& s = data.series[sf.series];
    json sizes = json::array();
    for (const SizeResidual& r : sf.residuals.sizes) {
      json samples = json::array();
      for (const LinkSample& x : s.samples)
        if (x.bytes == r.bytes) samples.push_back(x.seconds);
      sizes.push_back({{"bytes", r.bytes},
                       {"samples_s", samples},
                       {"median_s", r.median_s},
                       {"min_s", r.min_s},
                       {"max_s", r.max_s},
                       {"bytes_per_s", static_cast<double>(r.bytes) / r.median_s},
                       {"model_s", r.model_s},
                       {"relative_error", r.relative_error}});
    }
    json j = {{"link", s.link},     {"mode", s.mode}, {"method", s.method},
              {"timing", s.timing}, {"gpus", s.gpus}, {"sizes", sizes}};
    j["residuals"] = ResidualsJson(sf.residuals);
    series.push_back(j);
  }
  json gpus = json::array();
  for (const DeviceMemoryProbe& m : data.memory)
    gpus.push_back({{"gpu", m.gpu},
                    {"name", m.name},
                    {"total_bytes", m.total_bytes},
                    {"free_after_context_bytes", m.free_after_context_bytes},
                    {"free_before_nccl_bytes", m.free_before_nccl_bytes},
                    {"free_after_nccl_init_bytes", m.free_after_nccl_init_bytes},
                    {"free_after_first_transfer_bytes", m.free_after_first_transfer_bytes}});
  json environment = json::object();
  for (const auto& [k, v] : data.environment) environment[k] = v;

  json measurements = {
      {"format", "reshard-calibration-measurements-v1"},
      {"model", "t = latency_ns + bytes / (bytes_per_s x efficiency(bytes)); both ways: duplex_bytes_per_s and "
                "duplex_efficiency; relative_error = model_s / median_s - 1"},
      {"fit_options", {{"max_relative_error", options.max_relative_error}, {"max_points", options.max_points}}},
      {"environment", environment},
      {"links", link_fits},
      {"series", series},
      {"memory",
       {{"method", "cudaMemGetInfo: cuda_context_bytes = total - free after the first cudaFree(0); "
                   "nccl_bytes_per_peer = (free before ncclCommInitAll - free after a first send/recv each way "
                   "with every peer) / peers"},
        {"nccl_peers", data.nccl_peers},
        {"nccl_init_bytes", fit.nccl_init_bytes},
        {"nccl_connect_bytes_per_peer", fit.nccl_connect_bytes_per_peer},
        {"gpus", gpus}}}};
  json j = {{"name", data.name}, {"measured", true}, {"source", data.source}};
  if (!links.empty()) j["links"] = links;
  if (!memory.empty()) j["memory"] = memory;
  if (fit.has_host) {
    if (json host = HostSectionJson(fit.host); !host.is_null()) j["host"] = host;
    if (!fit.host.copy_kernel.Empty()) j["copy_kernel"] = fit.host.copy_kernel;
    if (!fit.host.quantize_kernel.Empty()) j["quantize_kernel"] = fit.host.quantize_kernel;
    measurements["host"] = HostMeasurementsJson(data.host);
    measurements["host_fit"] = HostFitJson(data.host, fit.host);
  }
  if (!data.network.Empty()) {
    j["network_calibration"] = NetworkCalibrationRecord(data.network);
    measurements["network"] = NetworkMeasurementsJson(data.network, fit.network_ops);
  }
  j["measurements"] = measurements;
  return j;
}

// Strict: every value is type- and range-checked where it is read, and every
// problem names the file and the JSON path ("measurements.series[0].sizes[3]
// .bytes"), so a hand-edited or damaged profile is refused before fitting.
CalibrationData CalibrationDataFromJson(const json& j, const std::string& file) {
  auto fail = [&](const std::string& field, const std::string& problem) -> void {
    throw InputError(file, field, problem);
  };
  auto dump = [](const json& v) {
    std::string d = v.dump(-1, ' ', false, json::error_handler_t::replace);
    return d.size() > 40 ? d.substr(0, 37) + "..." : d;
  };
  auto object = [&](const json& o, const std::string& field) -> const json& {
    if (!o.is_object()) fail(field, fmt::format("expected an object, got {} {}", o.type_name(), dump(o)));
    return o;
  };
  auto array = [&](const json& o, const std::string& field) -> const json& {
    if (!o.is_array()) fail(field, fmt::format("expected an array, got {} {}", o.type_name(), dump(o)));
    return o;
  };
  auto need = [&](const json& o, const char* key, const std::string& field) -> const json& {
    object(o, field);
    auto it = o.find(key);
    if (it == o.end()) fail(field.empty() ? key : field + "." + key, "missing field");
    return *it;
  };
  auto string = [&](const json& v, const std::string& field) {
    if (!v.is_string()) fail(field, fmt::format("expected a string, got {} {}", v.type_name(), dump(v)));
    return v.get<std::string>();
  };
  auto integer = [&](const json& v, const std::string& field, int64_t lo) {
    int64_t x = 0;
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      fail(field, fmt::format("{} is out of range", dump(v)));
    if (v.is_number_integer()) x = v.get<int64_t>();
    else fail(field, fmt::format("expected an integer, got {} {}", v.type_name(), dump(v)));
    if (x < lo) fail(field, fmt::format("must be >= {}, got {}", lo, x));
    return x;
  };
  CalibrationData d;
  object(j, "");
  if (auto it = j.find("name"); it != j.end()) d.name = string(*it, "name");
  if (auto it = j.find("source"); it != j.end()) d.source = string(*it, "source");
  const std::string mf = "measurements";
  const json& m = need(j, "measurements", "");
  object(m, mf);
  if (auto it = m.find("environment"); it != m.end()) {
    object(*it, mf + ".environment");
    for (const auto& [k, v] : it->items()) d.environment.push_back({k, string(v, mf + ".environment." + k)});
  }
  if (auto it = m.find("host"); it != m.end()) d.host = HostMeasurementsFromJson(*it, file, mf + ".host");
  if (auto it = m.find("network"); it != m.end()) d.network = NetworkMeasurementsFromJson(*it, file, mf + ".network");
  static const json kNoSeries = json::array();
  const json& series = d.host.Empty() ? array(need(m, "series", mf), mf + ".series")
                                      : array(m.contains("series") ? m.at("series") : kNoSeries, mf + ".series");
  if (series.empty() && d.host.Empty()) fail(mf + ".series", "is empty: nothing to fit");
  for (size_t i = 0; i < series.size(); ++i) {
    const std::string f = fmt::format("{}.series[{}]", mf, i);
    const json& sj = object(series[i], f);
    MeasuredSeries ms;
    ms.link = string(need(sj, "link", f), f + ".link");
    if (std::find(kLinks.begin(), kLinks.end(), ms.link) == kLinks.end()) {
      const std::string hint = Suggest(ms.link, {kLinks.begin(), kLinks.end()});
      fail(f + ".link", fmt::format("unknown link '{}'{}", ms.link, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    ms.mode = string(need(sj, "mode", f), f + ".mode");
    if (std::find(kModes.begin(), kModes.end(), ms.mode) == kModes.end()) {
      const std::string hint = Suggest(ms.mode, {kModes.begin(), kModes.end()});
      fail(f + ".mode", fmt::format("unknown mode '{}'{}", ms.mode, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
    if (auto it = sj.find("method"); it != sj.end()) ms.method = string(*it, f + ".method");
    if (auto it = sj.find("timing"); it != sj.end()) ms.timing = string(*it, f + ".timing");
    if (auto it = sj.find("gpus"); it != sj.end()) {
      const json& g = array(*it, f + ".gpus");
      for (size_t k = 0; k < g.size(); ++k) {
        const std::string fg = fmt::format("{}.gpus[{}]", f, k);
        const int64_t gpu = integer(g[k], fg, 0);
        if (gpu >= kMaxClusterGpus) fail(fg, fmt::format("GPU {} is beyond the {} GPUs of any cluster", gpu, kMaxClusterGpus));
        ms.gpus.push_back(static_cast<int32_t>(gpu));
      }
    }
    const json& sizes = array(need(sj, "sizes", f), f + ".sizes");
    std::vector<int64_t> distinct;
    for (size_t k = 0; k < sizes.size(); ++k) {
      const std::string fk = fmt::format("{}.sizes[{}]", f, k);
      const int64_t bytes = integer(need(sizes[k], "bytes", fk), fk + ".bytes", 1);
      if (bytes > (int64_t{1} << 40)) fail(fk + ".bytes", fmt::format("{} is more than a transfer of 1 TiB", bytes));
      const json& samples = array(need(sizes[k], "samples_s", fk), fk + ".samples_s");
      if (samples.empty()) fail(fk + ".samples_s", "is empty: a size needs at least one timed sample");
      for (size_t t = 0; t < samples.size(); ++t) {
        const std::string ft = fmt::format("{}.samples_s[{}]", fk, t);
        if (!samples[t].is_number()) fail(ft, fmt::format("expected a number, got {} {}", samples[t].type_name(), dump(samples[t])));
        const double sec = samples[t].get<double>();
        // One transfer of a calibration takes microseconds to seconds (a
        // launch alone is microseconds); 100 ns or an hour is no measurement.
        if (!std::isfinite(sec) || sec < 1e-7 || sec > 3600)
          fail(ft, fmt::format("must be a time in [1e-07, 3600] seconds, got {}", dump(samples[t])));
        ms.samples.push_back({bytes, sec});
      }
      if (std::find(distinct.begin(), distinct.end(), bytes) == distinct.end()) distinct.push_back(bytes);
    }
    if (distinct.size() < 2)
      fail(f + ".sizes", fmt::format("needs at least two distinct sizes to separate latency from bandwidth, got {}",
                                     distinct.size()));
    d.series.push_back(std::move(ms));
  }
  if (auto mem_it = m.find("memory"); mem_it != m.end()) {
    const std::string f = mf + ".memory";
    const json& mem = object(*mem_it, f);
    if (auto it = mem.find("nccl_peers"); it != mem.end())
      d.nccl_peers = static_cast<int32_t>(std::min<int64_t>(integer(*it, f + ".nccl_peers", 0), 1 << 20));
    if (auto it = mem.find("gpus"); it != mem.end()) {
      const json& gpus = array(*it, f + ".gpus");
      for (size_t k = 0; k < gpus.size(); ++k) {
        const std::string fg = fmt::format("{}.gpus[{}]", f, k);
        const json& g = object(gpus[k], fg);
        auto opt_int = [&](const char* key, int64_t fallback) {
          auto v = g.find(key);
          return v == g.end() ? fallback : integer(*v, fg + "." + key, fallback < 0 ? -1 : 0);
        };
        DeviceMemoryProbe p;
        p.gpu = static_cast<int32_t>(std::min<int64_t>(opt_int("gpu", -1), std::numeric_limits<int32_t>::max()));
        if (auto v = g.find("name"); v != g.end()) p.name = string(*v, fg + ".name");
        p.total_bytes = opt_int("total_bytes", -1);
        p.free_after_context_bytes = opt_int("free_after_context_bytes", -1);
        p.free_before_nccl_bytes = opt_int("free_before_nccl_bytes", -1);
        p.free_after_nccl_init_bytes = opt_int("free_after_nccl_init_bytes", -1);
        p.free_after_first_transfer_bytes = opt_int("free_after_first_transfer_bytes", -1);
        d.memory.push_back(p);
      }
    }
  }
  return d;
}

json MergeProfileJson(const json& base, const json& update, const std::string& base_file) {
  if (!base.is_object()) throw InputError(base_file, "", "expected a calibration profile (a JSON object) to merge into");
  json out = base;
  // Objects whose keys are replaced one by one.
  auto merge_keys = [](json& into, const json& from) {
    if (!into.is_object()) into = json::object();
    for (const auto& [k, v] : from.items()) into[k] = v;
  };
  for (const auto& [key, value] : update.items()) {
    if (key == "name") {
      if (!out.contains("name") || !out["name"].is_string() || out["name"].get<std::string>().empty()) out["name"] = value;
    } else if (key == "source") {
      const std::string a = out.value("source", std::string()), b = value.is_string() ? value.get<std::string>() : "";
      out["source"] = a.empty() ? b : b.empty() ? a : a + "; " + b;
    } else if (key == "measured") {
      out["measured"] = out.value("measured", true) && value.is_boolean() && value.get<bool>();
    } else if (key == "links" || key == "memory") {
      merge_keys(out[key], value);
    } else if (key == "measurements") {
      json& m = out["measurements"];
      if (!m.is_object()) m = json::object();
      for (const auto& [mk, mv] : value.items()) {
        if (mk == "environment" || mk == "links") {
          merge_keys(m[mk], mv);
        } else if (mk == "memory") {
          // Only a memory probe that probed something replaces BASE's.
          if (mv.is_object() && mv.contains("gpus") && mv["gpus"].is_array() && !mv["gpus"].empty()) m[mk] = mv;
        } else if (mk == "series") {
          std::vector<std::string> measured;
          for (const json& s : mv)
            if (s.contains("link") && s["link"].is_string()) measured.push_back(s["link"].get<std::string>());
          json kept = json::array();
          if (m.contains("series")) {
            if (!m["series"].is_array())
              throw InputError(base_file, "measurements.series", "expected an array to merge the new series into");
            for (const json& s : m["series"]) {
              const std::string link = s.is_object() ? s.value("link", std::string()) : "";
              if (std::find(measured.begin(), measured.end(), link) == measured.end()) kept.push_back(s);
            }
          }
          for (const json& s : mv) kept.push_back(s);
          m["series"] = kept;
        } else {
          m[mk] = mv;
        }
      }
    } else {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace reshard
