// HostBackend: worker threads, memcpy, in-process channels and MPI.
#include "executor/host_backend.h"
#include "executor/quantize_content.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "executor/mpi_session.h"
#include "executor/region_walk.h"
#include "model/error.h"

namespace reshard {

namespace {

using Clock = std::chrono::steady_clock;

struct AlignedFree {
  void operator()(unsigned char* p) const { std::free(p); }
};
using Bytes = std::unique_ptr<unsigned char, AlignedFree>;

// Bytes behind a buffer of `bytes`: at least 1, rounded up to the 64-byte alignment.
size_t AllocatedBytes(int64_t bytes) { return (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + 63) / 64 * 64; }

Bytes AllocateBytes(int64_t bytes, unsigned char poison) {
  const size_t n = AllocatedBytes(bytes);
  auto* p = static_cast<unsigned char*>(std::aligned_alloc(64, n));
  if (p == nullptr) throw RunError(fmt::format("host backend: out of memory allocating {} bytes", bytes));
  std::memset(p, poison, n);
  return Bytes(p);
}

// One GPU's queue, run by its own thread.
class Worker {
 public:
  Worker() : thread_([this] { Loop(); }) {}
  ~Worker() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Push(std::function<void()> task) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_all();
  }
  void Drain() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void Loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ with nothing left
      std::function<void()> task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
      lock.unlock();
      task();
      lock.lock();
      busy_ = false;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses exist
};

class HostBackend final : public Backend {
 public:
  explicit HostBackend(const HostBackendOptions& o) : opt_(o) {}
  ~HostBackend() override { StopWorkers(); }

  std::string Name() const override { return "host"; }
  const MpiSession* Processes() const override { return opt_.mpi; }
  std::vector<int32_t> LocalGpus() const override { return local_gpus_; }

  void Begin(const Plan& plan) override {
    plan_ = &plan;
    gpus_ = plan.Gpus();
    const int32_t procs = opt_.mpi != nullptr ? opt_.mpi->size() : 1;
    const int32_t rank = opt_.mpi != nullptr ? opt_.mpi->rank() : 0;
    local_gpus_ = GpuBlock(gpus_, procs, rank);
    local_.assign(gpus_, false);
    for (int32_t g : local_gpus_) local_[g] = true;
    if (procs > 1 && static_cast<int64_t>(gpus_) * gpus_ > opt_.mpi->MaxTag())
      throw InputError("<environment>", "mpirun", fmt::format("{} GPUs need more MPI tags than the {} this MPI offers",
                                                              gpus_, opt_.mpi->MaxTag()));
    buffers_.clear();
    buffers_.resize(plan.buffers.size());
    KeepSpares(plan);
    done_ = std::make_unique<std::atomic<bool>[]>(plan.ops.size());
    for (size_t i = 0; i < plan.ops.size(); ++i) done_[i] = false;
    times_.assign(plan.ops.size(), OpTime{});
    started_.assign(plan.ops.size(), false);
    mem_.assign(gpus_, {});
    for (int32_t g : local_gpus_) mem_[g].gpu = g;
    checks_.clear();
    channels_.clear();
    error_ = nullptr;
    aborted_ = false;
    pending_.assign(gpus_, {});
    comm_ops_.assign(gpus_, {});
    in_group_ = false;
    if (const std::string why = FaultProblem(opt_.fault, plan); !why.empty())
      throw InputError("<environment>", "RESHARD_FAULT", why);
    workers_.clear();
    workers_.resize(gpus_);
    for (int32_t g : local_gpus_) workers_[g] = std::make_unique<Worker>();
  }

  void Warmup(const std::vector<std::pair<int32_t, int32_t>>&) override {}  // nothing to connect

  void End() override {
    {
      // Wakes any worker still waiting (a run that failed part-way, or a walker
      // that stopped issuing) so that joining it is immediate, not a timeout.
      std::lock_guard lock(mu_);
      aborted_ = true;
    }
    cv_.notify_all();
    StopWorkers();
    // Host buffers still allocated are kept for the next run, as freed ones were.
    for (size_t b = 0; b < buffers_.size(); ++b)
      if (buffers_[b] != nullptr && plan_->buffers[b].space == MemorySpace::kHost)
        spare_[b] = {plan_->buffers[b].gpu, plan_->buffers[b].bytes, std::move(buffers_[b])};
    buffers_.clear();
  }

