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
//
// First, a buffer whose writes and pieces are all rectangles of one row
// pitch (rows [r0, r1) x bytes [c0, c1) of each row, row k at k x pitch: a
// column shard of a matrix, or a run within or over whole rows) is checked
// without expanding rows (RectanglesCover): per column interval between
// the rectangles' edges, the write rows must not overlap and must cover the
// piece rows. It only passes buffers: one it cannot pass (another shape, or
// a problem) goes through the runs, which name the bytes. A TP4 column shard
// of llama3-70b on 128 GPUs is ~32 K runs per buffer, 84 M in all: `reshard
// simulate` of such a plan spent 5 s here. O(N log N) per column interval
// for N rectangles, at most kMaxRectWork rectangle visits per buffer.
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
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

// A region's rows and planes with the abutting ones merged into longer runs.
struct MergedRegion {
  int64_t run, rows, planes;
};
MergedRegion Merge(const Region& g) {
  MergedRegion m{g.row_bytes, g.rows, g.planes};
  if (m.rows > 1 && g.row_stride_bytes == m.run) m.run *= m.rows, m.rows = 1;
  if (m.rows == 1 && m.planes > 1 && g.plane_stride_bytes == m.run) m.run *= m.planes, m.planes = 1;
  return m;
}

// A piece's innermost contiguous run in elements (`run`), widened over outer
// dimensions while they abut; returns the last dimension left outside it
// (-1: the piece is one run). `n`: the box's extents.
int InnermostRun(const ContentPiece& c, const Extents& n, int64_t& run) {
  int inner = c.box.ndim - 1;
  run = 1;
  if (c.box.ndim > 0 && c.stride_elems[inner] == 1) {
    run = n[inner];
    --inner;
    while (inner >= 0 && c.stride_elems[inner] == run) run *= n[inner--];
  }
  return inner;
}

