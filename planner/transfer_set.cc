#include "planner/transfer_set.h"

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <unordered_map>
#include <string>

#include <fmt/format.h>

#include "model/error.h"

namespace reshard {

namespace {

struct SrcEntry {
  Box box;
  int32_t shard, piece;
};

// Distinct source boxes of one tensor, sorted for an interval sweep along `dim`.
struct TensorIndex {
  int dim = 0;
  std::vector<int32_t> sets;     // holder set ids, sorted by box.lo[dim]
  std::vector<int64_t> lo;       // box.lo[dim] of sets[i]
  std::vector<int64_t> max_hi;   // max of box.hi[dim] over sets[0..i]
};

struct Piecewise {
  Box box;
  int32_t set;
};

class Builder {
 public:
  Builder(const ModelSpec& m, const Layout& src, const Layout& dst) : model_(m), src_(src), dst_(dst) {}

  TransferSet Run() {
    IndexSources();
    size_t pieces = 0;
    for (const Shard& sh : dst_.shards) pieces += sh.pieces.size();
    cache_.reserve(pieces);  // at most one entry per piece: no rehashing
    out_.shard_fragments.resize(dst_.shards.size());
    std::vector<const std::vector<Piecewise>*> parts_of;  // per piece of the shard (cache entries stay put)
    for (size_t s = 0; s < dst_.shards.size(); ++s) {
      const Shard& sh = dst_.shards[s];
      auto& frags = out_.shard_fragments[s];
      // Exact reservation: fragments outnumber pieces several times, and
      // growing the vector would copy them (and touch fresh pages) twice more.
      parts_of.clear();
      size_t n = 0;
      for (const Piece& p : sh.pieces) {
        parts_of.push_back(&Fragments(p.tensor, p.box));
        n += parts_of.back()->size();
      }
      frags.reserve(n);
      for (size_t pi = 0; pi < sh.pieces.size(); ++pi) {
        const int32_t t = sh.pieces[pi].tensor;
        for (const Piecewise& pw : *parts_of[pi])
          frags.push_back(Fragment{pw.box, t, static_cast<int32_t>(pi), pw.set, Volume(pw.box)});
      }
    }
    return std::move(out_);
  }

 private:
  void IndexSources() {
    const size_t nt = model_.tensors.size();
    std::vector<std::vector<SrcEntry>> by_tensor(nt);
    for (size_t s = 0; s < src_.shards.size(); ++s) {
      const auto& pieces = src_.shards[s].pieces;
      for (size_t pi = 0; pi < pieces.size(); ++pi) {
        const Piece& p = pieces[pi];
        RESHARD_CHECK(p.tensor >= 0 && static_cast<size_t>(p.tensor) < nt, "source piece names no tensor");
        if (Empty(p.box)) continue;
        by_tensor[p.tensor].push_back({p.box, static_cast<int32_t>(s), static_cast<int32_t>(pi)});
      }
    }
    index_.resize(nt);
    for (size_t t = 0; t < nt; ++t) {
      auto& v = by_tensor[t];
      std::sort(v.begin(), v.end(), [](const SrcEntry& a, const SrcEntry& b) {
        if (a.box != b.box) return a.box < b.box;
        return std::pair(a.shard, a.piece) < std::pair(b.shard, b.piece);
      });
      TensorIndex& ix = index_[t];
      for (size_t i = 0; i < v.size();) {
        size_t j = i;
        HolderSet hs;
        while (j < v.size() && v[j].box == v[i].box) {
          hs.holders.emplace_back(v[j].shard, v[j].piece);
          ++j;
        }
        ix.sets.push_back(static_cast<int32_t>(out_.holder_sets.size()));
        out_.holder_sets.push_back(std::move(hs));
        set_box_.push_back(v[i].box);
        i = j;
      }
      // Sweep along the dimension with the most distinct starts (the split one).
      const int ndim = model_.tensors[t].shape.ndim;
      size_t best = 0;
      for (int d = 0; d < ndim; ++d) {
        std::vector<int64_t> starts;
        for (int32_t id : ix.sets) starts.push_back(set_box_[id].lo[d]);
        std::sort(starts.begin(), starts.end());
        const size_t n = static_cast<size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
        if (n > best) best = n, ix.dim = d;
      }
      const int d = ix.dim;
      std::stable_sort(ix.sets.begin(), ix.sets.end(),
                       [&](int32_t a, int32_t b) { return set_box_[a].lo[d] < set_box_[b].lo[d]; });
      int64_t m = INT64_MIN;
      for (int32_t id : ix.sets) {
        ix.lo.push_back(set_box_[id].lo[d]);
        m = std::max(m, set_box_[id].hi[d]);
        ix.max_hi.push_back(m);
      }
    }
  }

  int32_t MergedSet(std::vector<std::pair<int32_t, int32_t>> holders) {
    std::sort(holders.begin(), holders.end());
    holders.erase(std::unique(holders.begin(), holders.end()), holders.end());
    auto [it, fresh] = merged_.try_emplace(holders, static_cast<int32_t>(out_.holder_sets.size()));
    if (fresh) out_.holder_sets.push_back(HolderSet{std::move(holders)});
    return it->second;
  }

