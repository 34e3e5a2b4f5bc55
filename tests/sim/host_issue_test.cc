// Tests of what the simulator adds beyond the wire: the host thread that
// issues the ops (sim/host_issue.h), the copy kernel's rate by run length and
// SM share, the quantize kernel's rate by launch size, a cold refit's
// connections, and the rule that grouped ops to one
// peer continue a run. Hand-derived on the test cluster of plan_builder.h
// (links 1 byte/ns, copies 2 bytes/ns, no latency unless set).
#include <algorithm>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/host_costs.h"
#include "plan/plan.h"
#include "plan/issue_order.h"
#include "sim/host_issue.h"
#include "sim/simulator.h"
#include "sim/state.h"
#include "tests/sim/plan_builder.h"

namespace reshard {
namespace {

using namespace sim_test;  // NOLINT: TestCluster, PlanBuilder, SimVerified

HostCosts Costs() {
  HostCosts c;
  c.event_record_ns = 10;
  c.stream_wait_ns = 7;
  c.kernel_launch_ns = 100;
  c.nccl_op_ns = 20;
  c.nccl_group_ns = 50;
  c.nccl_group_op_ns = 5;
  return c;
}

Cluster WithHost(Cluster c) {
  c.host = Costs();
  return c;
}

TEST(HostIssue, OpsWaitForTheirHostThread) {
  // Two 2000 B copies on one stream, 2 B/ns: 1000 ns each on the GPU. Host:
  // copy 1 = event 10 + launch 100 -> queued at 110, end event -> 120; copy 2
  // = 120 + 10 + 100 -> queued at 230, end event -> 240. GPU: copy 1 [110,
  // 1110], copy 2 after it on the stream [1110, 2110]. time (from the call)
  // 2110, GPU span 2000, host done at 240.
  PlanBuilder b(WithHost(TestCluster()));
  const int32_t c1 = b.Copy(0, 2000);
  const int32_t c2 = b.Copy(0, 2000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_start_ns[c1], 110);
  EXPECT_EQ(p.op_end_ns[c1], 1110);
  EXPECT_EQ(p.op_start_ns[c2], 1110);
  EXPECT_EQ(p.op_end_ns[c2], 2110);
  EXPECT_EQ(p.time_ns, 2110);
  EXPECT_EQ(p.gpu_span_ns, 2000);
  EXPECT_EQ(p.host_issue_ns, 240);
  EXPECT_EQ(p.issue_model, "executor");
}

TEST(HostIssue, EventBracketsTakeStreamTime) {
  // As OpsWaitForTheirHostThread, with event_gpu_ns 50: copy 1 queued at 110
  // starts at 160, ends 1160; copy 2 is ready on the stream at 1160 (queued
  // at 230) and starts 50 later: [1210, 2210]. The Python issue model records
  // no events, so it pays none.
  Cluster cl = WithHost(TestCluster());
  cl.host.event_gpu_ns = 50;
  PlanBuilder b(cl);
  const int32_t c1 = b.Copy(0, 2000);
  const int32_t c2 = b.Copy(0, 2000);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_start_ns[c1], 160);
  EXPECT_EQ(p.op_start_ns[c2], 1210);
  EXPECT_EQ(p.time_ns, 2210);
}

TEST(HostIssue, AllocsRecordEventsOnlyWhereWaitedFor) {
  // As EventBracketsTakeStreamTime. Alloc A, then a 2000 B copy, on the
  // compute stream: nothing on another stream waits for the alloc, so it
  // records no event (OpEventCounts 0): queued at 0 (alloc_ns 0), no stream
  // time; the copy is queued at 0 + 10 + 100 = 110 and starts after its
  // bracket, 160 (with a bracket around the alloc: 180). With a free of A on
  // the comm stream waiting for it, the alloc records its end event (1): the
  // copy is queued at 10 + 10 + 100 = 120 and starts at 170.
  for (const bool waited : {false, true}) {
    Cluster cl = WithHost(TestCluster());
    cl.host.event_gpu_ns = 50;
    PlanBuilder b(cl);
    const int32_t A = b.Buffer(0, 1000, /*preexisting=*/false);
    const int32_t alloc = b.Alloc(A);
    const int32_t c = b.Copy(0, 2000, {kStreamCompute});
    if (waited) b.Free(A, {kStreamComm, -1, {alloc}});
    const Plan plan = b.Build();
    EXPECT_EQ(OpEventCounts(plan)[alloc], waited ? 1 : 0);
    EXPECT_EQ(OpEventCounts(plan)[c], 2);
    const Prediction p = SimVerified(plan);
    EXPECT_EQ(p.op_start_ns[c], waited ? 170 : 160) << "waited " << waited;
  }
}

TEST(HostIssue, SmallOpsAreBoundByTheHost) {
  // Three 20 B copies (10 ns each on the GPU) are queued at 110, 230 and 350
  // (120 ns of host time each): each runs as soon as it is queued; the last
  // ends at 360. Without the host model: 0-10, 10-20, 20-30.
  PlanBuilder b(WithHost(TestCluster()));
  for (int i = 0; i < 3; ++i) b.Copy(0, 20);
  const Plan plan = b.Build();
  const Prediction p = SimVerified(plan);
  EXPECT_EQ(p.op_start_ns[2], 350);
  EXPECT_EQ(p.time_ns, 360);
  SimOptions none;
  none.issue = IssueModel::kNone;
  const Prediction q = Simulate(plan, none);
  EXPECT_EQ(q.time_ns, 30);
  EXPECT_EQ(q.issue_model, "none");
}

TEST(HostIssue, GroupIsQueuedAtGroupEndPerProcess) {
  // Group 0: GPU0 sends 1000 B to GPU1. One process per GPU: each pays event
  // 10 + ncclSend/Recv 20 + group 50 + 5 x 1 op = 85; flow [85, 1085].
  // One process for both: events 2 x 10, calls 2 x 20, group 50 + 5 x 2 = 120;
  // flow [120, 1120].
  PlanBuilder b(WithHost(TestCluster()));
  auto [s, r] = b.Transfer(0, 1, 1000, {kStreamComm, 0}, {kStreamComm, 0});
  const Plan plan = b.Build();
  const Prediction per_gpu = SimVerified(plan);
  EXPECT_EQ(per_gpu.op_start_ns[s], 85);
  EXPECT_EQ(per_gpu.op_start_ns[r], 85);
  EXPECT_EQ(per_gpu.time_ns, 1085);
  SimOptions one;
  one.one_process = true;
  const Prediction single = Simulate(plan, one);
  EXPECT_EQ(single.op_start_ns[s], 120);
  EXPECT_EQ(single.time_ns, 1120);
  EXPECT_TRUE(single.one_process);
}

TEST(HostIssue, DependencyOnAnotherStreamCostsAStreamWait) {
  // GPU0: a 4000 B copy (compute stream), then a send to GPU1 that depends on
  // it (comm stream). Process 0: copy queued at 10 + 100 = 110, end event ->
  // 120; send: stream wait 7 + event 10 + ncclSend 20 + group 55 -> 212.
  // Process 1: recv queued at 85. GPU: copy [110, 2110] at 2 B/ns; the send
  // waits for it: flow [2110, 3110].
  PlanBuilder b(WithHost(TestCluster()));
  const int32_t c = b.Copy(0, 4000);
  auto [s, r] = b.Transfer(0, 1, 1000, {kStreamComm, -1, {c}});
  const Plan plan = b.Build();
  const HostIssue h = HostIssueTimes(plan, plan.cluster.host);
  EXPECT_EQ(h.op_issue_ns[c], 110);
  EXPECT_EQ(h.op_issue_ns[s], 212);
  EXPECT_EQ(h.op_issue_ns[r], 85);
  EXPECT_EQ(h.processes, 4);
  const Prediction p = SimVerified(plan);
  EXPECT_EQ(p.op_start_ns[s], 2110);
  EXPECT_EQ(p.time_ns, 3110);
}

TEST(HostIssue, ColdRefitConnectsEachPairOnceAndPinsHostBuffers) {
  // nccl_connect 1000 ns; two ungrouped transfers 0 -> 1 of 1000 B. Each
  // side's first call pays event 10 + call 20 + connect 1000 + group 55 =
  // 1085, and process 0 first pins a 5000 B host buffer at 1e12 B/s (5 ns,
  // cold_setup_ns): send queued at 1090, recv at 1085, flow [1090, 2090].
  // Second transfer: no connection; queued at 1100 + 85 = 1185 (recv 1180),
  // runs after the first on the pair: [2090, 3090]. Warm: queued at 85 and
  // 180: [85, 1085], [1085, 2085].
  Cluster cl = WithHost(TestCluster());
  cl.host.nccl_connect_ns = 1000;
  cl.host.pin_bytes_per_s = 1e12;
  PlanBuilder b(cl);
  b.Buffer(0, 5000, /*preexisting=*/true, MemorySpace::kHost);
  auto [s1, r1] = b.Transfer(0, 1, 1000);
  auto [s2, r2] = b.Transfer(0, 1, 1000);
  const Plan plan = b.Build();
  SimOptions cold;
  cold.cold = true;
  const Prediction c = Simulate(plan, cold);
  EXPECT_EQ(c.op_start_ns[s1], 1090);
  EXPECT_EQ(c.op_start_ns[r1], 1085);  // the receiving side connects too, on its own thread
  EXPECT_EQ(c.op_end_ns[s1], 2090);
  EXPECT_EQ(c.op_end_ns[s2], 3090);
  EXPECT_EQ(c.cold_setup_ns, 5);
  EXPECT_EQ(c.connect_ns, 1000);
  EXPECT_TRUE(c.cold);
  const Prediction w = SimVerified(plan);
  EXPECT_EQ(w.op_start_ns[s1], 85);
  EXPECT_EQ(w.op_end_ns[s2], 2085);
  EXPECT_EQ(w.connect_ns, 0);
  (void)r2;
}

TEST(HostIssue, PythonStackUsesItsOwnCosts) {
  // host_python: kernel launch 1000 ns, nothing else. A 2000 B copy: queued
  // at 1000, runs [1000, 2000]. The executor model (host empty) sees none.
  Cluster cl = TestCluster();
  cl.host_python.kernel_launch_ns = 1000;
  PlanBuilder b(cl);
  b.Copy(0, 2000);
  const Plan plan = b.Build();
  SimOptions py;
  py.issue = IssueModel::kPython;
  EXPECT_EQ(Simulate(plan, py).time_ns, 2000);
  const Prediction ex = SimVerified(plan);
  EXPECT_EQ(ex.time_ns, 1000);
  EXPECT_EQ(ex.issue_model, "none");  // no executor costs in this cluster: not modelled
}

// ---------------------------------------------------------------------------
// Copy kernel rates

CopyKernelProfile TwoByTwo() {
  // share 0.25: 64 B runs 0.25 GB/s, 4 KiB runs 1 GB/s; share 1: 0.5, 2 GB/s.
  CopyKernelProfile k;
  k.rates = {{64, 0.25, 0.25e9}, {4096, 0.25, 1e9}, {64, 1, 0.5e9}, {4096, 1, 2e9}};
  return k;
}

TEST(CopyKernel, RateInterpolatesInLogRunAndLinearShare) {
  const CopyKernelProfile k = TwoByTwo();
  EXPECT_DOUBLE_EQ(k.Rate(64, 1), 0.5e9);
  EXPECT_DOUBLE_EQ(k.Rate(16, 1), 0.5e9);      // clamped below
  EXPECT_DOUBLE_EQ(k.Rate(1 << 20, 1), 2e9);   // clamped above
  EXPECT_DOUBLE_EQ(k.Rate(512, 1), 1.25e9);    // log2 512 = 9, halfway from 6 to 12
  EXPECT_DOUBLE_EQ(k.Rate(4096, 0.625), 1.5e9);  // halfway from share 0.25 to 1
  EXPECT_DOUBLE_EQ(k.Rate(4096, 0.1), 1e9);    // clamped at the lowest share
  EXPECT_DOUBLE_EQ(CopyKernelProfile{}.Rate(4096, 1), 0);
}

TEST(CopyKernel, StridedRunsAndShareSetTheCopyTime) {
  // 8192 B in 128 rows of 64 B (stride 128) into a contiguous region: runs
  // of 64 B. Share 1: 0.5 B/ns -> 16384 ns. Share 0.25: 0.25 B/ns -> 32768.
  // A contiguous 8192 B copy at share 1: min(port 2 B/ns, 4 KiB+ runs 2 B/ns)
  // -> 4096 ns.
  Cluster cl = TestCluster();
  cl.copy_kernel = TwoByTwo();
  for (const double share : {1.0, 0.25}) {
    PlanBuilder b(cl);
    const int32_t pool = b.Buffer(0, 3 * 8192, true);
    const int32_t c = b.Copy(0, 8192);
    Plan plan = b.Build();
    Region strided{pool, 0, 64, 128, 128, 1, 0};
    plan.ops[c].copies = {{strided, ContiguousRegion(pool, 2 * 8192, 8192)}};
    plan.ops[c].sm_share = share;
    EXPECT_EQ(CopyRunBytes(plan.ops[c].copies[0]), 64);
    EXPECT_EQ(SimVerified(plan).time_ns, share == 1.0 ? 16384 : 32768) << share;
  }
  PlanBuilder b(cl);
  b.Copy(0, 8192);
  EXPECT_EQ(SimVerified(b.Build()).time_ns, 4096);
}

TEST(CopyKernel, FloorScalesFromTheLaunchBelowOneChunk) {
  // Floor: 20000 ns for a full 65536 B chunk per warp, 2000 ns for a launch
  // of nothing, linear in between, plus bytes / 1e12 B/s. Rates are far
  // above it (1e12 B/s), so the floor sets the time:
  //   256 B:    2000 + 18000 x 256 / 65536 = 2070.3 ns, + 0.256 ns -> 2071
  //   32768 B:  2000 + 9000 = 11000 ns, + 32.768 -> 11033
  //   1 MiB:    20000 + 1048.576 -> 21049 (CeilNs)
  CopyKernelProfile k;
  k.rates = {{64, 1, 1e12}, {1 << 20, 1, 1e12}};
  k.floor_ns = 20000;
  k.floor_base_ns = 2000;
  k.floor_chunk_bytes = 65536;
  k.floor_bytes_per_s = 1e12;
  EXPECT_NEAR(k.FloorNs(256, 256), 2070.3125 + 0.256, 1e-9);
  Cluster cl = TestCluster();
  cl.device_copy.bytes_per_s = 1e15;  // the port is not what binds
  cl.copy_kernel = k;
  for (const auto& [bytes, ns] : {std::pair<int64_t, int64_t>{256, 2071}, {32768, 11033}, {1 << 20, 21049}}) {
    PlanBuilder b(cl);
    b.Copy(0, bytes);
    EXPECT_EQ(SimVerified(b.Build()).time_ns, ns) << bytes;
  }
}

// ---------------------------------------------------------------------------
// Quantize kernel rates

TEST(QuantizeKernel, MeasuredRatesSetTheQuantizeTime) {
  // Rates: 1 MiB launches 1 GB/s of bf16 input, 16 MiB ones 4 GB/s; a 4 MiB
  // launch is halfway in log size: 2.5 GB/s. One op of two tiles (launched
  // in series): 1048576 B / 1 B/ns = 1048576 ns, + 4194304 / 2.5 =
  // 1677721.6 ns -> 2726297.6 ns. The device-copy port (2 B/ns) does not
  // bind: the op's copy bytes, (input + output + scales) / 2 = (5 MiB + 2.5
  // MiB + 8) / 2, would take 1966082 ns there. Without rates the op runs
  // at the port's rate: 1966082 ns.
  QuantizeKernelProfile q;
  q.rates = {{16 << 20, 4e9}, {1 << 20, 1e9}};
  std::sort(q.rates.begin(), q.rates.end(),
            [](const QuantizeRatePoint& a, const QuantizeRatePoint& b) { return a.input_bytes < b.input_bytes; });
  EXPECT_DOUBLE_EQ(q.Seconds(4 << 20), (4 << 20) / 2.5e9);
  EXPECT_DOUBLE_EQ(q.Seconds(64 << 20), (64 << 20) / 4e9);  // clamped above
  EXPECT_DOUBLE_EQ(QuantizeKernelProfile{}.Seconds(1 << 20), 0);
  Cluster cl = TestCluster();
  {
    PlanBuilder b(cl);
    b.Quantize(0, {1 << 20, 4 << 20});
    EXPECT_EQ(Simulate(b.Build()).time_ns, 1966082);
  }
  cl.quantize_kernel = q;
  PlanBuilder b(cl);
  b.Quantize(0, {1 << 20, 4 << 20});
  EXPECT_NEAR(static_cast<double>(Simulate(b.Build()).time_ns), 2726297.6, 1.0);
}

TEST(QuantizeKernel, TilesOfPartialBlocksCostTheirWholeBlocks) {
  // 128 x 128 blocks, one whole block per CTA iteration. 256 rows x 768
  // columns (2 x 6 blocks): as they are, 256 x 768 x 2 = 393216 bytes. 256 x
  // 200 (the second block column cut at 72): as 256 x 256, 256 x 200 x 2 x
  // 256 / 200 = 131072. 200 x 768 (the second block row cut): as 256 x 768,
  // 393216. A tensor of MXFP8's 1 x 32 blocks: as they are.
  Plan plan;
  PlanTensor t;
  t.shape = MakeShape({2048, 2048});
  t.quant.role = QuantRole::kValues;
  t.quant.block_rows = t.quant.block_cols = 128;
  plan.tensors = {t};
  t.quant.block_rows = 1;
  t.quant.block_cols = 32;  // MXFP8
  plan.tensors.push_back(t);
  auto tile = [](int32_t tensor, int64_t rows, int64_t cols) {
    QuantizeTile q;
    q.tensor = tensor;
    q.box.ndim = 2;
    q.box.lo[0] = 0, q.box.hi[0] = rows, q.box.lo[1] = 0, q.box.hi[1] = cols;
    q.input = ContiguousRegion(0, 0, rows * cols * 2);
    return q;
  };
  EXPECT_EQ(sim_internal::QuantizeLaunchBytes(plan, tile(0, 256, 768)), 393216);
  EXPECT_EQ(sim_internal::QuantizeLaunchBytes(plan, tile(0, 256, 200)), 131072);
  EXPECT_EQ(sim_internal::QuantizeLaunchBytes(plan, tile(0, 200, 768)), 393216);
  EXPECT_EQ(sim_internal::QuantizeLaunchBytes(plan, tile(1, 256, 200)), 256 * 200 * 2);
}

TEST(QuantizeKernel, EachBlockShapeRunsAtItsOwnRates) {
  // 128 x 128 points: 1 MiB 1 GB/s, 16 MiB 4 GB/s; MXFP8 points: 1 MiB
  // 0.5 GB/s, 16 MiB 2 GB/s. A 4 MiB launch is halfway in log size: 2.5
  // GB/s for 128 x 128, 1.25 GB/s for MXFP8; per-matrix scales were not
  // measured, so they take the 128 x 128 rates.
  QuantizeKernelProfile q;
  q.rates = {{1 << 20, 1e9}, {16 << 20, 4e9}, {1 << 20, 0.5e9, QuantScheme::kMx}, {16 << 20, 2e9, QuantScheme::kMx}};
  EXPECT_TRUE(q.Has(QuantScheme::kMx));
  EXPECT_FALSE(q.Has(QuantScheme::kTensor));
  EXPECT_DOUBLE_EQ(q.Seconds(4 << 20), (4 << 20) / 2.5e9);
  EXPECT_DOUBLE_EQ(q.Seconds(4 << 20, QuantScheme::kMx), (4 << 20) / 1.25e9);
  EXPECT_DOUBLE_EQ(q.Seconds(4 << 20, QuantScheme::kTensor), (4 << 20) / 2.5e9);
  // Which kernel a tile runs on: from its tensor's blocks and shape.
  Plan plan;
  PlanTensor t;
  t.shape = MakeShape({2048, 1024});
  t.quant.role = QuantRole::kValues;
  t.quant.block_rows = t.quant.block_cols = 128;
  plan.tensors.push_back(t);  // 0: 128 x 128
  t.quant.block_rows = 1, t.quant.block_cols = 32;
  plan.tensors.push_back(t);  // 1: MXFP8
  t.quant.block_rows = 2048, t.quant.block_cols = 1024;
  plan.tensors.push_back(t);  // 2: one scale for the matrix
  t.shape = MakeShape({8, 256, 512});
  t.quant.block_rows = 256, t.quant.block_cols = 512;
  plan.tensors.push_back(t);  // 3: one scale per expert
  t.quant.block_rows = 128, t.quant.block_cols = 512;
  plan.tensors.push_back(t);  // 4: 128 x 512 blocks of an expert
  QuantizeTile tile;
  const QuantScheme want[] = {QuantScheme::kBlock, QuantScheme::kMx, QuantScheme::kTensor, QuantScheme::kTensor,
                              QuantScheme::kBlock};
  for (int32_t i = 0; i < 5; ++i) {
    tile.tensor = i;
    EXPECT_EQ(sim_internal::QuantizeKernelScheme(plan, tile), want[i]) << "tensor " << i;
  }
}

TEST(QuantizeKernel, ProfileJsonRoundTripsAndRejectsBadPoints) {
  QuantizeKernelProfile q;
  q.rates = {{1 << 20, 1e12}, {1 << 30, 3e12}};
  q.source = "measured";
  nlohmann::json j = q;
  EXPECT_EQ(QuantizeKernelProfileFromJson(j, "p.json", "quantize_kernel"), q);
  j["rates"][1]["input_bytes"] = 1 << 20;
  EXPECT_THROW(QuantizeKernelProfileFromJson(j, "p.json", "quantize_kernel"), InputError);
  j["rates"][1]["input_bytes"] = 0;
  EXPECT_THROW(QuantizeKernelProfileFromJson(j, "p.json", "quantize_kernel"), InputError);
  // Points of other block shapes carry "scheme"; one size per shape once.
  q.rates = {{1 << 20, 1e12}, {1 << 20, 9e11, QuantScheme::kTensor}, {1 << 20, 2e11, QuantScheme::kMx}};
  j = q;
  EXPECT_FALSE(j["rates"][0].contains("scheme"));
  EXPECT_EQ(j["rates"][1]["scheme"], "tensor");  // sorted by (scheme, input_bytes)
  EXPECT_EQ(QuantizeKernelProfileFromJson(j, "p.json", "quantize_kernel"), q);
  j["rates"][2]["scheme"] = "tensor";
  EXPECT_THROW(QuantizeKernelProfileFromJson(j, "p.json", "quantize_kernel"), InputError);
  j["rates"][2]["scheme"] = "nvfp4";
  EXPECT_THROW(QuantizeKernelProfileFromJson(j, "p.json", "quantize_kernel"), InputError);
}

// ---------------------------------------------------------------------------
// Grouped ops to one peer continue a run

TEST(Simulate, GroupedOpsToOnePeerContinueTheRun) {
  // NVLink efficiency 0.5 at 1000 B and 0.625 at 2000 B (1 B/ns peak). Two
  // 1000 B sends 0 -> 1 in one group: the first at 0.5 B/ns takes 2000 ns;
  // the second continues the run: T(2000) - T(1000) = 2000 / 0.625 - 1000 /
  // 0.5 = 3200 - 2000 = 1200 ns (at least 1000 / 1 = 1000), so it ends at
  // 3200. The same two sends ungrouped each pay the ramp: 2000 + 2000 = 4000.
  Cluster c = TestCluster();
  c.nvlink.efficiency = {{1000, 0.5}, {2000, 0.625}};
  {
    PlanBuilder b(c);
    auto [s1, r1] = b.Transfer(0, 1, 1000, {kStreamComm, 0}, {kStreamComm, 0});
    auto [s2, r2] = b.Transfer(0, 1, 1000, {kStreamComm, 0}, {kStreamComm, 0});
    const Prediction p = SimVerified(b.Build());
    EXPECT_EQ(p.op_end_ns[s1], 2000);
    EXPECT_EQ(p.op_end_ns[s2], 3200);
    EXPECT_EQ(p.time_ns, 3200);
    (void)r1, (void)r2;
  }
  {
    PlanBuilder b(c);
    b.Transfer(0, 1, 1000);
    auto [s2, r2] = b.Transfer(0, 1, 1000);
    const Prediction p = SimVerified(b.Build());
    EXPECT_EQ(p.op_end_ns[s2], 4000);
    (void)r2;
  }
}

// ---------------------------------------------------------------------------
// Network posts

TEST(Simulate, NetworkOpsThroughOneNicArePostedOneAfterAnother) {
  // 2 nodes x 2 GPUs, one NIC per node, network 1 B/ns with op_gap 500 ns and
  // latency 100 ns. One group: 0 -> 2 and 1 -> 3, 1000 B each, both through
  // NIC 0 out and NIC 1 in. The first is posted at 0 and starts at 100; the
  // second is posted at 500 (NIC 0 busy posting until then), starts at 600.
  // Bytes: alone 1 B/ns on nic0.out: [100, 600] 500 B, then both share
  // 0.5 B/ns each: the first's last 500 B end at 1600, the second then has
  // 500 left at 1 B/ns: ends at 2100. Without the gap both start at 100 and
  // end at 2100 together; the first ends 500 ns later (2100, not 1600).
  Cluster c = TestCluster(2, 2, 1);
  c.network.op_gap_ns = 500;
  c.network.latency_ns = 100;
  PlanBuilder b(c);
  auto [s1, r1] = b.Transfer(0, 2, 1000, {kStreamComm, 0}, {kStreamComm, 0});
  auto [s2, r2] = b.Transfer(1, 3, 1000, {kStreamComm, 0}, {kStreamComm, 0});
  const Plan plan = b.Build();
  const Prediction p = SimVerified(plan);
  EXPECT_EQ(p.op_end_ns[s1], 1600);
  EXPECT_EQ(p.op_end_ns[s2], 2100);
  Plan no_gap = plan;
  no_gap.cluster.network.op_gap_ns = 0;
  no_gap.cluster_fingerprint = no_gap.cluster.Fingerprint();
  const Prediction q = SimVerified(no_gap);
  EXPECT_EQ(q.op_end_ns[s1], 2100);
  EXPECT_EQ(q.op_end_ns[s2], 2100);
  (void)r1, (void)r2;
}

TEST(Simulate, EachSideOfANetworkTransferPostsInItsOwnNicsOrder) {
  // 5 nodes x 1 GPU, one NIC each, network 1 B/ns, op_gap 500 ns, latency
  // 100 ns; one group: C(2) -> B(1), E(4) -> B(1), E(4) -> A(0), 1000 B each,
  // rendezvous in that order.
  //   C -> B: C posts at 0, B at 0: starts 0 + 100. NIC C, B busy to 500.
  //   E -> B: E posts at 0 (busy to 500), B at 500 (busy to 1000): starts 600.
  //   E -> A: E posts at 500, A at 0: starts 600. (Had E waited with B for
  //   the post of E -> B at 500, its NIC would be busy to 1000 and E -> A
  //   would start at 1100 and end at 2850.)
  // Bytes: C -> B alone on nicB.in [100, 600]: 500 B. From 600 the three
  // share nicB.in (C->B, E->B) and nicE.out (E->B, E->A) at 0.5 B/ns each:
  // C -> B's last 500 B end at 1600; E -> B and E -> A have 500 B left and
  // stay at 0.5 B/ns (nicE.out): both end at 2600.
  Cluster c = TestCluster(5, 1, 1);
  c.network.op_gap_ns = 500;
  c.network.latency_ns = 100;
  PlanBuilder b(c);
  auto [s1, r1] = b.Transfer(2, 1, 1000, {kStreamComm, 0}, {kStreamComm, 0});
  auto [s2, r2] = b.Transfer(4, 1, 1000, {kStreamComm, 0}, {kStreamComm, 0});
  auto [s3, r3] = b.Transfer(4, 0, 1000, {kStreamComm, 0}, {kStreamComm, 0});
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_end_ns[s1], 1600);
  EXPECT_EQ(p.op_end_ns[s2], 2600);
  EXPECT_EQ(p.op_end_ns[s3], 2600);
  EXPECT_EQ(p.op_end_ns[r3], 2600);
  (void)r1, (void)r2;
}

