#include "planner/planner.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

#include <fmt/format.h>

#include "model/error.h"
#include "planner/assign.h"
#include "planner/buffer_layout.h"
#include "planner/rounds.h"
#include "planner/scratch_vector.h"
#include "planner/transfer_set.h"
#include "sim/ports.h"
#include "sim/simulator.h"

namespace reshard {

namespace {

constexpr int32_t kStreamRelease = 3;  // training weights -> host, apart from optimizer offload


// A (destination rank, fragment) pair with its chosen source, possibly a sub-box of the fragment.
struct Part {
  Box box;
  int32_t dst_rank, frag, src_rank, src_piece;  // src_piece: index in the source rank's Shard::pieces
};

struct Item {
  uint64_t key;  // (src_gpu, dst_gpu, src_slot, dst_rank, frag) packed, for one fast sort
  int32_t src_gpu, dst_gpu, src_slot, dst_rank, frag, src_rank, src_piece;
  int64_t elems;  // the fragment's, copied: sorted items reach fragments in scattered order
};

struct Seg {
  int32_t src_gpu, dst_gpu;
  int64_t first_part, num_parts;
  int64_t bytes;
  bool send_direct, recv_direct;  // that side sends / receives each part in place (no staging)
  int32_t priority;  // sender's progress through its layers, 0..1023
  int32_t round = -1;
  bool Direct() const { return send_direct && recv_direct; }
  bool PerPart() const { return send_direct || recv_direct; }  // one send / recv per part
};

// Parts of a segment sent one by one: bounds the p2p ops of one NCCL group
// (per GPU and round: one outgoing and one incoming segment per peer).
constexpr int64_t kMaxP2pPerSegment = 64;
constexpr int32_t kLocalLeadRounds = 2;  // local copies emitted this many rounds early (MainLoop)

struct LocalBatch {   // local copies of one GPU reading one source slot
  int32_t gpu, src_rank, src_slot, priority;
  int64_t first_part, num_parts, bytes;
};

struct Policy {
  double offload_fraction = 0;
  bool dest_per_layer = false;
  bool source_to_host = false;
  std::string Name() const {
    std::string s = dest_per_layer ? "dest-per-layer" : "dest-all-at-once";
    if (source_to_host) s += "+source-to-host";
    if (offload_fraction >= 1) s += "+optimizer-offload-all";
    else if (offload_fraction > 0) s += fmt::format("+optimizer-offload-{:.2f}", offload_fraction);
    return s;
  }
};

// Everything that does not depend on the segment size or the memory policy.
struct Base {
  const Scenario& s;
  Layout src, dst;
  TransferSet ts;
  std::vector<int32_t> dst_gpu;
  SourceChoice choice;
  SideBuffers sb, db;
  int64_t eb = 2;
  std::vector<GpuMemoryAtStart> mem;
  ScratchVector<Item> items;            // sorted by (src_gpu, dst_gpu, src_slot, dst_rank, frag)
  struct PairBytes {
    int32_t src_gpu, dst_gpu;
    int64_t bytes;
  };
  std::vector<PairBytes> pairs;         // byte totals per (sender, receiver), items' order
  std::vector<int32_t> src_rank_on_gpu;
  std::vector<std::vector<int32_t>> dst_ranks_on_gpu;
  int64_t fragments = 0;

  explicit Base(const Scenario& sc) : s(sc) {}

  int32_t SrcPieceIndex(int32_t src_rank, const Fragment& f) const {
    const int32_t shard = src.rank_shard[src_rank];
    const auto& hs = ts.holder_sets[f.holder_set].holders;
    auto it = std::lower_bound(hs.begin(), hs.end(), std::make_pair(shard, int32_t{-1}));
    RESHARD_CHECK(it != hs.end() && it->first == shard, "chosen source does not hold the fragment");
    return it->second;
  }
  const Piece& SrcPiece(int32_t src_rank, const Fragment& f) const {
    const int32_t shard = src.rank_shard[src_rank];
    const auto& hs = ts.holder_sets[f.holder_set].holders;
    auto it = std::lower_bound(hs.begin(), hs.end(), std::make_pair(shard, int32_t{-1}));
    RESHARD_CHECK(it != hs.end() && it->first == shard, "chosen source does not hold the fragment");
    return src.shards[shard].pieces[it->second];
  }
  const Fragment& Frag(int32_t dst_rank, int32_t frag) const {
    return ts.shard_fragments[dst.rank_shard[dst_rank]][frag];
  }
  int32_t SrcSlot(int32_t src_rank, const Piece& p) const { return sb.slot_of[src.rank_shard[src_rank]][p.buffer]; }
};

// Stable LSD radix sort of items by bits [lo, hi) of their key, 11 bits a
// pass: O(n) per pass, two passes at 512 GPUs, three at 8192.
void RadixSortByKey(ScratchVector<Item>& v, int lo, int hi) {
  constexpr int kDigitBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kDigitBits) - 1;
  ScratchVector<Item> tmp(v.size());
  std::vector<size_t> start(size_t{1} << kDigitBits);
  for (int shift = lo; shift < hi; shift += kDigitBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const Item& x : v) ++start[(x.key >> shift) & kMask];
    size_t sum = 0;
    for (size_t& c : start) sum += std::exchange(c, sum);
    for (const Item& x : v) tmp[start[(x.key >> shift) & kMask]++] = x;
    v.swap(tmp);
  }
}

void BuildBase(Base& b) {
  const Scenario& s = b.s;
  const int32_t gpus = s.cluster.Gpus();
  b.src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
  b.dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  b.eb = DTypeBytes(s.dtype);
  b.ts = BuildTransferSet(s.model, b.src, b.dst);
  b.dst_gpu = PlaceDestinations(s, b.src, b.dst, b.ts);
  b.choice = ChooseSources(s, b.src, b.dst, b.ts, b.dst_gpu);
  b.sb = LayoutBuffers(b.src);
  b.db = LayoutBuffers(b.dst);
  b.mem = MemoryAtStart(s, b.src);
  b.src_rank_on_gpu.assign(gpus, -1);
  for (int32_t r = 0; r < b.src.Ranks(); ++r) b.src_rank_on_gpu[s.source_gpus[r]] = r;
  b.dst_ranks_on_gpu.assign(gpus, {});
  for (int32_t r = 0; r < b.dst.Ranks(); ++r) b.dst_ranks_on_gpu[b.dst_gpu[r]].push_back(r);
  // Bits for the packed sort key.
  auto bits = [](int64_t n) {
    int k = 1;
    while ((int64_t{1} << k) < n) ++k;
    return k;
  };
  int32_t max_slots = 1;
  for (const auto& l : b.sb.slot_layer) max_slots = std::max<int32_t>(max_slots, static_cast<int32_t>(l.size()));
  size_t max_frags = 1;
  for (const auto& f : b.ts.shard_fragments) max_frags = std::max(max_frags, f.size());
  const int bg = bits(gpus), bs = bits(max_slots), br = bits(b.dst.Ranks()), bf = bits(static_cast<int64_t>(max_frags));
  const bool packed = 2 * bg + bs + br + bf <= 64;
  size_t total = 0;
  for (int32_t r = 0; r < b.dst.Ranks(); ++r) total += b.ts.shard_fragments[b.dst.rank_shard[r]].size();
  b.items.reserve(total);
  for (int32_t r = 0; r < b.dst.Ranks(); ++r) {
    const auto& frags = b.ts.shard_fragments[b.dst.rank_shard[r]];
    for (size_t i = 0; i < frags.size(); ++i) {
      const int32_t q = b.choice.src_rank[r][i];
      const int32_t pi = b.SrcPieceIndex(q, frags[i]);
      const int32_t slot = b.SrcSlot(q, b.src.ShardOf(q).pieces[pi]);
      const int32_t sg = s.source_gpus[q], dg = b.dst_gpu[r];
      uint64_t key = 0;
      if (packed)
        key = ((((static_cast<uint64_t>(sg) << bg | static_cast<uint64_t>(dg)) << bs | static_cast<uint64_t>(slot)) << br |
                static_cast<uint64_t>(r))
               << bf) |
              i;
      b.items.push_back(Item{key, sg, dg, slot, r, static_cast<int32_t>(i), q, pi, frags[i].elems});
    }
  }
  b.fragments = static_cast<int64_t>(b.items.size());
  if (packed) {
    // Items were made in (dst_rank, frag) order, i.e. sorted by the key's
    // low br + bf bits: a stable sort on the high bits completes the order
    // (keys are distinct, so any correct sort gives this one).
    RadixSortByKey(b.items, br + bf, 2 * bg + bs + br + bf);
  } else {
    std::sort(b.items.begin(), b.items.end(), [](const Item& x, const Item& y) {
      return std::tie(x.src_gpu, x.dst_gpu, x.src_slot, x.dst_rank, x.frag) <
             std::tie(y.src_gpu, y.dst_gpu, y.src_slot, y.dst_rank, y.frag);
    });
  }
  // Byte totals per (sender, receiver) pair, for the segment-size estimate.
  for (size_t i = 0; i < b.items.size();) {
    size_t j = i;
    int64_t bytes = 0;
    while (j < b.items.size() && b.items[j].src_gpu == b.items[i].src_gpu && b.items[j].dst_gpu == b.items[i].dst_gpu) {
      bytes += b.items[j].elems * b.eb;
      ++j;
    }
    b.pairs.push_back(Base::PairBytes{b.items[i].src_gpu, b.items[i].dst_gpu, bytes});
    i = j;
  }
}

// Segments and rounds for one segment size.
struct Schedule {
  int64_t segment_bytes = 0;
  int64_t direct_min_bytes = 0;     // pieces below this are packed, never in place
  ScratchVector<Part> parts;
  std::vector<Seg> segs;            // sorted by (round, src_gpu, dst_gpu)
  std::vector<LocalBatch> locals;   // sorted by (gpu, priority, src_slot)
  int32_t rounds = 0;
  std::vector<int32_t> peers;       // per GPU: distinct send/recv peers
  double estimate_s = 0;            // per-port estimate of the transfer phase
};

