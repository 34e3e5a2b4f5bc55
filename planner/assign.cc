#include "planner/assign.h"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/maximum_weighted_matching.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <boost/graph/successive_shortest_path_nonnegative_weights.hpp>

#include "model/error.h"
#include "model/union_find.h"

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

// A min-cost flow (Boost successive_shortest_path_nonnegative_weights, costs
// top - weight >= 0). O(F * (E + V log V)) for F augmentations, at most rows +
// columns in practice.
std::vector<std::vector<int64_t>> Transport(const std::vector<int64_t>& supply, const std::vector<int64_t>& demand,
                                            const std::vector<std::vector<int64_t>>& value,
                                            const std::vector<std::vector<int64_t>>& home,
                                            const std::vector<std::vector<bool>>& near) {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, int64_t,
                      boost::property<boost::edge_residual_capacity_t, int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor,
                                                      boost::property<boost::edge_weight_t, int64_t>>>>>;
  using Edge = boost::graph_traits<Graph>::edge_descriptor;
  const int32_t na = static_cast<int32_t>(supply.size()), nb = static_cast<int32_t>(demand.size());
  Graph g(2 + na + nb);
  auto cap = boost::get(boost::edge_capacity, g);
  auto res = boost::get(boost::edge_residual_capacity, g);
  auto rev = boost::get(boost::edge_reverse, g);
  auto wt = boost::get(boost::edge_weight, g);
  auto add = [&](int32_t a, int32_t b, int64_t c, int64_t w) {
    Edge e = boost::add_edge(a, b, g).first;
    Edge r = boost::add_edge(b, a, g).first;
    cap[e] = c, cap[r] = 0, wt[e] = w, wt[r] = -w, rev[e] = r, rev[r] = e;
    return e;
  };
  int64_t top = 0;
  for (const auto& row : value)
    for (int64_t v : row) top = std::max(top, v);
  // Values times 4, plus 2 on the arcs of blocks that stay home and 1 on
  // those that stay in their NVLink domain.
  top = 4 * top + 2;
  std::vector<std::vector<Edge>> mid(na), stay(na);
  for (int32_t a = 0; a < na; ++a) add(0, 2 + a, supply[a], 0);
  for (int32_t b = 0; b < nb; ++b) add(2 + na + b, 1, demand[b], 0);
  for (int32_t a = 0; a < na; ++a)
    for (int32_t b = 0; b < nb; ++b) {
      stay[a].push_back(add(2 + a, 2 + na + b, home[a][b], top - 4 * value[a][b] - 2));
      mid[a].push_back(add(2 + a, 2 + na + b, supply[a], top - 4 * value[a][b] - (near[a][b] ? 1 : 0)));
    }
  boost::successive_shortest_path_nonnegative_weights(g, 0, 1);
  std::vector<std::vector<int64_t>> y(na, std::vector<int64_t>(nb, 0));
  for (int32_t a = 0; a < na; ++a)
    for (int32_t b = 0; b < nb; ++b)
      y[a][b] = cap[mid[a][b]] - res[mid[a][b]] + cap[stay[a][b]] - res[stay[a][b]];
  return y;
}

