// NcclBackend (backend.h): the Backend primitives on CUDA streams and events,
// NCCL groups and the stream-ordered pool. Every CUDA / NCCL call goes through
// the error boundary (gpu_check.h): RESHARD_GPU, RESHARD_NCCL, or during
// cleanup RESHARD_GPU_CLEANUP (keeps the first error, carries on releasing).
// Communicators and every wait are in comms.h, the pool in pool.h.
#include "executor/nccl/backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include "executor/mpi_session.h"
#include "executor/nccl/comms.h"
#include "executor/nccl/copy_desc.h"
#include "executor/nccl/gpu_check.h"
#include "executor/nccl/kernels.h"
#include "executor/nccl/op_events.h"
#include "executor/nccl/pinned.h"
#include "executor/nccl/gpu_state.h"
#include "executor/nccl/pool.h"
#include "model/error.h"

namespace reshard {

namespace {

using gpu::CheckSlot;
using gpu::CopyDesc;

void AtomicMax(std::atomic<int64_t>& a, int64_t v) {
  int64_t cur = a.load();
  while (v > cur && !a.compare_exchange_weak(cur, v)) {
  }
}

class NcclBackend final : public Backend {
 public:
  explicit NcclBackend(const NcclBackendOptions& o)
      : opt_(o), comms_(gpus_state_, o.timeout_s, o.nonblocking_comms, [this] { return Stuck(); }) {
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
    FirstGpuError errors;
    Release(errors);
    DestroyGpus(errors);
    kept_host_.FreeAll();
  }

  std::string Name() const override { return "nccl"; }
  const MpiSession* Processes() const override { return opt_.mpi; }
  std::vector<int32_t> LocalGpus() const override { return local_gpus_; }

  void Begin(const Plan& plan) override {
    FirstGpuError leftovers;
    Release(leftovers);  // a previous run that failed half-way
    if (const std::string why = FaultProblem(opt_.fault, plan); !why.empty())
      throw InputError("<environment>", "RESHARD_FAULT", why);
    failed_gpu_ = -1;
    plan_ = &plan;
    ptr_.assign(plan.buffers.size(), nullptr);
    events_.Reset(plan);
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
      FirstGpuError errors;
      DestroyGpus(errors);
      if (!errors.message.empty()) throw GpuError(errors.message);
      gpu_count_ = gpus;
      local_gpus_ = local;
      devices_ = devices;
      for (size_t i = 0; i < local.size(); ++i) {
        auto g = std::make_unique<GpuState>();
        g->gpu = local[i];
        g->device = devices[i];
        RESHARD_GPU(cudaSetDevice(g->device));
        RESHARD_GPU(cudaFree(nullptr));  // creates the context
        g->context_bytes = DeviceUsedBytes();
        RESHARD_GPU(cudaDeviceGetAttribute(&g->sms, cudaDevAttrMultiProcessorCount, g->device));
        g->pool = OpenRunPool(g->device);
        gpus_state_.push_back(std::move(g));
      }
      index_.assign(gpus, -1);
      for (size_t i = 0; i < local.size(); ++i) index_[local[i]] = static_cast<int32_t>(i);
    }
    if (needs_comm && gpus_state_.front()->comm == nullptr) comms_.Create(gpus, rank, opt_.mpi, devices_);
    if (needs_comm && UsesCommLane2(plan) && gpus_state_.front()->comm2 == nullptr) comms_.CreateLane2();

