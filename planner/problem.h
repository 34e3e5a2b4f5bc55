// The planning problem: everything about a refit that does not depend on the
// segment size or the memory policy, built once per MakePlan and shared by
// every candidate plan (planner/segments.h cuts it into segments,
// planner/emitter.h turns those into a Plan).
//
// What it holds: both layouts, the transfer set (planner/transfer_set.h), the
// destination placement and the source chosen for every fragment
// (planner/assign.h), where each shard's buffers sit in the per-(GPU, layer)
// plan buffers (planner/buffer_layout.h), the memory at refit start, and one
// SourcedFragment per (destination rank, fragment), sorted by (sender GPU,
// receiver GPU, sender's plan buffer, destination rank, fragment) so that
// every (sender, receiver) pair is one contiguous run, in the sender's layer
// order.
//
// Complexity: O(F) for the F (destination rank, fragment) pairs, made in
// destination order and then put in sender order by a stable LSD radix sort
// on the high bits of a packed key (2-3 passes of 11 bits); O(F log F) by
// comparison when the key does not fit 64 bits.
#pragma once

#include <cstdint>
#include <vector>

#include "model/layout.h"
#include "model/scenario.h"
#include "planner/assign.h"
#include "planner/buffer_layout.h"
#include "planner/scratch_vector.h"
#include "planner/transfer_set.h"

namespace reshard {

// One (destination rank, fragment) with the source chosen for it.
struct SourcedFragment {
  uint64_t key;  // (src_gpu, dst_gpu, src_slot, dst_rank, frag) packed, for one fast sort
  int32_t src_gpu, dst_gpu;
  int32_t src_slot;   // the sender's plan buffer (layer slot) holding it
  int32_t dst_rank, frag;
  int32_t src_rank, src_piece;  // src_piece: index in the source rank's Shard::pieces
  int64_t elems;      // the fragment's, copied: sorted entries reach fragments in scattered order
  // Relayed: sent on from another destination rank of the same NVLink domain
  // that receives the same box over the network; src_rank / src_piece /
  // src_slot then name that destination rank, its piece and plan buffer.
  bool relay = false;
  // Received over the network by the GPU AddRelays chose to relay its box:
  // other GPUs' relayed entries read what this one writes.
  bool feeds = false;
  // Sender-side relay (Problem::AddSendRelays): sent first over NVLink to
  // this GPU of the sender's domain (into staging there), which sends it on
  // over its own NIC; -1: sent straight.
  int32_t via = -1;
  // With via: a receiver-side relay instead (Problem::AddRecvRelays): `via`
  // is a GPU of the receiver's domain that receives it over its own NIC
  // (into staging) and sends it on over NVLink in the relay phase.
  bool via_recv = false;
};

// Entries of one (sender, receiver) pair: cut and scheduled together.
inline bool SamePair(const SourcedFragment& a, const SourcedFragment& b) {
  return a.src_gpu == b.src_gpu && a.dst_gpu == b.dst_gpu && a.relay == b.relay && a.via == b.via &&
         a.via_recv == b.via_recv;
}

// Bytes from one GPU to another (sender == receiver: local copies).
struct PairBytes {
  int32_t src_gpu, dst_gpu;
  int64_t bytes;
  bool relay = false;  // relayed bytes (sent after every network transfer)
  // The first hop of sender-relayed bytes (holder -> relay peer over
  // NVLink, before every other transfer); their second hop is a pair of its
  // own (relay peer -> receiver).
  bool pre = false;
};

// Layouts and start memory given instead of built from the scenario (a view
// of it whose tensors the scenario's own rules do not make, e.g. the byte
// view of planner/quantize_source.h): both layouts must use the scenario's
// tensors, ranks and dtype.
struct ProblemInputs {
  Layout src, dst;
  std::vector<GpuMemoryAtStart> memory_at_start;  // per GPU
  // A byte view of an FP8 refit (planner/quantize_source.h); false: a
  // scenario's own bytes (a replica block, planner/replica_blocks.h).
  bool byte_view = true;
};

struct Problem {
  // Builds everything (the layouts and start memory from `given` where set);
  // throws what the layout and placement steps throw.
  explicit Problem(const Scenario& s, const ProblemInputs* given = nullptr);

  const Scenario& scenario;
  Layout src, dst;
  TransferSet transfer_set;
  std::vector<int32_t> dst_gpu;               // per destination rank
  SourceChoice choice;
  SideBuffers src_buffers, dst_buffers;       // shard buffers -> plan buffers
  int64_t elem_bytes = 2;
  std::vector<GpuMemoryAtStart> memory_at_start;  // per GPU
  ScratchVector<SourcedFragment> sourced;     // sorted by (src_gpu, dst_gpu, src_slot, dst_rank, frag)
  std::vector<PairBytes> pairs;               // byte totals per (sender, receiver), in `sourced` order

