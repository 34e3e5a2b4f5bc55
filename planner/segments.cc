#include "planner/segments.h"

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <tuple>
#include <utility>

#include "model/error.h"
#include "planner/buffer_layout.h"
#include "planner/comm_lanes.h"
#include "planner/round_balance.h"
#include "planner/rounds.h"

namespace reshard {

namespace {

// InterleavePairs' order is kept unless the given order's levelled rounds are this much shorter by their busiest
// ports' bytes (llama3-8b TP8xDP32 -> TP4xDP64 on 32 DGX H200 in NVLink domains of four nodes, its estimate ranked
// only: 2.4 % longer in turns, 2.2 % by the estimate and 2.7 % simulated; grid deepseek-v3 TP2xPP8xEP16 -> TP8xDP16
// EP128 on 128 H200: 0.14 % longer in turns, 3.1 % faster simulated).
constexpr double kInterleaveMargin = 0.01;

int32_t Priority(const Problem& prob, const SourcedFragment& sf) {
  const int32_t n = static_cast<int32_t>(
      prob.SendBuffers(sf.relay).slot_layer[prob.SendLayout(sf.relay).rank_shard[sf.src_rank]].size());
  const int32_t slot = sf.src_slot;
  return n <= 1 ? 0 : slot * 1023 / (n - 1);
}

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

// A local pair (sender == receiver), prob.sourced[i, j): one batch of copies
// per source slot.
void CutLocalPair(const Problem& prob, size_t i, size_t j, Schedule& sc) {
  for (size_t k = i; k < j;) {
    size_t m = k;
    const SourcedFragment& first = prob.sourced[k];
    LocalBatch lb{first.dst_gpu, first.src_rank, first.src_slot, Priority(prob, first),
                  static_cast<int64_t>(sc.parts.size()), 0, 0};
    while (m < j && prob.sourced[m].src_slot == first.src_slot) {
      const SourcedFragment& sf = prob.sourced[m];
      const Fragment& f = prob.FragmentOf(sf.dst_rank, sf.frag);
      sc.parts.push_back(Part{f.box, sf.dst_rank, sf.frag, sf.src_rank, sf.src_piece, sf.relay});
      lb.bytes += f.elems * prob.elem_bytes;
      ++m;
    }
    lb.num_parts = static_cast<int64_t>(sc.parts.size()) - lb.first_part;
    sc.locals.push_back(lb);
    k = m;
  }
}

// Transfer class of a piece: which sides send / receive it in place; kFeeds:
// staged on both sides and feeding relays (SourcedFragment::feeds) in a round
// per phase, cut into segments of its own so the receiver can unpack it first.
constexpr uint8_t kSendDirect = 1, kRecvDirect = 2, kFeeds = 4;
constexpr int kClasses = 5;
// The side whose address orders an in-place class: the send side, except
// for pieces received in place only.
int RunSide(uint8_t cls) { return cls == kRecvDirect ? 1 : 0; }
bool Staged(uint8_t cls) { return cls == 0 || cls == kFeeds; }

// Cuts remote pairs into segments, per transfer class. One cutter serves
// every pair of a schedule: its scratch vectors keep their capacity, which
// saves a dozen allocations per pair (tens of thousands of pairs at scale).
class RemotePairCutter {
 public:
  RemotePairCutter(const Problem& prob, Schedule& sc)
      : prob_(prob), sc_(sc), max_elems_(std::max<int64_t>(1, sc.segment_bytes / prob.elem_bytes)) {}

