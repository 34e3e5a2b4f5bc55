// Tests of the host-cost and copy-kernel fit (calib/host_fit.h) and the raw
// measurements' JSON (calib/host_data.h) on hand-made samples: per-call
// medians, the NCCL group lines, cold rates, copy-kernel cells, the profile
// sections CalibrationProfileJson writes and their round trip through
// "measurements.host".
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "calib/host_data.h"
#include "calib/host_fit.h"
#include "calib/profile.h"
#include "model/cluster.h"
#include "model/error.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace host_fit_test {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// A NCCL group series with enqueue = 3000 + 150 ops and GroupEnd = 20000 + 400 ops
// ns exactly, three samples per size, the middle one exact and the others ±10 %.
NcclGroupSeries ExactGroups(bool executor_default) {
  NcclGroupSeries g;
  g.executor_default = executor_default;
  for (int32_t pairs : {1, 2, 8, 32, 128, 512}) {
    const int32_t ops = 2 * pairs;
    for (double f : {0.9, 1.0, 1.1}) g.samples.push_back({ops, f * (3000 + 150.0 * ops), f * (20000 + 400.0 * ops)});
  }
  return g;
}

HostMeasurements Sample() {
  HostMeasurements m;
  m.source = "hand-made";
  m.sms = 132;
  m.copy_blocks_per_sm = 2;
  m.launch_queue_depth = 1000;
  m.calls = {{kCallEventRecord, "", 256, {100, 300, 200}},
             {kCallStreamWait, "", 256, {400}},
             {kCallKernelLaunch, "", 256, {2500, 2400, 2600, 9000}},  // even count: (2500 + 2600) / 2
             {kCallMemcpyH2D, "", 256, {1000, 1100}},
             {kCallMemcpyD2H, "", 256, {1300, 1400, 1500}},         // pooled: median 1300
             {kCallAlloc, "", 256, {700}},
             {kCallFree, "", 256, {600}},
             {kCallSetDevice, "", 256, {30}}};
  // The blocking series would give other numbers: the executor's (non-blocking) one is used.
  NcclGroupSeries blocking = ExactGroups(false);
  for (NcclGroupSample& s : blocking.samples) s.end_ns *= 3;
  m.nccl_groups = {blocking, ExactGroups(true)};
  // Pinning: 0.01 s + bytes / 2 GB/s; a fresh pool: bytes / 50 GB/s.
  for (int64_t b : {kGiB, 4 * kGiB, 16 * kGiB}) {
    m.cold.push_back({kColdHostAlloc, b, 0.01 + static_cast<double>(b) / 2e9});
    m.cold.push_back({kColdPoolGrow, b, static_cast<double>(b) / 50e9});
    m.cold.push_back({kColdHostRegister, b, static_cast<double>(b) / 8e9});
  }
  // Copies of 256 MiB: pack and unpack of 64 B runs pooled, both-strided and
  // the size curve left out of the rates.
  const int64_t b = 256 * kMiB;
  m.copies = {{kPatternPack, 64, b, 1.0, 264, {1e-3, 1e-3, 1e-3}},
              {kPatternUnpack, 64, b, 1.0, 264, {2e-3, 2e-3}},  // pooled median of 5: 1e-3
              {kPatternBoth, 64, b, 1.0, 264, {9e-3}},
              {kPatternPack, 64, b, 0.25, 66, {4e-3}},
              {kPatternContiguous, b, b, 1.0, 264, {1e-4}},
              {kPatternSize, kMiB, kMiB, 1.0, 264, {1e-5}}};
  return m;
}

TEST(HostFit, WeightedLineRecoversAnExactLine) {
  const WeightedLine l = FitWeightedLine({{2, 3300}, {4, 3600}, {64, 12600}, {1024, 156600}});
  EXPECT_NEAR(l.intercept, 3000, 1e-6);
  EXPECT_NEAR(l.slope, 150, 1e-9);
  EXPECT_NEAR(l.max_abs_relative_error, 0, 1e-12);
}

