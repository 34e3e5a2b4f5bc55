// Scenario reader: YAML (yaml-cpp) or JSON (nlohmann, converted to a YAML
// tree so one reader serves both). Every mapping is checked against the keys
// it allows, so a typo is an error with a suggestion, never silently ignored.
// The layouts are built during loading, so a layout that does not divide is
// reported as a scenario error naming the field.
#include "model/scenario.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include "model/builtin_scenarios.h"
#include "model/error.h"
#include "model/input_file.h"
#include "model/scenario_reader.h"

namespace reshard {

using namespace scenario_detail;  // NOLINT: the shared field readers

namespace {

__extension__ typedef __int128 Int128;  // GCC/Clang extension; exact size arithmetic

}  // namespace

// ---------------------------------------------------------------------------
// ParseBytes: decimal number (optional fraction and exponent), optional unit.
// Exact integer arithmetic in __int128, rounded to the nearest byte, so
// "1.5GB" is exactly 1500000000 and int64 overflow is detected, not wrapped.

int64_t ParseBytes(const std::string& text, const std::string& file, const std::string& field) {
  std::string_view s = Trim(text);
  auto fail = [&](const std::string& problem) -> int64_t { throw InputError(file, field, problem); };
  if (s.empty()) return fail("empty size; expected e.g. 256MiB, 4 GiB, 1.5GB or a number of bytes");
  if (LooksNonFinite(s)) return fail(fmt::format("'{}' is not a finite size", text));
  if (s.front() == '-') return fail(fmt::format("size must not be negative, got '{}'", text));
  size_t i = 0;
  if (s[i] == '+') ++i;
  // Keep at most ~27 significant digits: later integer digits scale the
  // exponent, later fraction digits are dropped (below a byte anyway).
  constexpr Int128 kKeep = Int128{1} << 90;
  Int128 mantissa = 0;
  int digits = 0, frac_digits = 0, dropped_int_digits = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++digits) {
    if (mantissa > kKeep) {
      ++dropped_int_digits;
    } else {
      mantissa = mantissa * 10 + (s[i] - '0');
    }
  }
  if (i < s.size() && s[i] == '.') {
    for (++i; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++digits) {
      if (mantissa > kKeep) continue;
      mantissa = mantissa * 10 + (s[i] - '0');
      ++frac_digits;
    }
  }
  if (digits == 0) return fail(fmt::format("'{}' is not a size; expected e.g. 256MiB, 4 GiB, 1.5GB or 1048576", text));
  int exp10 = dropped_int_digits - frac_digits;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E') && i + 1 < s.size() &&
      (std::isdigit(static_cast<unsigned char>(s[i + 1])) || s[i + 1] == '+' || s[i + 1] == '-')) {
    ++i;
    int sign = 1;
    if (s[i] == '+' || s[i] == '-') sign = s[i++] == '-' ? -1 : 1;
    int e = 0, edigits = 0;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++edigits) e = std::min(e * 10 + (s[i] - '0'), 1000);
    if (edigits == 0) return fail(fmt::format("'{}' has a malformed exponent", text));
    exp10 += sign * e;
  }
  std::string unit = Lower(Trim(s.substr(i)));
  static const std::vector<std::pair<std::string, int64_t>> kUnits = {
      {"", 1},
      {"b", 1},
      {"kb", 1000},
      {"mb", 1000 * 1000},
      {"gb", int64_t{1000} * 1000 * 1000},
      {"tb", int64_t{1000} * 1000 * 1000 * 1000},
      {"pb", int64_t{1000} * 1000 * 1000 * 1000 * 1000},
      {"kib", int64_t{1} << 10},
      {"mib", int64_t{1} << 20},
      {"gib", int64_t{1} << 30},
      {"tib", int64_t{1} << 40},
      {"pib", int64_t{1} << 50},
  };
  int64_t mult = 0;
  for (const auto& [name, m] : kUnits)
    if (unit == name) mult = m;
  if (mult == 0) {
    std::vector<std::string> names = {"B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB", "PiB"};
    return fail(WithSuggestion(fmt::format("'{}' has an unknown unit '{}'", text, std::string(Trim(s.substr(i)))),
                               std::string(Trim(s.substr(i))), names) +
                "; units: B, KB, MB, GB, TB, PB (powers of 1000), KiB, MiB, GiB, TiB, PiB (powers of 1024)");
  }
  constexpr Int128 kMax = std::numeric_limits<int64_t>::max();
  auto overflow = [&]() -> int64_t { return fail(fmt::format("'{}' is too large (the limit is 2^63-1 bytes)", text)); };
  if (mantissa == 0) return 0;
  if (mantissa > (Int128{1} << 76)) {
    // mantissa * mult could overflow 128 bits; this many digits only fit
    // int64 when the exponent scales them down, so long double is exact enough.
    long double approx = static_cast<long double>(mantissa) * mult * std::pow(10.0L, exp10);
    if (!(approx <= static_cast<long double>(kMax))) return overflow();
    return static_cast<int64_t>(std::llround(approx));
  }
  Int128 v = mantissa * mult;  // < 2^76 * 2^50
  for (; exp10 > 0; --exp10) {
    if (v > kMax) return overflow();  // checked first: v * 10 then cannot overflow 128 bits
    v *= 10;
  }
  if (exp10 < 0) {
    if (exp10 < -38) return 0;
    Int128 div = 1;
    for (; exp10 < 0; ++exp10) div *= 10;
    v = (v + div / 2) / div;  // round to the nearest byte
  }
  if (v > kMax) return overflow();
  return static_cast<int64_t>(v);
}

