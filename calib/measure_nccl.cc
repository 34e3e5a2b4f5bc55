// The GPU side of `reshard calibrate` (see measure_nccl.h): timed NCCL
// send/recv, host<->device and device copies, and memory probes.
#include "calib/measure_nccl.h"

#include "calib/measure_common.h"
#include "calib/measure_gpu.h"

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <thread>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "executor/nccl/backend.h"  // ApplyNcclEnvDefaults
#include "executor/nccl/gpu_check.h"
#include "executor/nccl/gpu_error.h"
#include "model/error.h"

namespace reshard {

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// ---- resources, released in reverse order; cleanup errors are ignored -------

struct PinnedBuffer {
  void* ptr = nullptr;
  explicit PinnedBuffer(int64_t bytes) {
    RESHARD_GPU(cudaHostAlloc(&ptr, static_cast<size_t>(bytes), cudaHostAllocDefault));
    std::memset(ptr, 0x3c, static_cast<size_t>(bytes));
  }
  ~PinnedBuffer() {
    if (ptr != nullptr) (void)cudaFreeHost(ptr);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
};

struct Comms {
  std::vector<ncclComm_t> comms;
  ~Comms() {
    for (ncclComm_t c : comms)
      if (c != nullptr) (void)ncclCommDestroy(c);
  }
};

// ---- timing ------------------------------------------------------------------

struct SizePlan {
  std::vector<int64_t> sizes;
  int32_t warmup = 2;
  int32_t Repetitions(int64_t bytes, bool quick) const {
    if (quick) return bytes <= 16 * kMiB ? 7 : 4;
    if (bytes <= kMiB) return 21;
    return bytes <= 64 * kMiB ? 11 : 5;
  }
};

// Whole nanoseconds: finer than either clock resolves, and short in JSON.
double RoundNs(double seconds) { return std::round(seconds * 1e9) * 1e-9; }

// The sweep: one untimed pass over every size (the first size of a series
// otherwise pays for first-use setup: NCCL protocols, clocks), then per size
// `warmup` untimed and Repetitions() timed runs of `once`, which returns seconds.
std::vector<LinkSample> Sweep(const SizePlan& plan, bool quick, const std::function<double(int64_t)>& once) {
  for (int64_t bytes : plan.sizes) (void)once(bytes);
  std::vector<LinkSample> out;
  for (int64_t bytes : plan.sizes) {
    const int32_t reps = plan.Repetitions(bytes, quick);
    for (int32_t r = 0; r < plan.warmup + reps; ++r) {
      const double seconds = once(bytes);
      if (r >= plan.warmup) out.push_back({bytes, seconds});
    }
  }
  return out;
}

// CUDA-event timing of `issue` (which enqueues work on the streams): the
// longest start -> end interval over the streams, each idle at its start.
// `prepare` (optional) enqueues untimed work before the start events.
std::vector<LinkSample> TimeWithEvents(const std::vector<TimedStream*>& streams, const SizePlan& plan, bool quick,
                                       const std::function<void(int64_t)>& issue,
                                       const std::function<void()>& prepare = {}) {
  return Sweep(plan, quick, [&](int64_t bytes) {
    for (TimedStream* s : streams) {
      RESHARD_GPU(cudaSetDevice(s->device));
      RESHARD_GPU(cudaStreamSynchronize(s->stream));
    }
    if (prepare) prepare();
    for (TimedStream* s : streams) {
      RESHARD_GPU(cudaSetDevice(s->device));
      RESHARD_GPU(cudaEventRecord(s->start, s->stream));
    }
    issue(bytes);
    for (TimedStream* s : streams) {
      RESHARD_GPU(cudaSetDevice(s->device));
      RESHARD_GPU(cudaEventRecord(s->end, s->stream));
    }
    float longest_ms = 0;
    for (TimedStream* s : streams) {
      RESHARD_GPU(cudaSetDevice(s->device));
      RESHARD_GPU(cudaEventSynchronize(s->end));
      float ms = 0;
      RESHARD_GPU(cudaEventElapsedTime(&ms, s->start, s->end));
      longest_ms = std::max(longest_ms, ms);
    }
    return RoundNs(static_cast<double>(longest_ms) * 1e-3);
  });
}

// Host-clock timing for copies that block the calling thread (pageable host
// memory): each of `jobs` runs on its own thread; the threads are released
// together and a sample lasts from the release to the last one's end.
std::vector<LinkSample> TimeWithHostClock(const SizePlan& plan, bool quick,
                                          const std::vector<std::function<void(int64_t)>>& jobs) {
  using Clock = std::chrono::steady_clock;
  return Sweep(plan, quick, [&](int64_t bytes) {
    const size_t n = jobs.size();
    std::vector<Clock::time_point> begin(n), end(n);
    std::vector<std::string> errors(n);
    std::barrier sync(static_cast<std::ptrdiff_t>(n));
    std::vector<std::thread> threads;
    for (size_t j = 0; j < n; ++j) {
      threads.emplace_back([&, j] {
        sync.arrive_and_wait();
        begin[j] = Clock::now();
        try {
          jobs[j](bytes);
        } catch (const std::exception& e) {
          errors[j] = e.what();
        }
        end[j] = Clock::now();
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors)
      if (!e.empty()) throw GpuError(e);
    const auto first = *std::min_element(begin.begin(), begin.end());
    const auto last = *std::max_element(end.begin(), end.end());
    return RoundNs(std::chrono::duration<double>(last - first).count());
  });
}

std::string Summary(const MeasuredSeries& s) {
  const LinkSample& last = s.samples.back();
  std::vector<double> at_max;
  for (const LinkSample& x : s.samples)
    if (x.bytes == last.bytes) at_max.push_back(x.seconds);
  std::sort(at_max.begin(), at_max.end());
  const double median = at_max[at_max.size() / 2];
  return fmt::format("{} {}: {} samples, {:.1f} GB/s at {}", s.link, s.mode, s.samples.size(),
                     static_cast<double>(last.bytes) / median / 1e9, SizeName(last.bytes));
}

struct MemInfo {
  int64_t free = 0, total = 0;
};
MemInfo GetMemInfo(int device) {
  RESHARD_GPU(cudaSetDevice(device));
  size_t free_b = 0, total_b = 0;
  RESHARD_GPU(cudaMemGetInfo(&free_b, &total_b));
  return {static_cast<int64_t>(free_b), static_cast<int64_t>(total_b)};
}

std::string Version(int v) { return fmt::format("{}.{}", v / 1000, (v % 1000) / 10); }

}  // namespace

std::string SizeName(int64_t b) {
  if (b >= (int64_t{1} << 30) && b % (int64_t{1} << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= kMiB && b % kMiB == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= 1024 && b % 1024 == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} B", b);
}

std::string UtcNow() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

ToolVersions ReadToolVersions() {
  int runtime = 0, driver = 0, nccl = 0;
  RESHARD_GPU(cudaRuntimeGetVersion(&runtime));
  RESHARD_GPU(cudaDriverGetVersion(&driver));
  RESHARD_GPU(ncclGetVersion(&nccl));
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) std::strcpy(host, "unknown");
  return {host, fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100), Version(runtime),
          Version(driver)};
}

int VisibleGpus() {
  ApplyNcclEnvDefaults();  // the settings runs use, so the profile describes them
  int n = 0;
  const cudaError_t count = cudaGetDeviceCount(&n);
  if (count != cudaSuccess || n == 0)
    throw CalibrationUnavailable(fmt::format(
        "no CUDA GPU to calibrate: cudaGetDeviceCount {}; run `reshard calibrate` on the GPU host (check the "
        "driver and CUDA_VISIBLE_DEVICES)",
        count != cudaSuccess ? DescribeGpuStatus(count) : "found 0 devices"));
  return n;
}

CalibrationData MeasureNccl(const CalibrateOptions& o) {
  if (o.min_bytes <= 0) throw InputError("<cli>", "--min-bytes", "must be > 0");
  const int64_t factor = o.quick ? 4 : 2;
  if (o.max_bytes < o.min_bytes * factor)
    throw InputError("<cli>", "--max-bytes",
                     fmt::format("must be at least {} (two sizes from {}), got {}", o.min_bytes * factor,
                                 SizeName(o.min_bytes), o.max_bytes));
  SizePlan plan;
  plan.warmup = o.quick ? 1 : 2;
  for (int64_t b = o.min_bytes; b <= o.max_bytes; b *= factor) plan.sizes.push_back(b);
  if (plan.sizes.back() != o.max_bytes) plan.sizes.push_back(o.max_bytes);
  const int64_t max_bytes = o.max_bytes;
  auto progress = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };

  const int n = VisibleGpus();

  CalibrationData d;
  // Memory probe, step 1: each device's context, before anything is allocated.
  for (int g = 0; g < n; ++g) {
    RESHARD_GPU(cudaSetDevice(g));
    RESHARD_GPU(cudaFree(nullptr));
    const MemInfo m = GetMemInfo(g);
    cudaDeviceProp prop{};
    RESHARD_GPU(cudaGetDeviceProperties(&prop, g));
    DeviceMemoryProbe p;
    p.gpu = g;
    p.name = prop.name;
    p.total_bytes = m.total;
    p.free_after_context_bytes = m.free;
    d.memory.push_back(p);
    // Two test buffers of max_bytes, plus room for NCCL and the copy staging.
    const int64_t need = 2 * max_bytes + 1024 * kMiB;
    if (m.free < need)
      throw InputError("<cli>", "--max-bytes",
                       fmt::format("GPU {} has {} MiB free, the measurement needs about {} MiB (2 x --max-bytes + "
                                   "1 GiB); lower --max-bytes",
                                   g, m.free / kMiB, need / kMiB));
  }

  const ToolVersions v = ReadToolVersions();
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  d.name = fmt::format("{}x {}", n, d.memory.front().name);
  d.source = fmt::format("reshard calibrate {} on {}: {} GPU(s) {}, NCCL {}, CUDA runtime {}, driver {}", UtcNow(),
                         v.host, n, d.memory.front().name, v.nccl, v.cuda_runtime, v.cuda_driver);
  d.environment = {{"host", v.host},
                   {"date_utc", UtcNow()},
                   {"gpus", std::to_string(n)},
                   {"gpu_name", d.memory.front().name},
                   {"nccl_version", v.nccl},
                   {"nccl_header_version", fmt::format("{}.{}.{}", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)},
                   {"cuda_runtime", v.cuda_runtime},
                   {"cuda_driver", v.cuda_driver},
                   {"NCCL_NVLS_ENABLE", nvls != nullptr ? nvls : ""},
                   {"NCCL_P2P_NVL_CHUNKSIZE", std::getenv("NCCL_P2P_NVL_CHUNKSIZE") != nullptr ? std::getenv("NCCL_P2P_NVL_CHUNKSIZE") : ""},
                   {"sizes", fmt::format("{} .. {}, x{} steps", SizeName(plan.sizes.front()),
                                         SizeName(plan.sizes.back()), factor)},
                   {"quick", o.quick ? "true" : "false"}};
  if (n >= 2) {
    int access = 0;
    RESHARD_GPU(cudaDeviceCanAccessPeer(&access, 0, 1));
    d.environment.push_back({"p2p_access_0_1", access != 0 ? "true" : "false"});
  }

