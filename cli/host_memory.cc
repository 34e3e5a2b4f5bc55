#include "cli/host_memory.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/json_reports.h"
#include "model/scenario.h"

namespace reshard::cli {

int64_t HostBackendBytes(const Plan& plan) {
  const int32_t gpus = plan.cluster.Gpus();
  std::vector<int64_t> now(gpus, 0), peak(gpus, 0);
  std::vector<bool> kept(plan.buffers.size(), false);  // host buffers stay allocated once made
  for (const PlanBuffer& b : plan.buffers)
    if (b.preexisting && b.gpu >= 0 && b.gpu < gpus) now[b.gpu] += b.bytes;
  peak = now;
  for (const Op& op : plan.ops) {
    if ((op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) || op.buffer < 0 ||
        op.buffer >= static_cast<int32_t>(plan.buffers.size()))
      continue;
    const PlanBuffer& b = plan.buffers[op.buffer];
    if (b.gpu < 0 || b.gpu >= gpus) continue;
    if (op.kind == OpKind::kAlloc) {
      if (kept[b.id]) continue;
      now[b.gpu] += b.bytes;
      peak[b.gpu] = std::max(peak[b.gpu], now[b.gpu]);
      if (b.space == MemorySpace::kHost) kept[b.id] = true;
    } else if (b.space == MemorySpace::kDevice) {
      now[b.gpu] -= b.bytes;
    }
  }
  int64_t total = 0;
  for (int64_t p : peak) total += p;
  return total;
}

namespace {

std::optional<int64_t> ReadNumber(const std::string& path) {
  std::ifstream in(path);
  std::string word;
  if (!(in >> word) || word == "max") return std::nullopt;
  try {
    size_t used = 0;
    const long long v = std::stoll(word, &used);
    if (used != word.size() || v < 0) return std::nullopt;
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<HostMemory> ReadHostMemory(const std::string& root) {
  HostMemory m;
  if (const char* env = std::getenv("RESHARD_HOST_MEMORY_BYTES"); env != nullptr && *env != '\0') {
    try {
      m.available_bytes = m.mem_available_bytes = std::stoll(env);
      m.source = "RESHARD_HOST_MEMORY_BYTES";
      return m;
    } catch (const std::exception&) {
      // fall through to what the machine says
    }
  }
  std::ifstream info(root + "/proc/meminfo");
  bool found = false;
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream in(line.substr(13));
    int64_t kib = 0;
    if (in >> kib) {
      m.mem_available_bytes = kib * 1024;
      found = true;
    }
    break;
  }
  if (!found) return std::nullopt;
  m.available_bytes = m.mem_available_bytes;
  m.source = "/proc/meminfo MemAvailable";
  // cgroup v2, else v1 (whose "no limit" is a huge number, not "max").
  std::optional<int64_t> limit = ReadNumber(root + "/sys/fs/cgroup/memory.max");
  std::optional<int64_t> usage;
  if (limit) {
    usage = ReadNumber(root + "/sys/fs/cgroup/memory.current");
  } else if ((limit = ReadNumber(root + "/sys/fs/cgroup/memory/memory.limit_in_bytes")) &&
             *limit < (int64_t{1} << 60)) {
    usage = ReadNumber(root + "/sys/fs/cgroup/memory/memory.usage_in_bytes");
  } else {
    limit.reset();
  }
  if (limit) {
    m.cgroup_limit_bytes = limit;
    m.cgroup_usage_bytes = usage;
    const int64_t left = std::max<int64_t>(0, *limit - usage.value_or(0));
    if (left < m.available_bytes) {
      m.available_bytes = left;
      m.source = fmt::format("the cgroup's limit {} less its usage {}", FormatBytes(*limit), FormatBytes(usage.value_or(0)));
    }
  }
  return m;
}

std::string HostMemoryShortfall(int64_t need_bytes, const HostMemory& m) {
  if (need_bytes <= m.available_bytes) return "";
  return fmt::format(
      "the host backend would hold up to {} of plan buffers in this machine's memory, but only {} is available ({}): "
      "{} short. The host backend is for small scenarios (tiny-llama-*, or a model whose buffers fit in RAM); run "
      "this plan with --backend nccl on GPUs, or predict it with `reshard simulate`",
      FormatBytes(need_bytes), FormatBytes(m.available_bytes), m.source, FormatBytes(need_bytes - m.available_bytes));
}

HostMemoryError::HostMemoryError(std::string plan, int64_t need_bytes, HostMemory available)
    : std::runtime_error(HostMemoryShortfall(need_bytes, available)),
      plan_(std::move(plan)),
      need_bytes_(need_bytes),
      available_(std::move(available)) {}

nlohmann::json HostMemoryJson(const HostMemoryError& e) {
  return {{"plan", e.plan()},
          {"backend", "host"},
          {"verified", false},
          {"fits", false},
          {"missing_bytes", e.missing_bytes()},
          {"message", e.what()},
          {"host_memory",
           {{"needed_bytes", e.need_bytes()},
            {"available_bytes", e.available().available_bytes},
            {"source", e.available().source}}}};
}

}  // namespace reshard::cli
