// Human-readable listings of a Plan: ToString (text) and ToDot (GraphViz).
//
// ToString prints a header, the buffers, then the ops grouped by (gpu,
// stream) in issue order, one line each:
//   #12 g0/comm send 64.0 MiB → g1 [group 3] deps{10,11} seg 4 match #13 b4+0
// Plans above kFullOps ops are elided in the middle (head and tail of each
// queue, head and tail of the queue list) so huge plans print in O(shown)
// lines; the grouping itself is O(N log Q) for Q queues.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "plan/plan.h"

namespace reshard {
namespace {

constexpr size_t kFullOps = 2000;     // print every op up to this many
constexpr size_t kQueueEnds = 10;     // else: first and last ops of each queue
constexpr size_t kQueueListEnds = 16; // and first and last queues
constexpr size_t kFullBuffers = 200;
constexpr size_t kBufferEnds = 50;

std::string Bytes(int64_t b) {
  if (b > -1024 && b < 1024) return fmt::format("{} B", b);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(b);
  int u = -1;
  while (std::fabs(v) >= 1024 && u < 5) v /= 1024, ++u;
  return fmt::format("{:.1f} {}", v, kUnits[u]);
}

std::string Seconds(double s) {
  if (s == 0) return "0 s";
  if (std::fabs(s) < 1e-3) return fmt::format("{:.1f} µs", s * 1e6);
  if (std::fabs(s) < 1) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.3f} s", s);
}

std::string StreamName(const Plan& p, int32_t s) {
  if (s >= 0 && s < static_cast<int32_t>(p.stream_names.size())) return p.stream_names[s];
  return fmt::format("s{}", s);
}

// The op's action without its queue: "send 64.0 MiB → g1".
std::string Action(const Plan& p, const Op& op) {
  std::string s(OpKindName(op.kind));
  switch (op.kind) {
    case OpKind::kAlloc:
    case OpKind::kFree:
      s += fmt::format(" b{}", op.buffer);
      if (op.kind == OpKind::kAlloc && op.buffer >= 0 && op.buffer < static_cast<int32_t>(p.buffers.size()))
        s += fmt::format(" {}", Bytes(p.buffers[op.buffer].bytes));
      break;
    case OpKind::kCopy:
    case OpKind::kOffload:
    case OpKind::kReload:
      s += fmt::format(" {}", Bytes(op.Bytes()));
      if (!op.copies.empty()) s += fmt::format(" b{}→b{}", op.copies[0].src.buffer, op.copies[0].dst.buffer);
      if (op.copies.size() > 1) s += fmt::format(" ({} pairs)", op.copies.size());
      break;
    case OpKind::kSend: s += fmt::format(" {} → g{}", Bytes(op.Bytes()), op.peer); break;
    case OpKind::kRecv: s += fmt::format(" {} ← g{}", Bytes(op.Bytes()), op.peer); break;
    case OpKind::kQuantize:
      s += fmt::format(" {} bf16", Bytes(op.Bytes()));
      if (!op.tiles.empty()) {
        const QuantizeTile& t = op.tiles[0];
        s += fmt::format(" b{}→b{}+scales b{}", t.input.buffer, t.output.buffer, t.scales.buffer);
        if (t.tensor >= 0 && t.tensor < static_cast<int32_t>(p.tensors.size()))
          s += fmt::format(" '{}'", p.tensors[t.tensor].name);
      }
      if (op.tiles.size() > 1) s += fmt::format(" ({} tiles)", op.tiles.size());
      break;
  }
  return s;
}

std::string OpLine(const Plan& p, size_t i) {
  const Op& op = p.ops[i];
  std::string s = fmt::format("#{} g{}/{} {}", i, op.gpu, StreamName(p, op.stream), Action(p, op));
  if (op.group >= 0) s += fmt::format(" [group {}]", op.group);
  if (!op.deps.empty()) s += fmt::format(" deps{{{}}}", fmt::join(op.deps, ","));
  if (op.segment >= 0) s += fmt::format(" seg {}", op.segment);
  if (op.sm_share != 1.0) s += fmt::format(" sm {:g}", op.sm_share);
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)
    s += fmt::format(" match #{} b{}+{}", op.match, op.region.buffer, op.region.offset_bytes);
  if (!op.label.empty()) s += fmt::format(" \"{}\"", op.label);
  return s;
}

std::string BufferLine(const PlanBuffer& b) {
  std::string s = fmt::format("b{} g{} {} {} {}", b.id, b.gpu, MemorySpaceName(b.space), BufferRoleName(b.role),
                              Bytes(b.bytes));
  if (b.preexisting) s += " preexisting";
  if (b.layer >= 0) s += fmt::format(" L{}", b.layer);
  if (!b.name.empty()) s += fmt::format(" \"{}\"", b.name);
  return s;
}

// Calls show(i) for indices [0, n), or for the first and last `ends` with a
// line saying how many were skipped.
template <class F>
void Elide(std::string& out, size_t n, bool elide, size_t ends, const std::string& indent, const char* what, F show) {
  if (!elide || n <= 2 * ends) {
    for (size_t i = 0; i < n; ++i) show(i);
    return;
  }
  for (size_t i = 0; i < ends; ++i) show(i);
  out += fmt::format("{}... {} {} elided ...\n", indent, n - 2 * ends, what);
  for (size_t i = n - ends; i < n; ++i) show(i);
}

std::string DotEscape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