  // Test buffers: a source and a destination on every GPU; two streams each.
  std::vector<std::unique_ptr<DeviceBuffer>> src, dst;
  std::vector<std::unique_ptr<TimedStream>> stream_a, stream_b;
  for (int g = 0; g < n; ++g) {
    src.push_back(std::make_unique<DeviceBuffer>(g, max_bytes));
    dst.push_back(std::make_unique<DeviceBuffer>(g, max_bytes));
    stream_a.push_back(std::make_unique<TimedStream>(g));
    stream_b.push_back(std::make_unique<TimedStream>(g));
  }
  for (int g = 0; g < n; ++g) {
    RESHARD_GPU(cudaSetDevice(g));
    RESHARD_GPU(cudaDeviceSynchronize());
    d.memory[g].free_before_nccl_bytes = GetMemInfo(g).free;
  }

  // NVLink: NCCL send/recv between GPU 0 and 1. Memory probe steps 2-3 first.
  Comms comms;
  if (n >= 2) {
    comms.comms.assign(n, nullptr);
    std::vector<int> devs(n);
    for (int g = 0; g < n; ++g) devs[g] = g;
    RESHARD_GPU(ncclCommInitAll(comms.comms.data(), n, devs.data()));
    for (int g = 0; g < n; ++g) {
      RESHARD_GPU(cudaSetDevice(g));
      RESHARD_GPU(cudaDeviceSynchronize());
      d.memory[g].free_after_nccl_init_bytes = GetMemInfo(g).free;
    }
    // A first transfer each way with every peer connects all of them (NCCL
    // connects peers lazily); max_bytes so every p2p channel is set up.
    for (int a = 0; a < n; ++a) {
      for (int b = a + 1; b < n; ++b) {
        RESHARD_GPU(ncclGroupStart());
        RESHARD_GPU(ncclSend(src[a]->ptr, static_cast<size_t>(max_bytes), ncclUint8, b, comms.comms[a], stream_a[a]->stream));
        RESHARD_GPU(ncclRecv(dst[b]->ptr, static_cast<size_t>(max_bytes), ncclUint8, a, comms.comms[b], stream_a[b]->stream));
        RESHARD_GPU(ncclSend(src[b]->ptr, static_cast<size_t>(max_bytes), ncclUint8, a, comms.comms[b], stream_a[b]->stream));
        RESHARD_GPU(ncclRecv(dst[a]->ptr, static_cast<size_t>(max_bytes), ncclUint8, b, comms.comms[a], stream_a[a]->stream));
        RESHARD_GPU(ncclGroupEnd());
        for (int g : {a, b}) {
          RESHARD_GPU(cudaSetDevice(g));
          RESHARD_GPU(cudaStreamSynchronize(stream_a[g]->stream));
        }
      }
    }
    for (int g = 0; g < n; ++g) {
      RESHARD_GPU(cudaSetDevice(g));
      RESHARD_GPU(cudaDeviceSynchronize());
      d.memory[g].free_after_first_transfer_bytes = GetMemInfo(g).free;
    }
    d.nccl_peers = n - 1;
    const DeviceMemoryProbe& m0 = d.memory[0];
    progress(fmt::format("memory (GPU 0): context {} MiB, NCCL communicator {} MiB, first transfers {} MiB per peer",
                         (m0.total_bytes - m0.free_after_context_bytes) / kMiB,
                         (m0.free_before_nccl_bytes - m0.free_after_nccl_init_bytes) / kMiB,
                         (m0.free_after_nccl_init_bytes - m0.free_after_first_transfer_bytes) / kMiB / (n - 1)));

    const std::vector<TimedStream*> pair = {stream_a[0].get(), stream_a[1].get()};
    for (bool both : {false, true}) {
      MeasuredSeries s{"nvlink", both ? "both_ways" : "one_way", "ncclSend/ncclRecv (one group)", "cuda_events",
                       {0, 1}, {}};
      s.samples = TimeWithEvents(pair, plan, o.quick, [&](int64_t bytes) {
        const auto elems = static_cast<size_t>(bytes);
        RESHARD_GPU(ncclGroupStart());
        RESHARD_GPU(ncclSend(src[0]->ptr, elems, ncclUint8, 1, comms.comms[0], stream_a[0]->stream));
        RESHARD_GPU(ncclRecv(dst[1]->ptr, elems, ncclUint8, 0, comms.comms[1], stream_a[1]->stream));
        if (both) {
          RESHARD_GPU(ncclSend(src[1]->ptr, elems, ncclUint8, 0, comms.comms[1], stream_a[1]->stream));
          RESHARD_GPU(ncclRecv(dst[0]->ptr, elems, ncclUint8, 1, comms.comms[0], stream_a[0]->stream));
        }
        RESHARD_GPU(ncclGroupEnd());
      });
      progress(Summary(s));
      d.series.push_back(std::move(s));
    }
  } else {
    progress("nvlink: skipped (one GPU visible)");
  }
  progress("network: not measured (one process on one host)");