  // prob.sourced[i, j): one (sender, receiver) pair, sender != receiver.
  void Cut(size_t i, size_t j) {
    begin_ = i;
    n_ = j - i;
    for (ClassFiller& F : fill_) F.Reset();
    Classify();
    StageAsOneStreamIfTooSplit();
    const int32_t sg = prob_.sourced[i].src_gpu, dg = prob_.sourced[i].dst_gpu;
    for (int cl = 0; cl < kClasses; ++cl) {
      ClassFiller& F = fill_[cl];
      if (F.elems == 0) continue;
      const int64_t nseg = (F.elems + max_elems_ - 1) / max_elems_;
      F.seg_elems = (F.elems + nseg - 1) / nseg;
      F.cur = Segment{sg, dg, 0, 0, 0, (cl & kSendDirect) != 0, (cl & kRecvDirect) != 0, 0};
      F.cur.relay = prob_.sourced[i].relay;
      F.cur.feeds = cl == kFeeds;
    }
    Fill();
    const int32_t via = prob_.sourced[i].via;
    for (ClassFiller& F : fill_) {
      Close(F);
      const int64_t base_part = static_cast<int64_t>(sc_.parts.size());
      for (Segment& d : F.segments) {
        d.first_part += base_part;
        if (via < 0) {
          sc_.segments.push_back(d);
          continue;
        }
        // Sender-relayed: the same parts in two hops, through a buffer of
        // the relay peer that holds them packed (in part order).
        Segment first = d, second = d;
        first.dst_gpu = via, first.recv_direct = false, first.hop = 1, first.feeds_in_place = false;
        second.src_gpu = via, second.send_direct = false, second.hop = 2;
        first.via_recv = second.via_recv = prob_.sourced[i].via_recv;
        sc_.segments.push_back(first);
        sc_.segments.push_back(second);
      }
      sc_.parts.insert(sc_.parts.end(), F.parts.begin(), F.parts.end());
    }
  }

 private:
  // The segments of one transfer class of the current pair.
  struct ClassFiller {
    std::vector<Part> parts;
    std::vector<Segment> segments;
    Segment cur{};
    int64_t used = 0;       // elements in the current segment
    int64_t elems = 0;      // elements of the class
    int64_t seg_elems = 0;  // elements per segment
    int64_t ops = 1;        // p2p ops of the current segment (in-place classes: runs started)
    void Reset() {
      parts.clear();
      segments.clear();
      cur = Segment{};
      used = elems = seg_elems = 0;
      ops = 1;
    }
  };

  const SideRun& RunOf(size_t q) const { return side_[RunSide(cls_[q])][q]; }
  // Entry q of the pair goes to kFeeds when staged: only in a round per phase,
  // whose emission unpacks it ahead (emitter.cc); with rounds, its extra
  // segments moved kimi-k2's plans into ones that wait on themselves.
  bool Feeds(size_t q) const { return sc_.per_round == kPerRoundAll && prob_.sourced[begin_ + q].feeds; }

  // A side goes in place when the piece is contiguous there and belongs to a
  // run (pieces of this pair back to back in one plan buffer, which the
  // emitter sends as one op) of at least direct_min_bytes.
  void Classify() {
    const size_t n = n_;
    const int64_t eb = prob_.elem_bytes;
    cls_.assign(n, 0);
    side_[0].assign(n, SideRun{});
    side_[1].assign(n, SideRun{});
    // The pair's fragments and destination pieces first, in two tight loops:
    // they are scattered (entries are in sender order), and these loops keep
    // many of the cache misses in flight where the long loop below would
    // take them one at a time (deepseek-v3: -40 % for this pass).
    frag_of_.resize(n);
    dpiece_of_.resize(n);
    for (size_t k = 0; k < n; ++k)
      frag_of_[k] = &prob_.FragmentOf(prob_.sourced[begin_ + k].dst_rank, prob_.sourced[begin_ + k].frag);
    for (size_t k = 0; k < n; ++k)
      dpiece_of_[k] = &prob_.dst.ShardOf(prob_.sourced[begin_ + k].dst_rank).pieces[frag_of_[k]->dst_piece];
    for (size_t k = 0; k < n; ++k) {
      const SourcedFragment& sf = prob_.sourced[begin_ + k];
      const Fragment& f = *frag_of_[k];
      const Layout& sl = prob_.SendLayout(sf.relay);
      const Piece& sp = sl.ShardOf(sf.src_rank).pieces[sf.src_piece];
      const Piece& dp = *dpiece_of_[k];
      const int32_t ss = sl.rank_shard[sf.src_rank], ds = prob_.dst.rank_shard[sf.dst_rank];
      const SideBuffers &sb = prob_.SendBuffers(sf.relay), &db = prob_.dst_buffers;
      const auto sr = BoxRegion(0, sb.base_of[ss][sp.buffer] + sp.offset, sp.stride, sp.box, f.box, eb);
      const auto dr = BoxRegion(0, db.base_of[ds][dp.buffer] + dp.offset, dp.stride, dp.box, f.box, eb);
      if (!sr || !dr) continue;
      if (sr->Contiguous())
        side_[0][k] = SideRun{sf.src_rank, sb.slot_of[ss][sp.buffer], sr->offset_bytes, sr->Bytes(), 0};
      if (dr->Contiguous())
        side_[1][k] = SideRun{sf.dst_rank, db.slot_of[ds][dp.buffer], dr->offset_bytes, dr->Bytes(), 0};
    }
    for (int s = 0; s < 2; ++s) MeasureRuns(side_[s], run_order_);
    for (int cl = 0; cl < kClasses; ++cl) class_ops_[cl] = 0;
    for (size_t k = 0; k < n; ++k) {
      const SourcedFragment& sf = prob_.sourced[begin_ + k];
      const int64_t least = sc_.relays_in_place && (sf.relay || sf.feeds) ? 0 : sc_.direct_min_bytes;
      const bool sd = side_[0][k].rank >= 0 && side_[0][k].run_bytes >= least;
      const bool rd = side_[1][k].rank >= 0 && side_[1][k].run_bytes >= least;
      uint8_t cl = static_cast<uint8_t>((sd ? kSendDirect : 0) | (rd ? kRecvDirect : 0));
      if (cl == 0 && Feeds(k)) cl = kFeeds;
      cls_[k] = cl;
      fill_[cl].elems += frag_of_[k]->elems;
      class_ops_[cl] += Staged(cl) || side_[RunSide(cl)][k].run_start ? 1 : 0;
    }
  }