int32_t Priority(const Base& b, int32_t src_rank, int32_t slot) {
  const int32_t n = static_cast<int32_t>(b.sb.slot_layer[b.src.rank_shard[src_rank]].size());
  return n <= 1 ? 0 : slot * 1023 / (n - 1);
}

bool Contiguous(const Region& r) { return r.Contiguous(); }

// One side of a piece of a remote pair, when it is contiguous there: where it
// sits (rank's plan buffer `slot`, byte offset) and the run it belongs to.
struct SideRun {
  int32_t rank = -1, slot = -1;  // rank < 0: not contiguous on this side
  int64_t offset_bytes = 0, bytes = 0;
  int64_t run_bytes = 0;         // bytes of the run of back-to-back pieces it is in
  bool run_start = true;         // first piece of its run (by address)
};

// Fills run_bytes / run_start: pieces of one (rank, slot) that follow each
// other without a gap form a run. O(n log n) by sorting on the address.
void MeasureRuns(std::vector<SideRun>& v, std::vector<size_t>& order) {
  order.clear();
  for (size_t k = 0; k < v.size(); ++k)
    if (v[k].rank >= 0) order.push_back(k);
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    return std::tie(v[x].rank, v[x].slot, v[x].offset_bytes, x) < std::tie(v[y].rank, v[y].slot, v[y].offset_bytes, y);
  });
  for (size_t a = 0; a < order.size();) {
    size_t e = a + 1;
    int64_t total = v[order[a]].bytes;
    while (e < order.size()) {
      const SideRun &p = v[order[e - 1]], &q = v[order[e]];
      if (q.rank != p.rank || q.slot != p.slot || q.offset_bytes != p.offset_bytes + p.bytes) break;
      total += q.bytes;
      v[order[e]].run_start = false;
      ++e;
    }
    for (size_t k = a; k < e; ++k) v[order[k]].run_bytes = total;
    a = e;
  }
}

Schedule MakeSchedule(const Base& b, int64_t seg_bytes, int64_t direct_min_bytes) {
  Schedule sc;
  sc.segment_bytes = seg_bytes;
  sc.direct_min_bytes = direct_min_bytes;
  const Cluster& c = b.s.cluster;
  const int64_t eb = b.eb;
  const int64_t max_elems = std::max<int64_t>(1, seg_bytes / eb);
  sc.parts.reserve(b.items.size() + b.items.size() / 8);
  std::vector<uint8_t> cls;  // per item of the pair: transfer class
  std::vector<SideRun> side[2];  // per item of the pair: its send / receive side, if contiguous
  std::vector<size_t> run_order, fill_order;
  // Per transfer class of the current pair (see below). Declared once and
  // reset per pair: their vectors keep their capacity, which saves a dozen
  // allocations per pair (tens of thousands of pairs at scale).
  struct Filler {
    std::vector<Part> parts;
    std::vector<Seg> segs;
    Seg cur{};
    int64_t used = 0, elems = 0, seg_elems = 0;
    int64_t ops = 1;  // p2p ops of the current segment (in-place classes: runs started)
    void Reset() {
      parts.clear();
      segs.clear();
      cur = Seg{};
      used = elems = seg_elems = 0;
      ops = 1;
    }
  };
  Filler fill[4];  // index: send_direct | recv_direct << 1
  std::vector<Box> todo;  // sub-boxes of a fragment still to place
  std::vector<const Fragment*> frag_of;  // per item of the pair: its fragment
  std::vector<const Piece*> dpiece_of;   // per item of the pair: its destination piece
  for (size_t i = 0; i < b.items.size();) {
    size_t j = i;
    while (j < b.items.size() && b.items[j].src_gpu == b.items[i].src_gpu && b.items[j].dst_gpu == b.items[i].dst_gpu) ++j;
    const int32_t sg = b.items[i].src_gpu, dg = b.items[i].dst_gpu;
    if (sg == dg) {  // local: one batch per source slot
      for (size_t k = i; k < j;) {
        size_t m = k;
        LocalBatch lb{dg, b.items[k].src_rank, b.items[k].src_slot, Priority(b, b.items[k].src_rank, b.items[k].src_slot),
                      static_cast<int64_t>(sc.parts.size()), 0, 0};
        while (m < j && b.items[m].src_slot == b.items[k].src_slot) {
          const Item& it = b.items[m];
          const Fragment& f = b.Frag(it.dst_rank, it.frag);
          sc.parts.push_back(Part{f.box, it.dst_rank, it.frag, it.src_rank, it.src_piece});
          lb.bytes += f.elems * eb;
          ++m;
        }
        lb.num_parts = static_cast<int64_t>(sc.parts.size()) - lb.first_part;
        sc.locals.push_back(lb);
        k = m;
      }
      i = j;
      continue;
    }
    // Remote, per transfer class (which sides hold the piece contiguously):
    // a contiguous side sends / receives the piece in place, one p2p op per
    // part, at most kMaxP2pPerSegment parts per segment so a round's NCCL
    // group stays bounded; only strided sides go through staging (pack before
    // the send, unpack after the recv). Each class's bytes are split into
    // segments of equal size (its bytes over the fewest segments that respect
    // the limit), so rounds carry similar amounts.
    for (Filler& F : fill) F.Reset();
    // A side goes in place when the piece is contiguous there and belongs to
    // a run (pieces of this pair back to back in one plan buffer, which the
    // emitter sends as one op) of at least direct_min_bytes.
    const size_t n = j - i;
    cls.assign(n, 0);
    side[0].assign(n, SideRun{});
    side[1].assign(n, SideRun{});
    // The pair's fragments and destination pieces first, in two tight loops:
    // they are scattered (items are in sender order), and these loops keep
    // many of the cache misses in flight where the long loop below would
    // take them one at a time (deepseek-v3: -40 % for this pass).
    frag_of.resize(n);
    dpiece_of.resize(n);
    for (size_t k = 0; k < n; ++k) frag_of[k] = &b.Frag(b.items[i + k].dst_rank, b.items[i + k].frag);
    for (size_t k = 0; k < n; ++k) dpiece_of[k] = &b.dst.ShardOf(b.items[i + k].dst_rank).pieces[frag_of[k]->dst_piece];
    for (size_t k = i; k < j; ++k) {
      const Item& it = b.items[k];
      const Fragment& f = *frag_of[k - i];
      const Piece& sp = b.src.ShardOf(it.src_rank).pieces[it.src_piece];
      const Piece& dp = *dpiece_of[k - i];
      const int32_t ss = b.src.rank_shard[it.src_rank], ds = b.dst.rank_shard[it.dst_rank];
      const auto sr = BoxRegion(0, b.sb.base_of[ss][sp.buffer] + sp.offset, sp.stride, sp.box, f.box, eb);
      const auto dr = BoxRegion(0, b.db.base_of[ds][dp.buffer] + dp.offset, dp.stride, dp.box, f.box, eb);
      if (!sr || !dr) continue;
      if (Contiguous(*sr))
        side[0][k - i] = SideRun{it.src_rank, b.sb.slot_of[ss][sp.buffer], sr->offset_bytes, sr->Bytes(), 0};
      if (Contiguous(*dr))
        side[1][k - i] = SideRun{it.dst_rank, b.db.slot_of[ds][dp.buffer], dr->offset_bytes, dr->Bytes(), 0};
    }
    for (int s = 0; s < 2; ++s) MeasureRuns(side[s], run_order);
    for (size_t k = 0; k < n; ++k) {
      const bool sd = side[0][k].rank >= 0 && side[0][k].run_bytes >= direct_min_bytes;
      const bool rd = side[1][k].rank >= 0 && side[1][k].run_bytes >= direct_min_bytes;
      const uint8_t cl = static_cast<uint8_t>((sd ? 1 : 0) | (rd ? 2 : 0));
      cls[k] = cl;
      fill[cl].elems += frag_of[k]->elems;
      fill[cl].used += cl == 0 || side[cl == 2 ? 1 : 0][k].run_start ? 1 : 0;  // ops per class, for the count below
    }
    // Splitting by class may add at most a quarter more segments (each is a
    // slot in a round; many small pairs, as in MoE plans, would double their
    // rounds): beyond that the pair is staged as one stream, only pieces
    // whose in-place run is at least half a segment keeping their class.
    {
      int64_t pair_elems = 0, split = 0;
      for (int cl = 0; cl < 4; ++cl) {
        pair_elems += fill[cl].elems;
        int64_t segs = (fill[cl].elems + max_elems - 1) / max_elems;
        if (cl != 0) segs = std::max(segs, (fill[cl].used + kMaxP2pPerSegment - 1) / kMaxP2pPerSegment);
        split += segs;
        fill[cl].used = 0;
      }
      const int64_t nseg = (pair_elems + max_elems - 1) / max_elems;
      if (split > nseg + nseg / 4) {
        const int64_t seg_elems = (pair_elems + nseg - 1) / nseg;
        for (Filler& F : fill) F.elems = 0;
        for (size_t k = i; k < j; ++k) {
          const int64_t elems = frag_of[k - i]->elems;
          const SideRun& run = side[cls[k - i] == 2 ? 1 : 0][k - i];
          if (cls[k - i] != 0 && 2 * run.run_bytes < seg_elems * eb) cls[k - i] = 0;
          fill[cls[k - i]].elems += elems;
        }
      }
    }
    for (int cl = 0; cl < 4; ++cl) {
      Filler& F = fill[cl];
      if (F.elems == 0) continue;
      const int64_t nseg = (F.elems + max_elems - 1) / max_elems;
      F.seg_elems = (F.elems + nseg - 1) / nseg;
      F.cur = Seg{sg, dg, 0, 0, 0, (cl & 1) != 0, (cl & 2) != 0, 0};
    }
    auto close = [&](Filler& F) {
      if (F.cur.num_parts > 0) {
        F.cur.bytes = F.used * eb;
        F.segs.push_back(F.cur);
      }
      F.cur.first_part = static_cast<int64_t>(F.parts.size());
      F.cur.num_parts = 0;
      F.used = 0;
      F.ops = 1;
    };
    auto add = [&](Filler& F, const Item& it, const Box& box) {
      if (F.cur.num_parts == 0) F.cur.priority = Priority(b, it.src_rank, it.src_slot);
      F.parts.push_back(Part{box, it.dst_rank, it.frag, it.src_rank, it.src_piece});
      ++F.cur.num_parts;
      F.used += Volume(box);
      if (F.cur.PerPart() && F.ops >= kMaxP2pPerSegment) close(F);
    };
    // Fill order: per class; the in-place classes by their run side's address
    // (send side for 1 and 3, receive side for 2), so runs stay together.
    fill_order.resize(n);
    std::iota(fill_order.begin(), fill_order.end(), size_t{0});
    std::stable_sort(fill_order.begin(), fill_order.end(), [&](size_t x, size_t y) {
      if (cls[x] != cls[y]) return cls[x] < cls[y];
      if (cls[x] == 0) return false;
      const SideRun &a = side[cls[x] == 2 ? 1 : 0][x], &c2 = side[cls[x] == 2 ? 1 : 0][y];
      return std::tie(a.rank, a.slot, a.offset_bytes) < std::tie(c2.rank, c2.slot, c2.offset_bytes);
    });
    for (size_t q : fill_order) {
      const size_t k = i + q;
      const Item& it = b.items[k];
      const Fragment& f = *frag_of[q];
      Filler& F = fill[cls[k - i]];
      if (F.cur.PerPart() && F.cur.num_parts > 0 && side[cls[q] == 2 ? 1 : 0][q].run_start) ++F.ops;
      const int64_t seg_elems = F.seg_elems;
      // Fill the current segment, splitting along the outermost dimension
      // (row-major sub-boxes of a contiguous run stay contiguous).
      todo.assign(1, f.box);
      while (!todo.empty()) {
        Box x = todo.back();
        todo.pop_back();
        while (!Empty(x)) {
          const int64_t vol = Volume(x), cap = seg_elems - F.used;
          if (vol <= cap) {
            add(F, it, x);
            break;
          }
          const int d = OutermostSplitDim(x);
          if (d < 0) {  // a single element that does not fit: next segment
            close(F);
            continue;
          }
          const int64_t unit = vol / (x.hi[d] - x.lo[d]);
          const int64_t k2 = cap / unit;
          if (k2 >= 1) {
            Box head = x;
            head.hi[d] = x.lo[d] + k2;
            add(F, it, head);
            x.lo[d] += k2;
            close(F);
            continue;
          }
          if (F.used > 0) {
            close(F);
            continue;
          }
          // One unit of d exceeds a whole segment: split it unit by unit (in order).
          for (int64_t u = x.hi[d] - 1; u >= x.lo[d]; --u) {
            Box sub = x;
            sub.lo[d] = u, sub.hi[d] = u + 1;
            todo.push_back(sub);
          }
          break;
        }
      }
    }
    for (Filler& F : fill) {
      close(F);
      const int64_t base_part = static_cast<int64_t>(sc.parts.size());
      for (Seg& d : F.segs) {
        d.first_part += base_part;
        sc.segs.push_back(d);
      }
      sc.parts.insert(sc.parts.end(), F.parts.begin(), F.parts.end());
    }
    i = j;
  }

  // Rounds: colour the sender -> receiver multigraph, edges in (priority, pair) order.
  const int32_t gpus = c.Gpus();
  std::vector<int32_t> order(sc.segs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    const Seg &a = sc.segs[x], &bb = sc.segs[y];
    return std::tie(a.priority, a.src_gpu, a.dst_gpu) < std::tie(bb.priority, bb.src_gpu, bb.dst_gpu);
  });
  std::vector<std::pair<int32_t, int32_t>> edges;
  edges.reserve(order.size());
  for (int32_t x : order) edges.emplace_back(sc.segs[x].src_gpu, sc.segs[x].dst_gpu);
  Colouring col = ColourBipartite(gpus, gpus, edges);
  sc.rounds = col.colours;
  for (size_t e = 0; e < order.size(); ++e) sc.segs[order[e]].round = col.colour[e];
  // Within a round keep the pair order; the parts of a segment stay where they are.
  std::stable_sort(sc.segs.begin(), sc.segs.end(), [](const Seg& a, const Seg& bb) {
    return std::tie(a.round, a.src_gpu, a.dst_gpu, a.first_part) < std::tie(bb.round, bb.src_gpu, bb.dst_gpu, bb.first_part);
  });
  std::stable_sort(sc.locals.begin(), sc.locals.end(), [](const LocalBatch& a, const LocalBatch& bb) {
    return std::tie(a.gpu, a.priority, a.src_slot) < std::tie(bb.gpu, bb.priority, bb.src_slot);
  });

  // Peers and the per-port estimate: rounds run one after another, each as
  // long as its slowest transfer; local copies and packing overlap them.
  std::vector<std::vector<int32_t>> peer_list(gpus);
  for (const Seg& g : sc.segs) {
    peer_list[g.src_gpu].push_back(g.dst_gpu);
    peer_list[g.dst_gpu].push_back(g.src_gpu);
  }
  sc.peers.assign(gpus, 0);
  for (int32_t g = 0; g < gpus; ++g) {
    auto& v = peer_list[g];
    std::sort(v.begin(), v.end());
    sc.peers[g] = static_cast<int32_t>(std::unique(v.begin(), v.end()) - v.begin());
  }
  std::vector<double> round_s(sc.rounds, 0);
  std::vector<double> copy_s(gpus, 0);
  const LinkProfile& dc = c.device_copy;
  auto copy_time = [&](int64_t bytes) {
    return dc.bytes_per_s > 0 ? dc.latency_ns * 1e-9 + bytes / (dc.bytes_per_s * dc.Efficiency(bytes)) : 0.0;
  };
  for (const Seg& g : sc.segs) {
    const LinkProfile& lp = c.Link(c.Between(g.src_gpu, g.dst_gpu));
    const double t = lp.latency_ns * 1e-9 + (lp.bytes_per_s > 0 ? g.bytes / (lp.bytes_per_s * lp.Efficiency(g.bytes)) : 0);
    round_s[g.round] = std::max(round_s[g.round], t);
    if (!g.send_direct) copy_s[g.src_gpu] += copy_time(g.bytes);
    if (!g.recv_direct) copy_s[g.dst_gpu] += copy_time(g.bytes);
  }
  for (const LocalBatch& l : sc.locals) copy_s[l.gpu] += copy_time(l.bytes);
  double transfer = std::accumulate(round_s.begin(), round_s.end(), 0.0);
  // The first pack and the last unpack do not overlap anything.
  double edge = 0;
  for (const Seg& g : sc.segs)
    edge = std::max(edge, ((g.send_direct ? 0 : 1) + (g.recv_direct ? 0 : 1)) * copy_time(g.bytes));
  sc.estimate_s = std::max(transfer + edge, *std::max_element(copy_s.begin(), copy_s.end()));
  return sc;
}

