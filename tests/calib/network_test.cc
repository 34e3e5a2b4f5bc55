// Tests of `calibrate --network`'s parts that need no GPU: the launcher
// environment (calib/launcher.h), the file rendezvous with threads as ranks
// (stale files of an earlier run, a missing rank), the per-op fit on
// synthetic samples (calib/network.h), the profile JSON round trip and
// --merge (calib/profile.h), and the cluster's network_measured mark
// (model/cluster.h ApplyProfileJson) that `inspect` shows.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "calib/fit.h"
#include "calib/launcher.h"
#include "calib/network.h"
#include "calib/profile.h"
#include "model/cluster.h"
#include "model/error.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace network_test {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;

EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

std::string ErrorOf(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(LauncherEnv, NoneFound) {
  const LauncherEnv e = ReadLauncherEnv(Env({{"HOME", "/root"}}));
  EXPECT_FALSE(e.Found());
  EXPECT_EQ(e.launcher, "");
}

TEST(LauncherEnv, OpenMpi) {
  const LauncherEnv e = ReadLauncherEnv(Env({{"OMPI_COMM_WORLD_RANK", "5"},
                                             {"OMPI_COMM_WORLD_SIZE", "16"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "5"},
                                             {"OMPI_COMM_WORLD_LOCAL_SIZE", "8"},
                                             {"PMIX_NAMESPACE", "prterun-node1-1234@1"},
                                             // Slurm's are there too under salloc: Open MPI's win.
                                             {"SLURM_PROCID", "0"},
                                             {"SLURM_NTASKS", "1"}}));
  EXPECT_EQ(e.launcher, "Open MPI");
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.size, 16);
  EXPECT_EQ(e.local_rank, 5);
  EXPECT_EQ(e.local_size, 8);
  EXPECT_EQ(e.job, "prterun-node1-1234@1");
}

TEST(LauncherEnv, MpichHydra) {
  const LauncherEnv e = ReadLauncherEnv(
      Env({{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}}));
  EXPECT_EQ(e.launcher, "MPICH / Hydra (PMI)");
  EXPECT_EQ(e.rank, 3);
  EXPECT_EQ(e.size, 4);
  EXPECT_EQ(e.local_rank, 1);
  EXPECT_EQ(e.local_size, 2);
  EXPECT_EQ(e.job, "");
}

TEST(LauncherEnv, PmixWithoutLocalRank) {
  const LauncherEnv e = ReadLauncherEnv(Env({{"PMIX_RANK", "1"}, {"PMIX_SIZE", "2"}, {"PMIX_NAMESPACE", "ns"}}));
  EXPECT_EQ(e.launcher, "PMIx");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.local_rank, -1);  // derived from the hosts later
  EXPECT_EQ(e.job, "ns");
}

TEST(LauncherEnv, SlurmStepTasksBeforeJobTasks) {
  // Inside an allocation of 16 tasks, `srun -n 2` sets SLURM_STEP_NUM_TASKS=2.
  const LauncherEnv e = ReadLauncherEnv(Env({{"SLURM_PROCID", "1"},
                                             {"SLURM_NTASKS", "16"},
                                             {"SLURM_STEP_NUM_TASKS", "2"},
                                             {"SLURM_LOCALID", "0"},
                                             {"SLURM_JOB_ID", "4242"},
                                             {"SLURM_STEP_ID", "3"}}));
  EXPECT_EQ(e.launcher, "Slurm srun");
  EXPECT_EQ(e.rank, 1);
  EXPECT_EQ(e.size, 2);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.job, "4242.3");
  EXPECT_EQ(ReadLauncherEnv(Env({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}})).size, 4);
}

