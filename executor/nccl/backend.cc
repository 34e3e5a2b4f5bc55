// NcclBackend: CUDA streams, events, the stream-ordered allocator and NCCL.
// Every CUDA / NCCL call goes through RESHARD_GPU (throws GpuError with file,
// line and the library's message) or, during cleanup, RESHARD_GPU_CLEANUP
// (keeps the first error, carries on releasing).
#include "executor/nccl/backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "executor/executor.h"
#include "executor/mpi_session.h"
#include "executor/nccl/kernels.h"
#include "model/error.h"

namespace reshard {

namespace {

using nccl_detail::CheckSlot;
using nccl_detail::CopyDesc;

// ---- the one boundary for foreign errors ------------------------------------

std::string Where(const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  return fmt::format("{}:{}", slash != nullptr ? slash + 1 : file, line);
}
std::string Describe(cudaError_t e) { return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e)); }
std::string Describe(ncclResult_t r) {
  const char* last = ncclGetLastError(nullptr);
  return fmt::format("{}{}{}", ncclGetErrorString(r), last != nullptr && *last != '\0' ? ": " : "",
                     last != nullptr ? last : "");
}
bool Ok(cudaError_t e) { return e == cudaSuccess; }
bool Ok(ncclResult_t r) { return r == ncclSuccess; }

template <typename Status>
void CheckStatus(Status s, const char* call, const char* file, int line) {
  if (!Ok(s)) throw GpuError(fmt::format("{}: {} failed: {}", Where(file, line), call, Describe(s)));
}

// Cleanup keeps going after a failure; the first message is kept.
struct FirstError {
  std::string message;
  template <typename Status>
  void Note(Status s, const char* call, const char* file, int line) {
    if (!Ok(s) && message.empty()) message = fmt::format("{}: {} failed: {}", Where(file, line), call, Describe(s));
  }
};

#define RESHARD_GPU(call) CheckStatus((call), #call, __FILE__, __LINE__)
#define RESHARD_GPU_CLEANUP(errors, call) (errors).Note((call), #call, __FILE__, __LINE__)

// NCCL calls on non-blocking communicators may answer ncclInProgress: the
// call was accepted and completes in the background (WaitComms waits for it,
// bounded). Any other status throws, as RESHARD_GPU does.
void CheckNccl(ncclResult_t r, const char* call, const char* file, int line) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  CheckStatus(r, call, file, line);
}
#define RESHARD_NCCL(call) CheckNccl((call), #call, __FILE__, __LINE__)

using Clock = std::chrono::steady_clock;

// ---- helpers -----------------------------------------------------------------

int64_t UsedBytes() {
  size_t free_b = 0, total_b = 0;
  RESHARD_GPU(cudaMemGetInfo(&free_b, &total_b));
  return static_cast<int64_t>(total_b - free_b);
}

uint64_t PoolAttr(cudaMemPool_t pool, cudaMemPoolAttr attr) {
  uint64_t v = 0;
  RESHARD_GPU(cudaMemPoolGetAttribute(pool, attr, &v));
  return v;
}

void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load();
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

// Geometry of one side of a copy for the kernel: contiguous regions become
// one row of all their bytes.
struct Side {
  int64_t row, plane, row_stride, plane_stride;
  int64_t run_limit;  // longest stretch contiguous in memory that a run may span
};
Side SideOf(const Region& r) {
  if (r.Contiguous()) return {r.Bytes(), r.Bytes(), 0, 0, r.Bytes()};
  return {r.row_bytes, r.row_bytes * r.rows, r.rows > 1 ? r.row_stride_bytes : 0,
          r.planes > 1 ? r.plane_stride_bytes : 0, r.row_bytes};
}

int32_t VecBytes(uint64_t alignment_bits) {
  int32_t v = 16;
  while (v > 1 && (alignment_bits & static_cast<uint64_t>(v - 1)) != 0) v /= 2;
  return v;
}

