// The all-gather baseline's GPU run (see allgather_run.h).
#include "bench/gpu/allgather_run.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <nccl.h>

#include "bench/gpu/allgather_copy.h"
#include "bench/gpu/allgather_kernels.h"
#include "executor/nccl/gpu_check.h"
#include "executor/nccl/kernels.h"
#include "model/error.h"

namespace reshard::baseline {

namespace {

constexpr unsigned char kPoison = 0xA5;

std::string DescribeNoRoom(int gpu, const std::string& what, int64_t bytes, const std::string& phase, int64_t free,
                           int64_t total) {
  constexpr double kGiB = double(int64_t{1} << 30);
  std::string m =
      fmt::format("GPU {}: no room for {} ({:.3f} GiB) {}", gpu, what, static_cast<double>(bytes) / kGiB, phase);
  if (free >= 0)
    m += fmt::format(": {:.3f} GiB free of {:.3f} GiB", static_cast<double>(free) / kGiB,
                     static_cast<double>(total) / kGiB);
  return m;
}

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
  gpu::MismatchCount* counters = nullptr;
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

  RunResult Run(int warmup, int runs);

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
    RESHARD_GPU(cudaSetDevice(g.id));
    const cudaError_t e = pooled ? cudaMallocAsync(&ptr, static_cast<size_t>(bytes), g.stream)
                                 : cudaMalloc(&ptr, static_cast<size_t>(bytes));
    if (e == cudaErrorMemoryAllocation) NoRoom(g, what, bytes, phase);
    RESHARD_GPU(e);
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
  int64_t Verify(std::vector<CheckFailure>* failures);
  int64_t Offload(const Gpu& g) const { return memory_ ? p_.memory[static_cast<size_t>(g.id)].offload_bytes : 0; }

  const RefitPlan& p_;
  const bool memory_;
  std::vector<Gpu> gpus_;
};

void GpuRun::Setup() {
  int n = 0;
  RESHARD_GPU(cudaGetDeviceCount(&n));
  if (n < p_.gpus)
    throw InputError("<cli>", "scenario", fmt::format("needs {} GPUs, this host shows {}", p_.gpus, n));
  gpus_.resize(static_cast<size_t>(p_.gpus));
  const std::string setup = "before the refit (setup)";
  for (int32_t i = 0; i < p_.gpus; ++i) {
    Gpu& g = gpus_[static_cast<size_t>(i)];
    g.id = i;
    RESHARD_GPU(cudaSetDevice(i));
    RESHARD_GPU(cudaFree(nullptr));  // context
    RESHARD_GPU(cudaStreamCreateWithFlags(&g.stream, cudaStreamNonBlocking));
    int sms = 0;
    RESHARD_GPU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, i));
    g.max_blocks = sms * 8;
    if (memory_) {
      // The pool keeps what is freed (no trips to the driver mid-run), as reshard's executor.
      RESHARD_GPU(cudaDeviceGetDefaultMemPool(&g.pool, i));
      uint64_t keep = UINT64_MAX;
      RESHARD_GPU(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrReleaseThreshold, &keep));
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
    g.counters = reinterpret_cast<gpu::MismatchCount*>(Malloc(
        g,
        static_cast<int64_t>(std::max<size_t>(1, p_.check[static_cast<size_t>(i)].size()) * sizeof(gpu::MismatchCount)),
        &g.verification_bytes, "check counters", setup));
  }
  // Fill the sources, poison the destinations; load the copy kernel once (lazy module loading).
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    for (const PieceMap& m : p_.fill[static_cast<size_t>(g.id)])
      RESHARD_GPU(gpu::LaunchFill(g.arena[static_cast<size_t>(Arena::kSource)], m, g.stream, g.max_blocks));
    RESHARD_GPU(WarmCopyKernel(g.stream));
  }
  Poison();
  SyncAll();
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    size_t total = 0;
    RESHARD_GPU(cudaMemGetInfo(&g.free_before_nccl, &total));
    g.total = total;
  }
  std::vector<int> devs(static_cast<size_t>(p_.gpus));
  std::vector<ncclComm_t> comms(static_cast<size_t>(p_.gpus));
  for (int32_t i = 0; i < p_.gpus; ++i) devs[static_cast<size_t>(i)] = i;
  RESHARD_GPU(ncclCommInitAll(comms.data(), p_.gpus, devs.data()));
  for (int32_t i = 0; i < p_.gpus; ++i) gpus_[static_cast<size_t>(i)].comm = comms[static_cast<size_t>(i)];
  SampleFree();
  if (!memory_) return;

  // One refit connects NCCL (its buffers are allocated at the first collectives)
  // before the start state takes the memory; what it leaves is NCCL's.
  AllocateRefitArenas(setup + ", connecting NCCL");
  for (size_t k = 0; k < p_.steps.size(); ++k) EnqueueStep(k, nullptr);
  Restore();  // poisons and frees the refit arenas (nothing offloaded yet)
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    RESHARD_GPU(cudaMemPoolTrimTo(g.pool, 0));
    size_t free = 0, total = 0;
    RESHARD_GPU(cudaMemGetInfo(&free, &total));
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
    g.optimizer_kept =
        Malloc(g, m.optimizer_bytes - m.offload_bytes, nullptr, "optimizer state (kept on device)", phase);
    g.optimizer_offloaded =
        Malloc(g, m.offload_bytes, nullptr, "optimizer state (the part offloaded in each run)", phase, true);
    g.gradients = Malloc(g, m.gradient_bytes, nullptr, "gradients", phase);
    g.kv_cache = Malloc(g, m.kv_cache_bytes, nullptr, "KV cache", phase);
    g.reserve = Malloc(g, m.reserve_bytes, nullptr, "reserve", phase);
    // Poisoned: whatever memory a later refit buffer reuses holds no pattern.
    if (g.optimizer_kept)
      RESHARD_GPU(cudaMemsetAsync(g.optimizer_kept, kPoison, static_cast<size_t>(m.optimizer_bytes - m.offload_bytes),
                                  g.stream));
    if (g.optimizer_offloaded)
      RESHARD_GPU(cudaMemsetAsync(g.optimizer_offloaded, kPoison, static_cast<size_t>(m.offload_bytes), g.stream));
    if (m.offload_bytes > 0) {
      void* host = nullptr;
      const cudaError_t e = cudaHostAlloc(&host, static_cast<size_t>(m.offload_bytes), cudaHostAllocPortable);
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        throw DoesNotFit(g.id, "pinned host memory for the offloaded optimizer state", m.offload_bytes, phase, -1, -1);
      }
      RESHARD_GPU(e);
      g.host_optimizer = static_cast<unsigned char*>(host);
    }
  }
  SyncAll();
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    size_t total = 0;
    RESHARD_GPU(cudaMemGetInfo(&g.free_at_start, &total));
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
  g.descs =
      reinterpret_cast<DeviceCopy*>(Malloc(g, bytes, &g.extra_bytes, "copy descriptors", "before the refit (setup)"));
  RESHARD_GPU(cudaMemcpy(g.descs, host.data(), static_cast<size_t>(bytes), cudaMemcpyHostToDevice));
}