// ---- Emission -------------------------------------------------------------------

struct Emitted {
  Plan plan;
  bool fits = true;
  int32_t worst_gpu = -1;
  int64_t missing_bytes = 0;
  std::vector<int64_t> planned_peak;   // per GPU, device memory the plan can reach (with overheads)
  int64_t groups = 0;
  int64_t local_ops = 0;
  int64_t pcie_bytes = 0;
  double pcie_estimate_s = 0;          // the longest host-stream queue (offloads)
};

class Emitter {
 public:
  Emitter(const Base& b, const Schedule& sc, const Policy& pol) : b_(b), sc_(sc), pol_(pol), c_(b.s.cluster) {}

  Emitted Run() {
    const int32_t gpus = c_.Gpus();
    Plan& p = out_.plan;
    p.name = b_.s.name;
    p.cluster = c_;
    p.cluster_fingerprint = c_.Fingerprint();
    p.stream_names = {"compute", "comm", "host", "release"};
    for (const auto& t : b_.s.model.tensors) p.tensors.push_back(PlanTensor{t.name, t.shape, b_.s.dtype});
    gs_.resize(gpus);
    for (int32_t g = 0; g < gpus; ++g) {
      GpuState& st = gs_[g];
      const GpuMemoryAtStart& m = b_.mem[g];
      st.budget = c_.gpu_memory_bytes - m.reserve - m.overheads -
                  static_cast<int64_t>(sc_.peers[g]) * c_.overheads.nccl_bytes_per_peer;
      st.overhead = m.overheads + static_cast<int64_t>(sc_.peers[g]) * c_.overheads.nccl_bytes_per_peer;
    }
    MakeBuffers();
    // The state at the start must fit already (releases cannot help before it).
    for (int32_t g = 0; g < gpus; ++g)
      if (gs_[g].live > gs_[g].budget) gs_[g].missing = std::max(gs_[g].missing, gs_[g].live - gs_[g].budget);
    // Ops: per segment a send and a recv, staged ones a pack and an unpack;
    // plus local copies and about two memory ops per buffer.
    out_.plan.ops.reserve(4 * sc_.segs.size() + sc_.locals.size() + 3 * out_.plan.buffers.size() + 16);
    homes_.reserve(sc_.parts.size());
    // In blocks: the parts' fragments and destination pieces are scattered
    // (parts are in sender order); tight loops that load the fragments and
    // prefetch the pieces keep many of these cache misses in flight, and
    // HomeOf then finds them cached (deepseek-v3: -35 % for this pass).
    constexpr size_t kBlock = 64;
    const Fragment* frag[kBlock];
    for (size_t k0 = 0; k0 < sc_.parts.size(); k0 += kBlock) {
      const size_t k1 = std::min(sc_.parts.size(), k0 + kBlock);
      for (size_t k = k0; k < k1; ++k) frag[k - k0] = &b_.Frag(sc_.parts[k].dst_rank, sc_.parts[k].frag);
      for (size_t k = k0; k < k1; ++k)
        __builtin_prefetch(&b_.dst.ShardOf(sc_.parts[k].dst_rank).pieces[frag[k - k0]->dst_piece]);
      for (size_t k = k0; k < k1; ++k) homes_.push_back(HomeOf(sc_.parts[k]));
    }
    CountReaders();
    Prologue();
    MainLoop();
    Epilogue();
    // Result.
    out_.planned_peak.assign(gpus, 0);
    for (int32_t g = 0; g < gpus; ++g) {
      const GpuState& st = gs_[g];
      out_.planned_peak[g] = st.peak + (st.peak > 0 ? st.overhead : 0);
      if (st.missing > out_.missing_bytes) {
        out_.fits = false;
        out_.missing_bytes = st.missing;
        out_.worst_gpu = g;
      }
      out_.pcie_estimate_s = std::max(out_.pcie_estimate_s, st.host_s);
    }
    return std::move(out_);
  }