// ---------------------------------------------------------------------------
// Reading YAML trees with field paths and good messages.

namespace {

using nlohmann::json;

// Converts parsed JSON into a YAML tree (JSON scenarios share the YAML reader).
YAML::Node JsonToYaml(const json& j) {
  switch (j.type()) {
    case json::value_t::object: {
      YAML::Node n(YAML::NodeType::Map);
      for (auto it = j.begin(); it != j.end(); ++it) n[it.key()] = JsonToYaml(it.value());
      return n;
    }
    case json::value_t::array: {
      YAML::Node n(YAML::NodeType::Sequence);
      for (const auto& e : j) n.push_back(JsonToYaml(e));
      return n;
    }
    case json::value_t::string: return YAML::Node(j.get<std::string>());
    case json::value_t::null: return YAML::Node(YAML::NodeType::Null);
    default: return YAML::Node(j.dump());  // numbers and booleans as their JSON text
  }
}


// Set of GPUs: "all", a number, "0-3", "0-3,8-11", or a list of numbers and ranges.
// List order is rank order.
std::vector<int32_t> ParseGpus(const Reader& r, const YAML::Node& n, const std::string& field, int32_t cluster_gpus) {
  std::vector<int32_t> out;
  auto add_item = [&](const YAML::Node& item, std::string_view text) {
    std::string t(Trim(text));
    auto number = [&](std::string_view s) -> int64_t {
      std::string u(Trim(s));
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(u.data(), u.data() + u.size(), v);
      if (u.empty() || ec != std::errc() || ptr != u.data() + u.size())
        r.Fail(field, item,
               fmt::format("expected 'all', a GPU number, a range like '0-3', or a list of them; got '{}'", t));
      if (v < 0) r.Fail(field, item, fmt::format("GPU numbers start at 0, got '{}'", t));
      return v;
    };
    // A leading '-' is a negative number, not a range.
    size_t dash = t.find('-', 1);
    int64_t lo = 0, hi = 0;
    if (dash == std::string::npos) {
      lo = hi = number(t);
    } else {
      lo = number(std::string_view(t).substr(0, dash));
      hi = number(std::string_view(t).substr(dash + 1));
      if (hi < lo) r.Fail(field, item, fmt::format("range '{}' is reversed (write '{}-{}')", t, hi, lo));
    }
    if (hi >= cluster_gpus)
      r.Fail(field, item,
             fmt::format("GPU {} is out of range: the cluster has {} GPUs (0-{})", hi, cluster_gpus, cluster_gpus - 1));
    for (int64_t g = lo; g <= hi; ++g) out.push_back(static_cast<int32_t>(g));
  };
  if (n.IsSequence()) {
    for (const auto& item : n) add_item(item, r.Scalar(item, field, "a GPU number or range"));
  } else {
    std::string s = r.Scalar(n, field, "'all', a GPU number, a range like '0-3', or a list");
    if (Trim(s) == "all") {
      for (int32_t g = 0; g < cluster_gpus; ++g) out.push_back(g);
    } else {
      std::string_view rest = s;
      while (true) {
        size_t comma = rest.find(',');
        add_item(n, rest.substr(0, comma));
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }
  }
  if (out.empty()) r.Fail(field, n, "no GPUs listed");
  std::vector<int32_t> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i] == sorted[i - 1]) r.Fail(field, n, fmt::format("GPU {} is listed twice", sorted[i]));
  return out;
}