void GpuRun::SampleFree() {
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    size_t free = 0, total = 0;
    RESHARD_GPU(cudaMemGetInfo(&free, &total));
    g.min_free = std::min(g.min_free, free);
  }
}

void GpuRun::SyncAll() {
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    RESHARD_GPU(cudaStreamSynchronize(g.stream));
  }
}

void GpuRun::Poison() {
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    if (unsigned char* d = g.arena[static_cast<size_t>(Arena::kDestination)])
      RESHARD_GPU(cudaMemsetAsync(d, kPoison, static_cast<size_t>(p_.ArenaBytes(g.id, Arena::kDestination)), g.stream));
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
    RESHARD_GPU(cudaSetDevice(g.id));
    if (const int64_t bytes = Offload(g); bytes > 0) {
      RESHARD_GPU(cudaMemcpyAsync(g.host_optimizer, g.optimizer_offloaded, static_cast<size_t>(bytes),
                              cudaMemcpyDeviceToHost, g.stream));
      RESHARD_GPU(cudaFreeAsync(g.optimizer_offloaded, g.stream));
      g.optimizer_offloaded = nullptr;
    }
    if (offloaded) RESHARD_GPU(cudaEventRecord((*offloaded)[static_cast<size_t>(g.id)], g.stream));
  }
  AllocateRefitArenas("during the refit (after the offload)");
}

