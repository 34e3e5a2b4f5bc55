// What the all-gather baseline prints and writes (see allgather_report.h).
#include "bench/gpu/allgather_report.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/error.h"

namespace reshard::baseline {

namespace {

double Gib(int64_t b) { return static_cast<double>(b) / static_cast<double>(int64_t{1} << 30); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string OffloadSource(const RefitPlan& p, const Scenario& s) {
  if (p.options.offload_fraction) return "--offload";
  switch (s.memory.optimizer.offload) {
    case OffloadMode::kNone: return "scenario: none";
    case OffloadMode::kAll: return "scenario: all";
    case OffloadMode::kFraction: return fmt::format("scenario: {}", s.memory.optimizer.fraction);
    case OffloadMode::kAuto: return "scenario: auto = none when it fits, else all";
  }
  return "?";
}

}  // namespace

std::string ModeLabel(const RefitPlan& p) {
  switch (p.options.transport) {
    case Transport::kFlat: return "flat";
    case Transport::kPerTensor: return "per-tensor";
    case Transport::kBucketed: {
      const int64_t b = p.options.bucket_bytes;
      std::string s = b % (int64_t{1} << 30) == 0 ? fmt::format("{}GiB", b >> 30)
                      : b % (int64_t{1} << 20) == 0 ? fmt::format("{}MiB", b >> 20)
                      : b % (int64_t{1} << 10) == 0 ? fmt::format("{}KiB", b >> 10)
                                                    : fmt::format("{}B", b);
      return s + (p.options.out_of_place ? "-oop" : "");
    }
  }
  return "?";
}

void PrintPlan(const RefitPlan& p, const Scenario& s) {
  int64_t largest_step = 0, pack_bytes = 0, unpack_bytes = 0, copies = 0;
  for (const Step& st : p.steps) {
    largest_step = std::max(largest_step, st.GatheredBytes(p.gpus));
    for (const auto& v : st.pack)
      for (const ByteCopy& c : v) pack_bytes += c.Bytes();
    for (const auto& v : st.unpack)
      for (const ByteCopy& c : v) unpack_bytes += c.Bytes(), ++copies;
  }
  fmt::print("plan: {} ({}, {}), {} GPUs, {} steps with {} collectives; {:.3f} GB moved per sending GPU\n",
             p.scenario, CollectiveName(p.collective), ModeLabel(p), p.gpus, p.steps.size(), p.Collectives(),
             static_cast<double>(p.moved_bytes) / 1e9);
  fmt::print("      largest bucket {:.3f} GiB; pack {:.3f} GB, unpack {:.3f} GB in {} strided copies (all GPUs)\n",
             Gib(largest_step), static_cast<double>(pack_bytes) / 1e9, static_cast<double>(unpack_bytes) / 1e9, copies);
  for (int32_t g = 0; g < p.gpus; ++g)
    fmt::print("      GPU {}: source {:.3f} GiB, destination {:.3f} GiB, bucket {:.3f} GiB, input {:.3f} GiB, "
               "staging {:.3f} GiB\n",
               g, Gib(p.ArenaBytes(g, Arena::kSource)), Gib(p.ArenaBytes(g, Arena::kDestination)),
               Gib(p.ArenaBytes(g, Arena::kBucket)), Gib(p.ArenaBytes(g, Arena::kInput)),
               Gib(p.ArenaBytes(g, Arena::kStaging)));
  if (!p.memory_modelled) {
    fmt::print("memory: not modelled (--no-memory): weights and the refit's buffers only, allocated once\n");
    return;
  }
  fmt::print("memory: offload {:.2f} of the optimizer state to pinned host before the refit ({}); "
             "capacity {:.2f} GiB per GPU\n",
             p.offload_fraction, OffloadSource(p, s), Gib(p.capacity_bytes));
  for (int32_t g = 0; g < p.gpus; ++g) {
    const GpuMemoryPlan& m = p.memory[static_cast<size_t>(g)];
    const int64_t usable = p.capacity_bytes - m.reserve_bytes;
    fmt::print("      GPU {}: optimizer {:.3f} GiB ({:.3f} GiB to host first), gradients {:.3f} GiB, KV cache {:.3f} "
               "GiB, reserve {:.3f} GiB, context + NCCL ({} peer{}) {:.3f} GiB\n",
               g, Gib(m.optimizer_bytes), Gib(m.offload_bytes), Gib(m.gradient_bytes), Gib(m.kv_cache_bytes),
               Gib(m.reserve_bytes), m.nccl_peers, m.nccl_peers == 1 ? "" : "s", Gib(m.overhead_bytes));
    fmt::print(
        "             at start {:.3f} GiB; planned peak {:.3f} GiB of {:.3f} GiB usable (capacity less "
        "reserve): {}\n",
        Gib(m.start_bytes), Gib(m.planned_peak_bytes), Gib(usable),
        m.planned_peak_bytes <= usable ? "fits"
                                       : fmt::format("{:.3f} GiB missing", Gib(m.planned_peak_bytes - usable)));
  }
  int64_t pinned = 0;
  for (const GpuMemoryPlan& m : p.memory) pinned += m.offload_bytes;
  if (pinned > 0)
    fmt::print("      pinned host memory for the offload: {:.3f} GiB (all GPUs) of {:.1f} GiB on the host\n",
               Gib(pinned), Gib(s.cluster.host_memory_bytes));
  fmt::print("      planned: {}\n", p.planned_fits ? "fits" : fmt::format("does not fit (GPU {} misses {:.3f} GiB); "
                                                                       "the run decides",
                                                                       p.missing_gpu, Gib(p.missing_bytes)));
}

nlohmann::json PlanJson(const RefitPlan& p) {
  nlohmann::json j;
  j["program"] = "allgather_baseline";
  j["scenario"] = p.scenario;
  j["collective"] = CollectiveName(p.collective);
  j["mode"] = TransportName(p.options.transport);
  j["label"] = ModeLabel(p);
  j["bucket_bytes"] = p.options.transport == Transport::kBucketed ? nlohmann::json(p.options.bucket_bytes)
                                                                   : nlohmann::json(nullptr);
  j["in_place"] = p.options.transport == Transport::kBucketed && !p.options.out_of_place;
  j["gpus"] = p.gpus;
  j["steps"] = p.steps.size();
  j["collectives"] = p.Collectives();
  j["moved_bytes_per_gpu"] = p.moved_bytes;
  int64_t largest = 0;
  for (const Step& st : p.steps) largest = std::max(largest, st.GatheredBytes(p.gpus));
  j["largest_bucket_bytes"] = largest;
  std::vector<int64_t> src, dst;
  for (int32_t g = 0; g < p.gpus; ++g) {
    src.push_back(p.ArenaBytes(g, Arena::kSource));
    dst.push_back(p.ArenaBytes(g, Arena::kDestination));
  }
  j["source_bytes"] = src;
  j["destination_bytes"] = dst;
  // Memory (lists: one entry per GPU).
  j["memory_modelled"] = p.memory_modelled;
  j["offload_fraction"] = p.offload_fraction;
  std::vector<int64_t> opt, off, grad, kv, reserve, start, peak;
  for (const GpuMemoryPlan& m : p.memory) {
    opt.push_back(m.optimizer_bytes);
    off.push_back(m.offload_bytes);
    grad.push_back(m.gradient_bytes);
    kv.push_back(m.kv_cache_bytes);
    reserve.push_back(m.reserve_bytes);
    start.push_back(m.start_bytes);
    peak.push_back(m.planned_peak_bytes);
  }
  if (!p.memory_modelled) off.assign(static_cast<size_t>(p.gpus), 0);
  j["offload_bytes_per_gpu"] = off;
  j["optimizer_bytes_per_gpu"] = opt;
  j["gradient_bytes_per_gpu"] = grad;
  j["kv_cache_bytes_per_gpu"] = kv;
  j["reserve_bytes_per_gpu"] = reserve;
  j["planned_start_bytes"] = start;
  j["planned_peak_bytes"] = peak;
  j["capacity_bytes"] = p.capacity_bytes;
  j["planned_fits"] = p.planned_fits;
  if (!p.planned_fits) j["planned_missing"] = {{"gpu", p.missing_gpu}, {"bytes", p.missing_bytes}};
  return j;
}

void WriteJson(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  std::ofstream f(path);
  if (!f) throw InputError("<cli>", "out", "cannot write " + path);
  f << j.dump(2) << "\n";
}

nlohmann::json ResultJson(const RefitPlan& p, const RunResult& r) {
  nlohmann::json j = PlanJson(p);
  j["fits"] = true;
  const bool flat = p.options.transport == Transport::kFlat;
  const double median = Median(r.times_s);
  double coll_max = 0, pack_max = 0, unpack_max = 0;
  for (const GpuResult& g : r.gpus) {
    pack_max = std::max(pack_max, g.breakdown_s[0]);
    coll_max = std::max(coll_max, g.breakdown_s[1]);
    unpack_max = std::max(unpack_max, g.breakdown_s[2]);
  }
  // --flat: time_s is the exchange alone (DESIGN's ceiling); refit_time_s adds the unpack.
  const std::vector<double>& timed = flat ? r.flat_times_s : r.times_s;
  j["time_s"] = Median(timed);
  j["refit_time_s"] = median;
  if (flat) j["time_with_unpack_s"] = median;
  j["times_s"] = timed;
  j["time_min_s"] = timed.empty() ? 0 : *std::min_element(timed.begin(), timed.end());
  j["host_time_s"] = Median(r.host_times_s);
  j["offload_time_s"] = Median(r.offload_times_s);  // part of time_s: start to the end of the offload copy
  j["breakdown_s"] = {{"offload", Median(r.offload_times_s)}, {"pack", pack_max}, {"collective", coll_max},
                      {"unpack", unpack_max}};
  std::vector<nlohmann::json> per_gpu;
  std::vector<int64_t> peak;
  int64_t extra_max = 0;
  for (const GpuResult& g : r.gpus) {
    const int64_t extra = g.extra_tracked_bytes + g.nccl_bytes;
    extra_max = std::max(extra_max, extra);
    peak.push_back(g.device_used_peak_bytes);
    nlohmann::json e = {{"gpu", g.gpu},
                        {"weights_bytes", g.weights_bytes},
                        {"extra_tracked_bytes", g.extra_tracked_bytes},
                        {"nccl_bytes", g.nccl_bytes},
                        {"extra_peak_bytes", extra},
                        {"verification_bytes", g.verification_bytes},
                        {"device_total_bytes", g.device_total_bytes},
                        {"device_used_peak_bytes", g.device_used_peak_bytes},
                        {"breakdown_s", {{"pack", g.breakdown_s[0]}, {"collective", g.breakdown_s[1]},
                                         {"unpack", g.breakdown_s[2]}}}};
    if (p.memory_modelled) {
      const GpuMemoryPlan& m = p.memory[static_cast<size_t>(g.gpu)];
      e["optimizer_bytes"] = m.optimizer_bytes;
      e["offload_bytes"] = m.offload_bytes;
      e["gradient_bytes"] = m.gradient_bytes;
      e["kv_cache_bytes"] = m.kv_cache_bytes;
      e["reserve_bytes"] = m.reserve_bytes;
      e["device_used_at_start_bytes"] = g.device_used_at_start_bytes;
      e["planned_peak_bytes"] = m.planned_peak_bytes;
      e["pool_used_high_bytes"] = g.pool_used_high_bytes;
      e["pool_reserved_high_bytes"] = g.pool_reserved_high_bytes;
    }
    per_gpu.push_back(std::move(e));
  }
  j["extra_peak_bytes"] = extra_max;
  j["peak_bytes"] = peak;  // device memory in use at most (cudaMemGetInfo, sampled), everything counted
  j["per_gpu"] = per_gpu;
  const double t_coll = flat ? Median(r.flat_times_s) : median;
  j["algbw_bytes_per_s"] = t_coll > 0 ? static_cast<double>(p.moved_bytes) / t_coll : 0;
  j["verified"] = r.mismatches == 0;
  j["mismatches"] = r.mismatches;
  nlohmann::json failures = nlohmann::json::array();
  for (const CheckFailure& f : r.failures)
    failures.push_back(
        {{"gpu", f.gpu}, {"tensor", f.tensor}, {"mismatches", f.mismatches}, {"first_index", f.first_index}});
  j["failures"] = failures;
  j["warmup"] = r.warmup;
  j["runs"] = r.runs;
  j["nccl_version"] = r.nccl_version;
  j["device"] = r.device;
  j["nccl_nvls_enable"] = r.nccl_nvls_enable;
  return j;
}

void PrintResult(const nlohmann::json& j) {
  fmt::print(
      "\n| scenario | mode | time ms | refit ms | offload ms | pack ms | collective ms | unpack ms | extra GiB | "
      "NCCL GiB | peak GiB | verified |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  int64_t nccl = 0, peak = 0;
  for (const auto& g : j["per_gpu"]) {
    nccl = std::max(nccl, g["nccl_bytes"].get<int64_t>());
    peak = std::max(peak, g["device_used_peak_bytes"].get<int64_t>());
  }
  fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.3f} | {:.3f} | {:.2f} | {} |\n",
             j["scenario"].get<std::string>(), j["label"].get<std::string>(), j["time_s"].get<double>() * 1e3,
             j["refit_time_s"].get<double>() * 1e3, j["breakdown_s"]["offload"].get<double>() * 1e3,
             j["breakdown_s"]["pack"].get<double>() * 1e3, j["breakdown_s"]["collective"].get<double>() * 1e3,
             j["breakdown_s"]["unpack"].get<double>() * 1e3, Gib(j["extra_peak_bytes"].get<int64_t>()), Gib(nccl),
             Gib(peak), j["verified"].get<bool>() ? "yes" : "NO");
  std::vector<std::string> runs;
  for (const auto& t : j["times_s"]) runs.push_back(fmt::format("{:.2f}", t.get<double>() * 1e3));
  fmt::print("runs (ms): {}; host median {:.2f} ms; algbw (bytes each GPU sends / time_s) {:.1f} GB/s\n",
             fmt::join(runs, " "), j["host_time_s"].get<double>() * 1e3, j["algbw_bytes_per_s"].get<double>() / 1e9);
  if (j["memory_modelled"].get<bool>()) {
    int64_t offload = 0, planned = 0;
    for (const auto& b : j["offload_bytes_per_gpu"]) offload = std::max(offload, b.get<int64_t>());
    for (const auto& b : j["planned_peak_bytes"]) planned = std::max(planned, b.get<int64_t>());
    fmt::print(
        "memory: offload {:.2f} of the optimizer state ({:.3f} GiB per GPU at most) first; device peak {:.2f} GiB "
        "(planned {:.2f} GiB)\n",
        j["offload_fraction"].get<double>(), Gib(offload), Gib(peak), Gib(planned));
  }
  for (const auto& f : j["failures"])
    fmt::print("MISMATCH GPU {} {}: {} elements, first at index {}\n", f["gpu"].get<int>(),
               f["tensor"].get<std::string>(), f["mismatches"].get<int64_t>(), f["first_index"].get<uint64_t>());
  fmt::print("RESULT scenario={} mode={} time_ms={:.3f} refit_ms={:.3f} extra_gib={:.3f} peak_gib={:.3f} "
             "offload_fraction={:.2f} offload_ms={:.3f} fits=true verified={}\n",
             j["scenario"].get<std::string>(), j["label"].get<std::string>(), j["time_s"].get<double>() * 1e3,
             j["refit_time_s"].get<double>() * 1e3, Gib(j["extra_peak_bytes"].get<int64_t>()), Gib(peak),
             j["offload_fraction"].get<double>(), j["breakdown_s"]["offload"].get<double>() * 1e3,
             j["verified"].get<bool>() ? "true" : "false");
}

}  // namespace reshard::baseline