  // Relays over NVLink: where several GPUs of one NVLink domain receive the
  // same box over the network, the one with the least network ingress so far
  // receives it and sends it on to the others over NVLink (after the network
  // phase). Entries become relayed ones, put after all others (sorted the
  // same way) and the pairs recomputed. Returns the relayed bytes (0: none,
  // nothing changed). O(N log N) for the N network entries.
  int64_t AddRelays();
  int64_t relayed_bytes = 0;
  // AddRelays' last step: the senders of the entries left on the network
  // balanced again over NIC egress. ChooseSources balanced every
  // destination's demand, but relays keep one entry per domain and box, from
  // whichever holder the fill gave it (qwen3-30b-a3b colocated: the first
  // nodes of each pipeline stage then sent 2.5x the last). Min-max over NIC
  // egress per holder set (BalanceDemands), then ChooseSources' fill in
  // (destination rank, fragment) order. Returns whether a sender changed;
  // leaves `sourced` unsorted then. Kept only where the busiest NIC's egress
  // drops by more than the largest entry. O(N log N + balancing) for N entries.
  bool BalanceNetworkSenders();

  // Sender-side relays over NVLink: where a NIC's network egress exceeds the
  // mean of its NVLink domain's NICs, entries it would send go instead to a
  // GPU of the domain on a NIC below that mean (SourcedFragment::via), in
  // (sender, receiver, layer) order, north-west-corner style: the busiest
  // NICs' excess fills the idlest NICs' room, whole fragments (one that
  // overshoots by more than half goes to the next; an excess smaller than
  // the network carries in one op's latency stays). The first hop (holder
  // -> relay peer, into staging) runs before every other transfer; the
  // second with the direct ones. Entries become relayed ones, put after the
  // direct entries (before AddRelays' ones) sorted by (sender, receiver,
  // relay peer, slot, rank, fragment), and the pairs recomputed. Run after
  // AddRelays (on the network entries left). Returns the bytes moved off
  // their sender's NIC (0: none, nothing changed). O(N log N) for the N
  // network entries.
  // `level_all`: where no NIC below the mean has room for half a fragment,
  // the domain's least loaded NIC takes it if both then stay below the
  // sender's load. The takers end up to half a fragment below the mean, and
  // on a domain of many NICs those rooms add up to more than the last
  // senders' excess: grid deepseek-v3 TP8xPP4xEP32 on 128 GB200 left one NIC
  // 0.69 GB above the mean (106 fragments of 58.7 MB), its routing bound
  // 64.8 ms against 58.3 levelled (the bound 57.6). Plans made on it can be
  // slower (the search tries it last: search.h), so it is not the default.
  // O(domain NICs) more per entry it moves so.
  int64_t AddSendRelays(bool level_all = false);
  int64_t send_relayed_bytes = 0;

  // Receiver-side NIC relays, AddSendRelays' mirror on NIC ingress: where a
  // NIC's network ingress exceeds the mean of its NVLink domain's NICs,
  // entries it would receive go instead to a GPU of the domain on a NIC
  // below that mean (SourcedFragment::via with via_recv), which receives
  // them into staging over its own NIC with the direct transfers and sends
  // them on over NVLink in the relay phase (colocated llama3-70b TP8 x PP8
  // -> TP4 x PP4: a receiver whose bytes all sit on other nodes takes 8.5
  // GiB over its NIC while its node mates take less). Entries that feed
  // AddRelays' relays, are relayed, or are sender-relayed stay. Entries are
  // ordered as AddSendRelays orders them. Run after AddSendRelays. Returns
  // the bytes moved off their receiver's NIC (0: none, nothing changed).
  // O(N log N) for the N network entries.
  int64_t AddRecvRelays();
  int64_t recv_relayed_bytes = 0;

  // What AddRelays / AddSendRelays change: saved and restored to plan with and without
  // relays from one Problem (copies of O(N) entries).
  struct Routing {
    ScratchVector<SourcedFragment> sourced;
    std::vector<PairBytes> pairs;
    int64_t relayed_bytes = 0;
    int64_t send_relayed_bytes = 0;
    int64_t recv_relayed_bytes = 0;
  };
  Routing SaveRouting() const {
    return Routing{sourced, pairs, relayed_bytes, send_relayed_bytes, recv_relayed_bytes};
  }
  void RestoreRouting(Routing r) {
    sourced = std::move(r.sourced);
    pairs = std::move(r.pairs);
    relayed_bytes = r.relayed_bytes;
    send_relayed_bytes = r.send_relayed_bytes;
    recv_relayed_bytes = r.recv_relayed_bytes;
  }

  // The side a (possibly relayed) entry is sent from.
  const Layout& SendLayout(bool relay) const { return relay ? dst : src; }
  const SideBuffers& SendBuffers(bool relay) const { return relay ? dst_buffers : src_buffers; }

  // (destination rank, fragment) pairs.
  int64_t Fragments() const { return static_cast<int64_t>(sourced.size()); }
  const Fragment& FragmentOf(int32_t dst_rank, int32_t frag) const {
    return transfer_set.shard_fragments[dst.rank_shard[dst_rank]][frag];
  }
  // Index of the piece of `src_rank`'s shard that holds `f`.
  int32_t SrcPieceIndex(int32_t src_rank, const Fragment& f) const;

 private:
  bool byte_view_ = false;  // built from a byte view (ProblemInputs::byte_view; BalanceNetworkSenders skips it)
};

}  // namespace reshard