bool SameShape(const Region& a, const Region& b) {
  return a.row_bytes == b.row_bytes && a.rows == b.rows && a.planes == b.planes;
}

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(const NcclBackendOptions& o) : opt_(o) {
    // Read when a context is created. CUDA maps streams onto this many
    // hardware queues (default 8); streams sharing a queue are falsely
    // serialised, so a long offload queued on the host stream would hold up
    // the compute and NCCL streams that landed on its queue.
    setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0);
    // Load every module when the context is created: a lazily loaded
    // kernel's first launch waits for all work queued on the device.
    setenv("CUDA_MODULE_LOADING", "EAGER", 0);
  }
  ~NcclBackend() override {
    FirstError errors;
    Release(errors);
    DestroyGpus(errors);  // synchronizes: no gate kernel reads the flag after this
    if (gate_ != nullptr) (void)cudaFreeHost(const_cast<int*>(gate_));
  }

  std::string Name() const override { return "nccl"; }
  const MpiSession* Processes() const override { return opt_.mpi; }
  std::vector<int32_t> LocalGpus() const override { return local_gpus_; }

  void Begin(const Plan& plan) override {
    FirstError leftovers;
    Release(leftovers);  // a previous run that failed half-way
    if (const std::string why = FaultProblem(opt_.fault, plan); !why.empty())
      throw InputError("<environment>", "RESHARD_FAULT", why);
    failed_gpu_ = -1;
    plan_ = &plan;
    ptr_.assign(plan.buffers.size(), nullptr);
    start_ev_.assign(plan.ops.size(), nullptr);
    end_ev_.assign(plan.ops.size(), nullptr);
    last_started_ = -1;
    checks_.clear();
    const int32_t gpus = plan.Gpus();
    const int32_t procs = opt_.mpi != nullptr ? opt_.mpi->size() : 1;
    const int32_t rank = opt_.mpi != nullptr ? opt_.mpi->rank() : 0;
    const std::vector<int32_t> local = GpuBlock(gpus, procs, rank);
    const std::vector<int> devices = ChooseDevices(plan, local, procs);
    const bool needs_comm = std::any_of(plan.ops.begin(), plan.ops.end(), [](const Op& op) {
      return op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
    });

    // Contexts and communicators are kept across runs of the same GPU set.
    if (gpus != gpu_count_ || local != local_gpus_ || devices != devices_) {
      FirstError errors;
      DestroyGpus(errors);
      if (!errors.message.empty()) throw GpuError(errors.message);
      gpu_count_ = gpus;
      local_gpus_ = local;
      devices_ = devices;
      for (size_t i = 0; i < local.size(); ++i) {
        auto g = std::make_unique<Gpu>();
        g->gpu = local[i];
        g->device = devices[i];
        RESHARD_GPU(cudaSetDevice(g->device));
        RESHARD_GPU(cudaFree(nullptr));  // creates the context
        g->context_bytes = UsedBytes();
        RESHARD_GPU(cudaDeviceGetAttribute(&g->sms, cudaDevAttrMultiProcessorCount, g->device));
        RESHARD_GPU(cudaDeviceGetDefaultMemPool(&g->pool, g->device));
        // Keep freed blocks in the pool during a run (no trips to the driver
        // mid-run) and add no hidden cross-stream dependencies for reuse.
        uint64_t keep = UINT64_MAX;
        RESHARD_GPU(cudaMemPoolSetAttribute(g->pool, cudaMemPoolAttrReleaseThreshold, &keep));
        // RESHARD_POOL_INTERNAL_DEPS=1 lets the pool add them (experiment).
        const char* internal = std::getenv("RESHARD_POOL_INTERNAL_DEPS");
        int allow = internal != nullptr && std::string(internal) == "1" ? 1 : 0;
        RESHARD_GPU(cudaMemPoolSetAttribute(g->pool, cudaMemPoolReuseAllowInternalDependencies, &allow));
        gpus_state_.push_back(std::move(g));
      }
      index_.assign(gpus, -1);
      for (size_t i = 0; i < local.size(); ++i) index_[local[i]] = static_cast<int32_t>(i);
    }
    if (needs_comm && gpus_state_.front()->comm == nullptr) CreateComms(gpus, rank);

    const size_t streams = std::max<size_t>(plan.stream_names.size(), 1);
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      // Streams live as long as the backend: fewer streams created, fewer
      // chances of two sharing a hardware queue.
      // The comm stream gets the highest priority: when an unpack and the next
      // NCCL group become ready together, NCCL's blocks are placed first instead
      // of waiting for SMs a copy kernel holds (NVLink lost 17-23 % beside a copy
      // launched first, 6-8 % beside one launched after it:
      // bench/results/2026-11-30-h200x2-nccl-group-probe.md).
      // RESHARD_COMM_STREAM_PRIORITY=0 turns this off.
      int least = 0, greatest = 0;
      RESHARD_GPU(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      const char* prio_env = std::getenv("RESHARD_COMM_STREAM_PRIORITY");
      const bool prioritise = prio_env == nullptr || std::string(prio_env) != "0";
      while (g->streams.size() < streams) {
        const size_t i = g->streams.size();
        const bool comm = i < plan.stream_names.size() && plan.stream_names[i] == "comm";
        cudaStream_t s = nullptr;
        RESHARD_GPU(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, comm && prioritise ? greatest : least));
        g->streams.push_back(s);
      }
      RESHARD_GPU(nccl_detail::WarmKernels(g->streams[0]));  // modules loaded before any timing
      RESHARD_GPU(cudaEventCreate(&g->ref));
      g->host_bytes = g->host_peak = 0;
      g->arena_cursor = 0;
      g->arena_capacity = 0;
    }
    begun_ = true;  // from here on Release() undoes whatever exists
    if (opt_.warm_pool) WarmPool(plan);
    // Per-op events and the descriptor arenas of large copy batches.
    for (const Op& op : plan.ops) {
      if (!IsLocal(op.gpu)) continue;
      Gpu& g = State(op.gpu);
      RESHARD_GPU(cudaSetDevice(g.device));
      RESHARD_GPU(cudaEventCreate(&start_ev_[op.id]));
      RESHARD_GPU(cudaEventCreate(&end_ev_[op.id]));
      if (op.kind == OpKind::kCopy || op.kind == OpKind::kOffload || op.kind == OpKind::kReload) {
        if (static_cast<int64_t>(op.copies.size()) > nccl_detail::kCopyDescsByValue)
          g.arena_capacity += static_cast<int64_t>(op.copies.size());
      }
    }
    for (auto& g : gpus_state_) {
      if (g->arena_capacity == 0) continue;
      RESHARD_GPU(cudaSetDevice(g->device));
      const size_t bytes = static_cast<size_t>(g->arena_capacity) * sizeof(CopyDesc);
      RESHARD_GPU(cudaMalloc(reinterpret_cast<void**>(&g->arena_device), bytes));
      RESHARD_GPU(cudaHostAlloc(reinterpret_cast<void**>(&g->arena_host), bytes,
                                cudaHostAllocPortable | cudaHostAllocMapped));
    }
    // Pinned host buffers, all before timing.
    for (const PlanBuffer& b : plan.buffers) {
      if (b.space != MemorySpace::kHost || !IsLocal(b.gpu)) continue;
      RESHARD_GPU(cudaSetDevice(State(b.gpu).device));
      RESHARD_GPU(cudaHostAlloc(&ptr_[b.id], static_cast<size_t>(std::max<int64_t>(b.bytes, 1)),
                                cudaHostAllocPortable | cudaHostAllocMapped));
      std::memset(ptr_[b.id], kPoison, static_cast<size_t>(b.bytes));
    }
  }

  void Warmup(const std::vector<std::pair<int32_t, int32_t>>& pairs) override {
    if (pairs.empty() || gpus_state_.front()->comm == nullptr) return;
    // Message per pair: the plan's largest to that peer, capped.
    std::vector<int64_t> size(pairs.size(), 1);
    for (const Op& op : plan_->ops) {
      if (op.kind != OpKind::kSend) continue;
      const auto it = std::lower_bound(pairs.begin(), pairs.end(), std::make_pair(op.gpu, op.peer));
      if (it != pairs.end() && *it == std::make_pair(op.gpu, op.peer)) {
        int64_t& s = size[it - pairs.begin()];
        s = std::min(opt_.warmup_bytes, std::max(s, op.region.Bytes()));
      }
    }
    const int64_t most = *std::max_element(size.begin(), size.end());
    std::vector<void*> tmp(gpus_state_.size(), nullptr);
    for (size_t i = 0; i < gpus_state_.size(); ++i) {
      RESHARD_GPU(cudaSetDevice(gpus_state_[i]->device));
      RESHARD_GPU(cudaMalloc(&tmp[i], static_cast<size_t>(most)));
    }
    // One group per pair, in the same order in every process.
    for (size_t k = 0; k < pairs.size(); ++k) {
      const auto [from, to] = pairs[k];
      if (!IsLocal(from) && !IsLocal(to)) continue;
      RESHARD_NCCL(ncclGroupStart());
      if (IsLocal(from)) {
        Gpu& g = State(from);
        RESHARD_NCCL(ncclSend(tmp[index_[from]], static_cast<size_t>(size[k]), ncclUint8, to, g.comm, g.streams[0]));
      }
      if (IsLocal(to)) {
        Gpu& g = State(to);
        RESHARD_NCCL(ncclRecv(tmp[index_[to]], static_cast<size_t>(size[k]), ncclUint8, from, g.comm, g.streams[0]));
      }
      RESHARD_NCCL(ncclGroupEnd());
      WaitComms(fmt::format("the warm-up transfer GPU {} -> GPU {}", from, to));
    }
    WaitStreams("the warm-up transfers");  // bounded: a peer that never answers aborts, not hangs
    for (size_t i = 0; i < gpus_state_.size(); ++i) {
      Gpu& g = *gpus_state_[i];
      RESHARD_GPU(cudaSetDevice(g.device));
      RESHARD_GPU(cudaFree(tmp[i]));
      g.comm_bytes = std::max(g.comm_bytes, UsedBytes() - g.context_bytes - PoolReserved(g));
    }
  }

  void End() override {
    for (const auto& g : gpus_state_) {
      if (g->alloc_retries > g->alloc_drains)
        std::cerr << fmt::format("note: GPU {}: {} allocation(s) fit only once the frees they follow had run (the "
                                 "pool reuses memory freed on another stream once that free has run)\n",
                                 g->gpu, g->alloc_retries - g->alloc_drains);
      if (g->alloc_drains > 0)
        std::cerr << fmt::format("warning: GPU {}: {} allocation(s) fit only after waiting for the whole GPU to drain "
                                 "(allocator fragmentation: the run was serialised there)\n",
                                 g->gpu, g->alloc_drains);
      g->alloc_retries = g->alloc_drains = 0;
    }
    FirstError errors;
    Release(errors);
    if (!errors.message.empty()) throw GpuError(errors.message);
  }

  void Allocate(const PlanBuffer& b, int32_t stream) override {
    Gpu& g = State(b.gpu);
    if (b.space == MemorySpace::kHost) {  // pinned in Begin; only accounted here
      g.host_bytes += b.bytes;
      g.host_peak = std::max(g.host_peak, g.host_bytes);
      return;
    }
    RESHARD_CHECK(ptr_[b.id] == nullptr, fmt::format("buffer {} allocated twice", b.id));
    RESHARD_GPU(cudaSetDevice(g.device));
    cudaStream_t s = g.streams[std::max(stream, 0)];
    cudaError_t e = cudaMallocAsync(&ptr_[b.id], static_cast<size_t>(std::max<int64_t>(b.bytes, 1)), s);
    if (e == cudaErrorMemoryAllocation && stream >= 0) {
      // The pool places an allocation inside one freed block and reuses a
      // block freed on another stream once the allocating stream waits for an
      // event recorded after that free (cudaMemPoolReuseFollowEventDependencies):
      // this queue waits (on the GPU) for the frees issued on this GPU's other
      // queues, oldest first, one more per retry, and drains the GPU only
      // last. (qwen3 on 2x H200: neither this nor a host wait made a block
      // freed behind a long offload queue reusable before that queue was done;
      // the planner frees such releases on the allocating stream instead.)
      (void)cudaGetLastError();
      ++g.alloc_retries;
      for (size_t k = 0; e == cudaErrorMemoryAllocation && k < g.issued_frees.size(); ++k) {
        const int32_t f = g.issued_frees[k];
        if (plan_->ops[f].stream == stream) continue;  // stream order: the pool sees it already
        (void)cudaGetLastError();
        WaitOp(b.gpu, stream, f);
        RESHARD_GPU(cudaSetDevice(g.device));
        e = cudaMallocAsync(&ptr_[b.id], static_cast<size_t>(std::max<int64_t>(b.bytes, 1)), s);
      }
      if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        ++g.alloc_drains;
        WaitStreams(fmt::format("waiting for GPU {} to drain before retrying an allocation", b.gpu));  // bounded
        RESHARD_GPU(cudaSetDevice(g.device));
        e = cudaMallocAsync(&ptr_[b.id], static_cast<size_t>(std::max<int64_t>(b.bytes, 1)), s);
      }
    }
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      (void)cudaMemGetInfo(&free_b, &total_b);
      throw GpuError(fmt::format("GPU {} (device {}): out of memory allocating buffer {} '{}' ({:.3f} GiB, {}): {:.3f} "
                                 "GiB of {:.3f} GiB in use, of which the allocator's pool holds {:.3f} GiB, the CUDA "
                                 "context {:.3f} GiB and NCCL {:.3f} GiB",
                                 b.gpu, g.device, b.id, b.name, b.bytes / double(1 << 30),
                                 stream < 0 ? "preexisting" : "during the run", (total_b - free_b) / double(1 << 30),
                                 total_b / double(1 << 30), PoolReserved(g) / double(1 << 30),
                                 g.context_bytes / double(1 << 30), g.comm_bytes / double(1 << 30)));
    }
    RESHARD_GPU(e);
    if (stream < 0) RESHARD_GPU(cudaMemsetAsync(ptr_[b.id], kPoison, static_cast<size_t>(b.bytes), s));
  }

  void Free(const PlanBuffer& b, int32_t stream) override {
    Gpu& g = State(b.gpu);
    if (b.space == MemorySpace::kHost) {
      g.host_bytes -= b.bytes;
      return;
    }
    RESHARD_CHECK(ptr_[b.id] != nullptr, fmt::format("buffer {} freed while not allocated", b.id));
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_GPU(cudaFreeAsync(ptr_[b.id], g.streams[stream]));
    if (last_started_ >= 0) g.issued_frees.push_back(last_started_);
    ptr_[b.id] = nullptr;
  }

  void Copy(int32_t gpu, int32_t stream, std::span<const CopyPair> pairs) override {
    if (gpu == failed_gpu_) return;  // injected fault
    Gpu& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    cudaStream_t s = g.streams[stream];
    std::vector<CopyDesc> descs;
    int64_t chunks = 0;
    for (const CopyPair& c : pairs) {
      const int64_t bytes = c.src.Bytes();
      if (bytes == 0) continue;
      auto* src = static_cast<unsigned char*>(Ptr(c.src.buffer)) + c.src.offset_bytes;
      auto* dst = static_cast<unsigned char*>(Ptr(c.dst.buffer)) + c.dst.offset_bytes;
      const bool host = !opt_.host_copies_by_kernel && (plan_->buffers[c.src.buffer].space == MemorySpace::kHost ||
                                                         plan_->buffers[c.dst.buffer].space == MemorySpace::kHost);
      if (host && c.src.Contiguous() && c.dst.Contiguous()) {  // copy engine
        RESHARD_GPU(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDefault, s));
        continue;
      }
      if (host && SameShape(c.src, c.dst)) {  // copy engine, one 2-D copy per plane
        const size_t width = static_cast<size_t>(c.src.row_bytes);
        const size_t spitch = c.src.rows > 1 ? static_cast<size_t>(c.src.row_stride_bytes) : width;
        const size_t dpitch = c.dst.rows > 1 ? static_cast<size_t>(c.dst.row_stride_bytes) : width;
        for (int64_t p = 0; p < c.src.planes; ++p) {
          RESHARD_GPU(cudaMemcpy2DAsync(dst + p * c.dst.plane_stride_bytes, dpitch, src + p * c.src.plane_stride_bytes,
                                        spitch, width, static_cast<size_t>(c.src.rows), cudaMemcpyDefault, s));
        }
        continue;
      }
      // Kernel (pinned host memory is reachable from the device through UVA).
      const Side a = SideOf(c.src), b = SideOf(c.dst);
      CopyDesc d;
      d.src = src;
      d.dst = dst;
      d.run = std::gcd(a.run_limit, b.run_limit);
      d.runs = bytes / d.run;
      d.chunk = std::min(d.run, nccl_detail::kCopyChunkBytes);
      d.chunks_per_run = (d.run + d.chunk - 1) / d.chunk;
      if (d.run < nccl_detail::kShortRunBytes && d.runs > 1)
        d.runs_per_chunk = static_cast<int32_t>(
            std::min<int64_t>({32, d.runs, std::max<int64_t>(1, nccl_detail::kShortRunChunkBytes / d.run)}));
      d.src_row = a.row;
      d.src_plane = a.plane;
      d.src_row_stride = a.row_stride;
      d.src_plane_stride = a.plane_stride;
      d.dst_row = b.row;
      d.dst_plane = b.plane;
      d.dst_row_stride = b.row_stride;
      d.dst_plane_stride = b.plane_stride;
      const uint64_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                            static_cast<uint64_t>(d.run | d.chunk | a.row | a.row_stride | a.plane_stride | b.row |
                                                  b.row_stride | b.plane_stride);
      d.vec = VecBytes(bits);
      d.chunk_begin = chunks;
      chunks += d.runs_per_chunk > 1 ? (d.runs + d.runs_per_chunk - 1) / d.runs_per_chunk : d.runs * d.chunks_per_run;
      d.chunk_end = chunks;
      descs.push_back(d);
    }
    if (descs.empty()) return;
    const int32_t count = static_cast<int32_t>(descs.size());
    int32_t max_blocks = g.sms * std::max(opt_.copy_blocks_per_sm, 1);
    const int32_t cap = opt_.copy_max_blocks < 0 ? std::max(g.sms / 2, 1) : opt_.copy_max_blocks;
    if (cap > 0) max_blocks = std::min(max_blocks, cap);
    if (count <= nccl_detail::kCopyDescsByValue) {
      RESHARD_GPU(nccl_detail::LaunchCopy(descs.data(), count, chunks, false, s, max_blocks));
      return;
    }
    RESHARD_CHECK(g.arena_cursor + count <= g.arena_capacity, "copy descriptor arena overflow");
    CopyDesc* host = g.arena_host + g.arena_cursor;
    CopyDesc* dev = g.arena_device + g.arena_cursor;
    g.arena_cursor += count;
    std::memcpy(host, descs.data(), descs.size() * sizeof(CopyDesc));
    RESHARD_GPU(nccl_detail::LaunchUploadDescs(dev, host, count, s));
    RESHARD_GPU(nccl_detail::LaunchCopy(dev, count, chunks, true, s, max_blocks));
  }

  void GroupStart() override { RESHARD_NCCL(ncclGroupStart()); }
  void Send(int32_t gpu, int32_t stream, const Region& r, int32_t peer) override {
    if (gpu == failed_gpu_) return;  // injected fault: this GPU issues nothing more
    Gpu& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_NCCL(ncclSend(static_cast<unsigned char*>(Ptr(r.buffer)) + r.offset_bytes, static_cast<size_t>(r.Bytes()),
                          ncclUint8, peer, g.comm, g.streams[stream]));
  }
  void Recv(int32_t gpu, int32_t stream, const Region& r, int32_t peer) override {
    if (gpu == failed_gpu_) return;
    Gpu& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_NCCL(ncclRecv(static_cast<unsigned char*>(Ptr(r.buffer)) + r.offset_bytes, static_cast<size_t>(r.Bytes()),
                          ncclUint8, peer, g.comm, g.streams[stream]));
  }
  void GroupEnd() override {
    RESHARD_NCCL(ncclGroupEnd());
    // Non-blocking communicators may still be connecting peers: the kernels
    // are on the streams only once every communicator is out of ncclInProgress.
    WaitComms("an NCCL group of the run");
  }

  void OpStart(int32_t op, int32_t gpu, int32_t stream) override {
    last_started_ = op;
    if (opt_.fault.active() && opt_.fault.gpu == gpu && opt_.fault.op == op) failed_gpu_ = gpu;
    Gpu& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_GPU(cudaEventRecord(start_ev_[op], g.streams[stream]));
  }
  void OpEnd(int32_t op, int32_t gpu, int32_t stream) override {
    Gpu& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_GPU(cudaEventRecord(end_ev_[op], g.streams[stream]));
  }
  void WaitOp(int32_t gpu, int32_t stream, int32_t op) override {
    Gpu& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_GPU(cudaStreamWaitEvent(g.streams[stream], end_ev_[op], 0));
  }

  void StartClock() override {
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      RESHARD_GPU(cudaDeviceSynchronize());  // fills, poisoning and preexisting allocations done
      g->issued_frees.clear();
      g->start_used = UsedBytes();
      g->start_reserved = PoolReserved(*g);
      uint64_t zero = 0;  // resets the high-water marks to the current values
      RESHARD_GPU(cudaMemPoolSetAttribute(g->pool, cudaMemPoolAttrReservedMemHigh, &zero));
      RESHARD_GPU(cudaMemPoolSetAttribute(g->pool, cudaMemPoolAttrUsedMemHigh, &zero));
      g->sampled_peak = g->start_used;
    }
    if (opt_.mpi != nullptr) opt_.mpi->Barrier();
    if (opt_.memory_sample_period_s > 0) {
      stop_sampler_ = false;
      sampler_ = std::thread([this] { Sample(); });
    }
    // Hold every GPU at t = 0 until Go: the first steps are queued by then,
    // so the clock does not time the host issuing the run's first ops.
    if (gate_ == nullptr) {
      void* flag = nullptr;
      RESHARD_GPU(cudaHostAlloc(&flag, sizeof(int), cudaHostAllocPortable | cudaHostAllocMapped));
      gate_ = static_cast<volatile int*>(flag);
    }
    *gate_ = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      int* dev_flag = nullptr;
      RESHARD_GPU(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_flag), const_cast<int*>(gate_), 0));
      RESHARD_GPU(nccl_detail::LaunchGate(dev_flag, kGateMaxNs, g->streams[0]));
      RESHARD_GPU(cudaEventRecord(g->ref, g->streams[0]));
      for (size_t s = 1; s < g->streams.size(); ++s) RESHARD_GPU(cudaStreamWaitEvent(g->streams[s], g->ref, 0));
    }
  }

  void Go() override {
    if (gate_ == nullptr) return;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *gate_ = 1;
  }

  void StopClock() override {
    Go();
    try {
      WaitStreams("the run");  // bounded: polls streams and NCCL, aborts the communicators on a timeout
    } catch (...) {
      StopSampler();
      throw;
    }
    StopSampler();
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      AtomicMax(g->sampled_peak, UsedBytes());
      g->reserved_high = static_cast<int64_t>(PoolAttr(g->pool, cudaMemPoolAttrReservedMemHigh));
      g->used_high = static_cast<int64_t>(PoolAttr(g->pool, cudaMemPoolAttrUsedMemHigh));
    }
  }

  std::vector<OpTime> OpTimes() override {
    std::vector<OpTime> out;
    for (const Op& op : plan_->ops) {
      if (!IsLocal(op.gpu)) continue;
      Gpu& g = State(op.gpu);
      float start_ms = 0, end_ms = 0;
      RESHARD_GPU(cudaEventElapsedTime(&start_ms, g.ref, start_ev_[op.id]));
      RESHARD_GPU(cudaEventElapsedTime(&end_ms, g.ref, end_ev_[op.id]));
      out.push_back({op.id, op.gpu, start_ms * 1e-3, end_ms * 1e-3});
    }
    return out;
  }

  void Fill(const PlanBuffer& b, const PieceMap& m) override {
    Gpu& g = State(b.gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_GPU(nccl_detail::LaunchFill(static_cast<unsigned char*>(Ptr(b.id)), m, g.streams[0], g.sms * 8));
  }
  void Check(const PlanBuffer& b, const PieceMap& m, int32_t piece) override { checks_.push_back({b.id, b.gpu, m, piece}); }

  std::vector<PieceCheck> CheckResults(int32_t max_recorded) override {
    std::vector<PieceCheck> out(checks_.size());
    for (auto& g : gpus_state_) {
      std::vector<size_t> mine;
      for (size_t i = 0; i < checks_.size(); ++i)
        if (checks_[i].gpu == g->gpu) mine.push_back(i);
      if (mine.empty()) continue;
      RESHARD_GPU(cudaSetDevice(g->device));
      CheckSlot* slots = nullptr;
      const size_t bytes = mine.size() * sizeof(CheckSlot);
      RESHARD_GPU(cudaMalloc(reinterpret_cast<void**>(&slots), bytes));
      RESHARD_GPU(cudaMemsetAsync(slots, 0, bytes, g->streams[0]));
      for (size_t k = 0; k < mine.size(); ++k) {
        const PendingCheck& c = checks_[mine[k]];
        RESHARD_GPU(nccl_detail::LaunchCheck(static_cast<const unsigned char*>(Ptr(c.buffer)), c.map, slots + k,
                                             g->streams[0], g->sms * 8));
      }
      std::vector<CheckSlot> host(mine.size());
      RESHARD_GPU(cudaMemcpyAsync(host.data(), slots, bytes, cudaMemcpyDeviceToHost, g->streams[0]));
      RESHARD_GPU(cudaStreamSynchronize(g->streams[0]));
      RESHARD_GPU(cudaFree(slots));
      for (size_t k = 0; k < mine.size(); ++k) {
        const PendingCheck& c = checks_[mine[k]];
        PieceCheck& r = out[mine[k]];
        r.piece = c.piece;
        r.elements = c.map.Elements();
        r.mismatches = static_cast<int64_t>(host[k].count);
        const int64_t recorded = std::min<int64_t>(r.mismatches, nccl_detail::kMaxRecorded);
        for (int64_t i = 0; i < recorded; ++i)
          r.first.push_back({host[k].first[i].index, host[k].first[i].expected, host[k].first[i].got});
        std::sort(r.first.begin(), r.first.end(),
                  [](const ElementMismatch& x, const ElementMismatch& y) { return x.index < y.index; });
        if (static_cast<int64_t>(r.first.size()) > max_recorded) r.first.resize(std::max(max_recorded, 0));
      }
    }
    checks_.clear();
    return out;
  }

  int64_t LiveBytes() const override {
    int64_t bytes = 0;
    for (size_t b = 0; b < ptr_.size(); ++b)
      if (ptr_[b] != nullptr) bytes += plan_->buffers[b].bytes;
    return bytes;
  }

  std::vector<GpuMemoryStats> MemoryStats() override {
    std::vector<GpuMemoryStats> out;
    for (auto& g : gpus_state_) {
      GpuMemoryStats s;
      s.gpu = g->gpu;
      s.peak_bytes = std::max(g->sampled_peak.load(), g->start_used - g->start_reserved + g->reserved_high);
      s.plan_peak_bytes = g->used_high;
      s.host_peak_bytes = g->host_peak;
      s.context_bytes = g->context_bytes;
      s.comm_bytes = g->comm_bytes;
      out.push_back(s);
    }
    return out;
  }

 private:
  static constexpr unsigned char kPoison = 0xA5;

  struct Gpu {
    int32_t gpu = -1;
    int device = -1;
    int sms = 1;
    std::vector<cudaStream_t> streams;
    cudaEvent_t ref = nullptr;
    ncclComm_t comm = nullptr;
    cudaMemPool_t pool = nullptr;
    int64_t context_bytes = 0, comm_bytes = 0;
    int64_t start_used = 0, start_reserved = 0, reserved_high = 0, used_high = 0;
    std::atomic<int64_t> sampled_peak{0};
    int64_t host_bytes = 0, host_peak = 0;
    int64_t alloc_retries = 0;  // allocations the pool refused at first (this run)
    int64_t alloc_drains = 0;   // of those, the ones that fit only after the GPU drained
    std::vector<int32_t> issued_frees;  // free ops of device buffers issued this run, in order
    CopyDesc* arena_device = nullptr;
    CopyDesc* arena_host = nullptr;
    int64_t arena_capacity = 0, arena_cursor = 0;
  };
  struct PendingCheck {
    int32_t buffer, gpu;
    PieceMap map;
    int32_t piece;
  };

  // Host-mapped flag the gate kernels spin on (StartClock / Go); a gate gives
  // up after kGateMaxNs so a host that dies before Go cannot hang the GPU.
  volatile int* gate_ = nullptr;
  static constexpr long long kGateMaxNs = 30'000'000'000LL;

  bool IsLocal(int32_t gpu) const { return gpu >= 0 && gpu < static_cast<int32_t>(index_.size()) && index_[gpu] >= 0; }
  Gpu& State(int32_t gpu) {
    RESHARD_CHECK(IsLocal(gpu), fmt::format("GPU {} is not driven by this process", gpu));
    return *gpus_state_[index_[gpu]];
  }
  void* Ptr(int32_t buffer) const {
    RESHARD_CHECK(ptr_[buffer] != nullptr, fmt::format("buffer {} used while not allocated", buffer));
    return ptr_[buffer];
  }
  static int64_t PoolReserved(const Gpu& g) {
    return static_cast<int64_t>(PoolAttr(g.pool, cudaMemPoolAttrReservedMemCurrent));
  }

  std::vector<int> ChooseDevices(const Plan& plan, const std::vector<int32_t>& local, int32_t procs) const {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      throw InputError("<machine>", "gpus",
                       fmt::format("no CUDA device is visible to this process ({}); run on a GPU machine or use "
                                   "--backend host",
                                   e != cudaSuccess ? Describe(e) : "0 devices"));
    }
    std::vector<int> devices;
    if (procs == 1) {
      if (count < plan.Gpus())
        throw InputError("<machine>", "gpus",
                         fmt::format("the plan has {} GPUs but this process sees {} CUDA devices; start one process per "
                                     "GPU (or per block of GPUs) with mpirun / srun",
                                     plan.Gpus(), count));
      for (int32_t g : local) devices.push_back(g);
      return devices;
    }
    const int32_t per_node = plan.cluster.gpus_per_node;
    const int32_t block = static_cast<int32_t>(local.size());
    for (int32_t g : local) {
      if (count >= per_node && per_node >= block) devices.push_back(g % per_node);
      else if (count >= block) devices.push_back(g - local.front());
      else
        throw InputError("<machine>", "gpus",
                         fmt::format("this process drives plan GPUs {}..{} but sees only {} CUDA devices", local.front(),
                                     local.back(), count));
    }
    return devices;
  }

  // Reserves, per GPU, the plan's device peak (replaying its allocs and frees
  // in the walker's issue order) as one block allocated and freed again: the
  // pool keeps it (release threshold = max) and carves the run's buffers out
  // of it. A run that needs more (fragmentation, no reuse across streams
  // without a dependency) still grows the pool, and the sampled peak shows it.
  void WarmPool(const Plan& plan) {
    std::vector<int64_t> cur(plan.Gpus(), 0), peak(plan.Gpus(), 0);
    for (const PlanBuffer& b : plan.buffers)
      if (b.preexisting && b.space == MemorySpace::kDevice && IsLocal(b.gpu)) cur[b.gpu] += b.bytes;
    peak = cur;
    for (const IssueStep& step : IssueOrder(plan))
      for (const std::vector<int32_t>* list : {&step.before, &step.comm, &step.after})
        for (int32_t id : *list) {
          const Op& op = plan.ops[id];
          if ((op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) || !IsLocal(op.gpu)) continue;
          const PlanBuffer& b = plan.buffers[op.buffer];
          if (b.space != MemorySpace::kDevice) continue;
          cur[op.gpu] += op.kind == OpKind::kAlloc ? b.bytes : -b.bytes;
          peak[op.gpu] = std::max(peak[op.gpu], cur[op.gpu]);
        }
    for (auto& g : gpus_state_) {
      const int64_t want = peak[g->gpu] - PoolReserved(*g);
      if (want <= 0) continue;
      RESHARD_GPU(cudaSetDevice(g->device));
      void* block = nullptr;
      RESHARD_GPU(cudaMallocAsync(&block, static_cast<size_t>(want), g->streams[0]));
      RESHARD_GPU(cudaFreeAsync(block, g->streams[0]));
      RESHARD_GPU(cudaStreamSynchronize(g->streams[0]));
    }
  }

  void CreateComms(int32_t gpus, int32_t rank) {
    ApplyNcclEnvDefaults();
    std::vector<int64_t> before;
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      before.push_back(UsedBytes());
    }
    std::vector<ncclComm_t> comms(gpus_state_.size(), nullptr);
    if (opt_.nonblocking_comms) {
      // Non-blocking communicators: no NCCL call can block this thread, so
      // every wait (connection setup included) is one of ours, bounded by
      // timeout_s. One group of ncclCommInitRankConfig calls, in one process
      // (NCCL rank = plan GPU) or across processes (the id goes through MPI).
      ncclUniqueId id{};
      if (opt_.mpi == nullptr || rank == 0) RESHARD_GPU(ncclGetUniqueId(&id));
      if (opt_.mpi != nullptr) opt_.mpi->Broadcast(&id, sizeof(id), 0);
      ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
      config.blocking = 0;
      RESHARD_NCCL(ncclGroupStart());
      for (size_t i = 0; i < gpus_state_.size(); ++i) {
        RESHARD_GPU(cudaSetDevice(gpus_state_[i]->device));
        RESHARD_NCCL(ncclCommInitRankConfig(&comms[i], gpus, id, gpus_state_[i]->gpu, &config));
      }
      RESHARD_NCCL(ncclGroupEnd());
      for (size_t i = 0; i < gpus_state_.size(); ++i) gpus_state_[i]->comm = comms[i];  // polled (and aborted) by WaitComms
      WaitComms("communicator creation (ncclCommInitRankConfig)");
    } else if (opt_.mpi == nullptr) {
      std::vector<int> devs(devices_.begin(), devices_.end());
      RESHARD_GPU(ncclCommInitAll(comms.data(), static_cast<int>(devs.size()), devs.data()));
    } else {
      ncclUniqueId id{};
      if (rank == 0) RESHARD_GPU(ncclGetUniqueId(&id));
      opt_.mpi->Broadcast(&id, sizeof(id), 0);
      RESHARD_GPU(ncclGroupStart());
      for (size_t i = 0; i < gpus_state_.size(); ++i) {
        RESHARD_GPU(cudaSetDevice(gpus_state_[i]->device));
        RESHARD_GPU(ncclCommInitRank(&comms[i], gpus, id, gpus_state_[i]->gpu));
      }
      RESHARD_GPU(ncclGroupEnd());
    }
    for (size_t i = 0; i < gpus_state_.size(); ++i) {
      Gpu& g = *gpus_state_[i];
      g.comm = comms[i];
      RESHARD_GPU(cudaSetDevice(g.device));
      g.comm_bytes = UsedBytes() - before[i];
    }
  }

  // Communicators and streams of the GPUs this backend drove.
  void DestroyGpus(FirstError& errors) {
    CloseComms(errors);
    for (auto& g : gpus_state_) {
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
      for (cudaStream_t s : g->streams) RESHARD_GPU_CLEANUP(errors, cudaStreamDestroy(s));
      g->streams.clear();
    }
    gpus_state_.clear();
  }

  void Sample() {
    const auto period = std::chrono::duration<double>(opt_.memory_sample_period_s);
    while (!stop_sampler_.load()) {
      for (auto& g : gpus_state_) {
        size_t free_b = 0, total_b = 0;
        if (cudaSetDevice(g->device) == cudaSuccess && cudaMemGetInfo(&free_b, &total_b) == cudaSuccess)
          AtomicMax(g->sampled_peak, static_cast<int64_t>(total_b - free_b));
      }
      std::this_thread::sleep_for(period);
    }
  }
  void StopSampler() {
    stop_sampler_ = true;
    if (sampler_.joinable()) sampler_.join();
  }

  // Frees what one run created: buffers (device ones poisoned first), events,
  // streams, arenas; returns the pool's memory to the driver.
  void Release(FirstError& errors) {
    Go();  // a run that failed before Go: let the gates end
    StopSampler();
    if (!begun_) return;
    begun_ = false;
    failed_gpu_ = -1;
    // Bounded: after a failed run whose communicators were aborted the streams
    // drain; a GPU still busy after that keeps its buffers (freeing memory a
    // running kernel uses is worse than leaking it) and says so.
    if (!DrainForCleanup(errors)) {
      checks_.clear();
      return;
    }
    for (size_t b = 0; b < ptr_.size(); ++b) {
      if (ptr_[b] == nullptr) continue;
      const PlanBuffer& buf = plan_->buffers[b];
      Gpu& g = State(buf.gpu);
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g.device));
      if (buf.space == MemorySpace::kHost) {
        RESHARD_GPU_CLEANUP(errors, cudaFreeHost(ptr_[b]));
      } else {
        RESHARD_GPU_CLEANUP(errors, cudaMemsetAsync(ptr_[b], kPoison, static_cast<size_t>(buf.bytes), g.streams[0]));
        RESHARD_GPU_CLEANUP(errors, cudaFreeAsync(ptr_[b], g.streams[0]));
      }
      ptr_[b] = nullptr;
    }
    for (auto& g : gpus_state_) {
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
      RESHARD_GPU_CLEANUP(errors, cudaDeviceSynchronize());
      RESHARD_GPU_CLEANUP(errors, cudaMemPoolTrimTo(g->pool, 0));
    }
    for (std::vector<cudaEvent_t>* list : {&start_ev_, &end_ev_})
      for (cudaEvent_t& e : *list)
        if (e != nullptr) {
          RESHARD_GPU_CLEANUP(errors, cudaEventDestroy(e));
          e = nullptr;
        }
    for (auto& g : gpus_state_) {
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
      if (g->ref != nullptr) RESHARD_GPU_CLEANUP(errors, cudaEventDestroy(g->ref));
      g->ref = nullptr;
      if (g->arena_device != nullptr) RESHARD_GPU_CLEANUP(errors, cudaFree(g->arena_device));
      if (g->arena_host != nullptr) RESHARD_GPU_CLEANUP(errors, cudaFreeHost(g->arena_host));
      g->arena_device = nullptr;
      g->arena_host = nullptr;
    }
    checks_.clear();
  }

  // ---- bounded waits (issue 8, item 4) ---------------------------------------
  // No wait of the backend blocks without a bound: it polls cudaStreamQuery and
  // ncclCommGetAsyncError, backing off from 1 us to 1 ms; on an asynchronous
  // NCCL error, a CUDA error or after timeout_s it aborts every communicator
  // (ncclCommAbort, which also ends NCCL kernels waiting for a peer) and throws
  // GpuError (a RunError) naming the op and GPU that did not finish.

  Clock::time_point Deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.timeout_s));
  }
  static void Pause(std::chrono::microseconds& pause) {
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(1000));
  }

  // Ops that started and have not finished, at most one per local GPU (the
  // first in plan order): where a hang sits. Only ops of the timed run have events.
  std::vector<int32_t> UnfinishedOps() const {
    std::vector<int32_t> out;
    if (plan_ == nullptr) return out;
    std::vector<bool> seen(static_cast<size_t>(std::max(gpu_count_, 0)), false);
    for (const Op& op : plan_->ops) {
      if (!IsLocal(op.gpu) || seen[op.gpu] || static_cast<size_t>(op.id) >= end_ev_.size()) continue;
      if (start_ev_[op.id] == nullptr || end_ev_[op.id] == nullptr) continue;
      if (cudaEventQuery(start_ev_[op.id]) == cudaSuccess && cudaEventQuery(end_ev_[op.id]) == cudaErrorNotReady) {
        out.push_back(op.id);
        seen[op.gpu] = true;
      }
    }
    (void)cudaGetLastError();  // cudaErrorNotReady is an answer, not an error
    return out;
  }
  std::string OpText(int32_t id) const {
    const Op& o = plan_->ops[id];
    if (o.kind == OpKind::kSend) return fmt::format("op {} (send gpu {}->{})", id, o.gpu, o.peer);
    if (o.kind == OpKind::kRecv) return fmt::format("op {} (recv gpu {}<-{})", id, o.gpu, o.peer);
    return fmt::format("op {} ({} gpu {})", id, OpKindName(o.kind), o.gpu);
  }
  std::string FaultNote() const {
    if (!opt_.fault.active() || failed_gpu_ < 0) return "";
    return fmt::format(" [injected fault (RESHARD_FAULT gpu={},op={}): GPU {} issued nothing from op {} on]",
                       opt_.fault.gpu, opt_.fault.op, opt_.fault.gpu, opt_.fault.op);
  }

  void AbortComms() {
    for (auto& g : gpus_state_) {
      if (g->comm == nullptr) continue;
      (void)cudaSetDevice(g->device);
      (void)ncclCommAbort(g->comm);  // first error wins: the caller's message
      g->comm = nullptr;
    }
  }

  // Aborts the communicators and throws; names the first unfinished op (or `op`, `gpu`).
  [[noreturn]] void Fail(const std::string& what, int32_t op, int32_t gpu) {
    const std::vector<int32_t> stuck = UnfinishedOps();
    std::string where;
    for (int32_t id : stuck)
      where += fmt::format("{}GPU {} is in {}", where.empty() ? "; " : ", ", plan_->ops[id].gpu, OpText(id));
    if (op < 0 && !stuck.empty()) {
      op = stuck.front();
      gpu = plan_->ops[op].gpu;
    }
    AbortComms();
    throw GpuError(fmt::format("NCCL backend: {}{}; communicators aborted (ncclCommAbort){}", what, where, FaultNote()),
                   op, gpu);
  }

  // Throws (via Fail) when a local communicator reports an asynchronous error.
  void CheckAsyncErrors(const std::string& what, bool* pending) {
    for (auto& g : gpus_state_) {
      if (g->comm == nullptr) continue;
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(g->comm, &state);
      if (r != ncclSuccess) state = r;
      if (state == ncclInProgress) {
        if (pending != nullptr) *pending = true;
      } else if (state != ncclSuccess) {
        Fail(fmt::format("NCCL reported an error on GPU {} during {}: {}", g->gpu, what, Describe(state)), -1, g->gpu);
      }
    }
  }

  // Non-blocking communicators: waits until none is in ncclInProgress.
  void WaitComms(const std::string& what) {
    if (!opt_.nonblocking_comms) return;  // blocking calls returned only when done
    const auto deadline = Deadline();
    for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
      bool pending = false;
      CheckAsyncErrors(what, &pending);
      if (!pending) return;
      if (Clock::now() > deadline)
        Fail(fmt::format("{} did not finish within {} s (timeout: RESHARD_NCCL_TIMEOUT_S / --timeout)", what,
                         opt_.timeout_s),
             -1, -1);
    }
  }

  // Waits until every stream of every local GPU is idle.
  void WaitStreams(const std::string& what) {
    const auto deadline = Deadline();
    for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
      bool busy = false;
      for (auto& g : gpus_state_) {
        RESHARD_GPU(cudaSetDevice(g->device));
        for (cudaStream_t st : g->streams) {
          const cudaError_t e = cudaStreamQuery(st);
          if (e == cudaErrorNotReady) {
            busy = true;
          } else if (e != cudaSuccess) {
            Fail(fmt::format("{} failed on GPU {} (device {}): {}", what, g->gpu, g->device, Describe(e)), -1, g->gpu);
          }
        }
      }
      CheckAsyncErrors(what, nullptr);
      if (!busy) return;
      if (Clock::now() > deadline)
        Fail(fmt::format("{} did not finish within {} s (timeout: RESHARD_NCCL_TIMEOUT_S / --timeout)", what,
                         opt_.timeout_s),
             -1, -1);
    }
  }

  // Cleanup's wait: true when every stream is idle. After the timeout the
  // communicators are aborted and it waits once more; a GPU still busy then
  // is reported (first error wins) and false returned.
  bool DrainForCleanup(FirstError& errors) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      const auto deadline = Deadline();
      for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
        bool busy = false;
        for (auto& g : gpus_state_) {
          if (cudaSetDevice(g->device) != cudaSuccess) continue;
          for (cudaStream_t st : g->streams) {
            const cudaError_t e = cudaStreamQuery(st);
            if (e == cudaErrorNotReady) busy = true;
            else RESHARD_GPU_CLEANUP(errors, e);
          }
        }
        if (!busy) return true;
        if (Clock::now() > deadline) break;
      }
      AbortComms();
    }
    if (errors.message.empty())
      errors.message = fmt::format("NCCL backend: a GPU was still busy {} s after its communicators were aborted; its "
                                   "buffers were not freed",
                                   opt_.timeout_s);
    return false;
  }

  // Communicators: finalize (non-blocking: polled, bounded), then destroy;
  // one that does not finish in time is aborted.
  void CloseComms(FirstError& errors) {
    if (opt_.nonblocking_comms) {
      for (auto& g : gpus_state_) {
        if (g->comm == nullptr) continue;
        RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
        const ncclResult_t r = ncclCommFinalize(g->comm);
        if (r != ncclSuccess && r != ncclInProgress) {
          RESHARD_GPU_CLEANUP(errors, r);
          (void)ncclCommAbort(g->comm);
          g->comm = nullptr;
        }
      }
      const auto deadline = Deadline();
      for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
        bool pending = false;
        for (auto& g : gpus_state_) {
          if (g->comm == nullptr) continue;
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(g->comm, &state) == ncclSuccess && state == ncclInProgress) pending = true;
        }
        if (!pending) break;
        if (Clock::now() > deadline) {
          if (errors.message.empty())
            errors.message = fmt::format("NCCL backend: ncclCommFinalize did not finish within {} s; communicators "
                                         "aborted",
                                         opt_.timeout_s);
          AbortComms();
          break;
        }
      }
    }
    for (auto& g : gpus_state_) {
      if (g->comm == nullptr) continue;
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
      const ncclResult_t r = ncclCommDestroy(g->comm);
      if (r != ncclInProgress) RESHARD_GPU_CLEANUP(errors, r);
      g->comm = nullptr;
    }
  }

  NcclBackendOptions opt_;
  const Plan* plan_ = nullptr;
  int32_t last_started_ = -1;  // the op being issued (OpStart)
  bool begun_ = false;
  int32_t gpu_count_ = 0;
  std::vector<int32_t> local_gpus_;
  std::vector<int> devices_;
  std::vector<int32_t> index_;  // plan GPU -> index into gpus_state_, -1 when not local
  std::vector<std::unique_ptr<Gpu>> gpus_state_;
  std::vector<void*> ptr_;      // per plan buffer
  std::vector<cudaEvent_t> start_ev_, end_ev_;  // per op
  std::vector<PendingCheck> checks_;
  std::thread sampler_;
  std::atomic<bool> stop_sampler_{false};
  int32_t failed_gpu_ = -1;  // injected fault: this GPU issues no more work (walker thread)
};

}  // namespace

std::unique_ptr<Backend> MakeNcclBackend(const NcclBackendOptions& options) {
  return std::make_unique<NcclBackend>(options);
}

int32_t CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

std::string GpuStackVersion() {
  int nccl = 0, runtime = 0, driver = 0;
  (void)ncclGetVersion(&nccl);
  (void)cudaRuntimeGetVersion(&runtime);
  (void)cudaDriverGetVersion(&driver);
  auto cuda = [](int v) { return v == 0 ? std::string("none") : fmt::format("{}.{}", v / 1000, (v % 1000) / 10); };
  return fmt::format("NCCL {}.{}.{} (built against {}.{}.{}), CUDA runtime {}, driver {}", nccl / 10000,
                     (nccl % 10000) / 100, nccl % 100, NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH, cuda(runtime),
                     cuda(driver));
}

void ApplyNcclEnvDefaults() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("NCCL_P2P_NVL_CHUNKSIZE", "262144", 0);
}

}  // namespace reshard