  int64_t KeptHostBytes() const override {
    int64_t bytes = 0;
    for (const Spare& s : spare_)
      if (s.data != nullptr) bytes += s.bytes;
    return bytes;
  }

  // What is allocated now, from the buffers themselves (between runs; a
  // running worker may change it).
  int64_t LiveBytes() const override {
    int64_t bytes = 0;
    for (size_t b = 0; b < buffers_.size(); ++b)
      if (buffers_[b] != nullptr) bytes += plan_->buffers[b].bytes;
    return bytes;
  }

  void Allocate(const PlanBuffer& b, int32_t stream) override {
    if (stream < 0) {
      DoAllocate(b);
      return;
    }
    Push(b.gpu, [this, &b] { DoAllocate(b); });
  }

  void Free(const PlanBuffer& b, int32_t stream) override {
    (void)stream;
    Push(b.gpu, [this, &b] { DoFree(b); });
  }

  void Copy(int32_t gpu, int32_t, std::span<const CopyPair> pairs, double) override {
    Push(gpu, [this, pairs] {
      for (const CopyPair& c : pairs) {
        const unsigned char* src = Data(c.src.buffer);
        unsigned char* dst = Data(c.dst.buffer);
        ForEachRun(c.src, c.dst, [&](int64_t s, int64_t d, int64_t n) { std::memmove(dst + d, src + s, n); });
      }
    });
  }

  void Quantize(int32_t gpu, int32_t, std::span<const QuantizeJob> jobs) override {
    Push(gpu, [this, jobs = std::vector<QuantizeJob>(jobs.begin(), jobs.end())] {
      for (const QuantizeJob& j : jobs) {
        const unsigned char* in = Data(j.in_buffer);
        unsigned char* out = Data(j.out_buffer);
        unsigned char* sc = Data(j.sc_buffer);
        for (int64_t b = 0; b < j.Blocks(); ++b) QuantizeBlock(j, b, in, out, sc);
      }
    });
  }

  void GroupStart() override {
    RESHARD_CHECK(!in_group_, "nested group");
    in_group_ = true;
  }
  void Send(int32_t gpu, int32_t, const Region& r, int32_t peer) override {
    RESHARD_CHECK(in_group_, "send outside a group");
    pending_[gpu].push_back({true, r, peer, NextCommOp(gpu)});
  }
  void Recv(int32_t gpu, int32_t, const Region& r, int32_t peer) override {
    RESHARD_CHECK(in_group_, "receive outside a group");
    pending_[gpu].push_back({false, r, peer, NextCommOp(gpu)});
  }
  void GroupEnd() override {
    RESHARD_CHECK(in_group_, "group end without start");
    in_group_ = false;
    for (int32_t g : local_gpus_) {
      if (pending_[g].empty()) continue;
      Push(g, [this, g, comms = std::move(pending_[g])] { RunGroup(g, comms); });
      pending_[g].clear();
    }
  }

  void OpStart(int32_t op, int32_t gpu, int32_t) override {
    // The walker starts a group's sends and receives before it issues them,
    // in the same order per GPU: remember which op each one is.
    const OpKind kind = plan_->ops[op].kind;
    if (kind == OpKind::kSend || kind == OpKind::kRecv) comm_ops_[gpu].push_back(op);
    if (opt_.fault.active() && opt_.fault.gpu == gpu && opt_.fault.op == op) {
      Push(gpu, [this, op, gpu] {
        throw RunError(fmt::format("{} on GPU {}: injected fault (RESHARD_FAULT gpu={},op={}): GPU {} fails here", OpText(op),
                                   gpu, gpu, op, gpu),
                       op, gpu);
      });
      return;
    }
    Push(gpu, [this, op, gpu] {
      times_[op].op = op;
      times_[op].gpu = gpu;
      times_[op].start_s = Now();
      started_[op] = true;
    });
  }
  void OpEnd(int32_t op, int32_t gpu, int32_t) override {
    Push(gpu, [this, op] {
      times_[op].end_s = Now();
      {
        std::lock_guard lock(mu_);
        done_[op] = true;
      }
      cv_.notify_all();
    });
  }
  void WaitOp(int32_t gpu, int32_t, int32_t op) override {
    Push(gpu, [this, gpu, op] {
      std::unique_lock lock(mu_);
      if (!cv_.wait_until(lock, Deadline(), [&] { return done_[op].load() || aborted_; }))
        throw RunError(fmt::format("host backend: GPU {} waited {} s for {} to finish (did GPU {} fail, or does the "
                                   "plan deadlock?)",
                                   gpu, opt_.timeout_s, OpText(op), plan_->ops[op].gpu),
                       op, gpu);
    });
  }

