// The walker's issue order (see issue_order.h).
#include "plan/issue_order.h"

#include <algorithm>
#include <map>
#include <queue>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "model/union_find.h"

namespace reshard {

namespace {

std::string JoinProblems(const std::vector<std::string>& problems) {
  std::string out = fmt::format("the plan cannot run ({} problem{}):", problems.size(), problems.size() == 1 ? "" : "s");
  const size_t shown = std::min<size_t>(problems.size(), 20);
  for (size_t i = 0; i < shown; ++i) out += "\n  " + problems[i];
  if (shown < problems.size()) out += fmt::format("\n  ... and {} more", problems.size() - shown);
  return out;
}

bool IsComm(OpKind k) { return k == OpKind::kSend || k == OpKind::kRecv; }

}  // namespace

PlanRefused::PlanRefused(const std::string& file, std::vector<std::string> problems)
    : InputError(file, "", JoinProblems(problems)), problems_(std::move(problems)) {}

std::vector<IssueStep> IssueOrder(const Plan& p, const std::string& plan_source) {
  const int32_t n = static_cast<int32_t>(p.ops.size());
  UnionFind groups(n);  // roots are the lowest op id of their set
  std::unordered_map<int32_t, int32_t> group_first;  // lookup only
  for (const Op& op : p.ops) {
    if (op.group >= 0) {
      auto [it, fresh] = group_first.emplace(op.group, op.id);
      if (!fresh) groups.Unite(it->second, op.id);
    }
    if (IsComm(op.kind) && op.match >= 0 && op.match < n) groups.Unite(op.id, op.match);
  }
  // Nodes are indexed by their root = lowest op id, so "ties by lowest op id"
  // is the heap order. Members and edges as CSR lists.
  std::vector<int32_t> root(n), member_begin(static_cast<size_t>(n) + 1, 0), members(n);
  for (int32_t i = 0; i < n; ++i) ++member_begin[(root[i] = groups.Find(i)) + 1];
  for (int32_t i = 0; i < n; ++i) member_begin[i + 1] += member_begin[i];
  {
    std::vector<int32_t> fill(member_begin.begin(), member_begin.end() - 1);
    for (int32_t i = 0; i < n; ++i) members[fill[root[i]]++] = i;  // op order within a node
  }

  std::vector<std::string> problems;
  std::vector<std::pair<int32_t, int32_t>> edges;  // (from node, to node)
  edges.reserve(static_cast<size_t>(n) * 2);
  auto edge = [&](int32_t from_op, int32_t to_op, bool is_dep) {
    const int32_t a = root[from_op], b = root[to_op];
    if (a == b) {
      if (is_dep)
        problems.push_back(fmt::format("op {} depends on op {} of the same group; a group is issued at once, so it "
                                       "cannot wait for itself",
                                       to_op, from_op));
      return;
    }
    edges.emplace_back(a, b);
  };
  int32_t max_gpu = 0, max_stream = 0;
  for (const Op& op : p.ops) {
    max_gpu = std::max(max_gpu, op.gpu);
    max_stream = std::max(max_stream, op.stream);
  }
  const int64_t streams = static_cast<int64_t>(max_stream) + 1;
  std::vector<int32_t> last_on_stream(static_cast<size_t>((static_cast<int64_t>(max_gpu) + 1) * streams), -1);
  for (const Op& op : p.ops) {
    for (int32_t d : op.deps)
      if (d >= 0 && d < n) edge(d, op.id, true);
    if (op.gpu < 0 || op.stream < 0) continue;  // Verify reports it
    int32_t& last = last_on_stream[op.gpu * streams + op.stream];
    if (last >= 0) edge(last, op.id, false);
    last = op.id;
  }
  if (!problems.empty()) throw PlanRefused(plan_source, problems);
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  std::vector<int32_t> succ_begin(static_cast<size_t>(n) + 1, 0), succ(edges.size()), indegree(n, 0);
  for (const auto& [a, b] : edges) {
    ++succ_begin[a + 1];
    ++indegree[b];
  }
  for (int32_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
  for (size_t e = 0; e < edges.size(); ++e) succ[e] = edges[e].second;  // edges are sorted by source
  edges = {};

  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
  for (int32_t i = 0; i < n; ++i)
    if (root[i] == i && indegree[i] == 0) ready.push(i);
  std::vector<IssueStep> steps;
  std::map<std::pair<int32_t, int32_t>, std::pair<int32_t, int32_t>> comm_span;  // stream -> (first, last) comm op
  std::vector<int32_t> sends, recvs;
  while (!ready.empty()) {
    const int32_t node = ready.top();
    ready.pop();
    IssueStep step;
    // Per stream: non-comm ops before the stream's first comm op go first,
    // those after its last comm op go after the group call.
    comm_span.clear();
    sends.clear();
    recvs.clear();
    for (int32_t k = member_begin[node]; k < member_begin[node + 1]; ++k) {
      const int32_t id = members[k];
      const Op& op = p.ops[id];
      if (!IsComm(op.kind)) continue;
      auto [it, fresh] = comm_span.try_emplace({op.gpu, op.stream}, id, id);
      if (!fresh) it->second.second = id;
    }
    for (int32_t k = member_begin[node]; k < member_begin[node + 1]; ++k) {
      const int32_t id = members[k];
      const Op& op = p.ops[id];
      if (op.kind == OpKind::kSend) {
        sends.push_back(id);
      } else if (op.kind == OpKind::kRecv) {
        recvs.push_back(id);
      } else {
        auto it = comm_span.find({op.gpu, op.stream});
        if (it == comm_span.end() || id < it->second.first) {
          step.before.push_back(id);
        } else if (id > it->second.second) {
          step.after.push_back(id);
        } else {
          problems.push_back(fmt::format("op {} ({}) sits between sends/receives of its group on GPU {} stream {}; "
                                         "split the group",
                                         id, OpKindName(op.kind), op.gpu, op.stream));
        }
      }
    }
    std::stable_sort(recvs.begin(), recvs.end(), [&](int32_t a, int32_t b) { return p.ops[a].match < p.ops[b].match; });
    step.comm = sends;
    step.comm.insert(step.comm.end(), recvs.begin(), recvs.end());
    steps.push_back(std::move(step));
    for (int32_t e = succ_begin[node]; e < succ_begin[node + 1]; ++e)
      if (--indegree[succ[e]] == 0) ready.push(succ[e]);
  }
  size_t issued = 0;
  for (const IssueStep& s : steps) issued += s.before.size() + s.comm.size() + s.after.size();
  if (issued != p.ops.size())
    problems.push_back(fmt::format("{} ops are on a dependency cycle once groups are issued together (a group waits "
                                   "for work that waits for the group)",
                                   p.ops.size() - issued));
  if (!problems.empty()) throw PlanRefused(plan_source, problems);
  return steps;
}

}  // namespace reshard
