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
  std::vector<IssueStep> steps;
  ForEachIssueStep(p, [&](const IssueStep& step) { steps.push_back(step); }, plan_source);
  return steps;
}

// O(ops + deps) to build the graph (counting sorts; a repeated edge is kept:
// it adds to its target's in-degree and is taken off it again, which changes
// nothing), then O(nodes log nodes) for the ready heap. The ops are read once,
// into a compact copy of the fields the walk needs (an Op is ~200 bytes, and
// the walk visits them in group order, not op order) and a list of edges by
// op id, mapped to their groups once these are known.
void ForEachIssueStep(const Plan& p, const std::function<void(const IssueStep&)>& visit,
                      const std::string& plan_source) {
  const int32_t n = static_cast<int32_t>(p.ops.size());
  struct OpLite {
    int32_t gpu, stream, match;
    OpKind kind;
  };
  std::vector<OpLite> ops(n);
  std::vector<int32_t> group(n);
  // (from op, to op, a dependency rather than stream order), in the order they are met.
  struct OpEdge {
    int32_t from, to;
    bool dep;
  };
  std::vector<OpEdge> op_edges;
  op_edges.reserve(static_cast<size_t>(n) * 2);
  int32_t max_group = -1, max_gpu = 0, max_stream = 0;
  for (int32_t id = 0; id < n; ++id) {  // ids are indices (Plan::ops)
    const Op& op = p.ops[id];
    ops[id] = OpLite{op.gpu, op.stream, op.match, op.kind};
    group[id] = op.group;
    max_group = std::max(max_group, op.group);
    max_gpu = std::max(max_gpu, op.gpu);
    max_stream = std::max(max_stream, op.stream);
    for (int32_t d : op.deps)
      if (d >= 0 && d < n) op_edges.push_back(OpEdge{d, id, true});
    op_edges.push_back(OpEdge{-1, id, false});  // its stream predecessor, filled below
  }
  const int64_t streams = static_cast<int64_t>(max_stream) + 1;
  const size_t stream_slots = static_cast<size_t>((static_cast<int64_t>(max_gpu) + 1) * streams);
  {
    std::vector<int32_t> last_on_stream(stream_slots, -1);
    size_t k = 0;
    for (OpEdge& e : op_edges) {
      if (e.dep) {
        op_edges[k++] = e;
        continue;
      }
      const OpLite& op = ops[e.to];
      if (op.gpu < 0 || op.stream < 0) continue;  // Verify reports it
      int32_t& last = last_on_stream[op.gpu * streams + op.stream];
      if (last >= 0) op_edges[k++] = OpEdge{last, e.to, false};
      last = e.to;
    }
    op_edges.resize(k);
  }
  UnionFind groups(n);  // roots are the lowest op id of their set
  {
    // The first op of each group: by group id when ids are dense, else hashed.
    const bool dense = max_group <= 4 * static_cast<int64_t>(n);
    std::vector<int32_t> first_dense(dense ? static_cast<size_t>(max_group) + 1 : 0, -1);
    std::unordered_map<int32_t, int32_t> first_sparse;  // lookup only
    for (int32_t id = 0; id < n; ++id) {
      if (group[id] >= 0) {
        int32_t* first = nullptr;
        if (dense) {
          first = &first_dense[group[id]];
        } else {
          first = &first_sparse.try_emplace(group[id], -1).first->second;
        }
        if (*first < 0) {
          *first = id;
        } else {
          groups.Unite(*first, id);
        }
      }
      if (IsComm(ops[id].kind) && ops[id].match >= 0 && ops[id].match < n) groups.Unite(id, ops[id].match);
    }
  }
  group = {};
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
  edges.reserve(op_edges.size());
  for (const OpEdge& e : op_edges) {
    const int32_t a = root[e.from], b = root[e.to];
    if (a == b) {
      if (e.dep)
        problems.push_back(fmt::format("op {} depends on op {} of the same group; a group is issued at once, so it "
                                       "cannot wait for itself",
                                       e.to, e.from));
      continue;
    }
    edges.emplace_back(a, b);
  }
  op_edges = {};
  if (!problems.empty()) throw PlanRefused(plan_source, problems);
  std::vector<int32_t> succ_begin(static_cast<size_t>(n) + 1, 0), succ(edges.size()), indegree(n, 0);
  for (const auto& [a, b] : edges) {
    ++succ_begin[a + 1];
    ++indegree[b];
  }
  for (int32_t i = 0; i < n; ++i) succ_begin[i + 1] += succ_begin[i];
  {
    std::vector<int32_t> fill(succ_begin.begin(), succ_begin.end() - 1);
    for (const auto& [a, b] : edges) succ[fill[a]++] = b;
  }
  edges = {};

  std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
  for (int32_t i = 0; i < n; ++i)
    if (root[i] == i && indegree[i] == 0) ready.push(i);
  // Per stream of the node being issued: its first and last comm op (valid
  // where span_mark equals the node's mark; streams of ops with a negative GPU
  // or stream, which Verify refuses, in a map).
  struct Span {
    int32_t first = -1, last = -1;
  };
  std::vector<Span> span(stream_slots);
  std::vector<int32_t> span_mark(stream_slots, -1);
  std::map<std::pair<int32_t, int32_t>, Span> odd_span;
  auto span_of = [&](const OpLite& op, int32_t node, bool create) -> Span* {
    if (op.gpu < 0 || op.stream < 0) {
      if (create) return &odd_span[{op.gpu, op.stream}];
      auto it = odd_span.find({op.gpu, op.stream});
      return it == odd_span.end() ? nullptr : &it->second;
    }
    const size_t slot = static_cast<size_t>(op.gpu * streams + op.stream);
    if (span_mark[slot] != node) {
      if (!create) return nullptr;
      span_mark[slot] = node;
      span[slot] = Span{};
    }
    return &span[slot];
  };
  IssueStep step;
  std::vector<int32_t> recvs;
  size_t issued = 0;
  while (!ready.empty()) {
    const int32_t node = ready.top();
    ready.pop();
    step.before.clear();
    step.comm.clear();
    step.after.clear();
    // Per stream: non-comm ops before the stream's first comm op go first,
    // those after its last comm op go after the group call.
    odd_span.clear();
    recvs.clear();
    for (int32_t k = member_begin[node]; k < member_begin[node + 1]; ++k) {
      const int32_t id = members[k];
      const OpLite& op = ops[id];
      if (!IsComm(op.kind)) continue;
      Span* s = span_of(op, node, true);
      if (s->first < 0) s->first = id;
      s->last = id;
    }
    for (int32_t k = member_begin[node]; k < member_begin[node + 1]; ++k) {
      const int32_t id = members[k];
      const OpLite& op = ops[id];
      if (op.kind == OpKind::kSend) {
        step.comm.push_back(id);  // sends by op id
      } else if (op.kind == OpKind::kRecv) {
        recvs.push_back(id);
      } else {
        const Span* s = span_of(op, node, false);
        if (s == nullptr || id < s->first) {
          step.before.push_back(id);
        } else if (id > s->last) {
          step.after.push_back(id);
        } else {
          problems.push_back(fmt::format("op {} ({}) sits between sends/receives of its group on GPU {} stream {}; "
                                         "split the group",
                                         id, OpKindName(op.kind), op.gpu, op.stream));
        }
      }
    }
    std::stable_sort(recvs.begin(), recvs.end(), [&](int32_t a, int32_t b) { return ops[a].match < ops[b].match; });
    step.comm.insert(step.comm.end(), recvs.begin(), recvs.end());
    issued += step.before.size() + step.comm.size() + step.after.size();
    visit(step);
    for (int32_t e = succ_begin[node]; e < succ_begin[node + 1]; ++e)
      if (--indegree[succ[e]] == 0) ready.push(succ[e]);
  }
  if (issued != p.ops.size())
    problems.push_back(fmt::format("{} ops are on a dependency cycle once groups are issued together (a group waits "
                                   "for work that waits for the group)",
                                   p.ops.size() - issued));
  if (!problems.empty()) throw PlanRefused(plan_source, problems);
}

