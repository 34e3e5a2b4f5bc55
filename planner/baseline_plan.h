// Baseline plans: how users refit today, built as reshard Plans so the same
// simulator, host backend and NCCL executor run them next to reshard's plan,
// and benchmarks compare reshard with what a user would pick instead.
//
// "megatron": the Megatron-Core resharding that NeMo-RL's colocated refit
// calls (one batched NCCL send/recv of the whole plan, local copies on a side
// stream, no memory bound), from the same transfer set and buffer layout as
// reshard's planner (planner/transfer_set.h, planner/buffer_layout.h):
//  * placement: destination rank r stays on the scenario's GPU r (no search);
//  * source choice: a replica on the destination's own GPU if there is one,
//    else candidates[dst_rank % n] over the n source ranks holding the
//    fragment, sorted by rank (Megatron's round-robin by destination rank;
//    no balancing of ports, no preference for NVLink over the network);
//  * transfers: every remote fragment is its own send/recv, all in ONE NCCL
//    group (group 0), issued in Megatron's order (destination rank, then
//    fragment). A side that holds the fragment contiguously sends / receives
//    in place; a strided side packs into / unpacks from a staging buffer of
//    the fragment's own (packs before the group, unpacks after it);
//  * local fragments: one copy op each on a side stream, concurrent with
//    the group;
//  * memory: every destination weight buffer is allocated at the start,
//    every staging buffer before the group and freed after it; nothing
//    bounds the peak, which is reported (PlanStats::planned_peak_bytes, and
//    the simulator's prediction). Optimizer offload, when asked for, moves
//    the state to host before the destination weights are allocated (NeMo-RL's
//    order: offload, then refit), so its time counts.
// Streams: 0 compute (allocs, packs, unpacks, frees), 1 comm (the group),
// 2 host (optimizer offload), 3 side (local copies).
//
// Complexity: O(F) for the F (destination rank, fragment) pairs after the
// transfer set (O(F log F) with its sort), one send/recv pair or one copy
// op per fragment, at most two staging buffers per fragment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "planner/planner.h"

namespace reshard {

struct BaselineOptions {
  // Optimizer state moved to host before the refit (0..1). Unset: from the
  // scenario (none: 0, all: 1, a fraction: itself; auto: 0 when that fits,
  // else all, as NeMo-RL's all-or-nothing offload_optimizer_for_refit).
  // NeMo-RL does it before the refit, outside its measured time; here its
  // time counts, as reshard's plan counts its own offload.
  std::optional<double> offload_fraction;
  // Predict time and peak with the simulator (sim/simulator.h). Off: the
  // summary has the lower bound and the planned peak only
  // (predicted_time_s = 0). One group across many GPUs is the simulator's
  // slow case (sim/simulator.h, Complexity).
  bool simulate = true;
};

// Names accepted by MakeBaselinePlan ("megatron").
std::vector<std::string> BaselineNames();

// The Megatron-Core-style plan of `s`. The result's status is kOk whenever
// the layouts can be expressed (the baseline has no memory bound); when the
// planned peak of some GPU exceeds its capacity less the reserve, `gpu`,
// `missing_bytes` and `message` say which and by how much (as for an
// infeasible reshard plan), but the plan is still returned. PlanStats:
// segments = remote sends, direct = sends in place on both sides, groups
// and rounds = 1 (0 when nothing is remote), local_copy_ops, fragments, ops,
// planned_peak_bytes (alloc/free replayed in plan order, plus CUDA context
// and NCCL peer buffers). Throws InputError as MakePlan does.
PlanResult MakeMegatronPlan(const Scenario& s, const BaselineOptions& options = {});

// Dispatch by name; throws InputError("<cli>", "--baseline", ...) for an
// unknown name.
PlanResult MakeBaselinePlan(const Scenario& s, const std::string& name, const BaselineOptions& options = {});

}  // namespace reshard
