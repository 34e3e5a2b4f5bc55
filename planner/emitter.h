// Emission: one Schedule (planner/segments.h) under one memory policy turned
// into a complete Plan: buffers and content, then the ops, GPU by GPU and
// round by round.
//
// Per round: packs of the segments a GPU sends soon (one round ahead when it
// has two rounds of send slots), local copies whose layer priority is due (a few rounds
// early, so the FIFO compute stream does not queue them behind the last
// unpacks), the round's receive slots, its sends and receives as NCCL groups
// (one per connected component of the round's transfers, each holding
// matched pairs only, so a group depends only on earlier rounds and the plan
// cannot deadlock), then the round's unpacks (in a round per phase followed
// by a relay round: those of segments feeding relays, then the relayed
// segments' packs, then the others). Staging slots per GPU and
// direction: two rounds' worth (2 x its most staged segments in a round:
// per_round, or up to twice that where NVLink and network share rounds;
// packing the next round /
// unpacking the previous one overlaps the current transfers); with one
// segment per round, one slot per direction when a GPU stages both, so
// staging stays within two segments per GPU. A side that
// holds its parts contiguously sends / receives them in place, parts back to
// back in one buffer as one op.
// Memory (planner/memory_ledger.h): every alloc is accounted so the peak
// stays within the budget; the policy decides what is released to make room:
// optimizer state offloaded at the start (host stream), destination weights
// allocated all at once after the first round or per layer before their
// first write, training weights moved to host after their last read
// (release stream).
// Streams: 0 compute (pack, unpack, local copies, allocs), 1 comm
// (send/recv), 2 host (optimizer offload), 3 release (training weights to
// host), 4 comm2 (the second communicator lane of a round per phase,
// planner/comm_lanes.h: lane 0's packs first, then lane 1's; each pass of
// unpacks lane 0's first).
//
// Complexity: O(F + S + B) for F parts, S segments and B buffers, plus
// O(P log P) per pack / local batch / segment of P parts to deduplicate the
// buffers it reads; the output has O(F) copy pairs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "planner/problem.h"
#include "planner/segments.h"

