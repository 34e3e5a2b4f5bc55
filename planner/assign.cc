#include "planner/assign.h"

#include <algorithm>
#include <map>
#include <numeric>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/maximum_weighted_matching.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

#include "model/error.h"

namespace reshard {

namespace {

// ---- Placement ------------------------------------------------------------------

// Per destination shard: elements of it that each source shard holds (sparse, by source shard).
class OverlapTable {
 public:
  OverlapTable(const Layout& src, const TransferSet& ts) : ts_(ts), rows_(ts.shard_fragments.size()) {
    scratch_.assign(src.shards.size(), 0);
  }
  int64_t Get(int32_t dst_shard, int32_t src_shard) {
    if (src_shard < 0) return 0;
    auto& row = rows_[dst_shard];
    if (!row.built) Build(dst_shard, row);
    auto it = std::lower_bound(row.entries.begin(), row.entries.end(), std::make_pair(src_shard, int64_t{0}));
    return it != row.entries.end() && it->first == src_shard ? it->second : 0;
  }

 private:
  struct Row {
    bool built = false;
    std::vector<std::pair<int32_t, int64_t>> entries;
  };
  void Build(int32_t a, Row& row) {
    std::vector<int32_t> touched;
    for (const Fragment& f : ts_.shard_fragments[a]) {
      int32_t last = -1;
      for (const auto& [shard, piece] : ts_.holder_sets[f.holder_set].holders) {
        if (shard == last) continue;  // one shard holding a box twice counts once
        last = shard;
        if (scratch_[shard] == 0) touched.push_back(shard);
        scratch_[shard] += f.elems;
      }
    }
    std::sort(touched.begin(), touched.end());
    for (int32_t b : touched) {
      row.entries.emplace_back(b, scratch_[b]);
      scratch_[b] = 0;
    }
    row.built = true;
  }
  const TransferSet& ts_;
  std::vector<Row> rows_;
  std::vector<int64_t> scratch_;
};

// Maximum-weight perfect assignment of k rows to k columns (w[i*k+j] >= 0);
// returns column of each row. Boost's general matching on the bipartite graph;
// a constant added to every edge makes the best matching perfect.
std::vector<int32_t> BestAssignment(int32_t k, const std::vector<int64_t>& w) {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, boost::no_property,
                                      boost::property<boost::edge_weight_t, int64_t>>;
  int64_t total = 1;
  for (int64_t x : w) total += x;
  Graph g(2 * k);
  for (int32_t i = 0; i < k; ++i)
    for (int32_t j = 0; j < k; ++j) boost::add_edge(i, k + j, w[i * k + j] + total, g);
  std::vector<boost::graph_traits<Graph>::vertex_descriptor> mate(2 * k);
  boost::maximum_weighted_matching(g, &mate[0]);
  std::vector<int32_t> col(k, -1);
  std::vector<bool> used(k, false);
  for (int32_t i = 0; i < k; ++i) {
    const auto m = mate[i];
    if (m != boost::graph_traits<Graph>::null_vertex() && m >= static_cast<size_t>(k)) {
      col[i] = static_cast<int32_t>(m) - k;
      used[col[i]] = true;
    }
  }
  for (int32_t i = 0, j = 0; i < k; ++i) {  // defensive: complete a non-perfect matching in order
    if (col[i] >= 0) continue;
    while (used[j]) ++j;
    col[i] = j;
    used[j] = true;
  }
  return col;
}

}  // namespace

std::vector<int32_t> PlaceDestinations(const Scenario& s, const Layout& source, const Layout& destination,
                                       const TransferSet& ts) {
  std::vector<int32_t> placed = s.destination_gpus;
  if (!s.destination_placement_free) return placed;
  const Cluster& c = s.cluster;
  std::vector<int32_t> src_shard_on_gpu(c.Gpus(), -1);
  for (int32_t r = 0; r < source.Ranks(); ++r) src_shard_on_gpu[s.source_gpus[r]] = source.rank_shard[r];
  OverlapTable overlap(source, ts);

  std::map<int32_t, std::vector<int32_t>> ranks_of_node;  // node -> destination ranks (rank order)
  for (int32_t r = 0; r < destination.Ranks(); ++r) ranks_of_node[c.NodeOf(placed[r])].push_back(r);
  std::map<std::vector<int32_t>, std::vector<int32_t>> solved;  // signature -> permutation
  for (const auto& [node, ranks] : ranks_of_node) {
    const int32_t k = static_cast<int32_t>(ranks.size());
    std::vector<int32_t> key;
    for (int32_t r : ranks) key.push_back(destination.rank_shard[r]);
    for (int32_t r : ranks) key.push_back(src_shard_on_gpu[s.destination_gpus[r]]);
    auto it = solved.find(key);
    if (it == solved.end()) {
      std::vector<int64_t> w(static_cast<size_t>(k) * k);
      bool any = false;
      for (int32_t i = 0; i < k; ++i)
        for (int32_t j = 0; j < k; ++j) {
          const int64_t x = overlap.Get(key[i], key[k + j]);
          any |= x > 0;
          w[i * k + j] = 2 * x + (i == j ? 1 : 0);  // the +1 keeps the initial placement on ties
        }
      std::vector<int32_t> perm(k);
      std::iota(perm.begin(), perm.end(), 0);
      if (any) perm = BestAssignment(k, w);
      it = solved.emplace(std::move(key), std::move(perm)).first;
    }
    for (int32_t i = 0; i < k; ++i) placed[ranks[i]] = s.destination_gpus[ranks[it->second[i]]];
  }
  return placed;
}

// ---- Balancing ------------------------------------------------------------------

std::vector<std::vector<int64_t>> BalanceDemands(const std::vector<int64_t>& demand,
                                                 const std::vector<std::vector<int32_t>>& candidates,
                                                 const std::vector<int32_t>& gpu_port, std::vector<int64_t> fixed) {
  const int32_t n = static_cast<int32_t>(demand.size());
  std::vector<std::vector<int64_t>> out(n);
  for (int32_t k = 0; k < n; ++k) out[k].assign(candidates[k].size(), 0);

  // Components of (demand, port) so each is balanced on its own.
  const int32_t nports = static_cast<int32_t>(fixed.size());
  std::vector<int32_t> parent(n + nports);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (int32_t k = 0; k < n; ++k)
    for (int32_t g : candidates[k]) parent[find(k)] = find(n + gpu_port[g]);
  std::map<int32_t, std::vector<int32_t>> comps;  // root -> demands
  for (int32_t k = 0; k < n; ++k)
    if (demand[k] > 0) comps[find(k)].push_back(k);

  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, int64_t,
                      boost::property<boost::edge_residual_capacity_t, int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  using Edge = boost::graph_traits<Graph>::edge_descriptor;

  for (const auto& [root, ks] : comps) {
    // Single candidate: nothing to balance.
    if (ks.size() == 1 && candidates[ks[0]].size() == 1) {
      out[ks[0]][0] = demand[ks[0]];
      fixed[gpu_port[candidates[ks[0]][0]]] += demand[ks[0]];
      continue;
    }
    std::map<int32_t, int32_t> gpu_node, port_node;
    int32_t nv = 2 + static_cast<int32_t>(ks.size());
    for (int32_t k : ks)
      for (int32_t g : candidates[k]) {
        if (gpu_node.try_emplace(g, nv).second) ++nv;
      }
    for (const auto& [g, v] : gpu_node)
      if (port_node.try_emplace(gpu_port[g], nv).second) ++nv;
    Graph graph(nv);
    auto cap = boost::get(boost::edge_capacity, graph);
    auto res = boost::get(boost::edge_residual_capacity, graph);
    auto rev = boost::get(boost::edge_reverse, graph);
    auto add = [&](int32_t a, int32_t b, int64_t c) {
      Edge e = boost::add_edge(a, b, graph).first;
      Edge r = boost::add_edge(b, a, graph).first;
      cap[e] = c;
      cap[r] = 0;
      rev[e] = r;
      rev[r] = e;
      return e;
    };
    int64_t total = 0;
    std::vector<std::vector<Edge>> cand_edges(ks.size());
    for (size_t i = 0; i < ks.size(); ++i) {
      const int32_t k = ks[i];
      total += demand[k];
      add(0, 2 + static_cast<int32_t>(i), demand[k]);
      for (int32_t g : candidates[k]) cand_edges[i].push_back(add(2 + static_cast<int32_t>(i), gpu_node[g], demand[k]));
    }
    for (const auto& [g, v] : gpu_node) add(v, port_node[gpu_port[g]], total);
    std::vector<std::pair<Edge, int32_t>> sink_edges;
    int64_t lo = 0, spare_sum = 0;
    for (const auto& [p, v] : port_node) {
      sink_edges.emplace_back(add(v, 1, 0), p);
      lo = std::max(lo, fixed[p]);
      spare_sum += fixed[p];
    }
    lo = std::max(lo, (spare_sum + total + static_cast<int64_t>(port_node.size()) - 1) /
                          static_cast<int64_t>(port_node.size()));
    int64_t hi = lo + total;  // always feasible: every port can take all
    auto feasible = [&](int64_t t) {
      for (auto& [e, p] : sink_edges) cap[e] = std::max<int64_t>(0, t - fixed[p]);
      return boost::push_relabel_max_flow(graph, 0, 1) == total;
    };
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (feasible(mid)) hi = mid;
      else lo = mid + 1;
    }
    RESHARD_CHECK(feasible(lo), "balancing flow lost feasibility");
    for (size_t i = 0; i < ks.size(); ++i)
      for (size_t j = 0; j < cand_edges[i].size(); ++j) {
        const Edge e = cand_edges[i][j];
        out[ks[i]][j] = cap[e] - res[e];
      }
    for (const auto& [e, p] : sink_edges) fixed[p] += cap[e] - res[e];
  }
  return out;
}

