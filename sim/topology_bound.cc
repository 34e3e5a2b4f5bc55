// The routing-independent lower bound (sim/topology_bound.h; the derivation
// is docs/lower-bound.md). Two steps:
//  1. Classify: per tensor, the edges of every source and destination box cut
//     it into a grid of cells; each cell has one set of holders and one list
//     of needers, and its bytes are added to a few per-GPU and per-(holding
//     domains, needing domain) totals. O(pieces + cells covered).
//  2. Bound: the totals become a circulation with lower bounds whose port
//     arcs have capacity T × bandwidth; feasible iff a max-flow saturates the
//     demands. The least feasible T comes from Newton's method on the min cut:
//     a cut of constant capacity a and bandwidth b cannot carry demand L before
//     T = (L - a) / b, so every step's root is a valid bound and the roots rise
//     to the optimum (a finite number of distinct cuts; a few steps in practice).
#include "sim/topology_bound.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <unordered_map>
#include <vector>

// GCC warns of maybe-uninitialized iterators inside Boost's push-relabel (a
// false positive of its optimizer, not of this file).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>
#include <fmt/format.h>

#include "model/error.h"
#include "sim/ports.h"

namespace reshard {

namespace {

constexpr int64_t kInf = int64_t{1} << 60;

// The contents, aggregated to what the bound needs.
struct Demand {
  // Per GPU: bytes its destination pieces need (a byte needed twice counts
  // twice), of which held by its own source buffers on the device / on its host.
  std::vector<int64_t> need, need_held_device, need_held_host;
  // Per GPU: distinct bytes it needs and holds neither on the device nor on
  // its host (what must come in over NVLink or its NIC).
  std::vector<int64_t> need_in;
  // Per GPU h: distinct bytes held by h alone (device or its host) and needed
  // by another GPU / by another GPU of h's domain; held by h's host alone.
  std::vector<int64_t> only_out, only_domain, host_only;
  std::vector<std::vector<int32_t>> holder_sets;  // id -> sorted holding domains
  struct Pair {
    int32_t q = -1, d = -1;  // holder set id, needing domain
    int64_t coverage = 0;    // bytes × needers in d (the most landings that can be of use)
    int64_t distinct = 0;    // distinct bytes d needs and does not hold (each must land once)
  };
  std::vector<Pair> pairs;
};

class Classifier {
 public:
  explicit Classifier(const Plan& p) : p_(p), c_(p.cluster) {
    const size_t g = static_cast<size_t>(c_.Gpus());
    for (auto* v : {&d_.need, &d_.need_held_device, &d_.need_held_host, &d_.need_in, &d_.only_out, &d_.only_domain,
                    &d_.host_only})
      v->assign(g, 0);
  }

  Demand Run() {
    const size_t nt = p_.tensors.size();
    std::vector<std::vector<int32_t>> src(nt), dst(nt);
    for (size_t i = 0; i < p_.sources.size(); ++i) src[Tensor(p_.sources[i])].push_back(static_cast<int32_t>(i));
    // Quantized values need the bf16 tensor they quantize, at their own (fp8)
    // size: the fewest bytes any plan can move for them. Scales are left out
    // (a bound that ignores bytes stays a bound).
    elem_.assign(nt, 0);
    for (size_t t = 0; t < nt; ++t) elem_[t] = DTypeBytes(p_.tensors[t].dtype);
    for (size_t i = 0; i < p_.destinations.size(); ++i) {
      const TensorQuant& q = p_.tensors[Tensor(p_.destinations[i])].quant;
      if (q.role == QuantRole::kScales) continue;
      size_t t = Tensor(p_.destinations[i]);
      if (q.role == QuantRole::kValues) {
        t = static_cast<size_t>(q.of);
        elem_[t] = DTypeBytes(p_.tensors[p_.destinations[i].tensor].dtype);
      }
      dst[t].push_back(static_cast<int32_t>(i));
    }
    for (size_t t = 0; t < nt; ++t) {
      if (!dst[t].empty()) OneTensor(t, src[t], dst[t]);
    }
    return std::move(d_);
  }

