// Replica blocks (planner/replica_blocks.h): finding a split of a scenario
// into identical blocks, and the whole's plan from a block's.
#include "planner/replica_blocks.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <utility>
#include <variant>

#include <fmt/format.h>

#include "model/error.h"
#include "model/layout.h"
#include "planner/transfer_set.h"

namespace reshard {

namespace {

struct Whole {
  const Scenario& s;
  Layout src, dst;
  std::vector<GpuMemoryAtStart> mem;
};

bool SameShard(const Shard& a, const Shard& b) {
  if (a.buffers.size() != b.buffers.size() || a.pieces.size() != b.pieces.size()) return false;
  for (size_t i = 0; i < a.buffers.size(); ++i)
    if (a.buffers[i].name != b.buffers[i].name || a.buffers[i].layer != b.buffers[i].layer ||
        a.buffers[i].elems != b.buffers[i].elems)
      return false;
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    const Piece &x = a.pieces[i], &y = b.pieces[i];
    if (x.tensor != y.tensor || x.box != y.box || x.buffer != y.buffer || x.offset != y.offset || x.stride != y.stride)
      return false;
  }
  return true;
}

bool SameStart(const GpuMemoryAtStart& a, const GpuMemoryAtStart& b) {
  return a.training_weights == b.training_weights && a.gradients == b.gradients && a.optimizer == b.optimizer &&
         a.kv_cache == b.kv_cache && a.reserve == b.reserve && a.overheads == b.overheads;
}

// Whether every rank of block 0 of layout `block` holds what its rank of the
// whole (`whole_rank[r]`) does; distinct shard pairs compared once.
bool SameShards(const Layout& block, const Layout& whole, const std::vector<int32_t>& whole_rank) {
  std::map<std::pair<int32_t, int32_t>, bool> seen;
  for (int32_t r = 0; r < block.Ranks(); ++r) {
    const std::pair<int32_t, int32_t> key{block.rank_shard[r], whole.rank_shard[whole_rank[r]]};
    auto [it, fresh] = seen.try_emplace(key, false);
    if (fresh) it->second = SameShard(block.shards[key.first], whole.shards[key.second]);
    if (!it->second) return false;
  }
  return true;
}

// Block rank r in block k -> the whole's rank: source ranks tp-cp-ep-dp-pp,
// so (inner, dp, pp) with dp shifted by k·a; destination ranks tp-pp-dp.
struct RankMaps {
  int32_t a = 0, b = 0, sr = 0, dr = 0;  // replicas and ranks per block, source and destination
  std::vector<int32_t> src, dst;         // [k · sr + r], [k · dr + r]
  RankMaps(const Scenario& s, int32_t n) {
    const SourceParallel& sp = s.source;
    const int32_t tc = sp.tp * sp.cp, tcd = tc * sp.dp;
    a = sp.dp / n, b = s.destination.dp / n;
    sr = tc * a * sp.pp, dr = s.destination.tp * s.destination.pp * b;
    src.resize(static_cast<size_t>(n) * sr);
    dst.resize(static_cast<size_t>(n) * dr);
    for (int32_t k = 0; k < n; ++k) {
      for (int32_t r = 0; r < sr; ++r) {
        const int32_t inner = r % tc, d = (r / tc) % a, pp = r / (tc * a);
        src[static_cast<size_t>(k) * sr + r] = inner + tc * (d + k * a) + tcd * pp;
      }
      for (int32_t r = 0; r < dr; ++r) dst[static_cast<size_t>(k) * dr + r] = r + dr * k;
    }
  }
  int32_t Src(int32_t k, int32_t r) const { return src[static_cast<size_t>(k) * sr + r]; }
  int32_t Dst(int32_t k, int32_t r) const { return dst[static_cast<size_t>(k) * dr + r]; }
};

// Why the layouts do not repeat over n blocks ("" when they do): block k's
// ranks hold what block 0's do. O(ranks).
std::string RepeatProblem(const Whole& w, int32_t n) {
  const Scenario& s = w.s;
  if (s.source.dp % n != 0 || s.destination.dp % n != 0)
    return fmt::format("source dp={} and destination dp={} are not both multiples of {}", s.source.dp,
                       s.destination.dp, n);
  const RankMaps m(s, n);
  for (int32_t k = 1; k < n; ++k) {
    for (int32_t r = 0; r < m.sr; ++r)
      if (w.src.rank_shard[m.Src(k, r)] != w.src.rank_shard[m.Src(0, r)])
        return fmt::format("source rank {} holds other weights than rank {}", m.Src(k, r), m.Src(0, r));
    for (int32_t r = 0; r < m.dr; ++r)
      if (w.dst.rank_shard[m.Dst(k, r)] != w.dst.rank_shard[m.Dst(0, r)])
        return fmt::format("destination rank {} holds other weights than rank {}", m.Dst(k, r), m.Dst(0, r));
  }
  return "";
}

// n blocks of `w`, or why not.
std::variant<ReplicaBlocks, std::string> TrySplit(const Whole& w, int32_t n) {
  const Scenario& s = w.s;
  if (std::string why = RepeatProblem(w, n); !why.empty()) return why;
  RankMaps maps(s, n);
  const int32_t sr = maps.sr, dr = maps.dr;
  auto src_rank = [&](int32_t k, int32_t r) { return maps.Src(k, r); };
  auto dst_rank = [&](int32_t k, int32_t r) { return maps.Dst(k, r); };
  ReplicaBlocks rb;
  rb.count = n;

  const Cluster& c = s.cluster;
  const int32_t gpus = c.Gpus(), gpn = c.gpus_per_node;
  std::vector<uint8_t> is_dst(gpus, 0);
  for (int32_t g : s.destination_gpus) is_dst[g] = 1;
  std::string why;
  auto fail = [&](const char* reason) { why += (why.empty() ? "" : "; placed among its source GPUs, ") + std::string(reason); };
  // Attempt 0: destination ranks on their initial GPUs; 1 (placement free):
  // block k's destination ranks, in order, on the destination GPUs among its
  // source GPUs, in GPU order.
  for (int attempt = 0; attempt < (s.destination_placement_free ? 2 : 1); ++attempt) {
    std::vector<std::vector<int32_t>> dgpu(n);
    bool sizes_ok = true;
    for (int32_t k = 0; k < n && sizes_ok; ++k) {
      if (attempt == 0) {
        for (int32_t r = 0; r < dr; ++r) dgpu[k].push_back(s.destination_gpus[dst_rank(k, r)]);
      } else {
        for (int32_t r = 0; r < sr; ++r)
          if (const int32_t g = s.source_gpus[src_rank(k, r)]; is_dst[g]) dgpu[k].push_back(g);
        std::sort(dgpu[k].begin(), dgpu[k].end());
        dgpu[k].erase(std::unique(dgpu[k].begin(), dgpu[k].end()), dgpu[k].end());
        sizes_ok = static_cast<int32_t>(dgpu[k].size()) == dr;
      }
    }
    if (!sizes_ok) {
      fail("a block's source GPUs do not hold its destination ranks");
      continue;
    }
    std::vector<int32_t> owner(gpus, -1);
    bool overlap = false;
    auto mark = [&](int32_t g, int32_t k) {
      if (owner[g] >= 0 && owner[g] != k) overlap = true;
      owner[g] = k;
    };
    for (int32_t k = 0; k < n; ++k) {
      for (int32_t r = 0; r < sr; ++r) mark(s.source_gpus[src_rank(k, r)], k);
      for (int32_t g : dgpu[k]) mark(g, k);
    }
    if (overlap) {
      fail("the blocks' GPUs overlap");
      continue;
    }
    std::vector<std::vector<int32_t>> u(n);  // per block, its GPUs in order
    for (int32_t g = 0; g < gpus; ++g)
      if (owner[g] >= 0) u[owner[g]].push_back(g);
    const size_t bg = u[0].size();
    bool ok = bg % static_cast<size_t>(gpn) == 0;
    for (int32_t k = 0; k < n && ok; ++k) {
      ok = u[k].size() == bg;
      for (size_t i = 0; i < bg && ok; i += gpn)  // whole nodes, each GPU in its slot
        for (int32_t j = 0; j < gpn && ok; ++j) ok = u[k][i] % gpn == 0 && u[k][i + j] == u[k][i] + j;
    }
    if (!ok) {
      fail("a block does not hold whole nodes");
      continue;
    }
    const int32_t bn = static_cast<int32_t>(bg) / gpn, m = c.nvlink_domain_nodes;
    for (int32_t k = 0; k < n && ok; ++k)
      for (int32_t j = 0; j < bn && ok; j += m) {  // whole NVLink domains
        const int32_t first = u[k][static_cast<size_t>(j) * gpn] / gpn, count = std::min(m, bn - j);
        const int32_t domain = first / m;
        ok = first % m == 0 && std::min(m, c.nodes - domain * m) == count;
        for (int32_t x = 1; x < count && ok; ++x) ok = u[k][static_cast<size_t>(j + x) * gpn] / gpn == first + x;
      }
    if (!ok) {
      fail("a block does not hold whole NVLink domains");
      continue;
    }
    std::vector<int32_t> pos(gpus, -1);
    for (int32_t k = 0; k < n; ++k)
      for (size_t i = 0; i < bg; ++i) pos[u[k][i]] = static_cast<int32_t>(i);
    for (int32_t k = 1; k < n && ok; ++k) {
      for (int32_t r = 0; r < sr && ok; ++r)
        ok = pos[s.source_gpus[src_rank(k, r)]] == pos[s.source_gpus[src_rank(0, r)]];
      for (int32_t r = 0; r < dr && ok; ++r) ok = pos[dgpu[k][r]] == pos[dgpu[0][r]];
      for (size_t i = 0; i < bg && ok; ++i) ok = SameStart(w.mem[u[k][i]], w.mem[u[0][i]]);
    }
    if (!ok) {
      fail("the blocks' ranks or start memory sit differently on their GPUs");
      continue;
    }

    Scenario& bs = rb.block;
    bs = s;
    bs.cluster.nodes = bn;
    bs.source.dp = maps.a;
    bs.destination.dp = maps.b;
    bs.source_gpus.resize(sr);
    for (int32_t r = 0; r < sr; ++r) bs.source_gpus[r] = pos[s.source_gpus[src_rank(0, r)]];
    bs.destination_gpus.resize(dr);
    for (int32_t r = 0; r < dr; ++r) bs.destination_gpus[r] = pos[dgpu[0][r]];
    auto in = std::make_shared<ProblemInputs>();
    try {
      in->src = MakeSourceLayout(bs.model, bs.source, bs.dtype, bs.path);
      in->dst = MakeDestinationLayout(bs.model, bs.destination, bs.destination_dtype, bs.path);
    } catch (const InputError& e) {
      return std::string("the block's layouts: ") + e.what();
    }
    if (!SameShards(in->src, w.src, maps.src) || !SameShards(in->dst, w.dst, maps.dst))
      return std::string("a block of its own lays out other weights than the whole's block");
    in->byte_view = false;
    in->memory_at_start.resize(bg);
    for (size_t i = 0; i < bg; ++i) {
      in->memory_at_start[i] = w.mem[u[0][i]];
      in->memory_at_start[i].gpu = static_cast<int32_t>(i);
    }
    rb.inputs = std::move(in);
    rb.gpu_of.reserve(static_cast<size_t>(n) * bg);
    for (int32_t k = 0; k < n; ++k) rb.gpu_of.insert(rb.gpu_of.end(), u[k].begin(), u[k].end());
    rb.src_rank_of = std::move(maps.src);
    rb.dst_rank_of = std::move(maps.dst);
    return rb;
  }
  return why;
}

bool Digits(std::string_view t) {
  return !t.empty() && std::all_of(t.begin(), t.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
}

// Names and labels with the whole's numbers: "gpu<g>" and "GPU <g>" (GPUs),
// "r<i>" (a destination rank after "dst", else a source rank) and "s<i>" /
// "s<i>.<j>" after pack / unpack / send / recv / relay (segments).
struct Renamer {
  const ReplicaBlocks& rb;
  int32_t block_gpus, src_ranks, dst_ranks, segment_span;

  std::string operator()(const std::string& text, int32_t k) const {
    if (text.empty()) return text;
    std::string out;
    out.reserve(text.size() + 8);
    std::string_view prev;
    size_t i = 0;
    while (i <= text.size()) {
      const size_t end = std::min(text.find(' ', i), text.size());
      const std::string_view t(text.data() + i, end - i);
      size_t digits = t.size();  // trailing punctuation kept as is
      while (digits > 0 && !std::isdigit(static_cast<unsigned char>(t[digits - 1]))) --digits;
      const std::string_view core = t.substr(0, digits), tail = t.substr(digits);
      std::string mapped(t);
      auto num = [](std::string_view d) { return static_cast<int32_t>(std::stol(std::string(d))); };
      if (core.size() > 3 && core.substr(0, 3) == "gpu" && Digits(core.substr(3))) {
        mapped = fmt::format("gpu{}{}", Gpu(num(core.substr(3)), k), tail);
      } else if (prev == "GPU" && Digits(core)) {
        mapped = fmt::format("{}{}", Gpu(num(core), k), tail);
      } else if (core.size() > 1 && core[0] == 'r' && Digits(core.substr(1))) {
        const int32_t r = num(core.substr(1));
        const bool dst = prev == "dst";
        const int32_t per = dst ? dst_ranks : src_ranks;
        if (r < per)
          mapped = fmt::format("r{}{}", (dst ? rb.dst_rank_of : rb.src_rank_of)[static_cast<size_t>(k) * per + r], tail);
      } else if ((prev == "pack" || prev == "unpack" || prev == "send" || prev == "recv" || prev == "relay") &&
                 core.size() > 1 && core[0] == 's') {
        const std::string_view rest = core.substr(1);
        const size_t dot = rest.find('.');
        if (Digits(rest.substr(0, dot)) && (dot == std::string_view::npos || Digits(rest.substr(dot + 1))))
          mapped = fmt::format("s{}{}{}", num(rest.substr(0, dot)) + k * segment_span,
                               dot == std::string_view::npos ? std::string_view() : rest.substr(dot), tail);
      }
      if (i > 0) out += ' ';
      out += mapped;
      prev = t;
      i = end + 1;
    }
    return out;
  }
  int32_t Gpu(int32_t g, int32_t k) const {
    return g >= 0 && g < block_gpus ? rb.gpu_of[static_cast<size_t>(k) * block_gpus + g] : g;
  }
};

template <class T>
std::vector<T> MapPerGpu(const std::vector<T>& block, const ReplicaBlocks& rb, int32_t whole_gpus) {
  if (block.empty()) return {};
  std::vector<T> out(static_cast<size_t>(whole_gpus));
  const size_t bg = block.size();
  for (int32_t k = 0; k < rb.count; ++k)
    for (size_t i = 0; i < bg; ++i) out[rb.gpu_of[k * bg + i]] = block[i];
  return out;
}

}  // namespace

std::optional<ReplicaBlocks> FindReplicaBlocks(const Scenario& s, const PlannerOptions& options) {
  const int32_t forced = options.replica_blocks;
  if (forced < 0)
    throw InputError("<options>", "replica_blocks", fmt::format("{} blocks: expected 0 (auto), 1 or more", forced));
  if (options.inputs || forced == 1) return std::nullopt;
  const int32_t most = std::gcd(s.source.dp, s.destination.dp);
  if (forced == 0 && most < 2) return std::nullopt;
  Whole w{s, MakeSourceLayout(s.model, s.source, s.dtype, s.path),
          MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path), {}};
  // Auto: the block counts whose layouts repeat, before the transfer set (most scenarios have none: MoE
  // destinations, source experts over every rank of a stage).
  std::vector<int32_t> counts;
  if (forced == 0) {
    for (int32_t n = most; n >= 2; --n)
      // A block keeps a choice of source replicas (planner/assign.h balances senders over them): one replica per
      // block planned grid llama3-405b H200 TP8xPP8xDP2 -> TP8xDP16 4.5 % slower
      // (bench/results/2026-12-07-cpu-replica-blocks).
      if (most % n == 0 && s.source.dp / n >= 2 && RepeatProblem(w, n).empty()) counts.push_back(n);
    if (counts.empty()) return std::nullopt;
  }
  const TransferSet ts = BuildTransferSet(s.model, w.src, w.dst);
  CheckPlanFragments(w.dst, ts, s.path);
  w.mem = MemoryAtStart(s, w.src);
  if (forced > 1) {
    auto r = TrySplit(w, forced);
    if (auto* why = std::get_if<std::string>(&r))
      throw InputError(s.path, "replica_blocks", fmt::format("the refit does not split into {} identical blocks: {}", forced, *why));
    return std::get<ReplicaBlocks>(std::move(r));
  }
  const int64_t fragments = DestinationFragments(w.dst, ts), small = options.simulate_max_fragments;
  if (fragments <= small) return std::nullopt;
  for (int32_t n : counts) {
    if (fragments / n <= small) continue;
    auto r = TrySplit(w, n);
    if (auto* rb = std::get_if<ReplicaBlocks>(&r)) return std::move(*rb);
  }
  return std::nullopt;
}

