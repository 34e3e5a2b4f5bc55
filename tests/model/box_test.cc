// Box algebra: each function's post-condition checked element by element over every box of
// small shapes (CuTe style: the algebra is proven on all indices, not on a few examples).
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "model/box.h"
#include "model/error.h"

namespace reshard {
namespace {

// Every index of a shape, in row-major order.
std::vector<Extents> Indices(const Shape& s) {
  std::vector<Extents> out;
  Extents i{0, 0, 0};
  for (i[0] = 0; i[0] < s.dim[0]; ++i[0])
    for (i[1] = 0; i[1] < s.dim[1]; ++i[1])
      for (i[2] = 0; i[2] < s.dim[2]; ++i[2]) out.push_back(i);
  return out;
}

bool Member(const Box& b, const Extents& idx) {
  for (int d = 0; d < b.ndim; ++d)
    if (idx[d] < b.lo[d] || idx[d] >= b.hi[d]) return false;
  return true;
}

int64_t CountMembers(const Box& b, const Shape& s) {
  int64_t n = 0;
  for (const auto& i : Indices(s)) n += Member(b, i);
  return n;
}

// Every box with 0 <= lo <= hi <= dim in every dimension, plus a few inverted (lo > hi) ones.
std::vector<Box> AllBoxes(const Shape& s) {
  std::vector<Box> out{Box{s.ndim, {0, 0, 0}, {1, 1, 1}}};
  for (int d = 0; d < s.ndim; ++d) {
    std::vector<Box> next;
    for (const Box& b : out)
      for (int64_t lo = 0; lo <= s.dim[d]; ++lo)
        for (int64_t hi = lo; hi <= s.dim[d]; ++hi) {
          Box c = b;
          c.lo[d] = lo;
          c.hi[d] = hi;
          next.push_back(c);
        }
    out = std::move(next);
  }
  if (s.ndim > 0) {
    Box inv = WholeBox(s);
    inv.lo[0] = s.dim[0];
    inv.hi[0] = 0;
    out.push_back(inv);
  }
  return out;
}

const Shape kShapes[] = {MakeShape({7}), MakeShape({4, 3}), MakeShape({2, 3, 2})};

TEST(ShapeTest, ElementsCountsEveryIndex) {
  for (const Shape& s : kShapes) EXPECT_EQ(s.Elements(), static_cast<int64_t>(Indices(s).size())) << ToString(s);
  EXPECT_EQ(MakeShape({}).Elements(), 1);  // a scalar has one element
  EXPECT_EQ(MakeShape({5, 0}).Elements(), 0);
}

TEST(ShapeTest, MakeShapeFillsUnusedDimsWithOne) {
  Shape s = MakeShape({4096, 128256});
  EXPECT_EQ(s.ndim, 2);
  EXPECT_EQ(s.dim, (Extents{4096, 128256, 1}));
  EXPECT_EQ(ToString(s), "[4096, 128256]");
  EXPECT_THROW(MakeShape({1, 2, 3, 4}), InternalError);
  EXPECT_THROW(MakeShape({-1}), InternalError);
}

TEST(ShapeTest, ElementsOverflowIsAnInternalError) {
  Shape s = MakeShape({int64_t{1} << 40, int64_t{1} << 40});
  EXPECT_THROW(s.Elements(), InternalError);
}

TEST(BoxTest, WholeBoxContainsExactlyEveryElement) {
  for (const Shape& s : kShapes) {
    Box w = WholeBox(s);
    EXPECT_TRUE(InBounds(w, s));
    EXPECT_EQ(Volume(w), s.Elements());
    EXPECT_EQ(CountMembers(w, s), s.Elements());
    for (int d = s.ndim; d < kMaxDims; ++d) EXPECT_EQ(w.hi[d] - w.lo[d], 1);
  }
}

TEST(BoxTest, SliceBoxHoldsTheIndicesInRangeAlongOneDim) {
  for (const Shape& s : kShapes)
    for (int d = 0; d < s.ndim; ++d)
      for (int64_t lo = 0; lo <= s.dim[d]; ++lo)
        for (int64_t hi = lo; hi <= s.dim[d]; ++hi) {
          Box b = SliceBox(s, d, lo, hi);
          ASSERT_TRUE(InBounds(b, s));
          for (const auto& i : Indices(s)) EXPECT_EQ(Member(b, i), lo <= i[d] && i[d] < hi);
        }
  EXPECT_THROW(SliceBox(kShapes[1], 2, 0, 1), InternalError);
  EXPECT_THROW(SliceBox(kShapes[1], 0, 2, 1), InternalError);
  EXPECT_THROW(SliceBox(kShapes[1], 0, 0, 5), InternalError);
}

TEST(BoxTest, SlicesTileTheTensorExactlyOnce) {
  // Uneven chunks along each dimension: every element is in exactly one slice.
  for (const Shape& s : kShapes)
    for (int d = 0; d < s.ndim; ++d) {
      std::vector<Box> slices;
      for (int64_t lo = 0; lo < s.dim[d]; lo += 2) slices.push_back(SliceBox(s, d, lo, std::min(lo + 2, s.dim[d])));
      int64_t total = 0;
      for (const Box& b : slices) total += Volume(b);
      EXPECT_EQ(total, s.Elements());
      for (const auto& i : Indices(s)) {
        int hits = 0;
        for (const Box& b : slices) hits += Member(b, i);
        EXPECT_EQ(hits, 1);
      }
    }
}

TEST(BoxTest, VolumeCountsMembersAndEmptyMeansZero) {
  for (const Shape& s : kShapes)
    for (const Box& b : AllBoxes(s)) {
      EXPECT_EQ(Volume(b), CountMembers(b, s)) << ToString(b);
      EXPECT_EQ(Empty(b), Volume(b) == 0) << ToString(b);
    }
}

TEST(BoxTest, ContainsIffEveryElementOfInnerIsInOuter) {
  const Shape s = kShapes[2];
  const std::vector<Box> boxes = AllBoxes(s);
  const std::vector<Extents> idx = Indices(s);
  for (const Box& outer : boxes)
    for (const Box& inner : boxes) {
      bool all = true;
      for (const auto& i : idx) all = all && (!Member(inner, i) || Member(outer, i));
      ASSERT_EQ(Contains(outer, inner), all) << ToString(outer) << " " << ToString(inner);
    }
  EXPECT_FALSE(Contains(WholeBox(kShapes[1]), WholeBox(kShapes[0])));  // different rank
}

TEST(BoxTest, IntersectHoldsExactlyTheCommonElements) {
  const Shape s = kShapes[2];
  const std::vector<Box> boxes = AllBoxes(s);
  const std::vector<Extents> idx = Indices(s);
  for (const Box& a : boxes)
    for (const Box& b : boxes) {
      std::optional<Box> r = Intersect(a, b);
      int64_t common = 0;
      for (const auto& i : idx) common += Member(a, i) && Member(b, i);
      ASSERT_EQ(r.has_value(), common > 0) << ToString(a) << " " << ToString(b);
      if (!r) continue;
      EXPECT_FALSE(Empty(*r));
      EXPECT_EQ(Volume(*r), common);
      EXPECT_TRUE(Contains(a, *r));
      EXPECT_TRUE(Contains(b, *r));
      for (const auto& i : idx) ASSERT_EQ(Member(*r, i), Member(a, i) && Member(b, i));
      EXPECT_EQ(Intersect(b, a), r);  // commutative
    }
  EXPECT_THROW(Intersect(WholeBox(kShapes[0]), WholeBox(kShapes[1])), InternalError);
}

TEST(BoxTest, InBoundsIffWithinTheShape) {
  const Shape s = MakeShape({4, 3});
  EXPECT_TRUE(InBounds(SliceBox(s, 0, 4, 4), s));  // empty but in bounds
  Box b = WholeBox(s);
  b.hi[1] = 4;
  EXPECT_FALSE(InBounds(b, s));
  b = WholeBox(s);
  b.lo[0] = -1;
  EXPECT_FALSE(InBounds(b, s));
  b = WholeBox(s);
  b.lo[0] = 3;
  b.hi[0] = 2;  // inverted
  EXPECT_FALSE(InBounds(b, s));
  EXPECT_FALSE(InBounds(WholeBox(MakeShape({4})), s));  // rank differs
}

TEST(BoxTest, ToStringShowsHalfOpenRanges) {
  EXPECT_EQ(ToString(SliceBox(MakeShape({4096, 128}), 0, 0, 4096)), "[0:4096, 0:128]");
  EXPECT_EQ(ToString(SliceBox(MakeShape({8, 16, 32}), 0, 2, 4)), "[2:4, 0:16, 0:32]");
}

TEST(BoxTest, BoxOrderingIsTotalAndConsistentWithEquality) {
  std::set<Box> set;
  for (const Box& b : AllBoxes(kShapes[1])) set.insert(b);
  EXPECT_EQ(set.size(), AllBoxes(kShapes[1]).size());  // all distinct boxes stay distinct
}

TEST(StridesTest, LinearIndexIsARowMajorBijection) {
  for (const Shape& s : kShapes) {
    Extents st = DenseStrides(s);
    EXPECT_EQ(st[s.ndim - 1], 1);
    int64_t expect = 0;
    for (const auto& i : Indices(s)) {  // Indices() enumerates in row-major order
      EXPECT_EQ(LinearIndex(s, i), expect);
      int64_t via_strides = 0;
      for (int d = 0; d < s.ndim; ++d) via_strides += i[d] * st[d];
      EXPECT_EQ(via_strides, expect);
      ++expect;
    }
    EXPECT_EQ(expect, s.Elements());
  }
  EXPECT_EQ(DenseStrides(MakeShape({8, 16, 32})), (Extents{512, 32, 1}));
  EXPECT_THROW(LinearIndex(MakeShape({4, 3}), Extents{4, 0, 0}), InternalError);
}

}  // namespace
}  // namespace reshard