std::string ToString(const Plan& p) {
  std::string out;
  const Cluster& c = p.cluster;
  out += fmt::format("plan \"{}\" (format {}): {} tensors, {} buffers, {} ops, {} source pieces, {} destination pieces\n",
                     p.name, p.format_version, p.tensors.size(), p.buffers.size(), p.ops.size(), p.sources.size(),
                     p.destinations.size());
  out += fmt::format("cluster \"{}\": {} node(s) x {} GPUs, fingerprint {}{}\n", c.name, c.nodes, c.gpus_per_node,
                     p.cluster_fingerprint, p.cluster_fingerprint == c.Fingerprint() ? "" : " (MISMATCH with its cluster)");
  const PlanSummary& s = p.summary;
  out += fmt::format("summary: segment {}, offload {:.0f}%, policy \"{}\", moved local {} / nvlink {} / network {} / "
                     "pcie {}, lower bound {}, routing bound {}, predicted {}",
                     Bytes(s.segment_bytes), s.offload_fraction * 100, s.memory_policy, Bytes(s.bytes_moved.local),
                     Bytes(s.bytes_moved.nvlink), Bytes(s.bytes_moved.network), Bytes(s.bytes_moved.pcie),
                     Seconds(s.lower_bound_s), Seconds(s.routing_bound_s), Seconds(s.predicted_time_s));
  if (!s.predicted_peak_bytes.empty()) {
    out += ", peak";
    if (s.predicted_peak_bytes.size() <= 16) {
      for (size_t g = 0; g < s.predicted_peak_bytes.size(); ++g)
        out += fmt::format(" g{} {}", g, Bytes(s.predicted_peak_bytes[g]));
    } else {
      size_t arg = 0;
      for (size_t g = 1; g < s.predicted_peak_bytes.size(); ++g)
        if (s.predicted_peak_bytes[g] > s.predicted_peak_bytes[arg]) arg = g;
      out += fmt::format(" max {} (g{})", Bytes(s.predicted_peak_bytes[arg]), arg);
    }
  }
  out += "\nstreams:";
  for (size_t i = 0; i < p.stream_names.size(); ++i) out += fmt::format(" {}={}", i, p.stream_names[i]);
  out += "\n";

  out += fmt::format("buffers ({}):\n", p.buffers.size());
  Elide(out, p.buffers.size(), p.buffers.size() > kFullBuffers, kBufferEnds, "  ", "buffers",
        [&](size_t i) { out += "  " + BufferLine(p.buffers[i]) + "\n"; });

  // Queues in (gpu, stream) order; ops in plan (= issue) order within each.
  std::map<std::pair<int32_t, int32_t>, std::vector<int32_t>> queues;
  for (size_t i = 0; i < p.ops.size(); ++i)
    queues[{p.ops[i].gpu, p.ops[i].stream}].push_back(static_cast<int32_t>(i));
  const bool elide = p.ops.size() > kFullOps;
  std::vector<const std::pair<const std::pair<int32_t, int32_t>, std::vector<int32_t>>*> list;
  for (const auto& q : queues) list.push_back(&q);
  out += fmt::format("ops ({}):\n", p.ops.size());
  Elide(out, list.size(), elide, kQueueListEnds, "  ", "queues", [&](size_t k) {
    // Named references, not a structured binding: clang 14 cannot capture bindings in the lambda below.
    const auto& key = list[k]->first;
    const auto& ids = list[k]->second;
    out += fmt::format("  g{}/{} ({} ops):\n", key.first, StreamName(p, key.second), ids.size());
    Elide(out, ids.size(), elide, kQueueEnds, "    ", "ops",
          [&](size_t j) { out += "    " + OpLine(p, ids[j]) + "\n"; });
  });
  return out;
}

std::string ToDot(const Plan& p) {
  std::string out = "digraph plan {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  std::map<int32_t, std::vector<int32_t>> by_gpu;
  for (size_t i = 0; i < p.ops.size(); ++i) by_gpu[p.ops[i].gpu].push_back(static_cast<int32_t>(i));
  for (const auto& [gpu, ids] : by_gpu) {
    out += fmt::format("  subgraph cluster_g{} {{\n    label=\"gpu {}\";\n", gpu < 0 ? 1000000 - gpu : gpu, gpu);
    for (int32_t i : ids) {
      const Op& op = p.ops[i];
      std::string label = fmt::format("#{} {}\\n{}", i, DotEscape(Action(p, op)), DotEscape(StreamName(p, op.stream)));
      if (op.group >= 0) label += fmt::format(" [group {}]", op.group);
      out += fmt::format("    op{} [label=\"{}\"];\n", i, label);
    }
    out += "  }\n";
  }
  // Dependencies solid; stream order dotted (unless also a dependency);
  // send/recv matches dashed and without rank constraint.
  std::map<std::pair<int32_t, int32_t>, int32_t> last;
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& op = p.ops[i];
    for (int32_t d : op.deps) out += fmt::format("  op{} -> op{};\n", d, i);
    auto [it, fresh] = last.try_emplace({op.gpu, op.stream}, static_cast<int32_t>(i));
    if (!fresh) {
      int32_t prev = it->second;
      if (std::find(op.deps.begin(), op.deps.end(), prev) == op.deps.end())
        out += fmt::format("  op{} -> op{} [style=dotted];\n", prev, i);
      it->second = static_cast<int32_t>(i);
    }
    if (op.kind == OpKind::kSend && op.match >= 0)
      out += fmt::format("  op{} -> op{} [style=dashed, color=blue, constraint=false];\n", i, op.match);
  }
  out += "}\n";
  return out;
}

}  // namespace reshard