std::vector<int32_t> ParseIntList(const Reader& r, const YAML::Node& n, const std::string& field) {
  if (!n.IsSequence()) r.Fail(field, n, fmt::format("expected a list of numbers, got {}", Reader::Describe(n)));
  std::vector<int32_t> out;
  for (size_t i = 0; i < n.size(); ++i)
    out.push_back(static_cast<int32_t>(
        r.Int(n[i], fmt::format("{}[{}]", field, i), 0, std::numeric_limits<int32_t>::max())));
  return out;
}

// ---- model ----

ModelSpec ParseModel(const Reader& r, const YAML::Node& n) {
  ModelConfig config;
  std::string source = r.file();
  if (n.IsScalar()) {
    config = ModelPreset(n.Scalar(), r.file(), "model");
  } else {
    r.CheckKeys(n, "model", {"hf_config", "preset"});
    if (n["hf_config"] && n["preset"]) r.Fail("model", n, "give either 'preset' or 'hf_config', not both");
    if (n["preset"]) {
      config = ModelPreset(r.String(n["preset"], "model.preset"), r.file(), "model.preset");
    } else if (n["hf_config"]) {
      std::string path = r.Path(n["hf_config"], "model.hf_config");
      std::error_code ec;
      if (!fs::is_regular_file(path, ec))
        r.Fail("model.hf_config", n["hf_config"],
               fs::exists(path, ec) ? fmt::format("'{}' is not a regular file", path)
                                    : fmt::format("file '{}' does not exist (paths are relative to the scenario file)", path));
      try {
        config = ReadHfConfig(path);
      } catch (const InputError& e) {
        r.Fail("model.hf_config", n["hf_config"], e.what());
      }
      source = path;
    } else {
      r.Fail("model", n, "expected a preset name or {hf_config: path/config.json}");
    }
  }
  try {
    return BuildModel(config, source);
  } catch (const InputError& e) {
    if (source == r.file()) throw;
    r.Fail("model.hf_config", n["hf_config"], e.what());
  }
}

// ---- cluster ----

void ParseLinkOverride(const Reader& r, const YAML::Node& n, const std::string& field, LinkProfile& l) {
  r.CheckKeys(n, field,
              {"bytes_per_s", "GBps", "duplex_bytes_per_s", "duplex_GBps", "latency_ns", "latency_us", "efficiency"});
  auto one_of = [&](const char* a, const char* b) {
    if (n[a] && n[b]) r.Fail(Dot(field, b), n[b], fmt::format("give '{}' or '{}', not both", a, b));
  };
  one_of("bytes_per_s", "GBps");
  one_of("duplex_bytes_per_s", "duplex_GBps");
  one_of("latency_ns", "latency_us");
  constexpr double kMaxRate = 1e15;  // 1 PB/s: far above any link
  if (n["bytes_per_s"]) l.bytes_per_s = r.Number(n["bytes_per_s"], Dot(field, "bytes_per_s"), 0, kMaxRate);
  if (n["GBps"]) l.bytes_per_s = r.Number(n["GBps"], Dot(field, "GBps"), 0, kMaxRate / 1e9) * 1e9;
  if (n["duplex_bytes_per_s"])
    l.duplex_bytes_per_s = r.Number(n["duplex_bytes_per_s"], Dot(field, "duplex_bytes_per_s"), 0, kMaxRate);
  if (n["duplex_GBps"])
    l.duplex_bytes_per_s = r.Number(n["duplex_GBps"], Dot(field, "duplex_GBps"), 0, kMaxRate / 1e9) * 1e9;
  if (n["latency_ns"]) l.latency_ns = r.Int(n["latency_ns"], Dot(field, "latency_ns"), 0, int64_t{1} << 50);
  if (n["latency_us"])
    l.latency_ns = std::llround(r.Number(n["latency_us"], Dot(field, "latency_us"), 0, 1e12) * 1000);
  if (const YAML::Node e = n["efficiency"]) {
    std::string f = Dot(field, "efficiency");
    if (!e.IsSequence()) r.Fail(f, e, fmt::format("expected a list of {{bytes, fraction}}, got {}", Reader::Describe(e)));
    l.efficiency.clear();
    for (size_t i = 0; i < e.size(); ++i) {
      std::string fi = fmt::format("{}[{}]", f, i);
      r.CheckKeys(e[i], fi, {"bytes", "fraction"});
      if (!e[i]["bytes"] || !e[i]["fraction"]) r.Fail(fi, e[i], "needs 'bytes' and 'fraction'");
      int64_t b = r.Bytes(e[i]["bytes"], fi + ".bytes");
      double frac = r.Number(e[i]["fraction"], fi + ".fraction", 0, 1);
      if (b <= 0) r.Fail(fi + ".bytes", e[i]["bytes"], "must be > 0");
      if (frac <= 0) r.Fail(fi + ".fraction", e[i]["fraction"], "must be > 0");
      if (!l.efficiency.empty() && b <= l.efficiency.back().bytes)
        r.Fail(fi + ".bytes", e[i]["bytes"], "points must be sorted by strictly increasing bytes");
      l.efficiency.push_back({b, frac});
    }
  }
}

