// Segments and rounds: the planning problem (planner/problem.h) cut, for one
// segment size, into the units that travel together, and those ordered into
// rounds.
//
// Segments: per (sender GPU, receiver GPU) pair and transfer class (which
// sides hold the piece contiguously, in a run of at least direct_min_bytes;
// Schedule::relays_in_place: relays and their feeds in any run)
// the fragments, in the sender's layer order, are cut into equal segments of
// at most segment_bytes (the class's bytes over the fewest segments that
// fit), splitting a fragment along its outermost dimension where a segment
// boundary falls inside it. In a round per phase, staged fragments that feed
// relays (SourcedFragment::feeds) are a class of their own. A strided side goes through a staging buffer
// (one pack / unpack copy per segment); a contiguous side sends / receives
// in place, one p2p op per part, at most kMaxP2pPerSegment per segment so a
// round's NCCL group stays bounded. When splitting by class would add more
// than a quarter to the pair's segments, the pair is staged as one stream
// (only runs of at least half a segment keep their class). Fragments whose
// source is on the receiving GPU become local copies, one batch per source
// plan buffer.
// Rounds (planner/rounds.h): a bipartite edge colouring of the segment
// multigraph per link class (NVLink, network), edges in (sender's progress,
// pair) order, so each GPU sends and receives at most one segment of a class
// per colour and early layers go first; a round is per_round consecutive
// colours of the class that needs most rounds, and the other class's
// colours are spread evenly over those rounds (a GPU's NIC and NVLink port
// work side by side). With one segment per round a
// port idles whenever its flow ramps up, waits for its peer or ends before
// the round's slowest; with several, max-min sharing gives the port's
// capacity to the flows still running (each capped by its size's
// efficiency), and the round ends when its last flow does. With several,
// a sender's pairs of one priority take turns in the colouring order
// (InterleavePairs: a pair runs one transfer at a time, so its segments in
// one round run back to back), and each class's rounds are then levelled by
// bytes (planner/round_balance.h: segments move to nearby rounds they do not
// lengthen, keeping per_round). Relayed
// segments (Problem::AddRelays) are coloured apart, in rounds after all
// others: their sender must have received the bytes first. A sender-relayed
// pair (Problem::AddSendRelays) is cut like any other and each segment
// becomes two: its second hop (relay peer -> receiver) is coloured with the
// direct segments and its first (holder -> relay peer) rides the round
// before (a round of first hops alone precedes the first); in a round per
// phase the first hops are a phase before all others.
// per_round = kPerRoundAll: each phase (the relayed segments are the
// second) is one round holding all of a port's segments: no round barriers,
// max-min sharing to the end; staging holds every staged segment of a GPU at
// once, and its packs precede and its unpacks follow the round's transfers.
// No colouring then: Δ is the largest degree.
// Estimate: rounds one after another, each as long as its slowest port
// (its segments' bytes at the port's rate, or the largest at its size's
// efficiency, whichever is longer, plus a latency), with copies overlapping
// them (the per-port model of large plans); a phase of one round adds its
// GPUs' packs before and unpacks after (nothing to overlap them with).
//
// Complexity: O(F log F) for the F parts (the per-pair sorts by address),
// O(S·Δ) for colouring S segments into Δ rounds (O(S) for kPerRoundAll), O(S + F) for the estimate.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "model/box.h"
#include "planner/problem.h"
#include "planner/scratch_vector.h"

