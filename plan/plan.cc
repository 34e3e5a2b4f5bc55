// Plan IR basics: enum names, region geometry, op sizes.
#include "plan/plan.h"

#include <algorithm>
#include <numeric>

#include "model/error.h"

namespace reshard {

int32_t CommLane(const Plan& p, int32_t stream) {
  return stream >= 0 && stream < static_cast<int32_t>(p.stream_names.size()) &&
                 p.stream_names[stream] == kCommLane2StreamName
             ? 1
             : 0;
}

bool UsesCommLane2(const Plan& p) {
  int32_t lane2 = -1;
  for (size_t s = 0; s < p.stream_names.size(); ++s)
    if (p.stream_names[s] == kCommLane2StreamName) lane2 = static_cast<int32_t>(s);
  if (lane2 < 0) return false;
  for (const Op& op : p.ops)
    if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.stream == lane2) return true;
  return false;
}

std::string_view OpKindName(OpKind k) {
  switch (k) {
    case OpKind::kAlloc: return "alloc";
    case OpKind::kFree: return "free";
    case OpKind::kCopy: return "copy";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kOffload: return "offload";
    case OpKind::kReload: return "reload";
    case OpKind::kQuantize: return "quantize";
  }
  return "?";
}

std::string_view BufferRoleName(BufferRole r) {
  switch (r) {
    case BufferRole::kSourceWeights: return "source_weights";
    case BufferRole::kDestinationWeights: return "destination_weights";
    case BufferRole::kOptimizer: return "optimizer";
    case BufferRole::kGradients: return "gradients";
    case BufferRole::kKvCache: return "kv_cache";
    case BufferRole::kStaging: return "staging";
    case BufferRole::kHost: return "host";
  }
  return "?";
}

std::string_view MemorySpaceName(MemorySpace s) {
  switch (s) {
    case MemorySpace::kDevice: return "device";
    case MemorySpace::kHost: return "host";
  }
  return "?";
}

// Bytes are enumerated (plane, row, byte); they form one run when each level's
// stride equals the size of the level below, or the level has one entry.
bool Region::Contiguous() const {
  if (Bytes() == 0) return true;
  if (rows > 1 && row_stride_bytes != row_bytes) return false;
  if (planes > 1 && plane_stride_bytes != row_bytes * rows) return false;
  return true;
}

// Assumes non-negative strides (Verify rejects others); an empty region ends
// where it starts.
int64_t Region::End() const {
  if (Bytes() == 0) return offset_bytes;
  return offset_bytes + (planes - 1) * plane_stride_bytes + (rows - 1) * row_stride_bytes + row_bytes;
}

int64_t CopyRunBytes(const CopyPair& c) {
  auto run = [](const Region& r) { return r.Contiguous() ? r.Bytes() : r.row_bytes; };
  return std::gcd(run(c.src), run(c.dst));
}