TEST(HostIssue, EachKindPaysItsOwnHostCalls) {
  // One process, one stream on GPU0; events 10 around each op with GPU work
  // (allocs and frees that nothing on another stream waits for record none:
  // OpEventCounts), alloc 30, free 40, one cudaMemcpy* 15; host buffers are
  // not pool-allocated (0).
  //   alloc A (device):  0 + 30             -> queued  30
  //   alloc H (host):    30 + 0             -> queued  30
  //   offload A -> H, one contiguous pair:
  //                      30 + 10 + 15       -> queued  55, end event ->  65
  //   reload H -> A, one pair of 2 planes (strided):
  //                      65 + 10 + 2 x 15   -> queued 105,           -> 115
  //   free A:            115 + 40           -> queued 155
  //   free H:            155 + 0            -> queued 155
  // On the GPU each starts when queued (the PCIe flows, 10 B and 20 B at
  // 1 B/ns, end at 65 and 125, before the next op is queued): the refit ends
  // with the frees at 155; the host thread is done then too.
  Cluster cl = WithHost(TestCluster());
  cl.host.alloc_ns = 30;
  cl.host.free_ns = 40;
  cl.host.memcpy_ns = 15;
  PlanBuilder b(cl);
  const int32_t A = b.Buffer(0, 1000, /*preexisting=*/false);
  const int32_t H = b.Buffer(0, 1000, /*preexisting=*/false, MemorySpace::kHost);
  const Opts on{kStreamCompute};
  const int32_t alloc_a = b.Alloc(A, on), alloc_h = b.Alloc(H, on);
  const int32_t off = b.Offload(0, ContiguousRegion(A, 0, 10), ContiguousRegion(H, 0, 10), on);
  Region planes = ContiguousRegion(H, 100, 5);  // 2 planes x 2 rows x 5 B = 20 B
  planes.rows = 2;
  planes.row_stride_bytes = 10;
  planes.planes = 2;
  planes.plane_stride_bytes = 100;
  const int32_t rel = b.Reload(0, planes, ContiguousRegion(A, 100, 20), on);
  const int32_t free_a = b.Free(A, on), free_h = b.Free(H, on);
  const Prediction p = SimVerified(b.Build());
  EXPECT_EQ(p.op_start_ns[alloc_a], 30);
  EXPECT_EQ(p.op_start_ns[alloc_h], 30);
  EXPECT_EQ(p.op_start_ns[off], 55);
  EXPECT_EQ(p.op_end_ns[off], 65);
  EXPECT_EQ(p.op_start_ns[rel], 105);
  EXPECT_EQ(p.op_end_ns[rel], 125);
  EXPECT_EQ(p.op_start_ns[free_a], 155);
  EXPECT_EQ(p.op_start_ns[free_h], 155);
  EXPECT_EQ(p.time_ns, 155);
  EXPECT_EQ(p.host_issue_ns, 155);
}

