// The emitter's layout of a schedule over the communicator lanes
// (planner/emitter_state.h LaneLayout; the lanes, waves and chunks
// themselves are comm_lanes.h's).
#include <algorithm>

#include "planner/comm_lanes.h"
#include "planner/emitter_state.h"

namespace reshard::emitter_internal {

LaneLayout MakeLaneLayout(const Problem& prob, const Schedule& sc, const PlanPolicy& policy, bool lanes) {
  const Cluster& c = prob.scenario.cluster;
  LaneLayout l;
  if (lanes && policy.relay_waves > 1) l.lane = RelayWaveLanes(sc, c.Gpus());
  if (!l.lane.empty()) l.waves = policy.relay_waves, l.wave_ends = WaveEnds(l.waves, policy.relay_first_wave);
  else if (lanes) l.lane = LanesWithoutWaves(sc, policy.round_lanes, c.Gpus());
  if (l.waves > 1 && policy.relay_waves_by_segment) l.whole = SegmentWaves(sc, c, l.waves, policy.relay_first_wave);
  const bool early = EarlyRelayPhase(sc, policy);
  if (!l.lane.empty() && l.waves == 1 && policy.phase_chunks > 1 && sc.all_in_one_round)
    l.chunk = PhaseChunks(sc, c, policy.phase_chunks, l.lane, early, policy.chunk_ramp, policy.feed_chunks);
  if (std::all_of(l.chunk.begin(), l.chunk.end(), [](int8_t k) { return k < 0; })) l.chunk.clear();
  // Without waves or chunks: relays of bytes received in place on lane 1 on lane 1 (comm_lanes.h).
  if (!l.lane.empty() && l.waves == 1 && l.chunk.empty() && !policy.round_lanes)
    RelaysAfterInPlaceFeeds(prob, sc, l.lane);
  l.early_relays = early && !l.chunk.empty();
  for (size_t i = 0; i < l.chunk.size(); ++i) {
    const Segment& sg = sc.segments[i];
    // Feeds in chunk 1 (second hops of sender relays): the early relay phase waits for chunk 1, so it goes after
    // chunk 2 on lane 0 (turn 1) instead of idling lane 0 from chunk 0's end.
    if (l.early_relays && l.chunk[i] == 1 && sg.hop == 2 && sg.feeds) l.early_turns = 2;
    if (sg.round < sc.pre_rounds && l.chunk[i] >= 0) l.first_hops_in_chunks = true;
  }
  // Feeds over chunks [0, feed_chunks): the relay phase after the turn holding the last of them.
  if (l.early_relays) l.early_turns = std::max(l.early_turns, (policy.feed_chunks + 1) / 2);
  return l;
}

}  // namespace reshard::emitter_internal
