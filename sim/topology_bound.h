// The routing-independent lower bound: the least time any plan could take to
// move a plan's contents on its cluster, whatever it routes (docs/lower-bound.md
// derives it and says what it relaxes).
//
// Inputs are what the plan says must happen, not how: the cluster, what each
// source buffer holds (Plan::sources) and what each destination buffer must
// hold (Plan::destinations). Any plan may pick, byte by byte, which replica
// sends, relay through GPUs of the sender's or the receiver's NVLink domain
// (a relay may keep what it receives and forward it again: multicast inside a
// domain), and use every port at its peak bandwidth, but a GPU's NVLink at its
// duplex rate for the bytes that must cross it both ways. Network sends carry
// bytes held in the sender's domain (no store-and-forward between domains).
//
// Computed exactly for that relaxation: a circulation with lower bounds whose
// port capacities grow linearly with T; the least feasible T is found by
// Newton's method on the min cut (each step's root is itself a valid bound,
// the last one is the optimum). Bytes are aggregated by (holding domains,
// needing domain), so the graph has O(GPUs + NICs + domain pairs) nodes.
#pragma once

#include <cstdint>
#include <string>

#include "plan/plan.h"

namespace reshard {

struct TopologyBound {
  double time_s = 0;         // 0 when nothing must move
  std::string binding;       // the binding ports: one port's name, or a class and count
  double flow_s = 0;         // the flow relaxation's optimum
  double cut_s = 0;          // the best single-GPU distinct-bytes cut (see the doc)
  int32_t newton_steps = 0;  // max-flow calls
  int64_t graph_nodes = 0;
  int64_t graph_arcs = 0;
};

// O(pieces + cells) to classify bytes (cells: the per-tensor grid that every
// source and destination box's edges cut), then per Newton step one
// push-relabel max-flow, O(V^2 sqrt(E)), on the aggregated graph.
TopologyBound TopologyLowerBound(const Plan& p);

}  // namespace reshard
