// Tests of the Megatron-Core-style baseline plan (planner/baseline_plan.h):
// on 14 scenarios it verifies, moves the bytes reshard's plan moves, and run
// on element ids every destination element gets the right value from exactly
// one producer; then its defining choices (round-robin by destination rank,
// one NCCL group, local copies on the side stream, staging per strided side,
// everything allocated at once) and its reported peak.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/scenario.h"
#include "planner/baseline_plan.h"
#include "plan/plan.h"
#include "planner/planner.h"
#include "sim/simulator.h"

namespace reshard {
namespace {

Scenario FromYaml(const std::string& yaml) { return ParseScenario(yaml, "<test>"); }

std::string Yaml(const std::string& model, const std::string& cluster, const std::string& src, const std::string& dst,
                 const std::string& extra = "") {
  return "name: t\nmodel: " + model + "\ndtype: bf16\ncluster: " + cluster + "\nsource: " + src +
         "\ndestination: " + dst + "\n" +
         (extra.empty() ? "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache: 64MiB, reserve: 16MiB}\n"
                        : extra);
}

int64_t DestinationBytes(const Plan& p) {
  int64_t n = 0;
  for (const ContentPiece& c : p.destinations) n += Volume(c.box) * DTypeBytes(p.tensors[c.tensor].dtype);
  return n;
}

// Runs `p` in a topological order of its groups on element ids (tensor base +
// row-major index): sources are filled with their ids, every copy and
// send/recv moves ids, and afterwards every destination element must hold its
// own id, written exactly once. (The same check as planner_test's Execute,
// without its "nothing already on the GPU crosses a link" rule, which the
// baseline does not promise.) Ops are run in plan order, which for this plan
// is a valid order: packs before the group, unpacks after it.
void CheckEveryElementOnce(const Plan& p) {
  const int32_t nt = static_cast<int32_t>(p.tensors.size());
  std::vector<int64_t> tbase(nt + 1, 0);
  for (int32_t t = 0; t < nt; ++t) tbase[t + 1] = tbase[t] + p.tensors[t].shape.Elements();
  const int64_t eb = DTypeBytes(p.tensors.empty() ? DType::kBF16 : p.tensors[0].dtype);
  std::vector<std::vector<int64_t>> mem(p.buffers.size());
  std::vector<std::vector<int32_t>> writes(p.buffers.size());
  auto shadow = [&](int32_t b) -> std::vector<int64_t>& {
    if (mem[b].empty()) mem[b].assign(p.buffers[b].bytes / eb, -1);
    return mem[b];
  };
  auto moves_weights = [&](BufferRole r) {
    return r == BufferRole::kSourceWeights || r == BufferRole::kDestinationWeights || r == BufferRole::kStaging;
  };
  auto for_each = [&](const ContentPiece& c, auto&& fn) {
    const Box& b = c.box;
    const Shape& sh = p.tensors[c.tensor].shape;
    Extents idx = b.lo;
    if (Empty(b)) return;
    for (;;) {
      int64_t off = c.offset_elems;
      for (int d = 0; d < b.ndim; ++d) off += (idx[d] - b.lo[d]) * c.stride_elems[d];
      fn(off, tbase[c.tensor] + LinearIndex(sh, idx));
      int d = b.ndim - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < b.hi[d]) break;
        idx[d] = b.lo[d];
      }
      if (d < 0) break;
    }
  };
  for (const ContentPiece& c : p.sources) {
    auto& m = shadow(c.buffer);
    for_each(c, [&](int64_t off, int64_t id) { m[off] = id; });
  }
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  auto runs_of = [&](const Region& r) {
    Runs out;
    for (int64_t pl = 0; pl < r.planes; ++pl)
      for (int64_t row = 0; row < r.rows; ++row)
        out.emplace_back((r.offset_bytes + pl * r.plane_stride_bytes + row * r.row_stride_bytes) / eb, r.row_bytes / eb);
    return out;
  };
  auto gather = [&](int32_t b, const Runs& runs) {
    std::vector<int64_t> v;
    const auto& m = shadow(b);
    for (auto [o, n] : runs) v.insert(v.end(), m.begin() + o, m.begin() + o + n);
    return v;
  };
  int64_t written = 0;
  auto scatter = [&](int32_t b, const Runs& runs, const std::vector<int64_t>& vals) {
    auto& dm = shadow(b);
    const bool dest = p.buffers[b].role == BufferRole::kDestinationWeights;
    auto& w = writes[b];
    if (dest && w.empty()) w.assign(p.buffers[b].bytes / eb, 0);
    size_t k = 0;
    for (auto [o, n] : runs) {
      std::copy(vals.begin() + k, vals.begin() + k + n, dm.begin() + o);
      if (dest)
        for (int64_t x = o; x < o + n; ++x) ++w[x];
      k += n;
    }
    if (dest) written += static_cast<int64_t>(vals.size());
  };
  std::map<int32_t, std::vector<int64_t>> in_flight;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCopy) {
      for (const CopyPair& cp : op.copies) {
        if (!moves_weights(p.buffers[cp.src.buffer].role) || !moves_weights(p.buffers[cp.dst.buffer].role)) continue;
        const std::vector<int64_t> vals = gather(cp.src.buffer, runs_of(cp.src));
        ASSERT_TRUE(std::none_of(vals.begin(), vals.end(), [](int64_t x) { return x < 0; }))
            << "op " << op.id << " (" << op.label << ") copies an unwritten element";
        scatter(cp.dst.buffer, runs_of(cp.dst), vals);
      }
    } else if (op.kind == OpKind::kSend) {
      in_flight[op.id] = gather(op.region.buffer, runs_of(op.region));
    } else if (op.kind == OpKind::kRecv) {
      auto it = in_flight.find(op.match);
      ASSERT_NE(it, in_flight.end()) << "recv " << op.id << " before its send";
      ASSERT_EQ(op.region.Bytes() / eb, static_cast<int64_t>(it->second.size()));
      scatter(op.region.buffer, runs_of(op.region), it->second);
      in_flight.erase(it);
    }
  }
  EXPECT_TRUE(in_flight.empty());
  int64_t expected = 0, wrong = 0, not_once = 0;
  for (const ContentPiece& c : p.destinations) {
    auto& m = shadow(c.buffer);
    auto& w = writes[c.buffer];
    for_each(c, [&](int64_t off, int64_t id) {
      ++expected;
      wrong += m[off] != id;
      not_once += (w.empty() ? 0 : w[off]) != 1;
    });
  }
  EXPECT_EQ(wrong, 0) << "destination elements with the wrong value";
  EXPECT_EQ(not_once, 0) << "destination elements without exactly one producer";
  EXPECT_EQ(written, expected) << "elements written outside the destination pieces, or twice";
}

