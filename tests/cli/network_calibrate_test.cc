// `reshard calibrate --network` where it must refuse (exit 2, nothing
// written: no launcher, one rank, no --rendezvous, every rank on one host),
// with fake launcher environments and two processes on this host; and
// `inspect`'s network term: an estimate until a profile with a measured
// network_calibration is applied, then measured, naming the hosts and ranks.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/common/run_binary.h"

// Named, not anonymous: the test programs compile in unity batches.
namespace network_calibrate_test {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;
using nlohmann::json;
using Result = ::reshard::testing::RunResult;

const std::string kScenarios = RESHARD_SOURCE_DIR "/scenarios";

// `reshard ARGS` with the launcher variables `vars` ("NAME=value") and no others.
Result ReshardUnder(const std::vector<std::string>& vars, const std::vector<std::string>& args) {
  std::vector<std::string> all = {"-u", "OMPI_COMM_WORLD_RANK", "-u", "OMPI_COMM_WORLD_SIZE", "-u", "PMI_RANK", "-u",
                                  "PMI_SIZE", "-u", "PMIX_RANK", "-u", "SLURM_PROCID"};
  all.insert(all.end(), vars.begin(), vars.end());
  all.push_back(RESHARD_BINARY);
  all.insert(all.end(), args.begin(), args.end());
  return ::reshard::testing::RunBinary("/usr/bin/env", all);
}

class NetworkCalibrate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("reshard_netcal_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  void ExpectRefused(const Result& r, const std::string& message) const {
    EXPECT_EQ(r.code, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr(message));
    EXPECT_FALSE(fs::exists(Path("net.json")));
  }
  fs::path dir_;
};

TEST_F(NetworkCalibrate, RefusedWithoutALauncher) {
  ExpectRefused(ReshardUnder({}, {"calibrate", "--network", "--rendezvous", Path("rdv"), "-o", Path("net.json")}),
                "--network: not started by a launcher (no OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID)");
}

TEST_F(NetworkCalibrate, RefusedWithOneRank) {
  ExpectRefused(ReshardUnder({"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=1"},
                             {"calibrate", "--network", "--rendezvous", Path("rdv"), "-o", Path("net.json")}),
                "--network: Open MPI started one rank: the network is measured between two ranks on different nodes");
}

TEST_F(NetworkCalibrate, RefusedWithoutARendezvousDirectory) {
  ExpectRefused(ReshardUnder({"SLURM_PROCID=0", "SLURM_NTASKS=2"}, {"calibrate", "--network", "-o", Path("net.json")}),
                "--rendezvous: --network needs --rendezvous DIR");
}

TEST_F(NetworkCalibrate, RefusedWithMalformedLauncherVariables) {
  ExpectRefused(ReshardUnder({"PMI_RANK=one", "PMI_SIZE=2"},
                             {"calibrate", "--network", "--rendezvous", Path("rdv"), "-o", Path("net.json")}),
                "<environment>: PMI_RANK: expected a whole number, got 'one'");
}

TEST_F(NetworkCalibrate, RefusedWithRefit) {
  ExpectRefused(ReshardUnder({}, {"calibrate", "--network", "--refit", Path("old.json"), "-o", Path("net.json")}),
                "--network: measures; --refit fits kept measurements again");
}

TEST_F(NetworkCalibrate, TwoRanksOnThisHostAreRefusedBeforeAnyGpu) {
  // Two processes as one Open MPI job of two ranks on this host: both meet
  // in the rendezvous directory, see one host and exit 2 (with or without
  // CUDA and NCCL in this build: the check comes first).
  auto rank = [&](int r) {
    return ReshardUnder({"OMPI_COMM_WORLD_RANK=" + std::to_string(r), "OMPI_COMM_WORLD_SIZE=2",
                         "OMPI_COMM_WORLD_LOCAL_RANK=" + std::to_string(r), "OMPI_MCA_ess_base_jobid=test-job"},
                        {"calibrate", "--network", "--rendezvous", Path("rdv"), "--rendezvous-timeout", "60", "-o",
                         Path("net.json")});
  };
  auto r1 = std::async(std::launch::async, rank, 1);
  const Result r0 = rank(0);
  const Result other = r1.get();
  for (const Result& r : {r0, other}) ExpectRefused(r, "--network: all 2 ranks run on host ");
  EXPECT_THAT(r0.err, HasSubstr("Nothing was measured"));
}