 private:
  struct Release {
    int32_t op;        // the free; -1 while pending (Account emits it)
    int64_t bytes;
    int32_t stream;
    int32_t buffer = -1, after = -1;  // pending: the buffer and the op it is freed after
  };
  struct GpuState {
    int64_t live = 0, peak = 0, budget = 0, overhead = 0, missing = 0;
    std::vector<Release> opt_frees, frees;  // optimizer releases (prologue), others in emission order
    size_t opt_used = 0, frees_used = 0;
    int32_t send_slot[2] = {-1, -1}, recv_slot[2] = {-1, -1};
    int32_t slot_last_use_send[2] = {-1, -1}, slot_last_use_recv[2] = {-1, -1};
    int64_t sends = 0, recvs = 0;
    size_t next_local = 0;
    double host_s = 0;
  };

  int32_t AddBuffer(int32_t gpu, MemorySpace space, BufferRole role, int64_t bytes, int32_t layer, bool pre,
                    std::string name) {
    PlanBuffer pb;
    pb.gpu = gpu, pb.space = space, pb.role = role, pb.bytes = bytes, pb.layer = layer, pb.preexisting = pre;
    pb.name = std::move(name);
    return AppendBuffer(out_.plan, std::move(pb));
  }

  int32_t Emit(Op op) { return AppendOp(out_.plan, std::move(op)); }

  static std::string LayerName(int32_t layer) { return layer < 0 ? "emb" : fmt::format("L{}", layer); }

  void MakeBuffers() {
    const Scenario& s = b_.s;
    const int64_t eb = b_.eb;
    Plan& p = out_.plan;
    // Source weights and optimizer state, per (GPU, layer).
    src_buf0_.resize(b_.src.Ranks());
    opt_buf0_.resize(b_.src.Ranks());
    for (int32_t r = 0; r < b_.src.Ranks(); ++r) {
      const int32_t g = s.source_gpus[r], shard = b_.src.rank_shard[r];
      const auto& layers = b_.sb.slot_layer[shard];
      const auto& elems = b_.sb.slot_elems[shard];
      src_buf0_[r] = static_cast<int32_t>(p.buffers.size());
      for (size_t k = 0; k < layers.size(); ++k) {
        AddBuffer(g, MemorySpace::kDevice, BufferRole::kSourceWeights, elems[k] * eb, layers[k], true,
                  fmt::format("src r{} {}", r, LayerName(layers[k])));
        gs_[g].live += elems[k] * eb;
      }
      // Optimizer state split over layers in proportion to their elements.
      const int64_t opt = b_.mem[g].optimizer;
      opt_buf0_[r] = static_cast<int32_t>(p.buffers.size());
      if (opt > 0) {
        const int64_t total = std::accumulate(elems.begin(), elems.end(), int64_t{0});
        int64_t given = 0;
        for (size_t k = 0; k < layers.size(); ++k) {
          const int64_t bytes = k + 1 == layers.size()
                                    ? opt - given
                                    : static_cast<int64_t>(static_cast<long double>(opt) * elems[k] / std::max<int64_t>(1, total));
          given += bytes;
          AddBuffer(g, MemorySpace::kDevice, BufferRole::kOptimizer, bytes, layers[k], true,
                    fmt::format("opt r{} {}", r, LayerName(layers[k])));
          gs_[g].live += bytes;
        }
      }
      if (b_.mem[g].gradients > 0) {
        AddBuffer(g, MemorySpace::kDevice, BufferRole::kGradients, b_.mem[g].gradients, -1, true, fmt::format("grad r{}", r));
        gs_[g].live += b_.mem[g].gradients;
      }
    }
    // KV cache and destination weights.
    std::vector<bool> kv_done(c_.Gpus(), false);
    dst_buf0_.resize(b_.dst.Ranks());
    for (int32_t r = 0; r < b_.dst.Ranks(); ++r) {
      const int32_t g = b_.dst_gpu[r], shard = b_.dst.rank_shard[r];
      if (!kv_done[g] && b_.mem[g].kv_cache > 0) {
        AddBuffer(g, MemorySpace::kDevice, BufferRole::kKvCache, b_.mem[g].kv_cache, -1, true, fmt::format("kv gpu{}", g));
        gs_[g].live += b_.mem[g].kv_cache;
      }
      kv_done[g] = true;
      const auto& layers = b_.db.slot_layer[shard];
      dst_buf0_[r] = static_cast<int32_t>(p.buffers.size());
      for (size_t k = 0; k < layers.size(); ++k)
        AddBuffer(g, MemorySpace::kDevice, BufferRole::kDestinationWeights, b_.db.slot_elems[shard][k] * eb, layers[k],
                  false, fmt::format("dst r{} {}", r, LayerName(layers[k])));
    }
    dst_alloc_.assign(p.buffers.size(), -1);
    for (int32_t g = 0; g < c_.Gpus(); ++g) gs_[g].peak = gs_[g].live;
    // Content: what source buffers hold and destination buffers must hold.
    size_t ns = 0, nd = 0;
    for (int32_t r = 0; r < b_.src.Ranks(); ++r) ns += b_.src.ShardOf(r).pieces.size();
    for (int32_t r = 0; r < b_.dst.Ranks(); ++r) nd += b_.dst.ShardOf(r).pieces.size();
    p.sources.reserve(ns);
    p.destinations.reserve(nd);
    for (int32_t r = 0; r < b_.src.Ranks(); ++r) {
      const int32_t shard = b_.src.rank_shard[r];
      for (const Piece& pc : b_.src.shards[shard].pieces)
        p.sources.push_back(ContentPiece{src_buf0_[r] + b_.sb.slot_of[shard][pc.buffer], pc.tensor, pc.box,
                                         b_.sb.base_of[shard][pc.buffer] + pc.offset, pc.stride});
    }
    for (int32_t r = 0; r < b_.dst.Ranks(); ++r) {
      const int32_t shard = b_.dst.rank_shard[r];
      for (const Piece& pc : b_.dst.shards[shard].pieces)
        p.destinations.push_back(ContentPiece{dst_buf0_[r] + b_.db.slot_of[shard][pc.buffer], pc.tensor, pc.box,
                                              b_.db.base_of[shard][pc.buffer] + pc.offset, pc.stride});
    }
  }

  // Where a part lives on both sides.
  struct Home {
    const Piece* sp;
    const Piece* dp;
    int32_t sbuf, dbuf;
    int64_t soff, doff;  // elements: position of the piece's box.lo in its plan buffer
    bool simple = false; // both sides are one region each (then sr, dr hold them)
    Region sr, dr;
  };
  Home HomeOf(const Part& pt) const {
    const int32_t sshard = b_.src.rank_shard[pt.src_rank];
    const int32_t dshard = b_.dst.rank_shard[pt.dst_rank];
    const Fragment& f = b_.ts.shard_fragments[dshard][pt.frag];
    Home h;
    h.sp = &b_.src.shards[sshard].pieces[pt.src_piece];
    h.dp = &b_.dst.shards[dshard].pieces[f.dst_piece];
    h.sbuf = src_buf0_[pt.src_rank] + b_.sb.slot_of[sshard][h.sp->buffer];
    h.dbuf = dst_buf0_[pt.dst_rank] + b_.db.slot_of[dshard][h.dp->buffer];
    h.soff = b_.sb.base_of[sshard][h.sp->buffer] + h.sp->offset;
    h.doff = b_.db.base_of[dshard][h.dp->buffer] + h.dp->offset;
    auto sr = BoxRegion(h.sbuf, h.soff, h.sp->stride, h.sp->box, pt.box, b_.eb);
    auto dr = BoxRegion(h.dbuf, h.doff, h.dp->stride, h.dp->box, pt.box, b_.eb);
    if (sr && dr) h.simple = true, h.sr = *sr, h.dr = *dr;
    return h;
  }
  // Copy pairs of `part` between its home buffer and a contiguous staging run
  // at `*stage_off` (stage_buf < 0: straight from source to destination);
  // parts whose regions need more than three levels are split. Returns the
  // part's home buffers.
  Home PartCopies(int64_t part, int32_t stage_buf, int64_t* stage_off, bool pack, std::vector<CopyPair>& out) const {
    const Part& pt = sc_.parts[part];
    const Home& h = homes_[part];
    auto emit = [&](const Region& sr, const Region& dr) {
      if (stage_buf < 0) {
        out.push_back(CopyPair{sr, dr});
        return;
      }
      const Region& home = pack ? sr : dr;
      Region st = ContiguousRegion(stage_buf, *stage_off, home.Bytes());
      *stage_off += home.Bytes();
      out.push_back(pack ? CopyPair{home, st} : CopyPair{st, home});
    };
    if (h.simple) {
      emit(h.sr, h.dr);
      return h;
    }
    std::optional<Region> sr, dr;
    std::vector<Box> todo{pt.box};  // rare: split along the outermost dimension, row-major order
    while (!todo.empty()) {
      Box x = todo.back();
      todo.pop_back();
      sr = BoxRegion(h.sbuf, h.soff, h.sp->stride, h.sp->box, x, b_.eb);
      dr = BoxRegion(h.dbuf, h.doff, h.dp->stride, h.dp->box, x, b_.eb);
      if (sr && dr) {
        emit(*sr, *dr);
        continue;
      }
      const int d = OutermostSplitDim(x);
      for (int64_t u = x.hi[d] - 1; u >= x.lo[d]; --u) {
        Box sub = x;
        sub.lo[d] = u, sub.hi[d] = u + 1;
        todo.push_back(sub);
      }
    }
    return h;
  }

