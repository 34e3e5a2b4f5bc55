// The all-gather refit baseline's plan (bench/gpu/allgather_plan.h), run in host
// memory: every destination element must hold the pattern after the refit, for
// every transport, on the shapes of the 2x H200 scenarios (dense TP2 -> TP1 x 2
// with GQA and fused QKV / gate|up; MoE EP2 -> TP2; one GPU to another).
#include "bench/gpu/allgather_plan.h"

#include <gtest/gtest.h>

#include <numeric>
#include <string>

#include "model/error.h"
#include "model/scenario.h"

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

}  // namespace
}  // namespace reshard::baseline