  void StartClock() override {
    if (opt_.mpi != nullptr) opt_.mpi->Barrier();
    t0_ = Clock::now();
  }
  void StopClock() override {
    for (int32_t g : local_gpus_) workers_[g]->Drain();
    if (error_) std::rethrow_exception(error_);
  }
  std::vector<OpTime> OpTimes() override {
    std::vector<OpTime> out;
    for (size_t i = 0; i < times_.size(); ++i)
      if (started_[i]) out.push_back(times_[i]);
    return out;
  }

  void Fill(const PlanBuffer& b, const PieceMap& m) override {
    unsigned char* base = Data(b.id);
    ForEachElement(m, [&](int64_t g, int64_t l) {
      StoreElement(base + l * m.elem_bytes, m.elem_bytes, PieceValue(m, g));
    });
  }
  void Check(const PlanBuffer& b, const PieceMap& m, int32_t piece) override {
    checks_.push_back({b.id, m, piece});
  }
  std::vector<PieceCheck> CheckResults(int32_t max_recorded) override {
    std::vector<PieceCheck> out;
    for (const PendingCheck& c : checks_) {
      PieceCheck r;
      r.piece = c.piece;
      r.elements = c.map.Elements();
      const unsigned char* base = Data(c.buffer);
      QuantExpectation quant(c.map);
      ForEachElement(c.map, [&](int64_t g, int64_t l) {
        const uint64_t want = c.map.quant.role != 0 ? quant.Value(g) : PieceValue(c.map, g);
        const uint64_t got = LoadElement(base + l * c.map.elem_bytes, c.map.elem_bytes);
        if (got == want) return;
        if (static_cast<int64_t>(r.first.size()) < max_recorded) r.first.push_back({g, want, got});
        ++r.mismatches;
      });
      out.push_back(std::move(r));
    }
    checks_.clear();
    return out;
  }

  std::vector<GpuMemoryStats> MemoryStats() override {
    std::vector<GpuMemoryStats> out;
    for (int32_t g : local_gpus_) {
      GpuMemoryStats s;
      s.gpu = g;
      s.peak_bytes = mem_[g].device_peak;
      s.plan_peak_bytes = mem_[g].device_peak;
      s.host_peak_bytes = mem_[g].host_peak;
      out.push_back(s);
    }
    return out;
  }

 private:
  struct Comm {
    bool send;
    Region region;
    int32_t peer;
    int32_t op;  // the plan op
  };
  struct PendingCheck {
    int32_t buffer;
    PieceMap map;
    int32_t piece;
  };
  struct Memory {
    int32_t gpu = -1;
    int64_t device = 0, device_peak = 0, host = 0, host_peak = 0;
  };
  struct Message {
    std::vector<unsigned char> bytes;
  };
  // A host buffer kept between runs (Backend::KeptHostBytes), by plan buffer id.
  struct Spare {
    int32_t gpu = -1;
    int64_t bytes = 0;
    Bytes data;
  };

  // Keeps the spares `plan` can reuse (same buffer id, GPU and size, in host
  // memory) and frees the others. Each slot is touched only by its GPU's
  // worker during a run, so no lock is needed.
  void KeepSpares(const Plan& plan) {
    std::vector<Spare> kept(plan.buffers.size());
    for (size_t b = 0; b < std::min(spare_.size(), kept.size()); ++b) {
      const PlanBuffer& pb = plan.buffers[b];
      if (spare_[b].data != nullptr && pb.space == MemorySpace::kHost && pb.gpu == spare_[b].gpu &&
          pb.bytes == spare_[b].bytes)
        kept[b] = std::move(spare_[b]);
    }
    spare_ = std::move(kept);
  }

