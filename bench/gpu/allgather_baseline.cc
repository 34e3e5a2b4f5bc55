// allgather_baseline: the refit PyTorch RL stacks run, on real GPUs, measured the
// way reshard's executor is measured (issue 7, item 2(b)).
//
//   allgather_baseline [--scenario NAME|PATH] [--bucket 64MiB|256MiB|1GiB|per-tensor]
//                      [--flat] [--out-of-place] [--offload none|all|FRACTION] [--no-memory]
//                      [--warmup N] [--runs N] [--out result.json] [--emulate] [--dry-run]
//
// One process drives every GPU of the host (ncclCommInitAll, one stream per GPU).
// Source shards (Megatron local buffers, exact sizes, reshard's model library) are
// filled on device with the pattern of executor/pattern.h; the destination weights
// (vLLM layout) are allocated on every GPU; the plan of allgather_plan.h runs
// pack -> ncclAllGather (or ncclBroadcast) -> unpack per bucket; every destination
// element is then checked on device. Reported: refit time (CUDA events on each GPU,
// the max over GPUs, median of --runs after --warmup), the extra peak device memory
// beyond source + destination weights (our own allocations counted exactly, NCCL's
// own measured with cudaMemGetInfo before communicator creation and after its
// first collectives), and whether every element verified.
//
// Memory (the default; --no-memory runs as before: weights and the refit's own
// buffers only, all allocated once). Before timing, each GPU holds the scenario's
// state at refit start (allgather_plan.h GpuMemoryPlan): the source weights, the
// optimizer state (two device buffers: the part kept on device and the part the
// offload moves), kept gradients, the KV cache, and the reserve as a buffer
// nobody touches; plus pinned host memory (cudaHostAlloc) for the offloaded part.
// Each run then does, timed, what NeMo-RL / verl do: copy the offloaded part to
// host and free it (cudaFreeAsync), allocate the refit's buffers (destination
// weights, bucket, input, staging: cudaMallocAsync from the device's pool, which
// reuses what the offload freed, as reshard's executor does), refit. Untimed
// after each run: poison and free the refit's buffers, re-allocate the offloaded
// part and copy it back, so every run starts from the same state. The offload
// fraction comes from the scenario (allgather_plan.h; --offload overrides it).
// NCCL is connected by one refit before the start state is built (a job's refit
// communicator exists from its earlier steps), so its buffers are measured on
// their own and are present in every run. An allocation that fails is a
// result: "fits": false with the GPU, the allocation, its bytes and the phase.
//
// --flat sends the same bytes as one ncclSend/ncclRecv per GPU pair (DESIGN's
// ceiling); its time_s is the exchange alone, time_with_unpack_s adds the copies
// into the destination (staging -> weights) that make it verifiable.
// --emulate runs the plan in host memory instead (small models; no GPU needed);
// --dry-run prints the plan (memory included) only.
//
// Exit codes: 0 verified; 2 bad input; 3 does not fit (a device or pinned host
// allocation failed: the JSON has "fits": false and "does_not_fit" names the
// GPU, the allocation, its bytes and the phase); 4 ran but a destination element
// is wrong; 1 anything else (CUDA / NCCL errors name the call, file and line).
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

constexpr int kDoesNotFitExit = 3;
constexpr int kVerifyExit = 4;
constexpr unsigned char kPoison = 0xA5;

// An allocation that failed: a result ("fits": false), not an error.
// free_bytes / total_bytes: the device's at the failure (-1 for pinned host memory).
struct DoesNotFit : std::runtime_error {
  DoesNotFit(int gpu_, std::string what_, int64_t bytes_, std::string phase_, int64_t free_, int64_t total_)
      : std::runtime_error(Describe(gpu_, what_, bytes_, phase_, free_, total_)), gpu(gpu_), allocation(std::move(what_)),
        bytes(bytes_), phase(std::move(phase_)), free_bytes(free_), total_bytes(total_) {}
  static std::string Describe(int gpu, const std::string& what, int64_t bytes, const std::string& phase, int64_t free,
                              int64_t total) {
    constexpr double kGiB = double(int64_t{1} << 30);
    std::string m = fmt::format("GPU {}: no room for {} ({:.3f} GiB) {}", gpu, what, static_cast<double>(bytes) / kGiB, phase);
    if (free >= 0)
      m += fmt::format(": {:.3f} GiB free of {:.3f} GiB", static_cast<double>(free) / kGiB, static_cast<double>(total) / kGiB);
    return m;
  }
  int gpu;
  std::string allocation;
  int64_t bytes;
  std::string phase;  // before the refit (setup), at refit start, during the refit, restoring after a run
  int64_t free_bytes, total_bytes;
};

