// The one-GPU host-cost, copy-kernel and cold-refit measurements of
// `reshard calibrate` (see measure_host.h).
#include "calib/measure_host.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "calib/measure_common.h"
#include "calib/measure_gpu.h"
#include "executor/nccl/copy_desc.h"
#include "executor/nccl/gpu_check.h"
#include "executor/nccl/gpu_error.h"
#include "executor/nccl/kernels.h"
#include "executor/nccl/pool.h"
#include "model/error.h"

namespace reshard {

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

double NsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::nano>(b - a).count();
}

// ---- resources (released in reverse order; cleanup errors ignored) ---------

struct Device {
  void* ptr = nullptr;
  explicit Device(int64_t bytes) {
    RESHARD_GPU(cudaMalloc(&ptr, static_cast<size_t>(bytes)));
    RESHARD_GPU(cudaMemset(ptr, 0x5a, static_cast<size_t>(bytes)));
  }
  ~Device() { (void)cudaFree(ptr); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  unsigned char* bytes() const { return static_cast<unsigned char*>(ptr); }
};

struct Pinned {
  void* ptr = nullptr;
  explicit Pinned(int64_t bytes) {
    RESHARD_GPU(cudaHostAlloc(&ptr, static_cast<size_t>(bytes), cudaHostAllocPortable | cudaHostAllocMapped));
    std::memset(ptr, 0, static_cast<size_t>(bytes));
  }
  ~Pinned() { (void)cudaFreeHost(ptr); }
  Pinned(const Pinned&) = delete;
  Pinned& operator=(const Pinned&) = delete;
};

struct Streams {
  cudaStream_t a = nullptr, b = nullptr;
  Streams() {
    RESHARD_GPU(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    RESHARD_GPU(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  }
  ~Streams() {
    (void)cudaStreamDestroy(b);
    (void)cudaStreamDestroy(a);
  }
  Streams(const Streams&) = delete;
  Streams& operator=(const Streams&) = delete;
};

struct Events {
  std::vector<cudaEvent_t> ev;
  explicit Events(int n) : ev(static_cast<size_t>(n), nullptr) {
    for (cudaEvent_t& e : ev) RESHARD_GPU(cudaEventCreate(&e));
  }
  ~Events() {
    for (cudaEvent_t e : ev)
      if (e != nullptr) (void)cudaEventDestroy(e);
  }
  Events(const Events&) = delete;
  Events& operator=(const Events&) = delete;
};

// `calls` calls of `call(i)` in batches of `per_batch`; `before(batch)` runs
// untimed before each batch (drain the GPU, hold a stream), `after(batch)`
// untimed after it. One warm-up batch is dropped.
template <typename Before, typename Call, typename After>
HostCallSeries TimeCalls(const char* name, std::string method, int32_t calls, int32_t per_batch, Before before,
                         Call call, After after) {
  HostCallSeries s{name, std::move(method), per_batch, {}};
  const int32_t batches = std::max(1, calls / per_batch);
  for (int32_t b = -1; b < batches; ++b) {
    before(b);
    const auto t0 = Clock::now();
    for (int32_t i = 0; i < per_batch; ++i) call(i);
    const auto t1 = Clock::now();
    after(b);
    if (b >= 0) s.batch_ns.push_back(NsBetween(t0, t1) / per_batch);
  }
  return s;
}

// A small contiguous copy as the executor issues it: DescribeCopy, then one
// LaunchCopy with the descriptor by value.
struct SmallCopy {
  CopyPair pair;
  unsigned char* src;
  unsigned char* dst;
  int32_t max_blocks;
  void Launch(cudaStream_t s) const {
    const gpu::CopyDesc d = DescribeCopy(pair, src, dst, 0);
    RESHARD_GPU(gpu::LaunchCopy(&d, 1, d.chunk_end, false, s, max_blocks));
  }
};

// ---- host costs ----------------------------------------------------------------

void MeasureCalls(const HostCalibrateOptions& o, int32_t sms, HostMeasurements& m) {
  const int32_t calls = o.quick ? std::max(o.calls / 4, 1024) : o.calls;
  constexpr int32_t kBatch = 256;  // well below the launch queue (measured below)
  Streams st;
  Events events(kBatch);
  Gate gate;
  Device small_src(64 * kKiB), small_dst(64 * kKiB);
  Pinned host(64 * kKiB);
  auto drain = [&](int32_t) { RESHARD_GPU(cudaDeviceSynchronize()); };
  auto nothing = [](int32_t) {};

  m.calls.push_back(TimeCalls(kCallEventRecord, "cudaEventRecord of distinct events on an idle stream", calls, kBatch,
                              drain, [&](int32_t i) { RESHARD_GPU(cudaEventRecord(events.ev[i], st.a)); }, nothing));
  // Waits on events still pending (recorded behind a held stream), as most of the executor's are.
  m.calls.push_back(TimeCalls(
      kCallStreamWait, "cudaStreamWaitEvent on events pending behind a held stream", calls, kBatch,
      [&](int32_t) {
        RESHARD_GPU(cudaDeviceSynchronize());
        gate.Hold(st.a, 2'000'000'000LL);
        for (cudaEvent_t e : events.ev) RESHARD_GPU(cudaEventRecord(e, st.a));
      },
      [&](int32_t i) { RESHARD_GPU(cudaStreamWaitEvent(st.b, events.ev[i], 0)); },
      [&](int32_t) { gate.Release(); }));
  m.calls.push_back(TimeCalls("stream_wait_done", "cudaStreamWaitEvent on events already complete", calls, kBatch,
                              [&](int32_t) {
                                for (cudaEvent_t e : events.ev) RESHARD_GPU(cudaEventRecord(e, st.a));
                                RESHARD_GPU(cudaDeviceSynchronize());
                              },
                              [&](int32_t i) { RESHARD_GPU(cudaStreamWaitEvent(st.b, events.ev[i], 0)); }, nothing));
  const SmallCopy copy{{ContiguousRegion(0, 0, 4 * kKiB), ContiguousRegion(1, 0, 4 * kKiB)},
                       small_src.bytes(),
                       small_dst.bytes(),
                       sms * o.copy_blocks_per_sm};
  m.calls.push_back(TimeCalls(kCallKernelLaunch, "DescribeCopy + gpu::LaunchCopy, one 4 KiB descriptor by value",
                              calls, kBatch, drain, [&](int32_t) { copy.Launch(st.a); }, nothing));
  m.calls.push_back(TimeCalls(kCallMemcpyH2D, "cudaMemcpyAsync 4 KiB pinned (portable, mapped) -> device", calls,
                              kBatch, drain,
                              [&](int32_t i) {
                                RESHARD_GPU(cudaMemcpyAsync(small_dst.bytes() + (i % 16) * 4 * kKiB,
                                                            static_cast<unsigned char*>(host.ptr) + (i % 16) * 4 * kKiB,
                                                            4 * kKiB, cudaMemcpyHostToDevice, st.a));
                              },
                              nothing));
  m.calls.push_back(TimeCalls(kCallMemcpyD2H, "cudaMemcpyAsync 4 KiB device -> pinned (portable, mapped)", calls,
                              kBatch, drain,
                              [&](int32_t i) {
                                RESHARD_GPU(cudaMemcpyAsync(static_cast<unsigned char*>(host.ptr) + (i % 16) * 4 * kKiB,
                                                            small_src.bytes() + (i % 16) * 4 * kKiB, 4 * kKiB,
                                                            cudaMemcpyDeviceToHost, st.a));
                              },
                              nothing));
  {
    // The executor's pool (OpenRunPool: the default pool, release threshold
    // max), warmed by allocating and freeing a batch first.
    (void)OpenRunPool(0);
    std::vector<void*> ptrs(kBatch, nullptr);
    auto alloc = [&](int32_t i) { RESHARD_GPU(cudaMallocAsync(&ptrs[i], static_cast<size_t>(kMiB), st.a)); };
    auto release = [&](int32_t i) { RESHARD_GPU(cudaFreeAsync(ptrs[i], st.a)); };
    for (int32_t i = 0; i < kBatch; ++i) alloc(i);
    for (int32_t i = 0; i < kBatch; ++i) release(i);
    RESHARD_GPU(cudaDeviceSynchronize());
    m.calls.push_back(TimeCalls(kCallAlloc, "cudaMallocAsync 1 MiB, default pool (release threshold max), warmed",
                                calls, kBatch, drain, alloc, [&](int32_t) {
                                  for (int32_t i = 0; i < kBatch; ++i) release(i);
                                }));
    m.calls.push_back(TimeCalls(kCallFree, "cudaFreeAsync 1 MiB, default pool", calls, kBatch,
                                [&](int32_t) {
                                  for (int32_t i = 0; i < kBatch; ++i) alloc(i);
                                  RESHARD_GPU(cudaDeviceSynchronize());
                                },
                                release, nothing));
    RESHARD_GPU(cudaDeviceSynchronize());
  }
  m.calls.push_back(TimeCalls(kCallSetDevice, "cudaSetDevice(0), already current", calls, kBatch, nothing,
                              [&](int32_t) { RESHARD_GPU(cudaSetDevice(0)); }, nothing));

  // Launch queue: hold the stream, then launch small copies until one call
  // blocks (> 1 ms); the gate lets go after at most 0.5 s on its own.
  {
    const int64_t limit = o.quick ? 16384 : 65536;
    RESHARD_GPU(cudaDeviceSynchronize());
    gate.Hold(st.a, 500'000'000LL);
    int64_t depth = 0;
    for (int64_t i = 0; i < limit; ++i) {
      const auto t0 = Clock::now();
      copy.Launch(st.a);
      if (NsBetween(t0, Clock::now()) > 1e6) {
        depth = i;
        break;
      }
    }
    gate.Release();
    RESHARD_GPU(cudaDeviceSynchronize());
    m.launch_queue_depth = depth;
    m.launch_queue_limit = limit;
  }
  if (o.progress)
    for (const HostCallSeries& s : m.calls)
      o.progress(fmt::format("host: {} {:.0f} ns per call (median of {} batches of {})", s.call, MedianOf(s.batch_ns),
                             s.batch_ns.size(), s.calls_per_batch));
  if (o.progress)
    o.progress(m.launch_queue_depth > 0
                   ? fmt::format("host: {} copy launches queued behind a held stream before a launch blocked",
                                 m.launch_queue_depth)
                   : fmt::format("host: no launch blocked within {} queued launches", m.launch_queue_limit));
}

// NCCL groups of k send/recv pairs to self on a one-rank communicator.
NcclGroupSeries MeasureNcclGroups(const HostCalibrateOptions& o, bool nonblocking) {
  NcclGroupSeries series;
  series.executor_default = nonblocking;
  series.method = nonblocking
                      ? "one-rank non-blocking communicator (ncclCommInitRankConfig, blocking = 0, as the executor); "
                        "ncclGroupEnd then ncclCommGetAsyncError until not in progress"
                      : "one-rank blocking communicator (ncclCommInitAll)";
  series.method += "; k ncclSend + ncclRecv pairs of 1 KiB to self";
  constexpr int32_t kMaxPairs = 512;
  constexpr int64_t kMsg = kKiB;
  Device send(kMaxPairs * kMsg), recv(kMaxPairs * kMsg);
  Streams st;
  ncclComm_t comm = nullptr;
  if (nonblocking) {
    ncclUniqueId id{};
    RESHARD_GPU(ncclGetUniqueId(&id));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    RESHARD_NCCL(ncclCommInitRankConfig(&comm, 1, id, 0, &config));
  } else {
    int dev = 0;
    RESHARD_GPU(ncclCommInitAll(&comm, 1, &dev));
  }
  struct CommGuard {
    ncclComm_t c;
    ~CommGuard() {
      if (c != nullptr) (void)ncclCommDestroy(c);
    }
  } guard{comm};
  auto wait = [&] {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      RESHARD_GPU(ncclCommGetAsyncError(comm, &state));
      if (state == ncclSuccess) return;
      if (state != ncclInProgress) RESHARD_GPU(state);
    }
  };
  if (nonblocking) wait();  // communicator creation
  for (int32_t k : {1, 2, 8, 32, 128, 512}) {
    const int32_t reps = (k >= 128 ? 40 : 200) / (o.quick ? 4 : 1);
    for (int32_t r = -3; r < reps; ++r) {
      RESHARD_GPU(cudaStreamSynchronize(st.a));
      const auto t0 = Clock::now();
      RESHARD_NCCL(ncclGroupStart());
      for (int32_t p = 0; p < k; ++p) {
        RESHARD_NCCL(ncclSend(send.bytes() + p * kMsg, kMsg, ncclUint8, 0, comm, st.a));
        RESHARD_NCCL(ncclRecv(recv.bytes() + p * kMsg, kMsg, ncclUint8, 0, comm, st.a));
      }
      const auto t1 = Clock::now();
      RESHARD_NCCL(ncclGroupEnd());
      if (nonblocking) wait();
      const auto t2 = Clock::now();
      if (r >= 0) series.samples.push_back({2 * k, NsBetween(t0, t1), NsBetween(t1, t2)});
    }
  }
  RESHARD_GPU(cudaStreamSynchronize(st.a));
  return series;
}

// ---- copy kernel -----------------------------------------------------------

// Region of `bytes` in rows of `run` bytes every 2 * run bytes (strided) or contiguous.
Region Side(int32_t buffer, int64_t bytes, int64_t run, bool strided) {
  if (!strided) return ContiguousRegion(buffer, 0, bytes);
  Region r;
  r.buffer = buffer;
  r.row_bytes = run;
  r.rows = bytes / run;
  r.row_stride_bytes = 2 * run;
  return r;
}

// Seconds per launch of `k` launches (launch(q) issues the q-th) queued
// behind a held stream between two events, after a memset of `flush` that
// evicts the L2: `warmup` untimed repetitions, then `reps` timed.
template <typename Launch>
std::vector<double> TimeQueued(Streams& st, Gate& gate, Events& ev, Device& flush, int64_t flush_bytes, int32_t warmup,
                               int32_t reps, int64_t k, Launch launch) {
  std::vector<double> seconds;
  for (int32_t r = -warmup; r < reps; ++r) {
    RESHARD_GPU(cudaStreamSynchronize(st.a));
    gate.Hold(st.a, 2'000'000'000LL);
    RESHARD_GPU(cudaMemsetAsync(flush.ptr, r & 0xff, static_cast<size_t>(flush_bytes), st.a));
    RESHARD_GPU(cudaEventRecord(ev.ev[0], st.a));
    for (int64_t q = 0; q < k; ++q) launch(q);
    RESHARD_GPU(cudaEventRecord(ev.ev[1], st.a));
    gate.Release();
    RESHARD_GPU(cudaEventSynchronize(ev.ev[1]));
    float ms = 0;
    RESHARD_GPU(cudaEventElapsedTime(&ms, ev.ev[0], ev.ev[1]));
    if (r >= 0) seconds.push_back(static_cast<double>(ms) * 1e-3 / static_cast<double>(k));
  }
  return seconds;
}

// Each repetition queues `k` launches behind a held stream between two
// events, so the time is the kernels' own (no launch latency, which is ~5 us
// against a 1 MiB copy's ~1 us), divided by k. Launch j copies at offset
// j x bytes (wrapping in the buffer), and before each repetition (untimed)
// a memset twice the L2's size evicts what the last one left there: a
// refit reads every source byte once, from HBM. Without it, 64 copies of
// 256 KiB (16 MiB each side) ran from the H200's 50 MB L2 and the
// simulator's floor under-predicted mid-sized copies of a real refit.
void MeasureCopyKernel(const HostCalibrateOptions& o, int32_t sms, HostMeasurements& m) {
  const int64_t bytes = o.copy_bytes;
  Device src(2 * bytes), dst(2 * bytes);  // room for rows every 2 x run
  int l2_bytes = 0;
  RESHARD_GPU(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  const int64_t flush_bytes = std::max<int64_t>(2 * int64_t{l2_bytes}, int64_t{1} << 20);
  Device flush(flush_bytes);
  Streams st;
  Events ev(2);
  Gate gate;
  const int32_t warmup = o.quick ? 1 : 2;
  const int32_t reps = o.quick ? 4 : 9;
  auto time = [&](const std::string& pattern, const CopyPair& pair, int64_t run, double share, int32_t n) {
    CopyKernelSample s;
    s.pattern = pattern;
    s.run_bytes = run;
    s.bytes = pair.src.Bytes();
    s.sm_share = share;
    s.blocks = static_cast<int32_t>(std::max<long>(1, std::lround(share * sms * o.copy_blocks_per_sm)));
    const int64_t k = std::clamp<int64_t>(4 * bytes / s.bytes, 4, 64);
    const int64_t span = std::max(pair.src.End(), pair.dst.End());
    const int64_t slots = std::max<int64_t>(1, (2 * bytes - span) / s.bytes + 1);
    std::vector<gpu::CopyDesc> descs;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t at = (j % slots) * s.bytes;
      descs.push_back(DescribeCopy(pair, src.bytes() + at, dst.bytes() + at, 0));
      RESHARD_CHECK(descs.back().run == run, fmt::format("copy pattern {}: run {} != {}", pattern, descs.back().run, run));
    }
    s.seconds = TimeQueued(st, gate, ev, flush, flush_bytes, warmup, n, k, [&](int64_t q) {
      RESHARD_GPU(gpu::LaunchCopy(&descs[q], 1, descs[q].chunk_end, false, st.a, s.blocks));
    });
    m.copies.push_back(std::move(s));
  };
  const std::vector<double> shares = {0.125, 0.25, 0.5, 1.0};
  for (double share : shares) {
    for (int64_t run : {64 * int64_t{1}, 128 * int64_t{1}, 256 * int64_t{1}, 512 * int64_t{1}, kKiB, 2 * kKiB,
                        4 * kKiB, 16 * kKiB, 64 * kKiB, kMiB}) {
      if (run >= bytes) continue;
      time(kPatternPack, {Side(0, bytes, run, true), Side(1, bytes, run, false)}, run, share, reps);
      time(kPatternUnpack, {Side(0, bytes, run, false), Side(1, bytes, run, true)}, run, share, reps);
      time(kPatternBoth, {Side(0, bytes, run, true), Side(1, bytes, run, true)}, run, share, reps);
    }
    time(kPatternContiguous, {Side(0, bytes, bytes, false), Side(1, bytes, bytes, false)}, bytes, share, reps);
  }
  for (double share : {0.5, 1.0})  // the planner's two shares (planner/buffer_layout.h)
    for (int64_t b : {int64_t{256}, 4 * kKiB, 16 * kKiB, 64 * kKiB, 256 * kKiB, kMiB, 4 * kMiB, 16 * kMiB, 64 * kMiB})
      if (b <= bytes) time(kPatternSize, {Side(0, b, b, false), Side(1, b, b, false)}, b, share, 2 * reps);
  {
    // The executor's event bracket: k 256 B copies, each between two events of its own.
    constexpr int64_t k = 64, tiny = 256;
    CopyKernelSample s;
    s.pattern = kPatternBracketed;
    s.run_bytes = tiny;
    s.bytes = tiny;
    s.sm_share = 1.0;
    s.blocks = std::max(1, sms * o.copy_blocks_per_sm);
    Events inner(static_cast<int>(2 * k));
    const gpu::CopyDesc d = DescribeCopy({Side(0, tiny, tiny, false), Side(1, tiny, tiny, false)}, src.bytes(),
                                         dst.bytes(), 0);
    for (int32_t r = -warmup; r < 2 * reps; ++r) {
      RESHARD_GPU(cudaStreamSynchronize(st.a));
      gate.Hold(st.a, 2'000'000'000LL);
      RESHARD_GPU(cudaEventRecord(ev.ev[0], st.a));
      for (int64_t j = 0; j < k; ++j) {
        RESHARD_GPU(cudaEventRecord(inner.ev[2 * j], st.a));
        RESHARD_GPU(gpu::LaunchCopy(&d, 1, d.chunk_end, false, st.a, s.blocks));
        RESHARD_GPU(cudaEventRecord(inner.ev[2 * j + 1], st.a));
      }
      RESHARD_GPU(cudaEventRecord(ev.ev[1], st.a));
      gate.Release();
      RESHARD_GPU(cudaEventSynchronize(ev.ev[1]));
      float ms = 0;
      RESHARD_GPU(cudaEventElapsedTime(&ms, ev.ev[0], ev.ev[1]));
      if (r >= 0) s.seconds.push_back(static_cast<double>(ms) * 1e-3 / static_cast<double>(k));
    }
    m.copies.push_back(std::move(s));
  }
  if (o.progress) {
    for (const CopyKernelSample& s : m.copies)
      if ((s.pattern == kPatternPack || s.pattern == kPatternContiguous || s.pattern == kPatternSize) &&
          (s.sm_share == 1.0 || s.sm_share == 0.5))
        o.progress(fmt::format("copy_kernel: {} runs of {} share {} ({} blocks): {:.0f} GB/s", s.pattern,
                               SizeName(s.run_bytes), s.sm_share, s.blocks,
                               static_cast<double>(s.bytes) / MedianOf(s.seconds) / 1e9));
  }
}

// ---- quantize kernel ----------------------------------------------------------

// The fp8 quantize kernel (gpu::LaunchQuantize, as the backend launches a
// quantize tile: gpu::kQuantizeCtasPerSm CTAs per SM) on bf16 matrices of 4096 columns, 1 MiB,
// 2 MiB ... 1 GiB of input, filled with the pattern validate fills quantized tensors
// with, for each block shape it runs differently: 128 x 128 blocks with fp32
// scales, MXFP8's 1 x 32 blocks with E8M0 scales, and one fp32 scale for the
// launch's whole matrix. As the copy kernel: launches queued behind a held
// stream between two events, L2 flushed before each repetition.
void MeasureQuantizeKernel(const HostCalibrateOptions& o, int32_t sms, HostMeasurements& m) {
  constexpr int64_t kCols = 4096;
  const int64_t max_bytes = o.quantize_max_bytes;
  // Scales: at most one byte per 32 elements (MXFP8) or 4 per 128 x 128.
  Device in(max_bytes), out(max_bytes / 2), sc(max_bytes / 64 + 4096);
  int l2_bytes = 0;
  RESHARD_GPU(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
  const int64_t flush_bytes = std::max<int64_t>(2 * int64_t{l2_bytes}, int64_t{1} << 20);
  Device flush(flush_bytes);
  PieceMap fill;
  fill.tensor = 7;
  fill.elem_bytes = 2;
  fill.finite_bf16 = 1;
  fill.extent[2] = max_bytes / 2;
  fill.global_stride[2] = fill.local_stride[2] = 1;
  Streams st;
  RESHARD_GPU(gpu::LaunchFill(in.bytes(), fill, st.a, sms * 8));
  Events ev(2);
  Gate gate;
  const int32_t warmup = o.quick ? 1 : 2;
  const int32_t reps = o.quick ? 4 : 9;
  struct Blocks {
    const char* pattern;
    const char* name;
    int32_t scale_format, scale_bytes;
  };
  for (const Blocks& b : {Blocks{kPatternQuantize, "128 x 128", 0, 4}, Blocks{kPatternQuantizeMx, "1 x 32", 2, 1},
                          Blocks{kPatternQuantizeTensor, "per matrix", 0, 4}}) {
    // Every power of two: a launch's rate is not smooth in its size (the grid
    // of 16 CTAs per SM, 2112 on an H200, gives each CTA one 128 x 128 block
    // of a 64 MiB launch but one or two of a 112 MiB one), and the simulator
    // interpolates between neighbours.
    for (int64_t bytes = kMiB; bytes <= max_bytes; bytes *= 2) {
      QuantizeJob j;
      j.rows = bytes / (2 * kCols);
      j.cols = kCols;
      j.block_rows = b.pattern == kPatternQuantize ? 128 : b.pattern == kPatternQuantizeMx ? 1 : j.rows;
      j.block_cols = b.pattern == kPatternQuantize ? 128 : b.pattern == kPatternQuantizeMx ? 32 : kCols;
      j.scale_format = b.scale_format;
      j.scale_bytes = b.scale_bytes;
      j.in_row = 2 * kCols;
      j.out_row = kCols;
      j.sc_row = b.scale_bytes * j.BlockCols();
      // Each launch on bytes of its own, as a refit's tiles are; scale slots 4-byte aligned.
      const int64_t sc_stride = (j.BlockRows() * j.sc_row + 3) / 4 * 4;
      const int64_t k = std::clamp<int64_t>(max_bytes / bytes, 1, 16);  // launches per repetition
      CopyKernelSample s;
      s.pattern = b.pattern;
      s.run_bytes = bytes;
      s.bytes = bytes;
      s.blocks = sms * gpu::kQuantizeCtasPerSm;
      s.seconds = TimeQueued(st, gate, ev, flush, flush_bytes, warmup, reps, k, [&](int64_t q) {
        j.in_offset = q * bytes;
        j.out_offset = q * bytes / 2;
        j.sc_offset = q * sc_stride;
        RESHARD_GPU(gpu::LaunchQuantize(j, in.bytes(), out.bytes(), sc.bytes(), st.a, s.blocks));
      });
      if (o.progress)
        o.progress(fmt::format("quantize_kernel: {} blocks, {} of bf16 per launch: {:.0f} GB/s of input", b.name,
                               SizeName(bytes), static_cast<double>(bytes) / MedianOf(s.seconds) / 1e9));
      m.copies.push_back(std::move(s));
    }
  }
}

// ---- cold terms --------------------------------------------------------------

std::vector<int64_t> ColdSizes(int64_t max_bytes) {
  std::vector<int64_t> out;
  for (int64_t b : {kGiB, 4 * kGiB, 16 * kGiB, 64 * kGiB})
    if (b <= max_bytes) out.push_back(b);
  if (out.empty() || out.back() != max_bytes) out.push_back(max_bytes);
  return out;
}

void MeasureCold(const HostCalibrateOptions& o, HostMeasurements& m) {
  const std::vector<int64_t> sizes = ColdSizes(o.pin_max_bytes);
  auto seconds = [](Clock::time_point a, Clock::time_point b) { return NsBetween(a, b) * 1e-9; };
  auto note = [&](const ColdSample& c) {
    m.cold.push_back(c);
    if (o.progress)
      o.progress(fmt::format("cold: {} {}: {:.3f} s, {:.2f} GB/s", c.what, SizeName(c.bytes), c.seconds,
                             static_cast<double>(c.bytes) / c.seconds / 1e9));
  };
  // Pinning: cudaHostAlloc with the executor's flags (pages allocated and
  // pinned), then cudaHostRegister of memory already touched (pinning alone).
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t b = sizes[i];
    for (int32_t rep = 0; rep < (i == 0 ? 2 : 1); ++rep) {
      void* p = nullptr;
      const auto t0 = Clock::now();
      RESHARD_GPU(cudaHostAlloc(&p, static_cast<size_t>(b), cudaHostAllocPortable | cudaHostAllocMapped));
      const auto t1 = Clock::now();
      RESHARD_GPU(cudaFreeHost(p));
      note({kColdHostAlloc, b, seconds(t0, t1)});
    }
  }
  for (int64_t b : sizes) {
    const int64_t rounded = (b + 2 * kMiB - 1) / (2 * kMiB) * (2 * kMiB);  // aligned_alloc wants a multiple
    void* p = std::aligned_alloc(2 * kMiB, static_cast<size_t>(rounded));
    if (p == nullptr) throw GpuError(fmt::format("aligned_alloc of {} failed", SizeName(b)));
    std::memset(p, 1, static_cast<size_t>(b));
    const auto t0 = Clock::now();
    const cudaError_t e = cudaHostRegister(p, static_cast<size_t>(b), cudaHostRegisterPortable | cudaHostRegisterMapped);
    const auto t1 = Clock::now();
    if (e == cudaSuccess) (void)cudaHostUnregister(p);
    std::free(p);
    RESHARD_GPU(e);
    note({kColdHostRegister, b, seconds(t0, t1)});
  }
  // Mapping: a fresh pool (as a job's first refit finds the executor's pool
  // empty) grown by one allocation, then the same size again from it.
  for (int64_t b : sizes) {
    size_t free_b = 0, total_b = 0;
    RESHARD_GPU(cudaMemGetInfo(&free_b, &total_b));
    if (static_cast<int64_t>(free_b) < b + kGiB) {
      if (o.progress) o.progress(fmt::format("cold: pool_grow {} skipped ({} free)", SizeName(b), SizeName(free_b)));
      continue;
    }
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t pool = nullptr;
    RESHARD_GPU(cudaMemPoolCreate(&pool, &props));
    uint64_t keep = UINT64_MAX;
    RESHARD_GPU(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    Streams st;
    void* p = nullptr;
    auto t0 = Clock::now();
    RESHARD_GPU(cudaMallocFromPoolAsync(&p, static_cast<size_t>(b), pool, st.a));
    RESHARD_GPU(cudaStreamSynchronize(st.a));
    auto t1 = Clock::now();
    note({kColdPoolGrow, b, seconds(t0, t1)});
    RESHARD_GPU(cudaFreeAsync(p, st.a));
    RESHARD_GPU(cudaStreamSynchronize(st.a));
    t0 = Clock::now();
    RESHARD_GPU(cudaMallocFromPoolAsync(&p, static_cast<size_t>(b), pool, st.a));
    RESHARD_GPU(cudaStreamSynchronize(st.a));
    t1 = Clock::now();
    note({kColdPoolWarm, b, seconds(t0, t1)});
    RESHARD_GPU(cudaFreeAsync(p, st.a));
    RESHARD_GPU(cudaStreamSynchronize(st.a));
    RESHARD_GPU(cudaMemPoolDestroy(pool));
  }
}

}  // namespace

HostMeasurements MeasureHost(const HostCalibrateOptions& o) {
  if (o.calls < 256) throw InputError("<cli>", "--host-calls", fmt::format("must be at least 256, got {}", o.calls));
  if (o.copy_bytes < 2 * kMiB || o.copy_bytes % kMiB != 0)
    throw InputError("<cli>", "--copy-bytes", fmt::format("must be a whole number of MiB >= 2 MiB, got {}", o.copy_bytes));
  if (o.pin_max_bytes < kMiB)
    throw InputError("<cli>", "--pin-max-bytes", fmt::format("must be at least 1 MiB, got {}", o.pin_max_bytes));
  (void)VisibleGpus();
  RESHARD_GPU(cudaSetDevice(0));
  RESHARD_GPU(cudaFree(nullptr));
  cudaDeviceProp prop{};
  RESHARD_GPU(cudaGetDeviceProperties(&prop, 0));
  HostMeasurements m;
  m.sms = prop.multiProcessorCount;
  m.copy_blocks_per_sm = o.copy_blocks_per_sm;
  const ToolVersions v = ReadToolVersions();
  const std::string date = UtcNow();
  m.source = fmt::format("reshard calibrate {} on {}: one {} ({} SMs), NCCL {}, CUDA runtime {}, driver {}", date,
                         v.host, prop.name, m.sms, v.nccl, v.cuda_runtime, v.cuda_driver);
  m.environment = {{"host", v.host},
                   {"date_utc", date},
                   {"gpu_name", prop.name},
                   {"sms", std::to_string(m.sms)},
                   {"copy_blocks_per_sm", std::to_string(o.copy_blocks_per_sm)},
                   {"nccl_version", v.nccl},
                   {"cuda_runtime", v.cuda_runtime},
                   {"cuda_driver", v.cuda_driver},
                   {"quick", o.quick ? "true" : "false"}};
  size_t free_b = 0, total_b = 0;
  RESHARD_GPU(cudaMemGetInfo(&free_b, &total_b));
  if (o.quantize_kernel && static_cast<int64_t>(free_b) < 2 * o.quantize_max_bytes + kGiB)
    throw InputError("<cli>", "--quantize-bytes",
                     fmt::format("GPU 0 has {} free, the quantize measurement needs 2 x its largest size + 1 GiB",
                                 SizeName(free_b)));
  if (o.copy_kernel && static_cast<int64_t>(free_b) < 4 * o.copy_bytes + kGiB)
    throw InputError("<cli>", "--copy-bytes",
                     fmt::format("GPU 0 has {} free, the copy measurement needs 4 x --copy-bytes + 1 GiB",
                                 SizeName(free_b)));
  RESHARD_GPU(gpu::WarmKernels(nullptr));  // module loading is no launch cost
  RESHARD_GPU(cudaDeviceSynchronize());
  if (o.host) {
    MeasureCalls(o, m.sms, m);
    for (bool nonblocking : {true, false}) {
      m.nccl_groups.push_back(MeasureNcclGroups(o, nonblocking));
      if (o.progress) {
        const NcclGroupSeries& g = m.nccl_groups.back();
        std::vector<double> at_max_enq, at_max_end;
        for (const NcclGroupSample& s : g.samples)
          if (s.ops == 1024) at_max_enq.push_back(s.enqueue_ns), at_max_end.push_back(s.end_ns);
        o.progress(fmt::format("host: NCCL group of 512 pairs ({}): {:.0f} us to enqueue, {:.0f} us in GroupEnd",
                               nonblocking ? "non-blocking" : "blocking", MedianOf(at_max_enq) * 1e-3,
                               MedianOf(at_max_end) * 1e-3));
      }
    }
  }
  if (o.copy_kernel) MeasureCopyKernel(o, m.sms, m);
  if (o.quantize_kernel) MeasureQuantizeKernel(o, m.sms, m);
  if (o.cold) MeasureCold(o, m);
  RESHARD_GPU(cudaDeviceSynchronize());
  return m;
}

}  // namespace reshard