  // Splitting by class may add at most a quarter more segments (each is a
  // slot in a round; many small pairs, as in MoE plans, would double their
  // rounds): beyond that the pair is staged as one stream, only pieces
  // whose in-place run is at least half a segment keeping their class.
  // kFeeds counts as staged here and stays apart (at most one more segment).
  void StageAsOneStreamIfTooSplit() {
    int64_t pair_elems = 0, split = 0;
    for (int cl = 0; cl < 4; ++cl) {
      const int64_t elems = fill_[cl].elems + (cl == 0 ? fill_[kFeeds].elems : 0);
      pair_elems += elems;
      int64_t segs = (elems + max_elems_ - 1) / max_elems_;
      if (cl != 0) segs = std::max(segs, (class_ops_[cl] + kMaxP2pPerSegment - 1) / kMaxP2pPerSegment);
      split += segs;
    }
    const int64_t nseg = (pair_elems + max_elems_ - 1) / max_elems_;
    if (split <= nseg + nseg / 4) return;
    const int64_t seg_elems = (pair_elems + nseg - 1) / nseg;
    for (ClassFiller& F : fill_) F.elems = 0;
    for (size_t q = 0; q < n_; ++q) {
      if (!Staged(cls_[q]) && 2 * RunOf(q).run_bytes < seg_elems * prob_.elem_bytes)
        cls_[q] = Feeds(q) ? kFeeds : 0;
      fill_[cls_[q]].elems += frag_of_[q]->elems;
    }
  }

  void Close(ClassFiller& F) {
    if (F.cur.num_parts > 0) {
      F.cur.bytes = F.used * prob_.elem_bytes;
      F.segments.push_back(F.cur);
    }
    F.cur.feeds_in_place = false;
    F.cur.first_part = static_cast<int64_t>(F.parts.size());
    F.cur.num_parts = 0;
    F.used = 0;
    F.ops = 1;
  }

  void Add(ClassFiller& F, const SourcedFragment& sf, const Box& box) {
    if (F.cur.num_parts == 0) F.cur.priority = Priority(prob_, sf);
    F.parts.push_back(Part{box, sf.dst_rank, sf.frag, sf.src_rank, sf.src_piece, sf.relay});
    F.cur.feeds_in_place = F.cur.feeds_in_place || (sf.feeds && F.cur.recv_direct);
    ++F.cur.num_parts;
    F.used += Volume(box);
    if (F.cur.PerPart() && F.ops >= kMaxP2pPerSegment) Close(F);
  }

