// The candidates MakePlan's search (planner/search.cc) tries, and their
// order: memory policies, segment sizes, segments per round, in-place
// thresholds, and for large plans the (size, segments per round) ranking by
// the round estimate (planner/round_estimate.h); the schedules already cut
// and the answers given before any search. Internal to planner/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "model/scenario.h"
#include "planner/emitter.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/segments.h"

namespace reshard::search_candidates {

// Large plans: the best round estimate wins; only equal ones are ties (then
// fewer segments per round and larger sizes go first). A band of 0.5 %
// picked 215 MiB for kimi-k2 where 64 MiB is 4 % faster.
inline constexpr double kTie = 1 + 1e-9;
// Plans not simulated choose among four sizes per doubling from this many
// fragment pairs on (below it, among powers of two: few pairs, few segments,
// and the estimate has nothing to gain between them).
inline constexpr int64_t kFineSizesMinFragments = 20000;
// Small plans: more segments per round (more staging) must be this much faster.
inline constexpr double kPerRoundGain = 0.01;
// Small plans: the sizes tried at one segment per round, largest first, stop
// after this many in a row fit and lose (slower than the best; a tie is no
// loss). Each halving doubles the ops, so the smallest sizes cost most of the
// search where they cannot win: llama3-70b TP8xPP4xDP2 -> TP4xPP2xDP8 on 64
// H100 colocated simulated 4-16 MiB (190-850 K ops) after 32 MiB lost, in
// each of its three routings.
inline constexpr int32_t kSmallSizeLosses = 2;
// Small plans: half the kept size at twice its segments per round, doubled
// while kept, stops after this many doublings in a row are not kept (grid
// qwen3-235b TP2xPP8xEP4 -> TP4xDP8 EP32 on 32 H200 colocated, with pairs
// interleaved and rounds levelled: 64 MiB x 2 306.8 ms, 32 MiB x 4 302.5 not
// 1 % faster, x 8 295.4; one miss stopped it there).
inline constexpr int32_t kHalfSizeMisses = 2;
// Relay waves tried where a round per phase with a relay phase was kept
// (PlannerOptions::relay_waves == 0), each kept only if simulated faster,
// more only where fewer won; their shares from FirstWaveShare.
inline constexpr int32_t kRelayWaves[] = {2, 3, 4};
// Large plans try relay waves only where the relay phase's busiest NVLink
// port needs at least this share of the predicted time (search.cc).
inline constexpr double kRelayWavesMinShare = 0.1;
// Large plans try relay waves only where at least this share of the relay
// phase is sent in place (InPlaceRelayShare): qwen3-30b-a3b colocated 0.40
// (12.3 -> 16.0 ms with waves), llama3-405b TP4xPP16 -> TP16xDP8 on GB200
// 0.001 (118.0 -> 131.3, a ~30 CPU-s simulation for nothing); llama3-8b NVL72
// is 1.0 (8.74 -> 7.63). Small plans try them anyway (llama3-70b
// disaggregated, 0.0: 368.28 -> 368.22 ms, a 0.02 % that the simulator's own
// noise could give or take).
inline constexpr double kRelayWavesMinInPlace = 0.5;
// Large plans cut relay waves by bytes (2, then 4) only where the plan kept
// has at most this many ops: each try simulates the plan with its waved
// segments and relay parts cut K ways (llama3-405b TP4xPP16 -> TP16xDP8 on
// GB200, relays in place: 745 K ops 103.9 ms; 2 waves 1.04 M ops 94.6 ms; 4
// waves 1.51 M ops 90.8 ms, ~190 CPU-s to plan against ~40 without the
// tries). Larger plans cut them by segment (PlanPolicy::
// relay_waves_by_segment: each segment whole in one wave, relay parts cut
// only where their receives' waves change) into kRelayWavesBySegment waves,
// one try: that row 805 K ops at 4 waves 85.1 ms, 811 K at 8 81.7, 814 K at
// 16 84.5 (2: 93.1; 8 with packs in wave order, emitter.cc: 77.4), ~47 CPU-s for the try (25 -> 72 CPU-s to plan;
// bench/results/2026-12-05-cpu-relay-waves-by-segment).
inline constexpr size_t kRelayWavesMaxOps = 500000;
inline constexpr int32_t kRelayWavesBySegment = 8;
// Where waves by segment lost at a larger size, they are tried once more at this one (planner/search.cc): whole
// segments of 1 GiB made 8 waves too coarse on llama3-405b TP8xPP8 -> TP8xDP16 on 128 GB200 (132.6 ms with or without
// them; 128 MiB with them 128.2, 256 MiB 132.7; 64 MiB is over the segment limit), its sweep's best point.
inline constexpr int64_t kRelayWavesBySegmentBytes = int64_t{128} << 20;
// Phase chunks (PlanPolicy::phase_chunks) tried where a round per phase on
// two lanes without relay waves was kept, each kept where simulated faster:
// small plans each of kPhaseChunks, large ones kPhaseChunksLarge (one more
// simulation). On the 34 rows, all at 6: deepseek-v3 TP8xPP4xEP32 -> TP16xDP8
// EP128 on 128 H200 colocated 269.7 -> 255.3 ms, TP2xPP8xEP16 on 128 GB200
// 83.5 -> 79.1 (4 / 8 / 12 / 16: 80.7 / 79.6 / 82.5 / 85.9), qwen3-235b
// 128.0 -> 126.5; qwen3-30b-a3b colocated 12.3 -> 17.0, llama3-70b
// colocated at 1024 GPUs 161.1 -> 246.8 (kept out by the simulation). Each
// is also tried with the relay phase after chunk 0 (PlanPolicy::
// early_relay_phase) where every feed is in chunk 0: deepseek-v3 151.4 ->
// 148.1, deepseek-v3 NVL72 121.4 (123.2 chunked) -> 117.0; where the relay
// phase is long it blocks lane 0's later chunks (the GB200 row above: 96.5).
// Large plans try the early relay phase first and chunks alone only where
// it did not win: wherever both won on the 34 rows, the early relay phase
// won more (deepseek-v3 148.1 vs 151.4 ms, TP8xPP4xEP32 on H200 250.3 vs
// 255.3, on GB200 77.8 vs 78.8), so one simulation is spared there.
// Chunks alone are tried at 8 too since they run only where the early relay
// phase did not win: on the 34 rows only deepseek-v3 TP1xPP16xEP8 -> TP8xDP16
// EP128 on 128 GB200 keeps them (feeds on a few ports, comm_lanes.h
// FeedsFitChunkZeroOnEveryPort): 75.6 ms at 6, 73.1 at 8; every other row's
// plan is the same (bench/results/2026-12-06-cpu-chunks-large-eight).
inline constexpr int32_t kPhaseChunks[] = {4, 6, 8};
inline constexpr int32_t kPhaseChunksLarge = 8;
// Small plans try their phase chunks even and ramped (comm_lanes.h ChunkShares), each kept where simulated faster.
// Where packs and unpacks are slow beside the transfers (NVLink on GB200) the ramp shortens the first chunk's wait
// for its packs and the last chunk's unpacks: grid qwen3-235b on 128 GB200 TP4xPP2xEP16 -> TP8xDP4 EP32 24.8 ->
// 24.0 ms, TP2xPP8xEP4 -> TP4xDP8 EP32 28.7 -> 28.3; forced on the rows where network transfers dwarf their copies,
// ramps of 1.06-1.5 moved them by -0.8 to +10 % (the chunks' NIC loads shift; none a steady gain), so large plans
// keep even chunks (bench/results/2026-12-06-cpu-chunk-ramp). Ramps 1.2 / 1.5 / 2 (capped at 4x) / 3 were tried.
inline constexpr double kChunkRamp = 1.5;
// A chunked round per phase kept is tried at halved sizes down to this (small plans: Search::HalveChunked; large
// ones: as any round per phase kept, where cheap to simulate, planner/search.cc).
inline constexpr int64_t kChunkedMinBytes = int64_t{16} << 20;
// With the relay phase after chunk 0, large plans try 8 chunks (the K sweep's
// best there: deepseek-v3 147.4 ms against 148.1 at 6, NVL72 116.3 / 117.0;
// in the search H200 TP8xPP4 245.6 / 250.3, GB200 TP8xPP4 76.9 / 77.8,
// qwen3-235b 125.5 / 126.5 chunks alone). On GB200 TP2xPP8 it now wins at
// 80.1 ms, so chunks alone (79.1) are no longer tried there: the one loss.
inline constexpr int32_t kPhaseChunksLargeEarly = 8;
// Chunks shorten the packs before a lane's first transfer and the unpacks
// after its last: tried only where the kept plan's critical path spends at
// least this share in copies. Kept plans that won with chunks had 2.8-7.0 %
// (grid deepseek-v3 TP8xPP4xEP32 -> TP16xDP8 EP128 on H200 2.77 % since its
// relays wait for the feeds they read, 267.8 -> 233.8 ms with chunks; 3.4 %
// before); below it none did (llama3-70b 0.1 %, llama3-8b NVL72 0.0 %,
// llama3-70b colocated 1.8 %), their tries costing up to +25 % planning CPU.
// (search_predict.h CopiesMayRepayChunks).
inline constexpr double kPhaseChunksMinCopyShare = 0.025;
// Large plans whose relays are packed try relays in place
// (Schedule::relays_in_place, in a round per phase) only where the relay
// phase's busiest NVLink port needs at least this share of the predicted
// time (RelayPhaseSeconds): llama3-405b TP4xPP16 -> TP16xDP8 on GB200 0.22
// (118.0 -> 103.7 ms in place), TP8xPP8 -> TP8xDP16 0.29 (rounds 144.0, a
// round per phase in place 133.3); qwen3-30b-a3b colocated 0.13 (12.3 ->
// 13.5), deepseek-v3 NVL72 0.065 (121.4 -> 128.3), deepseek-v3 0.033 (151.9
// -> 157.1).
inline constexpr double kRelaysInPlaceMinShare = 0.2;
// Large plans: where receive-side relays lose to the plain routing by less
// than this on the round estimate, sender-side relays are tried on top of
// them too (PlanProblem), and the simulator decides.
inline constexpr double kRelayBand = 0.05;
// Large plans kept on sender relays are planned again on the routing with
// every NIC levelled (Routings::Level) where its port bound is at least this
// much lower (search.cc): the GB200 grid deepseek-v3 rows 5-10 %, the others
// of the 34 at-scale rows under 1 % (grid deepseek-v3 H200 TP8xPP4xEP32 0.95
// %, whose plan on it simulated 0.6 % slower).
inline constexpr double kLevelledBoundGain = 0.01;
// Large plans: receive-side relays that take less than this share of the
// network's bytes off it and leave the busiest port's bound within this
// share of the plain routing's make a routing that is the plain one but for
// a relay phase: it is not searched (llama3-70b colocated on 8192 H100:
// 3.0 GB of 54.2 TB, port bounds 0.189216 and 0.189206 s; its search cut two
// schedules, ~2 s, and lost on estimates).
inline constexpr double kNegligibleRelayShare = 1e-3;
// The bytes the problem's routing sends over the network. O(pairs).
int64_t NetworkBytes(const Problem& prob);
// Whether the problem's relayed routing is negligible against the plain
// one's (network bytes, port bound seconds): kNegligibleRelayShare. O(pairs).
bool NegligibleRelays(const Problem& relayed, std::pair<int64_t, double> plain);
// Large plans: rounds are filled with more segments (MostPerRoundThatFits) only where the plan kept simulates this
// much over its schedule estimate, which has no idle port: llama3-405b TP8xPP8 -> TP8xDP16 9 % on 128 GB200 (214.1 ->
// 144.0 ms in rounds of 128) and on H200 (2068 -> 1887), deepseek-v3 TP2xPP8xEP16 on H200 12 % (372.4 -> 322.4);
// llama3-405b TP4xPP16 -> TP16xDP8 on 128 H100 4 %, where 32 per round fit and simulated slower (20 -> 41 CPU-s).
inline constexpr double kRoundsIdleBand = 0.05;
// Segments per round tried where rounds of two won (PlanProblem).
inline constexpr int32_t kRoundsOfThree = 3;
// The in-place threshold tried first (DirectThresholds).
inline constexpr int64_t kDefaultDirectMinBytes = int64_t{64} << 20;
// Large plans: a round per phase at the size it estimates best (usually
// the largest) holds the most staging; where that does not fit it is tried
// at this size (an op of it reaches ~85 % of NVLink, as at kDefaultDirectMinBytes),
// then at halves of it down to kAllFallbackSmallestBytes: smaller slots, and
// more runs go in place on one side (llama3-405b TP4xPP16 -> TP16xDP8 on 128
// H200 colocated: 5.0 and 1.6 GB short at 64 and 32 MiB, fits at 16 MiB:
// 1029 ms against 1133 in rounds of 2 at 38 MiB).
inline constexpr int64_t kAllFallbackBytes = int64_t{64} << 20;
inline constexpr int64_t kAllFallbackSmallestBytes = int64_t{16} << 20;
// Whether a round per phase that did not fit at `larger` (size, bytes missing) nor at `smaller` (a smaller size)
// cannot fit at any size below either: then its fallbacks there are skipped. Its staging is every staged segment at
// once: the staged bytes, the same at any size, plus what segments round up (up to a segment per pair and side), so
// its memory falls with the size about in proportion at most: by (m1 - m2) / (s1 - s2) per byte of size, from the two
// answers, so by at most that times s2 below s2. Skipped where the bytes missing at s2 are kFallbackSkipMargin times
// that (a heuristic, as the other search limits here). llama3-405b TP4xPP16 -> TP16xDP8 on 128 H100 colocated misses
// 271.4 GB at 1 GiB and 67.6 at 64 MiB, at most 13.6 more to save: 32 and 16 MiB (64.7 and 63.7 short) are skipped,
// and so in place (192.2, 55.1; 54.7, 54.4 skipped): 14.7 -> 10.9 CPU-s. On 128 H200 it misses 206.8 GB at 1 GiB and
// 3.0 at 64 MiB, at most 13.6 more to save: 32 MiB is tried, and fits (1021.8 ms). O(1).
inline constexpr double kFallbackSkipMargin = 2;
bool SmallerSizesCannotFit(std::pair<int64_t, int64_t> larger, std::pair<int64_t, int64_t> smaller);

// Schedules already cut, shared by the searches of one problem (and by a
// PlanSession's plans): keyed by (routing, size, threshold, segments per
// round). Only the latest segment size is kept: searches and sweeps go
// size by size, and a large plan's schedule is hundreds of MB.
class ScheduleCache {
 public:
  std::shared_ptr<const Schedule> Get(const Problem& prob, int32_t routing, int64_t segment_bytes,
                                      int64_t direct_min_bytes, int32_t per_round, bool relays_in_place = false);

