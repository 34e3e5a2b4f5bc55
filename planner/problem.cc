#include "planner/problem.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <tuple>
#include <utility>

#include "model/error.h"
#include "model/union_find.h"

namespace reshard {

namespace {

// Stable LSD radix sort of `v` by bits [lo, hi) of their key, 11 bits a
// pass: O(n) per pass, two passes at 512 GPUs, three at 8192.
void RadixSortByKey(ScratchVector<SourcedFragment>& v, int lo, int hi) {
  constexpr int kDigitBits = 11;
  constexpr uint64_t kMask = (uint64_t{1} << kDigitBits) - 1;
  ScratchVector<SourcedFragment> tmp(v.size());
  std::vector<size_t> start(size_t{1} << kDigitBits);
  for (int shift = lo; shift < hi; shift += kDigitBits) {
    std::fill(start.begin(), start.end(), 0);
    for (const SourcedFragment& x : v) ++start[(x.key >> shift) & kMask];
    size_t sum = 0;
    for (size_t& c : start) sum += std::exchange(c, sum);
    for (const SourcedFragment& x : v) tmp[start[(x.key >> shift) & kMask]++] = x;
    v.swap(tmp);
  }
}

// Bits needed for the ids 0..n-1 (at least 1).
int BitsFor(int64_t n) {
  int k = 1;
  while ((int64_t{1} << k) < n) ++k;
  return k;
}

// Byte totals per (sender, receiver, relayed, relay peer) run of `sourced`,
// for the segment-size estimate; a sender-relayed run gives both its hops.
std::vector<PairBytes> PairTotals(const ScratchVector<SourcedFragment>& sourced, int64_t elem_bytes) {
  std::vector<PairBytes> pairs;
  for (size_t i = 0; i < sourced.size();) {
    size_t j = i;
    int64_t bytes = 0;
    while (j < sourced.size() && SamePair(sourced[j], sourced[i])) {
      bytes += sourced[j].elems * elem_bytes;
      ++j;
    }
    const SourcedFragment& x = sourced[i];
    if (x.via >= 0 && x.via_recv) {  // over the network to the relay peer, then relayed over NVLink
      pairs.push_back(PairBytes{x.src_gpu, x.via, bytes, false});
      pairs.push_back(PairBytes{x.via, x.dst_gpu, bytes, true});
    } else if (x.via >= 0) {  // two hops: holder -> relay peer first, then on to the receiver
      pairs.push_back(PairBytes{x.src_gpu, x.via, bytes, false, true});
      pairs.push_back(PairBytes{x.via, x.dst_gpu, bytes, false});
    } else {
      pairs.push_back(PairBytes{x.src_gpu, x.dst_gpu, bytes, x.relay});
    }
    i = j;
  }
  return pairs;
}

// The smallest sub-box SplitSharedFragments cuts: there a relayed part's
// transfer takes as long as an op's fixed costs (8 MiB at 365 GB/s: 23 us,
// an NVLink op's latency), so smaller parts would add more than they spread.
constexpr int64_t kMinRelaySubBoxBytes = int64_t{8} << 20;

// Splits each large fragment that several GPUs of one NVLink domain need
// over the network (the same tensor box in the shards of destination ranks on
// n GPUs of a domain that holds no source of it) into up to n sub-boxes of at
// least min_sub_bytes along its first dimension that has room, so AddRelays
// can give each sub-box its own receiver: the
// domain then takes the box through n NICs and relays it all-gather style
// (every member sends its part to the others), where a whole box relayed by
// one member loads that member's NIC and NVLink out with all of it
// (llama3-8b on GB200 NVL72: one GPU sent the 263 MB embedding shard to 17
// peers). The same box gets the same cut in every shard, so equal boxes stay
// equal. Fragments keep their (dst_piece, box) order and tile their pieces.
// O(R log R + F) for R destination ranks and F fragments, plus O(B log B)
// for the B large boxes.
void SplitSharedFragments(TransferSet& ts, const Layout& src, const std::vector<int32_t>& src_gpu, const Layout& dst,
                          const std::vector<int32_t>& dst_gpu, const Cluster& c, int64_t elem_bytes,
                          int64_t min_sub_bytes) {
  // Per source shard: the domains holding a rank of it, sorted.
  std::vector<std::vector<int32_t>> src_domains(src.shards.size());
  for (int32_t q = 0; q < src.Ranks(); ++q) src_domains[src.rank_shard[q]].push_back(c.DomainOf(src_gpu[q]));
  for (auto& v : src_domains) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  auto held_in = [&](const Fragment& f, int32_t domain) {  // a holder of f sits in `domain`
    for (const auto& [shard, piece] : ts.holder_sets[f.holder_set].holders)
      if (std::binary_search(src_domains[shard].begin(), src_domains[shard].end(), domain)) return true;
    return false;
  };
  // Per shard: (domain, GPUs of the domain holding a rank of it).
  std::vector<std::tuple<int32_t, int32_t, int32_t>> sdg;  // (shard, domain, gpu)
  for (int32_t r = 0; r < dst.Ranks(); ++r) sdg.emplace_back(dst.rank_shard[r], c.DomainOf(dst_gpu[r]), dst_gpu[r]);
  std::sort(sdg.begin(), sdg.end());
  sdg.erase(std::unique(sdg.begin(), sdg.end()), sdg.end());
  std::vector<std::vector<std::pair<int32_t, int32_t>>> per_domain(ts.shard_fragments.size());
  for (const auto& [shard, domain, gpu] : sdg) {
    auto& v = per_domain[shard];
    if (v.empty() || v.back().first != domain) v.emplace_back(domain, 0);
    ++v.back().second;
  }
  // Large boxes: per (tensor, box, domain) the GPUs that need it.
  std::map<std::tuple<int32_t, Box, int32_t>, int32_t> need;
  for (size_t sh = 0; sh < ts.shard_fragments.size(); ++sh)
    for (const Fragment& f : ts.shard_fragments[sh])
      if (f.elems * elem_bytes >= 2 * min_sub_bytes)
        for (const auto& [domain, n] : per_domain[sh])
          if (!held_in(f, domain)) need[{f.tensor, f.box, domain}] += n;
  if (need.empty()) return;
  std::map<std::pair<int32_t, Box>, int32_t> ways;  // (tensor, box) -> most GPUs of one domain
  for (const auto& [key, n] : need) {
    int32_t& w = ways[{std::get<0>(key), std::get<1>(key)}];
    w = std::max(w, n);
  }
  for (auto& frags : ts.shard_fragments) {
    std::vector<Fragment> out;
    bool split = false;
    for (const Fragment& f : frags) {
      const auto it = f.elems * elem_bytes >= 2 * min_sub_bytes ? ways.find({f.tensor, f.box}) : ways.end();
      int d = 0;
      while (d < f.box.ndim && f.box.hi[d] - f.box.lo[d] < 2) ++d;
      const int64_t parts =
          it == ways.end() || d == f.box.ndim
              ? 1
              : std::min({static_cast<int64_t>(it->second), f.elems * elem_bytes / min_sub_bytes, f.box.hi[d] - f.box.lo[d]});
      if (parts < 2) {
        out.push_back(f);
        continue;
      }
      split = true;
      const int64_t lo = f.box.lo[d], extent = f.box.hi[d] - lo;
      for (int64_t k = 0; k < parts; ++k) {
        Fragment g = f;
        g.box.lo[d] = lo + extent * k / parts;
        g.box.hi[d] = lo + extent * (k + 1) / parts;
        g.elems = Volume(g.box);
        out.push_back(g);
      }
    }
    if (!split) continue;
    std::sort(out.begin(), out.end(),
              [](const Fragment& a, const Fragment& b) { return std::tie(a.dst_piece, a.box) < std::tie(b.dst_piece, b.box); });
    frags = std::move(out);
  }
}

}  // namespace

int32_t Problem::SrcPieceIndex(int32_t src_rank, const Fragment& f) const {
  const int32_t shard = src.rank_shard[src_rank];
  const auto& hs = transfer_set.holder_sets[f.holder_set].holders;
  auto it = std::lower_bound(hs.begin(), hs.end(), std::make_pair(shard, int32_t{-1}));
  RESHARD_CHECK(it != hs.end() && it->first == shard, "chosen source does not hold the fragment");
  return it->second;
}

Problem::Problem(const Scenario& s, const ProblemInputs* given) : scenario(s), byte_view_(given != nullptr && given->byte_view) {
  const int32_t gpus = s.cluster.Gpus();
  // Not `given ? given->src : Make...()`: that is a const prvalue, so the
  // layouts were copied, not moved (deepseek-v3: 2.5 % of planning).
  if (given) {
    src = given->src;
    dst = given->dst;
  } else {
    src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
    dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  }
  elem_bytes = DTypeBytes(s.dtype);
  transfer_set = BuildTransferSet(s.model, src, dst);
  CheckPlanFragments(dst, transfer_set, s.path);  // before anything of the plan's size
  dst_gpu = PlaceDestinations(s, src, dst, transfer_set);
  SplitSharedFragments(transfer_set, src, s.source_gpus, dst, dst_gpu, s.cluster, DTypeBytes(s.dtype),
                       kMinRelaySubBoxBytes);
  choice = ChooseSources(s, src, dst, transfer_set, dst_gpu);
  src_buffers = LayoutBuffers(src);
  dst_buffers = LayoutBuffers(dst);
  memory_at_start = given ? given->memory_at_start : MemoryAtStart(s, src);
  // Bits of the packed sort key.
  int32_t max_slots = 1;
  for (const auto& l : src_buffers.slot_layer) max_slots = std::max<int32_t>(max_slots, static_cast<int32_t>(l.size()));
  size_t max_frags = 1;
  for (const auto& f : transfer_set.shard_fragments) max_frags = std::max(max_frags, f.size());
  const int gpu_bits = BitsFor(gpus), slot_bits = BitsFor(max_slots), rank_bits = BitsFor(dst.Ranks()),
            frag_bits = BitsFor(static_cast<int64_t>(max_frags));
  const int key_bits = 2 * gpu_bits + slot_bits + rank_bits + frag_bits;
  const bool packed = key_bits <= 64;
  size_t total = 0;
  for (int32_t r = 0; r < dst.Ranks(); ++r) total += transfer_set.shard_fragments[dst.rank_shard[r]].size();
  sourced.reserve(total);
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    const auto& frags = transfer_set.shard_fragments[dst.rank_shard[r]];
    for (size_t i = 0; i < frags.size(); ++i) {
      const int32_t q = choice.src_rank[r][i];
      const int32_t pi = SrcPieceIndex(q, frags[i]);
      const int32_t slot = src_buffers.slot_of[src.rank_shard[q]][src.ShardOf(q).pieces[pi].buffer];
      const int32_t sg = s.source_gpus[q], dg = dst_gpu[r];
      uint64_t key = 0;
      if (packed) {
        key = static_cast<uint64_t>(sg);
        key = key << gpu_bits | static_cast<uint64_t>(dg);
        key = key << slot_bits | static_cast<uint64_t>(slot);
        key = key << rank_bits | static_cast<uint64_t>(r);
        key = key << frag_bits | i;
      }
      sourced.push_back(SourcedFragment{key, sg, dg, slot, r, static_cast<int32_t>(i), q, pi, frags[i].elems});
    }
  }
  if (packed) {
    // Entries were made in (dst_rank, frag) order, i.e. sorted by the key's
    // low rank_bits + frag_bits: a stable sort on the high bits completes the
    // order (keys are distinct, so any correct sort gives this one).
    RadixSortByKey(sourced, rank_bits + frag_bits, key_bits);
  } else {
    std::sort(sourced.begin(), sourced.end(), [](const SourcedFragment& x, const SourcedFragment& y) {
      return std::tie(x.src_gpu, x.dst_gpu, x.src_slot, x.dst_rank, x.frag) <
             std::tie(y.src_gpu, y.dst_gpu, y.src_slot, y.dst_rank, y.frag);
    });
  }
  pairs = PairTotals(sourced, elem_bytes);
}

