// Rounds: a bipartite edge colouring of the GPU-to-GPU segment multigraph.
//
// Left vertices are senders, right vertices receivers, one edge per segment.
// A colour class is a round in which every GPU sends at most one segment and
// receives at most one, so no NVLink port or NIC carries two of a GPU's
// segments at once. König's theorem: Δ colours suffice (Δ = the largest
// number of segments one GPU sends or receives), i.e. as many rounds as the
// busiest GPU needs anyway. Algorithm: edges in the given order take the
// lowest colour free at both ends; when the colours free at the two ends
// differ (a at the sender, b at the receiver), the a/b alternating path from
// the receiver is swapped (it cannot reach the sender in a bipartite graph),
// freeing a at both ends. O(E·Δ) for the free-colour scans plus O(E·V) worst
// case for the path swaps (short in practice). Edges that come first get low
// colours, so the given order (by layer) roughly becomes the round order.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace reshard {

struct Colouring {
  int32_t colours = 0;            // Δ
  std::vector<int32_t> colour;    // per edge
};

// edges[i] = (sender in [0, left), receiver in [0, right)).
Colouring ColourBipartite(int32_t left, int32_t right, const std::vector<std::pair<int32_t, int32_t>>& edges);

}  // namespace reshard