  // "op 5 (recv gpu 1<-0)": names an op in messages.
  std::string OpText(int32_t op) const {
    const Op& o = plan_->ops[op];
    if (o.kind == OpKind::kSend) return fmt::format("op {} (send gpu {}->{})", op, o.gpu, o.peer);
    if (o.kind == OpKind::kRecv) return fmt::format("op {} (recv gpu {}<-{})", op, o.gpu, o.peer);
    return fmt::format("op {} ({} gpu {})", op, OpKindName(o.kind), o.gpu);
  }
  int32_t NextCommOp(int32_t gpu) {
    RESHARD_CHECK(!comm_ops_[gpu].empty(), fmt::format("GPU {}: a send or receive without its OpStart", gpu));
    const int32_t op = comm_ops_[gpu].front();
    comm_ops_[gpu].pop_front();
    return op;
  }

  double Now() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  Clock::time_point Deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(opt_.timeout_s));
  }

  unsigned char* Data(int32_t buffer) {
    RESHARD_CHECK(buffers_[buffer] != nullptr, fmt::format("buffer {} used while not allocated", buffer));
    return buffers_[buffer].get();
  }

  void DoAllocate(const PlanBuffer& b) {
    RESHARD_CHECK(buffers_[b.id] == nullptr, fmt::format("buffer {} allocated twice", b.id));
    if (b.space == MemorySpace::kHost && spare_[b.id].data != nullptr) {
      buffers_[b.id] = std::move(spare_[b.id].data);  // kept from an earlier run: poisoned again
      std::memset(buffers_[b.id].get(), opt_.poison, AllocatedBytes(b.bytes));
    } else {
      buffers_[b.id] = AllocateBytes(b.bytes, opt_.poison);
    }
    Memory& m = mem_[b.gpu];
    if (b.space == MemorySpace::kDevice) {
      m.device += b.bytes;
      m.device_peak = std::max(m.device_peak, m.device);
    } else {
      m.host += b.bytes;
      m.host_peak = std::max(m.host_peak, m.host);
    }
  }
  void DoFree(const PlanBuffer& b) {
    RESHARD_CHECK(buffers_[b.id] != nullptr, fmt::format("buffer {} freed while not allocated", b.id));
    if (b.space == MemorySpace::kHost) spare_[b.id] = {b.gpu, b.bytes, std::move(buffers_[b.id])};
    else buffers_[b.id].reset();
    (b.space == MemorySpace::kDevice ? mem_[b.gpu].device : mem_[b.gpu].host) -= b.bytes;
  }

  // Runs on GPU g's worker: sends first (never blocking), then receives.
  void RunGroup(int32_t g, const std::vector<Comm>& comms) {
    std::vector<MpiSession::Request> remote_sends;
    std::vector<std::vector<unsigned char>> remote_data;
    for (const Comm& c : comms) {
      if (!c.send) continue;
      const unsigned char* p = Data(c.region.buffer) + c.region.offset_bytes;
      std::vector<unsigned char> bytes(p, p + c.region.Bytes());
      if (local_[c.peer]) {
        {
          std::lock_guard lock(mu_);
          channels_[{g, c.peer}].push_back({std::move(bytes)});
        }
        cv_.notify_all();
      } else {
        remote_data.push_back(std::move(bytes));
        std::lock_guard lock(mpi_mu_);
        remote_sends.push_back(opt_.mpi->Isend(remote_data.back().data(), c.region.Bytes(),
                                               GpuOwner(c.peer, gpus_, opt_.mpi->size()), Tag(g, c.peer)));
      }
    }
    for (const Comm& c : comms) {
      if (c.send) continue;
      unsigned char* p = Data(c.region.buffer) + c.region.offset_bytes;
      if (local_[c.peer]) {
        std::unique_lock lock(mu_);
        auto& q = channels_[{c.peer, g}];
        if (!cv_.wait_until(lock, Deadline(), [&] { return !q.empty() || aborted_; }))
          throw RunError(fmt::format("host backend: {} on GPU {} waited {} s for its message from GPU {} (did GPU {} "
                                     "fail, or does the plan deadlock?)",
                                     OpText(c.op), g, opt_.timeout_s, c.peer, c.peer),
                         c.op, g);
        if (aborted_) return;
        Message msg = std::move(q.front());
        q.pop_front();
        lock.unlock();
        if (static_cast<int64_t>(msg.bytes.size()) != c.region.Bytes())
          throw RunError(fmt::format("host backend: {} on GPU {} expected {} bytes from GPU {} but got {}", OpText(c.op),
                                     g, c.region.Bytes(), c.peer, msg.bytes.size()),
                         c.op, g);
        if (!Lost(c.op)) std::memcpy(p, msg.bytes.data(), msg.bytes.size());
      } else {
        std::vector<unsigned char> lost;  // the test hook's sink
        if (Lost(c.op)) {
          lost.resize(static_cast<size_t>(c.region.Bytes()));
          p = lost.data();
        }
        MpiSession::Request req;
        {
          std::lock_guard lock(mpi_mu_);
          req = opt_.mpi->Irecv(p, c.region.Bytes(), GpuOwner(c.peer, gpus_, opt_.mpi->size()), Tag(c.peer, g));
        }
        PollUntil(req, g, c.peer, c.op);
      }
    }
    for (MpiSession::Request& r : remote_sends) PollUntil(r, g, -1, -1);
  }

  bool Lost(int32_t op) const { return opt_.lose_receive && opt_.lose_receive(*plan_, op); }

  int32_t Tag(int32_t from, int32_t to) const { return from * gpus_ + to; }

  void PollUntil(MpiSession::Request& req, int32_t g, int32_t peer, int32_t op) {
    const auto deadline = Deadline();
    for (;;) {
      {
        std::lock_guard lock(mpi_mu_);
        if (req.Test()) return;
      }
      if (aborted_) return;
      if (Clock::now() > deadline)
        throw RunError(peer >= 0 ? fmt::format("host backend: {} on GPU {} waited {} s for its message from GPU {} in "
                                               "another process (did it fail?)",
                                               OpText(op), g, opt_.timeout_s, peer)
                                 : fmt::format("host backend: GPU {} waited {} s for its sends to be received", g,
                                               opt_.timeout_s),
                       op, g);
      std::this_thread::yield();
    }
  }

  void Push(int32_t gpu, std::function<void()> task) {
    RESHARD_CHECK(gpu >= 0 && gpu < gpus_ && workers_[gpu] != nullptr, fmt::format("GPU {} is not local", gpu));
    workers_[gpu]->Push([this, task = std::move(task)] {
      if (aborted_) return;
      try {
        task();
      } catch (...) {
        {
          std::lock_guard lock(mu_);
          if (!error_) error_ = std::current_exception();  // the first error wins
          aborted_ = true;
        }
        cv_.notify_all();
      }
    });
  }

  void StopWorkers() {
    workers_.clear();  // joins after draining each queue
  }

  HostBackendOptions opt_;
  const Plan* plan_ = nullptr;
  int32_t gpus_ = 0;
  std::vector<int32_t> local_gpus_;
  std::vector<bool> local_;
  std::vector<Bytes> buffers_;
  std::vector<Spare> spare_;  // by plan buffer id
  std::vector<Memory> mem_;
  std::vector<OpTime> times_;
  std::vector<char> started_;  // char, not bool: written by different threads
  std::unique_ptr<std::atomic<bool>[]> done_;
  std::vector<PendingCheck> checks_;
  std::vector<std::vector<Comm>> pending_;
  std::vector<std::deque<int32_t>> comm_ops_;  // per GPU: started sends / receives not yet issued (walker thread)
  bool in_group_ = false;
  Clock::time_point t0_;

  std::mutex mu_;  // channels_, done_ transitions, error_
  std::condition_variable cv_;
  std::map<std::pair<int32_t, int32_t>, std::deque<Message>> channels_;  // (from, to) -> FIFO
  std::exception_ptr error_;
  std::atomic<bool> aborted_{false};
  std::mutex mpi_mu_;  // MPI calls from several workers, one at a time

  std::vector<std::unique_ptr<Worker>> workers_;  // last: destroyed (joined) first
};

}  // namespace

std::unique_ptr<Backend> MakeHostBackend(const HostBackendOptions& options) {
  return std::make_unique<HostBackend>(options);
}

}  // namespace reshard
