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

#include <cstdint>

#include "planner/problem.h"

namespace reshard {

// Every phase (sender-relay first hops, direct, then relayed pairs) of the
// estimate, in seconds.
double QuickEstimate(const Problem& prob, int64_t segment_bytes, int32_t per_round);

}  // namespace reshard