 private:
  size_t Tensor(const ContentPiece& cp) const {
    RESHARD_CHECK(cp.tensor >= 0 && static_cast<size_t>(cp.tensor) < p_.tensors.size(),
                  fmt::format("content piece of tensor {} outside the plan's {}", cp.tensor, p_.tensors.size()));
    RESHARD_CHECK(cp.buffer >= 0 && static_cast<size_t>(cp.buffer) < p_.buffers.size(),
                  fmt::format("content piece in buffer {} outside the plan's {}", cp.buffer, p_.buffers.size()));
    return static_cast<size_t>(cp.tensor);
  }

  // Cell index ranges a box covers, per dimension.
  std::array<std::pair<int64_t, int64_t>, 3> Ranges(const Box& b) const {
    std::array<std::pair<int64_t, int64_t>, 3> r;
    for (int d = 0; d < 3; ++d) {
      const auto& cu = cuts_[d];
      r[d] = {std::lower_bound(cu.begin(), cu.end(), b.lo[d]) - cu.begin(),
              std::lower_bound(cu.begin(), cu.end(), b.hi[d]) - cu.begin()};
    }
    return r;
  }

  // Counting sort of piece codes into cells (CSR: start[cell] .. start[cell+1]).
  void Bucket(const std::vector<int32_t>& pieces, const std::vector<ContentPiece>& content, bool source,
              std::vector<int64_t>& start, std::vector<int32_t>& codes) {
    start.assign(static_cast<size_t>(ncell_) + 1, 0);
    auto each = [&](auto&& fn) {
      for (int32_t i : pieces) {
        const ContentPiece& cp = content[i];
        const PlanBuffer& buf = p_.buffers[cp.buffer];
        const int32_t code = source ? 2 * buf.gpu + (buf.space == MemorySpace::kHost ? 1 : 0) : buf.gpu;
        const auto r = Ranges(cp.box);
        for (int64_t a = r[0].first; a < r[0].second; ++a)
          for (int64_t b = r[1].first; b < r[1].second; ++b)
            for (int64_t e = r[2].first; e < r[2].second; ++e) fn((a * n_[1] + b) * n_[2] + e, code);
      }
    };
    each([&](int64_t cell, int32_t) { ++start[cell + 1]; });
    for (int64_t i = 0; i < ncell_; ++i) start[i + 1] += start[i];
    codes.assign(static_cast<size_t>(start[ncell_]), 0);
    std::vector<int64_t> at(start.begin(), start.end() - 1);
    each([&](int64_t cell, int32_t code) { codes[at[cell]++] = code; });
  }

  void OneTensor(size_t t, const std::vector<int32_t>& src, const std::vector<int32_t>& dst) {
    for (auto& cu : cuts_) cu.clear();
    for (const auto* list : {&src, &dst}) {
      const auto& content = list == &src ? p_.sources : p_.destinations;
      for (int32_t i : *list) {
        for (int d = 0; d < 3; ++d) {
          cuts_[d].push_back(content[i].box.lo[d]);
          cuts_[d].push_back(content[i].box.hi[d]);
        }
      }
    }
    ncell_ = 1;
    for (int d = 0; d < 3; ++d) {
      std::sort(cuts_[d].begin(), cuts_[d].end());
      cuts_[d].erase(std::unique(cuts_[d].begin(), cuts_[d].end()), cuts_[d].end());
      n_[d] = std::max<int64_t>(static_cast<int64_t>(cuts_[d].size()) - 1, 0);
      ncell_ *= n_[d];
    }
    if (ncell_ == 0) return;
    Bucket(src, p_.sources, true, src_start_, src_codes_);
    Bucket(dst, p_.destinations, false, dst_start_, dst_codes_);
    const int64_t elem = elem_[t];
    for (int64_t a = 0; a < n_[0]; ++a)
      for (int64_t b = 0; b < n_[1]; ++b)
        for (int64_t e = 0; e < n_[2]; ++e) {
          const int64_t cell = (a * n_[1] + b) * n_[2] + e;
          if (dst_start_[cell] == dst_start_[cell + 1]) continue;
          const int64_t bytes = (cuts_[0][a + 1] - cuts_[0][a]) * (cuts_[1][b + 1] - cuts_[1][b]) *
                                (cuts_[2][e + 1] - cuts_[2][e]) * elem;
          Cell(t, bytes, src_codes_.data() + src_start_[cell], src_codes_.data() + src_start_[cell + 1],
               dst_codes_.data() + dst_start_[cell], dst_codes_.data() + dst_start_[cell + 1]);
        }
  }

