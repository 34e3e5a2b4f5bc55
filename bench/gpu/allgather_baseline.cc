// allgather_baseline: the refit PyTorch RL stacks run, on real GPUs, measured the
// way reshard's executor is measured (issue 7, item 2(b)).
//
//   allgather_baseline [--scenario NAME|PATH] [--bucket 64MiB|256MiB|1GiB|per-tensor]
//                      [--flat] [--out-of-place] [--warmup N] [--runs N] [--out result.json]
//                      [--emulate] [--dry-run]
//
// One process drives every GPU of the host (ncclCommInitAll, one stream per GPU).
// Source shards (Megatron local buffers, exact sizes, reshard's model library) are
// filled on device with the pattern of executor/pattern.h; the destination weights
// (vLLM layout) are allocated on every GPU; the plan of allgather_plan.h runs
// pack -> ncclAllGather (or ncclBroadcast) -> unpack per bucket; every destination
// element is then checked on device. Reported: refit time (CUDA events on each GPU,
// the max over GPUs, median of --runs after --warmup), the extra peak device memory
// beyond source + destination weights (our own allocations counted exactly, NCCL's
// own measured with cudaMemGetInfo before communicator creation and after each step
// of the first warm-up), and whether every element verified.
//
// --flat sends the same bytes as one ncclSend/ncclRecv per GPU pair (DESIGN's
// ceiling); its time_s is the exchange alone, time_with_unpack_s adds the copies
// into the destination (staging -> weights) that make it verifiable.
// --emulate runs the plan in host memory instead (small models; no GPU needed);
// --dry-run prints the plan only.
//
// Exit codes: 0 verified; 2 bad input; 4 ran but a destination element is wrong;
// 1 anything else (CUDA / NCCL errors name the call, file and line).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/gpu/allgather_kernels.h"
#include "bench/gpu/allgather_plan.h"
#include "model/error.h"
#include "model/scenario.h"

namespace reshard::baseline {
namespace {

// The one boundary for foreign errors: the call, where, and the library's message.
void CudaOk(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}:{}: {} failed: {}", file, line, call, cudaGetErrorString(e)));
}
void NcclOk(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess)
    throw std::runtime_error(fmt::format("{}:{}: {} failed: {} ({})", file, line, call, ncclGetErrorString(r),
                                         ncclGetLastError(nullptr)));
}
#define CUDA_OK(x) ::reshard::baseline::CudaOk((x), #x, __FILE__, __LINE__)
#define NCCL_OK(x) ::reshard::baseline::NcclOk((x), #x, __FILE__, __LINE__)

constexpr int kVerifyExit = 4;

struct Options {
  std::string scenario = "llama3-8b-tp2-to-tp1x2";
  std::string bucket = "256MiB";
  bool flat = false;
  bool out_of_place = false;
  int warmup = 2;
  int runs = 7;
  std::string out;
  bool emulate = false;
  bool dry_run = false;
};

Scenario LoadAny(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(name, ec)) return LoadScenario(name);
  return BuiltinScenario(name);
}

BaselineOptions ParseBaseline(const Options& o) {
  BaselineOptions b;
  if (o.flat) {
    b.transport = Transport::kFlat;
  } else if (o.bucket == "per-tensor" || o.bucket == "per_tensor" || o.bucket == "tensor") {
    b.transport = Transport::kPerTensor;
  } else {
    b.transport = Transport::kBucketed;
    b.bucket_bytes = ParseBytes(o.bucket, "<cli>", "bucket");
    if (b.bucket_bytes <= 0) throw InputError("<cli>", "bucket", "must be positive");
  }
  b.out_of_place = o.out_of_place;
  return b;
}

