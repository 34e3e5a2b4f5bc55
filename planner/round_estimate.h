// The round-model estimate: how long a (segment size, segments per round)
// choice would take, from the problem's (sender, receiver) byte totals alone,
// without cutting segments. Large plans rank their candidates by it
// (planner/search.cc); the cut schedule's own estimate is Schedule::estimate_s
// (planner/segments.h).
//
// Rounds (per_round segments per GPU and direction): ceil(Δ / per_round)
// rounds (König: Δ, the most segments one GPU sends or receives, colours),
// each as long as the slowest port's round. A round per phase
// (kPerRoundAll): every port carries its bytes at its rate, and the phase
// pays what the simulator charges around one big NCCL group: the host issue
// of its packs and of the group before any of its transfers start, the
// GPU's packs before and unpacks after. Every term is a calibrated cluster
// term (link profiles, device copy, HostCosts). O(pairs) each.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "planner/problem.h"

namespace reshard {

// The problem's pairs as the estimate reads them: per phase (sender-relay
// first hops, direct, relayed), each pair between two GPUs with its link
// class, in the problem's order. Built once per problem, O(pairs), for the
// many estimates that rank its candidates (deepseek-v3 on 512 GPUs: ~200).
struct EstimatePairs {
  struct Pair {
    int32_t src_gpu, dst_gpu;
    LinkClass link;
    int64_t bytes;
  };
  std::array<std::vector<Pair>, 3> phases;
};
EstimatePairs EstimatePairsOf(const Problem& prob);

// Every phase (sender-relay first hops, direct, then relayed pairs) of the
// estimate, in seconds; `pairs`: EstimatePairsOf(prob).
double QuickEstimate(const Problem& prob, const EstimatePairs& pairs, int64_t segment_bytes, int32_t per_round);
// The same, building the pairs.
double QuickEstimate(const Problem& prob, int64_t segment_bytes, int32_t per_round);
// A round per phase's estimate without its packs before and unpacks after
// (which it charges every segment, though a piece sent in place has none):
// its ports' and flows' time alone, phase after phase. O(pairs).
double AllInOneRoundWireEstimate(const Problem& prob, const EstimatePairs& pairs, int64_t segment_bytes);

}  // namespace reshard