  void Cell(size_t t, int64_t bytes, int32_t* hb, int32_t* he, int32_t* nb, int32_t* ne) {
    std::sort(hb, he);
    he = std::unique(hb, he);
    RESHARD_CHECK(hb != he, fmt::format("bytes of tensor {} needed at a destination that no source holds",
                                        p_.tensors[t].name));
    std::sort(nb, ne);  // by GPU, hence by domain (a domain is consecutive GPUs)
    auto holds = [&](int32_t code) { return std::binary_search(hb, he, code); };
    doms_.clear();
    bool device = false;
    const int32_t first = *hb / 2;
    bool single = true;
    for (const int32_t* h = hb; h != he; ++h) {
      doms_.push_back(c_.DomainOf(*h / 2));
      device |= *h % 2 == 0;
      single &= *h / 2 == first;
    }
    doms_.erase(std::unique(doms_.begin(), doms_.end()), doms_.end());  // holders sorted: domains too
    auto [it, fresh] = q_ids_.try_emplace(doms_, static_cast<int32_t>(d_.holder_sets.size()));
    if (fresh) d_.holder_sets.push_back(doms_);
    const int32_t q = it->second;
    bool other = false, other_in_domain = false;
    for (const int32_t* n = nb; n != ne;) {
      const int32_t dom = c_.DomainOf(*n);
      int64_t k = 0;
      for (; n != ne && c_.DomainOf(*n) == dom; ++n, ++k) {
        const int32_t g = *n;
        d_.need[g] += bytes;
        if (holds(2 * g)) d_.need_held_device[g] += bytes;
        else if (holds(2 * g + 1)) d_.need_held_host[g] += bytes;
        else if (n == nb || n[-1] != g) d_.need_in[g] += bytes;  // needers are sorted: once per GPU
        if (g != first) {
          other = true;
          other_in_domain |= dom == c_.DomainOf(first);
        }
      }
      auto [pit, pfresh] = pair_ids_.try_emplace(int64_t{q} * (c_.Gpus() + 1) + dom, 0);
      if (pfresh) {
        pit->second = static_cast<int32_t>(d_.pairs.size());
        d_.pairs.push_back({q, dom, 0, 0});
      }
      Demand::Pair& pr = d_.pairs[pit->second];
      pr.coverage += bytes * k;
      if (!std::binary_search(doms_.begin(), doms_.end(), dom)) pr.distinct += bytes;
    }
    if (single) {
      if (other) d_.only_out[first] += bytes;
      if (other_in_domain) d_.only_domain[first] += bytes;
      if (!device) d_.host_only[first] += bytes;
    }
  }

  const Plan& p_;
  const Cluster& c_;
  Demand d_;
  std::array<std::vector<int64_t>, 3> cuts_;
  std::array<int64_t, 3> n_{0, 0, 0};
  int64_t ncell_ = 0;
  std::vector<int64_t> elem_;  // per tensor: bytes an element of its destination pieces needs
  std::vector<int64_t> src_start_, dst_start_;
  std::vector<int32_t> src_codes_, dst_codes_, doms_;
  std::map<std::vector<int32_t>, int32_t> q_ids_;
  std::unordered_map<int64_t, int32_t> pair_ids_;
};

// A port arc's kind, for naming the binding ports.
enum class Kind : uint8_t { kConst, kNicOut, kNicIn, kNvlinkOut, kNvlinkIn, kCopy, kH2D };
constexpr std::array<const char*, 7> kKindName{"", "nic_out", "nic_in", "nvlink_out", "nvlink_in", "copy", "pcie_h2d"};

struct Arc {
  int32_t u = 0, v = 0;
  int64_t constant = 0;  // bytes (kConst)
  double bytes_per_s = 0;  // capacity T × bytes_per_s (port arcs)
  Kind kind = Kind::kConst;
  int32_t owner = -1;      // GPU, NIC or (kNicOut) domain
  int32_t ports = 1;       // physical ports it stands for (kNicOut: the domain's NICs)
};

class FlowBound {
 public:
  FlowBound(const Cluster& c, const Demand& d) : c_(c), d_(d) { Build(); }

