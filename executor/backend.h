// Backend: the primitives a Plan is run with; the executor (executor.h) is the
// one walker that drives them for every backend.
//
// The model is CUDA's: work is *issued* by one host thread (the walker) onto
// (gpu, stream) queues and runs asynchronously; queues are FIFO; an op's end
// is an event other queues can wait for; ops of one group are issued inside
// one GroupStart/GroupEnd (one NCCL group). The walker guarantees:
//  * it issues ops in one global topological order of the plan's groups (a
//    group = ops sharing a group id, plus each send with its matching recv),
//    the same order in every process;
//  * every dependency that is not implied by queue order is a WaitOp;
//  * inside a group, sends are issued in op-id order and receives in the
//    order of their matching send, so per-peer FIFO matching pairs each
//    receive with its own send;
//  * it calls Allocate(stream < 0) only before StartClock, for buffers the
//    plan marks preexisting, and Fill / Check only outside the timed run.
// Backends: HostBackend (host_backend.h: threads + memcpy, optionally MPI),
// NcclBackend (executor/nccl/backend.h: CUDA streams and events, NCCL;
// its errors are GpuError, a RunError).
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "executor/pattern.h"
#include "executor/quantize_math.h"
#include "plan/plan.h"

namespace reshard {

class MpiSession;

// A run that started and then failed: an injected fault, a peer that never
// answered within the timeout, a CUDA / NCCL error. It names the op and the
// GPU (rank) where known (-1 otherwise). No destination of a failed run
// counts as refit; the backend has released the run's memory by the time
// Execute rethrows it.
class RunError : public std::runtime_error {
 public:
  explicit RunError(const std::string& message, int32_t op = -1, int32_t gpu = -1)
      : std::runtime_error(message), op_(op), gpu_(gpu) {}
  int32_t op() const { return op_; }
  int32_t gpu() const { return gpu_; }

 private:
  int32_t op_, gpu_;
};

// Fault injection for tests and drills: GPU (rank) `gpu` fails at op `op`.
// The host backend throws there; the NCCL backend stops issuing that GPU's
// sends and receives from that op on, so its peers wait until the timeout
// aborts the communicators. The CLI reads it from RESHARD_FAULT="gpu=G,op=N"
// ("rank" is accepted for "gpu").
struct FaultInjection {
  int32_t gpu = -1;
  int32_t op = -1;
  bool active() const { return gpu >= 0 && op >= 0; }
  friend bool operator==(const FaultInjection&, const FaultInjection&) = default;
};
// Parses "gpu=G,op=N" (or "rank=G,op=N"); "" gives an inactive fault. Throws
// InputError(source, "RESHARD_FAULT", ...) on anything else.
FaultInjection ParseFaultSpec(std::string_view spec, const std::string& source = "<environment>");
// Why `f` cannot fire in `plan` ("" when it can): the op must exist and run on that GPU.
std::string FaultProblem(const FaultInjection& f, const Plan& plan);

// When an op ran, relative to the run's reference (t = 0, StartClock), in seconds.
struct OpTime {
  int32_t op = -1;
  int32_t gpu = -1;
  double start_s = 0;
  double end_s = 0;
  friend bool operator==(const OpTime&, const OpTime&) = default;
};

struct ElementMismatch {
  int64_t index = 0;      // global row-major element index in the tensor
  uint64_t expected = 0;  // value bits
  uint64_t got = 0;
  friend bool operator==(const ElementMismatch&, const ElementMismatch&) = default;
};

// Result of checking one destination content piece.
struct PieceCheck {
  int32_t piece = -1;                  // index into Plan::destinations
  int64_t elements = 0;                // elements checked
  int64_t mismatches = 0;              // all of them, counted
  std::vector<ElementMismatch> first;  // a few of them (lowest indices the backend saw)
};

// Memory one GPU used, as the backend saw it.
struct GpuMemoryStats {
  int32_t gpu = -1;
  // Device memory in use at the busiest moment, everything the backend can
  // see: the plan's device buffers, and for NCCL also the CUDA context,
  // NCCL's buffers and the allocator's rounding (cudaMemGetInfo).
  int64_t peak_bytes = 0;
  // The plan's own device buffers at the busiest moment, tracked exactly at
  // each alloc / free as it executed.
  int64_t plan_peak_bytes = 0;
  int64_t host_peak_bytes = 0;  // the plan's host (pinned) buffers
  int64_t context_bytes = 0;    // NCCL backend: device memory in use after context creation
  int64_t comm_bytes = 0;       // NCCL backend: added by communicator creation and peer warm-up
  friend bool operator==(const GpuMemoryStats&, const GpuMemoryStats&) = default;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string Name() const = 0;  // "host", "nccl"