// Memory modelled, untimed after a run: poison and free the refit's buffers,
// bring the offloaded part back. Retries once after trimming the pool (its
// free blocks may be split where one block of the offloaded size is needed).
void GpuRun::Restore() {
  SyncAll();
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    for (Arena a : kRefitArenas) {
      unsigned char*& ptr = g.arena[static_cast<size_t>(a)];
      if (!ptr) continue;
      RESHARD_GPU(cudaMemsetAsync(ptr, kPoison, static_cast<size_t>(p_.ArenaBytes(g.id, a)), g.stream));
      RESHARD_GPU(cudaFreeAsync(ptr, g.stream));
      ptr = nullptr;
    }
  }
  SyncAll();
  for (Gpu& g : gpus_) {
    const int64_t bytes = Offload(g);
    if (bytes <= 0 || g.optimizer_offloaded || !g.host_optimizer) continue;
    RESHARD_GPU(cudaSetDevice(g.id));
    void* ptr = nullptr;
    cudaError_t e = cudaMallocAsync(&ptr, static_cast<size_t>(bytes), g.stream);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      RESHARD_GPU(cudaStreamSynchronize(g.stream));
      RESHARD_GPU(cudaMemPoolTrimTo(g.pool, 0));
      e = cudaMallocAsync(&ptr, static_cast<size_t>(bytes), g.stream);
    }
    if (e == cudaErrorMemoryAllocation)
      NoRoom(g, "optimizer state (the offloaded part, back)", bytes, "restoring after a run");
    RESHARD_GPU(e);
    g.optimizer_offloaded = static_cast<unsigned char*>(ptr);
    RESHARD_GPU(cudaMemcpyAsync(g.optimizer_offloaded, g.host_optimizer, static_cast<size_t>(bytes),
                                cudaMemcpyHostToDevice, g.stream));
  }
  SyncAll();
}