  // Per source buffer: number of ops still to read it; at zero it may move to host.
  void CountReaders() {
    readers_.assign(out_.plan.buffers.size(), 0);
    if (!pol_.source_to_host) return;  // only releases need them
    std::vector<int32_t> seen;
    auto count_parts = [&](int64_t first, int64_t n) {
      seen.clear();
      for (int64_t i = first; i < first + n; ++i) seen.push_back(homes_[i].sbuf);
      std::sort(seen.begin(), seen.end());
      seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
      for (int32_t x : seen) ++readers_[x];
    };
    for (const Seg& g : sc_.segs) count_parts(g.first_part, g.num_parts);
    for (const LocalBatch& l : sc_.locals) count_parts(l.first_part, l.num_parts);
  }

  // The free of a pending release, on `stream` (after the move it waits for).
  int32_t EmitRelease(Release& r, int32_t stream) {
    if (r.op >= 0) return r.op;
    Op f;
    f.kind = OpKind::kFree, f.gpu = out_.plan.buffers[r.buffer].gpu, f.stream = stream, f.buffer = r.buffer;
    f.deps = {r.after};
    f.label = "free " + out_.plan.buffers[r.buffer].name;
    r.op = Emit(std::move(f));
    r.stream = stream;
    return r.op;
  }

  // A device allocation of `bytes` on `gpu` and `stream`: waits for enough
  // releases to fit. A release moved to host is freed on the allocating
  // stream, right before the allocation that needs its room: the executor's
  // stream-ordered pool reuses a block freed on another stream only once
  // that stream's queue is done (qwen3 on 2x H200: an allocation waited
  // 400 ms for the whole optimizer offload queued on the host stream).
  void Account(int32_t gpu, int64_t bytes, std::vector<int32_t>& deps, int32_t stream) {
    GpuState& st = gs_[gpu];
    int32_t last_other = -1, last_opt = -1;
    while (st.live + bytes > st.budget && st.frees_used < st.frees.size()) {
      st.live -= st.frees[st.frees_used].bytes;
      last_other = EmitRelease(st.frees[st.frees_used++], stream);
    }
    while (st.live + bytes > st.budget && st.opt_used < st.opt_frees.size()) {
      st.live -= st.opt_frees[st.opt_used].bytes;
      last_opt = EmitRelease(st.opt_frees[st.opt_used++], stream);
    }
    // Releases on one stream finish in order: depending on the last is enough.
    // Other-stream frees may be on two streams (release / compute).
    if (last_other >= 0) {
      deps.push_back(last_other);
      // Also the latest earlier release on each other stream.
      int32_t other_stream = out_.plan.ops[last_other].stream;
      for (size_t k = st.frees_used; k-- > 0;)
        if (out_.plan.ops[st.frees[k].op].stream != other_stream) {
          deps.push_back(st.frees[k].op);
          break;
        }
    }
    if (last_opt >= 0) deps.push_back(last_opt);
    st.live += bytes;
    if (st.live > st.budget) st.missing = std::max(st.missing, st.live - st.budget);
    st.peak = std::max(st.peak, st.live);
  }

  int32_t Alloc(int32_t gpu, int32_t buffer, int32_t stream) {
    Op op;
    op.kind = OpKind::kAlloc, op.gpu = gpu, op.stream = stream, op.buffer = buffer;
    Account(gpu, out_.plan.buffers[buffer].bytes, op.deps, stream);
    op.label = "alloc " + out_.plan.buffers[buffer].name;
    return Emit(std::move(op));
  }

  void RecordFree(int32_t gpu, int32_t op, int64_t bytes, bool optimizer) {
    auto& v = optimizer ? gs_[gpu].opt_frees : gs_[gpu].frees;
    v.push_back(Release{op, bytes, out_.plan.ops[op].stream});
  }

  // Device -> host move of a buffer on `stream`, then its free.
  void MoveToHost(int32_t buffer, int32_t stream, std::vector<int32_t> deps, bool optimizer) {
    const PlanBuffer pb = out_.plan.buffers[buffer];
    const int32_t host = AddBuffer(pb.gpu, MemorySpace::kHost, BufferRole::kHost, pb.bytes, pb.layer, false,
                                   "host " + pb.name);
    Op a;
    a.kind = OpKind::kAlloc, a.gpu = pb.gpu, a.stream = stream, a.buffer = host, a.label = "alloc host " + pb.name;
    const int32_t aid = Emit(std::move(a));
    Op o;
    o.kind = OpKind::kOffload, o.gpu = pb.gpu, o.stream = stream, o.deps = std::move(deps);
    o.deps.push_back(aid);
    o.copies.push_back(CopyPair{ContiguousRegion(buffer, 0, pb.bytes), ContiguousRegion(host, 0, pb.bytes)});
    o.label = "offload " + pb.name;
    const int32_t oid = Emit(std::move(o));
    // The free is emitted by the allocation that needs the room (Account),
    // or at the end (Epilogue).
    auto& v = optimizer ? gs_[pb.gpu].opt_frees : gs_[pb.gpu].frees;
    v.push_back(Release{-1, pb.bytes, stream, buffer, oid});
    out_.pcie_bytes += pb.bytes;
    const LinkProfile& l = c_.pcie;
    if (l.bytes_per_s > 0) gs_[pb.gpu].host_s += l.latency_ns * 1e-9 + pb.bytes / (l.bytes_per_s * l.Efficiency(pb.bytes));
  }

  // Reads of source buffers by op `op_id` are done: release buffers with no reader left.
  void ReadDone(const std::vector<int32_t>& bufs, int32_t op_id) {
    if (!pol_.source_to_host) return;
    for (int32_t buf : bufs) {
      last_read_[buf].push_back(op_id);
      if (--readers_[buf] == 0) MoveToHost(buf, kStreamRelease, last_read_[buf], false);
    }
  }

  // Every destination buffer not allocated yet. Dest-all-at-once calls it
  // right after the first round: the first transfers are issued after a few
  // allocations instead of all of them (host issue ~4 us per allocation, 68 on
  // 2x H200: 0.3 ms before the first transfer).
  void AllocAllDest() {
    for (int32_t r = 0; r < b_.dst.Ranks(); ++r) {
      const int32_t n = static_cast<int32_t>(b_.db.slot_layer[b_.dst.rank_shard[r]].size());
      for (int32_t k = 0; k < n; ++k)
        if (dst_alloc_[dst_buf0_[r] + k] < 0)
          dst_alloc_[dst_buf0_[r] + k] = Alloc(b_.dst_gpu[r], dst_buf0_[r] + k, kStreamCompute);
    }
  }

  void EnsureDest(int32_t buffer, std::vector<int32_t>& deps) {
    if (dst_alloc_[buffer] < 0) dst_alloc_[buffer] = Alloc(out_.plan.buffers[buffer].gpu, buffer, kStreamCompute);
    deps.push_back(dst_alloc_[buffer]);
  }

  void Prologue() {
    const Scenario& s = b_.s;
    last_read_.assign(out_.plan.buffers.size(), {});
    // Optimizer offload: the first fraction of each GPU's optimizer bytes, layer order.
    if (pol_.offload_fraction > 0) {
      for (int32_t r = 0; r < b_.src.Ranks(); ++r) {
        const int32_t g = s.source_gpus[r];
        const int32_t n = static_cast<int32_t>(b_.sb.slot_layer[b_.src.rank_shard[r]].size());
        if (b_.mem[g].optimizer <= 0) continue;
        const double goal = pol_.offload_fraction * static_cast<double>(b_.mem[g].optimizer);
        int64_t done = 0;
        for (int32_t k = 0; k < n && done < goal - 0.5; ++k) {
          const int32_t buf = opt_buf0_[r] + k;
          done += out_.plan.buffers[buf].bytes;
          MoveToHost(buf, kStreamHost, {}, true);
        }
      }
    }
    // Source buffers nobody reads.
    if (pol_.source_to_host)
      for (int32_t r = 0; r < b_.src.Ranks(); ++r) {
        const int32_t n = static_cast<int32_t>(b_.sb.slot_layer[b_.src.rank_shard[r]].size());
        for (int32_t k = 0; k < n; ++k)
          if (readers_[src_buf0_[r] + k] == 0) MoveToHost(src_buf0_[r] + k, kStreamRelease, {}, false);
      }
    // Per GPU: its sends and receives in round order.
    const int32_t gpus = c_.Gpus();
    sends_of_.assign(gpus, {});
    recvs_of_.assign(gpus, {});
    for (size_t i = 0; i < sc_.segs.size(); ++i) {
      sends_of_[sc_.segs[i].src_gpu].push_back(static_cast<int32_t>(i));
      recvs_of_[sc_.segs[i].dst_gpu].push_back(static_cast<int32_t>(i));
    }
    pack_op_.assign(sc_.segs.size(), -1);
    send_op_.assign(sc_.segs.size(), {});
    recv_op_.assign(sc_.segs.size(), {});
    unpack_op_.assign(sc_.segs.size(), -1);
    send_index_.assign(sc_.segs.size(), -1);
    recv_index_.assign(sc_.segs.size(), -1);
    // Staged sends / receives of each GPU in round order: slot k % n; the
    // previous user of a slot is the staged transfer n before (n slots).
    staged_sends_.assign(gpus, {});
    staged_recvs_.assign(gpus, {});
    for (size_t i = 0; i < sc_.segs.size(); ++i) {
      const Seg& sg = sc_.segs[i];
      if (!sg.send_direct) {
        send_index_[i] = static_cast<int32_t>(staged_sends_[sg.src_gpu].size());
        staged_sends_[sg.src_gpu].push_back(static_cast<int32_t>(i));
      }
      if (!sg.recv_direct) {
        recv_index_[i] = static_cast<int32_t>(staged_recvs_[sg.dst_gpu].size());
        staged_recvs_[sg.dst_gpu].push_back(static_cast<int32_t>(i));
      }
    }
    next_pack_.assign(gpus, 0);
    local_begin_.assign(gpus, 0);
    local_end_.assign(gpus, 0);
    for (size_t i = 0; i < sc_.locals.size(); ++i) {
      const int32_t g = sc_.locals[i].gpu;
      if (local_end_[g] == 0) local_begin_[g] = static_cast<int32_t>(i);
      local_end_[g] = static_cast<int32_t>(i) + 1;
    }
    for (int32_t g = 0; g < gpus; ++g) gs_[g].next_local = local_begin_[g];
    // Slots: two per direction (the next pack / previous unpack overlaps the
    // current transfer) when a GPU stages one direction only; one each when it
    // stages both, so staging stays within two segments per GPU.
    send_slots_.assign(gpus, 2);
    recv_slots_.assign(gpus, 2);
    for (int32_t g = 0; g < gpus; ++g)
      if (!staged_sends_[g].empty() && !staged_recvs_[g].empty()) send_slots_[g] = recv_slots_[g] = 1;
    // Staging slot sizes: the largest staged segment each GPU sends / receives.
    send_slot_bytes_.assign(gpus, 0);
    recv_slot_bytes_.assign(gpus, 0);
    for (const Seg& sg : sc_.segs) {
      if (!sg.send_direct) send_slot_bytes_[sg.src_gpu] = std::max(send_slot_bytes_[sg.src_gpu], sg.bytes);
      if (!sg.recv_direct) recv_slot_bytes_[sg.dst_gpu] = std::max(recv_slot_bytes_[sg.dst_gpu], sg.bytes);
    }
  }