  // Prepares to run `plan` (streams, events, communicators, worker threads).
  // Throws InputError when this machine cannot run it (too few GPUs, a
  // process layout that does not divide the plan's GPUs).
  virtual void Begin(const Plan& plan) = 0;
  // Plan GPUs this process drives (valid after Begin), ascending.
  virtual std::vector<int32_t> LocalGpus() const = 0;
  // The multi-process session, or nullptr when this process is the whole run.
  virtual const MpiSession* Processes() const = 0;
  // Connects the peers the plan talks to, so connection setup is not timed
  // (a refit runs every training step; its steady state has them connected).
  virtual void Warmup(const std::vector<std::pair<int32_t, int32_t>>& send_pairs) = 0;
  // Frees everything still allocated (poisoning it first, so stale correct
  // bytes cannot pass a later run's check) and releases per-run resources;
  // host buffers may be kept for the next run instead (KeptHostBytes).
  virtual void End() = 0;

  // Check runs (set before Begin): every device buffer allocated during the
  // run is filled with the poison byte first (a memset ordered after the
  // allocation on its stream), so memory the allocator hands back after a
  // free cannot hold stale right bytes where a write is missing. It costs a
  // memset per allocation, so timed runs leave it off. The host backend
  // poisons every allocation always.
  virtual void PoisonRunAllocations(bool on) { (void)on; }

  // Memory. stream < 0: allocate now (preexisting buffers, before timing).
  virtual void Allocate(const PlanBuffer& b, int32_t stream) = 0;
  virtual void Free(const PlanBuffer& b, int32_t stream) = 0;

  // One batch of strided copies on (gpu, stream): every pair's source byte
  // sequence is written to its destination sequence (plan/plan.h Region).
  // `sm_share` (0, 1]: the share of the GPU's copy grid the plan gives this
  // op (Op::sm_share); backends without SMs ignore it.
  virtual void Copy(int32_t gpu, int32_t stream, std::span<const CopyPair> pairs, double sm_share) = 0;
  // One quantize op on (gpu, stream): each job's blocks read bf16, write
  // fp8 E4M3 and one scale each (executor/quantize_math.h, QuantizeBlock).
  virtual void Quantize(int32_t gpu, int32_t stream, std::span<const QuantizeJob> jobs) {
    (void)stream;
    (void)jobs;
    throw RunError("the " + Name() + " backend cannot quantize", -1, gpu);
  }
  virtual void GroupStart() = 0;
  virtual void Send(int32_t gpu, int32_t stream, const Region& r, int32_t peer) = 0;
  virtual void Recv(int32_t gpu, int32_t stream, const Region& r, int32_t peer) = 0;
  virtual void GroupEnd() = 0;

  // Events and timers: OpStart / OpEnd bracket op `op`'s work on its queue;
  // OpEnd is also the event WaitOp waits for.
  virtual void OpStart(int32_t op, int32_t gpu, int32_t stream) = 0;
  virtual void OpEnd(int32_t op, int32_t gpu, int32_t stream) = 0;
  virtual void WaitOp(int32_t gpu, int32_t stream, int32_t op) = 0;

  // The timed run: StartClock waits for the set-up work (fills, poisoning),
  // passes a barrier across processes and then marks t = 0 (the reference)
  // on every local GPU, right before the walker issues the first op: op times
  // relative to it are times from the call, the host's issue included.
  // Nothing is queued ahead of the clock. StopClock waits for all issued work
  // and ends sampling.
  virtual void StartClock() = 0;
  virtual void StopClock() = 0;
  virtual std::vector<OpTime> OpTimes() = 0;  // after StopClock; ops of local GPUs

  // Content. Fill writes the pattern of a source piece; Check queues a
  // destination piece; CheckResults runs the queued checks and returns one
  // PieceCheck each (at most `max_recorded` mismatches recorded per piece).
  virtual void Fill(const PlanBuffer& b, const PieceMap& m) = 0;
  virtual void Check(const PlanBuffer& b, const PieceMap& m, int32_t piece) = 0;
  virtual std::vector<PieceCheck> CheckResults(int32_t max_recorded) = 0;

  virtual std::vector<GpuMemoryStats> MemoryStats() = 0;  // per local GPU

  // Bytes of plan buffers (device and host) a run holds right now; 0 after
  // End(), also after a failed run. -1: the backend does not track it.
  // Host buffers kept for the next run (KeptHostBytes) are not counted.
  virtual int64_t LiveBytes() const { return -1; }
  // Host (pinned) buffers kept between runs: a backend may keep the plan's
  // host buffers from End to the next Begin of a plan with the same buffer
  // (id, GPU, bytes), as a training job keeps them across steps, instead of
  // pinning them again; they are poisoned when reused (sources are filled
  // again) and freed when the backend is destroyed or the next plan does not
  // use them.
  virtual int64_t KeptHostBytes() const { return 0; }
};

}  // namespace reshard
