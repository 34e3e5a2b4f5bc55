// The planner: from a Scenario to a memory-bounded, topology-aware Plan.
//
// Steps, each in its own file with its algorithm and complexity:
//  1. Transfer set (planner/transfer_set.h): destination pieces cut into
//     fragments, each with the source replicas that hold it.
//  2. Placement and source choice (planner/assign.h): destination ranks placed
//     on GPUs to maximise bytes already there; every fragment gets one source:
//     same GPU, else NVLink, else network, balancing senders' ports.
//  3. Problem setup (planner/problem.h): the above, the plan-buffer layout
//     (planner/buffer_layout.h) and the fragments in sender order, built once;
//     optionally relays (Problem::AddRelays): a box that several GPUs of one
//     NVLink domain receive over the network goes to one of them, which sends
//     it on over NVLink from its destination buffer after the network rounds;
//     optionally sender-side relays (Problem::AddSendRelays): a NIC that
//     sends more than its NVLink domain's mean hands fragments over NVLink
//     to peers on idler NICs (into staging there), which send them on.
//  4. Segments and rounds (planner/segments.h, planner/rounds.h): per
//     (sender, receiver) pair and transfer class the fragments are cut into
//     equal segments of at most segment_bytes; a bipartite edge colouring
//     orders them into colours in which a GPU sends and receives at most one
//     segment, and per_round consecutive colours make a round (several
//     flows per port keep it busy while one ramps up or ends), or each
//     phase is one round (no barriers; all its staging at once).
//  5. Emission (planner/emitter.h): buffers, staging slots, packs, NCCL groups
//     (matched pairs only, one per connected component of a round: no
//     deadlock), unpacks and local copies, under a memory policy (optimizer
//     offload, destination per layer, training weights to host).
//  6. Memory (planner/memory_ledger.h): every allocation is accounted in
//     emission order and waits for enough earlier releases, so the plan's
//     peak is bounded whatever the timing; nothing fits: the result names the
//     GPU and the bytes missing.
//  7. Search (planner/search.h, the only step that calls the simulator):
//     segment size, in-place threshold and memory policy, without relays and
//     then with them (kept only if predicted faster), then with sender-side
//     relays on top of the routing chosen (likewise). Small plans
//     simulate the candidates and keep the fastest; large plans rank
//     (size, per_round) pairs by a round-model estimate from the pair byte
//     totals and keep the first policy that fits. Prediction: the simulator (sim/simulator.h); lower
//     bound: sim/ports.h.
//  8. Replica blocks (planner/replica_blocks.h): a large plan whose refit is
//     n identical, independent blocks of whole nodes (data-parallel groups)
//     is planned for one block and replicated; the whole then takes the
//     block's time, peak and bound.
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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {

struct ProblemInputs;  // planner/problem.h

struct PlannerOptions {
  // 0: the scenario's plan.segment_bytes; when that is 0 too, choose among
  // segment_candidates (by predicted time).
  int64_t segment_bytes = 0;
  // Empty: 4 MiB .. 1 GiB, powers of two for small plans, four steps per
  // doubling for large ones (their estimate is cheap; a pair's bytes cut
  // into whole segments makes the time jump between sizes).
  std::vector<int64_t> segment_candidates;
  // Segments a GPU sends (receives) per round (planner/segments.h;
  // kPerRoundAll: a round per phase). 0: chosen among per_round_candidates
  // (empty: 1, 2 and kPerRoundAll, and where rounds win, more: twice as
  // many while kept for small plans, as many as fit for large ones, and
  // three where rounds of two won a large plan's search).
  int32_t per_round = 0;
  std::vector<int32_t> per_round_candidates;
  // -1: the scenario's plan.direct_min_bytes; when that is -1 too, small
  // plans choose the segment size at 64 MiB, then try never and 0 at that
  // size (by predicted time); large ones use 64 MiB.
  int64_t direct_min_bytes = -1;
  // Forced policies (empty: from the scenario / searched).
  std::optional<double> offload_fraction;
  std::optional<bool> destination_per_layer;
  std::optional<bool> source_to_host;
  // Relays over NVLink (Problem::AddRelays): unset, planned with and without
  // and kept if predicted faster; true: always (where any); false: never.
  std::optional<bool> relays;
  // Sender-side relays over NVLink (Problem::AddSendRelays), on top of the
  // routing chosen above: unset, kept if predicted faster; true: always
  // (where any NIC's egress is above its domain's mean); false: never.
  std::optional<bool> send_relays;
  // A round per phase's relay phase pipelined with the phase before it in
  // this many waves (planner/comm_lanes.h): 0, planned with 2, 3 and 4 (more
  // only where fewer won) where a plan has one and kept if simulated faster;
  // 1, never; more, always (even shares).
  int32_t relay_waves = 0;
  // Relay waves by segment (PlanPolicy::relay_waves_by_segment): unset, the
  // search chooses; set, forced.
  std::optional<bool> relay_waves_by_segment;
  // A round per phase's last phase before the relay phase cut into this many
  // chunks alternating over two lanes (planner/comm_lanes.h PhaseChunks): 0,
  // tried where a round per phase on two lanes was kept and kept if simulated
  // faster; 1, never; more, always.
  int32_t phase_chunks = 0;
  // With phase_chunks forced (> 2): the relay phase right after chunk 0
  // (PlanPolicy::early_relay_phase) where every feed is in chunk 0.
  bool early_relay_phase = false;
  // Phase chunks' shares (PlanPolicy::chunk_ramp): 0, small plans' search
  // tries even chunks and chunks ramped by search_candidates.h kChunkRamp
  // (large plans: even); > 0, that ratio (1: even).
  double chunk_ramp = 0;
  // Rounds on two lanes (PlanPolicy::round_lanes): unset, tried where rounds
  // were kept and kept if simulated faster; true: always (where rounds);
  // false: never.
  std::optional<bool> round_lanes;
  // Predict with the simulator (false: the planner's own per-port estimate).
  bool simulate = true;
  // Plans with at most this many (destination rank, fragment) pairs choose
  // the segment size by simulating every candidate; larger ones by the
  // per-port estimate alone.
  int64_t simulate_max_fragments = 50000;
  // Large plans: segment sizes that would cut more segments than this (about
  // four ops each) are passed over when a larger size stays under it; bounds
  // the plan's memory and the planning time at 8k GPUs.
  int64_t max_segments = 1'000'000;
  // FP8 destinations (planner/quantize.h): unset, the scenario's
  // plan.quantize_at (auto: a few per-weight placements planned, the one
  // predicted fastest kept); true: at the source where a weight can be;
  // false: at the destination.
  std::optional<bool> quantize_at_source;
  // Local copies due together emitted as one op (PlanPolicy); the FP8
  // planner turns it off for its bf16 views.
  bool merge_local_copies = true;
  // Replica blocks (planner/replica_blocks.h): 0, a large plan (more than
  // simulate_max_fragments fragment pairs) that repeats block by block (of at
  // least two source replicas) is planned as one block and replicated; 1, always planned whole; n > 1, in n
  // blocks (InputError where the scenario does not split so).
  int32_t replica_blocks = 0;
  // Layouts and start memory to plan with instead of the scenario's own
  // (planner/problem.h; set by the FP8 planner for its byte view).
  std::shared_ptr<const ProblemInputs> inputs;
};

enum class PlanStatus { kOk, kInfeasible };

struct PlanStats {
  int64_t segments = 0;         // segments (staged, in place on one side, or direct)
  int64_t direct = 0;           // of which direct (in place on both sides, no staging)
  int64_t groups = 0;           // NCCL groups
  int64_t rounds = 0;
  int32_t per_round = 1;        // segments per GPU and direction per round
  bool round_per_phase = false; // every segment of a phase in one round (per_round: the largest phase's)
  bool round_lanes = false;     // rounds alternating over two NCCL communicators (PlanPolicy::round_lanes)
  int64_t local_copy_ops = 0;
  int64_t fragments = 0;        // (destination rank, fragment) pairs
  int64_t ops = 0;
  int64_t relayed_bytes = 0;    // received over NVLink from a destination GPU that got them over the network
  int64_t send_relayed_bytes = 0;  // sent over NVLink to a GPU of the sender's domain, which sends them on over its NIC
  int64_t recv_relayed_bytes = 0;  // received over the NIC of another GPU of the receiver's domain, which sends them on over NVLink
  std::vector<int64_t> planned_peak_bytes;  // per GPU: the planner's bound on device memory
  std::vector<MemoryParts> peak_parts;      // per GPU, at its simulated peak (empty unless simulated)
  std::string predicted_by;     // "simulator" or "port model"
  int32_t replica_blocks = 1;   // identical blocks planned once (planner/replica_blocks.h); counts above are the whole's
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

// Plans one scenario under many options (a sweep's grid), sharing what does
// not depend on them: the refit-fits check, the problem (step 3) with its
// routing without and with relays, and the schedules (step 4) of the latest
// segment size, so that the memory policies of one size are cut once.
// Plan(o) returns what MakePlan(scenario, o) returns, bit for bit; o.inputs
// must be unset. Not thread-safe: one session per thread.
class PlanSession {
 public:
  explicit PlanSession(const Scenario& s);  // keeps a copy
  ~PlanSession();
  PlanSession(const PlanSession&) = delete;
  PlanSession& operator=(const PlanSession&) = delete;

  PlanResult Plan(const PlannerOptions& options);
  // The bytes of the largest remote (sender, receiver) pair, with and
  // without relays (whole elements): every segment size of at least that
  // many bytes cuts the same segments (planner/segments.h). -1 where plans
  // are not cut that way (FP8 destinations) or nothing fits whatever the
  // plan. Throws what Plan throws for a scenario the planner refuses.
  int64_t LargestRemotePairBytes();

 private:
  // A replica block's session (planner/replica_blocks.h): its layouts and start memory given.
  PlanSession(const Scenario& block, std::shared_ptr<const ProblemInputs> inputs);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace reshard
