// The emitter's bookkeeping (planner/emitter.cc and part_home.cc only):
// where each part lives, each plan buffer's alloc and readers, each segment's ops, and each
// GPU's sending and receiving sides with their staging slots.
#pragma once

#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/layout.h"
#include "plan/plan.h"
#include "model/cluster.h"
#include "planner/buffer_layout.h"
#include "planner/emitter.h"
#include "planner/problem.h"
#include "planner/segments.h"

namespace reshard::emitter_internal {

// Where a part lives on both sides.
struct Home {
  const Piece* src_piece;
  const Piece* dst_piece;
  int32_t src_buffer, dst_buffer;    // plan buffers
  int64_t src_offset, dst_offset;    // elements: position of the piece's box.lo in its plan buffer
  bool simple = false;               // both sides are one region each (then the regions hold them)
  Region src_region, dst_region;
};

// Where part `pt` lives (part_home.cc): its pieces, plan buffers and, where
// both sides are one region each, those regions. A relayed part's source
// side is the relaying destination rank's buffer. O(1).
Home HomeOf(const Problem& prob, const RefitBuffers& refit, const Part& pt);
// HomeOf of every part, appended to `homes` in part order. O(parts).
void AppendHomes(const Problem& prob, const RefitBuffers& refit, const ScratchVector<Part>& parts,
                 ScratchVector<Home>& homes);

// Appends the copy pairs of part `pt` (home `h`) between its home buffers and
// a contiguous staging run at `*stage_off` of `stage_buf` (advanced; pack:
// home -> staging, else staging -> home), or with stage_buf < 0 straight from
// source to destination. A part whose regions need more than three levels is
// split along its outermost dimension (rare). O(pairs appended).
void PartCopies(const Problem& prob, const Part& pt, const Home& h, int32_t stage_buf, int64_t* stage_off, bool pack,
                std::vector<CopyPair>& out);

// A piece of a relayed part (bytes [begin, end) into it): the relay wave it
// goes in and the receive it waits for (-1: every writer of its buffer).
struct WavePiece {
  int64_t begin, end;
  int32_t wave, write;
};

// Where a plan has a relay phase: per plan buffer, the receives that wrote
// it before the relay phase (disjoint byte ranges), so that a relayed read
// waits for those that wrote its bytes (Writers) and, with relay waves
// (planner/comm_lanes.h), goes in their waves (Pieces). Add O(1), Seal
// O(W log W), Pieces O(W_b) for W_b writes of the buffer.
class RangeWrites {
 public:
  void Add(const Region& r, int32_t wave, int32_t op) {
    writes_[r.buffer].push_back({r.offset_bytes, r.offset_bytes + r.Bytes(), wave, op});
    sealed_ = false;
  }
  void Seal() {  // before the first Pieces
    for (auto& [buf, v] : writes_)
      std::sort(v.begin(), v.end(), [](const WavePiece& x, const WavePiece& y) { return x.begin < y.begin; });
    sealed_ = true;
  }
  // The receives whose ranges meet bytes [offset, End()) of `r`'s buffer, appended to `out`. O(log W_b + found).
  void Writers(const Region& r, std::vector<int32_t>& out) {
    if (!sealed_) Seal();
    const auto it = writes_.find(r.buffer);
    if (it == writes_.end()) return;
    const std::vector<WavePiece>& v = it->second;
    const int64_t a = r.offset_bytes, b = r.End();
    // Disjoint ranges sorted by begin are sorted by end too.
    auto k = std::partition_point(v.begin(), v.end(), [&](const WavePiece& x) { return x.end <= a; });
    for (; k != v.end() && k->begin < b; ++k) out.push_back(k->write);
  }
  // Contiguous `r` cut where its writers' ranges end, each piece in its
  // writer's wave; one piece in `fallback_wave` where receives do not cover it.
  void Pieces(const Region& r, int32_t fallback_wave, std::vector<WavePiece>& out) const {
    const int64_t a = r.offset_bytes, b = a + r.Bytes();
    out.clear();
    const auto it = writes_.find(r.buffer);
    int64_t at = a;
    for (size_t k = 0; it != writes_.end() && k < it->second.size() && at < b; ++k) {
      const WavePiece& x = it->second[k];
      if (x.end <= at) continue;
      if (x.begin > at) break;
      out.push_back({at - a, std::min(x.end, b) - a, x.wave, x.write});
      at = std::min(x.end, b);
    }
    if (at < b) out.assign(1, {0, b - a, fallback_wave, -1});
  }