namespace reshard {

// Parts of a segment sent one by one: bounds the p2p ops of one NCCL group
// (per GPU and round: per_round outgoing and incoming segments).
inline constexpr int64_t kMaxP2pPerSegment = 64;

// Schedule per_round: every segment of a phase in one round (resolved to
// that phase's Δ).
inline constexpr int32_t kPerRoundAll = std::numeric_limits<int32_t>::max();

// A (destination rank, fragment) with its chosen source, or a sub-box of it
// where a segment boundary cut the fragment.
struct Part {
  Box box;
  int32_t dst_rank, frag, src_rank, src_piece;  // src_piece: index in the source rank's Shard::pieces
  bool relay = false;  // sent on from a destination rank (SourcedFragment::relay)
};

// Parts [first_part, first_part + num_parts) of Schedule::parts, sent from
// one GPU to another in one round.
struct Segment {
  int32_t src_gpu, dst_gpu;
  int64_t first_part, num_parts;
  int64_t bytes;
  bool send_direct, recv_direct;  // that side sends / receives each part in place (no staging)
  int32_t priority;  // sender's progress through its layers, 0..1023
  int32_t round = -1;
  bool relay = false;  // its parts are relayed: rounds after every other segment's
  // Staged, and its parts feed relays only (SourcedFragment::feeds): the
  // emitter unpacks it before the relayed segments are packed, and those
  // before the other unpacks of its round.
  bool feeds = false;
  // Sender-side relay (SourcedFragment::via): hop 1 carries the parts from
  // their holder to the relay peer, into a staging buffer of its own there
  // (rounds before every other segment's); hop 2 (`feed`: its hop 1) sends
  // that buffer on to the receiver. 0: not relayed that way.
  int8_t hop = 0;
  int32_t feed = -1;
  // Receiver-side NIC relay (SourcedFragment::via_recv): hop 1 (over the
  // network into the relay peer's staging) goes with the direct segments,
  // hop 2 (over NVLink to the receiver) in the relay phase.
  bool via_recv = false;
  // Received in place (recv_direct) with parts that feed relays
  // (SourcedFragment::feeds): the relays read them where they land.
  bool feeds_in_place = false;
  bool Direct() const { return send_direct && recv_direct; }
  bool PerPart() const { return send_direct || recv_direct; }  // one send / recv per part
  bool Packs() const { return !send_direct && hop != 2; }    // the sender packs it into a staging slot
  bool Unpacks() const { return !recv_direct && hop != 1; }  // the receiver unpacks it from one
};

// Local copies of one GPU reading one source plan buffer (slot).
struct LocalBatch {
  int32_t gpu, src_rank, src_slot, priority;
  int64_t first_part, num_parts, bytes;
};

// Segments and rounds for one segment size.
struct Schedule {
  int64_t segment_bytes = 0;
  int64_t direct_min_bytes = 0;     // pieces below this are packed, never in place
  // In a round per phase: relayed entries and the network entries feeding
  // them go in place wherever contiguous, whatever direct_min_bytes (a packed
  // relay is unpacked at the relay GPU, packed again from there and unpacked
  // at its receiver).
  bool relays_in_place = false;
  ScratchVector<Part> parts;
  std::vector<Segment> segments;    // sorted by (round, src_gpu, dst_gpu)
  std::vector<LocalBatch> locals;   // sorted by (gpu, priority, src_slot)
  int32_t per_round = 1;            // segments a GPU may send (receive) per round and link class (kPerRoundAll: resolved to Δ)
  bool all_in_one_round = false;    // asked kPerRoundAll: each phase is one round
  int32_t rounds = 0;
  int32_t relay_rounds = 0;         // of which the last ones: relayed segments and receiver-side relays' second hops
  int32_t pre_rounds = 0;           // of which the first ones, sender-relay first hops only (at most 1 with rounds)
  std::vector<int32_t> peers;       // per GPU: distinct send/recv peers
  double estimate_s = 0;            // per-port estimate of the transfer phase
};

// per_round: segments a GPU sends and receives per round (consecutive
// colours merged), so that its NIC or NVLink port carries several flows at
// once and stays busy while one of them ramps up or ends; kPerRoundAll: a
// round per phase.
Schedule MakeSchedule(const Problem& prob, int64_t segment_bytes, int64_t direct_min_bytes, int32_t per_round = 1,
                      bool relays_in_place = false);

// Reorders `order` (indices into `segments`, sorted by (priority, sender,
// receiver)) so that within a priority the pairs take turns: every pair's
// first segment of that priority, then every pair's second, and so on (pairs
// in their order). Why: a GPU pair runs one transfer at a time (the
// simulator's Channel, as NCCL's connection of a pair), so a pair's segments
// coloured back to back land in one round of several segments per GPU and run
// one after another while the port's other flows end (tiny-llama TP2xPP2 ->
// TP1xDP4 on four GPUs of a slow NVLink, 2 per round: 7.40 -> 6.16 ms;
// bench/results/2026-12-08-cpu-rounds-in-turns). O(n log n).
void InterleavePairs(std::vector<int32_t>& order, const std::vector<Segment>& segments);

// The most of `segments` (indices into sc.segments, in round order) that
// share one round. O(segments).
int32_t MostInOneRound(const Schedule& sc, const std::vector<int32_t>& segments);

// At most the estimate_s of every schedule of `prob` (its routing in use) of
// one or two segments per round, whatever the segment size and threshold,
// less the roundings of adding up its rounds (relative 1e-10 for a million
// rounds): the largest bytes one GPU sends or receives over one link class,
// at that class's rate. Why: the estimate adds up its rounds, each at least
// as long as each of its port-rounds (a GPU direction's segments of one
// class in that round, bytes over rate plus a latency); with at most two
// segments of a GPU and direction per round, its segments of one class in a
// round are one port-round, so the rounds add up to at least all of its
// bytes of that class over the rate. Not for a round per phase (a GPU's
// segments of one class may be split around those of another). O(pairs).
double PortBoundSeconds(const Problem& prob);

}  // namespace reshard