Cluster ParseCluster(const Reader& r, const YAML::Node& n) {
  if (n.IsScalar()) {
    Cluster c = ClusterPreset(n.Scalar(), r.file(), "cluster");
    ValidateCluster(c, r.file(), "cluster");
    return c;
  }
  r.CheckKeys(n, "cluster",
              {"preset", "calibration", "nodes", "gpus_per_node", "nvlink_domain_nodes", "nics_per_node", "gpu_memory",
               "host_memory", "nvlink", "network", "pcie", "pcie_pageable", "device_copy", "cuda_context",
               "nccl_per_peer"});
  Cluster c;
  if (n["preset"]) {
    c = ClusterPreset(r.String(n["preset"], "cluster.preset"), r.file(), "cluster.preset");
  } else {
    c = Cluster{};
    c.name = "custom";
    c.profile_source = "scenario " + r.file();
    for (const char* key : {"gpus_per_node", "gpu_memory"})
      if (!n[key]) r.Fail(Dot("cluster", key), n, "missing field (required when no 'preset' is given)");
  }
  // Order: preset, then the calibration profile, then explicit overrides (they win).
  if (const YAML::Node cal = n["calibration"]) {
    const std::string path = r.Path(cal, "cluster.calibration");
    std::error_code ec;
    if (!fs::is_regular_file(path, ec))
      r.Fail("cluster.calibration", cal,
             fs::exists(path, ec) ? fmt::format("profile '{}' is not a regular file", path)
                                  : fmt::format("profile '{}' does not exist (paths are relative to the scenario file)", path));
    try {
      ApplyProfileFile(c, path);
    } catch (const InputError& e) {
      r.Fail("cluster.calibration", cal, e.what());
    }
  }
  bool overridden = false;
  auto int_field = [&](const char* key, int32_t& out, int64_t min) {
    if (!n[key]) return;
    out = static_cast<int32_t>(r.Int(n[key], Dot("cluster", key), min, std::numeric_limits<int32_t>::max()));
    overridden = true;
  };
  int_field("nodes", c.nodes, 1);
  int_field("gpus_per_node", c.gpus_per_node, 1);
  int_field("nvlink_domain_nodes", c.nvlink_domain_nodes, 1);
  int_field("nics_per_node", c.nics_per_node, 0);
  auto size_field = [&](const char* key, int64_t& out, bool positive) {
    if (!n[key]) return;
    out = r.Bytes(n[key], Dot("cluster", key));
    if (positive && out <= 0) r.Fail(Dot("cluster", key), n[key], "must be > 0");
    overridden = true;
  };
  size_field("gpu_memory", c.gpu_memory_bytes, true);
  size_field("host_memory", c.host_memory_bytes, false);
  size_field("cuda_context", c.overheads.cuda_context_bytes, false);
  size_field("nccl_per_peer", c.overheads.nccl_bytes_per_peer, false);
  for (auto [key, member] : {std::pair{"nvlink", &Cluster::nvlink}, {"network", &Cluster::network},
                             {"pcie", &Cluster::pcie}, {"pcie_pageable", &Cluster::pcie_pageable},
                             {"device_copy", &Cluster::device_copy}}) {
    if (!n[key]) continue;
    ParseLinkOverride(r, n[key], Dot("cluster", key), c.*member);
    overridden = true;
    if (member == &Cluster::network && c.network_measured) {  // no longer what calibrate measured
      c.network_measured = false;
      c.network_source = "scenario " + r.file() + ": cluster.network overrides " + c.network_source;
    }
  }
  if (overridden) {
    if (c.name != "custom") c.name += "+overrides";
    if (c.measured) c.profile_source += "; fields overridden by " + r.file();
  }
  ValidateCluster(c, r.file(), "cluster");
  return c;
}