 private:
  std::unordered_map<int32_t, std::vector<WavePiece>> writes_;  // per buffer: byte ranges of the buffer
  bool sealed_ = true;
};

// Per plan buffer: its alloc and its readers.
struct BufferUse {
  int32_t alloc = -1;               // its alloc op (destination weights, staging)
  int32_t readers = 0;              // ops still to read it (source weights, source_to_host)
  std::vector<int32_t> reads;       // ops that read it so far (its move to host waits for them)
  int32_t last_compute_write = -1;  // its last writer on the compute stream (relays wait for it; receives: RangeWrites)
  int32_t write_wave = 0;           // the latest relay wave that wrote it (comm_lanes.h)
};

// Relay waves (planner/comm_lanes.h). A segment received in place before
// the relay phase goes wave by wave by bytes, a relayed one sent in place by
// the pieces each wave wrote (RangeWrites::Pieces; where receives do not
// cover a part, at its buffer's write_wave); any other whole, in wave 0
// before the relay phase and in it at the latest write_wave of the buffers
// it reads. Whether segment `sg` has bytes in wave `w` of `waves` (ends:
// their shares, comm_lanes.h WaveEnds): O(its parts).
bool Waved(const Segment& sg);
bool InWave(const Segment& sg, int32_t w, int32_t waves, const std::vector<double>& ends,
            const ScratchVector<Home>& homes, const std::vector<BufferUse>& buffers, const RangeWrites& writes);

// Per segment, the part its per-part ops start from (emitter.cc EmitPerPart;
// 0 for most). A sender's relay segments of one round send the same parts
// to each of its receivers: in the same order, every connection would reach
// a part boundary, and pay its per-op latency, at the same moment, the port
// idle meanwhile; the j-th of J such segments starts at part j P / J
// instead, so the others run on through each one's boundary (llama3-8b
// NVL72: its relay phase's NVLink ports at 570-650 of 716 GB/s). O(S log S).
std::vector<int64_t> PartRotations(const Schedule& sc);

// Per segment: the ops emitted for it.
struct SegmentOps {
  int32_t pack = -1, unpack = -1;
  std::vector<int32_t> sends, recvs;  // in order (one, or one per run of parts)
  // Position among its sender's staged sends / its receiver's staged
  // receives (-1: that side is in place); use k takes slot k % slots.
  int32_t send_use = -1, recv_use = -1;
  int32_t forward = -1;  // a sender-relay first hop: the relay peer's buffer it fills
};

// One direction (sending or receiving) of one GPU.
struct Direction {
  std::vector<int32_t> segments;       // its segments, round order
  std::vector<int32_t> staged;         // of which staged, round order
  int32_t slots = 2;                   // staging slots (a round's worth, or twice that)
  int32_t round_staged = 1;            // staged segments per round: per_round, or more where link classes share rounds
  int64_t slot_bytes = 0;              // the largest staged segment
  std::vector<int32_t> slot_buffer;    // staging buffers, made at first use (-1 before)
};

struct GpuEmission {
  Direction send, recv;
  int32_t next_pack = 0;     // send.segments[next_pack] is the next segment to pack
  size_t next_local = 0;     // the next local batch of this GPU to emit
  int32_t local_end = 0;     // one past its last local batch
};

// Per GPU its sends and receives in round order (lane 0's first where
// `lane` is set, by wave `whole` / chunk `chunk` where set), the staging slot
// use of each staged one (use k takes slot k % slots) and the slots: two
// rounds' worth per direction, one where a GPU stages both ways one segment
// a round; sized for its largest staged segment (staging_slots.cc). O(S log S).
void AssignStaging(const Schedule& sc, int32_t gpu_count, const std::vector<uint8_t>& lane,
                   const std::vector<int8_t>& whole, const std::vector<int8_t>& chunk, std::vector<GpuEmission>& gpus,
                   std::vector<SegmentOps>& ops);

// How the emitter lays a schedule over the two communicator lanes
// (comm_lanes.h): per segment its lane, the relay waves, the phase chunks and
// where the relay phase goes among them (lane_layout.cc). `lanes`: two lanes
// allowed (PlanPolicy::comm_lanes, unless one lane must save their buffers).
// O(S log S + S K) for S segments and K chunks or waves.
struct LaneLayout {
  std::vector<uint8_t> lane;        // per segment its lane (0 or 1); empty: one lane
  int32_t waves = 1;                // relay waves (PlanPolicy::relay_waves), where they apply
  std::vector<double> wave_ends;    // their shares (WaveEnds; empty: even)
  std::vector<int8_t> whole;        // by segment (SegmentWaves): per segment its wave; empty: by bytes
  std::vector<int8_t> chunk;        // phase chunks (PhaseChunks): per segment its chunk; empty: none
  bool early_relays = false;        // PlanPolicy::early_relay_phase, where it applies
  int32_t early_turns = 1;          // with it: the relay phase after this many turns (chunk pairs)
  // Sender relays' first hops moved into the chunks (PhaseChunks): emitted in the chunked round's groups.
  bool first_hops_in_chunks = false;
};
LaneLayout MakeLaneLayout(const Problem& prob, const Schedule& sc, const PlanPolicy& policy, bool lanes);

}  // namespace reshard::emitter_internal