int64_t Problem::AddRelays() {
  const Cluster& c = scenario.cluster;
  const int32_t gpus = c.Gpus();
  // Network entries by (receiver's domain, tensor, box, receiver, index in sourced): equal (domain, tensor, box)
  // carry the same bytes. Each destination rank's entries are in fragment order, which is (tensor, box) order as
  // shard fragments come (sorted where not), so a domain's entries are a k-way merge of its ranks' lists: N log R
  // box comparisons for R ranks a domain instead of N log N (deepseek-v3 on 512 GPUs: 946 K entries, R = 8).
  const std::vector<std::vector<Fragment>>& shard_frags = transfer_set.shard_fragments;
  const int32_t ranks = dst.Ranks();
  std::vector<size_t> rank_base(static_cast<size_t>(ranks) + 1, 0);
  for (int32_t r = 0; r < ranks; ++r) rank_base[r + 1] = rank_base[r] + shard_frags[dst.rank_shard[r]].size();
  constexpr uint32_t kNoEntry = 0xffffffffu;
  RESHARD_CHECK(sourced.size() < kNoEntry, "more than 2^32 - 1 entries");
  std::vector<uint32_t> entry_of(rank_base.back(), kNoEntry);  // (rank, fragment) -> its network entry
  std::vector<int64_t> ingress(gpus, 0);  // network bytes each GPU receives outside the groups
  for (size_t k = 0; k < sourced.size(); ++k) {
    const SourcedFragment& sf = sourced[k];
    if (c.Between(sf.src_gpu, sf.dst_gpu) != LinkClass::kNetwork) continue;
    entry_of[rank_base[sf.dst_rank] + static_cast<size_t>(sf.frag)] = static_cast<uint32_t>(k);
    ingress[sf.dst_gpu] += sf.elems * elem_bytes;
  }
  auto frag_of = [&](uint32_t k) -> const Fragment& { return FragmentOf(sourced[k].dst_rank, sourced[k].frag); };
  auto box_less = [&](uint32_t a, uint32_t b) {
    const Fragment &fa = frag_of(a), &fb = frag_of(b);
    return std::tie(fa.tensor, fa.box) < std::tie(fb.tensor, fb.box);
  };
  auto box_equal = [&](uint32_t a, uint32_t b) {
    const Fragment &fa = frag_of(a), &fb = frag_of(b);
    return fa.tensor == fb.tensor && fa.box == fb.box;
  };
  struct Want {
    int32_t domain, dst_gpu;
    uint32_t at;   // index in sourced
    uint32_t run;  // equal for equal (domain, tensor, box)
  };
  std::vector<Want> want;
  {
    std::vector<int32_t> by_domain(ranks);
    std::iota(by_domain.begin(), by_domain.end(), 0);
    std::stable_sort(by_domain.begin(), by_domain.end(),
                     [&](int32_t a, int32_t b) { return c.DomainOf(dst_gpu[a]) < c.DomainOf(dst_gpu[b]); });
    std::vector<uint32_t> merged, lists;  // the domain's entries merged; its ranks' lists (CSR by list_begin)
    std::vector<size_t> list_begin, head;
    uint32_t run = 0;
    for (size_t i = 0; i < by_domain.size();) {
      const int32_t domain = c.DomainOf(dst_gpu[by_domain[i]]);
      lists.clear(), list_begin.assign(1, 0);
      for (; i < by_domain.size() && c.DomainOf(dst_gpu[by_domain[i]]) == domain; ++i) {
        const int32_t r = by_domain[i];
        const size_t from = lists.size();
        for (size_t e = rank_base[r]; e < rank_base[r + 1]; ++e)
          if (entry_of[e] != kNoEntry) lists.push_back(entry_of[e]);
        if (!std::is_sorted(lists.begin() + static_cast<std::ptrdiff_t>(from), lists.end(), box_less))
          std::stable_sort(lists.begin() + static_cast<std::ptrdiff_t>(from), lists.end(), box_less);
        if (lists.size() > from) list_begin.push_back(lists.size());
      }
      // Heads in a heap by (tensor, box); ties in any order, put right below.
      const size_t n_lists = list_begin.size() - 1;
      head.assign(list_begin.begin(), list_begin.end() - 1);
      auto later = [&](size_t a, size_t b) { return box_less(lists[head[b]], lists[head[a]]); };
      std::vector<size_t> heap(n_lists);
      std::iota(heap.begin(), heap.end(), 0);
      std::make_heap(heap.begin(), heap.end(), later);
      merged.clear();
      while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), later);
        const size_t l = heap.back();
        merged.push_back(lists[head[l]]);
        if (++head[l] < list_begin[l + 1]) {
          std::push_heap(heap.begin(), heap.end(), later);
        } else {
          heap.pop_back();
        }
      }
      // Runs of equal (tensor, box) in (receiver, index) order.
      for (size_t a = 0; a < merged.size();) {
        size_t b = a + 1;
        while (b < merged.size() && box_equal(merged[a], merged[b])) ++b;
        std::sort(merged.begin() + static_cast<std::ptrdiff_t>(a), merged.begin() + static_cast<std::ptrdiff_t>(b),
                  [&](uint32_t x, uint32_t y) {
                    return std::tie(sourced[x].dst_gpu, x) < std::tie(sourced[y].dst_gpu, y);
                  });
        for (size_t k = a; k < b; ++k) want.push_back(Want{domain, sourced[merged[k]].dst_gpu, merged[k], run});
        ++run, a = b;
      }
    }
  }
  // Groups of at least two GPUs (one entry per GPU; a second rank on a GPU keeps its source).
  struct Group {
    size_t first, n;
    int64_t bytes;
  };
  std::vector<Group> groups;
  std::vector<size_t> members;  // indices into want, per group contiguous
  for (size_t i = 0; i < want.size();) {
    size_t j = i;
    while (j < want.size() && want[j].run == want[i].run) ++j;
    const size_t first = members.size();
    for (size_t k = i; k < j; ++k)
      if (k == i || want[k].dst_gpu != want[k - 1].dst_gpu) members.push_back(k);
    const size_t n = members.size() - first;
    if (n >= 2) {
      const int64_t bytes = sourced[want[i].at].elems * elem_bytes;
      groups.push_back(Group{first, n, bytes});
      for (size_t k = first; k < first + n; ++k) ingress[want[members[k]].dst_gpu] -= bytes;
    } else {
      members.resize(first);
    }
    i = j;
  }
  if (groups.empty()) return 0;
  // Largest first, each to the member with the least ingress (ties: lowest GPU).
  std::stable_sort(groups.begin(), groups.end(), [](const Group& a, const Group& b) { return a.bytes > b.bytes; });
  int64_t relayed = 0;
  for (const Group& gr : groups) {
    size_t best = gr.first;
    for (size_t k = gr.first + 1; k < gr.first + gr.n; ++k)
      if (ingress[want[members[k]].dst_gpu] < ingress[want[members[best]].dst_gpu]) best = k;
    sourced[want[members[best]].at].feeds = true;
    const SourcedFragment& relay = sourced[want[members[best]].at];
    ingress[relay.dst_gpu] += gr.bytes;
    const Fragment& rf = FragmentOf(relay.dst_rank, relay.frag);
    const int32_t rshard = dst.rank_shard[relay.dst_rank];
    const int32_t rslot = dst_buffers.slot_of[rshard][dst.shards[rshard].pieces[rf.dst_piece].buffer];
    for (size_t k = gr.first; k < gr.first + gr.n; ++k) {
      if (k == best) continue;
      SourcedFragment& sf = sourced[want[members[k]].at];
      sf.src_gpu = relay.dst_gpu;
      sf.src_rank = relay.dst_rank;
      sf.src_piece = rf.dst_piece;
      sf.src_slot = rslot;
      sf.relay = true;
      relayed += gr.bytes;
    }
  }
  const bool moved = BalanceNetworkSenders();
  // Relayed entries after all others, in the same order (the others re-sorted
  // where their senders moved).
  auto mid = std::stable_partition(sourced.begin(), sourced.end(), [](const SourcedFragment& x) { return !x.relay; });
  auto by_pair = [](const SourcedFragment& x, const SourcedFragment& y) {
    return std::tie(x.src_gpu, x.dst_gpu, x.src_slot, x.dst_rank, x.frag) <
           std::tie(y.src_gpu, y.dst_gpu, y.src_slot, y.dst_rank, y.frag);
  };
  if (moved) std::sort(sourced.begin(), mid, by_pair);
  std::sort(mid, sourced.end(), by_pair);
  pairs = PairTotals(sourced, elem_bytes);
  relayed_bytes = relayed;
  return relayed;
}

