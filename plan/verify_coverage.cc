// Verify's coverage step (plan/plan.h, DestinationCoverageProblems): every
// byte of every destination piece is written exactly once by the plan.
//
// Idea: per destination buffer, expand each write into it (a receive's
// region, a copy's or reload's destination region) and each destination
// piece into maximal runs of contiguous bytes (a strided region or box
// becomes one run per row, rows merged when they abut), sort the write runs
// by start: two that overlap write some bytes twice. Then sweep the piece
// runs against the (disjoint, sorted) write runs: a gap is a byte never
// written. Time O(R log R) for R runs, memory O(R) for one buffer at a time;
// a buffer whose runs exceed kMaxRuns is reported rather than expanded.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/dtype.h"
#include "plan/plan.h"

namespace reshard {

namespace {

constexpr int64_t kMaxRuns = int64_t{1} << 25;
constexpr size_t kMaxShown = 20;

struct Run {
  int64_t begin, end;  // bytes [begin, end) of the buffer
  int32_t op;          // writing op, or destination piece index
};

// Appends the runs of a region (Verify has checked it lies in its buffer).
// Returns false when they would exceed `budget`.
bool RegionRuns(const Region& g, int32_t op, int64_t& budget, std::vector<Run>& out) {
  if (g.Bytes() == 0) return true;
  int64_t run = g.row_bytes, rows = g.rows, planes = g.planes;
  if (rows > 1 && g.row_stride_bytes == run) run *= rows, rows = 1;
  if (rows == 1 && planes > 1 && g.plane_stride_bytes == run) run *= planes, planes = 1;
  if (rows * planes > budget) return false;
  budget -= rows * planes;
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t at = g.offset_bytes + p * g.plane_stride_bytes + r * g.row_stride_bytes;
      out.push_back({at, at + run, op});
    }
  return true;
}

// Appends the byte runs of a destination piece (Verify has checked that it
// lies in its buffer, strides non-negative).
bool PieceRuns(const ContentPiece& c, int64_t elem_bytes, int32_t index, int64_t& budget, std::vector<Run>& out) {
  const int nd = c.box.ndim;
  Extents n{1, 1, 1}, stride{0, 0, 0};
  for (int d = 0; d < nd; ++d) {
    n[d] = c.box.hi[d] - c.box.lo[d];
    stride[d] = c.stride_elems[d];
    if (n[d] <= 0) return true;
  }
  // Innermost run, widened over outer dimensions while they abut.
  int inner = nd - 1;
  int64_t run = 1;
  if (nd > 0 && stride[inner] == 1) {
    run = n[inner];
    --inner;
    while (inner >= 0 && stride[inner] == run) run *= n[inner--];
  }
  int64_t count = 1;
  for (int d = 0; d <= inner; ++d) count *= n[d];
  if (count > budget) return false;
  budget -= count;
  // Enumerate the outer index space (dims 0..inner) in order.
  Extents i{0, 0, 0};
  for (int64_t k = 0; k < count; ++k) {
    int64_t elem = c.offset_elems;
    for (int d = 0; d <= inner; ++d) elem += i[d] * stride[d];
    out.push_back({elem * elem_bytes, (elem + run) * elem_bytes, index});
    for (int d = inner; d >= 0; --d) {
      if (++i[d] < n[d]) break;
      i[d] = 0;
    }
  }
  return true;
}

}  // namespace

std::vector<std::string> DestinationCoverageProblems(const Plan& p) {
  std::vector<std::string> problems;
  size_t count = 0;
  auto add = [&](std::string s) {
    if (count++ < kMaxShown) problems.push_back(std::move(s));
  };
  const size_t B = p.buffers.size();
  std::vector<std::vector<int32_t>> pieces(B);  // destination pieces per buffer
  for (size_t i = 0; i < p.destinations.size(); ++i) pieces[p.destinations[i].buffer].push_back(static_cast<int32_t>(i));
  // Writes per destination buffer: (op, region) in op order.
  std::vector<std::vector<std::pair<int32_t, const Region*>>> writes(B);
  auto write = [&](int32_t op, const Region& g) {
    if (g.buffer >= 0 && static_cast<size_t>(g.buffer) < B && !pieces[g.buffer].empty())
      writes[g.buffer].push_back({op, &g});
  };
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kRecv) write(op.id, op.region);
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kReload || op.kind == OpKind::kOffload)
      for (const CopyPair& c : op.copies) write(op.id, c.dst);
    if (op.kind == OpKind::kQuantize)
      for (const QuantizeTile& t : op.tiles) {
        write(op.id, t.output);
        write(op.id, t.scales);
      }
  }
  std::vector<Run> w, d;
  for (size_t b = 0; b < B; ++b) {
    if (pieces[b].empty()) continue;
    w.clear();
    d.clear();
    int64_t budget = kMaxRuns;
    bool ok = true;
    for (const auto& [op, g] : writes[b]) ok = ok && RegionRuns(*g, op, budget, w);
    for (int32_t i : pieces[b]) {
      const ContentPiece& c = p.destinations[i];
      ok = ok && PieceRuns(c, DTypeBytes(p.tensors[c.tensor].dtype), i, budget, d);
    }
    if (!ok) {
      add(fmt::format("buffer {} '{}': more than {} byte runs written or required; coverage not checked", b,
                      p.buffers[b].name, kMaxRuns));
      continue;
    }
    std::sort(w.begin(), w.end(), [](const Run& x, const Run& y) { return x.begin != y.begin ? x.begin < y.begin : x.op < y.op; });
    for (size_t k = 1; k < w.size(); ++k)
      if (w[k].begin < w[k - 1].end)
        add(fmt::format("buffer {} '{}': bytes [{}, {}) are written twice, by op {} and op {}", b, p.buffers[b].name,
                        w[k].begin, std::min(w[k].end, w[k - 1].end), w[k - 1].op, w[k].op));
    // Union of writes (merged), then every piece run must lie inside it.
    std::vector<std::pair<int64_t, int64_t>> u;
    for (const Run& r : w) {
      if (!u.empty() && r.begin <= u.back().second) u.back().second = std::max(u.back().second, r.end);
      else u.push_back({r.begin, r.end});
    }
    std::sort(d.begin(), d.end(), [](const Run& x, const Run& y) { return x.begin < y.begin; });
    size_t j = 0;
    for (const Run& r : d) {
      while (j < u.size() && u[j].second <= r.begin) ++j;
      if (j == u.size() || u[j].first > r.begin || u[j].second < r.end) {
        const int64_t gap_begin = j < u.size() && u[j].first <= r.begin ? u[j].second : r.begin;
        const ContentPiece& c = p.destinations[r.op];
        add(fmt::format("buffer {} '{}': destination piece {} (tensor '{}') is never written at bytes [{}, {})", b,
                        p.buffers[b].name, r.op, p.tensors[c.tensor].name, gap_begin,
                        std::min(r.end, j < u.size() && u[j].first > gap_begin ? u[j].first : r.end)));
      }
    }
  }
  if (count > kMaxShown) problems.push_back(fmt::format("... and {} more coverage problems", count - kMaxShown));
  return problems;
}

}  // namespace reshard
