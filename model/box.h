// Boxes: the algebra of pieces of a logical tensor.
//
// A Box is a per-dimension half-open interval [lo, hi) over a tensor of up to
// kMaxDims dimensions (weights are 1-D norms/biases, 2-D matrices, and 3-D
// stacked experts). Intersections of boxes are what the planner moves; the
// coverage tests prove that the boxes of each layout tile every tensor.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace reshard {

inline constexpr int kMaxDims = 3;
using Extents = std::array<int64_t, kMaxDims>;

struct Shape {
  int ndim = 0;
  Extents dim{1, 1, 1};  // unused dimensions hold 1

  int64_t Elements() const;
  friend bool operator==(const Shape&, const Shape&) = default;
};
Shape MakeShape(std::initializer_list<int64_t> dims);
std::string ToString(const Shape& s);  // "[4096, 128256]"

struct Box {
  int ndim = 0;
  Extents lo{0, 0, 0};
  Extents hi{1, 1, 1};  // unused dimensions are [0, 1)

  friend bool operator==(const Box&, const Box&) = default;
  friend auto operator<=>(const Box&, const Box&) = default;
};

Box WholeBox(const Shape& s);
// Box covering [lo, hi) along dimension `d` and the whole of every other dimension.
Box SliceBox(const Shape& s, int d, int64_t lo, int64_t hi);
int64_t Volume(const Box& b);          // elements; 0 for an empty box
bool Empty(const Box& b);
bool Contains(const Box& outer, const Box& inner);
bool InBounds(const Box& b, const Shape& s);
// Intersection, or nullopt when it is empty. O(kMaxDims).
std::optional<Box> Intersect(const Box& a, const Box& b);
std::string ToString(const Box& b);    // "[0:4096, 0:128]"

// Row-major strides of a dense tensor of shape s (innermost stride 1).
Extents DenseStrides(const Shape& s);
// Linear (row-major) index of element `idx` of a tensor of shape s.
int64_t LinearIndex(const Shape& s, const Extents& idx);

}  // namespace reshard