    const size_t streams = std::max<size_t>(plan.stream_names.size(), 1);
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      // Streams live as long as the backend: fewer streams created, fewer
      // chances of two sharing a hardware queue.
      // The comm stream gets the highest priority: when an unpack and the next
      // NCCL group become ready together, NCCL's blocks are placed first instead
      // of waiting for SMs a copy kernel holds (NVLink lost 17-23 % beside a copy
      // launched first, 6-8 % beside one launched after it:
      // bench/results/2026-11-30-h200x2-nccl-group-probe/).
      // RESHARD_COMM_STREAM_PRIORITY=0 turns this off.
      int least = 0, greatest = 0;
      RESHARD_GPU(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      const char* prio_env = std::getenv("RESHARD_COMM_STREAM_PRIORITY");
      const bool prioritise = prio_env == nullptr || std::string(prio_env) != "0";
      while (g->streams.size() < streams) {
        const size_t i = g->streams.size();
        const bool comm = i < plan.stream_names.size() &&
                          (plan.stream_names[i] == "comm" || plan.stream_names[i] == kCommLane2StreamName);
        cudaStream_t s = nullptr;
        RESHARD_GPU(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, comm && prioritise ? greatest : least));
        g->streams.push_back(s);
      }
      RESHARD_GPU(gpu::WarmKernels(g->streams[0]));  // modules loaded before any timing
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
      GpuState& g = State(op.gpu);
      RESHARD_GPU(cudaSetDevice(g.device));
      events_.Create(op);
      if (op.kind == OpKind::kCopy || op.kind == OpKind::kOffload || op.kind == OpKind::kReload) {
        if (static_cast<int64_t>(op.copies.size()) > gpu::kCopyDescsByValue)
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
    // Pinned host buffers, all before timing: their alloc / free ops only
    // account (pinning is a one-off setup cost in a real job). Buffers kept
    // from the last run of this plan are reused (pinning 90 GiB took 57 s of
    // system time per run) and poisoned again, unless a source piece is
    // filled into them.
    std::vector<bool> filled(plan.buffers.size(), false);
    for (const ContentPiece& c : plan.sources) filled[c.buffer] = true;
    RESHARD_GPU(kept_host_.KeepOnly([&](int32_t id, int32_t gpu, int64_t bytes) {
      return id < static_cast<int32_t>(plan.buffers.size()) && plan.buffers[id].space == MemorySpace::kHost &&
             IsLocal(gpu) && plan.buffers[id].gpu == gpu && plan.buffers[id].bytes == bytes;
    }));
    for (const PlanBuffer& b : plan.buffers) {
      if (b.space != MemorySpace::kHost || !IsLocal(b.gpu)) continue;
      if ((ptr_[b.id] = kept_host_.Take(b.id)) != nullptr) {
        if (filled[b.id]) continue;
      } else {
        RESHARD_GPU(cudaSetDevice(State(b.gpu).device));
        RESHARD_GPU(cudaHostAlloc(&ptr_[b.id], static_cast<size_t>(std::max<int64_t>(b.bytes, 1)),
                                  cudaHostAllocPortable | cudaHostAllocMapped));
      }
      PoisonHost(ptr_[b.id], static_cast<size_t>(b.bytes), kPoison);
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
    // The pairs of lane 1 (plan stream "comm2") connect through comm2 too.
    std::vector<int8_t> lane2(pairs.size(), 0);
    for (const Op& op : plan_->ops) {
      if (op.kind != OpKind::kSend || CommLane(*plan_, op.stream) != 1) continue;
      const auto it = std::lower_bound(pairs.begin(), pairs.end(), std::make_pair(op.gpu, op.peer));
      if (it != pairs.end() && *it == std::make_pair(op.gpu, op.peer)) lane2[it - pairs.begin()] = 1;
    }
    // One group per pair and lane, in the same order in every process.
    for (int lane = 0; lane < 2; ++lane)
      for (size_t k = 0; k < pairs.size(); ++k) {
        const auto [from, to] = pairs[k];
        if ((!IsLocal(from) && !IsLocal(to)) || (lane == 1 && !lane2[k])) continue;
        RESHARD_NCCL(ncclGroupStart());
        if (IsLocal(from)) {
          GpuState& g = State(from);
          RESHARD_NCCL(ncclSend(tmp[index_[from]], static_cast<size_t>(size[k]), ncclUint8, to,
                                lane ? g.comm2 : g.comm, g.streams[0]));
        }
        if (IsLocal(to)) {
          GpuState& g = State(to);
          RESHARD_NCCL(ncclRecv(tmp[index_[to]], static_cast<size_t>(size[k]), ncclUint8, from,
                                lane ? g.comm2 : g.comm, g.streams[0]));
        }
        RESHARD_NCCL(ncclGroupEnd());
        comms_.WaitComms(fmt::format("the warm-up transfer GPU {} -> GPU {} (lane {})", from, to, lane));
      }
    comms_.WaitStreams("the warm-up transfers");  // bounded: a peer that never answers aborts, not hangs
    for (size_t i = 0; i < gpus_state_.size(); ++i) {
      GpuState& g = *gpus_state_[i];
      RESHARD_GPU(cudaSetDevice(g.device));
      RESHARD_GPU(cudaFree(tmp[i]));
      g.comm_bytes = std::max(g.comm_bytes, DeviceUsedBytes() - g.context_bytes - PoolReservedBytes(g.pool));
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
    FirstGpuError errors;
    Release(errors);
    if (!errors.message.empty()) throw GpuError(errors.message);
  }

  void Allocate(const PlanBuffer& b, int32_t stream) override {
    GpuState& g = State(b.gpu);
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
        comms_.WaitStreams(fmt::format("waiting for GPU {} to drain before retrying an allocation", b.gpu));
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
                                 total_b / double(1 << 30), PoolReservedBytes(g.pool) / double(1 << 30),
                                 g.context_bytes / double(1 << 30), g.comm_bytes / double(1 << 30)));
    }
    RESHARD_GPU(e);
    if (stream < 0 || poison_run_allocations_)
      RESHARD_GPU(cudaMemsetAsync(ptr_[b.id], kPoison, static_cast<size_t>(b.bytes), s));
  }