struct Options {
  std::string scenario = "llama3-8b-tp2-to-tp1x2";
  std::string bucket = "256MiB";
  bool flat = false;
  bool out_of_place = false;
  std::string offload;  // empty: the scenario's
  bool no_memory = false;
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
  b.memory = !o.no_memory;
  if (!o.offload.empty()) {
    if (o.no_memory) throw InputError("<cli>", "offload", "needs the memory model; drop --no-memory");
    if (o.offload == "none") {
      b.offload_fraction = 0.0;
    } else if (o.offload == "all") {
      b.offload_fraction = 1.0;
    } else {
      size_t used = 0;
      double f = -1;
      try {
        f = std::stod(o.offload, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != o.offload.size() || !(f >= 0 && f <= 1))
        throw InputError("<cli>", "offload", "'" + o.offload + "': expected none, all or a fraction in [0, 1]");
      b.offload_fraction = f;
    }
  }
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

std::string OffloadSource(const RefitPlan& p, const Scenario& s) {
  if (p.options.offload_fraction) return "--offload";
  switch (s.memory.optimizer.offload) {
    case OffloadMode::kNone: return "scenario: none";
    case OffloadMode::kAll: return "scenario: all";
    case OffloadMode::kFraction: return fmt::format("scenario: {}", s.memory.optimizer.fraction);
    case OffloadMode::kAuto: return "scenario: auto = none when it fits, else all";
  }
  return "?";
}

void PrintPlan(const RefitPlan& p, const Scenario& s) {
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
  if (!p.memory_modelled) {
    fmt::print("memory: not modelled (--no-memory): weights and the refit's buffers only, allocated once\n");
    return;
  }
  fmt::print("memory: offload {:.2f} of the optimizer state to pinned host before the refit ({}); "
             "capacity {:.2f} GiB per GPU\n",
             p.offload_fraction, OffloadSource(p, s), Gib(p.capacity_bytes));
  for (int32_t g = 0; g < p.gpus; ++g) {
    const GpuMemoryPlan& m = p.memory[static_cast<size_t>(g)];
    const int64_t usable = p.capacity_bytes - m.reserve_bytes;
    fmt::print("      GPU {}: optimizer {:.3f} GiB ({:.3f} GiB to host first), gradients {:.3f} GiB, KV cache {:.3f} "
               "GiB, reserve {:.3f} GiB, context + NCCL ({} peer{}) {:.3f} GiB\n",
               g, Gib(m.optimizer_bytes), Gib(m.offload_bytes), Gib(m.gradient_bytes), Gib(m.kv_cache_bytes),
               Gib(m.reserve_bytes), m.nccl_peers, m.nccl_peers == 1 ? "" : "s", Gib(m.overhead_bytes));
    fmt::print("             at start {:.3f} GiB; planned peak {:.3f} GiB of {:.3f} GiB usable (capacity less "
               "reserve): {}\n",
               Gib(m.start_bytes), Gib(m.planned_peak_bytes), Gib(usable),
               m.planned_peak_bytes <= usable ? "fits" : fmt::format("{:.3f} GiB missing", Gib(m.planned_peak_bytes - usable)));
  }
  int64_t pinned = 0;
  for (const GpuMemoryPlan& m : p.memory) pinned += m.offload_bytes;
  if (pinned > 0)
    fmt::print("      pinned host memory for the offload: {:.3f} GiB (all GPUs) of {:.1f} GiB on the host\n", Gib(pinned),
               Gib(s.cluster.host_memory_bytes));
  fmt::print("      planned: {}\n", p.planned_fits ? "fits" : fmt::format("does not fit (GPU {} misses {:.3f} GiB); "
                                                                       "the run decides",
                                                                       p.missing_gpu, Gib(p.missing_bytes)));
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
  // Memory (lists: one entry per GPU).
  j["memory_modelled"] = p.memory_modelled;
  j["offload_fraction"] = p.offload_fraction;
  std::vector<int64_t> opt, off, grad, kv, reserve, start, peak;
  for (const GpuMemoryPlan& m : p.memory) {
    opt.push_back(m.optimizer_bytes);
    off.push_back(m.offload_bytes);
    grad.push_back(m.gradient_bytes);
    kv.push_back(m.kv_cache_bytes);
    reserve.push_back(m.reserve_bytes);
    start.push_back(m.start_bytes);
    peak.push_back(m.planned_peak_bytes);
  }
  if (!p.memory_modelled) off.assign(static_cast<size_t>(p.gpus), 0);
  j["offload_bytes_per_gpu"] = off;
  j["optimizer_bytes_per_gpu"] = opt;
  j["gradient_bytes_per_gpu"] = grad;
  j["kv_cache_bytes_per_gpu"] = kv;
  j["reserve_bytes_per_gpu"] = reserve;
  j["planned_start_bytes"] = start;
  j["planned_peak_bytes"] = peak;
  j["capacity_bytes"] = p.capacity_bytes;
  j["planned_fits"] = p.planned_fits;
  if (!p.planned_fits) j["planned_missing"] = {{"gpu", p.missing_gpu}, {"bytes", p.missing_bytes}};
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

constexpr std::array<Arena, 4> kRefitArenas = {Arena::kDestination, Arena::kBucket, Arena::kInput, Arena::kStaging};

struct Gpu {
  int id = 0;
  cudaStream_t stream = nullptr;
  ncclComm_t comm = nullptr;
  cudaMemPool_t pool = nullptr;
  std::array<unsigned char*, kArenas> arena{};  // memory modelled: the refit arenas exist only during a run
  DeviceCopy* descs = nullptr;
  CheckCounter* counters = nullptr;
  int64_t weights_bytes = 0;       // source + destination arenas
  int64_t extra_bytes = 0;         // our allocations that serve the refit (bucket, input, staging, descriptors)
  int64_t verification_bytes = 0;  // check counters (not part of a refit)
  size_t free_before_nccl = 0, min_free = SIZE_MAX, total = 0;
  std::vector<Launch> pack, unpack;  // per step
  int32_t max_blocks = 1;
  // Memory modelled: the state at refit start.
  unsigned char* optimizer_kept = nullptr;       // stays on device (cudaMalloc)
  unsigned char* optimizer_offloaded = nullptr;  // pool: copied to host and freed in each run, restored after
  unsigned char* host_optimizer = nullptr;       // pinned host copy of the offloaded part
  unsigned char* gradients = nullptr;
  unsigned char* kv_cache = nullptr;
  unsigned char* reserve = nullptr;              // held, never touched: the refit cannot use it
  int64_t nccl_bytes = -1;                       // measured once NCCL connected (memory modelled)
  size_t free_at_start = 0;

  ArenaBases Bases() const {
    ArenaBases b{};
    for (int a = 0; a < kArenas; ++a) b.base[a] = arena[static_cast<size_t>(a)];
    return b;
  }
};

class GpuRun {
 public:
  explicit GpuRun(const RefitPlan& p) : p_(p), memory_(p.memory_modelled) {}
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
      if (g.stream) cudaStreamSynchronize(g.stream);
      for (size_t a = 0; a < g.arena.size(); ++a) {
        if (!g.arena[a]) continue;
        if (memory_ && a != static_cast<size_t>(Arena::kSource)) cudaFreeAsync(g.arena[a], g.stream);
        else cudaFree(g.arena[a]);
      }
      if (g.optimizer_offloaded) cudaFreeAsync(g.optimizer_offloaded, g.stream);
      if (g.stream) cudaStreamSynchronize(g.stream);
      for (unsigned char* b : {g.optimizer_kept, g.gradients, g.kv_cache, g.reserve}) cudaFree(b);
      if (g.host_optimizer) cudaFreeHost(g.host_optimizer);
      cudaFree(g.descs);
      cudaFree(g.counters);
      if (g.pool) cudaMemPoolTrimTo(g.pool, 0);
      if (g.stream) cudaStreamDestroy(g.stream);
    }
  }

  nlohmann::json Run(int warmup, int runs, bool* verified);

 private:
  [[noreturn]] void NoRoom(Gpu& g, const std::string& what, int64_t bytes, const std::string& phase) {
    (void)cudaGetLastError();  // clear the allocation error
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    throw DoesNotFit(g.id, what, bytes, phase, static_cast<int64_t>(free), static_cast<int64_t>(total));
  }
  // cudaMalloc, or cudaMallocAsync from the device's pool on the GPU's stream.
  unsigned char* Malloc(Gpu& g, int64_t bytes, int64_t* account, const std::string& what, const std::string& phase,
                        bool pooled = false) {
    if (bytes <= 0) return nullptr;
    void* ptr = nullptr;
    CUDA_OK(cudaSetDevice(g.id));
    const cudaError_t e = pooled ? cudaMallocAsync(&ptr, static_cast<size_t>(bytes), g.stream)
                                 : cudaMalloc(&ptr, static_cast<size_t>(bytes));
    if (e == cudaErrorMemoryAllocation) NoRoom(g, what, bytes, phase);
    CUDA_OK(e);
    RESHARD_CHECK(reinterpret_cast<uintptr_t>(ptr) % kArenaBaseAlign == 0, "allocation is not aligned");
    if (account) *account += bytes;
    return static_cast<unsigned char*>(ptr);
  }
  void Setup();
  void BuildStartState();
  void Resolve(Gpu& g);
  void SampleFree();
  void EnqueueStep(size_t k, std::vector<cudaEvent_t>* phase);
  void AllocateRefitArenas(const std::string& phase);
  void BeginRefit(std::vector<cudaEvent_t>* offloaded);
  void Restore();
  void Poison();
  void SyncAll();
  int64_t Verify(nlohmann::json* failures);
  int64_t Offload(const Gpu& g) const { return memory_ ? p_.memory[static_cast<size_t>(g.id)].offload_bytes : 0; }

  const RefitPlan& p_;
  const bool memory_;
  std::vector<Gpu> gpus_;
};

void GpuRun::Setup() {
  int n = 0;
  CUDA_OK(cudaGetDeviceCount(&n));
  if (n < p_.gpus)
    throw InputError("<cli>", "scenario", fmt::format("needs {} GPUs, this host shows {}", p_.gpus, n));
  gpus_.resize(static_cast<size_t>(p_.gpus));
  const std::string setup = "before the refit (setup)";
  for (int32_t i = 0; i < p_.gpus; ++i) {
    Gpu& g = gpus_[static_cast<size_t>(i)];
    g.id = i;
    CUDA_OK(cudaSetDevice(i));
    CUDA_OK(cudaFree(nullptr));  // context
    CUDA_OK(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i));
    g.max_blocks = sms * 8;
    if (memory_) {
      // The pool keeps what is freed (no trips to the driver mid-run), as reshard's executor.
      CUDA_OK(cudaDeviceGetDefaultMemPool(&g.pool, i));
      uint64_t keep = UINT64_MAX;
      CUDA_OK(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrReleaseThreshold, &keep));
    }
    for (int a = 0; a < kArenas; ++a) {
      const Arena arena = static_cast<Arena>(a);
      if (memory_ && arena != Arena::kSource) continue;  // allocated in each run, after the offload
      const bool weights = arena == Arena::kSource || arena == Arena::kDestination;
      g.arena[static_cast<size_t>(a)] = Malloc(g, p_.ArenaBytes(i, arena), weights ? &g.weights_bytes : &g.extra_bytes,
                                               std::string(ArenaName(arena)) + " arena", setup);
    }
    if (memory_) {
      g.weights_bytes += p_.ArenaBytes(i, Arena::kDestination);
      for (Arena a : {Arena::kBucket, Arena::kInput, Arena::kStaging}) g.extra_bytes += p_.ArenaBytes(i, a);
    }
    Resolve(g);
    g.counters = reinterpret_cast<CheckCounter*>(
        Malloc(g, static_cast<int64_t>(std::max<size_t>(1, p_.check[static_cast<size_t>(i)].size()) * sizeof(CheckCounter)),
               &g.verification_bytes, "check counters", setup));
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
  if (!memory_) return;

