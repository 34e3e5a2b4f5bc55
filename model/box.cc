#include "model/box.h"

#include <algorithm>

#include "model/error.h"

namespace reshard {

namespace {
void CheckNdim(int ndim) { RESHARD_CHECK(ndim >= 0 && ndim <= kMaxDims, "ndim out of range"); }
}  // namespace

int64_t Shape::Elements() const {
  CheckNdim(ndim);
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) {
    RESHARD_CHECK(dim[d] >= 0, "negative extent");
    RESHARD_CHECK(!__builtin_mul_overflow(n, dim[d], &n), "element count overflows int64");
  }
  return n;
}

Shape MakeShape(std::initializer_list<int64_t> dims) {
  RESHARD_CHECK(dims.size() <= static_cast<size_t>(kMaxDims), "too many dimensions");
  Shape s;
  s.ndim = static_cast<int>(dims.size());
  int d = 0;
  for (int64_t e : dims) {
    RESHARD_CHECK(e >= 0, "negative extent");
    s.dim[d++] = e;
  }
  return s;
}

std::string ToString(const Shape& s) {
  std::string out = "[";
  for (int d = 0; d < s.ndim; ++d) out += (d ? ", " : "") + std::to_string(s.dim[d]);
  return out + "]";
}

Box WholeBox(const Shape& s) {
  CheckNdim(s.ndim);
  Box b;
  b.ndim = s.ndim;
  for (int d = 0; d < s.ndim; ++d) b.hi[d] = s.dim[d];
  return b;
}

Box SliceBox(const Shape& s, int d, int64_t lo, int64_t hi) {
  RESHARD_CHECK(d >= 0 && d < s.ndim, "slice dimension out of range");
  RESHARD_CHECK(0 <= lo && lo <= hi && hi <= s.dim[d], "slice out of bounds");
  Box b = WholeBox(s);
  b.lo[d] = lo;
  b.hi[d] = hi;
  return b;
}

bool Empty(const Box& b) {
  CheckNdim(b.ndim);
  for (int d = 0; d < b.ndim; ++d)
    if (b.hi[d] <= b.lo[d]) return true;
  return false;
}

int64_t Volume(const Box& b) {
  if (Empty(b)) return 0;
  int64_t n = 1;
  for (int d = 0; d < b.ndim; ++d)
    RESHARD_CHECK(!__builtin_mul_overflow(n, b.hi[d] - b.lo[d], &n), "box volume overflows int64");
  return n;
}

bool Contains(const Box& outer, const Box& inner) {
  if (outer.ndim != inner.ndim) return false;
  if (Empty(inner)) return true;  // vacuous: an empty box has no element outside `outer`
  for (int d = 0; d < inner.ndim; ++d)
    if (inner.lo[d] < outer.lo[d] || inner.hi[d] > outer.hi[d]) return false;
  return true;
}

bool InBounds(const Box& b, const Shape& s) {
  if (b.ndim != s.ndim) return false;
  for (int d = 0; d < b.ndim; ++d)
    if (b.lo[d] < 0 || b.lo[d] > b.hi[d] || b.hi[d] > s.dim[d]) return false;
  return true;
}

std::optional<Box> Intersect(const Box& a, const Box& b) {
  RESHARD_CHECK(a.ndim == b.ndim, "intersecting boxes of different rank");
  Box r;
  r.ndim = a.ndim;
  for (int d = 0; d < a.ndim; ++d) {
    r.lo[d] = std::max(a.lo[d], b.lo[d]);
    r.hi[d] = std::min(a.hi[d], b.hi[d]);
    if (r.hi[d] <= r.lo[d]) return std::nullopt;
  }
  return r;
}

std::string ToString(const Box& b) {
  std::string out = "[";
  for (int d = 0; d < b.ndim; ++d)
    out += (d ? ", " : "") + std::to_string(b.lo[d]) + ":" + std::to_string(b.hi[d]);
  return out + "]";
}

Extents DenseStrides(const Shape& s) {
  CheckNdim(s.ndim);
  Extents st{1, 1, 1};
  int64_t running = 1;
  for (int d = s.ndim - 1; d >= 0; --d) {
    st[d] = running;
    RESHARD_CHECK(!__builtin_mul_overflow(running, s.dim[d], &running), "stride overflows int64");
  }
  // Unused dimensions (extent 1) get the total size as stride; they only ever index 0.
  for (int d = s.ndim; d < kMaxDims; ++d) st[d] = running;
  return st;
}

int64_t LinearIndex(const Shape& s, const Extents& idx) {
  Extents st = DenseStrides(s);
  int64_t i = 0;
  for (int d = 0; d < s.ndim; ++d) {
    RESHARD_CHECK(idx[d] >= 0 && idx[d] < s.dim[d], "index out of bounds");
    i += idx[d] * st[d];
  }
  return i;
}

}  // namespace reshard