  void PoisonRunAllocations(bool on) override { poison_run_allocations_ = on; }

  void Free(const PlanBuffer& b, int32_t stream) override {
    GpuState& g = State(b.gpu);
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

  // Device <-> device pairs: one batched strided-copy kernel per op. Pairs
  // touching pinned host memory (offload / reload) go to a copy engine
  // (cudaMemcpyAsync, or cudaMemcpy2DAsync per plane) unless
  // host_copies_by_kernel; the rest of them to the kernel.
  void Copy(int32_t gpu, int32_t stream, std::span<const CopyPair> pairs, double sm_share) override {
    if (gpu == failed_gpu_) return;  // injected fault
    if (last_started_ == opt_.drop_copy_op) return;  // test hook: a missing write
    GpuState& g = State(gpu);
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
      descs.push_back(DescribeCopy(c, src, dst, chunks));
      chunks = descs.back().chunk_end;
    }
    if (descs.empty()) return;
    const int32_t count = static_cast<int32_t>(descs.size());
    const int32_t max_blocks = CopyBlocks(g.sms, opt_.copy_blocks_per_sm, opt_.copy_max_blocks, sm_share);
    if (count <= gpu::kCopyDescsByValue) {
      RESHARD_GPU(gpu::LaunchCopy(descs.data(), count, chunks, false, s, max_blocks));
      return;
    }
    RESHARD_CHECK(g.arena_cursor + count <= g.arena_capacity, "copy descriptor arena overflow");
    CopyDesc* host = g.arena_host + g.arena_cursor;
    CopyDesc* dev = g.arena_device + g.arena_cursor;
    g.arena_cursor += count;
    std::memcpy(host, descs.data(), descs.size() * sizeof(CopyDesc));
    RESHARD_GPU(gpu::LaunchUploadDescs(dev, host, count, s));
    RESHARD_GPU(gpu::LaunchCopy(dev, count, chunks, true, s, max_blocks));
  }

  // One launch per tile, on a grid of kQuantizeCtasPerSm CTAs per SM.
  void Quantize(int32_t gpu, int32_t stream, std::span<const QuantizeJob> jobs) override {
    if (gpu == failed_gpu_) return;  // injected fault
    GpuState& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    for (const QuantizeJob& j : jobs)
      RESHARD_GPU(gpu::LaunchQuantize(j, static_cast<const unsigned char*>(Ptr(j.in_buffer)),
                                      static_cast<unsigned char*>(Ptr(j.out_buffer)),
                                      static_cast<unsigned char*>(Ptr(j.sc_buffer)), g.streams[stream],
                                      g.sms * gpu::kQuantizeCtasPerSm));
  }

  // The communicator of a plan stream's lane (CommLane).
  ncclComm_t CommOf(const GpuState& g, int32_t stream) const {
    return CommLane(*plan_, stream) == 1 ? g.comm2 : g.comm;
  }

  void GroupStart() override { RESHARD_NCCL(ncclGroupStart()); }
  void Send(int32_t gpu, int32_t stream, const Region& r, int32_t peer) override {
    if (gpu == failed_gpu_) return;  // injected fault: this GPU issues nothing more
    GpuState& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_NCCL(ncclSend(static_cast<unsigned char*>(Ptr(r.buffer)) + r.offset_bytes, static_cast<size_t>(r.Bytes()),
                          ncclUint8, peer, CommOf(g, stream), g.streams[stream]));
  }
  void Recv(int32_t gpu, int32_t stream, const Region& r, int32_t peer) override {
    if (gpu == failed_gpu_) return;
    GpuState& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_NCCL(ncclRecv(static_cast<unsigned char*>(Ptr(r.buffer)) + r.offset_bytes, static_cast<size_t>(r.Bytes()),
                          ncclUint8, peer, CommOf(g, stream), g.streams[stream]));
  }
  void GroupEnd() override {
    RESHARD_NCCL(ncclGroupEnd());
    // Non-blocking communicators may still be connecting peers: the kernels
    // are on the streams only once every communicator is out of ncclInProgress.
    comms_.WaitComms("an NCCL group of the run");
  }