  int32_t StagingSlot(int32_t gpu, bool send, int32_t k) {
    GpuState& st = gs_[gpu];
    int32_t* slot = send ? st.send_slot : st.recv_slot;
    if (slot[k] < 0) {
      const int64_t bytes = send ? send_slot_bytes_[gpu] : recv_slot_bytes_[gpu];
      slot[k] = AddBuffer(gpu, MemorySpace::kDevice, BufferRole::kStaging, bytes, -1, false,
                          fmt::format("{} stage{} gpu{}", send ? "send" : "recv", k, gpu));
      dst_alloc_.resize(out_.plan.buffers.size(), -1);
      readers_.resize(out_.plan.buffers.size(), 0);
      last_read_.resize(out_.plan.buffers.size());
      // A receive slot is allocated on the comm stream, just before its first
      // transfer: on the compute stream it would wait behind the local copies
      // emitted meanwhile and hold the transfer back.
      dst_alloc_[slot[k]] = Alloc(gpu, slot[k], send ? kStreamCompute : kStreamComm);
    }
    return slot[k];
  }

  void EmitPack(int32_t seg_id) {
    const Seg& sg = sc_.segs[seg_id];
    const int32_t g = sg.src_gpu;
    const int32_t k = send_index_[seg_id];
    Op op;
    op.kind = OpKind::kCopy, op.gpu = g, op.stream = kStreamCompute, op.segment = seg_id;
    const int32_t n = send_slots_[g];
    const int32_t slot = StagingSlot(g, true, k % n);
    op.deps.push_back(dst_alloc_[slot]);
    // The slot is free once the send that used it two sends ago is done.
    if (k >= n) {
      const auto& prev = send_op_[staged_sends_[g][k - n]];
      op.deps.insert(op.deps.end(), prev.begin(), prev.end());
    }
    int64_t off = 0;
    std::vector<int32_t> bufs;
    op.copies.reserve(sg.num_parts);
    for (int64_t i = sg.first_part; i < sg.first_part + sg.num_parts; ++i)
      bufs.push_back(PartCopies(i, slot, &off, true, op.copies).sbuf);
    op.label = fmt::format("pack s{}", seg_id);
    pack_op_[seg_id] = Emit(std::move(op));
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    ReadDone(bufs, pack_op_[seg_id]);
  }

  void EmitLocal(const LocalBatch& lb) {
    Op op;
    op.kind = OpKind::kCopy, op.gpu = lb.gpu, op.stream = kStreamCompute;
    std::vector<int32_t> bufs;
    op.copies.reserve(lb.num_parts);
    for (int64_t i = lb.first_part; i < lb.first_part + lb.num_parts; ++i) {
      int64_t unused = 0;
      const Home h = PartCopies(i, -1, &unused, true, op.copies);
      EnsureDest(h.dbuf, op.deps);
      bufs.push_back(h.sbuf);
    }
    op.label = fmt::format("local copy gpu{} r{} slot {}", lb.gpu, lb.src_rank, lb.src_slot);
    const int32_t id = Emit(std::move(op));
    ++out_.local_ops;
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    ReadDone(bufs, id);
  }

  // A matched send / recv of segment `seg`.
  void EmitPair(int32_t seg, Op send, Op recv) {
    const int32_t sid = Emit(std::move(send));
    const int32_t rid = Emit(std::move(recv));
    out_.plan.ops[sid].match = rid;
    out_.plan.ops[rid].match = sid;
    send_op_[seg].push_back(sid);
    recv_op_[seg].push_back(rid);
  }

  // One send / recv per part: from / into the part's home where that side is
  // contiguous, else from / into the staging slot at the part's packed offset.
  // `send` / `recv` carry the fields common to all parts.
  void EmitPerPart(int32_t i, const Op& send0, const Op& recv0) {
    const Seg& sg = sc_.segs[i];
    const int32_t sslot = sg.send_direct ? -1 : gs_[sg.src_gpu].send_slot[send_index_[i] % send_slots_[sg.src_gpu]];
    std::vector<int32_t> rdeps;
    int32_t rslot = -1;
    if (!sg.recv_direct) {
      const int32_t kr = recv_index_[i];
      const int32_t n = recv_slots_[sg.dst_gpu];
      rslot = StagingSlot(sg.dst_gpu, false, kr % n);
      rdeps.push_back(dst_alloc_[rslot]);
      if (kr >= n) rdeps.push_back(unpack_op_[staged_recvs_[sg.dst_gpu][kr - n]]);
    }
    std::vector<std::pair<int32_t, int32_t>> reads;  // (source buffer, send op) read in place
    int64_t off = 0;
    // Parts back to back on every in-place side (staged sides always are)
    // travel as one op: a layer's whole shard is one send, not one per tensor.
    Op send, recv;
    int32_t sbuf = -1, ops = 0;
    auto flush = [&] {
      if (send.region.buffer < 0) return;
      send.label = fmt::format("send s{}.{}", i, ops);
      recv.label = fmt::format("recv s{}.{}", i, ops);
      ++ops;
      EmitPair(i, std::move(send), std::move(recv));
      if (sg.send_direct) reads.emplace_back(sbuf, send_op_[i].back());
      send.region.buffer = -1;
    };
    send.region.buffer = -1;
    for (int64_t k = sg.first_part; k < sg.first_part + sg.num_parts; ++k) {
      const Home& h = homes_[k];
      RESHARD_CHECK(h.simple && (!sg.send_direct || h.sr.Contiguous()) && (!sg.recv_direct || h.dr.Contiguous()),
                    "an in-place transfer needs a contiguous region on that side");
      const int64_t bytes = h.sr.Bytes();
      auto follows = [](const Region& run, const Region& next) {
        return run.buffer == next.buffer && run.offset_bytes + run.Bytes() == next.offset_bytes;
      };
      if (send.region.buffer >= 0 && (!sg.send_direct || follows(send.region, h.sr)) &&
          (!sg.recv_direct || follows(recv.region, h.dr))) {
        send.region = ContiguousRegion(send.region.buffer, send.region.offset_bytes, send.region.Bytes() + bytes);
        recv.region = ContiguousRegion(recv.region.buffer, recv.region.offset_bytes, recv.region.Bytes() + bytes);
        off += bytes;  // an in-place receive side stays in the same (allocated) buffer
        continue;
      }
      flush();
      send = send0, recv = recv0;
      sbuf = h.sbuf;
      if (sg.send_direct) {
        send.region = ContiguousRegion(h.sr.buffer, h.sr.offset_bytes, bytes);
      } else {
        send.region = ContiguousRegion(sslot, off, bytes);
        send.deps.push_back(pack_op_[i]);
      }
      if (sg.recv_direct) {
        recv.region = ContiguousRegion(h.dr.buffer, h.dr.offset_bytes, bytes);
        EnsureDest(h.dbuf, recv.deps);
      } else {
        recv.region = ContiguousRegion(rslot, off, bytes);
        recv.deps = rdeps;
      }
      off += bytes;
    }
    flush();
    if (!pol_.source_to_host || reads.empty()) return;
    // Each source buffer read in place is done after its last send here.
    std::stable_sort(reads.begin(), reads.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t a = 0; a < reads.size();) {
      size_t e = a;
      while (e < reads.size() && reads[e].first == reads[a].first) ++e;
      for (size_t q = a; q + 1 < e; ++q) last_read_[reads[q].first].push_back(reads[q].second);
      ReadDone({reads[a].first}, reads[e - 1].second);
      a = e;
    }
  }

