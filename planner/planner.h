// The planner: from a Scenario to a memory-bounded, topology-aware Plan.
//
// Steps (each in its own file, each stating its complexity):
//  1. Transfer set (planner/transfer_set.h): destination pieces cut into
//     fragments, each with the source replicas that hold it.
//  2. Placement and source choice (planner/assign.h): destination ranks placed
//     on GPUs to maximise bytes already there; every fragment gets one source:
//     same GPU, else NVLink, else network, balancing senders' ports.
//  3. Segments: per (sender GPU, receiver GPU) and transfer class (which
//     sides hold the piece contiguously) the fragments, ordered by the
//     sender's layer order, are cut into equal segments of at most
//     segment_bytes (the class's bytes over the fewest segments that fit).
//     Pieces strided on both sides are packed into one staging buffer (one
//     pack copy batch, one send, one recv, one unpack batch per segment). A
//     side that holds its pieces contiguously sends / receives them in place,
//     one p2p op per piece (at most 64 per segment, all in the round's NCCL
//     group), so only strided sides are copied through staging.
//  4. Rounds (planner/rounds.h): bipartite edge colouring of the segment
//     multigraph; in each round a GPU sends and receives at most one segment.
//     Staging slots per GPU: two for a direction it alone stages (packing the
//     next segment / unpacking the previous one overlaps the current
//     transfer), one per direction when it stages both (at most two segments
//     of staging per GPU). A round's sends
//     and receives form NCCL groups (one per connected component of the
//     round's transfers), each containing matched pairs only, so the plan
//     cannot deadlock: a round's group depends only on earlier rounds.
//  5. Memory: every buffer the plan creates or releases is an alloc/free.
//     Device allocations and releases are accounted in emission order; an
//     allocation that would exceed capacity − reserve − CUDA context − NCCL
//     peer buffers waits (a dependency) for enough earlier releases, so the
//     plan's peak is bounded whatever the timing. Policies tried, fastest
//     first: optimizer offload none / fractions / all (kOffload on the host
//     stream at the start, overlapped with transfers), destination weights
//     allocated all at once or per layer before their first write, training
//     weights moved to host per layer after their last read (own stream).
//     Nothing fits: the result names the GPU and the bytes missing.
//  6. Segment size (auto): small plans simulate every candidate and keep the
//     fastest; large plans rank candidates by a round-model estimate from the
//     pair byte totals (O(pairs) each) and take the largest size within 15% of
//     the best, capped by max_segments. Each size tries policies in order and
//     keeps the first that fits.
//  7. Prediction: the simulator (sim/simulator.h); lower bound sim/ports.h.
// Streams: 0 compute (pack, unpack, local copies, allocs), 1 comm (send/recv),
// 2 host (optimizer offload), 3 release (training weights to host).
// Complexity: O(F) for the F (destination rank, fragment) pairs (made in
// destination order, then a radix sort on the sender bits of their packed
// keys: 2-3 passes; O(F log F) when a key exceeds 64 bits), O(F + S) to cut S
// segments and emit them, O(S·Δ) for the colouring (Δ rounds), O(pairs) per
// candidate segment size; the output itself is O(F) copy pairs, so F bounds
// time and memory (deepseek-v3 on 512 GPUs: F = 0.93 M).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {

struct PlannerOptions {
  // 0: the scenario's plan.segment_bytes; when that is 0 too, choose among
  // segment_candidates (by predicted time).
  int64_t segment_bytes = 0;
  std::vector<int64_t> segment_candidates;  // empty: powers of two 4 MiB .. 1 GiB
  // -1: the scenario's plan.direct_min_bytes; when that is -1 too, small
  // plans choose the segment size at 64 MiB, then try never and 0 at that
  // size (by predicted time); large ones use 64 MiB.
  int64_t direct_min_bytes = -1;
  // Forced policies (empty: from the scenario / searched).
  std::optional<double> offload_fraction;
  std::optional<bool> destination_per_layer;
  std::optional<bool> source_to_host;
  // Predict with the simulator (false: the planner's own per-port estimate).
  bool simulate = true;
  // Plans with at most this many (destination rank, fragment) pairs choose
  // the segment size by simulating every candidate; larger ones by the
  // per-port estimate alone.
  int64_t simulate_max_fragments = 20000;
  // Large plans: segment sizes that would cut more segments than this (about
  // four ops each) are passed over when a larger size stays under it; bounds
  // the plan's memory and the planning time at 8k GPUs.
  int64_t max_segments = 1'000'000;
};

enum class PlanStatus { kOk, kInfeasible };

struct PlanStats {
  int64_t segments = 0;         // segments (staged, in place on one side, or direct)
  int64_t direct = 0;           // of which direct (in place on both sides, no staging)
  int64_t groups = 0;           // NCCL groups
  int64_t rounds = 0;
  int64_t local_copy_ops = 0;
  int64_t fragments = 0;        // (destination rank, fragment) pairs
  int64_t ops = 0;
  std::vector<int64_t> planned_peak_bytes;  // per GPU: the planner's bound on device memory
  std::string predicted_by;     // "simulator" or "port model"
};

struct PlanResult {
  PlanStatus status = PlanStatus::kOk;
  Plan plan;                    // complete when status == kOk
  PlanStats stats;
  // kInfeasible: the GPU missing the most bytes under the most frugal policy.
  int32_t gpu = -1;
  int64_t missing_bytes = 0;
  std::string message;
  bool ok() const { return status == PlanStatus::kOk; }
};

// Throws InputError for scenarios the planner cannot express (e.g. a
// destination dtype other than the source's).
PlanResult MakePlan(const Scenario& s, const PlannerOptions& options = {});

}  // namespace reshard
