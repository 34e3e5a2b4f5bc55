// Size flags: a bare K/M/G ("64M") is refused with both spellings it could
// mean; --segment-bytes with a plan.json is refused (its segments are cut).
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace size_flag_test {

using ::testing::HasSubstr;

::reshard::testing::RunResult Reshard(const std::vector<std::string>& args) {
  return ::reshard::testing::RunBinary(RESHARD_BINARY, args);
}

TEST(SizeFlag, BareLetterIsAmbiguous) {
  auto r = Reshard({"plan", "tiny-llama-tp2-to-tp1x2", "--segment-bytes", "64M"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("'64M' is ambiguous: write 64MiB (powers of 1024) or 64MB (powers of 1000)"));
  r = Reshard({"sweep", "tiny-llama-tp2-to-tp1x2", "--segment-bytes", "4MiB,1g"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("write 1GiB"));
  r = Reshard({"plan", "tiny-llama-tp2-to-tp1x2", "--segment-bytes", "4MiB", "--no-simulate"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("of at most 4.00 MiB"));
}

TEST(SizeFlag, SegmentBytesWithAPlanFileIsRefused) {
  const std::string plan = ::testing::TempDir() + "size_flag_plan.json";
  ASSERT_EQ(Reshard({"plan", "tiny-llama-tp2-to-tp1x2", "-o", plan, "--no-simulate"}).code, 0);
  const auto r = Reshard({"simulate", plan, "--segment-bytes", "4MiB"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("--segment-bytes: applies to a scenario"));
}

}  // namespace size_flag_test
