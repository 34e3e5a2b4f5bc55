#include "planner/rounds.h"

#include <algorithm>

#include "model/error.h"

namespace reshard {

Colouring ColourBipartite(int32_t left, int32_t right, const std::vector<std::pair<int32_t, int32_t>>& edges) {
  Colouring out;
  std::vector<int32_t> deg_l(left, 0), deg_r(right, 0);
  for (const auto& [u, v] : edges) {
    RESHARD_CHECK(u >= 0 && u < left && v >= 0 && v < right, "edge end out of range");
    out.colours = std::max({out.colours, ++deg_l[u], ++deg_r[v]});
  }
  const int64_t D = out.colours;
  out.colour.assign(edges.size(), -1);
  // at_l[u*D + c] / at_r[v*D + c]: the edge of colour c at the vertex, or -1.
  std::vector<int32_t> at_l(static_cast<size_t>(left) * D, -1), at_r(static_cast<size_t>(right) * D, -1);
  // hint_*[x]: no colour below it is free at x (colours fill mostly in order,
  // so scans from the hint are short; a swap that frees a colour lowers it).
  std::vector<int32_t> hint_l(left, 0), hint_r(right, 0);
  auto free_at = [&](const std::vector<int32_t>& at, std::vector<int32_t>& hint, int32_t x) {
    for (int64_t c = hint[x]; c < D; ++c)
      if (at[x * D + c] < 0) {
        hint[x] = static_cast<int32_t>(c);
        return static_cast<int32_t>(c);
      }
    RESHARD_CHECK(false, "no free colour at a vertex of degree <= Δ");
    return int32_t{-1};
  };
  std::vector<int32_t> path;
  for (size_t e = 0; e < edges.size(); ++e) {
    const auto [u, v] = edges[e];
    const int32_t a = free_at(at_l, hint_l, u);
    if (at_r[v * D + a] >= 0) {
      const int32_t b = free_at(at_r, hint_r, v);
      // Walk the path from v: colour a, then b, then a, ... alternating sides.
      path.clear();
      int32_t x = v, c = a;
      bool on_right = true;
      for (;;) {
        const int32_t f = on_right ? at_r[x * D + c] : at_l[x * D + c];
        if (f < 0) break;
        path.push_back(f);
        x = on_right ? edges[f].first : edges[f].second;
        on_right = !on_right;
        c = (c == a) ? b : a;
      }
      for (int32_t f : path) {
        at_l[edges[f].first * D + out.colour[f]] = -1;
        at_r[edges[f].second * D + out.colour[f]] = -1;
        hint_l[edges[f].first] = std::min(hint_l[edges[f].first], std::min(a, b));
        hint_r[edges[f].second] = std::min(hint_r[edges[f].second], std::min(a, b));
      }
      for (int32_t f : path) {
        out.colour[f] = out.colour[f] == a ? b : a;
        at_l[edges[f].first * D + out.colour[f]] = f;
        at_r[edges[f].second * D + out.colour[f]] = f;
      }
      RESHARD_CHECK(at_l[u * D + a] < 0 && at_r[v * D + a] < 0, "alternating path reached the sender");
    }
    out.colour[e] = a;
    at_l[u * D + a] = static_cast<int32_t>(e);
    at_r[v * D + a] = static_cast<int32_t>(e);
  }
  return out;
}

}  // namespace reshard
