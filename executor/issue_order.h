// The walker's issue order: the plan's groups in one topological order, the
// same in every process. The executor walks it; the NCCL backend replays it to
// size its allocator's pool before timing. Defined in executor.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace reshard {

// One step of the issue order: a group of ops issued together. `before` and
// `after` are non-communication ops of the group that precede / follow its
// sends and receives on their streams; `comm` are the sends and receives in
// the order they are issued.
struct IssueStep {
  std::vector<int32_t> before, comm, after;
  friend bool operator==(const IssueStep&, const IssueStep&) = default;
};

// Kahn's algorithm over groups (a group = ops sharing a group id, plus each
// send with its matching recv), ties broken by lowest op id:
// O((ops + deps) log ops). Throws PlanRefused (executor.h) on a group that
// depends on itself or interleaves copies between its sends and receives.
std::vector<IssueStep> IssueOrder(const Plan& plan, const std::string& plan_source = "<plan>");

}  // namespace reshard
