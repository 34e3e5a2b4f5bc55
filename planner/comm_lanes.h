// Communicator lanes of a round per phase: the segments of each phase that
// is not a relay phase split between two NCCL communicators (plan stream
// "comm", lane 0, and kCommLane2StreamName, lane 1), so the phase is two
// groups per GPU that run at once instead of one. The emitter packs lane 0
// first: its transfers start while lane 1's packs still run (deepseek-v3:
// its senders packed 7 ms before their one group could start), and lane 0's
// unpacks are queued first. A lane costs its own NCCL buffers per peer.
//
// Per sender, its segments of such a phase go in their order (the emitter's
// pack order) to the lane with fewer of its bytes so far (ties: lane 0), so
// each lane holds half of every sender's bytes within a segment and both
// lanes run to the phase's end. (A smaller lane 0, fewer packs before the
// first transfer, was slower on deepseek-v3: 158.7 ms at a fifth, 157.0 at
// half.) Except in the phase a relay phase follows, where the segments that
// feed relays (and receiver-side relays' first hops, which the relay phase
// sends on) are at most half of its bytes: they take lane 0 alone and the
// rest lane 1. Lane 0's group then ends early, and the relay phase (lane 0,
// after it) runs over NVLink while lane 1's network transfers still do,
// instead of after them all (deepseek-v3: feeds 4 % of the phase, 157.8 ->
// 152.1 ms; kimi-k2 bf16 406.8 -> 401.7; qwen3-235b 128.1 -> 128.3). Where
// feeds are most of the phase (llama3-8b NVL72: all of it) nothing would
// be left to overlap (relay waves, below, overlap it). O(S) for S segments; LanePeers O(S log S).
//
// Relay waves (PlanPolicy::relay_waves = K > 1): the relay phase pipelined
// with the phase it follows instead of after it. That phase takes lane 0 and
// the relay phase lane 1, and each is K groups per GPU in turn (waves). A
// segment received in place goes by bytes: bytes [k/K, (k+1)/K) of it (4 KiB
// aligned) in wave k, cut inside parts where needed, so every pair and every
// GPU carries a K-th of its bytes in each wave. A relayed part sent in place
// is cut where the receives that wrote its bytes end: each piece goes in the
// wave of its receive and waits for that receive alone. Other segments go
// whole (wave 0 before the relay phase; in it, the latest wave that wrote a
// buffer they read). Wave k's relays then run over NVLink while wave k + 1
// is on the network: llama3-8b NVL72 (2.9 ms of network, then 5.8 of NVLink
// relays) 8.74 -> 7.63 ms at K = 2, 7.71 at 4, 9.69 at 8 (each wave's
// groups end with their slowest pair, and relays are cut into more ops).
// Cutting by part instead of by bytes left single-part segments in wave 0
// and the relays of a buffer waiting for its last receive: 9.6-10.6 ms.
// With two waves the last wave's relays wait for the network phase's end,
// so the first wave carries f = N / (N + R) of each segment (PlanPolicy::
// relay_first_wave, search_candidates.h FirstWaveShare): its relays end as
// the network phase does (llama3-8b NVL72: 7.60 -> 7.13 ms at f = 0.31).
// With more waves each carries R / N times the one before (WaveEnds), so
// each wave's relays end as the next wave's network part does (three
// waves: 6.63 -> 6.34 ms, the relay segments staggered, emitter_state.h
// PartRotations). Every GPU issues lane 0's waves, then lane 1's, in order;
// lane 0 never waits for lane 1, so no group waits for a later one. The
// search tries K = 2, 3, 4 (more only where fewer won) where a round per
// phase with a relay phase was kept (large
// plans: most of it sent in place, search_candidates.h kRelayWavesMinInPlace),
// and keeps the fastest (qwen3-30b-a3b colocated, 0.4 in place: 12.8 ms, 16.0
// at 2: its phase's staged segments and sender-relay hops go whole into wave 0).
// Cut by bytes, every waved segment becomes K sends and every relayed part
// up to K: a large plan's ops grow by half at K = 2 (its simulation with
// them). Large plans of many ops cut by segment instead (SegmentWaves
// below): each segment whole in one wave, balanced per GPU and link class,
// so a wave's relays wait for whole segments and the plan keeps its ops.
// With hundreds of segments per GPU the waves balance as well as by bytes,
// and more of them pay (llama3-405b TP4xPP16 -> TP16xDP8 on 128 GB200,
// 519 segments per GPU: 103.9 ms without waves, 93.1 / 85.1 / 81.7 / 84.5 at
// K = 2 / 4 / 8 / 16 by segment, 94.6 / 90.8 at 2 / 4 by bytes). By
// segment, each sender packs wave by wave (emitter.cc), so wave 0's group
// waits for its own packs only, not for the packs of every wave before it
// (8 waves: 81.7 -> 77.4 ms).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/cluster.h"
#include "planner/segments.h"