  // Device copies on GPU 0, each after an untimed write of twice the L2's
  // size: a refit copies every byte once, from HBM. Repeated on the same
  // buffers, copies up to ~16 MiB ran partly from the H200's 50 MB L2 (2.14
  // TB/s at 16 MiB against 2.03-2.12 from 128 MiB to 1 GiB) and the fitted
  // peak, hence the device-copy bound, was the L2's.
  {
    TimedStream& s0 = *stream_a[0];
    MeasuredSeries s{"device_copy", "one_way", "cudaMemcpyAsync device-to-device, L2 flushed before each",
                     "cuda_events", {0}, {}};
    RESHARD_GPU(cudaSetDevice(0));
    int l2_bytes = 0;
    RESHARD_GPU(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, 0));
    const int64_t flush_bytes = std::max<int64_t>(2 * int64_t{l2_bytes}, int64_t{1} << 20);
    DeviceBuffer flush(0, flush_bytes);
    s.samples = TimeWithEvents(
        {&s0}, plan, o.quick,
        [&](int64_t bytes) {
          RESHARD_GPU(cudaSetDevice(0));
          RESHARD_GPU(cudaMemcpyAsync(dst[0]->ptr, src[0]->ptr, static_cast<size_t>(bytes),
                                      cudaMemcpyDeviceToDevice, s0.stream));
        },
        [&] {
          RESHARD_GPU(cudaSetDevice(0));
          RESHARD_GPU(cudaMemsetAsync(flush.ptr, 0, static_cast<size_t>(flush_bytes), s0.stream));
        });
    progress(Summary(s));
    d.series.push_back(std::move(s));
  }