std::string ModeLabel(const RefitPlan& p) {
  switch (p.options.transport) {
    case Transport::kFlat: return "flat";
    case Transport::kPerTensor: return "per-tensor";
    case Transport::kBucketed: {
      const int64_t b = p.options.bucket_bytes;
      std::string s = b % (int64_t{1} << 30) == 0 ? fmt::format("{}GiB", b >> 30)
                      : b % (int64_t{1} << 20) == 0 ? fmt::format("{}MiB", b >> 20)
                      : b % (int64_t{1} << 10) == 0 ? fmt::format("{}KiB", b >> 10)
                                                    : fmt::format("{}B", b);
      return s + (p.options.out_of_place ? "-oop" : "");
    }
  }
  return "?";
}

double Gib(int64_t b) { return static_cast<double>(b) / static_cast<double>(int64_t{1} << 30); }

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void PrintPlan(const RefitPlan& p) {
  int64_t largest_step = 0, pack_bytes = 0, unpack_bytes = 0, copies = 0;
  for (const Step& st : p.steps) {
    largest_step = std::max(largest_step, st.GatheredBytes(p.gpus));
    for (const auto& v : st.pack)
      for (const ByteCopy& c : v) pack_bytes += c.Bytes();
    for (const auto& v : st.unpack)
      for (const ByteCopy& c : v) unpack_bytes += c.Bytes(), ++copies;
  }
  fmt::print("plan: {} ({}, {}), {} GPUs, {} steps with {} collectives; {:.3f} GB moved per sending GPU\n",
             p.scenario, CollectiveName(p.collective), ModeLabel(p), p.gpus, p.steps.size(), p.Collectives(),
             static_cast<double>(p.moved_bytes) / 1e9);
  fmt::print("      largest bucket {:.3f} GiB; pack {:.3f} GB, unpack {:.3f} GB in {} strided copies (all GPUs)\n",
             Gib(largest_step), static_cast<double>(pack_bytes) / 1e9, static_cast<double>(unpack_bytes) / 1e9, copies);
  for (int32_t g = 0; g < p.gpus; ++g)
    fmt::print("      GPU {}: source {:.3f} GiB, destination {:.3f} GiB, bucket {:.3f} GiB, input {:.3f} GiB, "
               "staging {:.3f} GiB\n",
               g, Gib(p.ArenaBytes(g, Arena::kSource)), Gib(p.ArenaBytes(g, Arena::kDestination)),
               Gib(p.ArenaBytes(g, Arena::kBucket)), Gib(p.ArenaBytes(g, Arena::kInput)),
               Gib(p.ArenaBytes(g, Arena::kStaging)));
}

nlohmann::json PlanJson(const RefitPlan& p) {
  nlohmann::json j;
  j["program"] = "allgather_baseline";
  j["scenario"] = p.scenario;
  j["collective"] = CollectiveName(p.collective);
  j["mode"] = TransportName(p.options.transport);
  j["label"] = ModeLabel(p);
  j["bucket_bytes"] = p.options.transport == Transport::kBucketed ? nlohmann::json(p.options.bucket_bytes)
                                                                   : nlohmann::json(nullptr);
  j["in_place"] = p.options.transport == Transport::kBucketed && !p.options.out_of_place;
  j["gpus"] = p.gpus;
  j["steps"] = p.steps.size();
  j["collectives"] = p.Collectives();
  j["moved_bytes_per_gpu"] = p.moved_bytes;
  int64_t largest = 0;
  for (const Step& st : p.steps) largest = std::max(largest, st.GatheredBytes(p.gpus));
  j["largest_bucket_bytes"] = largest;
  std::vector<int64_t> src, dst;
  for (int32_t g = 0; g < p.gpus; ++g) {
    src.push_back(p.ArenaBytes(g, Arena::kSource));
    dst.push_back(p.ArenaBytes(g, Arena::kDestination));
  }
  j["source_bytes"] = src;
  j["destination_bytes"] = dst;
  return j;
}

void WriteJson(const std::string& path, const nlohmann::json& j) {
  if (path.empty()) return;
  std::ofstream f(path);
  if (!f) throw InputError("<cli>", "out", "cannot write " + path);
  f << j.dump(2) << "\n";
}

