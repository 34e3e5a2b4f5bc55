// JSON of the one-GPU host, copy-kernel and cold measurements (see host_data.h).
#include "calib/host_data.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/json_fields.h"

namespace reshard {

namespace {

using nlohmann::json;
namespace jf = json_fields;

constexpr const char* kFormat = "reshard-host-measurements-v1";

// A time or rate read back: finite and > 0.
double Positive(const json& v, const std::string& file, const std::string& field) {
  const double x = jf::GetNumber(v, file, field);
  if (!(x > 0)) jf::Bad(file, field, fmt::format("must be > 0, got {}", x));
  return x;
}

std::vector<double> Numbers(const json& v, const std::string& file, const std::string& field) {
  if (!v.is_array()) jf::Bad(file, field, fmt::format("expected an array, got {}", jf::TypeName(v)));
  if (v.empty()) jf::Bad(file, field, "is empty: needs at least one sample");
  std::vector<double> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(Positive(v[i], file, fmt::format("{}[{}]", field, i)));
  return out;
}

const json& Array(const json& j, const std::string& key, const std::string& file, const std::string& field) {
  const json& a = jf::Need(j, key, file, field);
  if (!a.is_array()) jf::Bad(file, jf::Dot(field, key), fmt::format("expected an array, got {}", jf::TypeName(a)));
  return a;
}

int32_t Int32(const json& v, const std::string& file, const std::string& field, int64_t lo) {
  const int64_t x = jf::GetInt(v, file, field);
  if (x < lo || x > std::numeric_limits<int32_t>::max())
    jf::Bad(file, field, fmt::format("must be in [{}, {}], got {}", lo, std::numeric_limits<int32_t>::max(), x));
  return static_cast<int32_t>(x);
}

}  // namespace

double MedianOf(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

json HostMeasurementsJson(const HostMeasurements& m) {
  json env = json::object();
  for (const auto& [k, v] : m.environment) env[k] = v;
  json calls = json::array();
  for (const HostCallSeries& s : m.calls)
    calls.push_back({{"call", s.call},
                     {"method", s.method},
                     {"calls_per_batch", s.calls_per_batch},
                     {"median_ns", MedianOf(s.batch_ns)},
                     {"batch_ns", s.batch_ns}});
  json groups = json::array();
  for (const NcclGroupSeries& g : m.nccl_groups) {
    json samples = json::array();
    for (const NcclGroupSample& s : g.samples)
      samples.push_back({{"ops", s.ops}, {"enqueue_ns", s.enqueue_ns}, {"end_ns", s.end_ns}});
    groups.push_back({{"method", g.method}, {"executor_default", g.executor_default}, {"samples", samples}});
  }
  json cold = json::array();
  for (const ColdSample& c : m.cold)
    cold.push_back({{"what", c.what},
                    {"bytes", c.bytes},
                    {"seconds", c.seconds},
                    {"bytes_per_s", static_cast<double>(c.bytes) / c.seconds}});
  json copies = json::array();
  for (const CopyKernelSample& c : m.copies)
    copies.push_back({{"pattern", c.pattern},
                      {"run_bytes", c.run_bytes},
                      {"bytes", c.bytes},
                      {"sm_share", c.sm_share},
                      {"blocks", c.blocks},
                      {"median_bytes_per_s", static_cast<double>(c.bytes) / MedianOf(c.seconds)},
                      {"seconds", c.seconds}});
  return {{"format", kFormat},
          {"source", m.source},
          {"environment", env},
          {"sms", m.sms},
          {"copy_blocks_per_sm", m.copy_blocks_per_sm},
          {"launch_queue_depth", m.launch_queue_depth},
          {"launch_queue_limit", m.launch_queue_limit},
          {"calls", calls},
          {"nccl_groups", groups},
          {"cold", cold},
          {"copies", copies}};
}

HostMeasurements HostMeasurementsFromJson(const json& j, const std::string& file, const std::string& f) {
  jf::CheckObject(j, file, f);
  HostMeasurements m;
  if (const std::string format = jf::GetString(jf::Need(j, "format", file, f), file, jf::Dot(f, "format"));
      format != kFormat)
    jf::Bad(file, jf::Dot(f, "format"), fmt::format("expected '{}', got '{}'", kFormat, format));
  if (auto it = j.find("source"); it != j.end()) m.source = jf::GetString(*it, file, jf::Dot(f, "source"));
  if (auto it = j.find("environment"); it != j.end()) {
    jf::CheckObject(*it, file, jf::Dot(f, "environment"));
    for (const auto& [k, v] : it->items())
      m.environment.push_back({k, jf::GetString(v, file, jf::Dot(f, "environment." + k))});
  }
  if (auto it = j.find("sms"); it != j.end()) m.sms = Int32(*it, file, jf::Dot(f, "sms"), 0);
  if (auto it = j.find("copy_blocks_per_sm"); it != j.end())
    m.copy_blocks_per_sm = Int32(*it, file, jf::Dot(f, "copy_blocks_per_sm"), 0);
  if (auto it = j.find("launch_queue_depth"); it != j.end()) {
    m.launch_queue_depth = jf::GetInt(*it, file, jf::Dot(f, "launch_queue_depth"));
    if (m.launch_queue_depth < -1) jf::Bad(file, jf::Dot(f, "launch_queue_depth"), "must be >= -1");
  }
  if (auto it = j.find("launch_queue_limit"); it != j.end())
    m.launch_queue_limit = jf::GetInt(*it, file, jf::Dot(f, "launch_queue_limit"));

  const json& calls = Array(j, "calls", file, f);
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string fi = jf::Dot(f, fmt::format("calls[{}]", i));
    jf::CheckObject(calls[i], file, fi);
    HostCallSeries s;
    s.call = jf::GetString(jf::Need(calls[i], "call", file, fi), file, jf::Dot(fi, "call"));
    if (auto it = calls[i].find("method"); it != calls[i].end()) s.method = jf::GetString(*it, file, jf::Dot(fi, "method"));
    s.calls_per_batch = Int32(jf::Need(calls[i], "calls_per_batch", file, fi), file, jf::Dot(fi, "calls_per_batch"), 1);
    s.batch_ns = Numbers(jf::Need(calls[i], "batch_ns", file, fi), file, jf::Dot(fi, "batch_ns"));
    m.calls.push_back(std::move(s));
  }
  const json& groups = Array(j, "nccl_groups", file, f);
  for (size_t i = 0; i < groups.size(); ++i) {
    const std::string fi = jf::Dot(f, fmt::format("nccl_groups[{}]", i));
    jf::CheckObject(groups[i], file, fi);
    NcclGroupSeries g;
    if (auto it = groups[i].find("method"); it != groups[i].end()) g.method = jf::GetString(*it, file, jf::Dot(fi, "method"));
    g.executor_default = jf::GetBool(jf::Need(groups[i], "executor_default", file, fi), file, jf::Dot(fi, "executor_default"));
    const json& samples = Array(groups[i], "samples", file, fi);
    for (size_t k = 0; k < samples.size(); ++k) {
      const std::string fk = jf::Dot(fi, fmt::format("samples[{}]", k));
      jf::CheckObject(samples[k], file, fk);
      NcclGroupSample s;
      s.ops = Int32(jf::Need(samples[k], "ops", file, fk), file, jf::Dot(fk, "ops"), 1);
      s.enqueue_ns = Positive(jf::Need(samples[k], "enqueue_ns", file, fk), file, jf::Dot(fk, "enqueue_ns"));
      s.end_ns = Positive(jf::Need(samples[k], "end_ns", file, fk), file, jf::Dot(fk, "end_ns"));
      g.samples.push_back(s);
    }
    m.nccl_groups.push_back(std::move(g));
  }
  const json& cold = Array(j, "cold", file, f);
  for (size_t i = 0; i < cold.size(); ++i) {
    const std::string fi = jf::Dot(f, fmt::format("cold[{}]", i));
    jf::CheckObject(cold[i], file, fi);
    ColdSample c;
    c.what = jf::GetString(jf::Need(cold[i], "what", file, fi), file, jf::Dot(fi, "what"));
    c.bytes = jf::GetInt(jf::Need(cold[i], "bytes", file, fi), file, jf::Dot(fi, "bytes"));
    if (c.bytes <= 0) jf::Bad(file, jf::Dot(fi, "bytes"), "must be > 0");
    c.seconds = Positive(jf::Need(cold[i], "seconds", file, fi), file, jf::Dot(fi, "seconds"));
    m.cold.push_back(std::move(c));
  }
  const json& copies = Array(j, "copies", file, f);
  for (size_t i = 0; i < copies.size(); ++i) {
    const std::string fi = jf::Dot(f, fmt::format("copies[{}]", i));
    const json& cj = copies[i];
    jf::CheckObject(cj, file, fi);
    CopyKernelSample c;
    c.pattern = jf::GetString(jf::Need(cj, "pattern", file, fi), file, jf::Dot(fi, "pattern"));
    c.run_bytes = jf::GetInt(jf::Need(cj, "run_bytes", file, fi), file, jf::Dot(fi, "run_bytes"));
    c.bytes = jf::GetInt(jf::Need(cj, "bytes", file, fi), file, jf::Dot(fi, "bytes"));
    if (c.run_bytes <= 0 || c.bytes < c.run_bytes)
      jf::Bad(file, fi, fmt::format("needs 0 < run_bytes <= bytes, got {} and {}", c.run_bytes, c.bytes));
    c.sm_share = Positive(jf::Need(cj, "sm_share", file, fi), file, jf::Dot(fi, "sm_share"));
    if (c.sm_share > 1) jf::Bad(file, jf::Dot(fi, "sm_share"), fmt::format("must be in (0, 1], got {}", c.sm_share));
    if (auto it = cj.find("blocks"); it != cj.end()) c.blocks = Int32(*it, file, jf::Dot(fi, "blocks"), 0);
    c.seconds = Numbers(jf::Need(cj, "seconds", file, fi), file, jf::Dot(fi, "seconds"));
    m.copies.push_back(std::move(c));
  }
  return m;
}

}  // namespace reshard
