// The emitter's bookkeeping (planner/emitter.cc only): where each part
// lives, each plan buffer's alloc and readers, each segment's ops, and each
// GPU's sending and receiving sides with their staging slots.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layout.h"
#include "plan/plan.h"

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

// Per plan buffer: its alloc and its readers.
struct BufferUse {
  int32_t alloc = -1;               // its alloc op (destination weights, staging)
  int32_t readers = 0;              // ops still to read it (source weights, source_to_host)
  std::vector<int32_t> reads;       // ops that read it so far (its move to host waits for them)
  int32_t last_write[2] = {-1, -1}; // its last writer on the compute / comm stream (relays wait for them)
};

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
  int32_t slots = 2;                   // staging slots (per_round, or twice that)
  int64_t slot_bytes = 0;              // the largest staged segment
  std::vector<int32_t> slot_buffer;    // staging buffers, made at first use (-1 before)
};

struct GpuEmission {
  Direction send, recv;
  int32_t next_pack = 0;     // send.segments[next_pack] is the next segment to pack
  size_t next_local = 0;     // the next local batch of this GPU to emit
  int32_t local_end = 0;     // one past its last local batch
};

}  // namespace reshard::emitter_internal
