// Whether `run` / `validate --backend host` fits in this machine's memory:
// the host backend holds every plan buffer (device and host spaces alike) in
// ordinary memory, so a plan sized for GPUs can exceed the host and get the
// process killed by the kernel with no message. Checked before anything is
// allocated, against what the machine and its cgroup still grant.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "plan/plan.h"

namespace reshard::cli {

// Bytes the host backend will hold at most for `plan` in one process: per
// GPU, its buffers replayed in op order (preexisting ones from the start;
// host-space ones kept after their free, as the backend keeps them), the
// per-GPU peaks summed (each GPU's worker runs on its own, so the peaks may
// coincide). O(ops + buffers).
int64_t HostBackendBytes(const Plan& plan);

struct HostMemory {
  int64_t available_bytes = 0;  // what this process may still allocate: the smaller of the two below
  int64_t mem_available_bytes = 0;               // /proc/meminfo MemAvailable
  std::optional<int64_t> cgroup_limit_bytes;     // cgroup v2 memory.max or v1 limit_in_bytes, when limited
  std::optional<int64_t> cgroup_usage_bytes;     // its current usage
  std::string source;                            // how it was found, for the message
};

// Reads /proc/meminfo and the cgroup limit (v2 /sys/fs/cgroup/memory.max,
// else v1 /sys/fs/cgroup/memory/memory.limit_in_bytes). `root` prefixes both
// paths (tests). RESHARD_HOST_MEMORY_BYTES, when set, replaces what was read
// (drills and tests of the refusal). nullopt when nothing can be read.
std::optional<HostMemory> ReadHostMemory(const std::string& root = "");

// "" when `need_bytes` fits in `m`, else the refusal with both numbers and
// where the limit comes from.
std::string HostMemoryShortfall(int64_t need_bytes, const HostMemory& m);

// The host backend's refusal of `plan`, checked before anything is allocated:
// its buffers need `need_bytes`, more than `available` grants. The CLI exits
// 3 (does not fit), printing HostMemoryJson with --json; the Python module
// raises reshard.HostMemoryTooSmall. what() is HostMemoryShortfall's text.
class HostMemoryError : public std::runtime_error {
 public:
  HostMemoryError(std::string plan, int64_t need_bytes, HostMemory available);
  const std::string& plan() const { return plan_; }
  int64_t need_bytes() const { return need_bytes_; }
  const HostMemory& available() const { return available_; }
  int64_t missing_bytes() const { return need_bytes_ - available_.available_bytes; }

 private:
  std::string plan_;
  int64_t need_bytes_;
  HostMemory available_;
};

}  // namespace reshard::cli