TEST_F(NetworkCalibrate, MergePutsARefitOverAnExistingProfile) {
  // Base: a network measured elsewhere (its record) and host costs; the
  // refit of tests/data/calib/refit-small.json (NVLink, device copy, PCIe)
  // goes over it: both kept, the base's name, both sources.
  const json base = {
      {"name", "cluster"},
      {"source", "network run"},
      {"links", {{"network", {{"latency_ns", 18'000}, {"bytes_per_s", 4.7e10}, {"op_gap_ns", 2500}}}}},
      {"host", {{"nccl_op_ns", 150}}},
      {"network_calibration", {{"measured", true}, {"source", "x"}, {"hosts", {"a", "b"}}, {"ranks", {0, 8}}}},
      {"measurements", {{"series", json::array()}}}};
  std::ofstream(Path("base.json")) << base.dump();
  const Result r = ::reshard::testing::RunBinary(
      RESHARD_BINARY, {"calibrate", "--refit", RESHARD_TEST_DATA_DIR "/calib/refit-small.json", "--merge",
                       Path("base.json"), "-o", Path("merged.json"), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  json m;
  std::ifstream(Path("merged.json")) >> m;
  EXPECT_EQ(m["name"], "cluster");
  EXPECT_THAT(m["source"].get<std::string>(), StartsWith("network run; "));
  EXPECT_EQ(m["links"]["network"], base["links"]["network"]);
  for (const char* link : {"nvlink", "device_copy", "pcie"}) EXPECT_TRUE(m["links"].contains(link)) << link;
  EXPECT_EQ(m["host"], base["host"]);
  EXPECT_EQ(m["network_calibration"], base["network_calibration"]);
  EXPECT_EQ(m["measurements"]["series"].size(), 3u);
  // The merged profile is one a scenario reads, network still measured.
  const json term = [&] {
    const Result i = ::reshard::testing::RunBinary(
        RESHARD_BINARY, {"inspect", RESHARD_SOURCE_DIR "/scenarios/qwen3-30b-a3b-ep8pp2-to-tp8dp2.yaml", "--calibration",
                         Path("merged.json"), "--json"});
    EXPECT_EQ(i.code, 0) << i.err;
    return json::parse(i.out)["cost_terms"][0];
  }();
  EXPECT_EQ(term["measured"], true);
  // A base that is no profile is refused before anything is fitted.
  std::ofstream(Path("bad.json")) << "[1, 2]";
  const Result bad = ::reshard::testing::RunBinary(
      RESHARD_BINARY, {"calibrate", "--refit", RESHARD_TEST_DATA_DIR "/calib/refit-small.json", "--merge",
                       Path("bad.json"), "-o", Path("out.json")});
  EXPECT_EQ(bad.code, 2);
  EXPECT_THAT(bad.err, HasSubstr("bad.json: expected a calibration profile (a JSON object) to merge into"));
  EXPECT_FALSE(fs::exists(Path("out.json")));
}

// A 4-node DGX H100 scenario: the network is used.
const std::string kFourNodes = kScenarios + "/qwen3-30b-a3b-ep8pp2-to-tp8dp2.yaml";

json NetworkTerm(const Result& r) {
  EXPECT_EQ(r.code, 0) << r.err;
  const json j = json::parse(r.out);
  for (const json& t : j["cost_terms"])
    if (t["term"] == "network per-op") return t;
  ADD_FAILURE() << "no network per-op term";
  return json();
}

TEST_F(NetworkCalibrate, InspectMarksTheNetworkEstimatedUntilMeasured) {
  const json estimate = NetworkTerm(::reshard::testing::RunBinary(RESHARD_BINARY, {"inspect", kFourNodes, "--json"}));
  EXPECT_EQ(estimate["measured"], false);
  EXPECT_THAT(estimate["source"].get<std::string>(), StartsWith("estimate from published sources"));
  EXPECT_THAT(estimate["value"].get<std::string>(), HasSubstr("3.0 us between posts per NIC"));

  // A profile as `calibrate --network` writes it (its fields; no measurements).
  const json profile = {
      {"name", "network a <-> b"},
      {"links",
       {{"network",
         {{"latency_ns", 18'000},
          {"bytes_per_s", 4.7e10},
          {"efficiency", {{{"bytes", 65536}, {"fraction", 0.1}}, {{"bytes", 67108864}, {"fraction", 1.0}}}},
          {"op_gap_ns", 2500}}}}},
      {"network_calibration",
       {{"measured", true}, {"source", "reshard calibrate --network (hand-written)"}, {"hosts", {"a", "b"}}, {"ranks", {0, 8}}}}};
  std::ofstream(Path("net-profile.json")) << profile.dump();
  const json measured = NetworkTerm(::reshard::testing::RunBinary(
      RESHARD_BINARY, {"inspect", kFourNodes, "--calibration", Path("net-profile.json"), "--json"}));
  EXPECT_EQ(measured["measured"], true);
  EXPECT_THAT(measured["source"].get<std::string>(),
              StartsWith("measured by `reshard calibrate --network`: " + Path("net-profile.json") +
                         ": reshard calibrate --network (hand-written) (ranks 0, 8 on hosts a, b)"));
  EXPECT_THAT(measured["value"].get<std::string>(), HasSubstr("18.0 us per op, 2.5 us between posts per NIC, size curve of 2 points"));

  // The same numbers without the record: still an estimate, saying why.
  json bare = profile;
  bare.erase("network_calibration");
  std::ofstream(Path("bare.json")) << bare.dump();
  const json bare_term = NetworkTerm(::reshard::testing::RunBinary(
      RESHARD_BINARY, {"inspect", kFourNodes, "--calibration", Path("bare.json"), "--json"}));
  EXPECT_EQ(bare_term["measured"], false);
  EXPECT_THAT(bare_term["source"].get<std::string>(), HasSubstr("links.network given without a network_calibration record"));

  // The human table says the same.
  const Result human = ::reshard::testing::RunBinary(
      RESHARD_BINARY, {"inspect", kFourNodes, "--calibration", Path("net-profile.json")});
  EXPECT_THAT(human.out, HasSubstr("[measured by `reshard calibrate --network`: "));
}

}  // namespace network_calibrate_test