  // Fills each class's segments. Order: per class; the in-place classes by
  // their run side's address, so runs stay together.
  void Fill() {
    fill_order_.resize(n_);
    std::iota(fill_order_.begin(), fill_order_.end(), size_t{0});
    std::stable_sort(fill_order_.begin(), fill_order_.end(), [&](size_t x, size_t y) {
      if (cls_[x] != cls_[y]) return cls_[x] < cls_[y];
      if (Staged(cls_[x])) return false;
      const SideRun &a = RunOf(x), &b = RunOf(y);
      return std::tie(a.rank, a.slot, a.offset_bytes) < std::tie(b.rank, b.slot, b.offset_bytes);
    });
    for (size_t q : fill_order_) {
      const SourcedFragment& sf = prob_.sourced[begin_ + q];
      ClassFiller& F = fill_[cls_[q]];
      if (F.cur.PerPart() && F.cur.num_parts > 0 && RunOf(q).run_start) ++F.ops;
      FillFragment(F, sf, frag_of_[q]->box);
    }
  }

  // Fills the current segment with `box`, splitting along the outermost
  // dimension (row-major sub-boxes of a contiguous run stay contiguous).
  void FillFragment(ClassFiller& F, const SourcedFragment& sf, const Box& box) {
    const int64_t seg_elems = F.seg_elems;
    todo_.assign(1, box);
    while (!todo_.empty()) {
      Box x = todo_.back();
      todo_.pop_back();
      while (!Empty(x)) {
        const int64_t vol = Volume(x), cap = seg_elems - F.used;
        if (vol <= cap) {
          Add(F, sf, x);
          break;
        }
        const int d = OutermostSplitDim(x);
        if (d < 0) {  // a single element that does not fit: next segment
          Close(F);
          continue;
        }
        const int64_t unit = vol / (x.hi[d] - x.lo[d]);
        const int64_t units = cap / unit;
        if (units >= 1) {
          Box head = x;
          head.hi[d] = x.lo[d] + units;
          Add(F, sf, head);
          x.lo[d] += units;
          Close(F);
          continue;
        }
        if (F.used > 0) {
          Close(F);
          continue;
        }
        // One unit of d exceeds a whole segment: split it unit by unit (in order).
        for (int64_t u = x.hi[d] - 1; u >= x.lo[d]; --u) {
          Box sub = x;
          sub.lo[d] = u, sub.hi[d] = u + 1;
          todo_.push_back(sub);
        }
        break;
      }
    }
  }