  void OpStart(int32_t op, int32_t gpu, int32_t stream) override {
    last_started_ = op;
    if (opt_.fault.active() && opt_.fault.gpu == gpu && opt_.fault.op == op) failed_gpu_ = gpu;
    GpuState& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    events_.Start(op, gpu, stream, g.streams[stream]);
  }
  void OpEnd(int32_t op, int32_t gpu, int32_t stream) override {
    GpuState& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    events_.End(op, gpu, stream, g.streams[stream]);
  }
  void WaitOp(int32_t gpu, int32_t stream, int32_t op) override {
    GpuState& g = State(gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    events_.Wait(op, g.streams[stream]);
  }

  void StartClock() override {
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      RESHARD_GPU(cudaDeviceSynchronize());  // fills, poisoning and preexisting allocations done
      g->issued_frees.clear();
      g->start_used = DeviceUsedBytes();
      g->start_reserved = PoolReservedBytes(g->pool);
      ResetPoolHighWater(g->pool);
      g->sampled_peak = g->start_used;
    }
    if (opt_.mpi != nullptr) opt_.mpi->Barrier();
    if (opt_.memory_sample_period_s > 0) {
      stop_sampler_ = false;
      sampler_ = std::thread([this] { Sample(); });
    }
    // t = 0: the GPUs are idle, so the reference is stamped as it is
    // recorded, right before the walker issues the first op; nothing is
    // queued ahead of it, so op times include the host's issue. The other
    // streams wait for it so no op can be stamped before t = 0.
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      RESHARD_GPU(cudaEventRecord(g->ref, g->streams[0]));
      for (size_t s = 1; s < g->streams.size(); ++s) RESHARD_GPU(cudaStreamWaitEvent(g->streams[s], g->ref, 0));
    }
  }

  void StopClock() override {
    try {
      comms_.WaitStreams("the run");  // bounded: polls streams and NCCL, aborts the communicators on a timeout
    } catch (...) {
      StopSampler();
      throw;
    }
    StopSampler();
    for (auto& g : gpus_state_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      AtomicMax(g->sampled_peak, DeviceUsedBytes());
      g->reserved_high = static_cast<int64_t>(PoolAttribute(g->pool, cudaMemPoolAttrReservedMemHigh));
      g->used_high = static_cast<int64_t>(PoolAttribute(g->pool, cudaMemPoolAttrUsedMemHigh));
    }
  }

  std::vector<OpTime> OpTimes() override {
    return events_.Times(
        *plan_, [&](int32_t gpu) { return IsLocal(gpu); }, [&](int32_t gpu) { return State(gpu).ref; });
  }