namespace reshard {

// The memory policy a plan is emitted under (PlanSummary::memory_policy is
// its Name()): what is moved or allocated late to stay within the budget.
struct PlanPolicy {
  double offload_fraction = 0;         // of each GPU's optimizer state, moved to host at the start
  bool destination_per_layer = false;  // destination weights allocated before their first write
  bool source_to_host = false;         // training weights moved to host after their last read
  // Local copies due together as one op (emitter.cc, LocalsUpTo); off for
  // the bf16 views of a quantized refit, whose copies go through staging.
  bool merge_local_copies = true;
  // A round per phase split over two NCCL communicators (comm_lanes.h) where
  // it fits; the search turns it off where the split is predicted slower.
  bool comm_lanes = true;
  // > 1: a round per phase's relay phase pipelined with the phase it follows
  // in this many waves (comm_lanes.h); needs comm_lanes. The search tries it.
  int32_t relay_waves = 1;
  // With relay waves: the share of each waved segment's bytes in the first
  // wave, each later wave a constant ratio more (comm_lanes.h WaveEnds; two
  // waves: the rest); 0: 1 / relay_waves each. The search sets it so that
  // each wave's relays end as the next wave's network part does
  // (search_candidates.h FirstWaveShare).
  double relay_first_wave = 0;
  // With relay waves: each segment received in place goes whole in one wave
  // (comm_lanes.h SegmentWaves) instead of a part of its bytes in each, so
  // waves add no ops.
  bool relay_waves_by_segment = false;
  // > 1: a round per phase's last phase before the relay phase cut into this
  // many chunks alternating over the two lanes (comm_lanes.h PhaseChunks);
  // needs comm_lanes and no relay waves. The search tries it.
  int32_t phase_chunks = 1;
  // With phase chunks: > 1, their shares grow by this ratio from each end
  // toward the middle (comm_lanes.h ChunkShares); 1, even. The search tries it.
  double chunk_ramp = 1;
  // With phase chunks and every segment feeding relays in chunk 0: the relay
  // phase on lane 0 right after chunk 0 instead of after the phase (lane 0's
  // later chunks wait for it; lane 1's run meanwhile); after chunk 2 where
  // sender relays' second hops among the feeds go in chunk 1 (comm_lanes.h).
  // The search tries it.
  bool early_relay_phase = false;
  // With the early relay phase: the feeds balanced over chunks [0,
  // feed_chunks) instead of all in chunk 0, and the relay phase after them
  // (after turn ceil(feed_chunks / 2)); at most phase_chunks - 2, so two
  // chunks follow it. The search tries phase_chunks - 2 (comm_lanes.h).
  int32_t feed_chunks = 1;
  // Rounds (not a round per phase) alternating over the two NCCL
  // communicators (comm_lanes.h RoundLanes), so a GPU's next round need not
  // wait for its slowest pair of this one. The search tries it.
  bool round_lanes = false;
  std::string Name() const;
};

// Whether PlanPolicy::early_relay_phase applies to `sc`: phase chunks in
// more than one turn (3 chunks or more), one relay round, the feeds fit in
// chunk 0 (comm_lanes.h FeedsInFirstChunk), or in chunks [0, feed_chunks)
// with two chunks after them. O(S).
bool EarlyRelayPhase(const Schedule& sc, const PlanPolicy& policy);

struct EmittedPlan {
  Plan plan;
  bool fits = true;
  int32_t worst_gpu = -1;              // the GPU missing the most bytes (fits == false)
  int64_t missing_bytes = 0;
  std::vector<int64_t> planned_peak;   // per GPU, device memory the plan can reach (with overheads)
  // Per GPU: bytes missing at the start (no policy helps) and the most an
  // allocation of the plan was short after every release it could take
  // (PredictMissingBytes uses them).
  std::vector<int64_t> start_missing, shortfall;
  bool comm_lanes = false;             // a phase split over two NCCL communicators (comm_lanes.h)
  int64_t groups = 0;
  int64_t local_ops = 0;
  double pcie_estimate_s = 0;          // the longest host-stream queue (offloads)
};

// kMemoryOnly: the same allocations and releases in the same order, so the
// same fits / missing / planned_peak, but ops carry no copies and no labels
// and copies are not merged into transfers: the plan is for the answer only
// (about a third of the full emission's time). kAnswerOnly, for a plan
// that releases nothing before the end (MemoryAnswerMode): the
// same fits / missing / planned_peak / start_missing / shortfall without
// emitting any transfer (every allocation then precedes every free, so the
// answer does not depend on their order); the plan holds the refit buffers
// (without their content), the staging slots and their allocations only. O(GPUs + segments +
// buffers).
enum class EmitMode { kFull, kMemoryOnly, kAnswerOnly };

EmittedPlan EmitPlan(const Problem& prob, const Schedule& sc, const PlanPolicy& policy,
                     EmitMode mode = EmitMode::kFull);

// The cheapest mode whose memory answer is the full emission's: kAnswerOnly
// where nothing is freed before the end (no optimizer offload, training
// weights kept, no relay's second hop, whose buffer is freed once sent on),
// else kMemoryOnly. O(segments).
inline EmitMode MemoryAnswerMode(const Schedule& sc, const PlanPolicy& policy) {
  if (policy.offload_fraction > 0 || policy.source_to_host) return EmitMode::kMemoryOnly;
  for (const Segment& g : sc.segments)
    if (g.hop == 2) return EmitMode::kMemoryOnly;
  return EmitMode::kAnswerOnly;
}

// How many of one GPU's optimizer slots (bytes in layer order) move to host
// at the start under offload `fraction`: whole slots until it is reached.
size_t OffloadedOptimizerSlots(const std::vector<int64_t>& slot_bytes, int64_t optimizer_bytes, double fraction);

// Per GPU, the bytes a plan (its EmittedPlan::start_missing and shortfall,
// emitted under offload fraction `from_fraction`) would miss under `to_fraction` >= from_fraction with the same schedule and
// other policy choices. Exact: the optimizer offload is queued before every
// allocation and is taken after every other release, so an allocation that
// was short by x after all releases is short by x - (extra offloaded bytes);
// nothing else in the emission depends on the fraction.
// `optimizer_slots`: OptimizerSlotBytes of any plan of the problem.
std::vector<int64_t> PredictMissingBytes(const Problem& prob, const std::vector<int64_t>& start_missing,
                                         const std::vector<int64_t>& shortfall, double from_fraction,
                                         double to_fraction, const std::vector<std::vector<int64_t>>& optimizer_slots);

// The longest per-GPU queue of optimizer offloads under `fraction`: a lower
// bound of EmittedPlan::pcie_estimate_s (which adds training weights moved
// to host).
double OptimizerOffloadSeconds(const Problem& prob, const std::vector<std::vector<int64_t>>& optimizer_slots,
                               double fraction);

// Per GPU: the bytes of its optimizer slots (planner/buffer_layout.h) in layer order.
std::vector<std::vector<int64_t>> OptimizerSlotBytes(const Plan& p);

// Optimizer buffers per slot in a plan under `policy` (buffer_layout.h,
// OptimizerStates): a buffer per state where destination layers are
// allocated one by one after an optimizer offload, so that each takes a
// state's room as soon as it is freed (llama3-405b colocated on 128 H100:
// 1229.7 -> 1175.1 ms: the transfers no longer stall each time a whole
// layer's state finishes its offload); the slot whole otherwise, where
// destination buffers allocated at once wait for the whole offload anyway
// and a buffer per state only adds ops (llama3-8b offload on 2x H200:
// 0.87653 -> 0.87745 s).
int32_t OptimizerStatesUnder(const PlanPolicy& policy, const Scenario& s);

// OptimizerSlotBytes of the plans of `prob` with `states` optimizer buffers
// per slot, without emitting one. O(source ranks + slots x states).
std::vector<std::vector<int64_t>> OptimizerSlotBytes(const Problem& prob, int32_t states);

}  // namespace reshard