  void MainLoop() {
    const int32_t gpus = c_.Gpus();
    const int32_t R = sc_.rounds;
    // Round r's segments: [round_begin[r], round_begin[r+1]).
    std::vector<int32_t> round_begin(R + 1, 0);
    for (const Seg& sg : sc_.segs) ++round_begin[sg.round + 1];
    for (int32_t r = 0; r < R; ++r) round_begin[r + 1] += round_begin[r];
    auto pack_upto = [&](int32_t g, int32_t max_round) {
      auto& v = sends_of_[g];
      while (next_pack_[g] < static_cast<int32_t>(v.size()) && sc_.segs[v[next_pack_[g]]].round <= max_round) {
        const int32_t id = v[next_pack_[g]++];
        if (!sc_.segs[id].send_direct) EmitPack(id);
      }
    };
    auto locals_upto = [&](int32_t g, int32_t priority) {
      GpuState& st = gs_[g];
      while (st.next_local < static_cast<size_t>(local_end_[g]) && sc_.locals[st.next_local].priority <= priority)
        EmitLocal(sc_.locals[st.next_local++]);
    };
    for (int32_t g = 0; g < gpus; ++g) pack_upto(g, 0);
    std::vector<int32_t> parent(gpus);
    for (int32_t r = 0; r < R; ++r) {
      // Local copies run kLocalLeadRounds ahead of the transfers whose
      // priority they share: the compute stream is FIFO, so copies left for
      // the last rounds queued behind their unpacks and ran after the last
      // transfer (0.5 ms of 25 on 2x H200). Not when training weights move to
      // host as they are read: an early copy's allocation could then wait for
      // a release that follows a send of this round's group (a deadlock).
      const int32_t rl = std::min(r + (pol_.source_to_host ? 0 : kLocalLeadRounds), R - 1);
      const int32_t prio = R <= 1 ? 1023 : static_cast<int32_t>(static_cast<int64_t>(rl) * 1023 / (R - 1));
      for (int32_t g = 0; g < gpus; ++g) {
        // With two send slots, pack one round ahead; with one, the slot is
        // free only after this round's send (emitted below).
        pack_upto(g, r + send_slots_[g] - 1);
        locals_upto(g, prio);
      }
      const int32_t b0 = round_begin[r], b1 = round_begin[r + 1];
      // Receive slots first used in this round: allocated on the comm stream
      // before the round's group (inside it, an alloc would split the group).
      for (int32_t i = b0; i < b1; ++i) {
        const Seg& sg = sc_.segs[i];
        if (!sg.recv_direct) StagingSlot(sg.dst_gpu, false, recv_index_[i] % recv_slots_[sg.dst_gpu]);
      }
      // Groups: connected components of this round's transfers.
      for (int32_t i = b0; i < b1; ++i) parent[sc_.segs[i].src_gpu] = sc_.segs[i].src_gpu, parent[sc_.segs[i].dst_gpu] = sc_.segs[i].dst_gpu;
      auto find = [&](int32_t x) {
        while (parent[x] != x) x = parent[x] = parent[parent[x]];
        return x;
      };
      for (int32_t i = b0; i < b1; ++i) {
        const int32_t a = find(sc_.segs[i].src_gpu), bb = find(sc_.segs[i].dst_gpu);
        if (a != bb) parent[std::max(a, bb)] = std::min(a, bb);
      }
      std::map<int32_t, int32_t> group_of_root;
      for (int32_t i = b0; i < b1; ++i) {
        const Seg& sg = sc_.segs[i];
        auto [it, fresh] = group_of_root.try_emplace(find(sg.src_gpu), next_group_);
        if (fresh) ++next_group_;
        const int32_t group = it->second;
        // Send.
        Op send;
        send.kind = OpKind::kSend, send.gpu = sg.src_gpu, send.stream = kStreamComm, send.group = group;
        send.peer = sg.dst_gpu, send.segment = i;
        Op recv;
        recv.kind = OpKind::kRecv, recv.gpu = sg.dst_gpu, recv.stream = kStreamComm, recv.group = group;
        recv.peer = sg.src_gpu, recv.segment = i;
        if (sg.PerPart()) {
          EmitPerPart(i, send, recv);
          continue;
        }
        const int32_t ks = send_index_[i], kr = recv_index_[i];
        const int32_t ns = send_slots_[sg.src_gpu], nr = recv_slots_[sg.dst_gpu];
        send.region = ContiguousRegion(gs_[sg.src_gpu].send_slot[ks % ns], 0, sg.bytes);
        send.deps.push_back(pack_op_[i]);
        const int32_t slot = StagingSlot(sg.dst_gpu, false, kr % nr);
        recv.region = ContiguousRegion(slot, 0, sg.bytes);
        recv.deps.push_back(dst_alloc_[slot]);
        if (kr >= nr) recv.deps.push_back(unpack_op_[staged_recvs_[sg.dst_gpu][kr - nr]]);
        send.label = fmt::format("send s{}", i);
        recv.label = fmt::format("recv s{}", i);
        EmitPair(i, std::move(send), std::move(recv));
      }
      // Unpacks.
      for (int32_t i = b0; i < b1; ++i) {
        const Seg& sg = sc_.segs[i];
        if (sg.recv_direct) continue;
        Op op;
        op.kind = OpKind::kCopy, op.gpu = sg.dst_gpu, op.stream = kStreamCompute, op.segment = i;
        const int32_t slot = gs_[sg.dst_gpu].recv_slot[recv_index_[i] % recv_slots_[sg.dst_gpu]];
        int64_t off = 0;
        op.copies.reserve(sg.num_parts);
        for (int64_t k = sg.first_part; k < sg.first_part + sg.num_parts; ++k)
          EnsureDest(PartCopies(k, slot, &off, false, op.copies).dbuf, op.deps);
        op.deps.insert(op.deps.end(), recv_op_[i].begin(), recv_op_[i].end());
        op.label = fmt::format("unpack s{}", i);
        unpack_op_[i] = Emit(std::move(op));
      }
      if (r == 0 && !pol_.dest_per_layer) AllocAllDest();
    }
    // Local copies not yet emitted (plans without rounds, or late priorities).
    for (int32_t g = 0; g < gpus; ++g) locals_upto(g, INT32_MAX);
  }

  void Epilogue() {
    // Free staging after its last use; destination buffers never written are
    // still allocated (they may hold nothing, e.g. padding-free layouts).
    AllocAllDest();
    const int32_t gpus = c_.Gpus();
    for (int32_t g = 0; g < gpus; ++g) {
      for (bool send : {true, false}) {
        const auto& list = send ? sends_of_[g] : recvs_of_[g];
        for (int32_t k = 0; k < 2; ++k) {
          const int32_t slot = send ? gs_[g].send_slot[k] : gs_[g].recv_slot[k];
          if (slot < 0) continue;
          Op f;
          f.kind = OpKind::kFree, f.gpu = g, f.stream = kStreamCompute, f.buffer = slot;
          // Last staged use of this slot.
          for (int32_t idx = static_cast<int32_t>(list.size()) - 1; idx >= 0; --idx) {
            const int32_t seg = list[idx];
            const int32_t kk = send ? send_index_[seg] : recv_index_[seg];
            if (kk < 0 || kk % (send ? send_slots_[g] : recv_slots_[g]) != k) continue;  // in place, or another slot
            if (send) f.deps.insert(f.deps.end(), send_op_[seg].begin(), send_op_[seg].end());
            else f.deps.push_back(unpack_op_[seg]);
            break;
          }
          f.label = "free " + out_.plan.buffers[slot].name;
          const int32_t fid = Emit(std::move(f));
          RecordFree(g, fid, out_.plan.buffers[slot].bytes, false);
        }
      }
    }
    // Releases no allocation needed: freed on their own stream.
    for (GpuState& st : gs_) {
      for (Release& r : st.frees) EmitRelease(r, r.stream);
      for (Release& r : st.opt_frees) EmitRelease(r, r.stream);
    }
    out_.groups = next_group_;
  }

  const Base& b_;
  const Schedule& sc_;
  const Policy& pol_;
  const Cluster& c_;
  Emitted out_;
  std::vector<GpuState> gs_;
  ScratchVector<Home> homes_;  // per part, computed once (the lookups are cache misses)
  std::vector<int32_t> src_buf0_, opt_buf0_, dst_buf0_;
  std::vector<int32_t> dst_alloc_;         // per buffer: its alloc op (destination weights, staging)
  std::vector<int32_t> readers_;           // per buffer: ops still to read it (source weights)
  std::vector<std::vector<int32_t>> last_read_;
  std::vector<std::vector<int32_t>> sends_of_, recvs_of_, staged_sends_, staged_recvs_;
  std::vector<int32_t> pack_op_, unpack_op_, send_index_, recv_index_;
  std::vector<std::vector<int32_t>> send_op_, recv_op_;  // per segment: its sends / recvs in order
  std::vector<int32_t> next_pack_, local_begin_, local_end_;
  std::vector<int64_t> send_slot_bytes_, recv_slot_bytes_;
  std::vector<int32_t> send_slots_, recv_slots_;  // per GPU: staging slots per direction (1 or 2)
  int32_t next_group_ = 0;
};

// ---- Candidates --------------------------------------------------------------------

std::vector<Policy> Policies(const Scenario& s, const PlannerOptions& o) {
  std::vector<double> fractions;
  if (o.offload_fraction) {
    fractions = {*o.offload_fraction};
  } else {
    switch (s.memory.optimizer.offload) {
      case OffloadMode::kNone: fractions = {0}; break;
      case OffloadMode::kAll: fractions = {1}; break;
      case OffloadMode::kFraction: fractions = {s.memory.optimizer.fraction}; break;
      case OffloadMode::kAuto: fractions = {0, 0.25, 0.5, 0.75, 1}; break;
    }
  }
  std::vector<bool> per_layer = o.destination_per_layer ? std::vector<bool>{*o.destination_per_layer}
                                                        : std::vector<bool>{false, true};
  std::vector<bool> to_host = o.source_to_host ? std::vector<bool>{*o.source_to_host} : std::vector<bool>{false, true};
  // Fastest first: no offload, then the cheap memory savers, then more offload.
  std::vector<Policy> out;
  for (double f : fractions)
    for (bool th : to_host)
      for (bool pl : per_layer) out.push_back(Policy{f, pl, th});
  return out;
}