  const Problem& prob_;
  Schedule& sc_;
  const int64_t max_elems_;
  size_t begin_ = 0, n_ = 0;            // the current pair: prob.sourced[begin_, begin_ + n_)
  ClassFiller fill_[kClasses];          // index: class (kSendDirect | kRecvDirect bits, or kFeeds)
  int64_t class_ops_[kClasses] = {};    // p2p ops per class if nothing were merged
  // Per entry of the pair (index q = position - begin_):
  std::vector<uint8_t> cls_;            // its transfer class
  std::vector<SideRun> side_[2];        // its send / receive side, if contiguous
  std::vector<const Fragment*> frag_of_;
  std::vector<const Piece*> dpiece_of_; // its destination piece
  std::vector<size_t> run_order_, fill_order_;
  std::vector<Box> todo_;               // sub-boxes of a fragment still to place
};

// Rounds: colour the sender -> receiver multigraph, edges in (priority, pair)
// order, relayed segments apart and after the others; then segments in
// (round, pair) order and local batches in (GPU, priority, slot) order.
void AssignRounds(Schedule& sc, const Cluster& cluster) {
  const int32_t gpus = cluster.Gpus();
  const int32_t asked = std::max(1, sc.per_round);
  sc.all_in_one_round = asked == kPerRoundAll;
  sc.per_round = sc.all_in_one_round ? 1 : asked;  // all: the largest phase's Δ, below
  sc.rounds = 0;
  // Phases: sender-relay first hops, then the direct segments (with the
  // second hops, and receiver-side relays' first), then AddRelays' relayed
  // ones (with receiver-side relays' second hops).
  auto phase_of = [](const Segment& g) {
    if (g.via_recv) return g.hop == 1 ? 1 : 2;
    return g.hop == 1 ? 0 : g.relay ? 2 : 1;
  };
  // With rounds (not a round per phase) a sender-relay first hop goes one
  // round before its second hop, beside that round's segments (its NVLink
  // port is otherwise idle there); only the first hops of the first direct
  // round's second hops get a round of their own. In rounds of their own,
  // before all others, no NIC sent while they ran and every relay buffer was
  // live (llama3-405b TP4xPP16 -> TP16xDP8 on 128 H100, colocated, optimizer
  // offloaded, forced sender relays: 1.174 -> 1.126 s, now kept).
  const bool lead = !sc.all_in_one_round &&
                    std::any_of(sc.segments.begin(), sc.segments.end(), [&](const Segment& g) { return phase_of(g) == 0; });
  if (lead) sc.rounds = sc.pre_rounds = 1;
  for (int32_t phase : {0, 1, 2}) {
    if (lead && phase == 0) continue;
    const bool relay = phase == 2;
    const int32_t rounds_before = sc.rounds;
    std::vector<int32_t> order;
    for (int32_t x = 0; x < static_cast<int32_t>(sc.segments.size()); ++x)
      if (phase_of(sc.segments[x]) == phase) order.push_back(x);
    if (order.empty()) continue;
    if (sc.all_in_one_round) {  // one round: Δ is the largest degree, no colouring
      std::vector<int32_t> out(gpus, 0), in(gpus, 0);
      int32_t delta = 0;
      for (int32_t x : order) {
        Segment& g = sc.segments[x];
        g.round = sc.rounds;
        delta = std::max({delta, ++out[g.src_gpu], ++in[g.dst_gpu]});
      }
      sc.per_round = std::max(sc.per_round, delta);
      sc.rounds += 1;
      if (relay) sc.relay_rounds = 1;
      if (phase == 0) sc.pre_rounds = 1;
      continue;
    }
    const int32_t per_round = asked;
    std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
      const Segment &a = sc.segments[x], &b = sc.segments[y];
      return std::tie(a.priority, a.src_gpu, a.dst_gpu) < std::tie(b.priority, b.src_gpu, b.dst_gpu);
    });
    // Rounds of the segments in `ord`: each link class coloured on its own, then levelled by bytes (with several
    // per round). Returns the rounds, each segment's round (relative) and the sum over rounds of the busiest port's
    // seconds. O(S·Δ) (the colouring).
    struct Assigned {
      int32_t rounds = 0;
      std::vector<int32_t> round;  // by position in ord
      double busiest_s = 0;
    };
    auto assign = [&](const std::vector<int32_t>& ord) {
      // Each link class is coloured on its own: a GPU's NIC and its NVLink
      // port carry their segments side by side, so a round holds per_round
      // segments of a GPU and direction per class, and the class needing
      // fewer rounds is spread evenly, in order, over the other's R (colour c
      // of Δ to round c·R/Δ: at most ceil(Δ/R) <= per_round colours a round). One
      // colouring of both made a GPU's NVLink and network segments take turns
      // (qwen3-235b TP2 x PP8 x EP4 -> TP4 x DP8 on 32 H200: 0.38 -> 0.35 s).
      std::vector<std::pair<int32_t, int32_t>> edges[2];  // [network?]
      std::vector<int32_t> of[2];                          // positions in ord
      for (int32_t i = 0; i < static_cast<int32_t>(ord.size()); ++i) {
        const Segment& g = sc.segments[ord[i]];
        const LinkClass lc = cluster.Between(g.src_gpu, g.dst_gpu);
        const int c = lc == LinkClass::kNetwork ? 1 : 0;
        edges[c].emplace_back(g.src_gpu, g.dst_gpu);
        of[c].push_back(i);
      }
      Colouring col[2];
      Assigned a;
      a.round.assign(ord.size(), 0);
      for (int c = 0; c < 2; ++c) {
        if (edges[c].empty()) continue;
        col[c] = ColourBipartite(gpus, gpus, edges[c]);
        a.rounds = std::max(a.rounds, (col[c].colours + per_round - 1) / per_round);
      }
      std::vector<RoundItem> items;
      for (int c = 0; c < 2; ++c) {
        const bool binds = (col[c].colours + per_round - 1) / per_round == a.rounds;  // per_round colours a round
        for (size_t e = 0; e < of[c].size(); ++e) {
          const int64_t colour = col[c].colour[e];
          a.round[of[c][e]] = static_cast<int32_t>(binds ? colour / per_round : colour * a.rounds / col[c].colours);
        }
        // Rounds levelled by bytes (planner/round_balance.h), each class on its own.
        if (per_round > 1 && a.rounds > 1) {
          items.clear();
          for (int32_t i : of[c]) {
            const Segment& g = sc.segments[ord[i]];
            items.push_back(RoundItem{g.src_gpu, g.dst_gpu, g.bytes, a.round[i]});
          }
          BalanceRoundBytes(items, gpus, a.rounds, per_round, kRoundBalanceWindow);
          for (size_t e = 0; e < of[c].size(); ++e) a.round[of[c][e]] = items[e].round;
        }
      }
      // Per round, the busiest port's seconds (a GPU direction and class, its bytes at the class's rate).
      std::vector<double> port(static_cast<size_t>(a.rounds) * 4 * gpus, 0), busiest(a.rounds, 0);
      for (size_t i = 0; i < ord.size(); ++i) {
        const Segment& g = sc.segments[ord[i]];
        const LinkClass lc = cluster.Between(g.src_gpu, g.dst_gpu);
        const size_t base = static_cast<size_t>(a.round[i]) * 4 * gpus + (lc == LinkClass::kNetwork ? 2 * gpus : 0);
        const double rate = cluster.Link(lc).bytes_per_s;
        const double t = rate > 0 ? static_cast<double>(g.bytes) / rate : 0;
        for (size_t q : {base + g.src_gpu, base + gpus + g.dst_gpu})
          busiest[a.round[i]] = std::max(busiest[a.round[i]], port[q] += t);
      }
      for (double b : busiest) a.busiest_s += b;
      return a;
    };
    // Where a round holds several segments of a GPU, the pairs of one priority take turns (InterleavePairs), unless
    // the levelled rounds of the given order are kInterleaveMargin shorter by their busiest ports' bytes: that sum
    // cannot see the pairs' transfers running one after another, which turns remove.
    std::vector<int32_t> chosen_order = order;
    Assigned chosen;
    if (per_round > 1) {
      std::vector<int32_t> turns = order;
      InterleavePairs(turns, sc.segments);
      Assigned plain = assign(order), taking_turns = assign(turns);
      if (plain.busiest_s * (1 + kInterleaveMargin) < taking_turns.busiest_s) {
        chosen = std::move(plain);
      } else {
        chosen = std::move(taking_turns), chosen_order = std::move(turns);
      }
    } else {
      chosen = assign(order);
    }
    const int32_t rounds = chosen.rounds;
    for (size_t i = 0; i < chosen_order.size(); ++i) sc.segments[chosen_order[i]].round = sc.rounds + chosen.round[i];
    sc.rounds += rounds;
    if (relay) sc.relay_rounds = sc.rounds - rounds_before;
    if (phase == 0) sc.pre_rounds = sc.rounds - rounds_before;
  }
  if (lead) {  // each first hop a round before its second (same parts, so the same first_part)
    std::vector<std::pair<int64_t, int32_t>> second_round;
    for (const Segment& g : sc.segments)
      if (phase_of(g) != 0 && g.hop == 2 && !g.via_recv) second_round.emplace_back(g.first_part, g.round);
    std::sort(second_round.begin(), second_round.end());
    for (Segment& g : sc.segments) {
      if (phase_of(g) != 0) continue;
      const auto it = std::lower_bound(second_round.begin(), second_round.end(), std::make_pair(g.first_part, INT32_MIN));
      RESHARD_CHECK(it != second_round.end() && it->first == g.first_part && it->second >= 1, "a first hop without its second");
      g.round = it->second - 1;
    }
  }
  // Within a round keep the pair order; the parts of a segment stay where they are.
  std::stable_sort(sc.segments.begin(), sc.segments.end(), [](const Segment& a, const Segment& b) {
    return std::tie(a.round, a.src_gpu, a.dst_gpu, a.first_part) < std::tie(b.round, b.src_gpu, b.dst_gpu, b.first_part);
  });
  std::stable_sort(sc.locals.begin(), sc.locals.end(), [](const LocalBatch& a, const LocalBatch& b) {
    return std::tie(a.gpu, a.priority, a.src_slot) < std::tie(b.gpu, b.priority, b.src_slot);
  });
  // Second hops find their first by its parts (each first hop's are its own).
  std::vector<std::pair<int64_t, int32_t>> firsts;
  for (int32_t x = 0; x < static_cast<int32_t>(sc.segments.size()); ++x)
    if (sc.segments[x].hop == 1) firsts.emplace_back(sc.segments[x].first_part, x);
  if (firsts.empty()) return;
  std::sort(firsts.begin(), firsts.end());
  for (Segment& g : sc.segments) {
    if (g.hop != 2) continue;
    const auto it = std::lower_bound(firsts.begin(), firsts.end(), std::make_pair(g.first_part, int32_t{-1}));
    RESHARD_CHECK(it != firsts.end() && it->first == g.first_part, "a second hop without its first");
    g.feed = it->second;
  }
}