TEST(LauncherEnv, MalformedVariablesNameTheVariable) {
  EXPECT_NE(ErrorOf([] { ReadLauncherEnv(Env({{"OMPI_COMM_WORLD_RANK", "x"}, {"OMPI_COMM_WORLD_SIZE", "2"}})); })
                .find("OMPI_COMM_WORLD_RANK: expected a whole number, got 'x'"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { ReadLauncherEnv(Env({{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "2"}})); })
                .find("rank 2 is outside [0, 2)"),
            std::string::npos);
  EXPECT_NE(ErrorOf([] { ReadLauncherEnv(Env({{"PMI_RANK", "0"}})); }).find("PMI_SIZE"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ReadLauncherEnv(Env({{"PMI_RANK", "-1"}, {"PMI_SIZE", "2"}})); }).find("PMI_RANK"),
            std::string::npos);
}

TEST(LauncherEnv, LocalRanksFromHostsInRankOrder) {
  EXPECT_EQ(LocalRanksFromHosts({"a", "b", "a", "a", "b"}), (std::vector<int32_t>{0, 0, 1, 2, 1}));
}

// A rendezvous directory of its own per test, removed afterwards.
class RendezvousDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("reshard_rendezvous_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  RendezvousOptions Options(int32_t rank, int32_t size) const {
    RendezvousOptions o;
    o.dir = dir_.string();
    o.rank = rank;
    o.size = size;
    o.job = "job7";
    o.timeout_s = 20;
    o.poll_ms = 2;
    return o;
  }
  // Every rank on a thread of its own; rank r's payload is {"r": r}.
  std::vector<RendezvousResult> RunAll(int32_t size, const std::function<void(int32_t)>& before = {}) {
    std::vector<RendezvousResult> out(size);
    std::vector<std::string> errors(size);
    std::vector<std::thread> threads;
    // Rank 0 last: the others start first and wait for its id file.
    for (int32_t r = size - 1; r >= 0; --r) {
      threads.emplace_back([&, r] {
        if (before) before(r);
        try {
          out[r] = Rendezvous(Options(r, size), {{"r", r}}, r == 0 ? "secret-of-rank-0" : "ignored");
        } catch (const std::exception& e) {
          errors[r] = e.what();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int32_t r = 0; r < size; ++r) EXPECT_EQ(errors[r], "") << "rank " << r;
    return out;
  }
  fs::path dir_;
};

TEST_F(RendezvousDir, EveryRankGetsEveryPayloadAndRankZerosSecret) {
  const std::vector<RendezvousResult> res = RunAll(5);
  for (int32_t r = 0; r < 5; ++r) {
    EXPECT_EQ(res[r].secret, "secret-of-rank-0");
    EXPECT_EQ(res[r].nonce, res[0].nonce);
    ASSERT_EQ(res[r].payloads.size(), 5u);
    for (int32_t i = 0; i < 5; ++i) EXPECT_EQ(res[r].payloads[i]["r"], i);
  }
  // Files: id + 5 ranks, all of this run; cleanup (rank 0) removes them.
  EXPECT_TRUE(fs::exists(dir_ / "rendezvous-id.json"));
  EXPECT_TRUE(fs::exists(dir_ / "rendezvous-rank-4.json"));
  RendezvousCleanup(Options(1, 5), res[1]);  // not rank 0: nothing
  EXPECT_TRUE(fs::exists(dir_ / "rendezvous-id.json"));
  RendezvousCleanup(Options(0, 5), res[0]);
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(RendezvousDir, StaleFilesOfAnEarlierRunAreNotJoined) {
  // A crashed earlier run left a complete set: an id of the same job and size
  // written an hour ago, and rank files with its nonce. Ranks 1 and 2 start
  // before rank 0; they must wait for rank 0's fresh id, not take the old one.
  fs::create_directories(dir_);
  const double hour_ago =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() - 3600;
  std::ofstream(dir_ / "rendezvous-id.json")
      << json{{"nonce", "old"}, {"size", 3}, {"job", "job7"}, {"written_unix_s", hour_ago}, {"secret", "stale"}}.dump();
  for (int r = 0; r < 3; ++r)
    std::ofstream(dir_ / ("rendezvous-rank-" + std::to_string(r) + ".json"))
        << json{{"nonce", "old"}, {"rank", r}, {"size", 3}, {"job", "job7"}, {"payload", {{"r", -1}}}}.dump();
  const std::vector<RendezvousResult> res = RunAll(3, [](int32_t r) {
    if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others read first
  });
  for (int32_t r = 0; r < 3; ++r) {
    EXPECT_NE(res[r].nonce, "old");
    EXPECT_EQ(res[r].secret, "secret-of-rank-0");
    for (int32_t i = 0; i < 3; ++i) EXPECT_EQ(res[r].payloads[i]["r"], i);
  }
}

TEST_F(RendezvousDir, AnIdOfAnotherJobIsNotJoined) {
  RendezvousOptions other = Options(0, 2);
  other.job = "another-job";
  other.timeout_s = 0.2;
  // Rank 0 of another job writes its id; rank 1 of job7 must not join it.
  EXPECT_NE(ErrorOf([&] { Rendezvous(other, {{"r", 0}}, "x"); }).find("1 of 2 ranks did not arrive"),
            std::string::npos);
  RendezvousOptions mine = Options(1, 2);
  mine.timeout_s = 0.2;
  EXPECT_NE(ErrorOf([&] { Rendezvous(mine, {{"r", 1}}); }).find("rank 0 wrote no"), std::string::npos);
}

TEST_F(RendezvousDir, TimeoutNamesTheRanksThatDidNotArrive) {
  RendezvousOptions o = Options(0, 4);
  o.timeout_s = 0.2;
  const std::string e = ErrorOf([&] { Rendezvous(o, {{"r", 0}}, "s"); });
  EXPECT_NE(e.find("--rendezvous: rank 0: 3 of 4 ranks did not arrive within 0.2 s (ranks 1, 2, 3)"), std::string::npos)
      << e;
}

TEST_F(RendezvousDir, PlaceRanksRefusesRanksAllOnOneHost) {
  LauncherEnv env0{"Open MPI", 0, 2, 0, 2, "job7"}, env1{"Open MPI", 1, 2, 1, 2, "job7"};
  RendezvousOptions o = Options(0, 2);
  std::string e0, e1;
  std::thread t1([&] { e1 = ErrorOf([&] { PlaceRanks(env1, o, "node-a"); }); });
  e0 = ErrorOf([&] { PlaceRanks(env0, o, "node-a"); });
  t1.join();
  for (const std::string& e : {e0, e1}) EXPECT_NE(e.find("--network: all 2 ranks run on host node-a"), std::string::npos) << e;
}

TEST_F(RendezvousDir, PlaceRanksFindsThePeerOnAnotherHost) {
  // 4 ranks, two per host, the launcher gives no local rank (PMIx): they come
  // from the hosts in rank order. Rank 0's peer: rank 2, the first on node-b.
  const std::vector<std::string> hosts = {"node-a", "node-a", "node-b", "node-b"};
  std::vector<RankPlacement> placed(4);
  std::vector<std::thread> threads;
  for (int32_t r = 0; r < 4; ++r)
    threads.emplace_back([&, r] { placed[r] = PlaceRanks(LauncherEnv{"PMIx", r, 4, -1, 0, "job7"}, Options(r, 4), hosts[r]); });
  for (auto& t : threads) t.join();
  for (const RankPlacement& p : placed) {
    EXPECT_EQ(p.hosts, hosts);
    EXPECT_EQ(p.local_ranks, (std::vector<int32_t>{0, 1, 0, 1}));
    EXPECT_EQ(p.Hosts(), 2);
    EXPECT_EQ(p.PeerOnAnotherHost(), 2);
  }
}

// ---- the per-op fit --------------------------------------------------------

// Groups of k sends of 4 KiB: t(k) = 20 us + 3 us x (k - 1), three samples
// per k, one of them 50 % slow (the median ignores it). The line through
// (k, t) is exact: slope 3000 ns, intercept 17,000 ns. 64 KiB samples (any
// values) are recorded but not fitted.
std::vector<NetworkOpSample> SyntheticOps() {
  std::vector<NetworkOpSample> out;
  for (int32_t k : {1, 2, 4, 8, 16, 32, 64, 128}) {
    const double t = 20e-6 + 3e-6 * (k - 1);
    out.push_back({k, 4 * kKiB, t});
    out.push_back({k, 4 * kKiB, t * 1.5});
    out.push_back({k, 4 * kKiB, t});
    out.push_back({k, 64 * kKiB, 1e-3});
  }
  return out;
}

TEST(NetworkOps, FitsTheGapBetweenOpsAtTheSmallestSize) {
  const NetworkOpFit fit = FitNetworkOps(SyntheticOps());
  EXPECT_EQ(fit.bytes, 4 * kKiB);
  ASSERT_EQ(fit.points.size(), 8u);
  EXPECT_DOUBLE_EQ(fit.points[3].first, 8);
  EXPECT_NEAR(fit.points[3].second, 41'000, 1e-6);  // 20 + 3 x 7 us
  EXPECT_NEAR(fit.line.slope, 3000, 1e-6);
  EXPECT_NEAR(fit.line.intercept, 17'000, 1e-6);
  EXPECT_LT(fit.line.max_abs_relative_error, 1e-9);
  EXPECT_EQ(fit.op_gap_ns, 3000);
}

TEST(NetworkOps, EvenSampleCountsTakeTheMeanOfTheMiddleTwo) {
  // k = 1: 10 and 14 us -> 12; k = 3: 20 and 24 -> 22: slope (22 - 12) / 2 = 5 us.
  const std::vector<NetworkOpSample> s = {{1, 4096, 10e-6}, {1, 4096, 14e-6}, {3, 4096, 20e-6}, {3, 4096, 24e-6}};
  const NetworkOpFit fit = FitNetworkOps(s);
  EXPECT_NEAR(fit.line.slope, 5000, 1e-6);
  EXPECT_EQ(fit.op_gap_ns, 5000);
}

TEST(NetworkOps, ANegativeSlopeIsNoGap) {
  const std::vector<NetworkOpSample> s = {{1, 4096, 20e-6}, {8, 4096, 19e-6}};
  EXPECT_EQ(FitNetworkOps(s).op_gap_ns, 0);
}

TEST(NetworkOps, OneGroupSizeIsRefused) {
  const std::vector<NetworkOpSample> s = {{4, 4096, 20e-6}, {4, 4096, 21e-6}, {1, 65536, 1e-4}};
  EXPECT_NE(ErrorOf([&] { FitNetworkOps(s); }).find("at 4096 bytes only 1 group size(s) were measured"),
            std::string::npos);
  EXPECT_NE(ErrorOf([&] { FitNetworkOps(std::vector<NetworkOpSample>{}); }).find("no per-op samples"), std::string::npos);
}

// ---- the profile: round trip, inspect's mark, merge ------------------------

// What rank 0 of a 2-node run returns: the network sweeps of a link with a
// 20 us floor and 48 GB/s, and the per-op series above.
CalibrationData NetworkData() {
  LinkProfile truth;
  truth.latency_ns = 20'000;
  truth.bytes_per_s = 48e9;
  truth.efficiency = {{64 * kKiB, 0.1}, {kMiB, 0.5}, {64 * kMiB, 1.0}};
  CalibrationData d;
  d.name = "network node-a <-> node-b";
  d.source = "reshard calibrate --network (test)";
  for (auto [mode, from, to] : {std::tuple{"one_way", 0, 8}, {"one_way", 8, 0}, {"both_ways", 0, 8}}) {
    MeasuredSeries s{"network", mode, "ncclSend/ncclRecv", "cuda_events", {from, to}, {}};
    for (int64_t b = 4 * kKiB; b <= 256 * kMiB; b *= 4)
      s.samples.push_back({b, ModelSeconds(truth, b) * (s.BothWays() ? 1.05 : 1.0)});
    d.series.push_back(s);
  }
  d.network.launcher = "Open MPI";
  d.network.source = "reshard calibrate --network (test): rank 0 on node-a <-> rank 8 on node-b";
  for (int32_t r = 0; r < 16; ++r)
    d.network.ranks.push_back({r, r < 8 ? "node-a" : "node-b", r % 8, r % 8, "0000:1B:00.0"});
  d.network.from = 0;
  d.network.to = 8;
  d.network.ops = SyntheticOps();
  return d;
}

json Profile(const CalibrationData& d) { return CalibrationProfileJson(d, FitCalibration(d)); }

TEST(NetworkProfile, WritesTheFitAsMeasuredWithHostsAndRanks) {
  const json p = Profile(NetworkData());
  EXPECT_EQ(p["links"]["network"]["op_gap_ns"], 3000);
  EXPECT_EQ(p["links"]["network"]["latency_ns"], 20'000);
  EXPECT_EQ(p["network_calibration"]["measured"], true);
  EXPECT_EQ(p["network_calibration"]["hosts"], json({"node-a", "node-b"}));
  EXPECT_EQ(p["network_calibration"]["ranks"], json({0, 8}));
  EXPECT_EQ(p["measurements"]["network"]["op_fit"]["op_gap_ns"], 3000);
  EXPECT_EQ(p["measurements"]["network"]["ranks"].size(), 16u);

  // Applied to a 2-node cluster: the network is marked measured, with where.
  Cluster c = ClusterPreset("dgx-h100");
  c.nodes = 2;
  EXPECT_FALSE(c.network_measured);
  ApplyProfileJson(c, p, "net.json");
  EXPECT_TRUE(c.network_measured);
  EXPECT_EQ(c.network.op_gap_ns, 3000);
  EXPECT_NE(c.network_source.find("net.json: reshard calibrate --network (test)"), std::string::npos) << c.network_source;
  EXPECT_NE(c.network_source.find("(ranks 0, 8 on hosts node-a, node-b)"), std::string::npos) << c.network_source;
  // The mark is a label: the fingerprint is the numbers'.
  Cluster same_numbers = c;
  same_numbers.network_measured = false;
  same_numbers.network_source.clear();
  EXPECT_EQ(c.Fingerprint(), same_numbers.Fingerprint());
  // A cluster's JSON (what plans carry) keeps it.
  json cj;
  to_json(cj, c);
  EXPECT_EQ(ClusterFromJson(cj, "plan.json"), c);
}

TEST(NetworkProfile, ANetworkLinkWithoutTheRecordStaysAnEstimate) {
  json p = Profile(NetworkData());
  p.erase("network_calibration");
  Cluster c = ClusterPreset("dgx-h100");
  ApplyProfileJson(c, p, "hand.json");
  EXPECT_FALSE(c.network_measured);
  EXPECT_NE(c.network_source.find("hand.json: links.network given without a network_calibration record"),
            std::string::npos);
  // And a record saying "measured" without links.network is refused.
  json bad = {{"network_calibration", {{"measured", true}, {"source", "x"}}}};
  Cluster d = ClusterPreset("dgx-h100");
  EXPECT_NE(ErrorOf([&] { ApplyProfileJson(d, bad, "bad.json"); })
                .find("bad.json: network_calibration.measured: says the network was measured, but the profile has no "
                      "links.network"),
            std::string::npos);
}

TEST(NetworkProfile, RefitFromTheKeptMeasurementsGivesTheSameProfile) {
  const json p = Profile(NetworkData());
  const CalibrationData back = CalibrationDataFromJson(p, "net.json");
  EXPECT_EQ(back.network.ranks.size(), 16u);
  EXPECT_EQ(back.network.from, 0);
  EXPECT_EQ(back.network.to, 8);
  EXPECT_EQ(back.network.ops.size(), SyntheticOps().size());
  EXPECT_EQ(back.network.ranks[9].host, "node-b");
  EXPECT_EQ(back.network.ranks[9].local_rank, 1);
  EXPECT_EQ(Profile(back), p);
}

TEST(NetworkProfile, BadNetworkMeasurementsNameTheField) {
  json p = Profile(NetworkData());
  p["measurements"]["network"]["pair"] = {0, 99};
  EXPECT_NE(ErrorOf([&] { CalibrationDataFromJson(p, "n.json"); })
                .find("n.json: measurements.network.pair: ranks 0 and 99 must be two of the 16 ranks listed"),
            std::string::npos);
  p = Profile(NetworkData());
  p["measurements"]["network"]["ops"][0]["samples_s"][0] = -1;
  EXPECT_NE(ErrorOf([&] { CalibrationDataFromJson(p, "n.json"); }).find("measurements.network.ops[0].samples_s[0]"),
            std::string::npos);
}

TEST(NetworkProfile, PerOpSamplesWithoutANetworkSweepAreRefused) {
  CalibrationData d = NetworkData();
  d.series.clear();
  d.series.push_back({"device_copy", "one_way", "m", "cuda_events", {0}, {{4096, 1e-5}, {8192, 1.5e-5}}});
  EXPECT_NE(ErrorOf([&] { FitCalibration(d); }).find("per-op samples without a network size sweep"), std::string::npos);
}

TEST(NetworkProfile, MergeKeepsTheBaseAndReplacesWhatWasMeasured) {
  // Base: one host's NVLink sweep and host costs; update: the network.
  CalibrationData host;
  host.name = "2x H200";
  host.source = "one host";
  host.environment = {{"host", "node-a"}};
  host.series.push_back({"nvlink", "one_way", "m", "cuda_events", {0, 1},
                         {{4096, 2.3e-5}, {kMiB, 2.6e-5}, {64 * kMiB, 2.5e-4}}});
  json base = Profile(host);
  base["host"] = {{"nccl_op_ns", 167}, {"source", "one H200"}};
  // The base had an estimated network link and its series: both replaced.
  base["links"]["network"] = {{"latency_ns", 12'000}, {"bytes_per_s", 4.8e10}};
  base["measurements"]["series"].push_back({{"link", "network"}, {"mode", "one_way"}, {"sizes", json::array()}});
  const json update = Profile(NetworkData());
  const json m = MergeProfileJson(base, update, "base.json");
  EXPECT_EQ(m["name"], "2x H200");
  EXPECT_EQ(m["source"], "one host; reshard calibrate --network (test)");
  EXPECT_EQ(m["links"]["nvlink"], base["links"]["nvlink"]);
  EXPECT_EQ(m["links"]["network"], update["links"]["network"]);
  EXPECT_EQ(m["host"], base["host"]);
  EXPECT_EQ(m["network_calibration"], update["network_calibration"]);
  EXPECT_EQ(m["measurements"]["environment"]["host"], "node-a");
  EXPECT_EQ(m["measurements"]["network"], update["measurements"]["network"]);
  // Series: the base's NVLink one, then the update's three network ones.
  ASSERT_EQ(m["measurements"]["series"].size(), 4u);
  EXPECT_EQ(m["measurements"]["series"][0]["link"], "nvlink");
  for (int i = 1; i < 4; ++i) EXPECT_EQ(m["measurements"]["series"][i]["link"], "network");
  // The merged profile refits to itself and applies with the network measured.
  EXPECT_EQ(Profile(CalibrationDataFromJson(m, "merged.json"))["links"], m["links"]);
  Cluster c = ClusterPreset("dgx-h100");
  ApplyProfileJson(c, m, "merged.json");
  EXPECT_TRUE(c.network_measured);
  EXPECT_EQ(c.nvlink.latency_ns, m["links"]["nvlink"]["latency_ns"].get<int64_t>());
  EXPECT_NE(ErrorOf([&] { MergeProfileJson(json::array(), update, "b.json"); }).find("b.json"), std::string::npos);
}

}  // namespace network_test
}  // namespace reshard
