// Calibration measurements -> fitted link profiles, overheads and profile JSON.
#include "executor/calib_profile.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
  json j = {{"name", data.name}, {"measured", true}, {"source", data.source}, {"links", links}};
  if (!memory.empty()) j["memory"] = memory;
  j["measurements"] = measurements;
  return j;
}

CalibrationData CalibrationDataFromJson(const json& j, const std::string& file) {
  // Reads with nlohmann's checked accessors; a type error names the field.
  auto at = [&](const json& o, const char* key, const std::string& field) -> const json& {
    if (!o.is_object() || !o.contains(key)) throw InputError(file, field, fmt::format("missing field '{}'", key));
    return o.at(key);
  };
  CalibrationData d;
  const std::string where = "measurements";
  const json& m = at(j, "measurements", "");
  try {
    if (j.contains("name")) d.name = j.at("name").get<std::string>();
    if (j.contains("source")) d.source = j.at("source").get<std::string>();
    if (m.contains("environment"))
      for (const auto& [k, v] : m.at("environment").items()) d.environment.push_back({k, v.get<std::string>()});
    const json& series = at(m, "series", where);
    for (size_t i = 0; i < series.size(); ++i) {
      const std::string f = fmt::format("{}.series[{}]", where, i);
      const json& s = series.at(i);
      MeasuredSeries ms;
      ms.link = at(s, "link", f).get<std::string>();
      ms.mode = at(s, "mode", f).get<std::string>();
      if (s.contains("method")) ms.method = s.at("method").get<std::string>();
      if (s.contains("timing")) ms.timing = s.at("timing").get<std::string>();
      if (s.contains("gpus")) ms.gpus = s.at("gpus").get<std::vector<int32_t>>();
      const json& sizes = at(s, "sizes", f);
      for (size_t k = 0; k < sizes.size(); ++k) {
        const std::string fk = fmt::format("{}.sizes[{}]", f, k);
        const auto bytes = at(sizes.at(k), "bytes", fk).get<int64_t>();
        for (const json& t : at(sizes.at(k), "samples_s", fk)) ms.samples.push_back({bytes, t.get<double>()});
      }
      d.series.push_back(std::move(ms));
    }
    if (m.contains("memory")) {
      const json& mem = m.at("memory");
      if (mem.contains("nccl_peers")) d.nccl_peers = mem.at("nccl_peers").get<int32_t>();
      if (mem.contains("gpus")) {
        for (const json& g : mem.at("gpus")) {
          DeviceMemoryProbe p;
          p.gpu = g.value("gpu", -1);
          p.name = g.value("name", "");
          p.total_bytes = g.value("total_bytes", int64_t{-1});
          p.free_after_context_bytes = g.value("free_after_context_bytes", int64_t{-1});
          p.free_before_nccl_bytes = g.value("free_before_nccl_bytes", int64_t{-1});
          p.free_after_nccl_init_bytes = g.value("free_after_nccl_init_bytes", int64_t{-1});
          p.free_after_first_transfer_bytes = g.value("free_after_first_transfer_bytes", int64_t{-1});
          d.memory.push_back(p);
        }
      }
    }
  } catch (const json::exception& e) {
    throw InputError(file, where, fmt::format("malformed measurements: {}", e.what()));
  }
  return d;
}

}  // namespace reshard