// Peers and the per-port estimate: rounds run one after another, each as
// long as its slowest transfer; local copies and packing overlap them.
void Estimate(Schedule& sc, const Cluster& c) {
  const int32_t gpus = c.Gpus();
  sc.peers = LanePeers(sc, {}, gpus);  // one lane: the distinct peers
  std::vector<double> round_s(sc.rounds, 0);
  std::vector<double> copy_s(gpus, 0);
  const LinkProfile& dc = c.device_copy;
  auto copy_time = [&](int64_t bytes) {
    return dc.bytes_per_s > 0 ? dc.latency_ns * 1e-9 + bytes / (dc.bytes_per_s * dc.Efficiency(bytes)) : 0.0;
  };
  // A round on one GPU direction and link class: its segments share the
  // port, each flow no faster than its size's efficiency allows: max(sum /
  // peak, largest / its capped rate), plus one latency. Segments are in
  // round order.
  struct PortRound {
    int32_t round = -1;
    int64_t sum = 0, largest = 0;
    const LinkProfile* lp = nullptr;
  };
  std::vector<PortRound> out(2 * static_cast<size_t>(gpus)), in(out.size());  // [network?][gpu]
  auto close = [&](PortRound& pr) {
    if (pr.round < 0 || pr.lp->bytes_per_s <= 0) return;
    const double t = pr.lp->latency_ns * 1e-9 +
                     std::max(pr.sum / pr.lp->bytes_per_s, pr.largest / (pr.lp->bytes_per_s * pr.lp->Efficiency(pr.largest)));
    round_s[pr.round] = std::max(round_s[pr.round], t);
  };
  auto add = [&](PortRound& pr, const Segment& g, const LinkProfile& lp) {
    if (pr.round != g.round || pr.lp != &lp) {
      close(pr);
      pr = PortRound{g.round, 0, 0, &lp};
    }
    pr.sum += g.bytes;
    pr.largest = std::max(pr.largest, g.bytes);
  };
  for (const Segment& g : sc.segments) {
    const LinkClass lc = c.Between(g.src_gpu, g.dst_gpu);
    const LinkProfile& lp = c.Link(lc);
    const size_t at = lc == LinkClass::kNetwork ? static_cast<size_t>(gpus) : 0;
    add(out[at + g.src_gpu], g, lp);
    add(in[at + g.dst_gpu], g, lp);
    if (g.Packs()) copy_s[g.src_gpu] += copy_time(g.bytes);
    if (g.Unpacks()) copy_s[g.dst_gpu] += copy_time(g.bytes);
  }
  for (size_t x = 0; x < out.size(); ++x) close(out[x]), close(in[x]);
  for (const LocalBatch& l : sc.locals) copy_s[l.gpu] += copy_time(l.bytes);
  double edge = 0;
  if (sc.all_in_one_round) {
    // Each round is a phase: all its packs precede its transfers and all its
    // unpacks follow them, on the busiest GPU.
    std::vector<double> pack_s(static_cast<size_t>(sc.rounds) * gpus, 0), unpack_s(pack_s.size(), 0);
    for (const Segment& g : sc.segments) {
      if (g.Packs()) pack_s[static_cast<size_t>(g.round) * gpus + g.src_gpu] += copy_time(g.bytes);
      if (g.Unpacks()) unpack_s[static_cast<size_t>(g.round) * gpus + g.dst_gpu] += copy_time(g.bytes);
    }
    for (int32_t r = 0; r < sc.rounds; ++r) {
      const auto at = static_cast<std::ptrdiff_t>(r) * gpus;
      round_s[r] += *std::max_element(pack_s.begin() + at, pack_s.begin() + at + gpus) +
                    *std::max_element(unpack_s.begin() + at, unpack_s.begin() + at + gpus);
    }
  } else {
    // The first pack and the last unpack do not overlap anything.
    for (const Segment& g : sc.segments)
      edge = std::max(edge, ((g.Packs() ? 1 : 0) + (g.Unpacks() ? 1 : 0)) * copy_time(g.bytes));
  }
  const double transfer = std::accumulate(round_s.begin(), round_s.end(), 0.0);
  sc.estimate_s = std::max(transfer + edge, *std::max_element(copy_s.begin(), copy_s.end()));
}

}  // namespace