namespace {

// One level of rows: `rows` runs of `run` bytes, `stride` apart; rows == 1 is
// one run. Built so runs never overlap each other (a region whose rows
// overlap or touch is one span).
struct Rows {
  int64_t off, run, rows, stride;
  int64_t End() const { return off + (rows - 1) * stride + run; }
};
Rows RowsOf(int64_t off, int64_t run, int64_t rows, int64_t stride) {
  if (rows > 1 && stride <= run) return {off, (rows - 1) * stride + run, 1, 0};
  return {off, run, rows, stride};
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// A span [lo, hi) against rows: the rows whose run can reach the span are
// i in [ceil((lo - off - run + 1) / stride), floor((hi - 1 - off) / stride)].
bool SpanMeetsRows(int64_t lo, int64_t hi, const Rows& r) {
  if (r.rows == 1) return lo < r.off + r.run && r.off < hi;
  const int64_t first = std::max<int64_t>(0, -FloorDiv(-(lo - r.off - r.run + 1), r.stride));
  const int64_t last = std::min(r.rows - 1, FloorDiv(hi - 1 - r.off, r.stride));
  return first <= last;
}

// Work one overlap test may do (rows walked, plane pairs met) before it
// counts the regions as overlapping: a hostile plan must not make Verify slow.
constexpr int64_t kMaxWork = int64_t{1} << 16;

bool RowsOverlap(const Rows& a, const Rows& b, int64_t& work) {
  if (a.End() <= b.off || b.End() <= a.off) return false;
  if (a.rows == 1) return SpanMeetsRows(a.off, a.off + a.run, b);
  if (b.rows == 1) return SpanMeetsRows(b.off, b.off + b.run, a);
  if (a.stride == b.stride) {
    // b's row j starts d bytes into a's row k + j: it meets that row when
    // d < a.run and the next one when d + b.run > stride (runs < stride).
    const int64_t s = a.stride, k = FloorDiv(b.off - a.off, s), d = b.off - a.off - k * s;
    auto some_row = [&](int64_t shift) { return k + shift <= a.rows - 1 && k + shift + b.rows - 1 >= 0; };
    return (d < a.run && some_row(0)) || (d + b.run > s && some_row(1));
  }
  const Rows& few = a.rows <= b.rows ? a : b;
  const Rows& many = a.rows <= b.rows ? b : a;
  if ((work += few.rows) > kMaxWork) return true;  // spans overlap: counted as overlapping
  for (int64_t i = 0; i < few.rows; ++i)
    if (SpanMeetsRows(few.off + i * few.stride, few.off + i * few.stride + few.run, many)) return true;
  return false;
}

}  // namespace

bool RegionsOverlap(const Region& a, const Region& b) {
  if (a.Bytes() == 0 || b.Bytes() == 0) return false;
  if (a.End() <= b.offset_bytes || b.End() <= a.offset_bytes) return false;
  // Planes that continue the rows of the plane before are more rows; planes at one place are one plane.
  auto planes_of = [](const Region& r, int64_t& planes, int64_t& stride, Rows& rows) {
    planes = r.planes;
    stride = r.plane_stride_bytes;
    int64_t n = r.rows, rs = r.row_stride_bytes;
    if (r.rows == 1) rs = r.row_bytes;  // one row: any stride reads the same
    if (planes > 1 && (stride == n * rs || (n == 1 && stride > 0))) {
      if (n == 1) rs = stride;
      n *= planes;
      planes = 1;
    }
    if (stride == 0) planes = 1;
    rows = RowsOf(r.offset_bytes, r.row_bytes, n, rs);
  };
  int64_t pa = 0, sa = 0, pb = 0, sb = 0;
  Rows ra{}, rb{};
  planes_of(a, pa, sa, ra);
  planes_of(b, pb, sb, rb);
  // Each plane of a against the planes of b whose spans reach it (plane spans grow with the plane index).
  const int64_t extent_b = rb.End() - rb.off;
  int64_t work = 0;
  for (int64_t i = 0; i < pa; ++i) {
    if (++work > kMaxWork) return true;
    Rows x = ra;
    x.off += i * sa;
    const int64_t lo = x.off, hi = x.End();
    int64_t first = 0, last = pb - 1;
    if (pb > 1) {
      first = std::max<int64_t>(0, -FloorDiv(-(lo - rb.off - extent_b + 1), sb));
      last = std::min(pb - 1, FloorDiv(hi - 1 - rb.off, sb));
    }
    for (int64_t j = first; j <= last; ++j) {
      if (++work > kMaxWork) return true;  // too many plane pairs to walk: counted as overlapping
      Rows y = rb;
      y.off += j * sb;
      if (RowsOverlap(x, y, work)) return true;
    }
  }
  return false;
}

Region ContiguousRegion(int32_t buffer, int64_t offset_bytes, int64_t bytes) {
  Region r;
  r.buffer = buffer;
  r.offset_bytes = offset_bytes;
  r.row_bytes = bytes;
  return r;  // rows = planes = 1; strides stay 0 (unused), so JSON omits them
}

int32_t AppendBuffer(Plan& p, PlanBuffer b) {
  b.id = static_cast<int32_t>(p.buffers.size());
  p.buffers.push_back(std::move(b));
  return p.buffers.back().id;
}

int32_t AppendOp(Plan& p, Op op) {
  op.id = static_cast<int32_t>(p.ops.size());
  std::sort(op.deps.begin(), op.deps.end());
  op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
  p.ops.push_back(std::move(op));
  return p.ops.back().id;
}

int64_t Op::Bytes() const {
  switch (kind) {
    case OpKind::kAlloc:
    case OpKind::kFree: return 0;
    case OpKind::kSend:
    case OpKind::kRecv: return region.Bytes();
    case OpKind::kCopy:
    case OpKind::kOffload:
    case OpKind::kReload: {
      int64_t total = 0;
      for (const auto& c : copies) total += c.src.Bytes();
      return total;
    }
    case OpKind::kQuantize: {
      int64_t total = 0;
      for (const auto& t : tiles) total += t.input.Bytes();
      return total;
    }
  }
  return 0;
}

bool IsPlacementCopy(const Plan& p, const Op& op) {
  if (op.kind != OpKind::kCopy) return false;
  for (const CopyPair& c : op.copies)
    if (p.buffers[c.src.buffer].role == BufferRole::kStaging || p.buffers[c.dst.buffer].role == BufferRole::kStaging)
      return false;
  return true;
}

BytesMoved CountBytesMoved(const Plan& p) {
  BytesMoved m;
  for (const Op& op : p.ops) {
    switch (op.kind) {
      case OpKind::kSend:
        switch (p.cluster.Between(op.gpu, op.peer)) {
          case LinkClass::kLocal: m.local += op.region.Bytes(); break;
          case LinkClass::kNvlink: m.nvlink += op.region.Bytes(); break;
          default: m.network += op.region.Bytes(); break;
        }
        break;
      case OpKind::kOffload:
      case OpKind::kReload: m.pcie += op.Bytes(); break;
      case OpKind::kCopy:
        if (IsPlacementCopy(p, op)) m.local += op.Bytes();
        break;
      default: break;
    }
  }
  return m;
}

}  // namespace reshard
