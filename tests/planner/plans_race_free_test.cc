// Every plan the emitter makes is free of byte races (Verify, plan-format.md
// rule 10): over the layout cases both planners handle and the relay
// scenarios, with receive relays and sender relays or without, rounds of one,
// two or all segments, staged and in place, and the emitter's policies one by
// one (memory releases, two lanes, rounds on two lanes, relay waves, phase
// chunks with their ramp and early relay phase). The other tests verify the
// plans of the combinations they are about; this one walks the combinations.
// Quantized plans come from MakePlan's quantize pass, not EmitPlan: walked
// apart, over the same layouts.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/error.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/emitter.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/segments.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

// The policies worth emitting for `sc`: each knob of PlanPolicy on its own,
// and the ones that need others with them.
std::vector<PlanPolicy> PoliciesFor(const Schedule& sc, bool round_per_phase) {
  std::vector<PlanPolicy> out;
  PlanPolicy base;
  out.push_back(base);
  PlanPolicy one_lane = base;
  one_lane.comm_lanes = false;
  out.push_back(one_lane);
  PlanPolicy late = base;
  late.destination_per_layer = true;
  late.source_to_host = true;
  out.push_back(late);
  PlanPolicy offload = base;
  offload.offload_fraction = 0.5;
  offload.destination_per_layer = true;
  out.push_back(offload);
  if (!round_per_phase) {
    PlanPolicy lanes = base;
    lanes.round_lanes = true;
    out.push_back(lanes);
    return out;
  }
  if (sc.relay_rounds > 0)
    for (int32_t waves : {2, 3})
      for (bool by_segment : {false, true}) {
        PlanPolicy w = base;
        w.relay_waves = waves;
        w.relay_waves_by_segment = by_segment;
        out.push_back(w);
      }
  for (int32_t chunks : {3, 4})
    for (double ramp : {1.0, 2.0})
      for (int32_t feed_chunks : {1, 2}) {
        PlanPolicy c = base;
        c.phase_chunks = chunks;
        c.chunk_ramp = ramp;
        c.feed_chunks = feed_chunks;
        c.early_relay_phase = true;
        if (!EarlyRelayPhase(sc, c)) {
          if (feed_chunks > 1) continue;
          c.early_relay_phase = false;
        }
        out.push_back(c);
      }
  return out;
}

TEST(PlansRaceFree, EveryPolicyOfEveryLayoutVerifies) {
  std::vector<Scenario> scenarios;
  for (const planner_testing::Case& c : planner_testing::LayoutCases()) {
    scenarios.push_back(planner_testing::FromYaml(c.yaml));
    scenarios.back().name = c.name;
  }
  scenarios.push_back(planner_testing::TwoNodeRelayScenario());
  scenarios.push_back(planner_testing::Tp2ToTp4RelayScenario());
  int plans = 0, relayed = 0, sender_relayed = 0, chunked = 0, waved = 0;
  for (const Scenario& s : scenarios) {
    for (int relays = 0; relays < 3; ++relays) {
      Problem prob(s);
      if (relays >= 1 && prob.AddRelays() == 0 && relays == 1) continue;
      if (relays == 2 && prob.AddSendRelays() == 0) continue;
      for (const int32_t per_round : {1, 2, kPerRoundAll})
        for (const int64_t size : {int64_t{64} << 10, int64_t{1} << 20})
          for (const int64_t direct : {int64_t{0}, std::numeric_limits<int64_t>::max()}) {
            const Schedule sc = MakeSchedule(prob, size, direct, per_round, per_round == kPerRoundAll);
            for (const PlanPolicy& policy : PoliciesFor(sc, per_round == kPerRoundAll)) {
              const EmittedPlan e = EmitPlan(prob, sc, policy);
              if (!e.fits) continue;
              const VerifyResult v = Verify(e.plan);
              EXPECT_TRUE(v.ok()) << s.name << " relays " << relays << " per round " << per_round << " size " << size
                                  << " in place from " << direct << " " << policy.Name()
                                  << (policy.comm_lanes ? "" : " one lane")
                                  << (policy.round_lanes ? " round lanes" : "")
                                  << " waves " << policy.relay_waves << " chunks " << policy.phase_chunks << ": "
                                  << v.problems.front() << " (" << v.problems.size() << " problems)";
              ++plans;
              relayed += sc.relay_rounds > 0;
              sender_relayed += relays == 2;
              chunked += policy.phase_chunks > 1;
              waved += policy.relay_waves > 1;
            }
          }
    }
  }
  // The walk reached what it is for.
  EXPECT_GT(plans, 1000);
  EXPECT_GT(relayed, 100);
  EXPECT_GT(sender_relayed, 50);
  EXPECT_GT(chunked, 100);
  EXPECT_GT(waved, 20);
}

// Quantized refits come from MakePlan (its quantize pass adds the fp8 tiles
// after the receives, or at the source under quantize_at_source): the layout
// cases with an fp8 destination, quantized at either end, each verify.
TEST(PlansRaceFree, EveryQuantizedLayoutVerifies) {
  int plans = 0, quantized = 0;
  for (const planner_testing::Case& c : planner_testing::LayoutCases()) {
    std::string yaml = c.yaml;
    const size_t at = yaml.find("\ndestination: {");
    ASSERT_NE(at, std::string::npos) << c.name;
    yaml.insert(at + 15, "dtype: fp8_e4m3, quantization: {block: [16, 16]}, ");
    Scenario s;
    try {
      s = planner_testing::FromYaml(yaml);
    } catch (const InputError&) {
      continue;  // a layout whose shards cut the blocks (vLLM refuses it too)
    }
    for (const bool at_source : {false, true}) {
      PlannerOptions o;
      o.quantize_at_source = at_source;
      o.simulate = false;
      PlanResult r;
      try {
        r = MakePlan(s, o);
      } catch (const InputError&) {
        continue;  // a layout whose shards cut the blocks (vLLM refuses it too)
      }
      if (!r.ok()) continue;
      const VerifyResult v = Verify(r.plan);
      EXPECT_TRUE(v.ok()) << c.name << (at_source ? " at source" : " at destination") << ": " << v.problems.front()
                          << " (" << v.problems.size() << " problems)";
      ++plans;
      quantized += std::any_of(r.plan.ops.begin(), r.plan.ops.end(),
                               [](const Op& op) { return op.kind == OpKind::kQuantize; });
    }
  }
  EXPECT_GT(plans, 20);  // 28 of the 30
  EXPECT_EQ(quantized, plans);
}

}  // namespace
}  // namespace reshard