// ---- source / destination ----

struct SideGpus {
  std::vector<int32_t> gpus;
  bool dp_given = false;
};

std::string Engine(const Reader& r, const YAML::Node& n, const std::string& field, const std::string& expected) {
  if (!n["engine"]) return expected;
  std::string e = r.String(n["engine"], Dot(field, "engine"));
  if (e != expected)
    r.Fail(Dot(field, "engine"), n["engine"],
           WithSuggestion(fmt::format("unsupported engine '{}'", e), e, {expected}) +
               fmt::format("; the {} side supports: {}", field, expected));
  return e;
}

// dp omitted: derived from the GPU count; given: the count must match.
int32_t DeriveOrCheckDp(const Reader& r, const YAML::Node& n, const std::string& field, int64_t per_replica,
                        const std::string& per_replica_text, const std::vector<int32_t>& gpus,
                        std::optional<int32_t> dp) {
  const int64_t count = static_cast<int64_t>(gpus.size());
  const YAML::Node gpus_node = n["gpus"];
  if (!dp) {
    if (count % per_replica != 0)
      r.Fail(Dot(field, "dp"), n,
             fmt::format("cannot derive dp: {} GPUs are not a multiple of {} = {}", count, per_replica_text,
                         per_replica));
    return static_cast<int32_t>(count / per_replica);
  }
  int64_t ranks = per_replica * *dp;
  if (ranks != count)
    r.Fail(Dot(field, "gpus"), gpus_node ? gpus_node : n,
           fmt::format("{} GPUs listed{} but the layout has {} ranks ({} x dp={})", count,
                       gpus_node ? "" : " (gpus: all)", ranks, per_replica_text, *dp));
  return *dp;
}

void ParseSource(const Reader& r, const YAML::Node& n, const Cluster& cluster, Scenario& s) {
  const std::string f = "source";
  r.CheckKeys(n, f, {"engine", "tp", "pp", "vpp", "ep", "etp", "dp", "cp", "pp_layers", "gpus"});
  Engine(r, n, f, "megatron");
  SourceParallel& p = s.source;
  for (auto [key, member] : {std::pair{"tp", &SourceParallel::tp}, {"pp", &SourceParallel::pp},
                             {"vpp", &SourceParallel::vpp}, {"ep", &SourceParallel::ep},
                             {"etp", &SourceParallel::etp}, {"cp", &SourceParallel::cp}})
    if (n[key]) p.*member = r.Positive(n[key], Dot(f, key));
  std::optional<int32_t> dp;
  if (n["dp"]) dp = r.Positive(n["dp"], Dot(f, "dp"));
  if (n["pp_layers"]) p.pp_layers = ParseIntList(r, n["pp_layers"], Dot(f, "pp_layers"));
  s.source_gpus = n["gpus"] ? ParseGpus(r, n["gpus"], Dot(f, "gpus"), cluster.Gpus())
                            : ParseGpus(r, YAML::Node("all"), Dot(f, "gpus"), cluster.Gpus());
  int64_t per_replica = static_cast<int64_t>(p.tp) * p.cp * p.pp;
  if (per_replica > std::numeric_limits<int32_t>::max()) r.Fail(f, n, "tp x cp x pp is too large");
  p.dp = DeriveOrCheckDp(r, n, f, per_replica, fmt::format("tp={} x cp={} x pp={}", p.tp, p.cp, p.pp),
                         s.source_gpus, dp);
}