// ---- The GPU run ----------------------------------------------------------------

struct Launch {  // one batched copy kernel: descriptors [first, first + count) of a GPU
  int32_t first = 0, count = 0;
  int64_t chunks = 0;
};

struct Gpu {
  int id = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  std::array<unsigned char*, kArenas> arena{};
  DeviceCopy* descs = nullptr;
  CheckCounter* counters = nullptr;
  int64_t weights_bytes = 0;       // source + destination arenas
  int64_t extra_bytes = 0;         // our allocations that serve the refit (bucket, input, staging, descriptors)
  int64_t verification_bytes = 0;  // check counters (not part of a refit)
  size_t free_before_nccl = 0, min_free = SIZE_MAX, total = 0;
  std::vector<Launch> pack, unpack;  // per step
  int32_t max_blocks = 1;
};

class GpuRun {
 public:
  explicit GpuRun(const RefitPlan& p) : p_(p) {}
  ~GpuRun() {  // best effort: the first error was already reported
    // One thread owns every communicator: finalize them together (ncclCommFinalize
    // is collective), then destroy each.
    ncclGroupStart();
    for (Gpu& g : gpus_)
      if (g.comm) ncclCommFinalize(g.comm);
    ncclGroupEnd();
    for (Gpu& g : gpus_) {
      cudaSetDevice(g.id);
      if (g.comm) ncclCommDestroy(g.comm);
      for (unsigned char* a : g.arena) cudaFree(a);
      cudaFree(g.descs);
      cudaFree(g.counters);
      if (g.stream) cudaStreamDestroy(g.stream);
    }
  }

  nlohmann::json Run(int warmup, int runs, bool* verified);

 private:
  void* Malloc(Gpu& g, int64_t bytes, int64_t* account) {
    if (bytes <= 0) return nullptr;
    void* ptr = nullptr;
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(cudaMalloc(&ptr, static_cast<size_t>(bytes)));
    *account += bytes;
    return ptr;
  }
  void Setup();
  void Resolve(Gpu& g);
  void SampleFree();
  void EnqueueStep(size_t k, std::vector<cudaEvent_t>* phase);
  void Poison();
  void SyncAll();
  int64_t Verify(nlohmann::json* failures);

  const RefitPlan& p_;
  std::vector<Gpu> gpus_;
};

void GpuRun::Setup() {
  int n = 0;
  CUDA_OK(cudaGetDeviceCount(&n));
  if (n < p_.gpus)
    throw InputError("<cli>", "scenario", fmt::format("needs {} GPUs, this host shows {}", p_.gpus, n));
  gpus_.resize(static_cast<size_t>(p_.gpus));
  for (int32_t i = 0; i < p_.gpus; ++i) {
    Gpu& g = gpus_[static_cast<size_t>(i)];
    g.id = i;
    CUDA_OK(cudaSetDevice(i));
    CUDA_OK(cudaFree(nullptr));  // context
    CUDA_OK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i));
    g.max_blocks = sms * 8;
    for (int a = 0; a < kArenas; ++a) {
      const Arena arena = static_cast<Arena>(a);
      const bool weights = arena == Arena::kSource || arena == Arena::kDestination;
      g.arena[static_cast<size_t>(a)] = static_cast<unsigned char*>(
          Malloc(g, p_.ArenaBytes(i, arena), weights ? &g.weights_bytes : &g.extra_bytes));
    }
    Resolve(g);
    g.counters = static_cast<CheckCounter*>(
        Malloc(g, static_cast<int64_t>(std::max<size_t>(1, p_.check[static_cast<size_t>(i)].size()) * sizeof(CheckCounter)),
               &g.verification_bytes));
  }
  // Fill the sources, poison the destinations; load the copy kernel once (lazy module loading).
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    for (const PieceMap& m : p_.fill[static_cast<size_t>(g.id)])
      CUDA_OK(LaunchFill(g.arena[static_cast<size_t>(Arena::kSource)], m, g.max_blocks, g.stream));
    CUDA_OK(WarmCopyKernel(g.stream));
  }
  Poison();
  SyncAll();
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    size_t total = 0;
    CUDA_OK(cudaMemGetInfo(&g.free_before_nccl, &total));
    g.total = total;
  }
  std::vector<int> devs(static_cast<size_t>(p_.gpus));
  std::vector<ncclComm_t> comms(static_cast<size_t>(p_.gpus));
  for (int32_t i = 0; i < p_.gpus; ++i) devs[static_cast<size_t>(i)] = i;
  NCCL_OK(ncclCommInitAll(comms.data(), p_.gpus, devs.data()));
  for (int32_t i = 0; i < p_.gpus; ++i) gpus_[static_cast<size_t>(i)].comm = comms[static_cast<size_t>(i)];
  SampleFree();
}