  TopologyBound Solve() {
    TopologyBound r;
    r.graph_nodes = nodes_;
    r.graph_arcs = static_cast<int64_t>(arcs_.size());
    if (required_ == 0) return r;
    Prepare();
    double t = 0;
    std::vector<int32_t> cut;
    for (int step = 0; step < 100; ++step) {
      ++r.newton_steps;
      if (MaxFlow(t) >= required_) break;  // feasible at t: t is the optimum
      std::vector<int32_t> next = MinCut();
      double a = 0, b = 0;
      for (int32_t i : next) {
        if (arcs_[i].kind == Kind::kConst) a += static_cast<double>(arcs_[i].constant);
        else b += arcs_[i].bytes_per_s;
      }
      RESHARD_CHECK(b > 0, "destination bytes with no route from any holder (a port of zero bandwidth?)");
      const double root = (static_cast<double>(required_) - a) / b;
      if (root <= t * (1 + 1e-12)) break;  // rounding: no cut left to raise t
      t = root;
      cut = std::move(next);
    }
    r.flow_s = r.time_s = t;
    r.binding = Describe(cut);
    return r;
  }

 private:
  int32_t Node() { return nodes_++; }
  void Const(int32_t u, int32_t v, int64_t bytes) {
    if (bytes > 0) arcs_.push_back({u, v, bytes, 0, Kind::kConst, -1, 1});
  }
  void Port(int32_t u, int32_t v, double bytes_per_s, Kind k, int32_t owner, int32_t ports = 1) {
    if (bytes_per_s > 0) arcs_.push_back({u, v, 0, bytes_per_s, k, owner, ports});
  }