namespace reshard {

// Per segment its lane (0 or 1); empty when the schedule has no phase to
// split (rounds, not a round per phase, or no GPU sends two segments in one).
std::vector<uint8_t> CommLanes(const Schedule& sc, int32_t gpus);

// A round per phase on two lanes, relay phase on lane 0: a relayed segment
// with a part whose box its sender received in place on lane 1 (a feed of
// Segment::feeds_in_place, same destination piece, boxes meeting) goes on
// lane 1, its group after lane 1's network group in stream order; the rest
// stay on lane 0, whose relay group then no longer waits for lane 1's
// network group (it waited for it whole, one in-place feed per GPU sufficing:
// qwen3-30b-a3b EP8xPP2 -> TP2xDP64 EP128 on 128 H200, relay phase from
// 10.2 ms to from ~8.9, 12.27 -> 11.45 ms). O(S + P log P) for P parts.
void RelaysAfterInPlaceFeeds(const Problem& prob, const Schedule& sc, std::vector<uint8_t>& lanes);

// Rounds on two lanes (PlanPolicy::round_lanes): round r on lane r % 2, a
// sender relay's first hop on its second hop's lane (the round before, so
// the second hop waits for an earlier group of its own lane only). One lane
// runs a GPU's rounds one group after another, each ending with its slowest
// pair, so the GPU's NIC idles at every seam; on two lanes round r + 1's
// group starts once its packs and staging allow (two rounds of slots) while
// round r's slowest pairs still run (qwen3-235b TP2xPP8xEP4 -> TP4xDP8 EP32
// on 32 H200 colocated, rounds of 8 x 32 MiB: NICs busy 93 % of the refit,
// 297.6 ms; on two lanes 96 %, 290.4, at 16 per round 284.2). Each lane
// costs its own NCCL buffers per peer. Empty where the schedule is a round
// per phase or has fewer than two rounds. O(S).
std::vector<uint8_t> RoundLanes(const Schedule& sc);
// A plan's lanes without relay waves: RoundLanes where `round_lanes` and the
// schedule is in rounds, else CommLanes.
std::vector<uint8_t> LanesWithoutWaves(const Schedule& sc, bool round_lanes, int32_t gpus);

// Lanes with relay waves: the phase the relay phase follows on lane 0, the
// relay phase on lane 1, earlier phases as CommLanes splits them; empty where
// the schedule is not a round per phase with a relay phase.
std::vector<uint8_t> RelayWaveLanes(const Schedule& sc, int32_t gpus);

// Relay waves by segment (PlanPolicy::relay_waves_by_segment): each segment
// received in place in the phase the relay phase follows goes whole in one of
// `waves` waves, so the plan has no more ops than without waves (cut by
// bytes, llama3-405b TP4xPP16 -> TP16xDP8 on GB200 went 745 K -> 1.04 M ops
// at two waves, 1.51 M at four). Per segment its wave, -1 for the others.
// Largest first (ties by id), each takes the wave where its sender's and its
// receiver's bytes of its link class (NVLink or network: balanced apart, a
// GPU's network bytes must not all land in one wave), over the wave's share
// (wave 0: `first`, or 1 / waves where `first` is 0; the others the rest
// evenly), stay lowest: every GPU carries about its share of each class in
// each wave where it has many segments. O(S log S + S waves).
std::vector<int8_t> SegmentWaves(const Schedule& sc, const Cluster& c, int32_t waves, double first);

// Phase chunks (PlanPolicy::phase_chunks = K > 1): the last phase before the
// relay phase (or the last phase, without one) cut into K chunks of whole
// segments, chunk k on lane k % 2 and after chunk k - 2 there, packed and
// unpacked chunk by chunk. One group per lane must wait for all its packs
// before its first transfer and ends before its first unpack: on deepseek-v3
// TP2xPP8xEP16 -> TP8xDP16 EP128 on 128 GB200 each GPU packed 16 GB (~7 ms)
// before its network group started and unpacked ~15 GB (~7 ms) after it
// ended. Chunked, the first chunk starts after a K-th of the packs and the
// last chunk's unpacks are a K-th; a lane's next chunk waits for its
// previous one, but the other lane's runs meanwhile, so the ports do not
// idle at the seams (sequential groups on one lane lost: 84.8-87.6 ms
// against 83.5). Segments that feed relays go in chunk 0 where they are at
// most a K-th of the phase (FeedsInFirstChunk; without, 85.4 ms there: the
// relay phase waited for the last chunks), and, without an early relay phase
// (`early`), on every port (FeedsFitChunkZeroOnEveryPort); the rest (all,
// where feeds do not fit) largest first, balanced per GPU and link class as
// SegmentWaves (chunk k a K-th).
// With PlanPolicy::early_relay_phase (every feed in chunk 0, 3 chunks or
// more) the relay phase goes on lane 0 right after chunk 0, before chunk 2:
// where it sat at the end it now overlaps the network (deepseek-v3 151.4 ->
// 148.1 ms, deepseek-v3 NVL72 123.2 -> 117.0), but it holds lane 0's later
// chunks back (a long relay phase loses: the GB200 case 79.1 -> 96.5), so
// the search tries both. Where feeds sit in chunk 1 (second hops of sender
// relays, below) the relay phase waits for chunk 1 and goes after chunk 2
// instead (emitter.cc early_turns_): lane 0 ran nothing from chunk 0's end
// until chunk 1's (deepseek-v3 on 128 GB200 from TP2xPP8xEP16 75.9 -> 74.9
// ms, from TP8xPP4xEP32 76.3 -> 74.1; on 128 H200 from TP8xPP4xEP32 235.1 ->
// 236.4, the one loss).
// Sender relays' first hops (Schedule::pre_rounds, a phase before the
// chunked one) go on lane 1 beside chunk 0 (kFirstHopsBesideChunkZero), their
// second hops in chunks 1.. (those feeding relays, where the feeds go first,
// in chunk 1: right after the first hops on lane 1; the early relay phase
// then waits for chunk 1 too), and chunk 0's packs before the first hops'
// (staging_slots.cc): chunk 0 no longer waits for the first hops, which ran
// on both lanes before it (and their packs before its). deepseek-v3 on 128
// GB200 to TP8xDP16 EP128: from TP1xPP16xEP8, a GPU with 4.5 GB of first
// hops started chunk 0 at 8 ms, now at 1.4 (6 chunks: 77.9 -> 75.6 ms, 8:
// 73.1); from TP2xPP8xEP16 with the early relay phase 80.1 -> 75.9, from
// TP8xPP4xEP32 76.9 -> 76.3, on 128 H200 245.6 -> 235.1 (with their
// second-hop feeds in chunk 0, as the other feeds, chunk 0 waited for the
// first hops: 76.9 -> 82.8).
// Only the first hops of chunk 1's second hops stay there: the first hop of
// a second hop in chunk k >= 2 goes in chunk k - 2's group (the group before
// chunk k on its lane, so stream order covers the wait), so the relay peers
// get bytes to send on after ~3 ms instead of after every first hop. With
// all first hops first (~290 GiB over NVLink, 1-13 ms, on deepseek-v3
// TP8xPP4xEP32 -> TP16xDP8 EP128 on 128 GB200) chunk 1 started at 8-13 ms,
// so chunk 0 ran alone, with only the senders that keep their bytes (their
// egress in it 1.31 GB, 0.58 on average): the network at ~55 % of its rate
// for 12 ms. Now chunk 1 starts at ~4 ms: 74.1 -> 69.7 ms (from
// TP2xPP8xEP16 74.9 -> 69.1). Moving the first hops of chunks 0
// and 1's second hops as well (second hops from chunk 2 on) lost (76.0):
// chunks 0 and 1 then held only direct bytes (bench/results/
// 2026-12-06-cpu-routing-and-first-hops).
// Sets `lanes` of the chunked segments (and of the first hops); per
// segment its chunk (a first hop moved: the chunk it runs in),
// kFirstHopsBesideChunkZero for first hops beside chunk 0, -1 for the others
// (or all, where there is no such phase). O(S log S + S K).
// `ramp` > 1: chunk k's share of the phase grows by that ratio from each end
// toward the middle (ChunkShares), so chunk 0 waits for fewer packs and the
// last chunk leaves fewer unpacks.
// `feed_chunks` > 1 (PlanPolicy::feed_chunks, with `early`): the feeds
// balanced over chunks [0, feed_chunks) as the rest is over all (second
// hops among them over [1, feed_chunks)), the relay phase after them. Feeds
// all in chunk 0 made it the longest on the ports that send them, and the
// relay phase after chunk 0 or 2 held lane 0's later chunks back: deepseek-v3
// TP1xPP16xEP8 -> TP16xDP8 EP128 on 128 GB200 kept its relay phase (343 GiB
// over NVLink) after the phase, 73.0 ms (early: 78.6); feeds over chunks
// 0-5 of 8, 68.4 ms. Where most feeds are second hops of sender relays
// (TP8xPP4xEP32: 69.7 ms early, 71.5 spread) all in chunk 0 or 1 won.
inline constexpr int8_t kFirstHopsBesideChunkZero = -2;
std::vector<int8_t> PhaseChunks(const Schedule& sc, const Cluster& c, int32_t chunks, std::vector<uint8_t>& lanes,
                                bool early = false, double ramp = 1, int32_t feed_chunks = 1);
// Each chunk's share of the phase: ramp^min(k, chunks - 1 - k), normalised
// to sum 1 (ramp 1: even). Where packs and unpacks take a share of the
// transfers' time comparable to a chunk's (NVLink on GB200: ~1.7 TB/s of
// packs against 0.7 of NVLink), the first chunk's packs and the last
// chunk's unpacks are what the ports wait for; smaller end chunks shorten
// both. O(chunks).
std::vector<double> ChunkShares(int32_t chunks, double ramp);
// Whether the segments feeding relays fit in chunk 0: they are at most a
// `chunks`-th of the phase's bytes (then PlanPolicy::early_relay_phase can
// start the relay phase after chunk 0); in the first `within` chunks: at
// most `within` chunks' share. O(S).
bool FeedsInFirstChunk(const Schedule& sc, int32_t chunks, int32_t within = 1);
// Whether they also fit there on every port (GPU, link class, direction;
// seconds at the class's peak): on none longer than a `chunks`-th of the
// busiest port's phase. Without an early relay phase, PhaseChunks puts the
// feeds in chunk 0 only then: feeds on a few ports (receiver-side relays'
// first hops into the peers with room) made chunk 0 the longest, and chunk
// groups span the cluster, so every seam waited for it (deepseek-v3
// TP1xPP16xEP8 -> TP8xDP16 EP128 on 128 GB200: a relay peer had 2.9 GB of
// chunk 0's network bytes, the others ~1 GB; the chunks' busiest NICs summed
// to 80-83 ms, 61.7 with the feeds balanced over the chunks: 81.4 -> 77.9
// ms). With an early relay phase the feeds must all be in chunk 0, and that
// can still win (the same job from TP2xPP8xEP16: 80.1 ms with it, 83.5
// without). O(S + G) for S segments and G GPUs.
bool FeedsFitChunkZeroOnEveryPort(const Schedule& sc, const Cluster& c, int32_t chunks);

// The waves' shares of a segment, cumulative: ends[w] is where wave w
// starts (ends[0] = 0, ends[waves] = 1). Empty for even shares (no first
// share f in (0, 1), or one wave). With f: geometric, wave k carries f r^k,
// r such that they sum to 1 (two waves: f and 1 - f); where r = R / N
// (search_candidates.h FirstWaveShare) each wave's relays take as long as
// the next wave's network part, so the relays run on without a gap after
// the first wave (llama3-8b NVL72, three waves: 6.63 -> 6.3-6.4 ms at r = 2
// to 2.2; evenly 6.72). O(waves) plus a bisection for r.
std::vector<double> WaveEnds(int32_t waves, double first);

// Where wave w of a segment of `bytes` starts (w = waves: its end), 4 KiB
// aligned: at a w-th of it, or at ends[w] (WaveEnds).
inline int64_t WaveStartBytes(int64_t bytes, int32_t w, int32_t waves, const std::vector<double>& ends) {
  if (w >= waves) return bytes;
  if (w <= 0) return 0;
  if (!ends.empty())
    return std::min(bytes, static_cast<int64_t>(static_cast<double>(bytes) * ends[w])) / 4096 * 4096;
  return (bytes / waves * w + bytes % waves * w / waves) / 4096 * 4096;  // floor(bytes * w / waves), no overflow
}
inline int64_t WaveStartBytes(int64_t bytes, int32_t w, int32_t waves, double first = 0) {
  return WaveStartBytes(bytes, w, waves, WaveEnds(waves, first));
}

// Per GPU: its distinct (lane, peer) connections (each costs NCCL buffers);
// with no lanes (empty), the distinct peers: Schedule::peers (Estimate).
std::vector<int32_t> LanePeers(const Schedule& sc, const std::vector<uint8_t>& lanes, int32_t gpus);

}  // namespace reshard