// ByteCopies -> device descriptors with pointers, vector widths and chunk ranges.
void GpuRun::Resolve(Gpu& g) {
  std::vector<DeviceCopy> host;
  auto add = [&](const std::vector<ByteCopy>& copies) {
    Launch l;
    l.first = static_cast<int32_t>(host.size());
    for (const ByteCopy& c : copies) {
      host.push_back(MakeDeviceCopy(g.arena[static_cast<size_t>(c.src_arena)] + c.src_offset,
                                    g.arena[static_cast<size_t>(c.dst_arena)] + c.dst_offset, c.n0, c.n1, c.row_bytes,
                                    c.src_stride0, c.src_stride1, c.dst_stride0, c.dst_stride1, l.chunks));
      l.chunks = host.back().chunk_end;
    }
    l.count = static_cast<int32_t>(host.size()) - l.first;
    return l;
  };
  for (const Step& st : p_.steps) {
    g.pack.push_back(add(st.pack[static_cast<size_t>(g.id)]));
    g.unpack.push_back(add(st.unpack[static_cast<size_t>(g.id)]));
  }
  if (host.empty()) host.emplace_back();
  const int64_t bytes = static_cast<int64_t>(host.size() * sizeof(DeviceCopy));
  g.descs = static_cast<DeviceCopy*>(Malloc(g, bytes, &g.extra_bytes));
  CUDA_OK(cudaMemcpy(g.descs, host.data(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
}

void GpuRun::SampleFree() {
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    size_t free = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free, &total));
    g.min_free = std::min(g.min_free, free);
  }
}

void GpuRun::SyncAll() {
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(cudaStreamSynchronize(g.stream));
  }
}

void GpuRun::Poison() {
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    if (unsigned char* d = g.arena[static_cast<size_t>(Arena::kDestination)])
      CUDA_OK(cudaMemsetAsync(d, 0xA5, static_cast<size_t>(p_.ArenaBytes(g.id, Arena::kDestination)), g.stream));
  }
}

