// The memory policies' optimizer offload (declared in planner/emitter.h):
// a policy's name, how many of a GPU's optimizer slots move to host, how
// long those moves queue, and the exact missing-bytes prediction for more
// offload. Apart from the emission: none of it emits an op.
#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "model/error.h"
#include "planner/buffer_layout.h"
#include "planner/emitter.h"
#include "planner/memory_ledger.h"

namespace reshard {

std::string PlanPolicy::Name() const {
  std::string s = destination_per_layer ? "dest-per-layer" : "dest-all-at-once";
  if (source_to_host) s += "+source-to-host";
  if (offload_fraction >= 1) s += "+optimizer-offload-all";
  else if (offload_fraction > 0) s += fmt::format("+optimizer-offload-{:.2f}", offload_fraction);
  return s;
}

size_t OffloadedOptimizerSlots(const std::vector<int64_t>& slot_bytes, int64_t optimizer_bytes, double fraction) {
  const double goal = fraction * static_cast<double>(optimizer_bytes);
  int64_t done = 0;
  size_t k = 0;
  for (; k < slot_bytes.size() && done < goal - 0.5; ++k) done += slot_bytes[k];
  return k;
}

namespace {
int64_t OffloadedOptimizerBytes(const std::vector<int64_t>& slot_bytes, int64_t optimizer_bytes, double fraction) {
  const size_t n = OffloadedOptimizerSlots(slot_bytes, optimizer_bytes, fraction);
  return std::accumulate(slot_bytes.begin(), slot_bytes.begin() + static_cast<std::ptrdiff_t>(n), int64_t{0});
}
}  // namespace

double OptimizerOffloadSeconds(const Problem& prob, const std::vector<std::vector<int64_t>>& optimizer_slots,
                               double fraction) {
  double longest_s = 0;
  for (size_t g = 0; g < optimizer_slots.size(); ++g) {
    const std::vector<int64_t>& slots = optimizer_slots[g];
    const size_t n = OffloadedOptimizerSlots(slots, prob.memory_at_start[g].optimizer, fraction);
    double s = 0;
    for (size_t k = 0; k < n; ++k) s += HostMoveSeconds(prob.scenario.cluster, slots[k]);
    longest_s = std::max(longest_s, s);
  }
  return longest_s;
}

std::vector<std::vector<int64_t>> OptimizerSlotBytes(const Plan& p) {
  std::vector<std::vector<int64_t>> out(p.cluster.Gpus());
  for (const PlanBuffer& b : p.buffers)
    if (b.role == BufferRole::kOptimizer && b.preexisting) out[b.gpu].push_back(b.bytes);
  return out;
}

int32_t OptimizerStatesUnder(const PlanPolicy& policy, const Scenario& s) {
  return policy.destination_per_layer && policy.offload_fraction > 0 ? OptimizerStates(s.memory.optimizer.bytes_per_param)
                                                                     : 1;
}

std::vector<std::vector<int64_t>> OptimizerSlotBytes(const Problem& prob, int32_t states) {
  const Scenario& s = prob.scenario;
  std::vector<std::vector<int64_t>> out(s.cluster.Gpus());
  std::vector<bool> done(out.size(), false);  // as AddRefitBuffers: a GPU's state goes with its first rank
  for (int32_t r = 0; r < prob.src.Ranks(); ++r) {
    const int32_t g = s.source_gpus[r];
    if (done[g]) continue;
    done[g] = true;
    if (prob.memory_at_start[g].optimizer > 0)
      out[g] = OptimizerBufferBytes(prob.memory_at_start[g].optimizer,
                                    prob.src_buffers.slot_elems[prob.src.rank_shard[r]], states);
  }
  return out;
}

std::vector<int64_t> PredictMissingBytes(const Problem& prob, const std::vector<int64_t>& start_missing,
                                         const std::vector<int64_t>& shortfall, double from_fraction,
                                         double to_fraction, const std::vector<std::vector<int64_t>>& optimizer_slots) {
  RESHARD_CHECK(to_fraction >= from_fraction, "a prediction only for more optimizer offload");
  const size_t gpus = shortfall.size();
  std::vector<int64_t> out(gpus, 0);
  for (size_t g = 0; g < gpus; ++g) {
    const int64_t opt = prob.memory_at_start[g].optimizer;
    const int64_t extra = OffloadedOptimizerBytes(optimizer_slots[g], opt, to_fraction) -
                          OffloadedOptimizerBytes(optimizer_slots[g], opt, from_fraction);
    out[g] = std::max(start_missing[g], std::max<int64_t>(0, shortfall[g] - extra));
  }
  return out;
}

}  // namespace reshard