  // The circulation of docs/lower-bound.md with its lower bounds moved to a
  // super source s' and sink t' (the standard reduction): feasible iff the
  // max s'-t' flow equals `required_`.
  void Build() {
    const int32_t gpus = c_.Gpus();
    // The last domain may have fewer nodes (nodes not a multiple of nvlink_domain_nodes).
    const int32_t per_dom = c_.gpus_per_node * c_.nvlink_domain_nodes;
    const int32_t doms = (gpus + per_dom - 1) / per_dom;
    const int32_t nics_per_dom = std::max(c_.nics_per_node, 0) * c_.nvlink_domain_nodes;
    const int32_t nics = std::max(c_.nics_per_node, 0) * c_.nodes;
    auto gpus_of = [&](int32_t dom) { return std::min(per_dom, gpus - dom * per_dom); };
    auto nics_of = [&](int32_t dom) { return std::min(nics_per_dom, nics - dom * nics_per_dom); };
    src_ = Node(), sink_ = Node();
    const int32_t inner = Node();  // the circulation's source (its sink arcs return here)
    int64_t need_all = 0;
    for (int64_t n : d_.need) need_all += n;
    Const(src_, inner, need_all);
    required_ = need_all;
    std::vector<int32_t> dom_out(doms, -1), dom_net(doms, -1);
    for (int32_t h = 0; h < doms && nics_per_dom > 0; ++h) {
      dom_out[h] = Node();
      Port(inner, dom_out[h], c_.network.bytes_per_s * nics_of(h), Kind::kNicOut, h, nics_of(h));
    }
    std::vector<int64_t> landing(doms, 0);
    // A pair's node is reached from every holding domain but its own through a segment tree over each holder set
    // (a tree node: the holders of its range), not an arc per holder: the same max-flow with O(holders) arcs per set
    // and O(log holders) per pair (llama3-70b colocated on 8192 GPUs: 607 K -> ~100 K arcs).
    std::vector<std::vector<int32_t>> tree(d_.holder_sets.size());  // per set: heap-indexed tree nodes, -1: not built
    auto range_node = [&](auto&& self, int32_t q, size_t at, size_t lo, size_t hi) -> int32_t {
      const std::vector<int32_t>& holders = d_.holder_sets[q];
      if (hi - lo == 1) return dom_out[holders[lo]];
      if (tree[q][at] >= 0) return tree[q][at];
      const size_t mid = (lo + hi) / 2;
      const int32_t left = self(self, q, 2 * at, lo, mid), right = self(self, q, 2 * at + 1, mid, hi);
      const int32_t v = Node();
      Const(left, v, kInf);
      Const(right, v, kInf);
      return tree[q][at] = v;
    };
    // Arcs into k from the tree nodes that cover holders [a, b) of set q.
    auto cover = [&](auto&& self, int32_t q, size_t at, size_t lo, size_t hi, size_t a, size_t b, int32_t k) -> void {
      if (b <= lo || hi <= a) return;
      if (a <= lo && hi <= b) {
        Const(range_node(range_node, q, at, lo, hi), k, kInf);
        return;
      }
      const size_t mid = (lo + hi) / 2;
      self(self, q, 2 * at, lo, mid, a, b, k);
      self(self, q, 2 * at + 1, mid, hi, a, b, k);
    };
    for (const Demand::Pair& pr : d_.pairs) {
      const std::vector<int32_t>& holders = d_.holder_sets[pr.q];
      if (holders.size() == 1 && holders[0] == pr.d) continue;  // held in the domain: no landing can help
      RESHARD_CHECK(nics_per_dom > 0 || pr.distinct == 0,
                    fmt::format("domain {} needs bytes held only in other domains, and the cluster has no NICs", pr.d));
      if (nics_per_dom <= 0) continue;
      const int32_t k = Node();
      const size_t n = holders.size();
      if (tree[pr.q].empty()) tree[pr.q].assign(4 * n, -1);
      const auto at = std::lower_bound(holders.begin(), holders.end(), pr.d);
      const size_t j = static_cast<size_t>(at - holders.begin());
      const bool own = at != holders.end() && *at == pr.d;  // the needing domain holds them too: not from itself
      cover(cover, pr.q, 1, 0, n, 0, j, k);
      cover(cover, pr.q, 1, 0, n, own ? j + 1 : j, n, k);
      if (dom_net[pr.d] < 0) dom_net[pr.d] = Node();
      Const(k, dom_net[pr.d], pr.coverage - pr.distinct);
      Const(k, sink_, pr.distinct);
      landing[pr.d] += pr.distinct;
      required_ += pr.distinct;
    }
    for (int32_t dom = 0; dom < doms; ++dom) {
      int64_t dom_need = 0;
      const int32_t n = gpus_of(dom);
      for (int32_t g = dom * per_dom; g < dom * per_dom + n; ++g) dom_need += d_.need[g];
      if (dom_need == 0) continue;
      const int32_t pool = Node(), sw = Node();
      Const(inner, pool, kInf);
      std::vector<int32_t> land(n, -1), cov(n, -1);
      for (int32_t i = 0; i < n; ++i) {
        const int32_t g = dom * per_dom + i;
        cov[i] = Node();
        Const(cov[i], sink_, d_.need[g]);
        if (n > 1) {
          const int32_t out = Node();
          Const(pool, out, kInf);
          Port(out, sw, c_.nvlink.bytes_per_s, Kind::kNvlinkOut, g);
          Port(sw, cov[i], c_.nvlink.bytes_per_s, Kind::kNvlinkIn, g);
          land[i] = out;
        }
        if (d_.need_held_device[g] > 0) {
          const int32_t cp = Node();
          Const(pool, cp, d_.need_held_device[g]);
          Port(cp, cov[i], c_.device_copy.bytes_per_s, Kind::kCopy, g);
        }
        if (d_.need_held_host[g] > 0) {
          const int32_t h2d = Node();
          Const(pool, h2d, d_.need_held_host[g]);
          Port(h2d, cov[i], c_.pcie.bytes_per_s, Kind::kH2D, g);
        }
      }
      if (dom_net[dom] < 0) continue;
      Const(src_, dom_net[dom], landing[dom]);
      // NIC in ports: a landing covers its GPU or is forwarded over its NVLink.
      for (int32_t nic = dom * nics_per_dom; nic < dom * nics_per_dom + nics_of(dom); ++nic) {
        const int32_t a = Node(), b = Node();
        Const(dom_net[dom], a, kInf);
        Port(a, b, c_.network.bytes_per_s, Kind::kNicIn, nic);
        for (int32_t i = 0; i < n; ++i) {
          if (c_.NicOf(dom * per_dom + i) != nic) continue;
          Const(b, cov[i], kInf);
          if (land[i] >= 0) Const(b, land[i], kInf);
        }
      }
    }
  }

  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<boost::edge_capacity_t, int64_t,
                      boost::property<boost::edge_residual_capacity_t, int64_t,
                                      boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;

