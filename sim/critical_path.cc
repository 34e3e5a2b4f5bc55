// The critical path of a finished run (Prediction::critical_path, defined in
// sim/simulator.h): from the op that ended last, back through what made each
// stretch start when it did, to t = 0. Every step charges [earlier, t] to one
// term and moves t back to `earlier`, so the terms sum to the refit time.
// O(ops on the path + ops of the host-bound launch).
#include <algorithm>

#include <fmt/format.h>

#include "model/error.h"
#include "sim/state.h"

namespace reshard {

CriticalPath Simulator::State::CriticalPathOf(int32_t last) const {
  CriticalPath cp;
  if (last < 0 || op_end_ns[last] <= 0) return cp;
  int64_t t = op_end_ns[last];
  int32_t i = last;
  while (true) {
    int32_t l = launches.of_op[i];
    if (const int32_t id = op_flow[i]; id >= 0) {
      // The op's flow: from its creation (both ends issued, or the pair's
      // previous transfer ended) through latency, NIC posts and bandwidth.
      const Flow& f = net.flows[id];
      const OpKind kind = info[f.op].kind;
      int64_t& term = kind == OpKind::kCopy                                 ? cp.copy_ns
                      : kind == OpKind::kOffload || kind == OpKind::kReload ? cp.offload_ns
                      : f.route.link_class == LinkClass::kLocal             ? cp.copy_ns
                                                                            : cp.wire_ns;
      term += t - f.created_ns;
      t = f.created_ns;
      ++cp.ops;
      if (f.after >= 0) {  // queued behind the pair's previous transfer
        i = net.flows[f.after].op;
        continue;
      }
      // Created when the later of its ops was issued.
      const int32_t by = f.op2 >= 0 && op_start_ns[f.op2] > op_start_ns[f.op] ? f.op2 : f.op;
      l = launches.of_op[by];
    }
    // Launch l started at t: ready on the GPU, issued by its host, then its
    // event brackets (State::IssueAt).
    const int64_t started = op_start_ns[launches.ops[launches.begin[l]]];
    RESHARD_CHECK(started == t, fmt::format("critical path: launch {} started at {}, not {}", l, started, t));
    const int64_t bracket = launch_gpu_ns.empty() ? 0 : launch_gpu_ns[l];
    cp.event_ns += bracket;
    t -= bracket;
    const int32_t by = launches.ready_by[l];
    if (by >= 0 && launches.end_ns[by] >= launch_host_ns[l]) {  // waited for the GPU side
      i = launches.last_op[by];
      t = launches.end_ns[by];
      continue;
    }
    // Waited for its host thread (or started at t = 0): the thread's time up
    // to the launch's last-issued op, its warm-up apart.
    int64_t warm = 0;
    if (!host.op_cold_ns.empty()) {
      for (int32_t k = launches.begin[l]; k < launches.begin[l + 1]; ++k) {
        const int32_t op = launches.ops[k];
        if (host.op_issue_ns[op] == launch_host_ns[l]) warm = std::max(warm, host.op_cold_ns[op]);
      }
    }
    warm = std::min(warm, t);
    cp.warm_up_ns += warm;
    cp.host_issue_ns += t - warm;
    break;
  }
  return cp;
}

}  // namespace reshard
