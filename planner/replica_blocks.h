// Replica blocks: a refit that is n identical, independent copies of one
// block of GPUs, planned once and replicated.
//
// Large data-parallel jobs repeat one pattern (llama3-70b TP8xPP8xDP128 ->
// TP4xPP4xDP512 on 8192 GPUs: 32 blocks of 256 GPUs, each 4 source and 16
// destination replicas): a group of source replicas and a group of
// destination replicas on whole nodes and whole NVLink domains. Every port
// the simulator and the bounds model (a NIC, a GPU's NVLink, PCIe and copy
// ports, a node's host) then belongs to one block, so the block's plan,
// replicated with its GPUs mapped, takes the block's time and peak on every
// block. Nor can a plan of the whole beat the block's lower bound: the whole
// is invariant under the block translations, so an optimal routing of it
// averaged over them is optimal too, and folded into one block (each byte
// taken from the same position in the receiver's own block, which holds the
// same content) it loads every port as before (docs/at-scale.md, "Replica
// blocks").
//
// Blocks follow the layouts' rank orders: source ranks tp-cp-ep-dp-pp, so
// block k holds source data-parallel indices [k·a, (k+1)·a) of every
// pipeline stage; destination ranks tp-pp-dp, indices [k·b, (k+1)·b). A
// split is kept only where both layouts' shards repeat block by block, the
// blocks' GPUs are disjoint whole nodes (whole NVLink domains) mapped onto
// each other in GPU order with each GPU's slot in its node kept, and every
// GPU starts with the memory of its image in block 0 (the distributed
// optimizer shards over the whole data-parallel group, so the block's start
// memory is the whole's, not its own scenario's). With destination placement
// free, block k's destination GPUs are its ranks' initial ones or, where
// those overlap other blocks (colocated, pipeline stages strided), the
// destination GPUs among its source GPUs.
//
// Complexity: O(n · (ranks + GPUs)) per block count tried, plus the layouts
// and transfer set of the whole (shared shards: small); O(ops + copy pairs)
// of the whole to replicate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.h"
#include "planner/planner.h"
#include "planner/problem.h"

namespace reshard {

struct ReplicaBlocks {
  int32_t count = 1;
  Scenario block;                               // block 0 as a scenario of its own, GPUs renumbered from 0
  std::shared_ptr<const ProblemInputs> inputs;  // its layouts and the whole's start memory of its GPUs
  std::vector<int32_t> gpu_of;       // [k · block GPUs + i]: the GPU of the whole that block GPU i is in block k
  std::vector<int32_t> src_rank_of;  // [k · block source ranks + r]: the whole's source rank
  std::vector<int32_t> dst_rank_of;  // [k · block destination ranks + r]: the whole's destination rank
};

// The blocks to plan `s` in (nullopt: plan it whole). options.replica_blocks:
// 1, none; n > 1, n blocks (InputError naming "replica_blocks" and the reason
// where `s` does not split so); 0 (auto), only a plan of more than
// options.simulate_max_fragments (destination rank, fragment) pairs is split
// (a large plan, planned by estimates), into the most blocks that each stay
// above it, so a block is planned by the same search as the whole, and that
// each hold at least two source replicas, so its sources are still chosen. Throws
// what the layouts throw for a scenario the planner refuses, and
// CheckPlanFragments' error for a whole too large to plan.
std::optional<ReplicaBlocks> FindReplicaBlocks(const Scenario& s, const PlannerOptions& options);

// The plan of the whole from its block's plan (made for rb.block with
// rb.inputs): buffers, ops, groups and segments repeated per block with GPU,
// peer, buffer and op ids mapped, names and labels with the whole's ranks and
// GPUs; summary and stats with per-GPU entries mapped and byte and op counts
// times the block count. An infeasible result names the whole's GPU.
PlanResult ReplicateBlocks(PlanResult block, const ReplicaBlocks& rb, const Scenario& whole);

}  // namespace reshard