  void Prepare() {
    g_ = Graph(static_cast<size_t>(nodes_));
    auto rev = boost::get(boost::edge_reverse, g_);
    auto cap = boost::get(boost::edge_capacity, g_);
    fwd_.clear();
    for (const Arc& a : arcs_) {
      const auto e = boost::add_edge(a.u, a.v, g_).first;
      const auto r = boost::add_edge(a.v, a.u, g_).first;
      rev[e] = r, rev[r] = e;
      cap[r] = 0;
      fwd_.push_back(e);
    }
  }

  int64_t MaxFlow(double t) {
    auto cap = boost::get(boost::edge_capacity, g_);
    for (size_t i = 0; i < arcs_.size(); ++i) {
      const Arc& a = arcs_[i];
      // Rounded up: a cut's root below is computed from the exact capacities.
      cap[fwd_[i]] = a.kind == Kind::kConst ? a.constant
                                            : static_cast<int64_t>(std::min(std::ceil(t * a.bytes_per_s), 1e17));
    }
    return boost::push_relabel_max_flow(g_, src_, sink_);
  }

  // Arcs leaving the residual graph's source side.
  std::vector<int32_t> MinCut() {
    auto res = boost::get(boost::edge_residual_capacity, g_);
    std::vector<char> seen(static_cast<size_t>(nodes_), 0);
    std::vector<int32_t> stack{src_};
    seen[src_] = 1;
    while (!stack.empty()) {
      const int32_t u = stack.back();
      stack.pop_back();
      for (auto [e, end] = boost::out_edges(u, g_); e != end; ++e) {
        const auto v = static_cast<int32_t>(boost::target(*e, g_));
        if (!seen[v] && res[*e] > 0) seen[v] = 1, stack.push_back(v);
      }
    }
    std::vector<int32_t> cut;
    for (size_t i = 0; i < arcs_.size(); ++i)
      if (seen[arcs_[i].u] && !seen[arcs_[i].v]) cut.push_back(static_cast<int32_t>(i));
    return cut;
  }

  std::string PortName(const Arc& a) const {
    switch (a.kind) {
      case Kind::kNicOut:
        return fmt::format("nic{}.out", a.owner * c_.nvlink_domain_nodes * c_.nics_per_node);
      case Kind::kNicIn: return fmt::format("nic{}.in", a.owner);
      default: return fmt::format("gpu{}.{}", a.owner, kKindName[static_cast<int>(a.kind)]);
    }
  }

  // One port's name, or the port classes of the cut by bandwidth, with counts.
  std::string Describe(const std::vector<int32_t>& cut) const {
    std::array<double, 7> bw{};
    std::array<int64_t, 7> count{};
    int32_t last = -1;
    for (int32_t i : cut) {
      const Arc& a = arcs_[i];
      if (a.kind == Kind::kConst) continue;
      bw[static_cast<int>(a.kind)] += a.bytes_per_s;
      // A domain's NIC outs are one arc: count its NICs.
      count[static_cast<int>(a.kind)] += a.ports;
      last = i;
    }
    int64_t ports = 0;
    for (int64_t n : count) ports += n;
    if (ports == 1) return PortName(arcs_[last]);  // a domain arc of one NIC is that NIC's name
    std::vector<int> kinds;
    for (int k = 1; k < 7; ++k)
      if (count[k] > 0) kinds.push_back(k);
    std::stable_sort(kinds.begin(), kinds.end(), [&](int x, int y) { return bw[x] > bw[y]; });
    std::string s;
    for (int k : kinds) s += fmt::format("{}{} x{}", s.empty() ? "" : " + ", kKindName[k], count[k]);
    return s;
  }