void ParseDestination(const Reader& r, const YAML::Node& n, const Cluster& cluster, Scenario& s) {
  const std::string f = "destination";
  r.CheckKeys(n, f, {"engine", "tp", "pp", "ep", "dp", "pp_layers", "gpus", "dtype", "placement", "quantization"});
  Engine(r, n, f, "vllm");
  DestinationParallel& p = s.destination;
  for (auto [key, member] : {std::pair{"tp", &DestinationParallel::tp}, {"pp", &DestinationParallel::pp},
                             {"ep", &DestinationParallel::ep}})
    if (n[key]) p.*member = r.Positive(n[key], Dot(f, key));
  std::optional<int32_t> dp;
  if (n["dp"]) dp = r.Positive(n["dp"], Dot(f, "dp"));
  if (n["pp_layers"]) p.pp_layers = ParseIntList(r, n["pp_layers"], Dot(f, "pp_layers"));
  s.destination_dtype = n["dtype"] ? ParseDType(r.String(n["dtype"], Dot(f, "dtype")), r.file(), Dot(f, "dtype"))
                                   : s.dtype;
  s.destination_gpus = n["gpus"] ? ParseGpus(r, n["gpus"], Dot(f, "gpus"), cluster.Gpus())
                                 : ParseGpus(r, YAML::Node("all"), Dot(f, "gpus"), cluster.Gpus());
  int64_t per_replica = static_cast<int64_t>(p.tp) * p.pp;
  if (per_replica > std::numeric_limits<int32_t>::max()) r.Fail(f, n, "tp x pp is too large");
  p.dp = DeriveOrCheckDp(r, n, f, per_replica, fmt::format("tp={} x pp={}", p.tp, p.pp), s.destination_gpus, dp);
  // auto: the planner may permute destination ranks over destination_gpus (it
  // keeps the set); fixed: rank r stays on destination_gpus[r].
  std::string placement = "auto";
  if (n["placement"]) placement = r.String(n["placement"], Dot(f, "placement"));
  if (placement != "auto" && placement != "fixed")
    r.Fail(Dot(f, "placement"), n["placement"],
           WithSuggestion(fmt::format("unknown placement '{}'", placement), placement, {"auto", "fixed"}) +
               "; expected auto or fixed");
  s.destination_placement_free = placement == "auto";
}

// ---- memory / plan ----

void ParseMemory(const Reader& r, const YAML::Node& n, MemoryConfig& m) {
  const std::string f = "memory";
  r.CheckKeys(n, f,
              {"optimizer", "keep_gradients", "grad_bytes_per_param", "kv_cache_gib", "kv_cache", "reserve_gib",
               "reserve"});
  if (const YAML::Node o = n["optimizer"]) {
    const std::string fo = "memory.optimizer";
    r.CheckKeys(o, fo, {"bytes_per_param", "offload", "distributed", "on_host"});
    if (const YAML::Node h = o["on_host"]) {  // true, false or a fraction in [0, 1]
      const std::string v(Trim(r.Scalar(h, fo + ".on_host", "true, false or a fraction in [0, 1]")));
      m.optimizer.on_host = v == "true" || v == "false" ? (v == "true" ? 1.0 : 0.0) : r.Number(h, fo + ".on_host", 0, 1);
    }
    if (o["bytes_per_param"]) m.optimizer.bytes_per_param = r.Number(o["bytes_per_param"], fo + ".bytes_per_param", 0, 1024);
    if (o["distributed"]) m.optimizer.distributed = r.Bool(o["distributed"], fo + ".distributed");
    if (const YAML::Node off = o["offload"]) {
      std::string v(Trim(r.Scalar(off, fo + ".offload", "none, all, auto or a fraction in [0, 1]")));
      if (v == "none") {
        m.optimizer.offload = OffloadMode::kNone;
      } else if (v == "all") {
        m.optimizer.offload = OffloadMode::kAll;
      } else if (v == "auto") {
        m.optimizer.offload = OffloadMode::kAuto;
      } else if (!v.empty() && (std::isdigit(static_cast<unsigned char>(v[0])) || v[0] == '.' || v[0] == '-' ||
                                v[0] == '+' || LooksNonFinite(v))) {
        m.optimizer.offload = OffloadMode::kFraction;
        m.optimizer.fraction = r.Number(off, fo + ".offload", 0, 1);
      } else {
        r.Fail(fo + ".offload", off,
               WithSuggestion(fmt::format("unknown offload policy '{}'", v), v, {"none", "all", "auto"}) +
                   "; expected none, all, auto or a fraction in [0, 1]");
      }
      if (m.optimizer.on_host >= 1 && (m.optimizer.offload == OffloadMode::kAll ||
                                       (m.optimizer.offload == OffloadMode::kFraction && m.optimizer.fraction > 0)))
        r.Fail(fo + ".offload", off,
               "the optimizer state lives on the host (on_host: true): there is nothing on the GPUs to offload; "
               "drop offload or set it to none");
    }
    // State already on the host leaves nothing for the refit to move.
    if (m.optimizer.on_host >= 1) m.optimizer.offload = OffloadMode::kNone;
  }
  if (n["keep_gradients"]) m.keep_gradients = r.Bool(n["keep_gradients"], f + ".keep_gradients");
  if (n["grad_bytes_per_param"])
    m.grad_bytes_per_param = r.Number(n["grad_bytes_per_param"], f + ".grad_bytes_per_param", 0, 1024);
  auto size_pair = [&](const char* gib_key, const char* size_key, int64_t& out) {
    if (n[gib_key] && n[size_key])
      r.Fail(Dot(f, size_key), n[size_key], fmt::format("give '{}' or '{}', not both", gib_key, size_key));
    if (n[gib_key]) out = r.Gib(n[gib_key], Dot(f, gib_key));
    if (n[size_key]) {
      out = r.Bytes(n[size_key], Dot(f, size_key));
      if (out > kMaxMemoryBytes)  // so that memory totals cannot overflow
        r.Fail(Dot(f, size_key), n[size_key], fmt::format("{} bytes is more than 1 PiB per GPU", out));
    }
  };
  size_pair("kv_cache_gib", "kv_cache", m.kv_cache_bytes);
  size_pair("reserve_gib", "reserve", m.reserve_bytes);
}