TEST(HostIssue, ColdRefitMapsEveryDeviceBufferOnce) {
  // Cold, process 0: pin its 1,000,000 B host buffer at 1e12 B/s (1000 ns)
  // and map its 3,000,000 + 2,000,000 B device buffers (preexisting or not)
  // at 1e12 B/s (5000 ns): cold_setup_ns 6000. Then alloc S (compute
  // stream; the free on the comm stream waits for it, so it records its end
  // event only: OpEventCounts 1): queued 6000, end event 10 -> 6010; free S
  // (no event: nothing waits for it): stream wait 7 -> queued 6017. Warm: 0
  // and 17.
  Cluster cl = WithHost(TestCluster());
  cl.host.pin_bytes_per_s = 1e12;
  cl.host.map_bytes_per_s = 1e12;
  PlanBuilder b(cl);
  b.Buffer(0, 3'000'000, /*preexisting=*/true);
  const int32_t S = b.Buffer(0, 2'000'000, /*preexisting=*/false);
  b.Buffer(0, 1'000'000, /*preexisting=*/true, MemorySpace::kHost);
  const int32_t alloc_s = b.Alloc(S), free_s = b.Free(S, {kStreamComm, -1, {alloc_s}});
  const Plan plan = b.Build();
  EXPECT_EQ(OpEventCounts(plan)[alloc_s], 1);
  EXPECT_EQ(OpEventCounts(plan)[free_s], 0);
  SimOptions cold;
  cold.cold = true;
  const Prediction c = Simulate(plan, cold);
  EXPECT_EQ(c.cold_setup_ns, 6000);
  EXPECT_EQ(c.op_start_ns[alloc_s], 6000);
  EXPECT_EQ(c.op_start_ns[free_s], 6017);
  EXPECT_EQ(c.time_ns, 6017);
  EXPECT_EQ(c.critical_path.warm_up_ns, 6000);
  const Prediction w = SimVerified(plan);
  EXPECT_EQ(w.op_start_ns[alloc_s], 0);
  EXPECT_EQ(w.time_ns, 17);
}