bool Problem::BalanceNetworkSenders() {
  const Cluster& c = scenario.cluster;
  // Not for a byte view (planner/quantize_source.h): deepseek-v3 fp8's view
  // with its senders moved gave a plan with a dependency cycle (not yet
  // understood).
  if (c.nics_per_node <= 0 || byte_view_) return false;
  // The entries still sent over the network; per holder set, their demand.
  std::vector<size_t> net;
  for (size_t k = 0; k < sourced.size(); ++k) {
    const SourcedFragment& sf = sourced[k];
    if (!sf.relay && sf.via < 0 && c.Between(sf.src_gpu, sf.dst_gpu) == LinkClass::kNetwork) net.push_back(k);
  }
  std::map<int32_t, int32_t> set_of;  // holder set -> demand index
  std::vector<int64_t> demand;
  std::vector<std::vector<int32_t>> cands;
  std::vector<int32_t> entry_set(net.size()), set_ids;
  for (size_t i = 0; i < net.size(); ++i) {
    const SourcedFragment& sf = sourced[net[i]];
    const int32_t h = FragmentOf(sf.dst_rank, sf.frag).holder_set;
    auto [it, added] = set_of.try_emplace(h, static_cast<int32_t>(demand.size()));
    if (added) {
      set_ids.push_back(h);
      demand.push_back(0);
      cands.push_back(choice.holder_gpus[h]);
      RESHARD_CHECK(!cands.back().empty(), "a network entry's holder set has no GPU");
    }
    entry_set[i] = it->second;
    demand[it->second] += sf.elems;
  }
  if (demand.empty()) return false;
  std::vector<int32_t> gpu_port(c.Gpus());
  for (int32_t g = 0; g < c.Gpus(); ++g) gpu_port[g] = c.NicOf(g);
  // Kept only where it lowers the busiest NIC's egress by more than a
  // fragment's worth: elsewhere the fill ChooseSources made stays.
  const int32_t nics = c.nodes * c.nics_per_node;
  std::vector<int64_t> before(nics, 0);
  int64_t biggest = 0;
  for (size_t k : net) {
    before[c.NicOf(sourced[k].src_gpu)] += sourced[k].elems;
    biggest = std::max(biggest, sourced[k].elems);
  }
  const int64_t busiest = *std::max_element(before.begin(), before.end());
  // No balance goes below a component's mean (of demands linked by shared
  // NICs: its demand over its NICs). Where the busiest NIC is already within
  // a fragment of that, the balancing is not even run (llama3-70b on 8192
  // GPUs: 1.5 CPU-s). O(entries + candidates).
  {
    const int32_t nd = static_cast<int32_t>(demand.size());
    UnionFind comps(static_cast<size_t>(nd + nics));
    for (int32_t e = 0; e < nd; ++e)
      for (int32_t g : cands[e]) comps.Unite(e, nd + gpu_port[g]);
    std::vector<int64_t> sum(nd, 0), ports(nd, 0);  // per root (a demand: the smallest id of its component)
    for (int32_t e = 0; e < nd; ++e) sum[comps.Find(e)] += demand[e];
    for (int32_t p = 0; p < nics; ++p)
      if (const int32_t r = comps.Find(nd + p); r < nd) ++ports[r];
    int64_t floor = 0;
    for (int32_t r = 0; r < nd; ++r)
      if (ports[r] > 0) floor = std::max(floor, (sum[r] + ports[r] - 1) / ports[r]);
    if (floor >= busiest - biggest) return false;
  }
  const auto quota = BalanceDemands(demand, cands, gpu_port, std::vector<int64_t>(nics, 0));
  {
    std::vector<int64_t> after(nics, 0);
    for (size_t e = 0; e < demand.size(); ++e)
      for (size_t j = 0; j < quota[e].size(); ++j) after[gpu_port[cands[e][j]]] += quota[e][j];
    if (*std::max_element(after.begin(), after.end()) >= busiest - biggest) return false;
  }
  std::vector<int32_t> src_rank_on_gpu(c.Gpus(), -1);
  for (int32_t r = 0; r < src.Ranks(); ++r) src_rank_on_gpu[scenario.source_gpus[r]] = r;
  // Entries in (destination rank, fragment) order, as ChooseSources fills them.
  std::vector<size_t> order(net.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const SourcedFragment &x = sourced[net[a]], &y = sourced[net[b]];
    return std::tie(x.dst_rank, x.frag) < std::tie(y.dst_rank, y.frag);
  });
  // North-west-corner fill, as ChooseSources': senders with a quota in GPU
  // order, each entry to the sender whose quota it mostly falls in. The
  // senders at the end of a list get what rounding leaves; the list of
  // holder set h starts at its (h mod n)-th sender, so that does not land on
  // the same GPUs for every set. (How the lists start moves a plan by about
  // 1 %: deepseek-v3 NVL72 121.4 ms this way, 122.1 starting at the set's
  // rank in destination order, llama3-8b NVL72 8.74 / 8.78.)
  std::vector<std::vector<std::pair<int32_t, int64_t>>> fill(demand.size());
  for (size_t e = 0; e < demand.size(); ++e) {
    for (size_t j = 0; j < quota[e].size(); ++j)
      if (quota[e][j] > 0) fill[e].emplace_back(cands[e][j], quota[e][j]);
    RESHARD_CHECK(!fill[e].empty(), "demand without quota");
    std::rotate(fill[e].begin(), fill[e].begin() + static_cast<std::ptrdiff_t>(set_ids[e] % fill[e].size()), fill[e].end());
  }
  std::vector<size_t> cursor(demand.size(), 0);
  std::vector<int64_t> left(demand.size(), 0);
  for (size_t e = 0; e < demand.size(); ++e) left[e] = fill[e].front().second;
  bool moved = false;
  for (size_t i : order) {
    SourcedFragment& sf = sourced[net[i]];
    const int32_t e = entry_set[i];
    const auto& q = fill[e];
    while (cursor[e] + 1 < q.size() && 2 * left[e] < sf.elems) left[e] += q[++cursor[e]].second;
    left[e] -= sf.elems;
    const int32_t g = q[cursor[e]].first;
    if (g == sf.src_gpu) continue;
    const int32_t r = src_rank_on_gpu[g];
    RESHARD_CHECK(r >= 0, "a holder GPU holds no source rank");
    sf.src_gpu = g;
    sf.src_rank = r;
    sf.src_piece = SrcPieceIndex(r, FragmentOf(sf.dst_rank, sf.frag));
    sf.src_slot = src_buffers.slot_of[src.rank_shard[r]][src.ShardOf(r).pieces[sf.src_piece].buffer];
    moved = true;
  }
  return moved;
}