 private:
  int64_t size_ = -1;
  std::map<std::tuple<int32_t, int64_t, int32_t, bool>, std::shared_ptr<const Schedule>> entries_;
};

// The answer where a GPU is short of memory whatever the plan (`floor`).
PlanResult InfeasibleResult(const Feasibility& floor);

// Throws InputError where the planner cannot plan `s` (a dtype conversion).
void CheckPlannable(const Scenario& s);

// Memory policies in the order they are tried: fastest first.
std::vector<PlanPolicy> Policies(const Scenario& s, const PlannerOptions& o);

// The candidate segment sizes: powers of two for small plans (each is
// simulated, or the plan has few fragments), four per doubling for large
// ones (rounded to 64 KiB).
std::vector<int64_t> SegmentSizes(const Scenario& s, const PlannerOptions& options, bool small);

// Segments per round tried: given, or 1, 2 and all (a round per phase).
std::vector<int32_t> PerRounds(const PlannerOptions& options);
// Not given: where rounds win, more segments per round are tried too (MostPerRoundThatFits).
inline bool GrowsPerRound(const PlannerOptions& o) { return o.per_round == 0 && o.per_round_candidates.empty(); }
// The chunk ramps (PlanPolicy::chunk_ramp) a small plan's search tries where phase chunks are searched
// (PlannerOptions::phase_chunks == 0): even and kChunkRamp, or the one given; none where chunks are not searched.
std::vector<double> ChunkRampsSearched(const PlannerOptions& o);

using Order = std::vector<std::pair<size_t, int32_t>>;

// The (size index, segments per round) candidates in the order they are
// tried, and for large plans each round family's own: rounds of 1 or 2 and
// a round per phase (with its wire estimate).
struct SizeOrders {
  Order order;
  Order rounds, all;  // each family's candidates (in `order` or not)
  // The round per phase's ports' and flows' time alone (AllInOneRoundWireEstimate): its round estimate charges every
  // segment a pack and an unpack, though a piece sent in place has none (llama3-405b TP8xPP16 -> TP8xPP2xDP8 on 128
  // GB200, its rounds at 128 MiB 43680 of 44559 segments in place: 81.1 ms estimated, 61.2 on the wire, 63.1
  // simulated against rounds' 74.1).
  double all_wire_s = std::numeric_limits<double>::infinity();
  bool all_first = false;  // `order` starts with the round-per-phase family
};

// Small plans: every size, larger first (ties keep the first tried: fewer
// ops), at the first per_round (the others are tried at the best size).
// Large plans: the (size, per_round) of the best round estimate, preferring
// fewer segments per round and then larger sizes within kTie of it; then,
// only if no policy fits there, that size at the first per_round and the
// smallest size (least staging): each emission of a large plan costs about
// as much as planning itself. A round per phase (at its best size, then at
// kAllFallbackBytes and its halves) goes first only when its estimate beats the others' by
// kPerRoundGain; else it is left to the runner-up check (PlanProblem).
// O(sizes x per_rounds x pairs).
SizeOrders SizeOrder(const Problem& prob, const std::vector<int64_t>& sizes, const std::vector<int32_t>& per_rounds,
                     const PlannerOptions& options, bool small);

// In-place thresholds tried (PlannerOptions::direct_min_bytes). Ties keep the
// first: 64 MiB (an op of that size reaches ~85 % of NVLink), then, for small
// plans, everything packed, then everything contiguous in place.
std::vector<int64_t> DirectThresholds(const Scenario& s, const PlannerOptions& options, bool small);

// The relay phase's busiest NVLink port of schedule `sc` (its bytes at the
// port's peak rate; 0 without relays). Relay waves overlap the relay phase
// with the network phase, so they cannot gain more than this. O(segments).
double RelayPhaseSeconds(const Schedule& sc, const Cluster& c);

// The first wave's share (PlanPolicy::relay_first_wave) for relay waves of
// schedule `sc` (a round per phase with a relay phase): wave k's relays run
// over NVLink while wave k + 1 crosses the network, and the last wave's
// relays wait for the network phase's end. With two waves, the first wave's
// relays (f of the relay phase, R) should end as the second's network
// transfers ((1 - f) of the phase before, N) do: f R = (1 - f) N, so f = N /
// (N + R), each phase its busiest port at its link class's peak rate;
// clamped to [1/8, 1/2]. llama3-8b NVL72 (N 2.3, R 5.1 ms): f = 0.31, 7.13 ms; 7.60
// at f = 1/2, 7.18 at 1/3, 7.27 at 1/4. With more waves, each wave's relays
// should take as long as the next wave's network part: wave k + 1 carries r
// = (1 - f) / f = R / N times wave k (comm_lanes.h WaveEnds), so the first
// carries 1 / (1 + r + ... + r^(waves - 1)): llama3-8b NVL72, its relay
// segments staggered (PartRotations), three waves 6.63 -> 6.3-6.4 ms
// (before they were staggered: 7.62 at 1/7, 2/7, 4/7). O(segments).
double FirstWaveShare(const Schedule& sc, const Cluster& c, int32_t waves = 2);
// Its two-wave share f (FirstWaveShare(sc, c, 2)).
double FirstOfTwoWaves(const Schedule& sc, const Cluster& c);

// The share of schedule `sc`'s relay-phase bytes that relayed segments send in
// place (0 without relays). Relay waves cut only those by the receives that
// wrote them; a packed relay, or a receiver-side relay's second hop, waits for
// every write of the buffers it reads, which the last wave makes, so waves
// cannot start its bytes early. O(segments).
double InPlaceRelayShare(const Schedule& sc);

// Rounds of more segments where memory allows: the most segments per round, 2, 4, 8, ... times `won`'s (while a
// phase stays more than two rounds), at its size and threshold, whose schedule fits under `policy` by its memory
// answer (no plan emitted); 0 where 2 times does not fit. Each round holds more flows, so a port idles less while
// a round's flows ramp up and end. Binary search over the doublings: O(log log(rounds)) schedules and answers.
int32_t MostPerRoundThatFits(const Problem& prob, ScheduleCache& cache, int32_t routing, const Schedule& won,
                             const PlanPolicy& policy);

// Whether two schedules cut the same segments (same pairs, parts, bytes and
// in-place sides): thresholds that give them plan the same. O(segments).
bool SameSegments(const std::vector<Segment>& a, const std::vector<Segment>& b);

// Whether no link runs faster per direction both ways than one way, so a
// port's bytes at its one-way peak bound every simulation from below.
bool PortBoundIsAFloor(const Cluster& c);

}  // namespace reshard::search_candidates