TEST(HostFit, PerCallCostsAreMediansOfBatches) {
  const HostFit f = FitHost(Sample());
  EXPECT_EQ(f.host.event_record_ns, 200);
  EXPECT_EQ(f.host.stream_wait_ns, 400);
  EXPECT_EQ(f.host.kernel_launch_ns, 2550);
  EXPECT_EQ(f.host.memcpy_ns, 1300);  // h2d and d2h pooled: {1000, 1100, 1300, 1400, 1500}
  EXPECT_EQ(f.host.alloc_ns, 700);
  EXPECT_EQ(f.host.free_ns, 600);
  EXPECT_DOUBLE_EQ(f.set_device_ns, 30);
}

TEST(HostFit, GroupLinesFromTheExecutorsCommunicator) {
  // Medians per size are the exact values: enqueue 3000 + 150 ops, end 20000 + 400 ops.
  const HostFit f = FitHost(Sample());
  ASSERT_TRUE(f.has_nccl);
  EXPECT_EQ(f.nccl.series, 1u);
  EXPECT_EQ(f.host.nccl_op_ns, 150);
  EXPECT_EQ(f.host.nccl_group_op_ns, 400);
  EXPECT_EQ(f.host.nccl_group_ns, 23000);  // 3000 + 20000
  EXPECT_EQ(f.host.nccl_connect_ns, 0);    // needs two GPUs
  ASSERT_EQ(f.nccl.enqueue.size(), 6u);
  EXPECT_DOUBLE_EQ(f.nccl.enqueue.back().first, 1024);
  EXPECT_DOUBLE_EQ(f.nccl.enqueue.back().second, 3000 + 150.0 * 1024);
}

TEST(HostFit, GroupInterceptBelowZeroIsClamped) {
  HostMeasurements m;
  m.source = "x";
  NcclGroupSeries g;
  g.executor_default = true;
  // enqueue = -100 + 200 ops (a line that crosses below 0 before 1 op), end = 5000 flat.
  for (int32_t ops : {2, 4, 16}) g.samples.push_back({ops, -100 + 200.0 * ops, 5000});
  m.nccl_groups = {g};
  const HostFit f = FitHost(m);
  EXPECT_EQ(f.host.nccl_op_ns, 200);
  EXPECT_EQ(f.host.nccl_group_ns, 5000);  // max(0, -100) + 5000
  EXPECT_EQ(f.host.nccl_group_op_ns, 0);
}

TEST(HostFit, ColdRatesAreInverseSlopes) {
  const HostFit f = FitHost(Sample());
  EXPECT_NEAR(f.host.pin_bytes_per_s, 2e9, 2.0);  // the 10 ms intercept does not bias the rate
  EXPECT_NEAR(f.host.map_bytes_per_s, 50e9, 50.0);
}

TEST(HostFit, CopyKernelCells) {
  const HostFit f = FitHost(Sample());
  const auto& r = f.copy_kernel.rates;
  ASSERT_EQ(r.size(), 3u);  // (0.25, 64), (1, 64), (1, 256 MiB); both-strided and the size curve left out
  const double b = 256.0 * kMiB;
  EXPECT_DOUBLE_EQ(r[0].sm_share, 0.25);
  EXPECT_DOUBLE_EQ(r[0].bytes_per_s, b / 4e-3);
  EXPECT_EQ(r[1].run_bytes, 64);
  EXPECT_DOUBLE_EQ(r[1].bytes_per_s, b / 1e-3);  // median of {1, 1, 1, 2, 2} ms
  EXPECT_EQ(r[2].run_bytes, 256 * kMiB);
  EXPECT_DOUBLE_EQ(r[2].bytes_per_s, b / 1e-4);
  EXPECT_DOUBLE_EQ(f.copy_kernel.Rate(64, 1.0), b / 1e-3);
}