namespace {

// Per NVLink domain, its NICs' mean load (rounded up) is each NIC's level;
// NICs below it are takers, most room first. A NIC's relay peer: its lowest GPU.
struct NicLevels {
  std::vector<int64_t> level;
  std::vector<int32_t> nic_gpu;
  std::vector<std::vector<int32_t>> takers;  // per domain
  std::vector<size_t> cursor;                // per domain: the next taker to fill
  std::vector<std::vector<int32_t>> nics;    // per domain: its NICs
  std::vector<int32_t> lowest;               // per domain: its least loaded NIC when last looked (-1: look again)
  // The taker of `domain` with room for half of `bytes` at least (-1: none).
  int32_t Taker(int32_t domain, int64_t bytes, const std::vector<int64_t>& load) {
    auto& tk = takers[domain];
    size_t& at = cursor[domain];
    while (at < tk.size() && 2 * (level[tk[at]] - load[tk[at]]) < bytes) ++at;
    return at == tk.size() ? -1 : tk[at];
  }
  // Where no taker has that room (AddSendRelays' level_all): the domain's least loaded NIC, if `bytes` moved there
  // from NIC `from` leave both below `from`'s load now. O(domain NICs) after each move here, O(1) otherwise.
  int32_t Lowest(int32_t domain, int32_t from, int64_t bytes, const std::vector<int64_t>& load) {
    int32_t& low = lowest[domain];
    if (low < 0)
      for (int32_t n : nics[domain])
        if (low < 0 || load[n] < load[low]) low = n;
    if (low < 0 || low == from || load[low] + bytes >= load[from]) return -1;
    const int32_t to = low;
    low = -1;
    return to;
  }
};

NicLevels LevelNics(const Cluster& c, const std::vector<int64_t>& load) {
  const int32_t nics = c.nodes * c.nics_per_node;
  const int32_t domain_gpus = c.gpus_per_node * c.nvlink_domain_nodes;
  const int32_t domains = (c.Gpus() + domain_gpus - 1) / domain_gpus;
  NicLevels L{std::vector<int64_t>(nics, 0), std::vector<int32_t>(nics, -1),
              std::vector<std::vector<int32_t>>(domains), std::vector<size_t>(domains, 0),
              std::vector<std::vector<int32_t>>(domains), std::vector<int32_t>(domains, -1)};
  for (int32_t g = c.Gpus() - 1; g >= 0; --g) L.nic_gpu[c.NicOf(g)] = g;
  for (int32_t d = 0; d < domains; ++d) {
    std::vector<int32_t> dn;
    for (int32_t n = 0; n < nics; ++n)
      if (L.nic_gpu[n] >= 0 && c.DomainOf(L.nic_gpu[n]) == d) dn.push_back(n);
    if (dn.size() < 2) continue;
    L.nics[d] = dn;
    int64_t sum = 0;
    for (int32_t n : dn) sum += load[n];
    const int64_t mean = (sum + static_cast<int64_t>(dn.size()) - 1) / static_cast<int64_t>(dn.size());
    for (int32_t n : dn) {
      L.level[n] = mean;
      if (load[n] < mean) L.takers[d].push_back(n);
    }
    std::stable_sort(L.takers[d].begin(), L.takers[d].end(), [&](int32_t a, int32_t b) { return load[a] < load[b]; });
  }
  return L;
}

// A NIC's excess below what the network carries in one op's latency is
// left alone: relaying it cannot save more than the latency its second hop
// adds (dgx-h200: 48 GB/s x 12 us = 576 kB).
int64_t MinExcessBytes(const Cluster& c) {
  return std::max<int64_t>(1, static_cast<int64_t>(c.network.bytes_per_s * c.network.latency_ns * 1e-9));
}

// Relayed entries (via) after the direct ones, before AddRelays' ones, sorted
// by (sender, receiver, relay peer, direction, slot, rank, fragment). The
// three classes keep their order: the direct ones close up in place, the
// others wait in a buffer of their own size, O(n) (a stable sort by class
// was ~7 % of llama3-70b colocated's plan on 8192 GPUs); then the relayed
// ones are sorted.
void SortViaEntries(ScratchVector<SourcedFragment>& sourced) {
  auto class_of = [](const SourcedFragment& x) { return x.relay ? 2 : x.via >= 0 ? 1 : 0; };
  size_t count[3] = {0, 0, 0};
  for (const SourcedFragment& x : sourced) ++count[class_of(x)];
  const size_t direct = count[0], via = count[1];
  ScratchVector<SourcedFragment> rest(sourced.size() - direct);
  size_t at[3] = {0, 0, via};  // where the next one of each class goes (direct: in place)
  for (const SourcedFragment& x : sourced) {
    const int k = class_of(x);
    if (k == 0) sourced[at[0]++] = x;
    else rest[at[k]++] = x;
  }
  std::copy(rest.begin(), rest.end(), sourced.begin() + static_cast<std::ptrdiff_t>(direct));
  const auto first = sourced.begin() + static_cast<std::ptrdiff_t>(direct);
  const auto last = first + static_cast<std::ptrdiff_t>(via);
  std::sort(first, last, [](const SourcedFragment& x, const SourcedFragment& y) {
    return std::tie(x.src_gpu, x.dst_gpu, x.via, x.via_recv, x.src_slot, x.dst_rank, x.frag) <
           std::tie(y.src_gpu, y.dst_gpu, y.via, y.via_recv, y.src_slot, y.dst_rank, y.frag);
  });
}

}  // namespace

