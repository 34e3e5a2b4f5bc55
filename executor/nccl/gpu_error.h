// GpuError: a CUDA or NCCL call failed, or a GPU run was aborted (a peer that
// never answered, an asynchronous NCCL error). No CUDA types here, so
// host-compiled code can catch it; the checks that throw it are in
// executor/nccl/gpu_check.h.
#pragma once

#include "executor/backend.h"  // RunError

namespace reshard {

// A RunError: the executor's callers treat it as a run that failed part-way.
class GpuError : public RunError {
 public:
  using RunError::RunError;
};

}  // namespace reshard
