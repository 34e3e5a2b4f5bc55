// The all-gather refit baseline's plan (bench/gpu/allgather_plan.h), run in host
// memory: every destination element must hold the pattern after the refit, for
// every transport, on the shapes of the 2x H200 scenarios (dense TP2 -> TP1 x 2
// with GQA and fused QKV / gate|up; MoE EP2 -> TP2; one GPU to another). The
// memory model (optimizer state, offload, KV cache, reserve) against reshard's
// own Megatron-Core baseline plan (planner/baseline_plan.h) on the same scenarios.
#include "bench/gpu/allgather_plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "model/error.h"
#include "model/scenario.h"
#include "planner/baseline_plan.h"

namespace reshard::baseline {
namespace {

Scenario Make(const std::string& model, const std::string& source, const std::string& destination) {
  return ParseScenario("name: t\nmodel: " + model + "\ndtype: bf16\ncluster: h200-x2\nsource: " + source +
                           "\ndestination: " + destination + "\n",
                       "<test>");
}
Scenario DenseTp2ToTp1x2() { return Make("tiny-llama", "{tp: 2}", "{tp: 1, dp: 2}"); }
Scenario MoeEp2ToTp2() { return Make("tiny-moe", "{tp: 1, ep: 2, dp: 2}", "{tp: 2}"); }
Scenario Disaggregated() { return Make("tiny-llama", "{tp: 1, gpus: \"0\"}", "{tp: 1, gpus: \"1\"}"); }

BaselineOptions Bucketed(int64_t bytes, bool out_of_place = false) {
  BaselineOptions o;
  o.transport = Transport::kBucketed;
  o.bucket_bytes = bytes;
  o.out_of_place = out_of_place;
  return o;
}
BaselineOptions With(Transport t) {
  BaselineOptions o;
  o.transport = t;
  return o;
}

std::vector<BaselineOptions> AllVariants() {
  return {With(Transport::kPerTensor), Bucketed(64 << 10), Bucketed(1 << 20), Bucketed(int64_t{1} << 30),
          Bucketed(256 << 10, true), With(Transport::kFlat)};
}

int64_t DestinationElements(const Scenario& s) {
  const Layout d = MakeDestinationLayout(s.model, s.destination, s.destination_dtype);
  int64_t n = 0;
  for (int32_t r = 0; r < d.Ranks(); ++r)
    for (const Piece& p : d.ShardOf(r).pieces) n += Volume(p.box);
  return n;
}

int64_t CheckedElements(const RefitPlan& p) {
  int64_t n = 0;
  for (int32_t g = 0; g < p.gpus; ++g) n += p.CheckedElements(g);
  return n;
}

TEST(AllGatherPlan, DenseTp2ToTp1x2VerifiesForEveryTransport) {
  const Scenario s = DenseTp2ToTp1x2();
  for (const BaselineOptions& o : AllVariants()) {
    SCOPED_TRACE(std::string(TransportName(o.transport)) + " " + std::to_string(o.bucket_bytes));
    const RefitPlan p = PlanRefit(s, o);
    EXPECT_EQ(p.collective, Collective::kAllGather);
    EXPECT_EQ(p.gpus, 2);
    EXPECT_EQ(CheckedElements(p), DestinationElements(s));  // every destination element is checked
    EXPECT_EQ(EmulateOnHost(p), 0);
  }
}

TEST(AllGatherPlan, MoeEp2ToTp2VerifiesForEveryTransport) {
  const Scenario s = MoeEp2ToTp2();
  for (const BaselineOptions& o : AllVariants()) {
    SCOPED_TRACE(std::string(TransportName(o.transport)) + " " + std::to_string(o.bucket_bytes));
    const RefitPlan p = PlanRefit(s, o);
    EXPECT_EQ(p.collective, Collective::kAllGather);
    EXPECT_EQ(CheckedElements(p), DestinationElements(s));
    EXPECT_EQ(EmulateOnHost(p), 0);
  }
}

TEST(AllGatherPlan, DisaggregatedBroadcastsFromTheSourceGpu) {
  const Scenario s = Disaggregated();
  for (const BaselineOptions& o : AllVariants()) {
    SCOPED_TRACE(std::string(TransportName(o.transport)) + " " + std::to_string(o.bucket_bytes));
    const RefitPlan p = PlanRefit(s, o);
    EXPECT_EQ(p.collective, Collective::kBroadcast);
    EXPECT_EQ(p.ArenaBytes(0, Arena::kDestination), 0);
    EXPECT_EQ(p.ArenaBytes(1, Arena::kSource), 0);
    for (const Step& st : p.steps)
      if (st.kind == StepKind::kBroadcast) {
        EXPECT_EQ(st.root, 0);
      }
    EXPECT_EQ(EmulateOnHost(p), 0);
  }
}

// Replicated parameters (the norms under TP; attention and norms under EP with DP)
// are copied locally, never gathered: the moved bytes are the differing shards.
TEST(AllGatherPlan, OnlyDifferingShardsAreGathered) {
  for (const Scenario& s : {DenseTp2ToTp1x2(), MoeEp2ToTp2()}) {
    const RefitPlan p = PlanRefit(s, With(Transport::kPerTensor));
    int64_t moved = 0;
    for (const SourceBuffer& b : p.source_buffers) {
      const bool norm = b.name.find("layernorm") != std::string::npos;
      if (norm) {
        EXPECT_FALSE(b.moved) << b.name;
      }
      if (b.moved) moved += b.bytes;
    }
    int64_t gathered = 0;
    for (const Step& st : p.steps) gathered += st.send_bytes * (st.kind == StepKind::kAllGather);
    EXPECT_EQ(gathered, moved);
  }
  // Under EP2 with DP2 exactly the expert buffers differ between the GPUs.
  const RefitPlan p = PlanRefit(MoeEp2ToTp2(), With(Transport::kPerTensor));
  for (const SourceBuffer& b : p.source_buffers)
    EXPECT_EQ(b.moved, b.name.find("mlp.experts") != std::string::npos) << b.name;
}

TEST(AllGatherPlan, BucketsRespectTheirSizeUnlessOneParameterIsLarger) {
  const Scenario s = DenseTp2ToTp1x2();
  const int64_t bucket = 200 << 10;
  const RefitPlan p = PlanRefit(s, Bucketed(bucket));
  int64_t largest_param = 0;
  for (const SourceBuffer& b : p.source_buffers)
    if (b.moved) largest_param = std::max(largest_param, b.bytes);
  ASSERT_GT(largest_param * 2, bucket);  // the embedding shard alone overflows: the case is exercised
  int buffers = 0;
  for (const Step& st : p.steps) {
    if (st.kind != StepKind::kAllGather) continue;
    buffers += static_cast<int>(st.buffers.size());
    if (st.buffers.size() > 1) {
      EXPECT_LE(st.GatheredBytes(p.gpus), bucket);
    }
    EXPECT_LE(st.GatheredBytes(p.gpus), std::max(bucket, 2 * ((largest_param + 255) / 256 * 256)));
  }
  EXPECT_GT(p.Collectives(), 2);
  // Parameters are walked in order, each in exactly one bucket.
  int moved = 0;
  for (const SourceBuffer& b : p.source_buffers) moved += b.moved;
  EXPECT_EQ(buffers, moved);
  // Bigger buckets, fewer collectives.
  EXPECT_LT(PlanRefit(s, Bucketed(int64_t{1} << 30)).Collectives(), p.Collectives());
}

TEST(AllGatherPlan, InPlaceBucketsNeedNoInputBuffer) {
  const Scenario s = DenseTp2ToTp1x2();
  const RefitPlan in = PlanRefit(s, Bucketed(1 << 20));
  const RefitPlan out = PlanRefit(s, Bucketed(1 << 20, true));
  EXPECT_EQ(in.ArenaBytes(0, Arena::kInput), 0);
  EXPECT_GT(out.ArenaBytes(0, Arena::kInput), 0);
  EXPECT_EQ(in.ArenaBytes(0, Arena::kBucket), out.ArenaBytes(0, Arena::kBucket));
}

TEST(AllGatherPlan, FlatSendsTheGatheredBytesOnceEachWay) {
  const Scenario s = DenseTp2ToTp1x2();
  const RefitPlan p = PlanRefit(s, With(Transport::kFlat));
  ASSERT_EQ(p.steps.size(), 1u);
  ASSERT_EQ(p.steps[0].sends.size(), 2u);  // 0 -> 1 and 1 -> 0
  for (const FlatSend& f : p.steps[0].sends) {
    EXPECT_NE(f.from, f.to);
    EXPECT_EQ(f.bytes, p.moved_bytes);
  }
  EXPECT_EQ(p.ArenaBytes(0, Arena::kStaging), p.moved_bytes);
}

// The check is real: a plan whose unpack puts one row in the wrong place fails.
TEST(AllGatherPlan, CorruptedPlanIsCaught) {
  RefitPlan p = PlanRefit(DenseTp2ToTp1x2(), Bucketed(1 << 20));
  bool corrupted = false;
  for (Step& st : p.steps) {
    for (ByteCopy& c : st.unpack[1]) {
      if (c.row_bytes >= 64 && c.src_offset >= 2) {
        c.src_offset -= 2;  // one element early: every element of the copy shifts
        corrupted = true;
        break;
      }
    }
    if (corrupted) break;
  }
  ASSERT_TRUE(corrupted);
  EXPECT_GT(EmulateOnHost(p), 0);
}

TEST(AllGatherPlan, UnsupportedScenariosNameTheField) {
  try {
    PlanRefit(Make("tiny-llama", "{tp: 1, pp: 2}", "{tp: 1, dp: 2}"), With(Transport::kPerTensor));
    FAIL() << "pp=2 accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "source.pp");
  }
  try {
    PlanRefit(Make("tiny-llama", "{tp: 2}", "{tp: 1, dp: 2, dtype: fp8_e4m3}"), With(Transport::kPerTensor));
    FAIL() << "fp8 destination accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "destination.dtype");
  }
  try {
    PlanRefit(DenseTp2ToTp1x2(), Bucketed(0));
    FAIL() << "empty bucket accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "bucket");
  }
}

// ---- Memory: optimizer state, offload, KV cache, reserve --------------------------

// What reshard's Megatron-Core baseline plan (planner/baseline_plan.h) holds per
// GPU for the same scenario: device optimizer state and KV cache, the host
// buffers its offload fills, and the offload fraction it chose.
struct ReshardSide {
  std::vector<int64_t> optimizer, kv_cache, host;
  double offload_fraction = -1;
};
ReshardSide FromMegatronPlan(const Scenario& s) {
  reshard::BaselineOptions o;
  o.simulate = false;
  const PlanResult r = MakeMegatronPlan(s, o);
  ReshardSide out;
  const size_t gpus = static_cast<size_t>(s.cluster.Gpus());
  out.optimizer.assign(gpus, 0);
  out.kv_cache.assign(gpus, 0);
  out.host.assign(gpus, 0);
  for (const PlanBuffer& b : r.plan.buffers) {
    const size_t g = static_cast<size_t>(b.gpu);
    if (b.space == MemorySpace::kHost) out.host[g] += b.bytes;
    else if (b.role == BufferRole::kOptimizer) out.optimizer[g] += b.bytes;
    else if (b.role == BufferRole::kKvCache) out.kv_cache[g] += b.bytes;
  }
  out.offload_fraction = r.plan.summary.offload_fraction;
  return out;
}

// The 2x H200 scenarios the baseline is compared on: qwen3 (auto, too tight to
// refit without offloading), llama3-8b with offload: all, and llama3-8b (auto,
// fits without). Same optimizer, KV cache and offload as reshard's baseline plan.
TEST(AllGatherPlanMemory, MatchesReshardsBaselineOnTheH200Scenarios) {
  struct Case {
    std::string name;
    double fraction;  // what the scenario's offload setting must give
  };
  for (const Case& c : {Case{"qwen3-30b-a3b-ep2-to-tp2", 1.0}, Case{"llama3-8b-tp2-to-tp1x2-offload", 1.0},
                        Case{"llama3-8b-tp2-to-tp1x2", 0.0}}) {
    SCOPED_TRACE(c.name);
    const Scenario s = BuiltinScenario(c.name);
    const RefitPlan p = PlanRefit(s, Bucketed(int64_t{1} << 30));
    const ReshardSide r = FromMegatronPlan(s);
    const std::vector<GpuMemoryAtStart> at_start = MemoryAtStart(s, MakeSourceLayout(s.model, s.source, s.dtype));
    ASSERT_TRUE(p.memory_modelled);
    ASSERT_EQ(p.memory.size(), 2u);
    EXPECT_EQ(p.capacity_bytes, s.cluster.gpu_memory_bytes);
    EXPECT_EQ(p.offload_fraction, c.fraction);
    EXPECT_EQ(p.offload_fraction, r.offload_fraction);
    EXPECT_TRUE(p.planned_fits) << "GPU " << p.missing_gpu << " misses " << p.missing_bytes;
    for (int32_t g = 0; g < p.gpus; ++g) {
      const GpuMemoryPlan& m = p.memory[static_cast<size_t>(g)];
      const size_t i = static_cast<size_t>(g);
      EXPECT_GT(m.optimizer_bytes, 0);
      EXPECT_EQ(m.optimizer_bytes, at_start[i].optimizer);
      EXPECT_EQ(m.optimizer_bytes, r.optimizer[i]);
      EXPECT_EQ(m.kv_cache_bytes, r.kv_cache[i]);
      EXPECT_EQ(m.kv_cache_bytes, s.memory.kv_cache_bytes);
      EXPECT_EQ(m.reserve_bytes, s.memory.reserve_bytes);
      EXPECT_EQ(m.offload_bytes, std::llround(p.offload_fraction * static_cast<double>(m.optimizer_bytes)));
      EXPECT_EQ(m.offload_bytes, r.host[i]);  // whole fractions: the same bytes go to host
      EXPECT_LE(m.planned_peak_bytes, p.capacity_bytes - m.reserve_bytes);
    }
  }
}

// qwen3 EP2 -> TP2 leaves less free memory than the destination weights need:
// without offload the planned peak is over capacity less reserve, which is why
// "auto" offloads it all.
TEST(AllGatherPlanMemory, Qwen3NeedsTheOffload) {
  const Scenario s = BuiltinScenario("qwen3-30b-a3b-ep2-to-tp2");
  BaselineOptions o = Bucketed(int64_t{1} << 30);
  o.offload_fraction = 0.0;
  const RefitPlan none = PlanRefit(s, o);
  EXPECT_EQ(none.offload_fraction, 0.0);
  EXPECT_FALSE(none.planned_fits);
  ASSERT_GE(none.missing_gpu, 0);
  const GpuMemoryPlan& m = none.memory[static_cast<size_t>(none.missing_gpu)];
  EXPECT_EQ(none.missing_bytes, m.planned_peak_bytes - (none.capacity_bytes - m.reserve_bytes));
  EXPECT_GT(none.missing_bytes, 0);
  // A quarter (reshard's planner may choose one) is honoured as given.
  o.offload_fraction = 0.25;
  const RefitPlan quarter = PlanRefit(s, o);
  EXPECT_EQ(quarter.offload_fraction, 0.25);
  for (const GpuMemoryPlan& q : quarter.memory)
    EXPECT_EQ(q.offload_bytes, std::llround(0.25 * static_cast<double>(q.optimizer_bytes)));
}

// The planned peak: the state at start, less what the offload freed, plus the
// refit's buffers (destination, bucket, input, staging) allocated after it.
TEST(AllGatherPlanMemory, OffloadFreesRoomBeforeTheRefitBuffers) {
  Scenario s = DenseTp2ToTp1x2();
  s.memory.kv_cache_bytes = 3 << 20;
  s.memory.reserve_bytes = 1 << 20;
  BaselineOptions o = Bucketed(1 << 20, true);
  o.offload_fraction = 0.0;
  const RefitPlan none = PlanRefit(s, o);
  o.offload_fraction = 1.0;
  const RefitPlan all = PlanRefit(s, o);
  for (int32_t g = 0; g < none.gpus; ++g) {
    const GpuMemoryPlan& n = none.memory[static_cast<size_t>(g)];
    const GpuMemoryPlan& a = all.memory[static_cast<size_t>(g)];
    ASSERT_GT(n.optimizer_bytes, none.RefitBufferBytes(g));  // the offload alone makes room for the refit
    EXPECT_EQ(n.start_bytes, a.start_bytes);                 // the start state does not depend on the offload
    EXPECT_EQ(n.start_bytes, none.ArenaBytes(g, Arena::kSource) + n.optimizer_bytes + n.kv_cache_bytes +
                                 n.descriptor_bytes + n.overhead_bytes);
    EXPECT_EQ(n.planned_peak_bytes, n.start_bytes + none.RefitBufferBytes(g));
    EXPECT_EQ(a.planned_peak_bytes, a.start_bytes);
    EXPECT_EQ(a.offload_bytes, a.optimizer_bytes);
    EXPECT_EQ(n.offload_bytes, 0);
    EXPECT_EQ(n.kv_cache_bytes, 3 << 20);
    EXPECT_EQ(n.nccl_peers, 1);  // two GPUs: one ring neighbour
    EXPECT_EQ(n.overhead_bytes, s.cluster.overheads.cuda_context_bytes + s.cluster.overheads.nccl_bytes_per_peer);
  }
  // The transfer plan does not change with the memory model.
  EXPECT_EQ(none.arena_bytes, all.arena_bytes);
  EXPECT_EQ(none.steps.size(), all.steps.size());
}

// "auto": none when that fits in capacity less reserve, else all; when even all
// does not fit, all is kept and the GPU missing the most is named.
TEST(AllGatherPlanMemory, AutoOffloadsOnlyWhenNoneDoesNotFit) {
  Scenario s = DenseTp2ToTp1x2();
  s.memory.optimizer.offload = OffloadMode::kAuto;
  s.memory.reserve_bytes = 1 << 20;
  BaselineOptions o = Bucketed(1 << 20);
  o.offload_fraction = 0.0;
  const RefitPlan none = PlanRefit(s, o);
  o.offload_fraction = 1.0;
  const RefitPlan all = PlanRefit(s, o);
  int64_t peak_none = 0, peak_all = 0;
  for (int32_t g = 0; g < none.gpus; ++g) {
    peak_none = std::max(peak_none, none.memory[static_cast<size_t>(g)].planned_peak_bytes);
    peak_all = std::max(peak_all, all.memory[static_cast<size_t>(g)].planned_peak_bytes);
  }
  ASSERT_LT(peak_all, peak_none);
  const BaselineOptions from_scenario = Bucketed(1 << 20);

  s.cluster.gpu_memory_bytes = peak_none + s.memory.reserve_bytes;  // none fits, exactly
  RefitPlan p = PlanRefit(s, from_scenario);
  EXPECT_EQ(p.offload_fraction, 0.0);
  EXPECT_TRUE(p.planned_fits);

  s.cluster.gpu_memory_bytes = peak_none + s.memory.reserve_bytes - 1;  // one byte short: all
  p = PlanRefit(s, from_scenario);
  EXPECT_EQ(p.offload_fraction, 1.0);
  EXPECT_TRUE(p.planned_fits);
  for (const GpuMemoryPlan& m : p.memory) EXPECT_EQ(m.offload_bytes, m.optimizer_bytes);

  s.cluster.gpu_memory_bytes = peak_all + s.memory.reserve_bytes - 1;  // not even all fits
  p = PlanRefit(s, from_scenario);
  EXPECT_EQ(p.offload_fraction, 1.0);
  EXPECT_FALSE(p.planned_fits);
  EXPECT_EQ(p.missing_bytes, 1);
  EXPECT_EQ(p.missing_gpu, all.memory[0].planned_peak_bytes == peak_all ? 0 : 1);  // ties: the lowest GPU

  // "none" and "all" are not searched: they hold even when they do not fit.
  s.memory.optimizer.offload = OffloadMode::kNone;
  p = PlanRefit(s, from_scenario);
  EXPECT_EQ(p.offload_fraction, 0.0);
  EXPECT_FALSE(p.planned_fits);
  s.cluster.gpu_memory_bytes = peak_none + s.memory.reserve_bytes;
  s.memory.optimizer.offload = OffloadMode::kAll;
  p = PlanRefit(s, from_scenario);
  EXPECT_EQ(p.offload_fraction, 1.0);
  EXPECT_TRUE(p.planned_fits);
}

// Disaggregated: the optimizer lives on the training GPU, the KV cache on the
// engine's; a flat exchange connects every peer it sends to.
TEST(AllGatherPlanMemory, DisaggregatedSplitsOptimizerAndKvCache) {
  Scenario s = Disaggregated();
  s.memory.kv_cache_bytes = 5 << 20;
  const RefitPlan p = PlanRefit(s, With(Transport::kFlat));
  EXPECT_GT(p.memory[0].optimizer_bytes, 0);
  EXPECT_EQ(p.memory[0].kv_cache_bytes, 0);
  EXPECT_EQ(p.memory[1].optimizer_bytes, 0);
  EXPECT_EQ(p.memory[1].kv_cache_bytes, 5 << 20);
  EXPECT_EQ(p.memory[0].nccl_peers, 1);
  EXPECT_EQ(p.memory[1].nccl_peers, 1);
}

TEST(AllGatherPlanMemory, NoMemoryIsTheWeightsOnlyPlan) {
  const Scenario s = BuiltinScenario("llama3-8b-tp2-to-tp1x2-offload");
  BaselineOptions o = Bucketed(int64_t{1} << 30);
  o.memory = false;
  const RefitPlan p = PlanRefit(s, o);
  EXPECT_FALSE(p.memory_modelled);
  EXPECT_TRUE(p.memory.empty());
  EXPECT_EQ(p.offload_fraction, 0.0);
  EXPECT_TRUE(p.planned_fits);
  o.memory = true;
  const RefitPlan q = PlanRefit(s, o);
  EXPECT_EQ(q.offload_fraction, 1.0);
  EXPECT_EQ(p.arena_bytes, q.arena_bytes);
}

TEST(AllGatherPlanMemory, ForcedOffloadOutsideZeroToOneIsRejected) {
  for (double f : {-0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    BaselineOptions o = Bucketed(1 << 20);
    o.offload_fraction = f;
    try {
      PlanRefit(DenseTp2ToTp1x2(), o);
      FAIL() << "offload " << f << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.field(), "offload");
    }
  }
}

}  // namespace
}  // namespace reshard::baseline