void ParsePlan(const Reader& r, const YAML::Node& n, PlanOptions& p) {
  r.CheckKeys(n, "plan", {"segment_bytes", "direct_min_bytes", "quantize_at"});
  if (const YAML::Node sb = n["segment_bytes"]) {
    std::string v(Trim(r.Scalar(sb, "plan.segment_bytes", "auto or a size")));
    if (v == "auto") {
      p.segment_bytes = 0;
    } else {
      p.segment_bytes = r.Bytes(sb, "plan.segment_bytes");
      if (p.segment_bytes <= 0) r.Fail("plan.segment_bytes", sb, "must be > 0 (or 'auto')");
    }
  }
  if (const YAML::Node d = n["direct_min_bytes"]) {
    std::string v(Trim(r.Scalar(d, "plan.direct_min_bytes", "auto or a size")));
    if (v == "auto") {
      p.direct_min_bytes = -1;
    } else {
      p.direct_min_bytes = r.Bytes(d, "plan.direct_min_bytes");
      if (p.direct_min_bytes < 0) r.Fail("plan.direct_min_bytes", d, "must be >= 0 (or 'auto')");
    }
  }
  if (const YAML::Node q = n["quantize_at"]) {
    const std::string v(Trim(r.Scalar(q, "plan.quantize_at", "auto, source or destination")));
    if (v == "auto") p.quantize_at = PlanOptions::QuantizeAt::kAuto;
    else if (v == "source") p.quantize_at = PlanOptions::QuantizeAt::kSource;
    else if (v == "destination") p.quantize_at = PlanOptions::QuantizeAt::kDestination;
    else r.Fail("plan.quantize_at", q, fmt::format("'{}' is not one of auto, source, destination", v));
  }
}

// ---- text checks and parsing ----

// The offset of the first NUL byte or invalid UTF-8 sequence, or npos.
size_t FirstBinaryByte(const std::string& text) {
  size_t i = 0;
  while (i < text.size()) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    bool ok = len > 0 && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) >> 6) == 0x2;
    if (c == 0 || !ok) return i;
    i += len;
  }
  return std::string::npos;
}

// "" when `s` is valid UTF-8 without NUL, else what is wrong.
std::string Utf8Problem(const std::string& s) {
  const size_t at = FirstBinaryByte(s);
  if (at == std::string::npos) return "";
  return fmt::format("not valid UTF-8 text: byte 0x{:02x} at offset {}", static_cast<unsigned char>(s[at]), at);
}

// Rejects binary data before the YAML parser sees it: NUL bytes or invalid UTF-8.
void CheckText(const std::string& text, const std::string& path) {
  if (const size_t i = FirstBinaryByte(text); i != std::string::npos)
    throw InputError(path, "",
                     fmt::format("not a text file: binary byte 0x{:02x} at offset {} (expected YAML or JSON)",
                                 static_cast<unsigned char>(text[i]), i));
}

