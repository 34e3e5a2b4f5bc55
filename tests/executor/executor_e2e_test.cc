// End to end on the host backend: scenarios of the tiny presets planned by
// the planner and run by the executor, every destination element verified.
// The executor never links the planner; this test links both.
#include <gtest/gtest.h>

#include "model/scenario.h"
#include "planner/planner.h"
#include "tests/executor/e2e_cases.h"

namespace reshard {
namespace {

using testing::E2eCase;

class EndToEnd : public ::testing::TestWithParam<E2eCase> {};

TEST_P(EndToEnd, PlannedRunVerifiesEveryElement) {
  const Scenario s = ParseScenario(testing::WithSegmentBytes(GetParam()), "<e2e>");
  PlannerOptions po;
  po.simulate = false;  // the prediction is not under test here
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
}

// Two segments per GPU and direction in each round (more staging slots,
// packs a round ahead): still every element verified.
TEST_P(EndToEnd, TwoSegmentsPerRoundVerifyEveryElement) {
  const Scenario s = ParseScenario(testing::WithSegmentBytes(GetParam()), "<e2e>");
  PlannerOptions po;
  po.simulate = false;
  po.per_round = 2;
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(r.stats.per_round, 2);
  testing::ExpectHostRunVerifies(r.plan, GetParam().name);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, EndToEnd, ::testing::ValuesIn(testing::kE2eCases), testing::E2eCaseName);

}  // namespace
}  // namespace reshard
