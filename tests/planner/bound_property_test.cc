// The routing-independent lower bound (sim/topology_bound.h) against real
// plans: on every built-in scenario, neither reshard's plan nor the
// Megatron-style plan is predicted faster than it, and each plan's own routing
// bound is at least it (a plan's routing is one of those the bound ranges over).
#include <cctype>
#include <string>

#include <gtest/gtest.h>

#include "model/error.h"
#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/baseline_plan.h"
#include "planner/planner.h"
#include "sim/simulator.h"

namespace reshard {
namespace {

void Check(const std::string& what, const PlanResult& r) {
  if (!r.ok()) return;  // no plan: nothing to compare (a scenario short of memory)
  const PlanSummary& s = r.plan.summary;
  EXPECT_GT(s.lower_bound_s, 0) << what;
  EXPECT_GE(s.routing_bound_s, s.lower_bound_s * (1 - 1e-9)) << what;
  EXPECT_GE(s.predicted_time_s, s.lower_bound_s * (1 - 1e-9)) << what;
  const Prediction pr = Simulate(r.plan, SimOptions{nullptr, false});
  EXPECT_DOUBLE_EQ(pr.lower_bound_s, s.lower_bound_s) << what;
  EXPECT_DOUBLE_EQ(pr.routing_bound_s, s.routing_bound_s) << what;
  EXPECT_GE(pr.time_s, pr.lower_bound_s * (1 - 1e-9)) << what;
}

class BuiltinScenarios : public ::testing::TestWithParam<std::string> {};

TEST_P(BuiltinScenarios, NoPlanBeatsTheBoundAndRoutingBoundsAreAboveIt) {
  Scenario s = BuiltinScenario(GetParam());
  s.destination_dtype = s.dtype;  // the planners move weights as they are (kimi-k2's vLLM side is fp8)
  try {
    Check(GetParam() + " reshard", MakePlan(s));
    Check(GetParam() + " megatron", MakeMegatronPlan(s));
  } catch (const InputError& e) {
    GTEST_SKIP() << e.what();  // a scenario the planners refuse (e.g. a dtype conversion)
  }
}

INSTANTIATE_TEST_SUITE_P(All, BuiltinScenarios, ::testing::ValuesIn(BuiltinScenarioNames()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace reshard
