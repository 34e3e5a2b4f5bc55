// HostBackend: runs a Plan on CPU threads with real bytes in host memory.
//
// One worker thread per plan GPU this process drives; every op of that GPU
// runs on it, in the walker's issue order (a valid linearisation of the GPU's
// streams: concurrency between streams of one GPU is not modelled). Copies
// are memcpy; sends and receives go through in-process FIFO channels, one per
// ordered GPU pair, or through MPI when the peer GPU belongs to another
// process (`mpi` set, one process per GPU or per block of GPUs). In a group
// call a GPU first posts all its sends (they never block) and then waits for
// its receives, so plans whose groups are acyclic cannot deadlock; a receive
// or dependency that waits longer than `timeout_s` fails the run instead of
// hanging it.
//
// Failures: the first error on any worker (an injected
// fault, a timeout, a size mismatch) is kept as a RunError naming the op and
// the GPU, marks the run aborted and wakes every waiting worker, so all GPUs
// stop at once instead of each waiting out its timeout; StopClock rethrows
// it and End() frees every buffer (LiveBytes() is 0 again). In a multi-process
// run the other processes learn of it through their own timeouts (or the
// launcher's abort).
//
// Memory: every allocation is tracked exactly per GPU (device and host
// spaces apart) at the moment the worker executes it. New allocations are
// filled with a poison byte so data that was never written cannot pass the
// check by luck. Host-space buffers are kept after their free (and after
// End) for the next run of a plan with the same buffer, as the NCCL backend
// keeps its pinned ones (Backend::KeptHostBytes), and poisoned when reused. Times are steady_clock wall times (they show ordering, not
// GPU speed).
#pragma once

#include <functional>
#include <memory>

#include "executor/backend.h"

namespace reshard {

struct HostBackendOptions {
  const MpiSession* mpi = nullptr;  // several processes; nullptr: this process drives every GPU
  double timeout_s = 60;            // longest wait for a message or a dependency
  unsigned char poison = 0xA5;      // byte new allocations are filled with
  FaultInjection fault;             // tests and drills: this GPU throws at this op (backend.h)
  // Tests only: a receive op for which this returns true takes its message
  // but writes none of it, as a broken transport or executor would, so a plan
  // that passes Verify ends with wrong destination bytes and the executor's
  // byte check must say so. Called on worker threads: keep it pure.
  std::function<bool(const Plan& plan, int32_t op)> lose_receive;
};

std::unique_ptr<Backend> MakeHostBackend(const HostBackendOptions& options = {});

}  // namespace reshard
