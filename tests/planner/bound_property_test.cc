// The routing-independent lower bound (sim/topology_bound.h) against real
// plans: on every built-in scenario, each plan's own routing bound is at least
// it (a plan's routing is one of those the bound ranges over), and no plan is
// predicted faster than it: reshard's plan everywhere, the Megatron-style plan
// where simulating it is quick (its one-group plans of the at-scale scenarios
// take minutes; the at-scale table in the report compares those).
#include <cctype>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/baseline_plan.h"
#include "planner/planner.h"
#include "sim/simulator.h"

namespace reshard {
namespace {

constexpr int32_t kQuickGpus = 16;  // simulate the Megatron-style plan up to this size

void Check(const std::string& what, const PlanResult& r, bool simulate) {
  if (!r.ok()) return;  // no plan: nothing to compare (a scenario short of memory)
  const PlanSummary& s = r.plan.summary;
  EXPECT_GT(s.lower_bound_s, 0) << what;
  EXPECT_GE(s.routing_bound_s, s.lower_bound_s * (1 - 1e-9)) << what;
  if (!simulate) return;
  SimOptions so{nullptr, false};
  const Prediction pr = Simulate(r.plan, so);
  EXPECT_DOUBLE_EQ(pr.lower_bound_s, s.lower_bound_s) << what;
  EXPECT_DOUBLE_EQ(pr.routing_bound_s, s.routing_bound_s) << what;
  EXPECT_GE(pr.time_s, pr.lower_bound_s * (1 - 1e-9)) << what << " binding " << pr.lower_bound_port;
}

class BuiltinScenarios : public ::testing::TestWithParam<std::string> {};

TEST_P(BuiltinScenarios, NoPlanBeatsTheBoundAndRoutingBoundsAreAboveIt) {
  Scenario s = BuiltinScenario(GetParam());
  s.destination_dtype = s.dtype;  // the planners move weights as they are (kimi-k2's vLLM side is fp8)
  const bool quick = s.cluster.Gpus() <= kQuickGpus;
  try {
    PlannerOptions po;
    po.simulate = quick;  // at scale: the port-model estimate picks, the simulator checks below
    Check(GetParam() + " reshard", MakePlan(s, po), true);
    BaselineOptions bo;
    bo.simulate = false;
    Check(GetParam() + " megatron", MakeMegatronPlan(s, bo), quick);
  } catch (const InputError& e) {
    GTEST_SKIP() << e.what();  // a scenario the planners refuse
  }
}

// This file builds two programs: the quick built-ins, and (RESHARD_AT_SCALE,
// CTest label `slow`: minutes under the sanitizers) the at-scale ones.
#ifndef RESHARD_AT_SCALE
#define RESHARD_AT_SCALE 0
#endif
std::vector<std::string> ScenarioNames(bool at_scale) {
  std::vector<std::string> out;
  for (const std::string& name : BuiltinScenarioNames())
    if ((BuiltinScenario(name).cluster.Gpus() > kQuickGpus) == at_scale) out.push_back(name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, BuiltinScenarios, ::testing::ValuesIn(ScenarioNames(RESHARD_AT_SCALE)),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace reshard
