// The NCCL communicators of the GPUs one process drives, and every wait of
// the NCCL backend, each bounded.
//
// Communicators are non-blocking (ncclConfig_t::blocking = 0) unless told
// otherwise, so no NCCL call blocks the walker: every wait (communicator
// creation, group launch, warm-up, end of the run, cleanup) polls
// cudaStreamQuery and ncclCommGetAsyncError, backing off from 1 us to 1 ms.
// An asynchronous NCCL error, a CUDA error or a wait longer than timeout_s
// aborts every communicator (ncclCommAbort also ends NCCL kernels still
// waiting for a peer) and throws GpuError naming the op each stuck GPU is in.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "executor/nccl/gpu_check.h"
#include "executor/nccl/gpu_state.h"

namespace reshard {

class MpiSession;

// Where a run that has to be aborted stands (asked before the abort).
struct StuckOps {
  std::string where;  // "; GPU 1 is in op 7 (recv gpu 1<-0)", or empty
  int32_t op = -1;    // the first stuck op and its GPU; -1: none started and unfinished
  int32_t gpu = -1;
  std::string note;   // appended to the message (an injected fault)
};

class Communicators {
 public:
  // `gpus` is the backend's list (it may change between calls); `locate` is
  // asked where the run is stuck when a wait fails.
  Communicators(GpuStates& gpus, double timeout_s, bool nonblocking, std::function<StuckOps()> locate);

  // One communicator per local GPU, NCCL rank = plan GPU, `world` ranks in
  // all. Non-blocking: one group of ncclCommInitRankConfig (the unique id
  // from rank 0 through `mpi` when several processes run), waited for with a
  // bound. Blocking: ncclCommInitAll over `devices` in one process, else
  // ncclCommInitRank in one group. Sets each GPU's comm and comm_bytes.
  void Create(int32_t world, int32_t rank, const MpiSession* mpi, const std::vector<int>& devices);
  // Each local GPU's second communicator (GpuState::comm2, the plan's lane
  // 1): ncclCommSplit of `comm` keeping every rank, so its groups run apart
  // from comm's. Collective: every process calls it, in the same place.
  void CreateLane2();
  // Finalize (non-blocking: polled, bounded; one that does not finish in time
  // is aborted), then destroy. Errors go to `errors` (first one wins).
  void Close(FirstGpuError& errors);
  // ncclCommAbort on every communicator; their errors are dropped (the
  // caller's message is the one that counts).
  void Abort();

  // Non-blocking communicators: waits until none is in ncclInProgress.
  void WaitComms(const std::string& what);
  // Waits until every stream of every local GPU is idle.
  void WaitStreams(const std::string& what);
  // Cleanup's wait: true when every stream is idle. After the timeout the
  // communicators are aborted and it waits once more; a GPU still busy then
  // is reported (first error wins) and false returned.
  bool DrainForCleanup(FirstGpuError& errors);

  // Aborts the communicators and throws GpuError naming `what` and where the
  // run is stuck; `op` / `gpu` (-1: the first stuck op) go into the error.
  [[noreturn]] void Fail(const std::string& what, int32_t op, int32_t gpu);

 private:
  // Throws (via Fail) when a local communicator reports an asynchronous error;
  // sets *pending when one is still in ncclInProgress.
  void CheckAsyncErrors(const std::string& what, bool* pending);
  [[noreturn]] void TimedOut(const std::string& what);

  GpuStates& gpus_;
  double timeout_s_;
  bool nonblocking_;
  std::function<StuckOps()> locate_;
};

}  // namespace reshard
