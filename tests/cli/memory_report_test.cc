// Memory as every verb reports it: `inspect` exits 3 when the destination
// weights cannot fit whatever the plan; a plan whose predicted peak is above
// what a GPU may use (capacity less the reserve) is reported as such and
// exits 3, a baseline's included; peaks are printed against that usable memory.
#include <fstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace memory_report_test {

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

// The peak is reported with its parts, and the parts add up to it:
// llama3-8b TP2 -> TP1 x 2 on 2x H200 with the optimizer offloaded during the refit.
TEST(MemoryReport, PeakPartsSumToThePeak) {
  const auto r = Reshard({"simulate", "llama3-8b-tp2-to-tp1x2-offload", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["peak_parts"].size(), j["peak_bytes"].size());
  for (size_t g = 0; g < j["peak_bytes"].size(); ++g) {
    int64_t sum = 0;
    for (const auto& [k, v] : j["peak_parts"][g].items()) sum += v.get<int64_t>();
    EXPECT_EQ(sum, j["peak_bytes"][g].get<int64_t>()) << g;
    // tp2 halves 8.03 B parameters (bf16: ~7.48 GiB each); dp1: Adam's 12 bytes x 4.0 B parameters.
    EXPECT_EQ(j["peak_parts"][g]["optimizer_bytes"].get<int64_t>(),
              j["peak_parts"][g]["source_weights_bytes"].get<int64_t>() / 2 * 12);
    EXPECT_EQ(j["peak_parts"][g]["kv_cache_bytes"].get<int64_t>(), int64_t{10} << 30);
  }
  EXPECT_EQ(j["usable_bytes"].get<int64_t>(), j["capacity_bytes"].get<int64_t>() - (int64_t{1} << 30));
  const auto h = Reshard({"simulate", "llama3-8b-tp2-to-tp1x2-offload"});
  EXPECT_THAT(h.out, HasSubstr("peak of GPU 0 by part"));
  EXPECT_THAT(h.out, HasSubstr("+ reserve                1.00 GiB  never planned into"));
  EXPECT_THAT(h.out, HasSubstr("(local = refit bytes whose source and destination share a GPU"));
  EXPECT_THAT(h.out, HasSubstr("15.0 GiB local + 13.0 GiB into/out of staging"));
}

// memory.optimizer.on_host: true: the optimizer state is on no GPU, so the
// plan neither holds nor offloads it.
TEST(MemoryReport, OptimizerOnHostIsNeitherHeldNorOffloaded) {
  const std::string path = ::testing::TempDir() + "/on_host.yaml";
  {
    std::ofstream f(path);
    f << "name: on-host\nmodel: llama3-8b\ncluster: h200-x2\nsource: {tp: 2}\ndestination: {tp: 1, dp: 2}\n"
         "memory: {optimizer: {on_host: true}, kv_cache_gib: 10, reserve_gib: 1}\n";
  }
  const auto r = Reshard({"plan", path, "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["offload_fraction"].get<double>(), 0);
  EXPECT_EQ(j["bytes_moved"]["pcie"].get<int64_t>(), 0);
  for (const auto& p : j["peak_parts"]) EXPECT_EQ(p["optimizer_bytes"].get<int64_t>(), 0);
}

// The host backend holds every plan buffer in this machine's memory: it
// checks that before allocating and refuses with both numbers (exit 3; with
// --json, as JSON).
// RESHARD_HOST_MEMORY_BYTES stands in for /proc/meminfo's MemAvailable.
TEST(MemoryReport, HostBackendRefusesAPlanLargerThanHostMemory) {
  const auto r = ::reshard::testing::RunBinary(
      "/usr/bin/env", {"RESHARD_HOST_MEMORY_BYTES=1000000", RESHARD_BINARY, "run", "tiny-llama-tp2-to-tp1x2",
                       "--backend", "host"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_THAT(r.err, HasSubstr("infeasible: the host backend would hold up to"));
  EXPECT_THAT(r.err, HasSubstr("but only 976.6 KiB is available (RESHARD_HOST_MEMORY_BYTES)"));
  const auto v = ::reshard::testing::RunBinary(
      "/usr/bin/env", {"RESHARD_HOST_MEMORY_BYTES=1000000", RESHARD_BINARY, "validate", "tiny-llama-tp2-to-tp1x2",
                       "--backend", "host"});
  EXPECT_EQ(v.code, 3) << v.err;
  // With --json, the refusal as JSON (docs/json.md) on stdout, and still exit 3.
  const auto j = ::reshard::testing::RunBinary(
      "/usr/bin/env", {"RESHARD_HOST_MEMORY_BYTES=1000000", RESHARD_BINARY, "run", "tiny-llama-tp2-to-tp1x2",
                       "--backend", "host", "--json"});
  ASSERT_EQ(j.code, 3) << j.err;
  const nlohmann::json out = nlohmann::json::parse(j.out);
  EXPECT_FALSE(out["fits"].get<bool>());
  EXPECT_EQ(out["host_memory"]["available_bytes"].get<int64_t>(), 1000000);
  EXPECT_EQ(out["missing_bytes"].get<int64_t>(), out["host_memory"]["needed_bytes"].get<int64_t>() - 1000000);
  EXPECT_THAT(out["message"].get<std::string>(), HasSubstr("976.6 KiB is available"));
  EXPECT_EQ(Reshard({"run", "tiny-llama-tp2-to-tp1x2", "--backend", "host"}).code, 0);  // fits this machine
}

}  // namespace memory_report_test