YAML::Node ParseTree(const std::string& text, const std::string& path) {
  CheckText(text, path);
  std::string_view t = Trim(text);
  if (t.empty()) throw InputError(path, "", "the file is empty (expected a YAML or JSON scenario)");
  if (t.front() == '{' || t.front() == '[') {
    json j;
    try {
      j = ParseJsonInput(text, path);  // nesting capped, duplicate keys refused
    } catch (const json::exception& e) {  // parse_error, and out_of_range.406 (number overflow)
      throw InputError(path, "", fmt::format("invalid JSON (truncated?): {}", e.what()));
    }
    return JsonToYaml(j);
  }
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw InputError(path, "",
                     fmt::format("invalid YAML at line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg));
  }
}

Scenario ParseScenarioAt(const std::string& text, const std::string& path, const fs::path& dir,
                         const std::string& default_name) {
  YAML::Node root = ParseTree(text, path);
  Reader r(path, dir);
  if (root.IsNull()) throw InputError(path, "", "the file is empty (only comments?)");
  if (!root.IsMap())
    r.Fail("", root, fmt::format("expected a mapping of scenario fields at the top, got {}", Reader::Describe(root)));
  r.CheckKeys(root, "", {"name", "model", "dtype", "cluster", "source", "destination", "memory", "plan"});
  for (const char* key : {"model", "cluster", "source", "destination"})
    if (!root[key]) throw InputError(path, key, "missing field (a scenario needs model, cluster, source and destination)");

  Scenario s;
  s.path = path;
  s.name = root["name"] ? r.String(root["name"], "name") : default_name;
  if (root["dtype"]) s.dtype = ParseDType(r.String(root["dtype"], "dtype"), path, "dtype");
  s.model = ParseModel(r, root["model"]);
  s.cluster = ParseCluster(r, root["cluster"]);
  r.NeedMap(root["source"], "source");
  ParseSource(r, root["source"], s.cluster, s);
  r.NeedMap(root["destination"], "destination");
  ParseDestination(r, root["destination"], s.cluster, s);
  std::optional<QuantConfig> hf_quant;
  if (root["model"].IsMap() && root["model"]["hf_config"])
    hf_quant = ReadHfQuantization(r.Path(root["model"]["hf_config"], "model.hf_config"));
  ParseQuantization(r, root["destination"], hf_quant, s);
  if (root["memory"]) ParseMemory(r, root["memory"], s.memory);
  if (root["plan"]) ParsePlan(r, root["plan"], s.plan);
  if (!path.empty() && path.front() != '<') s.input_files.push_back(path);
  if (root["model"].IsMap() && root["model"]["hf_config"])
    s.input_files.push_back(r.Path(root["model"]["hf_config"], "model.hf_config"));
  if (root["cluster"].IsMap() && root["cluster"]["calibration"])
    s.input_files.push_back(r.Path(root["cluster"]["calibration"], "cluster.calibration"));

  // Build both layouts now so that what does not divide is reported here,
  // naming the field (source.tp, destination.ep, ...).
  Layout src = MakeSourceLayout(s.model, s.source, s.dtype, path);
  Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, path);
  RESHARD_CHECK(src.Ranks() == static_cast<int32_t>(s.source_gpus.size()), "source ranks != source GPUs");
  RESHARD_CHECK(dst.Ranks() == static_cast<int32_t>(s.destination_gpus.size()), "destination ranks != GPUs");
  // Every output carries the name: invalid UTF-8 would fail only when written.
  if (const std::string bad = Utf8Problem(s.name); !bad.empty())
    throw InputError(path, "name",
                     root["name"] ? bad : bad + " (it comes from the file name; give a name: field)");
  if (s.plan.segment_bytes > 0) CheckSegmentBytes(s, s.plan.segment_bytes, path, "plan.segment_bytes");
  return s;
}

}  // namespace

Scenario ParseScenario(const std::string& text, const std::string& path) {
  fs::path p(path);
  bool real_file = !path.empty() && path.front() != '<';
  return ParseScenarioAt(text, path, real_file ? p.parent_path() : fs::current_path(),
                         real_file ? p.stem().string() : "scenario");
}

Scenario LoadScenario(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path, "", "is a directory, not a scenario file");
  return ParseScenario(ReadInputFile(path, "scenario file"), path);
}

std::vector<std::string> BuiltinScenarioNames() {
  std::vector<std::string> names;
  for (size_t i = 0; i < detail::kBuiltinScenarioCount; ++i) names.emplace_back(detail::kBuiltinScenarios[i].name);
  return names;
}

Scenario BuiltinScenario(const std::string& name) {
  for (size_t i = 0; i < detail::kBuiltinScenarioCount; ++i) {
    const auto& b = detail::kBuiltinScenarios[i];
    if (name == b.name) return ParseScenarioAt(b.yaml, "<builtin:" + name + ">", fs::current_path(), name);
  }
  throw InputError("<builtin>", "",
                   WithSuggestion(fmt::format("unknown built-in scenario '{}'", name), name, BuiltinScenarioNames()) +
                       fmt::format("; built-ins: {}", fmt::join(BuiltinScenarioNames(), ", ")));
}

}  // namespace reshard