// phase (optional): 3 events per GPU are recorded: before the collective, after it, after the unpack.
void GpuRun::EnqueueStep(size_t k, std::vector<cudaEvent_t>* phase) {
  const Step& st = p_.steps[k];
  auto mark = [&](int which) {
    if (!phase) return;
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      CUDA_OK(cudaEventRecord((*phase)[static_cast<size_t>(g.id * 3 + which)], g.stream));
    }
  };
  for (Gpu& g : gpus_) {
    const Launch& l = g.pack[k];
    if (l.count == 0) continue;
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(LaunchCopies(g.descs + l.first, l.count, l.chunks, g.max_blocks, g.stream));
  }
  mark(0);
  if (st.kind == StepKind::kAllGather || st.kind == StepKind::kBroadcast) {
    NCCL_OK(ncclGroupStart());
    for (Gpu& g : gpus_) {
      unsigned char* bucket = g.arena[static_cast<size_t>(Arena::kBucket)];
      const unsigned char* send =
          g.arena[static_cast<size_t>(st.send_arena)] + st.send_offset[static_cast<size_t>(g.id)];
      const size_t count = static_cast<size_t>(st.send_bytes);
      if (st.kind == StepKind::kAllGather) {
        NCCL_OK(ncclAllGather(send, bucket, count, ncclInt8, g.comm, g.stream));
      } else {
        NCCL_OK(ncclBroadcast(g.id == st.root ? send : bucket, bucket, count, ncclInt8, st.root, g.comm, g.stream));
      }
    }
    NCCL_OK(ncclGroupEnd());
  } else if (st.kind == StepKind::kFlat) {
    NCCL_OK(ncclGroupStart());
    for (const FlatSend& f : st.sends) {
      Gpu& from = gpus_[static_cast<size_t>(f.from)];
      Gpu& to = gpus_[static_cast<size_t>(f.to)];
      NCCL_OK(ncclSend(from.arena[static_cast<size_t>(Arena::kSource)] + f.src_offset, static_cast<size_t>(f.bytes),
                       ncclInt8, f.to, from.comm, from.stream));
      NCCL_OK(ncclRecv(to.arena[static_cast<size_t>(Arena::kStaging)] + f.dst_offset, static_cast<size_t>(f.bytes),
                       ncclInt8, f.from, to.comm, to.stream));
    }
    NCCL_OK(ncclGroupEnd());
  }
  mark(1);
  for (Gpu& g : gpus_) {
    const Launch& l = g.unpack[k];
    if (l.count == 0) continue;
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(LaunchCopies(g.descs + l.first, l.count, l.chunks, g.max_blocks, g.stream));
  }
  mark(2);
}

