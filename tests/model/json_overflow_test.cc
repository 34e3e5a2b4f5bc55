// Regression tests for fuzzer findings (docs/fuzzing.md): a JSON number too large
// for a double (nlohmann's out_of_range.406, not a parse_error) must be an
// InputError naming the file, not an escaped json exception.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "model/cluster.h"
#include "model/error.h"
#include "model/model.h"
#include "model/scenario.h"

namespace reshard {
namespace {

TEST(JsonNumberOverflow, HfConfigIsInputError) {
  const std::string text = R"({"model_type": "llama", "hidden_size": 1e999})";
  try {
    ParseHfConfig(text, "fuzz/config.json");
    FAIL() << "accepted a number that overflows double";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "fuzz/config.json");
    EXPECT_NE(e.problem().find("number overflow"), std::string::npos) << e.what();
  }
}

TEST(JsonNumberOverflow, JsonScenarioIsInputError) {
  const std::string text = R"({"name": "x", "plan": {"segment_bytes": 3.5e1141}})";
  try {
    ParseScenario(text, "fuzz/scenario.json");
    FAIL() << "accepted a number that overflows double";
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "fuzz/scenario.json");
    EXPECT_NE(e.problem().find("number overflow"), std::string::npos) << e.what();
  }
}

TEST(JsonNumberOverflow, CalibrationProfileIsInputError) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("reshard_overflow_profile_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + ".json")).string();
  {
    std::ofstream out(path);
    out << R"({"links": {"nvlink": {"bytes_per_s": 1e999}}})";
  }
  Cluster c;
  try {
    ApplyProfileFile(c, path);
    std::remove(path.c_str());
    FAIL() << "accepted a number that overflows double";
  } catch (const InputError& e) {
    std::remove(path.c_str());
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(e.problem().find("number overflow"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace reshard