struct Case {
  const char* name;
  std::string yaml;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::vector<Case> Cases() {
  const std::string x2 = "h200-x2", dgx = "dgx-h100", dgx2 = "{preset: dgx-h100, nodes: 2}";
  return {
      {"dense_tp2_to_tp1dp2", Yaml("tiny-llama", x2, "{tp: 2}", "{tp: 1, dp: 2}")},
      {"dense_identity_all_local", Yaml("tiny-llama", x2, "{tp: 2}", "{tp: 2}")},
      {"dense_dp2_to_tp2", Yaml("tiny-llama", x2, "{tp: 1, dp: 2}", "{tp: 2}")},
      {"dense_pp2_to_tp2", Yaml("tiny-llama", x2, "{pp: 2}", "{tp: 2}")},
      {"dense_vpp_to_tp2dp2", Yaml("tiny-llama", dgx, "{tp: 1, pp: 2, vpp: 2, gpus: \"0-3\"}",
                                   "{tp: 2, dp: 2, gpus: \"0-3\"}")},
      {"dense_uneven_pp", Yaml("tiny-llama", dgx, "{pp: 2, pp_layers: [1, 3], dp: 2, gpus: \"0-3\"}",
                               "{tp: 2, dp: 2, gpus: \"0-3\"}")},
      {"dense_to_destination_pp", Yaml("tiny-llama", dgx, "{tp: 2, dp: 2, gpus: \"0-3\"}", "{tp: 2, pp: 2, gpus: \"0-3\"}")},
      {"tied_tp2_to_tp1dp2", Yaml("tiny-qwen2", x2, "{tp: 2}", "{tp: 1, dp: 2}")},
      {"moe_ep2_to_tp2", Yaml("tiny-moe", x2, "{tp: 1, ep: 2, dp: 2}", "{tp: 2}")},
      {"moe_etp_change", Yaml("tiny-moe", dgx, "{tp: 2, ep: 2, etp: 2, dp: 2, gpus: \"0-3\"}", "{tp: 4, gpus: \"0-3\"}")},
      {"mla_ep2pp2_to_tp4", Yaml("tiny-mla", dgx, "{pp: 2, ep: 2, dp: 2, gpus: \"0-3\"}", "{tp: 4, gpus: \"0-3\"}")},
      {"disaggregated_nvlink", Yaml("tiny-llama", dgx, "{tp: 2, gpus: \"0-1\"}", "{tp: 2, dp: 2, gpus: \"2-5\"}")},
      {"disaggregated_network", Yaml("tiny-moe", dgx2, "{tp: 2, ep: 4, dp: 4, gpus: \"0-7\"}",
                                     "{tp: 4, dp: 2, gpus: \"8-15\"}")},
      {"mixed_overlap", Yaml("tiny-llama", dgx, "{tp: 2, dp: 2, gpus: \"0-3\"}", "{tp: 4, gpus: \"2-5\"}")},
      {"multinode_mla_dp_change", Yaml("tiny-mla", dgx2, "{tp: 2, pp: 2, ep: 4, dp: 4}", "{tp: 8, dp: 2}")},
      {"optimizer_offloaded_first", Yaml("tiny-qwen2", x2, "{tp: 2}", "{tp: 1, dp: 2}",
                                         "memory: {optimizer: {bytes_per_param: 12, offload: all}, kv_cache: 64MiB}\n")},
  };
}

class BaselineCases : public ::testing::TestWithParam<Case> {};

TEST_P(BaselineCases, VerifiesMovesReshardsBytesAndProducesEveryElementOnce) {
  const Scenario s = FromYaml(GetParam().yaml);
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  const Plan& p = r.plan;
  const VerifyResult v = Verify(p, &s.cluster);
  ASSERT_TRUE(v.ok()) << v.problems.front() << " (" << v.problems.size() << " problems)";
  // The same bytes as reshard's plan of the same scenario, and as the layouts need.
  PlannerOptions po;
  po.simulate = false;
  po.segment_bytes = 1 << 20;
  const PlanResult ours = MakePlan(s, po);
  ASSERT_TRUE(ours.ok()) << ours.message;
  const BytesMoved& a = p.summary.bytes_moved;
  const BytesMoved& b = ours.plan.summary.bytes_moved;
  EXPECT_EQ(a.local + a.nvlink + a.network, b.local + b.nvlink + b.network);
  EXPECT_EQ(a.local + a.nvlink + a.network, DestinationBytes(p));
  EXPECT_EQ(a, CountBytesMoved(p));
  // Every (destination rank, fragment) is one send/recv or one local copy.
  EXPECT_EQ(r.stats.segments + r.stats.local_copy_ops, r.stats.fragments);
  EXPECT_EQ(r.stats.fragments, ours.stats.fragments);
  EXPECT_EQ(r.stats.ops, static_cast<int64_t>(p.ops.size()));
  // The simulator runs it; no plan beats the lower bound.
  EXPECT_GT(p.summary.lower_bound_s, 0);
  EXPECT_GE(p.summary.predicted_time_s, p.summary.lower_bound_s * 0.999);
  CheckEveryElementOnce(p);
}

INSTANTIATE_TEST_SUITE_P(Scenarios, BaselineCases, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

TEST(MegatronBaseline, BuiltinScenariosVerify) {
  for (const char* name : {"llama3-8b-tp2-to-tp1x2", "llama3-8b-disaggregated", "qwen3-30b-a3b-ep2-to-tp2",
                           "tiny-llama-tp2-to-tp1x2"}) {
    const Scenario s = BuiltinScenario(name);
    BaselineOptions o;
    o.simulate = false;
    const PlanResult r = MakeMegatronPlan(s, o);
    ASSERT_TRUE(r.ok()) << name;
    const VerifyResult v = Verify(r.plan, &s.cluster);
    EXPECT_TRUE(v.ok()) << name << ": " << (v.ok() ? "" : v.problems.front());
    const BytesMoved& m = r.plan.summary.bytes_moved;
    EXPECT_EQ(m.local + m.nvlink + m.network, DestinationBytes(r.plan)) << name;
    EXPECT_EQ(r.plan.summary.predicted_time_s, 0) << name << ": not simulated when asked not to";
  }
}

// Megatron's source choice: round-robin by destination rank over the replicas
// (here dest rank 0 -> source rank 0, dest rank 1 -> source rank 1), so the
// replicas on GPUs 2 and 3 send nothing; reshard's planner spreads the load.
TEST(MegatronBaseline, RoundRobinByDestinationRankNotBalanced) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "dgx-h100", "{tp: 1, dp: 4, gpus: \"0-3\"}", "{tp: 2, gpus: \"4-5\"}"));
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  std::set<std::pair<int32_t, int32_t>> pairs;
  for (const Op& op : r.plan.ops)
    if (op.kind == OpKind::kSend) pairs.emplace(op.gpu, op.peer);
  EXPECT_EQ(pairs, (std::set<std::pair<int32_t, int32_t>>{{0, 4}, {1, 5}}));
  PlannerOptions po;
  po.simulate = false;
  const PlanResult ours = MakePlan(s, po);
  ASSERT_TRUE(ours.ok());
  std::set<int32_t> senders;
  for (const Op& op : ours.plan.ops)
    if (op.kind == OpKind::kSend) senders.insert(op.gpu);
  EXPECT_EQ(senders.size(), 4u) << "reshard balances over all four replicas";
}

