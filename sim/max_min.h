// Max-min fair sharing of port capacity among concurrent flows, with a
// per-flow cap: the bandwidth model of the simulator, as a free function
// that can be tested alone.
//
// Problem: flows f over ports p; flow f crosses the ports P(f) (at most
// kMaxFlowPorts) and may not exceed its own cap c_f (in the simulator, the link
// class's peak × efficiency at the op's size). Find rates r_f with
//   sum over f crossing p of r_f <= capacity_p   for every port p,
//   r_f <= c_f,
// such that no rate can grow without shrinking a rate that is not larger
// (max-min fairness).
//
// Algorithm: progressive filling (water-filling). Every unfrozen flow's rate
// rises together. The next constraint to bind is either the smallest cap of
// an unfrozen flow or the port with the smallest fair share
// (remaining capacity / its unfrozen flows); a cap that is at or below the
// smallest share binds first and freezes its flow at the cap; otherwise that
// port freezes all its unfrozen flows at its share. Frozen rates are taken off
// the remaining capacity of every port they cross; repeat until every flow is
// frozen. Ties: caps before shares; equal caps by flow tie id; equal shares
// by port tie id (the caller's ids, by default the index in the input; they
// matter only when rounding makes a later share differ from an earlier equal
// one). A port's share is floored at its min_rate, so rounding can never leave
// a flow at rate 0.
//
// Complexity: O((F·k + P) log(F + P)) for F flows of at most k ports over P
// ports: an indexed heap of ports by share (re-keyed when a freeze changes a
// share), and the caps that can bind in a heap popped lazily (a cap at or above
// the smallest capacity among a flow's ports can never bind and is left out).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "sim/indexed_heap.h"

namespace reshard {

inline constexpr int32_t kMaxFlowPorts = 4;
// Calls fn(port) once per distinct port of ports[0 .. n) (a route may repeat one).
template <class Fn>
void ForEachDistinctPort(const std::array<int32_t, kMaxFlowPorts>& ports, int32_t n, Fn&& fn) {
  for (int32_t k = 0; k < n; ++k)
    if (std::find(ports.begin(), ports.begin() + k, ports[k]) == ports.begin() + k) fn(ports[k]);
}

struct SharedFlow {
  std::array<int32_t, kMaxFlowPorts> ports{-1, -1, -1, -1};  // indices into the ports; the first num_ports count
  int32_t num_ports = 0;  // a flow on no port is held by its cap alone
  double cap = std::numeric_limits<double>::infinity();  // its own ceiling (any unit, the ports' one)
  int32_t tie_id = -1;    // orders equal caps (lower first); -1: the index in the input
};

struct SharedPort {
  double capacity = 0;  // > 0 for a port that any flow crosses
  double min_rate = 0;  // floor of the share this port hands out (the simulator: 1e-12 × peak)
  int32_t tie_id = -1;  // orders equal shares (lower first); -1: the index in the input
};

// Buffers reused across calls (the simulator solves once per affected
// component at every instant where flows start or end).
struct MaxMinScratch {
  std::vector<double> remaining_capacity;         // per port
  std::vector<int32_t> unfrozen;                  // per port: flows not yet frozen
  std::vector<int32_t> flows_begin, port_flows;   // per port: its flows (CSR)
  std::vector<uint8_t> touched;                   // per port: share changed in this step
  std::vector<int32_t> touched_ports;
  std::vector<uint8_t> frozen;                    // per flow
  struct CapEntry {
    double cap;
    int32_t tie_id, flow;
  };
  std::vector<CapEntry> by_cap;                   // a min-heap by (cap, tie id)
  IndexedHeap<std::pair<double, int32_t>> shares; // ports by (share, tie id)
};

// Writes the max-min fair rate of flows[i] to rates[i] (rates.size() ==
// flows.size()). Every port index must be below ports.size(); tie ids are
// all -1 or all distinct (per flows, per ports). A flow on no port gets its cap
// (+infinity when it has none).
void MaxMinFairRates(std::span<const SharedFlow> flows, std::span<const SharedPort> ports, std::span<double> rates,
                     MaxMinScratch& scratch);

// The same, allocating its own buffers.
std::vector<double> MaxMinFairRates(std::span<const SharedFlow> flows, std::span<const SharedPort> ports);

}  // namespace reshard
