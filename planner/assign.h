// Placement of destination ranks on GPUs and choice of one source replica for
// every destination fragment.
//
// Placement (when the scenario leaves it free): maximise the bytes a
// destination rank finds already on its GPU, on two levels so the generation
// engine's tensor-parallel groups stay inside a node:
//  * within a node: a maximum-weight perfect matching between a block of
//    destination ranks and the node's GPUs (Boost.Graph
//    maximum_weighted_matching on k + k vertices, O(k^3)); weights are bytes
//    of the rank's shard held by the GPU's source shard;
//  * across nodes: the block of ranks initially on a node moves as a whole
//    to a node with as many destination GPUs; blocks and nodes with equal
//    signatures (destination shards / source shards, in order) form classes,
//    and a transportation problem between classes (min-cost flow, Boost
//    successive_shortest_path_nonnegative_weights) maximises the summed
//    within-node optimum. Large symmetric jobs solve a handful of small
//    problems, not one per node or GPU.
// Ties keep the initial placement: the +1 on a rank's own GPU, and in the
// transport a block that stays home scores, one that moves within its
// NVLink domain less (classes are per domain where a domain spans nodes), so
// of the optimal transports the one that moves the fewest blocks and keeps
// the most in their domain (llama3-405b TP4 x PP16 -> TP16 x DP8 on 128
// GB200: the solver's optimum split the replicas over the NVLink domains
// unevenly, 286.5 ms; fewest moves 142.6; kept in their domains 118.0).
//
// Source choice: a fragment is served from the destination GPU itself when a
// replica is there; else from a replica in the same NVLink domain; else over
// the network. Within a tier the bytes are balanced over senders' ports
// (NVLink egress per GPU; NIC egress per NIC) by minimising the busiest
// port's load: demands are aggregated per candidate GPU set (usually a DP
// replica group), giving a small flow network
//   source -> candidate set (demand) -> GPU -> port -> sink (T - fixed load),
// and T is found by binary search over max-flow feasibility (Boost
// push_relabel_max_flow, O(V^3) each, ~40 rounds; V = sets + GPUs + ports).
// The ports T binds (the min cut's source side at T - 1) are then frozen at
// T and the others balanced again below it, up to 4 levels, so the ports the
// busiest one does not constrain are balanced too (lexicographic min-max).
// The fractional per-(set, GPU) quotas are then filled north-west-corner
// style, destination ranks in order, so each destination draws a set's bytes
// from one or two senders. Except riders: what a rank draws over the network
// from one candidate set in all, when at most the bytes a NIC moves in its
// per-op latency, is left out of the balancing and goes to its least loaded
// candidate NIC, among equals to a sender the rank already draws from, so
// replicated norms and the like spread over their holders (by bytes they
// piled on the NICs the flow left room on: one GPU sending to 189 receivers
// at 1024 GPUs) and where loads tie add no pair of their own.
// Deterministic: every order is by id.
// Candidate sets: per (holder set, NVLink domain of the destination), the
// holder GPUs in that domain, found by binary search in the holder set's
// sorted list of R GPUs (a domain is a contiguous GPU range) and memoised:
// O(log R) per fragment at most, where a scan per new (set, domain) pair was
// O(sets·domains·R) (8192 GPUs, R = 1024: 0.4 s instead of 8 s).
#pragma once

#include <cstdint>
#include <vector>

#include "model/layout.h"
#include "model/scenario.h"
#include "planner/transfer_set.h"

namespace reshard {

// Destination rank -> GPU. Returns s.destination_gpus unless
// s.destination_placement_free.
std::vector<int32_t> PlaceDestinations(const Scenario& s, const Layout& source, const Layout& destination,
                                       const TransferSet& ts);

struct SourceChoice {
  // Per destination rank, per fragment of its shard: the source rank that sends it.
  std::vector<std::vector<int32_t>> src_rank;
  // Per holder set touched: its candidate source GPUs (sorted); empty if unused.
  std::vector<std::vector<int32_t>> holder_gpus;
};

SourceChoice ChooseSources(const Scenario& s, const Layout& source, const Layout& destination,
                           const TransferSet& ts, const std::vector<int32_t>& dst_gpu);

// The across-node step of PlaceDestinations (exposed for tests): an integer
// transportation problem, maximise sum value[a][b] * y[a][b] with row sums
// supply[a] and column sums demand[b] (equal totals); among optima the one
// that scores most: 2 per unit that stays home (at most home[a][b]: blocks
// of class a whose own node is of class b), 1 per unit that moves within its
// NVLink domain (near[a][b]). Returns y.
std::vector<std::vector<int64_t>> Transport(const std::vector<int64_t>& supply, const std::vector<int64_t>& demand,
                                            const std::vector<std::vector<int64_t>>& value,
                                            const std::vector<std::vector<int64_t>>& home,
                                            const std::vector<std::vector<bool>>& near);

// Min-max balancing of aggregated demands over ports (exposed for tests).
// demand[k] may go to any GPU of candidates[k]; gpu_port[g] is the port of
// GPU g; fixed[p] is load already on port p. Returns, per k, the amount sent by
// each candidate (same order as candidates[k]); the busiest port's load is
// minimal (exact, by integer binary search on max-flow feasibility), and
// below it the next busiest, up to 4 levels.
std::vector<std::vector<int64_t>> BalanceDemands(const std::vector<int64_t>& demand,
                                                 const std::vector<std::vector<int32_t>>& candidates,
                                                 const std::vector<int32_t>& gpu_port, std::vector<int64_t> fixed);

}  // namespace reshard