// Colocated replicas: everything is on the destination's own GPU, so the
// plan is local copies only, one op per fragment, on the side stream.
TEST(MegatronBaseline, SameGpuReplicaIsCopiedOnTheSideStream) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 2}"));
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.stats.segments, 0);
  EXPECT_EQ(r.stats.groups, 0);
  EXPECT_EQ(r.plan.summary.bytes_moved.local, DestinationBytes(r.plan));
  int64_t copies = 0;
  for (const Op& op : r.plan.ops) {
    EXPECT_NE(op.kind, OpKind::kSend);
    if (op.kind == OpKind::kCopy) {
      EXPECT_EQ(op.stream, 3) << op.label;
      ++copies;
    }
  }
  EXPECT_EQ(copies, r.stats.fragments);
  EXPECT_EQ(r.plan.stream_names.at(3), "side");
}

// One NCCL group for every send/recv; a strided side goes through a staging
// buffer of the fragment's own, a contiguous side sends / receives in place;
// destination weights and staging are allocated before the group, staging
// freed after it.
TEST(MegatronBaseline, OneGroupStagingPerStridedSideAllocatedUpFront) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}"));
  const PlanResult r = MakeMegatronPlan(s);
  ASSERT_TRUE(r.ok());
  const Plan& p = r.plan;
  int32_t first_comm = -1, last_comm = -1, staged = 0, in_place_sides = 0, sends = 0;
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) continue;
    EXPECT_EQ(op.group, 0);
    EXPECT_EQ(op.stream, kStreamComm);
    if (first_comm < 0) first_comm = op.id;
    last_comm = op.id;
    sends += op.kind == OpKind::kSend;
    const PlanBuffer& b = p.buffers[op.region.buffer];
    if (b.role == BufferRole::kStaging) {
      ++staged;
      EXPECT_EQ(b.bytes, op.region.Bytes()) << "one staging buffer per fragment, of its size";
    } else {
      ++in_place_sides;
      EXPECT_EQ(b.role, op.kind == OpKind::kSend ? BufferRole::kSourceWeights : BufferRole::kDestinationWeights);
    }
  }
  ASSERT_GT(sends, 0);
  EXPECT_EQ(sends, r.stats.segments);
  EXPECT_EQ(r.stats.groups, 1);
  // TP2 -> TP1: the fused QKV / gate-up halves are strided on one side.
  EXPECT_GT(staged, 0);
  EXPECT_GT(in_place_sides, 0);
  int64_t staging_buffers = 0;
  for (const PlanBuffer& b : p.buffers) staging_buffers += b.role == BufferRole::kStaging;
  EXPECT_EQ(staging_buffers, staged);
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc) {
      EXPECT_LT(op.id, first_comm) << "allocated up front: " << op.label;
    }
    if (op.kind == OpKind::kFree) {
      EXPECT_GT(op.id, last_comm) << op.label;
      EXPECT_EQ(p.buffers[op.buffer].role, BufferRole::kStaging);
    }
  }
}

