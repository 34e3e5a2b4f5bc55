// Shared by the host-backend end-to-end tests (reshard's planner and the
// Megatron-style baseline): the tiny-preset scenarios they both run, and the
// checks a run must pass — every destination element verified, one timing per
// op, and the executor's bytes by link class equal to the plan's summary.
#pragma once

#include <cctype>
#include <string>

#include <gtest/gtest.h>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "plan/plan.h"

namespace reshard::testing {

struct E2eCase {
  const char* name;
  const char* yaml;           // the scenario without its `plan:` section
  const char* segment_bytes;  // small, so reshard's plans have several rounds, staging and groups
};

inline const E2eCase kE2eCases[] = {
    {"tiny-llama colocated tp2 -> tp1x2", R"(
name: e2e-llama
model: tiny-llama
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
)", "256KiB"},
    {"tiny-llama disaggregated 0 -> 1", R"(
name: e2e-llama-disagg
model: tiny-llama
cluster: h200-x2
source: {tp: 1, gpus: "0"}
destination: {tp: 1, gpus: "1"}
)", "512KiB"},
    {"tiny-qwen2 (tied, biases) optimizer offloaded", R"(
name: e2e-qwen2-offload
model: tiny-qwen2
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
memory: {optimizer: {bytes_per_param: 12, offload: all}}
)", "256KiB"},
    {"tiny-moe ep2 -> tp2", R"(
name: e2e-moe
model: tiny-moe
cluster: h200-x2
source: {tp: 1, ep: 2, dp: 2, gpus: all}
destination: {tp: 2, gpus: all}
)", "256KiB"},
    {"tiny-mla tp2 -> tp1x2", R"(
name: e2e-mla
model: tiny-mla
cluster: h200-x2
source: {tp: 2, gpus: all}
destination: {tp: 1, dp: 2, gpus: all}
)", "256KiB"},
    {"tiny-llama on 8 GPUs: tp2 pp2 dp2 -> tp2 dp4", R"(
name: e2e-llama-8
model: tiny-llama
cluster: dgx-h200
source: {tp: 2, pp: 2, dp: 2, gpus: all}
destination: {tp: 2, dp: 4, gpus: all}
)", "128KiB"},
};

// The case's scenario with its segment size.
inline std::string WithSegmentBytes(const E2eCase& c) {
  return std::string(c.yaml) + "plan: {segment_bytes: " + c.segment_bytes + "}\n";
}

// GoogleTest parameter names: the case name with every non-alphanumeric as '_'.
inline std::string E2eCaseName(const ::testing::TestParamInfo<E2eCase>& info) {
  std::string n = info.param.name;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// Runs `plan` on the host backend and checks every destination element, the
// per-op timings and the bytes moved against the plan's summary.
inline void ExpectHostRunVerifies(const Plan& plan, const std::string& label) {
  auto backend = MakeHostBackend();
  const Measurement m = Execute(plan, *backend);
  EXPECT_TRUE(m.verified) << label << "\n" << FormatMeasurement(m, plan);
  int64_t want = 0;
  for (const ContentPiece& c : plan.destinations) want += Volume(c.box);
  EXPECT_GT(want, 0);
  EXPECT_EQ(m.checked_elements, want);
  EXPECT_EQ(m.op_times.size(), plan.ops.size());
  // The executor counts moved bytes as the planner's summary does.
  EXPECT_EQ(m.bytes_moved, plan.summary.bytes_moved);
}

}  // namespace reshard::testing