TEST(HostFit, HostSectionHasOnlyMeasuredFields) {
  HostMeasurements m;
  m.source = "only calls";
  m.calls = {{kCallAlloc, "", 10, {700}}};
  const nlohmann::json j = HostSectionJson(FitHost(m));
  EXPECT_EQ(j, (nlohmann::json{{"alloc_ns", 700}, {"source", "only calls"}}));
  EXPECT_TRUE(HostSectionJson(FitHost(HostMeasurements{})).is_null());
}

TEST(HostFit, ProfileSectionsAndRefitRoundTrip) {
  CalibrationData d;
  d.name = "1x NVIDIA H200";
  d.source = "hand-made";
  d.host = Sample();
  const CalibrationFit fit = FitCalibration(d);
  const nlohmann::json profile = CalibrationProfileJson(d, fit);
  EXPECT_FALSE(profile.contains("links"));  // no link measured
  ASSERT_TRUE(profile.contains("host"));
  EXPECT_EQ(profile["host"]["nccl_group_ns"], 23000);
  EXPECT_FALSE(profile["host"].contains("nccl_connect_ns"));
  EXPECT_EQ(profile["copy_kernel"]["rates"].size(), 3u);
  EXPECT_EQ(profile["measurements"]["host_fit"]["launch_queue_depth"], 1000);

  // Through text, as `reshard calibrate --refit` reads it: the same measurements and fit.
  const nlohmann::json text = nlohmann::json::parse(profile.dump());
  const CalibrationData back = CalibrationDataFromJson(text, "p.json");
  EXPECT_TRUE(back.series.empty());
  ASSERT_EQ(back.host.calls.size(), d.host.calls.size());
  EXPECT_EQ(back.host.calls[2].batch_ns, d.host.calls[2].batch_ns);
  EXPECT_EQ(back.host.launch_queue_depth, 1000);
  const CalibrationFit again = FitCalibration(back);
  EXPECT_EQ(again.host.host, fit.host.host);
  EXPECT_EQ(again.host.copy_kernel, fit.host.copy_kernel);
  EXPECT_EQ(CalibrationProfileJson(back, again)["host"], profile["host"]);
}

TEST(HostFit, ProfileSectionsApplyOntoACluster) {
  CalibrationData d;
  d.name = "1x NVIDIA H200";
  d.host = Sample();
  const CalibrationFit fit = FitCalibration(d);
  Cluster c = ClusterPreset("h200-x2");
  const HostCosts preset = c.host;
  ApplyProfileJson(c, CalibrationProfileJson(d, fit), "p.json");
  EXPECT_EQ(c.host.kernel_launch_ns, 2550);
  EXPECT_EQ(c.host.nccl_group_ns, 23000);
  EXPECT_DOUBLE_EQ(c.host.pin_bytes_per_s, fit.host.host.pin_bytes_per_s);
  EXPECT_EQ(c.host.nccl_connect_ns, preset.nccl_connect_ns);  // not measured: the preset's stays
  EXPECT_EQ(c.copy_kernel, fit.host.copy_kernel);
  EXPECT_EQ(c.host_python, ClusterPreset("h200-x2").host_python);  // calibrate never writes it
}

TEST(HostFit, BadMeasurementsNameTheField) {
  CalibrationData d;
  d.host = Sample();
  nlohmann::json p = CalibrationProfileJson(d, FitCalibration(d));
  p["measurements"]["host"]["copies"][1]["seconds"][0] = -1;
  try {
    (void)CalibrationDataFromJson(p, "p.json");
    FAIL() << "a negative time was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("measurements.host.copies[1].seconds[0]"), std::string::npos) << e.what();
  }
  p = CalibrationProfileJson(d, FitCalibration(d));
  p["measurements"]["host"]["format"] = "v0";
  EXPECT_THROW((void)CalibrationDataFromJson(p, "p.json"), InputError);
  // One group size cannot separate the fixed cost from the per-op cost.
  HostMeasurements one;
  one.nccl_groups = {{"", true, {{2, 1000, 2000}, {2, 1100, 2100}}}};
  EXPECT_THROW((void)FitHost(one), InputError);
}

}  // namespace host_fit_test
}  // namespace reshard