int64_t Problem::AddSendRelays(bool level_all) {
  const Cluster& c = scenario.cluster;
  if (c.nics_per_node <= 0) return 0;
  // Network egress per NIC (AddRelays' entries travel over NVLink).
  std::vector<int64_t> load(c.nodes * c.nics_per_node, 0);
  for (const SourcedFragment& sf : sourced)
    if (!sf.relay && sf.via < 0 && c.Between(sf.src_gpu, sf.dst_gpu) == LinkClass::kNetwork)
      load[c.NicOf(sf.src_gpu)] += sf.elems * elem_bytes;
  NicLevels L = LevelNics(c, load);
  const int64_t min_excess = MinExcessBytes(c);
  // Entries in `sourced` order (sender, receiver, layer): a sender's excess
  // goes, fragment by fragment, to its domain's takers in turn.
  int64_t moved = 0;
  for (SourcedFragment& sf : sourced) {
    if (sf.relay || c.Between(sf.src_gpu, sf.dst_gpu) != LinkClass::kNetwork) continue;
    const int32_t from = c.NicOf(sf.src_gpu);
    const int64_t b = sf.elems * elem_bytes;
    const int64_t excess = load[from] - L.level[from];
    if (excess < min_excess || 2 * excess < b) continue;  // within half a fragment of its level
    int32_t to = L.Taker(c.DomainOf(sf.src_gpu), b, load);
    if (to < 0 && level_all) to = L.Lowest(c.DomainOf(sf.src_gpu), from, b, load);
    if (to < 0) continue;  // no room for it: later (smaller) fragments may fit
    sf.via = L.nic_gpu[to];
    load[from] -= b;
    load[to] += b;
    moved += b;
  }
  if (moved == 0) return 0;
  SortViaEntries(sourced);
  pairs = PairTotals(sourced, elem_bytes);
  send_relayed_bytes = moved;
  return moved;
}

