// End to end on the host backend: scenarios of the tiny presets planned by
// the planner and run by the executor, every destination element verified.
// The executor never links the planner; this test links both.
#include <cctype>
#include <string>

#include <gtest/gtest.h>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "model/scenario.h"
#include "planner/planner.h"

namespace reshard {
namespace {

struct Case {
  const char* name;
  const char* yaml;
};

// Small segments so every plan has several rounds, staging and groups.
const Case kCases[] = {
    {"tiny-llama colocated tp2 -> tp1x2", R"(
name: e2e-llama
model: tiny-llama
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
plan: {segment_bytes: 256KiB}
)"},
    {"tiny-llama disaggregated 0 -> 1", R"(
name: e2e-llama-disagg
model: tiny-llama
cluster: h200-x2
source: {tp: 1, gpus: "0"}
destination: {tp: 1, gpus: "1"}
plan: {segment_bytes: 512KiB}
)"},
    {"tiny-qwen2 (tied, biases) optimizer offloaded", R"(
name: e2e-qwen2-offload
model: tiny-qwen2
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
memory: {optimizer: {bytes_per_param: 12, offload: all}}
plan: {segment_bytes: 256KiB}
)"},
    {"tiny-moe ep2 -> tp2", R"(
name: e2e-moe
model: tiny-moe
cluster: h200-x2
source: {tp: 1, ep: 2, dp: 2, gpus: all}
destination: {tp: 2, gpus: all}
plan: {segment_bytes: 256KiB}
)"},
    {"tiny-mla tp2 -> tp1x2", R"(
name: e2e-mla
model: tiny-mla
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
plan: {segment_bytes: 256KiB}
)"},
    {"tiny-llama on 8 GPUs: tp2 pp2 dp2 -> tp2 dp4", R"(
name: e2e-llama-8
model: tiny-llama
cluster: dgx-h200
source: {tp: 2, pp: 2, dp: 2, gpus: all}
destination: {tp: 2, dp: 4, gpus: all}
plan: {segment_bytes: 128KiB}
)"},
};

class EndToEnd : public ::testing::TestWithParam<Case> {};

TEST_P(EndToEnd, PlannedRunVerifiesEveryElement) {
  const Scenario s = ParseScenario(GetParam().yaml, "<e2e>");
  PlannerOptions po;
  po.simulate = false;  // the prediction is not under test here
  const PlanResult r = MakePlan(s, po);
  ASSERT_TRUE(r.ok()) << r.message;
  auto backend = MakeHostBackend();
  const Measurement m = Execute(r.plan, *backend);
  EXPECT_TRUE(m.verified) << GetParam().name << "\n" << FormatMeasurement(m, r.plan);
  int64_t want = 0;
  for (const ContentPiece& c : r.plan.destinations) want += Volume(c.box);
  EXPECT_GT(want, 0);
  EXPECT_EQ(m.checked_elements, want);
  EXPECT_EQ(m.op_times.size(), r.plan.ops.size());
  // The executor counts moved bytes as the planner's summary does.
  EXPECT_EQ(m.bytes_moved, r.plan.summary.bytes_moved);
}

INSTANTIATE_TEST_SUITE_P(TinyPresets, EndToEnd, ::testing::ValuesIn(kCases), [](const auto& test) {
  std::string n = test.param.name;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

}  // namespace
}  // namespace reshard