  // One refit connects NCCL (its buffers are allocated at the first collectives)
  // before the start state takes the memory; what it leaves is NCCL's.
  AllocateRefitArenas(setup + ", connecting NCCL");
  for (size_t k = 0; k < p_.steps.size(); ++k) EnqueueStep(k, nullptr);
  Restore();  // poisons and frees the refit arenas (nothing offloaded yet)
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(cudaMemPoolTrimTo(g.pool, 0));
    size_t free = 0, total = 0;
    CUDA_OK(cudaMemGetInfo(&free, &total));
    g.nccl_bytes = std::max<int64_t>(0, static_cast<int64_t>(g.free_before_nccl) - static_cast<int64_t>(free));
  }
  BuildStartState();
}

// The scenario's state at refit start: optimizer (kept + offloaded parts),
// gradients, KV cache, reserve; pinned host memory for the offloaded part.
void GpuRun::BuildStartState() {
  const std::string phase = "at refit start (the scenario's resident state)";
  for (Gpu& g : gpus_) {
    const GpuMemoryPlan& m = p_.memory[static_cast<size_t>(g.id)];
    g.optimizer_kept = Malloc(g, m.optimizer_bytes - m.offload_bytes, nullptr, "optimizer state (kept on device)", phase);
    g.optimizer_offloaded =
        Malloc(g, m.offload_bytes, nullptr, "optimizer state (the part offloaded in each run)", phase, true);
    g.gradients = Malloc(g, m.gradient_bytes, nullptr, "gradients", phase);
    g.kv_cache = Malloc(g, m.kv_cache_bytes, nullptr, "KV cache", phase);
    g.reserve = Malloc(g, m.reserve_bytes, nullptr, "reserve", phase);
    // Poisoned: whatever memory a later refit buffer reuses holds no pattern.
    if (g.optimizer_kept)
      CUDA_OK(cudaMemsetAsync(g.optimizer_kept, kPoison, static_cast<size_t>(m.optimizer_bytes - m.offload_bytes), g.stream));
    if (g.optimizer_offloaded)
      CUDA_OK(cudaMemsetAsync(g.optimizer_offloaded, kPoison, static_cast<size_t>(m.offload_bytes), g.stream));
    if (m.offload_bytes > 0) {
      void* host = nullptr;
      const cudaError_t e = cudaHostAlloc(&host, static_cast<size_t>(m.offload_bytes), cudaHostAllocPortable);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw DoesNotFit(g.id, "pinned host memory for the offloaded optimizer state", m.offload_bytes, phase, -1, -1);
      }
      CUDA_OK(e);
      g.host_optimizer = static_cast<unsigned char*>(host);
    }
  }
  SyncAll();
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    size_t total = 0;
    CUDA_OK(cudaMemGetInfo(&g.free_at_start, &total));
  }
  SampleFree();
}