// Round-model estimate of a segment size from the (sender, receiver) byte
// totals: Δ rounds (König: the most segments one GPU sends or receives), each
// as long as the slowest segment (latency + bytes at the efficiency of its
// size), plus the first pack and last unpack. O(pairs).
double QuickEstimate(const Base& b, int64_t seg_bytes) {
  const Cluster& c = b.s.cluster;
  const int32_t gpus = c.Gpus();
  std::vector<int64_t> out(gpus, 0), in(gpus, 0);
  int64_t largest = 0;
  double round_s = 0;
  for (const auto& pb : b.pairs) {
    if (pb.src_gpu == pb.dst_gpu) continue;
    const int64_t nseg = (pb.bytes + seg_bytes - 1) / seg_bytes;
    const int64_t each = (pb.bytes + nseg - 1) / nseg;
    out[pb.src_gpu] += nseg;
    in[pb.dst_gpu] += nseg;
    largest = std::max(largest, each);
    const LinkProfile& lp = c.Link(c.Between(pb.src_gpu, pb.dst_gpu));
    if (lp.bytes_per_s > 0)
      round_s = std::max(round_s, lp.latency_ns * 1e-9 + each / (lp.bytes_per_s * lp.Efficiency(each)));
  }
  int64_t delta = 0;
  for (int32_t g = 0; g < gpus; ++g) delta = std::max({delta, out[g], in[g]});
  double t = static_cast<double>(delta) * round_s;
  const LinkProfile& dc = c.device_copy;
  if (dc.bytes_per_s > 0 && largest > 0) t += 2 * (dc.latency_ns * 1e-9 + largest / (dc.bytes_per_s * dc.Efficiency(largest)));
  return t;
}

}  // namespace

constexpr double kSizeTolerance = 1.15;
constexpr int64_t kDefaultDirectMinBytes = int64_t{64} << 20;

PlanResult MakePlan(const Scenario& s, const PlannerOptions& options) {
  if (s.destination_dtype != s.dtype)
    throw InputError(s.path, "destination.dtype",
                     fmt::format("the planner moves {} weights as they are; converting to {} during the refit is "
                                 "not supported yet",
                                 DTypeName(s.dtype), DTypeName(s.destination_dtype)));
  Base base(s);
  BuildBase(base);

  int64_t seg = options.segment_bytes > 0 ? options.segment_bytes : s.plan.segment_bytes;
  std::vector<int64_t> sizes;
  if (seg > 0) {
    sizes = {seg};
  } else if (!options.segment_candidates.empty()) {
    sizes = options.segment_candidates;
  } else {
    for (int64_t x = int64_t{4} << 20; x <= int64_t{1} << 30; x *= 2) sizes.push_back(x);
  }
  // Segment sizes in the order they are tried. Small plans: every size is
  // built and simulated, the fastest kept. Large plans: the round estimate
  // from pair totals ranks the sizes (no schedule built); the largest size
  // within 15% of the best estimate is tried (the estimate is coarse, and
  // fewer, larger segments mean far fewer ops and less per-op risk).
  std::vector<double> quick(sizes.size());
  for (size_t i = 0; i < sizes.size(); ++i) quick[i] = QuickEstimate(base, sizes[i]);
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), 0);
  // Ties keep the first candidate tried: larger segments first (fewer ops).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  const bool small = options.simulate && base.fragments <= options.simulate_max_fragments;
  if (!small && sizes.size() > 1) {
    // Bound the plan's size: sizes whose segment count exceeds the cap only
    // compete when no size meets it.
    std::vector<int64_t> count(sizes.size(), 0);
    for (size_t i = 0; i < sizes.size(); ++i)
      for (const auto& pb : base.pairs)
        if (pb.src_gpu != pb.dst_gpu) count[i] += (pb.bytes + sizes[i] - 1) / sizes[i];
    const bool any_under = std::any_of(count.begin(), count.end(), [&](int64_t n) { return n <= options.max_segments; });
    for (size_t i = 0; i < sizes.size(); ++i)
      if (any_under && count[i] > options.max_segments) quick[i] = std::numeric_limits<double>::infinity();
    const double best_q = *std::min_element(quick.begin(), quick.end());
    size_t first = 0;
    for (size_t i = 0; i < sizes.size(); ++i)
      if (quick[i] <= best_q * kSizeTolerance && sizes[i] >= sizes[first]) first = i;
    if (quick[first] > best_q * kSizeTolerance) first = static_cast<size_t>(std::min_element(quick.begin(), quick.end()) - quick.begin());
    // Then, only if no policy fits, the smallest size (least staging): each
    // emission of a large plan costs about as much as planning itself.
    const size_t smallest = static_cast<size_t>(std::min_element(sizes.begin(), sizes.end()) - sizes.begin());
    order = {first};
    if (smallest != first) order.push_back(smallest);
  }
  const std::vector<Policy> policies = Policies(s, options);
  // In-place thresholds tried (see PlanOptions::direct_min_bytes). Ties keep
  // the first: 64 MiB (an op of that size reaches ~85 % of NVLink), then
  // everything packed, then everything contiguous in place.
  std::vector<int64_t> directs;
  const int64_t direct = options.direct_min_bytes >= 0 ? options.direct_min_bytes : s.plan.direct_min_bytes;
  if (direct >= 0) {
    directs = {direct};
  } else {
    directs = {kDefaultDirectMinBytes};
    if (small) directs.insert(directs.end(), {std::numeric_limits<int64_t>::max(), int64_t{0}});
  }

  struct Candidate {
    std::shared_ptr<Schedule> schedule;
    Policy policy;
    Emitted e;
    double time_s = 0;
    bool simulated = false;
  };
  std::optional<Candidate> best;
  Emitted frugal;  // the infeasible result with the least missing bytes
  bool have_frugal = false;
  // Candidates: (size index, threshold). Small plans pick the segment size at
  // the first threshold, then try the other thresholds at that size (2 more
  // plans instead of 2 per size); if nothing fits, every pair.
  std::vector<std::vector<std::vector<Seg>>> tried(sizes.size());  // per size: segment lists already planned
  auto consider = [&](size_t oi, int64_t dmin) {
    auto sched = std::make_shared<Schedule>(MakeSchedule(base, sizes[oi], dmin));
    // Thresholds that leave every piece in the same class give the same plan:
    // plan it once (most MoE and small-piece plans).
    const auto same = [&](const std::vector<Seg>& v) {
      return v.size() == sched->segs.size() &&
             std::equal(v.begin(), v.end(), sched->segs.begin(), [](const Seg& x, const Seg& y) {
               return std::tie(x.src_gpu, x.dst_gpu, x.first_part, x.num_parts, x.bytes, x.send_direct, x.recv_direct) ==
                      std::tie(y.src_gpu, y.dst_gpu, y.first_part, y.num_parts, y.bytes, y.send_direct, y.recv_direct);
             });
    };
    if (std::any_of(tried[oi].begin(), tried[oi].end(), same)) return;
    if (directs.size() > 1) tried[oi].push_back(sched->segs);
    for (size_t pi = 0; pi < policies.size(); ++pi) {
      const Policy& pol = policies[pi];
      Emitted e = Emitter(base, *sched, pol).Run();
      if (!e.fits) {
        if (!have_frugal || e.missing_bytes < frugal.missing_bytes) frugal = std::move(e), have_frugal = true;
        continue;
      }
      Candidate cand{sched, pol, std::move(e)};
      if (small) {
        cand.time_s = Simulate(cand.e.plan, SimOptions{nullptr, false}).time_s;
        cand.simulated = true;
      } else {
        cand.time_s = std::max(sched->estimate_s, cand.e.pcie_estimate_s);
      }
      if (!best || cand.time_s < best->time_s * (1 - 1e-9)) best = std::move(cand);
      // The simplest policy, when it fits, is the fastest (nothing waits on a
      // release). Under memory pressure small plans simulate every policy
      // that fits; large plans keep the first (cheapest savings first).
      if (pi == 0 || !small) break;
    }
  };
  for (size_t oi : order) {
    consider(oi, directs.front());
    if (best && !small) break;  // large plans: the first size that fits
  }
  if (directs.size() > 1) {
    if (best) {
      const size_t at = static_cast<size_t>(
          std::find(sizes.begin(), sizes.end(), best->schedule->segment_bytes) - sizes.begin());
      for (size_t k = 1; k < directs.size(); ++k) consider(at, directs[k]);
    } else {
      for (size_t oi : order)
        for (size_t k = 1; k < directs.size(); ++k) consider(oi, directs[k]);
    }
  }

  PlanResult res;
  res.stats.fragments = base.fragments;
  if (!best) {
    res.status = PlanStatus::kInfeasible;
    res.gpu = frugal.worst_gpu;
    res.missing_bytes = frugal.missing_bytes;
    res.message = fmt::format("GPU {} is {} short of memory even with the most frugal policy", res.gpu,
                              FormatBytes(res.missing_bytes));
    res.stats.planned_peak_bytes = frugal.planned_peak;
    return res;
  }
  const Schedule& sc = *best->schedule;
  Plan& plan = best->e.plan;
  PlanSummary& sum = plan.summary;
  sum.segment_bytes = sc.segment_bytes;
  sum.direct_min_bytes = sc.direct_min_bytes;
  sum.offload_fraction = best->policy.offload_fraction;
  sum.memory_policy = best->policy.Name();
  sum.bytes_moved = CountBytesMoved(plan);
  sum.lower_bound_s = LowerBound(plan).time_s;
  res.stats.planned_peak_bytes = best->e.planned_peak;
  if (options.simulate) {
    const Prediction pred = Simulate(plan, SimOptions{nullptr, false});
    sum.predicted_time_s = pred.time_s;
    sum.predicted_peak_bytes = pred.peak_bytes;
    res.stats.predicted_by = "simulator";
  } else {
    sum.predicted_time_s = std::max(sc.estimate_s, best->e.pcie_estimate_s);
    sum.predicted_peak_bytes = best->e.planned_peak;
    res.stats.predicted_by = "port model";
  }
  res.stats.segments = static_cast<int64_t>(sc.segs.size());
  res.stats.direct = std::count_if(sc.segs.begin(), sc.segs.end(), [](const Seg& g) { return g.Direct(); });
  res.stats.rounds = sc.rounds;
  res.stats.groups = best->e.groups;
  res.stats.local_copy_ops = best->e.local_ops;
  res.stats.ops = static_cast<int64_t>(plan.ops.size());
  res.plan = std::move(plan);
  return res;
}

}  // namespace reshard