int64_t Problem::AddRecvRelays() {
  const Cluster& c = scenario.cluster;
  if (c.nics_per_node <= 0) return 0;
  // Network ingress per NIC: direct entries, and sender-relayed ones' second hops.
  std::vector<int64_t> load(c.nodes * c.nics_per_node, 0);
  for (const SourcedFragment& sf : sourced) {
    const int32_t from = sf.via >= 0 ? sf.via : sf.src_gpu;
    if (!sf.relay && c.Between(from, sf.dst_gpu) == LinkClass::kNetwork) load[c.NicOf(sf.dst_gpu)] += sf.elems * elem_bytes;
  }
  NicLevels L = LevelNics(c, load);
  const int64_t min_excess = MinExcessBytes(c);
  int64_t moved = 0;
  for (SourcedFragment& sf : sourced) {
    if (sf.relay || sf.feeds || sf.via >= 0 || c.Between(sf.src_gpu, sf.dst_gpu) != LinkClass::kNetwork) continue;
    const int32_t from = c.NicOf(sf.dst_gpu);
    const int64_t b = sf.elems * elem_bytes;
    const int64_t excess = load[from] - L.level[from];
    if (excess < min_excess || 2 * excess < b) continue;
    const int32_t to = L.Taker(c.DomainOf(sf.dst_gpu), b, load);
    if (to < 0 || c.Between(sf.src_gpu, L.nic_gpu[to]) != LinkClass::kNetwork) continue;
    sf.via = L.nic_gpu[to];
    sf.via_recv = true;
    load[from] -= b;
    load[to] += b;
    moved += b;
  }
  if (moved == 0) return 0;
  SortViaEntries(sourced);
  pairs = PairTotals(sourced, elem_bytes);
  recv_relayed_bytes = moved;
  return moved;
}

}  // namespace reshard