TEST(Quantize, CostsACopyOfHalfItsTrafficAndALaunchPerTile) {
  // A quantize op of 2 tiles, each reading 4000 B of bf16 and writing 2000 B
  // of fp8 and 64 B of scales: traffic 2 x 6064 = 12128 B, as a copy of
  // 12128 / 2 = 6064 B on gpu0.copy (2 B/ns): 3032 ns. Host (executor):
  // event 10 + 2 launches x 100 = 210, so [210, 3242]; without the host,
  // [0, 3032]. (The sim reads only the tiles' sizes: the plan is not verified,
  // its tiles name no tensor.)
  PlanBuilder b(WithHost(TestCluster()));
  const int32_t pool = b.Buffer(0, 20000, /*preexisting=*/true);
  Plan plan = b.Build();
  Op q;
  q.id = 0;
  q.kind = OpKind::kQuantize;
  q.gpu = 0;
  q.stream = kStreamCompute;
  for (int64_t t = 0; t < 2; ++t) {
    QuantizeTile tile;
    tile.input = ContiguousRegion(pool, t * 6064, 4000);
    tile.output = ContiguousRegion(pool, t * 6064 + 4000, 2000);
    tile.scales = ContiguousRegion(pool, t * 6064 + 6000, 64);
    q.tiles.push_back(tile);
  }
  plan.ops.push_back(q);
  const Prediction host = Simulate(plan);
  EXPECT_EQ(host.op_start_ns[0], 210);
  EXPECT_EQ(host.op_end_ns[0], 3242);
  SimOptions none;
  none.issue = IssueModel::kNone;
  EXPECT_EQ(Simulate(plan, none).time_ns, 3032);
}

}  // namespace
}  // namespace reshard