void InterleavePairs(std::vector<int32_t>& order, const std::vector<Segment>& segments) {
  // turn[x]: segment x's place among its pair's segments of its priority.
  std::vector<int32_t> turn(segments.size(), 0);
  for (size_t i = 1; i < order.size(); ++i) {
    const Segment &a = segments[order[i - 1]], &b = segments[order[i]];
    if (std::tie(a.priority, a.src_gpu, a.dst_gpu) == std::tie(b.priority, b.src_gpu, b.dst_gpu))
      turn[order[i]] = turn[order[i - 1]] + 1;
  }
  std::stable_sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    return std::tie(segments[x].priority, turn[x]) < std::tie(segments[y].priority, turn[y]);
  });
}

double PortBoundSeconds(const Problem& prob) {
  const Cluster& c = prob.scenario.cluster;
  constexpr int kClasses = 4;  // LinkClass values
  std::vector<int64_t> out(static_cast<size_t>(c.Gpus()) * kClasses, 0), in(out.size(), 0);
  for (const PairBytes& pb : prob.pairs) {
    if (pb.src_gpu == pb.dst_gpu) continue;
    const int lc = static_cast<int>(c.Between(pb.src_gpu, pb.dst_gpu));
    out[static_cast<size_t>(pb.src_gpu) * kClasses + lc] += pb.bytes;
    in[static_cast<size_t>(pb.dst_gpu) * kClasses + lc] += pb.bytes;
  }
  double bound = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    const double bytes_per_s = c.Link(static_cast<LinkClass>(k % kClasses)).bytes_per_s;
    if (bytes_per_s > 0) bound = std::max(bound, static_cast<double>(std::max(out[k], in[k])) / bytes_per_s);
  }
  return bound;
}