// No memory bound: the planned peak of a GPU is everything at once (start
// memory, every destination buffer, every staging buffer, CUDA context and
// NCCL peer buffers); where that exceeds the GPU, the plan is still returned
// with the GPU and the excess named, while reshard's planner fits by policy.
TEST(MegatronBaseline, PeakIsEverythingAtOnceAndIsReportedNotBounded) {
  const std::string mem = "memory: {optimizer: {bytes_per_param: 0, offload: none}, kv_cache: 0, reserve: 0}\n";
  Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}", mem));
  const PlanResult loose = MakeMegatronPlan(s);
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose.gpu, -1);
  EXPECT_TRUE(loose.message.empty());
  const Plan& p = loose.plan;
  for (int32_t g = 0; g < 2; ++g) {
    int64_t all = s.cluster.overheads.cuda_context_bytes + s.cluster.overheads.nccl_bytes_per_peer;  // one peer
    for (const PlanBuffer& b : p.buffers)
      if (b.gpu == g && b.space == MemorySpace::kDevice) all += b.bytes;
    EXPECT_EQ(loose.stats.planned_peak_bytes[g], all) << "gpu " << g;
    // The simulator's peak is the same (everything lives across the group).
    EXPECT_EQ(p.summary.predicted_peak_bytes[g], all) << "gpu " << g;
  }
  const int64_t need = *std::max_element(loose.stats.planned_peak_bytes.begin(), loose.stats.planned_peak_bytes.end());
  s.cluster.gpu_memory_bytes = need - 4096;
  const PlanResult tight = MakeMegatronPlan(s);
  ASSERT_TRUE(tight.ok()) << "no memory bound: the plan is returned";
  EXPECT_GE(tight.gpu, 0);
  EXPECT_EQ(tight.missing_bytes, tight.stats.planned_peak_bytes[tight.gpu] - s.cluster.gpu_memory_bytes);
  EXPECT_NE(tight.message.find("GPU"), std::string::npos);
  PlannerOptions po;
  po.segment_bytes = 64 << 10;
  const PlanResult ours = MakePlan(s, po);
  ASSERT_TRUE(ours.ok()) << "reshard fits by allocating per layer: " << ours.message;
}