// phase (optional): 3 events per GPU are recorded: before the collective, after it, after the unpack.
void GpuRun::EnqueueStep(size_t k, std::vector<cudaEvent_t>* phase) {
  const Step& st = p_.steps[k];
  auto mark = [&](int which) {
    if (!phase) return;
    for (Gpu& g : gpus_) {
      RESHARD_GPU(cudaSetDevice(g.id));
      RESHARD_GPU(cudaEventRecord((*phase)[static_cast<size_t>(g.id * 3 + which)], g.stream));
    }
  };
  for (Gpu& g : gpus_) {
    const Launch& l = g.pack[k];
    if (l.count == 0) continue;
    RESHARD_GPU(cudaSetDevice(g.id));
    RESHARD_GPU(LaunchCopies(g.descs + l.first, l.count, l.chunks, g.Bases(), g.max_blocks, g.stream));
  }
  mark(0);
  if (st.kind == StepKind::kAllGather || st.kind == StepKind::kBroadcast) {
    RESHARD_GPU(ncclGroupStart());
    for (Gpu& g : gpus_) {
      unsigned char* bucket = g.arena[static_cast<size_t>(Arena::kBucket)];
      const unsigned char* send =
          g.arena[static_cast<size_t>(st.send_arena)] + st.send_offset[static_cast<size_t>(g.id)];
      const size_t count = static_cast<size_t>(st.send_bytes);
      if (st.kind == StepKind::kAllGather) {
        RESHARD_GPU(ncclAllGather(send, bucket, count, ncclInt8, g.comm, g.stream));
      } else {
        RESHARD_GPU(ncclBroadcast(g.id == st.root ? send : bucket, bucket, count, ncclInt8, st.root, g.comm, g.stream));
      }
    }
    RESHARD_GPU(ncclGroupEnd());
  } else if (st.kind == StepKind::kFlat) {
    RESHARD_GPU(ncclGroupStart());
    for (const FlatSend& f : st.sends) {
      Gpu& from = gpus_[static_cast<size_t>(f.from)];
      Gpu& to = gpus_[static_cast<size_t>(f.to)];
      RESHARD_GPU(ncclSend(from.arena[static_cast<size_t>(Arena::kSource)] + f.src_offset, static_cast<size_t>(f.bytes),
                       ncclInt8, f.to, from.comm, from.stream));
      RESHARD_GPU(ncclRecv(to.arena[static_cast<size_t>(Arena::kStaging)] + f.dst_offset, static_cast<size_t>(f.bytes),
                       ncclInt8, f.from, to.comm, to.stream));
    }
    RESHARD_GPU(ncclGroupEnd());
  }
  mark(1);
  for (Gpu& g : gpus_) {
    const Launch& l = g.unpack[k];
    if (l.count == 0) continue;
    RESHARD_GPU(cudaSetDevice(g.id));
    RESHARD_GPU(LaunchCopies(g.descs + l.first, l.count, l.chunks, g.Bases(), g.max_blocks, g.stream));
  }
  mark(2);
}
int64_t GpuRun::Verify(std::vector<CheckFailure>* failures) {
  int64_t bad = 0;
  for (Gpu& g : gpus_) {
    const auto& checks = p_.check[static_cast<size_t>(g.id)];
    if (checks.empty()) continue;
    RESHARD_GPU(cudaSetDevice(g.id));
    std::vector<gpu::MismatchCount> init(checks.size(), gpu::MismatchCount{0, ULLONG_MAX});
    RESHARD_GPU(cudaMemcpy(g.counters, init.data(), init.size() * sizeof(gpu::MismatchCount), cudaMemcpyHostToDevice));
    for (size_t i = 0; i < checks.size(); ++i)
      RESHARD_GPU(gpu::LaunchCheck(g.arena[static_cast<size_t>(Arena::kDestination)], checks[i], g.counters + i,
                                   g.stream, g.max_blocks));
    RESHARD_GPU(cudaStreamSynchronize(g.stream));
    RESHARD_GPU(cudaMemcpy(init.data(), g.counters, init.size() * sizeof(gpu::MismatchCount), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < checks.size(); ++i) {
      if (init[i].mismatches == 0) continue;
      bad += static_cast<int64_t>(init[i].mismatches);
      if (failures->size() < 16)
        failures->push_back(
            {g.id, p_.tensor_names[static_cast<size_t>(checks[i].tensor)], init[i].mismatches, init[i].first_index});
    }
  }
  return bad;
}

RunResult GpuRun::Run(int warmup, int runs) {
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
      RESHARD_GPU(cudaSetDevice(g.id));
      for (int i = 0; i < 3; ++i) RESHARD_GPU(cudaEventCreate(&ev[static_cast<size_t>(g.id * 3 + i)]));
      RESHARD_GPU(cudaEventCreate(&first[static_cast<size_t>(g.id)]));
    }
    if (memory_) BeginRefit(nullptr);
    Poison();
    SyncAll();
    for (Gpu& g : gpus_) {
      RESHARD_GPU(cudaSetDevice(g.id));
      RESHARD_GPU(cudaEventRecord(first[static_cast<size_t>(g.id)], g.stream));
    }
    std::vector<cudaEvent_t> prev = first;
    for (size_t k = 0; k < steps; ++k) {
      EnqueueStep(k, &ev);
      SyncAll();  // events are reused per step; the sync adds host gaps between steps, not inside phases
      for (Gpu& g : gpus_) {
        const size_t i = static_cast<size_t>(g.id);
        float a = 0, b = 0, c = 0;
        RESHARD_GPU(cudaEventElapsedTime(&a, prev[i], ev[i * 3 + 0]));
        RESHARD_GPU(cudaEventElapsedTime(&b, ev[i * 3 + 0], ev[i * 3 + 1]));
        RESHARD_GPU(cudaEventElapsedTime(&c, ev[i * 3 + 1], ev[i * 3 + 2]));
        phase_s[i][0] += a * 1e-3, phase_s[i][1] += b * 1e-3, phase_s[i][2] += c * 1e-3;
      }
      // Next step's pack starts after this step's unpack: measure from a fresh event.
      for (Gpu& g : gpus_) {
        RESHARD_GPU(cudaSetDevice(g.id));
        RESHARD_GPU(cudaEventRecord(first[static_cast<size_t>(g.id)], g.stream));
      }
      prev = first;
    }
    for (Gpu& g : gpus_) {
      RESHARD_GPU(cudaSetDevice(g.id));
      for (int i = 0; i < 3; ++i) cudaEventDestroy(ev[static_cast<size_t>(g.id * 3 + i)]);
      cudaEventDestroy(first[static_cast<size_t>(g.id)]);
    }
  }
  SampleFree();
  if (memory_) Restore();

  std::vector<cudaEvent_t> start(n), end(n), offloaded(n), flat_ev(n * 3);
  for (Gpu& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g.id));
    RESHARD_GPU(cudaEventCreate(&start[static_cast<size_t>(g.id)]));
    RESHARD_GPU(cudaEventCreate(&end[static_cast<size_t>(g.id)]));
    RESHARD_GPU(cudaEventCreate(&offloaded[static_cast<size_t>(g.id)]));
    for (int i = 0; i < 3; ++i) RESHARD_GPU(cudaEventCreate(&flat_ev[static_cast<size_t>(g.id * 3 + i)]));
  }
  for (Gpu& g : gpus_) {  // the pool's high-water marks from here on: the timed runs' own
    if (!g.pool) continue;
    uint64_t zero = 0;
    RESHARD_GPU(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrReservedMemHigh, &zero));
    RESHARD_GPU(cudaMemPoolSetAttribute(g.pool, cudaMemPoolAttrUsedMemHigh, &zero));
  }
  // --flat: time_s ends when the exchange does (events around the flat step's collective).
  // Memory modelled: the clock starts before the offload (it counts, as reshard's own does).
  const bool flat = p_.options.transport == Transport::kFlat;
  std::vector<double> times, flat_times, host_times, offload_times;
  std::vector<CheckFailure> failures;
  int64_t bad = 0;
  for (int r = 0; r < runs; ++r) {
    if (!memory_) Poison();  // memory modelled: Restore poisoned the refit buffers before freeing them
    SyncAll();
    const auto t0 = std::chrono::steady_clock::now();
    for (Gpu& g : gpus_) {
      RESHARD_GPU(cudaSetDevice(g.id));
      RESHARD_GPU(cudaEventRecord(start[static_cast<size_t>(g.id)], g.stream));
    }
    if (memory_) BeginRefit(&offloaded);
    for (size_t k = 0; k < steps; ++k)
      EnqueueStep(k, flat && p_.steps[k].kind == StepKind::kFlat ? &flat_ev : nullptr);
    for (Gpu& g : gpus_) {
      RESHARD_GPU(cudaSetDevice(g.id));
      RESHARD_GPU(cudaEventRecord(end[static_cast<size_t>(g.id)], g.stream));
    }
    SyncAll();
    host_times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    double t = 0, tf = 0, to = 0;
    for (Gpu& g : gpus_) {
      const size_t i = static_cast<size_t>(g.id);
      float ms = 0;
      RESHARD_GPU(cudaEventElapsedTime(&ms, start[i], end[i]));
      t = std::max(t, ms * 1e-3);
      if (flat) {
        RESHARD_GPU(cudaEventElapsedTime(&ms, start[i], flat_ev[i * 3 + 1]));
        tf = std::max(tf, ms * 1e-3);
      }
      if (memory_) {
        RESHARD_GPU(cudaEventElapsedTime(&ms, start[i], offloaded[i]));
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
    RESHARD_GPU(cudaSetDevice(g.id));
    cudaEventDestroy(start[static_cast<size_t>(g.id)]);
    cudaEventDestroy(end[static_cast<size_t>(g.id)]);
    cudaEventDestroy(offloaded[static_cast<size_t>(g.id)]);
    for (int i = 0; i < 3; ++i) cudaEventDestroy(flat_ev[static_cast<size_t>(g.id * 3 + i)]);
  }

  RunResult out;
  out.times_s = times;
  out.flat_times_s = flat_times;
  out.host_times_s = host_times;
  out.offload_times_s = offload_times;
  out.mismatches = bad;
  out.failures = std::move(failures);
  out.warmup = warmup;
  out.runs = runs;
  for (Gpu& g : gpus_) {
    GpuResult r;
    r.gpu = g.id;
    r.weights_bytes = g.weights_bytes;
    r.extra_tracked_bytes = g.extra_bytes;
    r.nccl_bytes = memory_ ? g.nccl_bytes : static_cast<int64_t>(g.free_before_nccl) - static_cast<int64_t>(g.min_free);
    r.verification_bytes = g.verification_bytes;
    r.device_total_bytes = g.total;
    r.device_used_peak_bytes = static_cast<int64_t>(g.total) - static_cast<int64_t>(g.min_free);
    r.breakdown_s = phase_s[static_cast<size_t>(g.id)];
    if (memory_) {
      r.device_used_at_start_bytes = static_cast<int64_t>(g.total) - static_cast<int64_t>(g.free_at_start);
      RESHARD_GPU(cudaMemPoolGetAttribute(g.pool, cudaMemPoolAttrUsedMemHigh, &r.pool_used_high_bytes));
      RESHARD_GPU(cudaMemPoolGetAttribute(g.pool, cudaMemPoolAttrReservedMemHigh, &r.pool_reserved_high_bytes));
    }
    out.gpus.push_back(r);
  }
  ncclGetVersion(&out.nccl_version);
  cudaDeviceProp prop{};
  RESHARD_GPU(cudaGetDeviceProperties(&prop, 0));
  out.device = prop.name;
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  out.nccl_nvls_enable = nvls ? nvls : "";
  return out;
}

}  // namespace

DoesNotFit::DoesNotFit(int gpu_, std::string what_, int64_t bytes_, std::string phase_, int64_t free_, int64_t total_)
    : std::runtime_error(DescribeNoRoom(gpu_, what_, bytes_, phase_, free_, total_)), gpu(gpu_),
      allocation(std::move(what_)), bytes(bytes_), phase(std::move(phase_)), free_bytes(free_), total_bytes(total_) {}

RunResult RunOnGpus(const RefitPlan& p, int warmup, int runs) {
  GpuRun run(p);
  return run.Run(warmup, runs);
}

}  // namespace reshard::baseline
