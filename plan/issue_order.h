// The order in which one host thread issues a plan's ops: the plan's groups
// in one topological order, the same in every process. The executor walks it
// (executor/executor.cc), the NCCL backend replays it to size its pool, and
// the simulator charges the host's per-call costs along it (sim/host_issue.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/error.h"
#include "plan/plan.h"

namespace reshard {

// A plan a consumer will not run: Verify's problems or its own.
class PlanRefused : public InputError {
 public:
  PlanRefused(const std::string& file, std::vector<std::string> problems);
  const std::vector<std::string>& problems() const { return problems_; }

 private:
  std::vector<std::string> problems_;
};

// One step of the issue order: a group of ops issued together. `before` and
// `after` are non-communication ops of the group that precede / follow its
// sends and receives on their streams; `comm` are the sends and receives in
// the order they are issued (sends by op id, then receives by their send).
struct IssueStep {
  std::vector<int32_t> before, comm, after;
  friend bool operator==(const IssueStep&, const IssueStep&) = default;
};

// Kahn's algorithm over groups (a group = ops sharing a group id, plus each
// send with its matching recv), ties broken by lowest op id:
// O((ops + deps) log ops). Throws PlanRefused on a group that depends on
// itself or interleaves copies between its sends and receives, or a cycle.
std::vector<IssueStep> IssueOrder(const Plan& plan, const std::string& plan_source = "<plan>");

// The same steps, in the same order, handed to `visit` one at a time (one
// IssueStep reused, no list of millions of steps kept: the simulator's host
// model walks it once). Throws as IssueOrder does, after visiting the steps
// it could order.
void ForEachIssueStep(const Plan& plan, const std::function<void(const IssueStep&)>& visit,
                      const std::string& plan_source = "<plan>");

// Per op, the op whose CUDA events stamp it: itself, or for a send / recv of
// an NCCL group the group's first op on its GPU. ncclGroupEnd launches the
// group's ops on a GPU at once, so one start and one end stamp time them all
// (an event pair per op there only added stream time: 3.66 us a pair, ~600
// ops of deepseek-v3's critical path). O(ops).
std::vector<int32_t> EventOwners(const Plan& plan);

// The CUDA events reshard's executor records for each op: 2 (start and end
// stamps) for an op with GPU work that owns its events (EventOwners), 0 for
// a group's other ops; for an alloc or a free, 1 where an op on another
// stream or GPU depends on it (stream-ordered memory is handed over by an
// event), else 0: it is stamped from what precedes it on its stream and its
// dependencies. Each event takes stream time (Cluster::host.event_gpu_ns per
// pair), 34 allocation brackets 0.11 ms of an 8.4 ms one-H200 refit. The
// simulator charges the same events. O(ops + deps).
std::vector<uint8_t> OpEventCounts(const Plan& plan);

}  // namespace reshard