int32_t MostInOneRound(const Schedule& sc, const std::vector<int32_t>& segments) {
  int32_t most = 0, run = 0;
  for (size_t k = 0; k < segments.size(); ++k) {
    run = k > 0 && sc.segments[segments[k]].round == sc.segments[segments[k - 1]].round ? run + 1 : 1;
    most = std::max(most, run);
  }
  return most;
}

Schedule MakeSchedule(const Problem& prob, int64_t segment_bytes, int64_t direct_min_bytes, int32_t per_round,
                      bool relays_in_place) {
  Schedule sc;
  sc.segment_bytes = segment_bytes;
  sc.per_round = std::max(1, per_round);
  sc.direct_min_bytes = direct_min_bytes;
  sc.relays_in_place = relays_in_place && per_round == kPerRoundAll;
  const auto& sourced = prob.sourced;
  sc.parts.reserve(sourced.size() + sourced.size() / 8);
  RemotePairCutter remote(prob, sc);
  for (size_t i = 0; i < sourced.size();) {
    size_t j = i;
    while (j < sourced.size() && SamePair(sourced[j], sourced[i])) ++j;
    if (sourced[i].src_gpu == sourced[i].dst_gpu) CutLocalPair(prob, i, j, sc);
    else remote.Cut(i, j);
    i = j;
  }
  AssignRounds(sc, prob.scenario.cluster);
  Estimate(sc, prob.scenario.cluster);
  return sc;
}

}  // namespace reshard