// ByteCopies -> device descriptors (arena offsets), vector widths and chunk ranges.
void GpuRun::Resolve(Gpu& g) {
  std::vector<DeviceCopy> host;
  auto add = [&](const std::vector<ByteCopy>& copies) {
    Launch l;
    l.first = static_cast<int32_t>(host.size());
    for (const ByteCopy& c : copies) {
      host.push_back(MakeDeviceCopy(static_cast<int32_t>(c.src_arena), c.src_offset, static_cast<int32_t>(c.dst_arena),
                                    c.dst_offset, c.n0, c.n1, c.row_bytes, c.src_stride0, c.src_stride1,
                                    c.dst_stride0, c.dst_stride1, l.chunks));
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
  g.descs = reinterpret_cast<DeviceCopy*>(Malloc(g, bytes, &g.extra_bytes, "copy descriptors", "before the refit (setup)"));
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
      CUDA_OK(cudaMemsetAsync(d, kPoison, static_cast<size_t>(p_.ArenaBytes(g.id, Arena::kDestination)), g.stream));
  }
}

// Memory modelled: the refit's buffers from the pool, in stream order (they
// reuse what the offload freed on the same stream without a host wait).
void GpuRun::AllocateRefitArenas(const std::string& phase) {
  for (Gpu& g : gpus_)
    for (Arena a : kRefitArenas) {
      RESHARD_CHECK(g.arena[static_cast<size_t>(a)] == nullptr, "refit arena allocated twice");
      g.arena[static_cast<size_t>(a)] =
          Malloc(g, p_.ArenaBytes(g.id, a), nullptr, std::string(ArenaName(a)) + " arena", phase, true);
    }
}

// Memory modelled, the start of a run: the offloaded part of the optimizer to
// pinned host and freed, then the refit's buffers. `offloaded`: an event per GPU
// recorded once its offload copy is done.
void GpuRun::BeginRefit(std::vector<cudaEvent_t>* offloaded) {
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    if (const int64_t bytes = Offload(g); bytes > 0) {
      CUDA_OK(cudaMemcpyAsync(g.host_optimizer, g.optimizer_offloaded, static_cast<size_t>(bytes),
                              cudaMemcpyDeviceToHost, g.stream));
      CUDA_OK(cudaFreeAsync(g.optimizer_offloaded, g.stream));
      g.optimizer_offloaded = nullptr;
    }
    if (offloaded) CUDA_OK(cudaEventRecord((*offloaded)[static_cast<size_t>(g.id)], g.stream));
  }
  AllocateRefitArenas("during the refit (after the offload)");
}