  // Sources are filled and destinations checked by kernels on the device;
  // only counts and the first few mismatches come back.
  void Fill(const PlanBuffer& b, const PieceMap& m) override {
    GpuState& g = State(b.gpu);
    RESHARD_GPU(cudaSetDevice(g.device));
    RESHARD_GPU(gpu::LaunchFill(static_cast<unsigned char*>(Ptr(b.id)), m, g.streams[0], g.sms * 8));
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
        RESHARD_GPU(gpu::LaunchCheck(static_cast<const unsigned char*>(Ptr(c.buffer)), c.map, slots + k,
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
        const int64_t recorded = std::min<int64_t>(r.mismatches, gpu::kMaxRecorded);
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

  int64_t KeptHostBytes() const override { return kept_host_.Bytes(); }

  int64_t LiveBytes() const override {
    int64_t bytes = 0;
    for (size_t b = 0; b < ptr_.size(); ++b)
      if (ptr_[b] != nullptr) bytes += plan_->buffers[b].bytes;
    return bytes;
  }

  // peak_bytes: the larger of cudaMemGetInfo sampled by a host thread and
  // (memory in use outside the pool at the start + the pool's reserved
  // high-water mark); plan_peak_bytes: the pool's used high-water mark (the
  // plan's device buffers exactly, as the GPU executed the allocs and frees).
  // Used memory counts everything on the device, other processes too: run on
  // dedicated GPUs.
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

  struct PendingCheck {
    int32_t buffer, gpu;
    PieceMap map;
    int32_t piece;
  };

  bool IsLocal(int32_t gpu) const { return gpu >= 0 && gpu < static_cast<int32_t>(index_.size()) && index_[gpu] >= 0; }
  GpuState& State(int32_t gpu) {
    RESHARD_CHECK(IsLocal(gpu), fmt::format("GPU {} is not driven by this process", gpu));
    return *gpus_state_[index_[gpu]];
  }
  void* Ptr(int32_t buffer) const {
    RESHARD_CHECK(ptr_[buffer] != nullptr, fmt::format("buffer {} used while not allocated", buffer));
    return ptr_[buffer];
  }

  // CUDA device of each local plan GPU. One process: plan GPU g is device g
  // (the plan must fit on this host). Several: device g % gpus_per_node when
  // the process sees the whole node, else the g-th of its block among the
  // devices it sees (CUDA_VISIBLE_DEVICES set by the launcher).
  std::vector<int> ChooseDevices(const Plan& plan, const std::vector<int32_t>& local, int32_t procs) const {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
      throw InputError("<machine>", "gpus",
                       fmt::format("no CUDA device is visible to this process ({}); run on a GPU machine or use "
                                   "--backend host",
                                   e != cudaSuccess ? DescribeGpuStatus(e) : "0 devices"));
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

  // Reserves, per GPU, the plan's device peak (pool.h GrowPool): the pool
  // keeps it (release threshold = max) and carves the run's buffers out of it.
  // The reserved memory is poisoned here, in Begin, before the clock starts,
  // so staging and destination buffers allocated during the run start out
  // poisoned without a memset inside the timed run.
  void WarmPool(const Plan& plan) {
    const std::vector<int64_t> peak = PlanDevicePeakBytes(plan, [this](int32_t gpu) { return IsLocal(gpu); });
    for (auto& g : gpus_state_) GrowPool(g->pool, g->device, peak[g->gpu], g->streams[0], kPoison);
  }

  // Communicators and streams of the GPUs this backend drove.
  void DestroyGpus(FirstGpuError& errors) {
    comms_.Close(errors);
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

  // Frees what one run created: device buffers (poisoned first), events,
  // arenas; returns the pool's memory to the driver. Pinned host buffers are
  // kept for the next run (kept_host_).
  void Release(FirstGpuError& errors) {
    StopSampler();
    if (!begun_) return;
    begun_ = false;
    failed_gpu_ = -1;
    // Bounded: after a failed run whose communicators were aborted the streams
    // drain; a GPU still busy after that keeps its buffers (freeing memory a
    // running kernel uses is worse than leaking it) and says so.
    if (!comms_.DrainForCleanup(errors)) {
      checks_.clear();
      return;
    }
    for (size_t b = 0; b < ptr_.size(); ++b) {
      if (ptr_[b] == nullptr) continue;
      const PlanBuffer& buf = plan_->buffers[b];
      GpuState& g = State(buf.gpu);
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g.device));
      if (buf.space == MemorySpace::kHost) {
        kept_host_.Put(static_cast<int32_t>(b), buf.gpu, buf.bytes, ptr_[b]);  // for the next run (Begin)
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
    events_.Destroy(errors);
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

  // Ops that started and have not finished, at most one per local GPU (the
  // first in plan order): where a hang sits. Only ops of the timed run have events.
  std::vector<int32_t> UnfinishedOps() const {
    std::vector<int32_t> out;
    if (plan_ == nullptr) return out;
    std::vector<bool> seen(static_cast<size_t>(std::max(gpu_count_, 0)), false);
    for (const Op& op : plan_->ops) {
      if (!IsLocal(op.gpu) || seen[op.gpu] || !events_.Running(op.id)) continue;
      out.push_back(op.id);
      seen[op.gpu] = true;
    }
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

  // Where the run stands when a wait fails (comms.h): the first unfinished
  // op of each stuck GPU, and the injected fault if one fired.
  StuckOps Stuck() const {
    StuckOps out;
    const std::vector<int32_t> stuck = UnfinishedOps();
    for (int32_t id : stuck)
      out.where += fmt::format("{}GPU {} is in {}", out.where.empty() ? "; " : ", ", plan_->ops[id].gpu, OpText(id));
    if (!stuck.empty()) {
      out.op = stuck.front();
      out.gpu = plan_->ops[out.op].gpu;
    }
    out.note = FaultNote();
    return out;
  }

  PinnedHostBuffers kept_host_;  // between runs (KeptHostBytes)
  NcclBackendOptions opt_;
  const Plan* plan_ = nullptr;
  int32_t last_started_ = -1;  // the op being issued (OpStart)
  bool begun_ = false;
  bool poison_run_allocations_ = false;  // a check run (Backend::PoisonRunAllocations)
  int32_t gpu_count_ = 0;
  std::vector<int32_t> local_gpus_;
  std::vector<int> devices_;
  std::vector<int32_t> index_;  // plan GPU -> index into gpus_state_, -1 when not local
  GpuStates gpus_state_;
  Communicators comms_;  // over gpus_state_
  std::vector<void*> ptr_;      // per plan buffer
  gpu::OpEvents events_;  // per op: its stamps and the events other streams wait for
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

}  // namespace reshard