int64_t GpuRun::Verify(nlohmann::json* failures) {
  int64_t bad = 0;
  for (Gpu& g : gpus_) {
    const auto& checks = p_.check[static_cast<size_t>(g.id)];
    if (checks.empty()) continue;
    CUDA_OK(cudaSetDevice(g.id));
    std::vector<CheckCounter> init(checks.size(), CheckCounter{0, ULLONG_MAX});
    CUDA_OK(cudaMemcpy(g.counters, init.data(), init.size() * sizeof(CheckCounter), cudaMemcpyHostToDevice));
    for (size_t i = 0; i < checks.size(); ++i)
      CUDA_OK(LaunchCheck(g.arena[static_cast<size_t>(Arena::kDestination)], checks[i], g.counters + i, g.max_blocks,
                          g.stream));
    CUDA_OK(cudaStreamSynchronize(g.stream));
    CUDA_OK(cudaMemcpy(init.data(), g.counters, init.size() * sizeof(CheckCounter), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < checks.size(); ++i) {
      if (init[i].mismatches == 0) continue;
      bad += static_cast<int64_t>(init[i].mismatches);
      if (failures->size() < 16)
        failures->push_back({{"gpu", g.id},
                             {"tensor", p_.tensor_names[static_cast<size_t>(checks[i].tensor)]},
                             {"mismatches", init[i].mismatches},
                             {"first_index", init[i].first_index}});
    }
  }
  return bad;
}

nlohmann::json GpuRun::Run(int warmup, int runs, bool* verified) {
  Setup();
  const size_t steps = p_.steps.size();
  // Warm-up 1 runs step by step, sampling free memory after each: NCCL connects
  // peers and allocates its buffers lazily, at the first collective.
  for (int w = 0; w < std::max(warmup, 1); ++w) {
    for (size_t k = 0; k < steps; ++k) {
      EnqueueStep(k, nullptr);
      if (w == 0) {
        SyncAll();
        SampleFree();
      }
    }
    SyncAll();
    SampleFree();
  }

  const size_t n = gpus_.size();
  // One profiled run: events around each step's phases (pack | collective | unpack), summed per GPU,
  // with a sync after every step (so its phases are clean; its total is not the refit time).
  std::vector<std::array<double, 3>> phase_s(n, {0, 0, 0});
  {
    std::vector<cudaEvent_t> ev(n * 3), first(n);
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      for (int i = 0; i < 3; ++i) CUDA_OK(cudaEventCreate(&ev[static_cast<size_t>(g.id * 3 + i)]));
      CUDA_OK(cudaEventCreate(&first[static_cast<size_t>(g.id)]));
    }
    Poison();
    SyncAll();
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      CUDA_OK(cudaEventRecord(first[static_cast<size_t>(g.id)], g.stream));
    }
    std::vector<cudaEvent_t> prev = first;
    for (size_t k = 0; k < steps; ++k) {
      EnqueueStep(k, &ev);
      SyncAll();  // events are reused per step; the sync adds host gaps between steps, not inside phases
      for (Gpu& g : gpus_) {
        const size_t i = static_cast<size_t>(g.id);
        float a = 0, b = 0, c = 0;
        CUDA_OK(cudaEventElapsedTime(&a, prev[i], ev[i * 3 + 0]));
        CUDA_OK(cudaEventElapsedTime(&b, ev[i * 3 + 0], ev[i * 3 + 1]));
        CUDA_OK(cudaEventElapsedTime(&c, ev[i * 3 + 1], ev[i * 3 + 2]));
        phase_s[i][0] += a * 1e-3, phase_s[i][1] += b * 1e-3, phase_s[i][2] += c * 1e-3;
      }
      // Next step's pack starts after this step's unpack: measure from a fresh event.
      for (Gpu& g : gpus_) {
        CUDA_OK(cudaSetDevice(g.id));
        CUDA_OK(cudaEventRecord(first[static_cast<size_t>(g.id)], g.stream));
      }
      prev = first;
    }
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      for (int i = 0; i < 3; ++i) cudaEventDestroy(ev[static_cast<size_t>(g.id * 3 + i)]);
      cudaEventDestroy(first[static_cast<size_t>(g.id)]);
    }
  }
  SampleFree();

  std::vector<cudaEvent_t> start(n), end(n), flat_ev(n * 3);
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(cudaEventCreate(&start[static_cast<size_t>(g.id)]));
    CUDA_OK(cudaEventCreate(&end[static_cast<size_t>(g.id)]));
    for (int i = 0; i < 3; ++i) CUDA_OK(cudaEventCreate(&flat_ev[static_cast<size_t>(g.id * 3 + i)]));
  }
  // --flat: time_s ends when the exchange does (events around the flat step's collective).
  const bool flat = p_.options.transport == Transport::kFlat;
  std::vector<double> times, flat_times, host_times;
  for (int r = 0; r < runs; ++r) {
    Poison();
    SyncAll();
    const auto t0 = std::chrono::steady_clock::now();
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      CUDA_OK(cudaEventRecord(start[static_cast<size_t>(g.id)], g.stream));
    }
    for (size_t k = 0; k < steps; ++k)
      EnqueueStep(k, flat && p_.steps[k].kind == StepKind::kFlat ? &flat_ev : nullptr);
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      CUDA_OK(cudaEventRecord(end[static_cast<size_t>(g.id)], g.stream));
    }
    SyncAll();
    host_times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    double t = 0, tf = 0;
    for (Gpu& g : gpus_) {
      const size_t i = static_cast<size_t>(g.id);
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, start[i], end[i]));
      t = std::max(t, ms * 1e-3);
      if (flat) {
        CUDA_OK(cudaEventElapsedTime(&ms, start[i], flat_ev[i * 3 + 1]));
        tf = std::max(tf, ms * 1e-3);
      }
    }
    times.push_back(t);
    if (flat) flat_times.push_back(tf);
  }
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    cudaEventDestroy(start[static_cast<size_t>(g.id)]);
    cudaEventDestroy(end[static_cast<size_t>(g.id)]);
    for (int i = 0; i < 3; ++i) cudaEventDestroy(flat_ev[static_cast<size_t>(g.id * 3 + i)]);
  }
  SampleFree();

  // The last timed run wrote the (poisoned) destination: verify it.
  nlohmann::json failures = nlohmann::json::array();
  const int64_t bad = Verify(&failures);
  *verified = bad == 0;

  nlohmann::json j = PlanJson(p_);
  const double median = Median(times);
  double coll_max = 0, pack_max = 0, unpack_max = 0;
  for (const auto& ph : phase_s) {
    pack_max = std::max(pack_max, ph[0]);
    coll_max = std::max(coll_max, ph[1]);
    unpack_max = std::max(unpack_max, ph[2]);
  }
  // --flat: time_s is the exchange alone (DESIGN's ceiling); refit_time_s adds the unpack.
  const std::vector<double>& timed = flat ? flat_times : times;
  j["time_s"] = Median(timed);
  j["refit_time_s"] = median;
  if (flat) j["time_with_unpack_s"] = median;
  j["times_s"] = timed;
  j["time_min_s"] = timed.empty() ? 0 : *std::min_element(timed.begin(), timed.end());
  j["host_time_s"] = Median(host_times);
  j["breakdown_s"] = {{"pack", pack_max}, {"collective", coll_max}, {"unpack", unpack_max}};
  std::vector<nlohmann::json> per_gpu;
  int64_t extra_max = 0;
  for (Gpu& g : gpus_) {
    const int64_t nccl = static_cast<int64_t>(g.free_before_nccl) - static_cast<int64_t>(g.min_free);
    const int64_t extra = g.extra_bytes + nccl;
    extra_max = std::max(extra_max, extra);
    const size_t i = static_cast<size_t>(g.id);
    per_gpu.push_back({{"gpu", g.id},
                       {"weights_bytes", g.weights_bytes},
                       {"extra_tracked_bytes", g.extra_bytes},
                       {"nccl_bytes", nccl},
                       {"extra_peak_bytes", extra},
                       {"verification_bytes", g.verification_bytes},
                       {"device_total_bytes", g.total},
                       {"device_used_peak_bytes", static_cast<int64_t>(g.total) - static_cast<int64_t>(g.min_free)},
                       {"breakdown_s", {{"pack", phase_s[i][0]}, {"collective", phase_s[i][1]}, {"unpack", phase_s[i][2]}}}});
  }
  j["extra_peak_bytes"] = extra_max;
  j["per_gpu"] = per_gpu;
  const double t_coll = flat ? Median(flat_times) : median;
  j["algbw_bytes_per_s"] = t_coll > 0 ? static_cast<double>(p_.moved_bytes) / t_coll : 0;
  j["verified"] = *verified;
  j["mismatches"] = bad;
  j["failures"] = failures;
  j["warmup"] = warmup;
  j["runs"] = runs;
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  j["nccl_version"] = nccl_version;
  cudaDeviceProp prop{};
  CUDA_OK(cudaGetDeviceProperties(&prop, 0));
  j["device"] = prop.name;
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  j["nccl_nvls_enable"] = nvls ? nvls : "";
  return j;
}