// Offload first: destination allocations wait for the GPU's optimizer to
// leave, as NeMo-RL offloads before it refits.
TEST(MegatronBaseline, OptimizerOffloadPrecedesDestinationAllocation) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}",
                                   "memory: {optimizer: {bytes_per_param: 12, offload: none}}\n"));
  BaselineOptions o;
  o.offload_fraction = 1.0;
  const PlanResult r = MakeMegatronPlan(s, o);
  ASSERT_TRUE(r.ok());
  const Plan& p = r.plan;
  ASSERT_TRUE(Verify(p).ok());
  EXPECT_EQ(p.summary.offload_fraction, 1.0);
  EXPECT_GT(p.summary.bytes_moved.pcie, 0);
  const Prediction pr = Simulate(p);
  for (const Op& op : p.ops) {
    if (op.kind != OpKind::kAlloc || p.buffers[op.buffer].role != BufferRole::kDestinationWeights) continue;
    for (const Op& o2 : p.ops)
      if (o2.kind == OpKind::kOffload && o2.gpu == op.gpu) {
        EXPECT_GE(pr.op_start_ns[op.id], pr.op_end_ns[o2.id]) << op.label << " before " << o2.label;
      }
  }
  // Without offload the same scenario moves nothing over PCIe.
  EXPECT_EQ(MakeMegatronPlan(s).plan.summary.bytes_moved.pcie, 0);
}

