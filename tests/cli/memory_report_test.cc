// Memory as every verb reports it: `inspect` exits 3 when the destination
// weights cannot fit whatever the plan; a plan whose predicted peak is above
// what a GPU may use (capacity less the reserve) is reported as such and
// exits 3, a baseline's included; peaks are printed against that usable memory.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

namespace {

using ::testing::HasSubstr;

const std::string kTooBig = std::string(RESHARD_TEST_DATA_DIR) + "/scenarios/refit-does-not-fit.yaml";

::reshard::testing::RunResult Reshard(const std::vector<std::string>& args) {
  return ::reshard::testing::RunBinary(RESHARD_BINARY, args);
}

TEST(MemoryReport, InspectExits3WhenDestinationWeightsCannotFit) {
  const auto r = Reshard({"inspect", kTooBig});
  EXPECT_EQ(r.code, 3);
  // 8.03 B parameters x 2 bytes = 14.96 GiB (printed 15.0 GiB) received by every GPU, on top of
  // its TP8 shard and the CUDA context.
  EXPECT_THAT(r.out, HasSubstr("fits: no (GPU 0 needs at least"));
  EXPECT_THAT(r.err, HasSubstr("destination weights 15.0 GiB"));
  EXPECT_THAT(r.err, HasSubstr("missing whatever the plan"));
  const auto j = Reshard({"inspect", kTooBig, "--json"});
  EXPECT_EQ(j.code, 3);
  const nlohmann::json out = nlohmann::json::parse(j.out);
  EXPECT_EQ(out["fits"], false);
  EXPECT_GT(out["missing_bytes"].get<int64_t>(), 0);
}

TEST(MemoryReport, PeakAboveUsableMemoryExits3BaselineIncluded) {
  // reshard's planner finds no plan, and says at once why (no candidate is planned).
  const auto p = Reshard({"plan", kTooBig});
  EXPECT_EQ(p.code, 3);
  EXPECT_THAT(p.err, HasSubstr("GPU 0 needs at least"));
  EXPECT_THAT(p.err, HasSubstr("missing whatever the plan"));
  const auto r = Reshard({"plan", kTooBig, "--baseline", "megatron", "--no-simulate"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("it may use (capacity 16.0 GiB less reserve 1.00 GiB): this plan would run out"));
  EXPECT_THAT(r.out, HasSubstr("ABOVE USABLE MEMORY"));
  const auto s = Reshard({"simulate", kTooBig, "--baseline", "megatron", "--json"});
  EXPECT_EQ(s.code, 3) << s.err;
  EXPECT_THAT(s.err, HasSubstr("infeasible: GPU"));
  EXPECT_FALSE(nlohmann::json::parse(s.out)["peak_bytes"].empty());  // the prediction is still written
}

TEST(MemoryReport, PeaksAreShownAgainstCapacityLessReserve) {
  const auto r = Reshard({"plan", "llama3-8b-tp2-to-tp1x2"});
  ASSERT_EQ(r.code, 0) << r.err;
  // h200-x2: 139.8 GiB per GPU, reserve_gib 1.
  EXPECT_THAT(r.out, HasSubstr("of 138.8 GiB usable (capacity 139.8 GiB less reserve 1.00 GiB)"));
}

}  // namespace