  const Cluster& c_;
  const Demand& d_;
  int32_t nodes_ = 0, src_ = -1, sink_ = -1;
  int64_t required_ = 0;
  std::vector<Arc> arcs_;
  Graph g_;
  std::vector<Traits::edge_descriptor> fwd_;
};

// The least T with T >= DuplexPairSeconds(max(0, need - T nic), out, ...)
// (sim/ports.h; the pair's feasible loads in time T are the hull of (0, 0),
// (peak T, 0), (0, peak T) and (duplex T, duplex T)): a GPU's
// NVLink takes in what it needs and does not hold, less what its NIC can
// bring in T. The right side falls as T grows: bisection, at most 200 steps
// (to the double's precision), returning the infeasible end (a bound may
// round down, never up). O(1).
double DuplexCutSeconds(double need, double out, double peak, double duplex, double nic) {
  auto rhs = [&](double t) { return DuplexPairSeconds(std::max(0.0, need - t * nic), out, peak, duplex); };
  double lo = 0, hi = rhs(0);
  if (nic <= 0 || hi <= 0) return hi;
  for (int it = 0; it < 200 && hi - lo > 1e-15 * hi; ++it) {
    const double mid = (lo + hi) / 2;
    (mid >= rhs(mid) ? hi : lo) = mid;
  }
  return lo;
}

// The distinct-bytes cuts around one GPU (docs/lower-bound.md): what it
// alone holds must leave it at least once, whatever fans it out later. And
// its NVLink pair's duplex cut: what it needs and does not hold must come in
// (over NVLink, or its NIC where another domain can send it) while what it
// alone holds for its domain goes out; both directions busy, each runs at the
// duplex rate (the simulator's rule, measured on 2x H200).
std::string SingleGpuCuts(const Cluster& c, const Demand& d, TopologyBound& r) {
  std::string binding;
  const double nvl = c.nvlink.bytes_per_s, nic = c.nics_per_node > 0 ? c.network.bytes_per_s : 0;
  auto consider_s = [&](double s, const std::string& name) {
    if (s > r.cut_s) r.cut_s = s, binding = name;
  };
  auto consider = [&](int64_t bytes, double bytes_per_s, const std::string& name) {
    if (bytes <= 0) return;
    RESHARD_CHECK(bytes_per_s > 0, fmt::format("bytes must leave {} but it has no bandwidth", name));
    consider_s(static_cast<double>(bytes) / bytes_per_s, name);
  };
  const double duplex = c.nvlink.duplex_bytes_per_s > 0 ? c.nvlink.duplex_bytes_per_s : nvl;
  const bool domains = c.Gpus() > c.nvlink_domain_nodes * c.gpus_per_node;  // a NIC can bring bytes in
  for (int32_t g = 0; g < c.Gpus(); ++g) {
    consider(d.only_domain[g], nvl, fmt::format("gpu{}.nvlink_out", g));
    consider(d.only_out[g], nvl + nic,
             nic > 0 ? fmt::format("gpu{}.nvlink_out + nic{}.out", g, c.NicOf(g)) : fmt::format("gpu{}.nvlink_out", g));
    consider(d.host_only[g], c.pcie.bytes_per_s, fmt::format("gpu{}.pcie_h2d", g));
    if (duplex < nvl && nvl > 0 && d.need_in[g] > 0 && d.only_domain[g] > 0)
      consider_s(DuplexCutSeconds(static_cast<double>(d.need_in[g]), static_cast<double>(d.only_domain[g]), nvl, duplex,
                                  domains ? nic : 0),
                 fmt::format("gpu{}.nvlink_in + gpu{}.nvlink_out (duplex)", g, g));
  }
  return binding;
}

}  // namespace

#pragma GCC diagnostic pop

TopologyBound TopologyLowerBound(const Plan& p) {
  const Demand d = Classifier(p).Run();
  TopologyBound r = FlowBound(p.cluster, d).Solve();
  std::string cut = SingleGpuCuts(p.cluster, d, r);
  if (r.cut_s > r.flow_s) r.time_s = r.cut_s, r.binding = std::move(cut);
  return r;
}

}  // namespace reshard
