// UnionFind: disjoint sets over the ids 0..n-1, as a small value type.
//
// Used wherever ops, GPUs or demands are grouped into connected components
// (NCCL groups of a round, components of a plan's groups, independent
// balancing problems). Path halving: Find is near-constant amortised, O(α(n)).
// Unite always makes the smaller root the root of the merged set, so a set's
// root is its smallest id: deterministic, and callers may use the root as the
// set's first member.
#pragma once

#include <cstddef>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

namespace reshard {

class UnionFind {
 public:
  UnionFind() = default;
  explicit UnionFind(size_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }

  // Makes `x` a set of its own again (callers that reuse one UnionFind for
  // many small problems reset only the ids they touch).
  void Reset(int32_t x) { parent_[x] = x; }

  int32_t Find(int32_t x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }

  // Merges the sets of `a` and `b`; the smaller root stays the root.
  void Unite(int32_t a, int32_t b) {
    a = Find(a);
    b = Find(b);
    if (a == b) return;
    if (a > b) std::swap(a, b);
    parent_[b] = a;
  }

 private:
  std::vector<int32_t> parent_;
};

}  // namespace reshard
