// The baselines' optimizer-offload choice (model/offload.h), read from scenarios.
#include "model/offload.h"

#include <gtest/gtest.h>

#include <string>

#include "model/scenario.h"

namespace reshard {
namespace {

OptimizerConfig Read(const std::string& offload) {
  const Scenario s = ParseScenario(
      "name: t\nmodel: tiny-llama\ndtype: bf16\ncluster: h200-x2\nsource: {tp: 2}\ndestination: {tp: 1, dp: 2}\n"
      "memory: {optimizer: {bytes_per_param: 12, offload: " +
          offload + "}}\n",
      "<test>");
  return s.memory.optimizer;
}

TEST(BaselineOffloadFractions, FollowTheScenario) {
  EXPECT_EQ(BaselineOffloadFractions(Read("none")), std::vector<double>{0});
  EXPECT_EQ(BaselineOffloadFractions(Read("all")), std::vector<double>{1});
  EXPECT_EQ(BaselineOffloadFractions(Read("0.25")), std::vector<double>{0.25});
}

// NeMo-RL's switch is all or nothing: auto tries none first, then all.
TEST(BaselineOffloadFractions, AutoTriesNoneThenAll) {
  EXPECT_EQ(BaselineOffloadFractions(Read("auto")), (std::vector<double>{0, 1}));
}

TEST(BaselineOffloadFractions, AForcedFractionWinsAndIsClamped) {
  EXPECT_EQ(BaselineOffloadFractions(Read("auto"), 0.5), std::vector<double>{0.5});
  EXPECT_EQ(BaselineOffloadFractions(Read("none"), 2.0), std::vector<double>{1});
  EXPECT_EQ(BaselineOffloadFractions(Read("all"), -1.0), std::vector<double>{0});
}

}  // namespace
}  // namespace reshard