// Appends the runs of a region (Verify has checked it lies in its buffer).
// Returns false when they would exceed `budget`.
bool RegionRuns(const Region& g, int32_t op, int64_t& budget, std::vector<Run>& out) {
  if (g.Bytes() == 0) return true;
  const auto [run, rows, planes] = Merge(g);
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
  int64_t run = 1;
  const int inner = InnermostRun(c, n, run);
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

// Rows [r0, r1) x bytes [c0, c1) of a buffer seen as rows of `pitch` bytes.
struct Rect {
  int64_t r0, r1, c0, c1;
};

constexpr int64_t kMaxRectWork = int64_t{1} << 24;

// Appends `rows` runs of `run` bytes from `at`, `stride` apart, as one
// rectangle of `pitch`; false where they are not one (rows > 1 at another
// stride, a run that crosses a row end without covering whole rows).
bool AppendRect(int64_t at, int64_t run, int64_t rows, int64_t stride, int64_t pitch, std::vector<Rect>& out) {
  if (run <= 0 || rows <= 0) return true;
  if (rows > 1 && stride != pitch) return false;
  const int64_t c0 = at % pitch;
  if (c0 + run <= pitch) {
    out.push_back({at / pitch, at / pitch + rows, c0, c0 + run});
    return true;
  }
  if (rows == 1 && c0 == 0 && run % pitch == 0) {  // whole rows
    out.push_back({at / pitch, at / pitch + run / pitch, 0, pitch});
    return true;
  }
  return false;
}

// A region as (offset, run, rows, stride) with abutting rows merged, as
// RegionRuns merges them; false for more than one plane.
bool RegionShape(const Region& g, int64_t& at, int64_t& run, int64_t& rows, int64_t& stride) {
  const MergedRegion m = Merge(g);
  at = g.offset_bytes, run = m.run, rows = m.rows, stride = g.row_stride_bytes;
  return m.planes == 1 || g.Bytes() == 0;
}

// A destination piece as (offset, run, rows, stride), as PieceRuns cuts it;
// false where more than one outer dimension is left.
bool PieceShape(const ContentPiece& c, int64_t elem_bytes, int64_t& at, int64_t& run, int64_t& rows,
                int64_t& stride) {
  Extents n{1, 1, 1};
  for (int d = 0; d < c.box.ndim; ++d) n[d] = c.box.hi[d] - c.box.lo[d];
  int64_t elems = 1;
  const int inner = InnermostRun(c, n, elems);
  at = c.offset_elems * elem_bytes, run = elems * elem_bytes, rows = 1, stride = 0;
  if (inner > 0) return false;
  if (inner == 0) rows = n[0], stride = c.stride_elems[0] * elem_bytes;
  return true;
}

// Whether the write rectangles `w` overlap nowhere and cover the piece
// rectangles `d` (all of one pitch). Column edges sorted, then per column
// interval the rows of the rectangles spanning it.
bool RectanglesCover(const std::vector<Rect>& w, const std::vector<Rect>& d) {
  std::vector<int64_t> edges;
  for (const std::vector<Rect>* v : {&w, &d})
    for (const Rect& r : *v) edges.push_back(r.c0), edges.push_back(r.c1);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  if (static_cast<int64_t>(edges.size()) * static_cast<int64_t>(w.size() + d.size()) > kMaxRectWork) return false;
  std::vector<std::pair<int64_t, int64_t>> rows, u;
  for (size_t e = 0; e + 1 < edges.size(); ++e) {
    const int64_t x = edges[e], y = edges[e + 1];
    rows.clear(), u.clear();
    for (const Rect& r : w)
      if (r.c0 <= x && r.c1 >= y) rows.push_back({r.r0, r.r1});
    std::sort(rows.begin(), rows.end());
    for (const auto& [r0, r1] : rows) {
      if (!u.empty() && r0 < u.back().second) return false;  // written twice
      if (!u.empty() && r0 == u.back().second) u.back().second = r1;
      else u.push_back({r0, r1});
    }
    for (const Rect& r : d) {
      if (r.c0 > x || r.c1 < y) continue;
      auto it = std::upper_bound(u.begin(), u.end(), std::make_pair(r.r0, std::numeric_limits<int64_t>::max()));
      if (it == u.begin() || std::prev(it)->second < r.r1) return false;  // a gap
    }
  }
  return true;
}

// The fast check of one buffer (file comment): true only where the pieces'
// byte extents are disjoint, every write lies in one of them, and per piece
// its writes and it are rectangles of one pitch (the piece's row stride, or
// a write's, or one row where all are single runs) that RectanglesCover
// passes. O(W log P) to place W writes among P pieces.
bool BufferPassesAsRectangles(const Plan& p, const std::vector<std::pair<int32_t, const Region*>>& writes,
                              const std::vector<int32_t>& pieces) {
  struct Shape {
    int64_t at, run, rows, stride, end;  // end: one past its last byte
  };
  auto end_of = [](const Shape& x) { return x.at + (x.rows - 1) * x.stride + x.run; };
  std::vector<std::pair<Shape, size_t>> ds;  // piece shapes by start, and their index in `pieces`
  for (size_t k = 0; k < pieces.size(); ++k) {
    const ContentPiece& c = p.destinations[pieces[k]];
    Shape x{};
    if (!PieceShape(c, DTypeBytes(p.tensors[c.tensor].dtype), x.at, x.run, x.rows, x.stride)) return false;
    if (x.run <= 0 || x.rows <= 0) continue;
    x.end = end_of(x);
    ds.push_back({x, k});
  }
  std::sort(ds.begin(), ds.end(), [](const auto& a, const auto& b) { return a.first.at < b.first.at; });
  for (size_t k = 1; k < ds.size(); ++k)
    if (ds[k].first.at < ds[k - 1].first.end) return false;  // interleaved pieces
  std::vector<std::vector<Shape>> ws(ds.size());  // writes per piece, in ds order
  for (const auto& [op, g] : writes) {
    Shape x{};
    if (!RegionShape(*g, x.at, x.run, x.rows, x.stride)) return false;
    if (x.run <= 0 || x.rows <= 0) continue;
    x.end = end_of(x);
    auto it = std::upper_bound(ds.begin(), ds.end(), x.at, [](int64_t at, const auto& d) { return at < d.first.at; });
    if (it == ds.begin() || std::prev(it)->first.end < x.end) return false;  // outside every piece, or over two
    ws[static_cast<size_t>(std::prev(it) - ds.begin())].push_back(x);
  }
  std::vector<Rect> w, d;
  for (size_t k = 0; k < ds.size(); ++k) {
    const Shape& piece = ds[k].first;
    int64_t pitch = piece.rows > 1 ? piece.stride : 0;
    for (const Shape& x : ws[k])
      if (pitch == 0 && x.rows > 1) pitch = x.stride;
    if (pitch == 0) pitch = piece.end - piece.at;  // every run in row 0
    w.clear(), d.clear();
    if (!AppendRect(0, piece.run, piece.rows, piece.stride, pitch, d)) return false;  // rows from the piece's start
    for (const Shape& x : ws[k])
      if (!AppendRect(x.at - piece.at, x.run, x.rows, x.stride, pitch, w)) return false;
    if (!RectanglesCover(w, d)) return false;
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
    if (pieces[b].empty() || BufferPassesAsRectangles(p, writes[b], pieces[b])) continue;
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