std::vector<int32_t> PlaceDestinations(const Scenario& s, const Layout& source, const Layout& destination,
                                       const TransferSet& ts) {
  std::vector<int32_t> placed = s.destination_gpus;
  if (!s.destination_placement_free) return placed;
  const Cluster& c = s.cluster;
  std::vector<int32_t> src_shard_on_gpu(c.Gpus(), -1);
  for (int32_t r = 0; r < source.Ranks(); ++r) src_shard_on_gpu[s.source_gpus[r]] = source.rank_shard[r];
  OverlapTable overlap(source, ts);

  // Blocks: the destination ranks initially on each node, and that node's GPUs in the same order.
  std::map<int32_t, std::vector<int32_t>> ranks_of_node;
  for (int32_t r = 0; r < destination.Ranks(); ++r) ranks_of_node[c.NodeOf(placed[r])].push_back(r);
  std::vector<int32_t> nodes;
  std::vector<std::vector<int32_t>> block_sig, node_sig;
  for (const auto& [node, ranks] : ranks_of_node) {
    nodes.push_back(node);
    std::vector<int32_t> b, n;
    for (int32_t r : ranks) b.push_back(destination.rank_shard[r]), n.push_back(src_shard_on_gpu[s.destination_gpus[r]]);
    block_sig.push_back(std::move(b));
    node_sig.push_back(std::move(n));
  }
  // Within a node: best assignment of a block's ranks to a node's GPUs, cached by signatures.
  struct Solved {
    int64_t local = 0;            // bytes found in place
    std::vector<int32_t> perm;    // rank i of the block -> GPU perm[i] of the node
  };
  std::map<std::pair<std::vector<int32_t>, std::vector<int32_t>>, Solved> solved;
  auto solve = [&](const std::vector<int32_t>& bs, const std::vector<int32_t>& ns) -> const Solved& {
    auto key = std::make_pair(bs, ns);
    auto it = solved.find(key);
    if (it != solved.end()) return it->second;
    const int32_t k = static_cast<int32_t>(bs.size());
    std::vector<int64_t> w(static_cast<size_t>(k) * k), x(static_cast<size_t>(k) * k);
    bool any = false;
    for (int32_t i = 0; i < k; ++i)
      for (int32_t j = 0; j < k; ++j) {
        x[i * k + j] = overlap.Get(bs[i], ns[j]);
        any |= x[i * k + j] > 0;
        w[i * k + j] = 2 * x[i * k + j] + (i == j ? 1 : 0);  // the +1 keeps the initial order on ties
      }
    Solved out;
    out.perm.resize(k);
    std::iota(out.perm.begin(), out.perm.end(), 0);
    if (any) out.perm = BestAssignment(k, w);
    for (int32_t i = 0; i < k; ++i) out.local += x[i * k + out.perm[i]];
    return solved.emplace(std::move(key), std::move(out)).first->second;
  };

  // Across nodes: blocks move as a whole (tensor-parallel groups stay inside a
  // node) onto nodes with as many destination GPUs. Classes of equal
  // signatures make it a small transportation problem.
  const int32_t nn = static_cast<int32_t>(nodes.size());
  std::vector<int32_t> target(nn);
  std::iota(target.begin(), target.end(), 0);
  std::map<size_t, std::vector<int32_t>> by_size;
  for (int32_t i = 0; i < nn; ++i) by_size[block_sig[i].size()].push_back(i);
  for (const auto& [size, idx] : by_size) {
    if (idx.size() < 2) continue;
    // Where an NVLink domain spans nodes, classes are per domain too, so
    // that the transport can prefer moves within a domain.
    std::map<std::pair<int32_t, std::vector<int32_t>>, int32_t> a_id, b_id;
    std::vector<int32_t> a_of(nn, -1), b_of(nn, -1), a_dom, b_dom;
    std::vector<const std::vector<int32_t>*> a_sig, b_sig;
    for (int32_t i : idx) {
      const int32_t dom = c.nvlink_domain_nodes > 1 ? nodes[i] / c.nvlink_domain_nodes : 0;
      auto [ia, fa] = a_id.try_emplace(std::make_pair(dom, block_sig[i]), static_cast<int32_t>(a_sig.size()));
      if (fa) a_sig.push_back(&block_sig[i]), a_dom.push_back(dom);
      a_of[i] = ia->second;
      auto [ib, fb] = b_id.try_emplace(std::make_pair(dom, node_sig[i]), static_cast<int32_t>(b_sig.size()));
      if (fb) b_sig.push_back(&node_sig[i]), b_dom.push_back(dom);
      b_of[i] = ib->second;
    }
    const int32_t na = static_cast<int32_t>(a_sig.size()), nb = static_cast<int32_t>(b_sig.size());
    if (na == 1 && nb == 1) continue;
    std::vector<int64_t> supply(na, 0), demand(nb, 0);
    std::vector<std::vector<int64_t>> home(na, std::vector<int64_t>(nb, 0));
    for (int32_t i : idx) ++supply[a_of[i]], ++demand[b_of[i]], ++home[a_of[i]][b_of[i]];
    std::vector<std::vector<int64_t>> value(na, std::vector<int64_t>(nb, 0));
    std::vector<std::vector<bool>> near(na, std::vector<bool>(nb, false));
    bool any = false;
    for (int32_t a = 0; a < na; ++a)
      for (int32_t b = 0; b < nb; ++b) {
        any |= (value[a][b] = solve(*a_sig[a], *b_sig[b]).local) > 0;
        near[a][b] = a_dom[a] == b_dom[b];
      }
    if (!any) continue;
    // Keep the identity where it is already optimal: a block stays home when
    // the optimum sends as many of its class there.
    std::vector<std::vector<int64_t>> y = Transport(supply, demand, value, home, near);
    std::vector<bool> block_done(nn, false), node_used(nn, false);
    for (int32_t i : idx)
      if (y[a_of[i]][b_of[i]] > 0) {
        --y[a_of[i]][b_of[i]];
        target[i] = i;
        block_done[i] = node_used[i] = true;
      }
    for (int32_t i : idx) {
      if (block_done[i]) continue;
      const int32_t a = a_of[i];
      for (int32_t m : idx) {
        if (node_used[m] || y[a][b_of[m]] <= 0) continue;
        --y[a][b_of[m]];
        target[i] = m;
        node_used[m] = true;
        break;
      }
    }
  }
  for (int32_t i = 0; i < nn; ++i) {
    const int32_t m = target[i];
    const Solved& sv = solve(block_sig[i], node_sig[m]);
    const auto& ranks = ranks_of_node[nodes[i]];
    const auto& gpus_of = ranks_of_node[nodes[m]];
    for (size_t k = 0; k < ranks.size(); ++k) placed[ranks[k]] = s.destination_gpus[gpus_of[sv.perm[k]]];
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

  // Components of (demand, port) so each is balanced on its own. They share
  // no demand and no port, so the order they are balanced in does not matter;
  // they go by their smallest demand id (the root).
  const int32_t nports = static_cast<int32_t>(fixed.size());
  UnionFind sets(static_cast<size_t>(n + nports));
  for (int32_t k = 0; k < n; ++k)
    for (int32_t g : candidates[k]) sets.Unite(k, n + gpu_port[g]);
  std::map<int32_t, std::vector<int32_t>> comps;  // root -> demands
  for (int32_t k = 0; k < n; ++k)
    if (demand[k] > 0) comps[sets.Find(k)].push_back(k);

  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, int64_t,
                      boost::property<boost::edge_residual_capacity_t, int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  using Edge = boost::graph_traits<Graph>::edge_descriptor;

  for (const auto& [root, ks] : comps) {
    // One demand: water-filling, no flow needed. Raise the least loaded of
    // its ports to a common level T with sum (T - fixed) = demand; a port's
    // share is split evenly over its candidate GPUs. O(c log c).
    if (ks.size() == 1) {
      const int32_t k = ks[0];
      const auto& cg = candidates[k];
      std::map<int32_t, std::vector<size_t>> gpus_of_port;  // port -> candidate positions
      for (size_t j = 0; j < cg.size(); ++j) gpus_of_port[gpu_port[cg[j]]].push_back(j);
      std::vector<std::pair<int64_t, int32_t>> level;  // (fixed load, port), ascending
      for (const auto& [p, js] : gpus_of_port) level.emplace_back(fixed[p], p);
      std::sort(level.begin(), level.end());
      // Find how many ports take part and the level they reach.
      int64_t left = demand[k], sum = 0;
      size_t m = 0;
      while (m < level.size()) {
        const int64_t next = m + 1 < level.size() ? level[m + 1].first : INT64_MAX;
        sum += level[m].first;
        ++m;
        // Raising the first m ports to `next` costs m*next - sum.
        if (next == INT64_MAX || (__extension__ static_cast<__int128>(m)) * next - sum >= left) break;
      }
      const int64_t base = (left + sum) / static_cast<int64_t>(m);
      int64_t extra = (left + sum) - base * static_cast<int64_t>(m);  // first `extra` ports take one more
      for (size_t i = 0; i < m; ++i) {
        const int32_t p = level[i].second;
        int64_t share = base - level[i].first + (extra > 0 ? 1 : 0);
        if (extra > 0) --extra;
        if (share <= 0) continue;
        fixed[p] += share;
        const auto& js = gpus_of_port[p];
        const int64_t each = share / static_cast<int64_t>(js.size());
        int64_t rest = share - each * static_cast<int64_t>(js.size());
        for (size_t j : js) {
          out[k][j] = each + (rest > 0 ? 1 : 0);
          if (rest > 0) --rest;
        }
      }
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
    for (const auto& [p, v] : port_node) sink_edges.emplace_back(add(v, 1, 0), p);
    // Levels, lowest first: the least T at which every demand fits with each
    // port not yet frozen loaded to at most T (frozen ports keep their level).
    // The ports that T binds (those the source still reaches in the residual
    // graph of the max flow at T - 1: the min cut's source side) are frozen at
    // T and the rest balanced again below it, up to kLevels times; so ports
    // the min-max does not bind are balanced too, not left at whatever the
    // flow gave them (qwen3-30b-a3b colocated: a few NICs at 0 while the rest
    // sat at T).
    constexpr int kLevels = 4;
    std::vector<int64_t> frozen(sink_edges.size(), -1);  // per sink edge: its port's level, -1: free
    auto feasible = [&](int64_t t) {
      for (size_t i = 0; i < sink_edges.size(); ++i) {
        const auto& [e, p] = sink_edges[i];
        cap[e] = std::max<int64_t>(0, (frozen[i] >= 0 ? frozen[i] : t) - fixed[p]);
      }
      return boost::push_relabel_max_flow(graph, 0, 1) == total;
    };
    int64_t hi = 0;  // feasible: every free port can take all
    for (const auto& [e, p] : sink_edges) hi = std::max(hi, fixed[p] + total);
    int64_t lo = 0;
    for (int level = 0;; ++level) {
      int64_t free_ports = 0, spare_sum = 0, frozen_room = 0;
      for (size_t i = 0; i < sink_edges.size(); ++i) {
        const int32_t p = sink_edges[i].second;
        if (frozen[i] >= 0) {
          frozen_room += std::max<int64_t>(0, frozen[i] - fixed[p]);
        } else {
          ++free_ports;
          lo = std::max(lo, fixed[p]);
          spare_sum += fixed[p];
        }
      }
      if (free_ports > 0)
        lo = std::max(lo, (spare_sum + std::max<int64_t>(0, total - frozen_room) + free_ports - 1) / free_ports);
      lo = std::min(lo, hi);
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (feasible(mid)) hi = mid;
        else lo = mid + 1;
      }
      if (level + 1 == kLevels || lo == 0 || feasible(lo - 1)) break;
      // Max flow at lo - 1 (infeasible) is in the residual graph: freeze the ports its source side reaches.
      std::vector<bool> seen(boost::num_vertices(graph), false);
      std::vector<int32_t> stack{0};
      seen[0] = true;
      while (!stack.empty()) {
        const int32_t v = stack.back();
        stack.pop_back();
        for (auto [it, end] = boost::out_edges(v, graph); it != end; ++it)
          if (res[*it] > 0 && !seen[boost::target(*it, graph)]) {
            seen[boost::target(*it, graph)] = true;
            stack.push_back(static_cast<int32_t>(boost::target(*it, graph)));
          }
      }
      bool any = false, rest = false;
      for (size_t i = 0; i < sink_edges.size(); ++i) {
        if (frozen[i] >= 0) continue;
        if (seen[boost::source(sink_edges[i].first, graph)]) frozen[i] = lo, any = true;
        else rest = true;
      }
      if (!any || !rest) break;
      hi = lo;  // the free ports fit at lo; try lower
      lo = 0;
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

  // Candidate sets ("eff" sets) by tier, interned by their GPU list; ids in
  // order of first use.
  struct Eff {
    std::vector<int32_t> gpus;
    bool network = false;
  };
  std::vector<Eff> effs;
  std::map<std::pair<bool, std::vector<int32_t>>, int32_t> eff_id;
  auto intern = [&](bool network, std::vector<int32_t> list) {
    auto key = std::make_pair(network, std::move(list));
    auto [it, added] = eff_id.try_emplace(std::move(key), static_cast<int32_t>(effs.size()));
    if (added) effs.push_back(Eff{it->first.second, network});
    return it->second;
  };
  // The eff set of holder set h for a destination on GPU g: its GPUs in g's
  // NVLink domain, else (none there) all its GPUs. DomainOf is non-decreasing
  // in the GPU id, so a domain's GPUs are one run of the sorted holder list,
  // found by binary search: O(log n) per (holder set, domain) instead of a
  // scan of all n holder GPUs (O(sets x domains x replicas) at 8k GPUs).
  // Memos: per holder set its network eff, and per position of its GPU list
  // the eff of the domain whose run starts there (O(holder GPUs) memory).
  std::vector<int32_t> network_eff(ts.holder_sets.size(), -1);
  std::vector<std::vector<int32_t>> domain_eff(ts.holder_sets.size());
  // Consecutive destination ranks mostly share a domain: remember the last
  // (domain, eff) of each holder set.
  std::vector<std::pair<int32_t, int32_t>> last_eff(ts.holder_sets.size(), {-1, -1});
  auto eff_for = [&](int32_t h, int32_t g) {
    const int32_t dom = c.DomainOf(g);
    if (last_eff[h].first == dom) return last_eff[h].second;
    const auto& all = holder_gpus(h);
    const auto lo =
        std::lower_bound(all.begin(), all.end(), dom, [&](int32_t x, int32_t d) { return c.DomainOf(x) < d; });
    int32_t e;
    if (lo == all.end() || c.DomainOf(*lo) != dom) {
      if (network_eff[h] < 0) network_eff[h] = intern(true, all);
      e = network_eff[h];
    } else {
      auto& memo = domain_eff[h];
      if (memo.empty()) memo.assign(all.size(), -1);
      int32_t& m = memo[static_cast<size_t>(lo - all.begin())];
      if (m < 0) {
        const auto hi = std::upper_bound(lo, all.end(), dom, [&](int32_t d, int32_t x) { return d < c.DomainOf(x); });
        m = intern(false, std::vector<int32_t>(lo, hi));
      }
      e = m;
    }
    last_eff[h] = {dom, e};
    return e;
  };

  // Pass 1: local fragments are decided; the others record their eff set.
  // What a rank draws over the network from one eff set in all (a bundle)
  // that is at most `rider_elems` costs its op, not its bytes (the NIC moves
  // that much in its per-op latency): it is left out of the balancing and
  // placed by NIC load, bundle by bundle (pass 3). Balanced by
  // bytes, such bundles went wherever the flow left room: llama3-70b
  // colocated on 1024 H100, the replicated norms of a stage (344 KB per
  // receiver) came from 1-8 of its 128 holders, one GPU sent to 189
  // receivers, and at 8192 GPUs the rounds needed 841 colours.
  const int64_t rider_elems = static_cast<int64_t>(static_cast<double>(c.network.latency_ns) * 1e-9 *
                                                   c.network.bytes_per_s) / DTypeBytes(s.dtype);
  const int32_t nd = destination.Ranks();
  out.src_rank.resize(nd);
  std::vector<int64_t> demand;
  // Per rank: its riding bundles (eff set, elems), by eff set.
  std::vector<std::vector<std::pair<int32_t, int64_t>>> riders(nd);
  std::vector<std::pair<int32_t, int64_t>> bundles;
  for (int32_t r = 0; r < nd; ++r) {
    const int32_t g = dst_gpu[r];
    const auto& frags = ts.shard_fragments[destination.rank_shard[r]];
    auto& choice = out.src_rank[r];
    choice.resize(frags.size());
    bundles.clear();
    for (size_t i = 0; i < frags.size(); ++i) {
      const int32_t h = frags[i].holder_set;
      const auto& hg = holder_gpus(h);
      if (std::binary_search(hg.begin(), hg.end(), g)) {
        choice[i] = src_rank_on_gpu[g];
        continue;
      }
      const int32_t e = eff_for(h, g);
      choice[i] = -2 - e;
      if (effs[e].network) bundles.emplace_back(e, frags[i].elems);
    }
    if (!bundles.empty()) {  // sum per eff set; keep those small enough to ride
      std::sort(bundles.begin(), bundles.end());
      size_t n = 0;
      for (size_t i = 0; i < bundles.size(); ++i) {
        if (n > 0 && bundles[n - 1].first == bundles[i].first) bundles[n - 1].second += bundles[i].second;
        else bundles[n++] = bundles[i];
      }
      for (size_t i = 0; i < n; ++i)
        if (bundles[i].second <= rider_elems) riders[r].push_back(bundles[i]);
    }
    auto rides = [&](int32_t e) {
      const auto& rd = riders[r];
      return !rd.empty() && std::binary_search(rd.begin(), rd.end(), std::make_pair(e, int64_t{0}),
                                               [](const auto& a, const auto& b) { return a.first < b.first; });
    };
    for (size_t i = 0; i < frags.size(); ++i) {
      if (choice[i] >= 0) continue;
      const int32_t e = -2 - choice[i];
      if (rides(e)) continue;
      if (demand.size() <= static_cast<size_t>(e)) demand.resize(e + 1, 0);
      demand[e] += frags[i].elems;
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
  std::vector<int64_t> rider_of(effs.size(), -1);  // pass 3: the GPU rank r's bundle of an eff set rides with
  for (int32_t r = 0; r < nd; ++r) {
    const auto& frags = ts.shard_fragments[destination.rank_shard[r]];
    auto& choice = out.src_rank[r];
    for (const auto& [e, elems] : riders[r]) rider_of[e] = -2;
    for (size_t i = 0; i < frags.size(); ++i) {
      if (choice[i] >= 0) continue;
      const int32_t e = -2 - choice[i];
      if (rider_of[e] == -2) continue;
      const int64_t b = frags[i].elems;
      const auto& q = fill[e];
      RESHARD_CHECK(!q.empty(), "demand without quota");
      while (cursor[e] + 1 < static_cast<int32_t>(q.size()) && 2 * left[e] < b) left[e] += q[++cursor[e]].second;
      left[e] -= b;
      choice[i] = src_rank_on_gpu[q[cursor[e]].first];
      RESHARD_CHECK(choice[i] >= 0, "chosen GPU holds no source rank");
    }
    for (const auto& [e, elems] : riders[r]) rider_of[e] = -1;
  }

  // Pass 3: riding bundles, rank by rank, each to the least loaded NIC of
  // its candidates; among equals, to a GPU the rank already draws from (it
  // joins that pair: no op of its own), else the lowest GPU. NIC loads start
  // from the quotas. Also joining a sender up to a bundle's worth busier
  // (riding costs less than an op) changed llama3-8b NVL72 7.60 -> 7.75 ms
  // and llama3-405b 1230 -> 1218: this way no row of the at-scale table got
  // slower. O(bundles x candidates).
  if (std::all_of(riders.begin(), riders.end(), [](const auto& v) { return v.empty(); })) return out;
  const bool by_nic = c.nics_per_node > 0;
  auto port_of = [&](int32_t g) { return by_nic ? c.NicOf(g) : g; };
  std::vector<int64_t> load(by_nic ? c.nodes * c.nics_per_node : gpus, 0);
  for (size_t e = 0; e < effs.size(); ++e)
    if (effs[e].network)
      for (size_t j = 0; j < quota[e].size(); ++j) load[port_of(effs[e].gpus[j])] += quota[e][j];
  std::vector<int32_t> senders;  // sorted GPUs the rank draws from
  for (int32_t r = 0; r < nd; ++r) {
    if (riders[r].empty()) continue;
    const auto& frags = ts.shard_fragments[destination.rank_shard[r]];
    auto& choice = out.src_rank[r];
    senders.clear();
    for (size_t i = 0; i < frags.size(); ++i)
      if (choice[i] >= 0) senders.push_back(s.source_gpus[choice[i]]);
    std::sort(senders.begin(), senders.end());
    senders.erase(std::unique(senders.begin(), senders.end()), senders.end());
    for (const auto& [e, elems] : riders[r]) {
      const auto& cg = effs[e].gpus;  // sorted
      int32_t best = -1, joined = -1;
      for (int32_t g : cg)
        if (best < 0 || load[port_of(g)] < load[port_of(best)]) best = g;
      for (int32_t g : senders)
        if (std::binary_search(cg.begin(), cg.end(), g) && (joined < 0 || load[port_of(g)] < load[port_of(joined)]))
          joined = g;
      const int32_t g = joined >= 0 && load[port_of(joined)] <= load[port_of(best)] ? joined : best;
      load[port_of(g)] += elems;
      rider_of[e] = g;
      if (!std::binary_search(senders.begin(), senders.end(), g))
        senders.insert(std::upper_bound(senders.begin(), senders.end(), g), g);
    }
    for (size_t i = 0; i < frags.size(); ++i)
      if (choice[i] < 0) {
        choice[i] = src_rank_on_gpu[rider_of[-2 - choice[i]]];
        RESHARD_CHECK(choice[i] >= 0, "chosen GPU holds no source rank");
      }
    for (const auto& [e, elems] : riders[r]) rider_of[e] = -1;
  }
  return out;
}

}  // namespace reshard