void PrintResult(const nlohmann::json& j) {
  fmt::print("\n| scenario | mode | time ms | refit ms | pack ms | collective ms | unpack ms | extra GiB | NCCL GiB | "
             "verified |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
  int64_t nccl = 0;
  for (const auto& g : j["per_gpu"]) nccl = std::max(nccl, g["nccl_bytes"].get<int64_t>());
  fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.3f} | {:.3f} | {} |\n",
             j["scenario"].get<std::string>(), j["label"].get<std::string>(), j["time_s"].get<double>() * 1e3,
             j["refit_time_s"].get<double>() * 1e3, j["breakdown_s"]["pack"].get<double>() * 1e3,
             j["breakdown_s"]["collective"].get<double>() * 1e3, j["breakdown_s"]["unpack"].get<double>() * 1e3,
             Gib(j["extra_peak_bytes"].get<int64_t>()), Gib(nccl), j["verified"].get<bool>() ? "yes" : "NO");
  std::vector<std::string> runs;
  for (const auto& t : j["times_s"]) runs.push_back(fmt::format("{:.2f}", t.get<double>() * 1e3));
  fmt::print("runs (ms): {}; host median {:.2f} ms; algbw (bytes each GPU sends / time_s) {:.1f} GB/s\n",
             fmt::join(runs, " "), j["host_time_s"].get<double>() * 1e3, j["algbw_bytes_per_s"].get<double>() / 1e9);
  for (const auto& f : j["failures"])
    fmt::print("MISMATCH GPU {} {}: {} elements, first at index {}\n", f["gpu"].get<int>(),
               f["tensor"].get<std::string>(), f["mismatches"].get<int64_t>(), f["first_index"].get<uint64_t>());
  fmt::print("RESULT scenario={} mode={} time_ms={:.3f} refit_ms={:.3f} extra_gib={:.3f} verified={}\n",
             j["scenario"].get<std::string>(), j["label"].get<std::string>(), j["time_s"].get<double>() * 1e3,
             j["refit_time_s"].get<double>() * 1e3, Gib(j["extra_peak_bytes"].get<int64_t>()),
             j["verified"].get<bool>() ? "true" : "false");
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"PyTorch-style refit baseline: bucketed all-gather (or broadcast), or one flat send/recv, on GPUs"};
  app.add_option("--scenario", o.scenario, "built-in scenario name or scenario file")->capture_default_str();
  app.add_option("--bucket", o.bucket, "gathered bytes per bucket (64MiB, 256MiB, 1GiB, ...) or per-tensor")
      ->capture_default_str();
  app.add_flag("--flat", o.flat, "the same bytes as one ncclSend/ncclRecv per GPU pair (the ceiling)");
  app.add_flag("--out-of-place", o.out_of_place, "pack into a separate input buffer (torch.cat + all_gather_into_tensor)");
  app.add_option("--warmup", o.warmup, "untimed runs first (>= 1)")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--runs", o.runs, "timed runs; the median is reported")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--out", o.out, "write the result as JSON to this file");
  app.add_flag("--emulate", o.emulate, "run the plan in host memory (small models only; no GPU)");
  app.add_flag("--dry-run", o.dry_run, "print the plan and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Multicast over NVLink (NVLS) stays off on the lent machines.
  setenv("NCCL_NVLS_ENABLE", "0", 0);

  const Scenario s = LoadAny(o.scenario);
  const RefitPlan plan = PlanRefit(s, ParseBaseline(o));
  PrintPlan(plan);
  if (o.dry_run) return 0;
  if (o.emulate) {
    const int64_t bad = EmulateOnHost(plan);
    nlohmann::json j = PlanJson(plan);
    j["emulated"] = true;
    j["verified"] = bad == 0;
    j["mismatches"] = bad;
    WriteJson(o.out, j);
    fmt::print("emulated on host: {} mismatching elements of {} checked\n", bad,
               [&] {
                 int64_t n = 0;
                 for (int32_t g = 0; g < plan.gpus; ++g) n += plan.CheckedElements(g);
                 return n;
               }());
    fmt::print("RESULT scenario={} mode={} time_ms=- refit_ms=- extra_gib=- verified={}\n", plan.scenario,
               ModeLabel(plan), bad == 0 ? "true" : "false");
    return bad == 0 ? 0 : kVerifyExit;
  }
  bool verified = false;
  nlohmann::json j;
  {
    GpuRun run(plan);
    j = run.Run(o.warmup, o.runs, &verified);
  }
  PrintResult(j);
  WriteJson(o.out, j);
  return verified ? 0 : kVerifyExit;
}

}  // namespace
}  // namespace reshard::baseline

int main(int argc, char** argv) {
  try {
    return reshard::baseline::Main(argc, argv);
  } catch (const reshard::InputError& e) {
    std::cerr << "error: " << e.file() << (e.field().empty() ? "" : ": " + e.field()) << ": " << e.problem() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