// Memory modelled, untimed after a run: poison and free the refit's buffers,
// bring the offloaded part back. Retries once after trimming the pool (its
// free blocks may be split where one block of the offloaded size is needed).
void GpuRun::Restore() {
  SyncAll();
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    for (Arena a : kRefitArenas) {
      unsigned char*& ptr = g.arena[static_cast<size_t>(a)];
      if (!ptr) continue;
      CUDA_OK(cudaMemsetAsync(ptr, kPoison, static_cast<size_t>(p_.ArenaBytes(g.id, a)), g.stream));
      CUDA_OK(cudaFreeAsync(ptr, g.stream));
      ptr = nullptr;
    }
  }
  SyncAll();
  for (Gpu& g : gpus_) {
    const int64_t bytes = Offload(g);
    if (bytes <= 0 || g.optimizer_offloaded || !g.host_optimizer) continue;
    CUDA_OK(cudaSetDevice(g.id));
    void* ptr = nullptr;
    cudaError_t e = cudaMallocAsync(&ptr, static_cast<size_t>(bytes), g.stream);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      CUDA_OK(cudaStreamSynchronize(g.stream));
      CUDA_OK(cudaMemPoolTrimTo(g.pool, 0));
      e = cudaMallocAsync(&ptr, static_cast<size_t>(bytes), g.stream);
    }
    if (e == cudaErrorMemoryAllocation) NoRoom(g, "optimizer state (the offloaded part, back)", bytes, "restoring after a run");
    CUDA_OK(e);
    g.optimizer_offloaded = static_cast<unsigned char*>(ptr);
    CUDA_OK(cudaMemcpyAsync(g.optimizer_offloaded, g.host_optimizer, static_cast<size_t>(bytes), cudaMemcpyHostToDevice,
                            g.stream));
  }
  SyncAll();
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
    CUDA_OK(LaunchCopies(g.descs + l.first, l.count, l.chunks, g.Bases(), g.max_blocks, g.stream));
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
    CUDA_OK(LaunchCopies(g.descs + l.first, l.count, l.chunks, g.Bases(), g.max_blocks, g.stream));
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
  const size_t n = gpus_.size();
  // Warm-up 1 runs step by step, sampling free memory after each: without the
  // memory model, NCCL connects peers and allocates its buffers lazily here, at
  // the first collective (with it, Setup's connecting refit did).
  for (int w = 0; w < std::max(warmup, 1); ++w) {
    if (memory_) {
      BeginRefit(nullptr);
      if (w == 0) {
        SyncAll();
        SampleFree();
      }
    }
    for (size_t k = 0; k < steps; ++k) {
      EnqueueStep(k, nullptr);
      if (w == 0) {
        SyncAll();
        SampleFree();
      }
    }
    SyncAll();
    SampleFree();
    if (memory_) Restore();
  }

  // One profiled run: events around each step's phases (pack | collective | unpack), summed per GPU,
  // with a sync after every step (so its phases are clean; its total is not the refit time).
  // Memory modelled: the offload and the refit buffers' allocation come first, outside the phases.
  std::vector<std::array<double, 3>> phase_s(n, {0, 0, 0});
  {
    std::vector<cudaEvent_t> ev(n * 3), first(n);
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      for (int i = 0; i < 3; ++i) CUDA_OK(cudaEventCreate(&ev[static_cast<size_t>(g.id * 3 + i)]));
      CUDA_OK(cudaEventCreate(&first[static_cast<size_t>(g.id)]));
    }
    if (memory_) BeginRefit(nullptr);
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
  if (memory_) Restore();

  std::vector<cudaEvent_t> start(n), end(n), offloaded(n), flat_ev(n * 3);
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    CUDA_OK(cudaEventCreate(&start[static_cast<size_t>(g.id)]));
    CUDA_OK(cudaEventCreate(&end[static_cast<size_t>(g.id)]));
    CUDA_OK(cudaEventCreate(&offloaded[static_cast<size_t>(g.id)]));
    for (int i = 0; i < 3; ++i) CUDA_OK(cudaEventCreate(&flat_ev[static_cast<size_t>(g.id * 3 + i)]));
  }
  for (Gpu& g : gpus_) {  // the pool's high-water marks from here on: the timed runs' own
    if (!g.pool) continue;
    uint64_t zero = 0;
    CUDA_OK(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrReservedMemHigh, &zero));
    CUDA_OK(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrUsedMemHigh, &zero));
  }
  // --flat: time_s ends when the exchange does (events around the flat step's collective).
  // Memory modelled: the clock starts before the offload (it counts, as reshard's own does).
  const bool flat = p_.options.transport == Transport::kFlat;
  std::vector<double> times, flat_times, host_times, offload_times;
  nlohmann::json failures = nlohmann::json::array();
  int64_t bad = 0;
  for (int r = 0; r < runs; ++r) {
    if (!memory_) Poison();  // memory modelled: Restore poisoned the refit buffers before freeing them
    SyncAll();
    const auto t0 = std::chrono::steady_clock::now();
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      CUDA_OK(cudaEventRecord(start[static_cast<size_t>(g.id)], g.stream));
    }
    if (memory_) BeginRefit(&offloaded);
    for (size_t k = 0; k < steps; ++k)
      EnqueueStep(k, flat && p_.steps[k].kind == StepKind::kFlat ? &flat_ev : nullptr);
    for (Gpu& g : gpus_) {
      CUDA_OK(cudaSetDevice(g.id));
      CUDA_OK(cudaEventRecord(end[static_cast<size_t>(g.id)], g.stream));
    }
    SyncAll();
    host_times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    double t = 0, tf = 0, to = 0;
    for (Gpu& g : gpus_) {
      const size_t i = static_cast<size_t>(g.id);
      float ms = 0;
      CUDA_OK(cudaEventElapsedTime(&ms, start[i], end[i]));
      t = std::max(t, ms * 1e-3);
      if (flat) {
        CUDA_OK(cudaEventElapsedTime(&ms, start[i], flat_ev[i * 3 + 1]));
        tf = std::max(tf, ms * 1e-3);
      }
      if (memory_) {
        CUDA_OK(cudaEventElapsedTime(&ms, start[i], offloaded[i]));
        to = std::max(to, ms * 1e-3);
      }
    }
    times.push_back(t);
    if (flat) flat_times.push_back(tf);
    if (memory_) offload_times.push_back(to);
    SampleFree();
    // The last timed run wrote the (poisoned) destination: verify it, then restore (untimed).
    if (r + 1 == runs) {
      bad = Verify(&failures);
    } else if (memory_) {
      Restore();
    }
  }
  for (Gpu& g : gpus_) {
    CUDA_OK(cudaSetDevice(g.id));
    cudaEventDestroy(start[static_cast<size_t>(g.id)]);
    cudaEventDestroy(end[static_cast<size_t>(g.id)]);
    cudaEventDestroy(offloaded[static_cast<size_t>(g.id)]);
    for (int i = 0; i < 3; ++i) cudaEventDestroy(flat_ev[static_cast<size_t>(g.id * 3 + i)]);
  }
  *verified = bad == 0;

  nlohmann::json j = PlanJson(p_);
  j["fits"] = true;
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
  j["offload_time_s"] = Median(offload_times);  // part of time_s: start to the end of the offload copy
  j["breakdown_s"] = {{"offload", Median(offload_times)}, {"pack", pack_max}, {"collective", coll_max},
                      {"unpack", unpack_max}};
  std::vector<nlohmann::json> per_gpu;
  std::vector<int64_t> peak;
  int64_t extra_max = 0;
  for (Gpu& g : gpus_) {
    const int64_t nccl = memory_ ? g.nccl_bytes : static_cast<int64_t>(g.free_before_nccl) - static_cast<int64_t>(g.min_free);
    const int64_t extra = g.extra_bytes + nccl;
    extra_max = std::max(extra_max, extra);
    const size_t i = static_cast<size_t>(g.id);
    const int64_t used_peak = static_cast<int64_t>(g.total) - static_cast<int64_t>(g.min_free);
    peak.push_back(used_peak);
    nlohmann::json e = {{"gpu", g.id},
                        {"weights_bytes", g.weights_bytes},
                        {"extra_tracked_bytes", g.extra_bytes},
                        {"nccl_bytes", nccl},
                        {"extra_peak_bytes", extra},
                        {"verification_bytes", g.verification_bytes},
                        {"device_total_bytes", g.total},
                        {"device_used_peak_bytes", used_peak},
                        {"breakdown_s", {{"pack", phase_s[i][0]}, {"collective", phase_s[i][1]}, {"unpack", phase_s[i][2]}}}};
    if (memory_) {
      const GpuMemoryPlan& m = p_.memory[i];
      uint64_t used_high = 0, reserved_high = 0;
      CUDA_OK(cudaMemPoolGetAttribute(g.pool, cudaMemPoolAttrUsedMemHigh, &used_high));
      CUDA_OK(cudaMemPoolGetAttribute(g.pool, cudaMemPoolAttrReservedMemHigh, &reserved_high));
      e["optimizer_bytes"] = m.optimizer_bytes;
      e["offload_bytes"] = m.offload_bytes;
      e["gradient_bytes"] = m.gradient_bytes;
      e["kv_cache_bytes"] = m.kv_cache_bytes;
      e["reserve_bytes"] = m.reserve_bytes;
      e["device_used_at_start_bytes"] = static_cast<int64_t>(g.total) - static_cast<int64_t>(g.free_at_start);
      e["planned_peak_bytes"] = m.planned_peak_bytes;
      // The pool holds the offloaded part between runs and the refit's buffers during them.
      e["pool_used_high_bytes"] = used_high;
      e["pool_reserved_high_bytes"] = reserved_high;
    }
    per_gpu.push_back(std::move(e));
  }
  j["extra_peak_bytes"] = extra_max;
  j["peak_bytes"] = peak;  // device memory in use at most (cudaMemGetInfo, sampled), everything counted
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
  fmt::print("\n| scenario | mode | time ms | refit ms | offload ms | pack ms | collective ms | unpack ms | extra GiB | "
             "NCCL GiB | peak GiB | verified |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  int64_t nccl = 0, peak = 0;
  for (const auto& g : j["per_gpu"]) {
    nccl = std::max(nccl, g["nccl_bytes"].get<int64_t>());
    peak = std::max(peak, g["device_used_peak_bytes"].get<int64_t>());
  }
  fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.3f} | {:.3f} | {:.2f} | {} |\n",
             j["scenario"].get<std::string>(), j["label"].get<std::string>(), j["time_s"].get<double>() * 1e3,
             j["refit_time_s"].get<double>() * 1e3, j["breakdown_s"]["offload"].get<double>() * 1e3,
             j["breakdown_s"]["pack"].get<double>() * 1e3, j["breakdown_s"]["collective"].get<double>() * 1e3,
             j["breakdown_s"]["unpack"].get<double>() * 1e3, Gib(j["extra_peak_bytes"].get<int64_t>()), Gib(nccl),
             Gib(peak), j["verified"].get<bool>() ? "yes" : "NO");
  std::vector<std::string> runs;
  for (const auto& t : j["times_s"]) runs.push_back(fmt::format("{:.2f}", t.get<double>() * 1e3));
  fmt::print("runs (ms): {}; host median {:.2f} ms; algbw (bytes each GPU sends / time_s) {:.1f} GB/s\n",
             fmt::join(runs, " "), j["host_time_s"].get<double>() * 1e3, j["algbw_bytes_per_s"].get<double>() / 1e9);
  if (j["memory_modelled"].get<bool>()) {
    int64_t offload = 0, planned = 0;
    for (const auto& b : j["offload_bytes_per_gpu"]) offload = std::max(offload, b.get<int64_t>());
    for (const auto& b : j["planned_peak_bytes"]) planned = std::max(planned, b.get<int64_t>());
    fmt::print("memory: offload {:.2f} of the optimizer state ({:.3f} GiB per GPU at most) first; device peak {:.2f} GiB "
               "(planned {:.2f} GiB)\n",
               j["offload_fraction"].get<double>(), Gib(offload), Gib(peak), Gib(planned));
  }
  for (const auto& f : j["failures"])
    fmt::print("MISMATCH GPU {} {}: {} elements, first at index {}\n", f["gpu"].get<int>(),
               f["tensor"].get<std::string>(), f["mismatches"].get<int64_t>(), f["first_index"].get<uint64_t>());
  fmt::print("RESULT scenario={} mode={} time_ms={:.3f} refit_ms={:.3f} extra_gib={:.3f} peak_gib={:.3f} "
             "offload_fraction={:.2f} offload_ms={:.3f} fits=true verified={}\n",
             j["scenario"].get<std::string>(), j["label"].get<std::string>(), j["time_s"].get<double>() * 1e3,
             j["refit_time_s"].get<double>() * 1e3, Gib(j["extra_peak_bytes"].get<int64_t>()), Gib(peak),
             j["offload_fraction"].get<double>(), j["breakdown_s"]["offload"].get<double>() * 1e3,
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
  app.add_option("--offload", o.offload,
                 "optimizer offload before the refit: none, all or a fraction (default: the scenario's; auto = none "
                 "when it fits, else all)");
  app.add_flag("--no-memory", o.no_memory,
               "weights and refit buffers only: no optimizer state, KV cache, reserve or offload (as before)");
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
  PrintPlan(plan, s);
  if (o.dry_run) return 0;
  if (o.emulate) {
    const int64_t bad = EmulateOnHost(plan);
    nlohmann::json j = PlanJson(plan);
    j["emulated"] = true;
    j["verified"] = bad == 0;
    j["mismatches"] = bad;
    WriteJson(o.out, j);
    fmt::print("emulated on host: {} mismatching elements of {} checked (memory is not emulated)\n", bad,
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
  try {
    GpuRun run(plan);
    j = run.Run(o.warmup, o.runs, &verified);
  } catch (const DoesNotFit& e) {
    j = PlanJson(plan);
    j["fits"] = false;
    j["does_not_fit"] = {{"gpu", e.gpu},          {"allocation", e.allocation}, {"bytes", e.bytes},
                         {"phase", e.phase},      {"free_bytes", e.free_bytes}, {"total_bytes", e.total_bytes},
                         {"message", e.what()}};
    j["verified"] = false;
    WriteJson(o.out, j);
    fmt::print("DOES NOT FIT: {}\n", e.what());
    fmt::print("RESULT scenario={} mode={} time_ms=- refit_ms=- extra_gib=- offload_fraction={:.2f} fits=false "
               "verified=false\n",
               plan.scenario, ModeLabel(plan), plan.offload_fraction);
    return kDoesNotFitExit;
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
