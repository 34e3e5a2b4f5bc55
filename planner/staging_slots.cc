// Each GPU's staged sends and receives and their staging slots (the
// emitter's bookkeeping before any op, planner/emitter_state.h).
#include <algorithm>
#include <tuple>
#include <vector>

#include "planner/comm_lanes.h"
#include "planner/emitter_state.h"

namespace reshard::emitter_internal {

void AssignStaging(const Schedule& sc, int32_t gpu_count, const std::vector<uint8_t>& lane,
                   const std::vector<int8_t>& whole, const std::vector<int8_t>& chunk, std::vector<GpuEmission>& gpus,
                   std::vector<SegmentOps>& ops) {
  // Per GPU: its sends and receives in round order; staged ones take slot
  // k % n, whose previous user is the staged transfer n before (n slots).
  gpus.assign(static_cast<size_t>(gpu_count), GpuEmission{});
  ops.assign(sc.segments.size(), SegmentOps{});
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    gpus[sg.src_gpu].send.segments.push_back(static_cast<int32_t>(i));
    gpus[sg.dst_gpu].recv.segments.push_back(static_cast<int32_t>(i));
  }
  // Lane 0's packs first in each round, by wave where waves are by segment, chunk by chunk with phase chunks
  // (comm_lanes.h).
  // With sender relays' first hops in a phase before the chunked one (on lane 1), chunk 0's packs go before
  // theirs, so chunk 0's group does not wait for them (the two phases' slots are apart: see below).
  auto order = [&](int32_t i) { return chunk.empty() || chunk[i] < 0 ? static_cast<int32_t>(lane[i]) : chunk[i]; };
  const bool chunk0_first = std::find(chunk.begin(), chunk.end(), kFirstHopsBesideChunkZero) != chunk.end();
  auto key = [&](int32_t i) {
    // First hops moved into a chunk (PhaseChunks): packed after that chunk's own segments.
    if (!chunk.empty() && chunk[i] >= 0 && sc.segments[i].round < sc.pre_rounds)
      return std::make_tuple(chunk0_first && chunk[i] == 0 ? -1 : sc.pre_rounds, order(i), 1);
    if (chunk0_first && chunk[i] == 0) return std::make_tuple(-1, 0, 0);
    return std::make_tuple(sc.segments[i].round, order(i), whole.empty() ? 0 : static_cast<int>(whole[i]));
  };
  if (!lane.empty())
    for (GpuEmission& ge : gpus)
      std::stable_sort(ge.send.segments.begin(), ge.send.segments.end(),
                       [&](int32_t x, int32_t y) { return key(x) < key(y); });
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& sg = sc.segments[i];
    if (sg.Packs()) {
      auto& staged = gpus[sg.src_gpu].send.staged;
      ops[i].send_use = static_cast<int32_t>(staged.size());
      staged.push_back(static_cast<int32_t>(i));
    }
    if (sg.Unpacks()) {
      auto& staged = gpus[sg.dst_gpu].recv.staged;
      ops[i].recv_use = static_cast<int32_t>(staged.size());
      staged.push_back(static_cast<int32_t>(i));
    }
  }
  for (size_t i = 0; i < sc.locals.size(); ++i) {
    GpuEmission& ge = gpus[sc.locals[i].gpu];
    if (ge.local_end == 0) ge.next_local = i;
    ge.local_end = static_cast<int32_t>(i) + 1;
  }
  // Slots: two rounds' worth per direction (the next round's packs / the
  // previous round's unpacks overlap the current transfers). With one
  // segment per round, a GPU that stages both directions gets one slot
  // each, so staging stays within two segments per GPU (tight colocated
  // refits); several segments per round are for large jobs, where the
  // packs and unpacks between rounds would cost more than the memory.
  // With at least a round's worth, a slot's previous user is always in an
  // earlier round. A round's worth: per_round, or more where a GPU's
  // NVLink and network segments share rounds (segments.h).
  for (GpuEmission& ge : gpus) {
    const bool both = !ge.send.staged.empty() && !ge.recv.staged.empty();
    ge.send.round_staged = std::max({1, sc.per_round, MostInOneRound(sc, ge.send.staged)});
    ge.recv.round_staged = std::max({1, sc.per_round, MostInOneRound(sc, ge.recv.staged)});
    ge.send.slots = both && ge.send.round_staged == 1 ? 1 : 2 * ge.send.round_staged;
    ge.recv.slots = both && ge.recv.round_staged == 1 ? 1 : 2 * ge.recv.round_staged;
    ge.send.slot_buffer.assign(ge.send.slots, -1);
    ge.recv.slot_buffer.assign(ge.recv.slots, -1);
  }
  // Staging slot sizes: the largest staged segment each GPU sends / receives.
  for (const Segment& sg : sc.segments) {
    if (sg.Packs()) gpus[sg.src_gpu].send.slot_bytes = std::max(gpus[sg.src_gpu].send.slot_bytes, sg.bytes);
    if (sg.Unpacks()) gpus[sg.dst_gpu].recv.slot_bytes = std::max(gpus[sg.dst_gpu].recv.slot_bytes, sg.bytes);
  }
}

}  // namespace reshard::emitter_internal
