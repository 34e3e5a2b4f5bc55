// The one boundary for CUDA and NCCL errors: every call is checked here, and
// a failure becomes a GpuError (gpu_error.h) whose message names the call,
// its file and line, and the library's own message. Used by the NCCL backend,
// `reshard calibrate`'s measurements and the GPU bench programs.
//
//   RESHARD_GPU(cudaMalloc(&p, n));                 // throws on any failure
//   RESHARD_NCCL(ncclSend(...));                    // ncclInProgress is accepted
//   RESHARD_GPU_CLEANUP(errors, cudaFree(p));       // cleanup: keeps the first error, carries on
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <nccl.h>

namespace reshard {

// The library's message: "out of memory (cudaErrorMemoryAllocation)";
// for NCCL the status text and, when NCCL has one, its last error.
std::string DescribeGpuStatus(cudaError_t e);
std::string DescribeGpuStatus(ncclResult_t r);

// "<file>:<line>: <call> failed: <DescribeGpuStatus>" (file without its directories).
std::string GpuFailureText(cudaError_t e, const char* call, const char* file, int line);
std::string GpuFailureText(ncclResult_t r, const char* call, const char* file, int line);

[[noreturn]] void ThrowGpuError(cudaError_t e, const char* call, const char* file, int line);
[[noreturn]] void ThrowGpuError(ncclResult_t r, const char* call, const char* file, int line);

inline void CheckGpu(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) ThrowGpuError(e, call, file, line);
}
inline void CheckGpu(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess) ThrowGpuError(r, call, file, line);
}
// Calls on non-blocking communicators may answer ncclInProgress: accepted,
// completing in the background (the caller waits for it, bounded).
inline void CheckNcclAccepted(ncclResult_t r, const char* call, const char* file, int line) {
  if (r != ncclSuccess && r != ncclInProgress) ThrowGpuError(r, call, file, line);
}

// Cleanup keeps going after a failure; the first message is kept.
struct FirstGpuError {
  std::string message;
  void Note(cudaError_t e, const char* call, const char* file, int line) {
    if (e != cudaSuccess && message.empty()) message = GpuFailureText(e, call, file, line);
  }
  void Note(ncclResult_t r, const char* call, const char* file, int line) {
    if (r != ncclSuccess && message.empty()) message = GpuFailureText(r, call, file, line);
  }
};

}  // namespace reshard

#define RESHARD_GPU(call) ::reshard::CheckGpu((call), #call, __FILE__, __LINE__)
#define RESHARD_NCCL(call) ::reshard::CheckNcclAccepted((call), #call, __FILE__, __LINE__)
#define RESHARD_GPU_CLEANUP(errors, call) (errors).Note((call), #call, __FILE__, __LINE__)