std::vector<int32_t> EventOwners(const Plan& plan) {
  std::vector<int32_t> owner(plan.ops.size());
  auto grouped = [](const Op& op) { return op.group >= 0 && (op.kind == OpKind::kSend || op.kind == OpKind::kRecv); };
  int64_t max_group = -1, grouped_ops = 0;
  int32_t max_gpu = -1;
  bool negative_gpu = false;
  for (const Op& op : plan.ops) {
    owner[op.id] = op.id;
    if (!grouped(op)) continue;
    ++grouped_ops;
    max_group = std::max<int64_t>(max_group, op.group);
    max_gpu = std::max(max_gpu, op.gpu);
    negative_gpu = negative_gpu || op.gpu < 0;
  }
  if (grouped_ops == 0) return owner;
  // Group ids are dense (the planner numbers them 0, 1, ...): the grouped ops
  // bucketed by group in plan order (a counting sort), then per group the
  // first op seen on each GPU, by a per-GPU stamp. O(ops + groups + GPUs),
  // no hashing (a hash map of (group, GPU) was ~18 % of planning llama3-70b
  // disaggregated, which simulates ~50 candidates of ~1 M ops).
  if (!negative_gpu && max_group <= 4 * grouped_ops) {
    std::vector<int32_t> begin(static_cast<size_t>(max_group) + 2, 0), ids(static_cast<size_t>(grouped_ops));
    for (const Op& op : plan.ops)
      if (grouped(op)) ++begin[op.group + 1];
    for (size_t g = 1; g < begin.size(); ++g) begin[g] += begin[g - 1];
    {
      std::vector<int32_t> fill(begin.begin(), begin.end() - 1);
      for (size_t i = 0; i < plan.ops.size(); ++i)
        if (grouped(plan.ops[i])) ids[fill[plan.ops[i].group]++] = static_cast<int32_t>(i);
    }
    std::vector<int32_t> seen(static_cast<size_t>(max_gpu) + 1, -1), first(static_cast<size_t>(max_gpu) + 1, -1);
    for (int32_t g = 0; g <= max_group; ++g)
      for (int32_t k = begin[g]; k < begin[g + 1]; ++k) {
        const Op& op = plan.ops[ids[k]];
        if (seen[op.gpu] != g) seen[op.gpu] = g, first[op.gpu] = op.id;
        owner[op.id] = first[op.gpu];
      }
    return owner;
  }
  std::unordered_map<int64_t, int32_t> first;  // (group, GPU) -> its first op
  for (const Op& op : plan.ops) {
    if (!grouped(op)) continue;
    const int64_t key = static_cast<int64_t>(op.group) << 32 | static_cast<uint32_t>(op.gpu);
    owner[op.id] = first.try_emplace(key, op.id).first->second;
  }
  return owner;
}

std::vector<uint8_t> OpEventCounts(const Plan& plan) {
  const std::vector<int32_t> owner = EventOwners(plan);
  std::vector<uint8_t> n(plan.ops.size(), 2);
  for (const Op& op : plan.ops)
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree || owner[op.id] != op.id) n[op.id] = 0;
  for (const Op& op : plan.ops)
    for (int32_t d : op.deps) {
      if (d < 0 || static_cast<size_t>(d) >= plan.ops.size() || n[d] != 0 || owner[d] != d) continue;
      const Op& dep = plan.ops[d];
      if (dep.gpu != op.gpu || dep.stream != op.stream) n[d] = 1;
    }
  return n;
}

}  // namespace reshard