// ---- Source choice ----------------------------------------------------------------

SourceChoice ChooseSources(const Scenario& s, const Layout& source, const Layout& destination,
                           const TransferSet& ts, const std::vector<int32_t>& dst_gpu) {
  const Cluster& c = s.cluster;
  const int32_t gpus = c.Gpus();
  SourceChoice out;
  out.holder_gpus.resize(ts.holder_sets.size());
  std::vector<int32_t> src_rank_on_gpu(gpus, -1);
  for (int32_t r = 0; r < source.Ranks(); ++r) {
    RESHARD_CHECK(src_rank_on_gpu[s.source_gpus[r]] < 0, "two source ranks on one GPU");
    src_rank_on_gpu[s.source_gpus[r]] = r;
  }
  std::vector<std::vector<int32_t>> ranks_of_shard(source.shards.size());
  for (int32_t r = 0; r < source.Ranks(); ++r) ranks_of_shard[source.rank_shard[r]].push_back(r);
  auto holder_gpus = [&](int32_t h) -> const std::vector<int32_t>& {
    auto& v = out.holder_gpus[h];
    if (v.empty()) {
      for (const auto& [shard, piece] : ts.holder_sets[h].holders)
        for (int32_t r : ranks_of_shard[shard]) v.push_back(s.source_gpus[r]);
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end()), v.end());
      RESHARD_CHECK(!v.empty(), "a holder set has no rank");
    }
    return v;
  };

  // Candidate sets ("eff" sets) by tier, interned by their GPU list.
  struct Eff {
    std::vector<int32_t> gpus;
    bool network = false;
  };
  std::vector<Eff> effs;
  std::map<std::pair<bool, std::vector<int32_t>>, int32_t> eff_id;
  std::map<std::pair<int32_t, int32_t>, int32_t> eff_of;  // (holder set, domain) -> eff
  auto eff_for = [&](int32_t h, int32_t g) {
    const int32_t dom = c.DomainOf(g);
    auto [it, fresh] = eff_of.try_emplace({h, dom}, -1);
    if (fresh) {
      const auto& all = holder_gpus(h);
      std::vector<int32_t> near;
      for (int32_t x : all)
        if (c.DomainOf(x) == dom) near.push_back(x);
      const bool network = near.empty();
      auto key = std::make_pair(network, network ? all : near);
      auto [jt, added] = eff_id.try_emplace(key, static_cast<int32_t>(effs.size()));
      if (added) effs.push_back(Eff{key.second, network});
      it->second = jt->second;
    }
    return it->second;
  };

  // Pass 1: local fragments are decided; the others record their eff set.
  const int32_t nd = destination.Ranks();
  out.src_rank.resize(nd);
  std::vector<int64_t> demand;
  for (int32_t r = 0; r < nd; ++r) {
    const int32_t g = dst_gpu[r];
    const auto& frags = ts.shard_fragments[destination.rank_shard[r]];
    auto& choice = out.src_rank[r];
    choice.resize(frags.size());
    for (size_t i = 0; i < frags.size(); ++i) {
      const int32_t h = frags[i].holder_set;
      const auto& hg = holder_gpus(h);
      if (std::binary_search(hg.begin(), hg.end(), g)) {
        choice[i] = src_rank_on_gpu[g];
        continue;
      }
      const int32_t e = eff_for(h, g);
      if (demand.size() <= static_cast<size_t>(e)) demand.resize(e + 1, 0);
      demand[e] += frags[i].elems;
      choice[i] = -2 - e;
    }
  }
  demand.resize(effs.size(), 0);

  // Balance each tier over its ports.
  std::vector<std::vector<int64_t>> quota(effs.size());
  for (bool network : {false, true}) {
    std::vector<int32_t> ids;
    std::vector<int64_t> dem;
    std::vector<std::vector<int32_t>> cands;
    for (size_t e = 0; e < effs.size(); ++e)
      if (effs[e].network == network && demand[e] > 0) {
        ids.push_back(static_cast<int32_t>(e));
        dem.push_back(demand[e]);
        cands.push_back(effs[e].gpus);
      }
    if (ids.empty()) continue;
    std::vector<int32_t> gpu_port(gpus);
    int32_t nports = gpus;
    if (network && c.nics_per_node > 0) {
      for (int32_t g = 0; g < gpus; ++g) gpu_port[g] = c.NicOf(g);
      nports = c.nodes * c.nics_per_node;
    } else {
      std::iota(gpu_port.begin(), gpu_port.end(), 0);
    }
    auto q = BalanceDemands(dem, cands, gpu_port, std::vector<int64_t>(nports, 0));
    for (size_t i = 0; i < ids.size(); ++i) quota[ids[i]] = std::move(q[i]);
  }

  // Pass 2: north-west-corner fill of the quotas (senders with a positive
  // quota, in GPU order), destination ranks in order.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> fill(effs.size());
  for (size_t e = 0; e < effs.size(); ++e)
    for (size_t j = 0; j < quota[e].size(); ++j)
      if (quota[e][j] > 0) fill[e].emplace_back(effs[e].gpus[j], quota[e][j]);
  std::vector<int32_t> cursor(effs.size(), 0);
  std::vector<int64_t> left(effs.size(), 0);
  for (size_t e = 0; e < effs.size(); ++e)
    if (!fill[e].empty()) left[e] = fill[e][0].second;
  for (int32_t r = 0; r < nd; ++r) {
    const auto& frags = ts.shard_fragments[destination.rank_shard[r]];
    auto& choice = out.src_rank[r];
    for (size_t i = 0; i < frags.size(); ++i) {
      if (choice[i] >= 0) continue;
      const int32_t e = -2 - choice[i];
      const int64_t b = frags[i].elems;
      const auto& q = fill[e];
      RESHARD_CHECK(!q.empty(), "demand without quota");
      while (cursor[e] + 1 < static_cast<int32_t>(q.size()) && 2 * left[e] < b) left[e] += q[++cursor[e]].second;
      left[e] -= b;
      choice[i] = src_rank_on_gpu[q[cursor[e]].first];
      RESHARD_CHECK(choice[i] >= 0, "chosen GPU holds no source rank");
    }
  }
  return out;
}

}  // namespace reshard
