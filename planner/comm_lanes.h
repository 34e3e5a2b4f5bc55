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
// feed relays are at most half of its bytes: they take lane 0 alone and the
// rest lane 1. Lane 0's group then ends early, and the relay phase (lane 0,
// after it) runs over NVLink while lane 1's network transfers still do,
// instead of after them all (deepseek-v3: feeds 4 % of the phase, 157.8 ->
// 152.1 ms; kimi-k2 bf16 406.8 -> 401.7; qwen3-235b 128.1 -> 128.3). Where
// feeds are most of the phase (llama3-8b NVL72: all of it) nothing would
// be left to overlap. O(S) for S segments; LanePeers O(S log S).
#pragma once

#include <cstdint>
#include <vector>

#include "planner/segments.h"

namespace reshard {

// Per segment its lane (0 or 1); empty when the schedule has no phase to
// split (rounds, not a round per phase, or no GPU sends two segments in one).
std::vector<uint8_t> CommLanes(const Schedule& sc, int32_t gpus);

// Per GPU: its distinct (lane, peer) connections (each costs NCCL buffers);
// with no lanes (empty), the distinct peers: Schedule::peers (Estimate).
std::vector<int32_t> LanePeers(const Schedule& sc, const std::vector<uint8_t>& lanes, int32_t gpus);

}  // namespace reshard