  // Fragments of destination box `D` of tensor `t` (cached per distinct box).
  const std::vector<Piecewise>& Fragments(int32_t t, const Box& D) {
    // One hash and probe per query: the entry is made here and filled below.
    auto [entry, fresh] = cache_.try_emplace(std::make_pair(t, D));
    if (!fresh) return entry->second;
    const TensorIndex& ix = index_[t];
    const int d = ix.dim;
    std::vector<Piecewise> hits;
    // Boxes with lo < D.hi, scanned backwards while some earlier box may still reach D.lo.
    auto end = std::lower_bound(ix.lo.begin(), ix.lo.end(), D.hi[d]) - ix.lo.begin();
    for (auto i = end - 1; i >= 0 && ix.max_hi[i] > D.lo[d]; --i) {
      const int32_t id = ix.sets[i];
      if (auto x = Intersect(set_box_[id], D)) hits.push_back({*x, id});
    }
    std::sort(hits.begin(), hits.end(), [](const Piecewise& a, const Piecewise& b) {
      return a.box != b.box ? a.box < b.box : a.set < b.set;
    });
    int64_t sum = 0;
    for (const auto& h : hits) sum += Volume(h.box);
    const int64_t need = Volume(D);
    RESHARD_CHECK(sum >= need, "destination box " + ToString(D) + " of tensor " + model_.tensors[t].name +
                                   " is not covered by the source layout");
    std::vector<Piecewise> out;
    if (sum == need) {
      out = std::move(hits);  // disjoint intersections tile D
    } else {
      out = Refine(t, D, hits);
    }
    entry->second = std::move(out);
    return entry->second;
  }

  // Overlapping holder boxes: cut D at every boundary and give each cell the
  // union of the holders containing it. O(cells * hits); rare in practice.
  std::vector<Piecewise> Refine(int32_t t, const Box& D, const std::vector<Piecewise>& hits) {
    std::array<std::vector<int64_t>, kMaxDims> cuts;
    for (int d = 0; d < kMaxDims; ++d) {
      cuts[d] = {D.lo[d], D.hi[d]};
      for (const auto& h : hits) cuts[d].insert(cuts[d].end(), {h.box.lo[d], h.box.hi[d]});
      std::sort(cuts[d].begin(), cuts[d].end());
      cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
    }
    std::vector<Piecewise> out;
    Box cell = D;
    for (size_t i0 = 0; i0 + 1 < cuts[0].size(); ++i0)
      for (size_t i1 = 0; i1 + 1 < cuts[1].size(); ++i1)
        for (size_t i2 = 0; i2 + 1 < cuts[2].size(); ++i2) {
          cell.lo = {cuts[0][i0], cuts[1][i1], cuts[2][i2]};
          cell.hi = {cuts[0][i0 + 1], cuts[1][i1 + 1], cuts[2][i2 + 1]};
          std::vector<std::pair<int32_t, int32_t>> holders;
          for (const auto& h : hits)
            if (Contains(h.box, cell))
              for (const auto& x : out_.holder_sets[h.set].holders) holders.push_back(x);
          RESHARD_CHECK(!holders.empty(), "cell " + ToString(cell) + " of tensor " + model_.tensors[t].name +
                                              " is not covered by the source layout");
          out.push_back({cell, MergedSet(std::move(holders))});
        }
    return out;
  }

  const ModelSpec& model_;
  const Layout& src_;
  const Layout& dst_;
  TransferSet out_;
  std::vector<TensorIndex> index_;
  std::vector<Box> set_box_;  // box of each distinct-box holder set (not of merged ones)
  std::map<std::vector<std::pair<int32_t, int32_t>>, int32_t> merged_;
  struct KeyHash {
    size_t operator()(const std::pair<int32_t, Box>& k) const {
      uint64_t h = static_cast<uint64_t>(k.first) * 0x9E3779B97F4A7C15ull;
      for (int d = 0; d < kMaxDims; ++d)
        h = (h ^ static_cast<uint64_t>(k.second.lo[d])) * 0x100000001B3ull,
        h = (h ^ static_cast<uint64_t>(k.second.hi[d])) * 0x100000001B3ull;
      return static_cast<size_t>(h ^ (h >> 29));
    }
  };
  // Lookups only (never iterated), so a hash map keeps the output deterministic.
  std::unordered_map<std::pair<int32_t, Box>, std::vector<Piecewise>, KeyHash> cache_;
};

}  // namespace

TransferSet BuildTransferSet(const ModelSpec& model, const Layout& source, const Layout& destination) {
  return Builder(model, source, destination).Run();
}

int64_t DestinationFragments(const Layout& destination, const TransferSet& ts) {
  int64_t total = 0;
  for (int32_t r = 0; r < destination.Ranks(); ++r)
    total += static_cast<int64_t>(ts.shard_fragments[destination.rank_shard[r]].size());
  return total;
}

void CheckPlanFragments(const Layout& destination, const TransferSet& ts, const std::string& file) {
  const int64_t fragments = DestinationFragments(destination, ts);
  if (fragments <= kMaxPlanFragments) return;
  const double gib = static_cast<double>(fragments) * kPlanBytesPerFragment / double(int64_t{1} << 30);
  throw InputError(
      file, "destination",
      fmt::format("{} destination ranks would receive {} (rank, fragment) pieces in all, more than the {} reshard "
                  "plans (about {:.0f} GiB to plan at ~{} bytes a piece); plan fewer "
                  "data-parallel replicas (replicas laid out alike on their own nodes refit alike)",
                  destination.Ranks(), fragments, kMaxPlanFragments, gib, kPlanBytesPerFragment));
}

}  // namespace reshard