PlanResult ReplicateBlocks(PlanResult r, const ReplicaBlocks& rb, const Scenario& whole) {
  const int32_t n = rb.count, bg = rb.block.cluster.Gpus(), gpus = whole.cluster.Gpus();
  const Plan& bp = r.plan;
  int32_t group_span = 0, segment_span = 0;
  for (const Op& op : bp.ops) group_span = std::max(group_span, op.group + 1), segment_span = std::max(segment_span, op.segment + 1);
  const Renamer rename{rb, bg, static_cast<int32_t>(rb.src_rank_of.size() / n),
                       static_cast<int32_t>(rb.dst_rank_of.size() / n), segment_span};
  if (!r.ok()) {
    if (r.gpu >= 0) r.gpu = rename.Gpu(r.gpu, 0);
    r.message = rename(r.message, 0);
    return r;
  }
  const int32_t nb = static_cast<int32_t>(bp.buffers.size()), no = static_cast<int32_t>(bp.ops.size());
  PlanResult out;
  out.status = r.status;
  Plan& p = out.plan;
  p.format_version = bp.format_version;
  p.name = whole.name;
  p.cluster = whole.cluster;
  p.cluster_fingerprint = whole.cluster.Fingerprint();
  p.scenario_fingerprint = bp.scenario_fingerprint;
  p.stream_names = bp.stream_names;
  p.tensors = bp.tensors;
  p.buffers.reserve(static_cast<size_t>(n) * nb);
  p.ops.reserve(static_cast<size_t>(n) * no);
  p.sources.reserve(bp.sources.size() * n);
  p.destinations.reserve(bp.destinations.size() * n);
  for (int32_t k = 0; k < n; ++k) {
    const int32_t b0 = k * nb, o0 = k * no;
    auto buf = [&](int32_t b) { return b >= 0 ? b + b0 : b; };
    for (const PlanBuffer& b : bp.buffers) {
      PlanBuffer& x = p.buffers.emplace_back(b);
      x.id = b.id + b0;
      x.gpu = rename.Gpu(b.gpu, k);
      x.name = rename(b.name, k);
    }
    for (const Op& op : bp.ops) {
      Op& x = p.ops.emplace_back(op);
      x.id = op.id + o0;
      x.gpu = rename.Gpu(op.gpu, k);
      for (int32_t& d : x.deps) d += o0;
      x.buffer = buf(op.buffer);
      for (CopyPair& cp : x.copies) cp.src.buffer = buf(cp.src.buffer), cp.dst.buffer = buf(cp.dst.buffer);
      for (QuantizeTile& t : x.tiles)
        t.input.buffer = buf(t.input.buffer), t.output.buffer = buf(t.output.buffer), t.scales.buffer = buf(t.scales.buffer);
      x.region.buffer = buf(op.region.buffer);
      if (op.peer >= 0) x.peer = rename.Gpu(op.peer, k);
      if (op.match >= 0) x.match = op.match + o0;
      if (op.group >= 0) x.group = op.group + k * group_span;
      if (op.segment >= 0) x.segment = op.segment + k * segment_span;
      x.label = rename(op.label, k);
    }
    for (const ContentPiece& c : bp.sources) p.sources.emplace_back(c).buffer = buf(c.buffer);
    for (const ContentPiece& c : bp.destinations) p.destinations.emplace_back(c).buffer = buf(c.buffer);
  }
  p.summary = bp.summary;
  BytesMoved& m = p.summary.bytes_moved;
  m.local *= n, m.nvlink *= n, m.network *= n, m.pcie *= n;
  p.summary.predicted_peak_bytes = MapPerGpu(bp.summary.predicted_peak_bytes, rb, gpus);
  out.stats = std::move(r.stats);
  PlanStats& st = out.stats;
  for (int64_t* x : {&st.segments, &st.direct, &st.groups, &st.local_copy_ops, &st.fragments, &st.ops, &st.relayed_bytes,
                     &st.send_relayed_bytes, &st.recv_relayed_bytes})
    *x *= n;
  st.planned_peak_bytes = MapPerGpu(st.planned_peak_bytes, rb, gpus);
  st.peak_parts = MapPerGpu(st.peak_parts, rb, gpus);
  st.replica_blocks = n;
  return out;
}

}  // namespace reshard