  // Pinned host <-> device on every GPU at once (a refit offloads from all
  // of them together; on 2x H200 one GPU alone moved 55.4 GB/s, two at once
  // 52-53 GB/s each): h2d into dst, d2h from src, on two streams per GPU.
  // A sample is the slowest GPU's time, so the fitted rate is per GPU under
  // that contention.
  {
    std::vector<std::unique_ptr<PinnedBuffer>> host_src, host_dst;
    std::vector<TimedStream*> h2d, d2h;
    std::vector<int32_t> all;
    for (int g = 0; g < n; ++g) {
      RESHARD_GPU(cudaSetDevice(g));
      host_src.push_back(std::make_unique<PinnedBuffer>(max_bytes));
      host_dst.push_back(std::make_unique<PinnedBuffer>(max_bytes));
      h2d.push_back(stream_a[g].get());
      d2h.push_back(stream_b[g].get());
      all.push_back(g);
    }
    auto issue_h2d = [&](int64_t bytes) {
      for (int g = 0; g < n; ++g) {
        RESHARD_GPU(cudaSetDevice(g));
        RESHARD_GPU(cudaMemcpyAsync(dst[g]->ptr, host_src[g]->ptr, static_cast<size_t>(bytes),
                                    cudaMemcpyHostToDevice, h2d[g]->stream));
      }
    };
    auto issue_d2h = [&](int64_t bytes) {
      for (int g = 0; g < n; ++g) {
        RESHARD_GPU(cudaSetDevice(g));
        RESHARD_GPU(cudaMemcpyAsync(host_dst[g]->ptr, src[g]->ptr, static_cast<size_t>(bytes),
                                    cudaMemcpyDeviceToHost, d2h[g]->stream));
      }
    };
    std::vector<TimedStream*> both = h2d;
    both.insert(both.end(), d2h.begin(), d2h.end());
    for (const char* mode : {"h2d", "d2h", "both_ways"}) {
      const std::string m = mode;
      MeasuredSeries s{"pcie", m, "cudaMemcpyAsync, pinned host memory, every GPU at once", "cuda_events", all, {}};
      if (m == "h2d") s.samples = TimeWithEvents(h2d, plan, o.quick, issue_h2d);
      if (m == "d2h") s.samples = TimeWithEvents(d2h, plan, o.quick, issue_d2h);
      if (m == "both_ways")
        s.samples = TimeWithEvents(both, plan, o.quick, [&](int64_t bytes) {
          issue_h2d(bytes);
          issue_d2h(bytes);
        });
      progress(Summary(s));
      d.series.push_back(std::move(s));
    }
  }

  // Pageable host <-> device on GPU 0 (host clock: these copies block).
  {
    std::unique_ptr<char[]> host_src(new char[static_cast<size_t>(max_bytes)]);
    std::unique_ptr<char[]> host_dst(new char[static_cast<size_t>(max_bytes)]);
    std::memset(host_src.get(), 0x3c, static_cast<size_t>(max_bytes));  // touch every page before timing
    std::memset(host_dst.get(), 0x00, static_cast<size_t>(max_bytes));
    cudaStream_t h2d = stream_a[0]->stream, d2h = stream_b[0]->stream;
    auto job_h2d = [&](int64_t bytes) {
      RESHARD_GPU(cudaSetDevice(0));
      RESHARD_GPU(
          cudaMemcpyAsync(dst[0]->ptr, host_src.get(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice, h2d));
      RESHARD_GPU(cudaStreamSynchronize(h2d));
    };
    auto job_d2h = [&](int64_t bytes) {
      RESHARD_GPU(cudaSetDevice(0));
      RESHARD_GPU(
          cudaMemcpyAsync(host_dst.get(), src[0]->ptr, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, d2h));
      RESHARD_GPU(cudaStreamSynchronize(d2h));
    };
    for (const char* mode : {"h2d", "d2h", "both_ways"}) {
      const std::string m = mode;
      MeasuredSeries s{"pcie_pageable", m, "cudaMemcpyAsync + cudaStreamSynchronize, pageable host memory",
                       "host_clock", {0}, {}};
      if (m == "h2d") s.samples = TimeWithHostClock(plan, o.quick, {job_h2d});
      if (m == "d2h") s.samples = TimeWithHostClock(plan, o.quick, {job_d2h});
      if (m == "both_ways") s.samples = TimeWithHostClock(plan, o.quick, {job_h2d, job_d2h});
      progress(Summary(s));
      d.series.push_back(std::move(s));
    }
  }

  for (int g = 0; g < n; ++g) {
    RESHARD_GPU(cudaSetDevice(g));
    RESHARD_GPU(cudaDeviceSynchronize());
  }
  return d;
}

}  // namespace reshard