// offload: auto is NeMo-RL's all-or-nothing switch: none while everything
// fits, all when only that fits.
TEST(MegatronBaseline, AutoOffloadsAllOnlyWhenNothingElseFits) {
  Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}",
                             "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache: 0, reserve: 0}\n"));
  auto peak = [](const PlanResult& r) {
    return *std::max_element(r.stats.planned_peak_bytes.begin(), r.stats.planned_peak_bytes.end());
  };
  BaselineOptions none, all;
  none.offload_fraction = 0.0;
  all.offload_fraction = 1.0;
  const int64_t p0 = peak(MakeMegatronPlan(s, none)), p1 = peak(MakeMegatronPlan(s, all));
  ASSERT_LT(p1, p0);
  const PlanResult roomy = MakeMegatronPlan(s);
  EXPECT_EQ(roomy.plan.summary.offload_fraction, 0.0);
  EXPECT_EQ(roomy.gpu, -1);
  s.cluster.gpu_memory_bytes = (p0 + p1) / 2;
  const PlanResult tight = MakeMegatronPlan(s);
  EXPECT_EQ(tight.plan.summary.offload_fraction, 1.0);
  EXPECT_EQ(tight.gpu, -1) << tight.message;
  EXPECT_EQ(peak(tight), p1);
  s.cluster.gpu_memory_bytes = p1 - 1;  // nothing fits: all offloaded, the excess reported
  const PlanResult over = MakeMegatronPlan(s);
  EXPECT_EQ(over.plan.summary.offload_fraction, 1.0);
  EXPECT_EQ(over.missing_bytes, 1);
}

TEST(MegatronBaseline, SameInputSamePlan) {
  const Scenario s = FromYaml(Yaml("tiny-moe", "{preset: dgx-h100, nodes: 2}", "{tp: 2, ep: 4, dp: 8}", "{tp: 2, dp: 8}"));
  BaselineOptions o;
  o.simulate = false;
  EXPECT_TRUE(MakeMegatronPlan(s, o).plan == MakeMegatronPlan(s, o).plan);
}

TEST(MegatronBaseline, UnknownNameAndDtypeConversionAreInputErrors) {
  const Scenario s = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2}"));
  EXPECT_THROW(MakeBaselinePlan(s, "nemo"), InputError);
  EXPECT_NO_THROW(MakeBaselinePlan(s, "megatron"));
  const Scenario fp8 = FromYaml(Yaml("tiny-llama", "h200-x2", "{tp: 2}", "{tp: 1, dp: 2, dtype: fp8_e4m3}"));
  EXPECT_THROW(MakeMegatronPlan(fp8), InputError);
}

}  // namespace
}  // namespace reshard
