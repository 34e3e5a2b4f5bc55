// The CUDA / NCCL error boundary (executor/nccl/gpu_check.h) without a GPU:
// the messages name the call, the file (no directories), the line and the
// library's own text; cleanup keeps the first error; ncclInProgress is an
// accepted answer on non-blocking communicators and nothing else is.
#include "executor/nccl/gpu_check.h"

#include <string>

#include <gtest/gtest.h>

#include "executor/nccl/gpu_error.h"

namespace reshard {
namespace {

TEST(GpuCheck, CudaFailureNamesCallFileLineAndMessage) {
  try {
    CheckGpu(cudaErrorMemoryAllocation, "cudaMalloc(&p, n)", "/src/executor/nccl/backend.cc", 42);
    FAIL() << "no GpuError";
  } catch (const GpuError& e) {
    EXPECT_EQ(std::string(e.what()),
              "backend.cc:42: cudaMalloc(&p, n) failed: out of memory (cudaErrorMemoryAllocation)");
    EXPECT_EQ(e.op(), -1);
    EXPECT_EQ(e.gpu(), -1);
  }
  EXPECT_NO_THROW(CheckGpu(cudaSuccess, "cudaFree(p)", __FILE__, __LINE__));
}

TEST(GpuCheck, NcclFailureCarriesNcclText) {
  try {
    RESHARD_GPU(ncclInvalidArgument);
    FAIL() << "no GpuError";
  } catch (const RunError& e) {  // a GpuError is a RunError: callers treat it as a failed run
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("gpu_check_test.cc:", 0), 0u) << m;
    EXPECT_NE(m.find("ncclInvalidArgument failed: " + std::string(ncclGetErrorString(ncclInvalidArgument))),
              std::string::npos)
        << m;
  }
}

TEST(GpuCheck, InProgressIsAcceptedOnlyWhereNonBlocking) {
  EXPECT_NO_THROW(RESHARD_NCCL(ncclInProgress));
  EXPECT_NO_THROW(RESHARD_NCCL(ncclSuccess));
  EXPECT_THROW(RESHARD_NCCL(ncclSystemError), GpuError);
  EXPECT_THROW(RESHARD_GPU(ncclInProgress), GpuError);
}

TEST(GpuCheck, CleanupKeepsTheFirstError) {
  FirstGpuError errors;
  RESHARD_GPU_CLEANUP(errors, cudaSuccess);
  EXPECT_TRUE(errors.message.empty());
  RESHARD_GPU_CLEANUP(errors, cudaErrorInvalidValue);
  RESHARD_GPU_CLEANUP(errors, ncclInternalError);
  EXPECT_NE(errors.message.find("cudaErrorInvalidValue failed: invalid argument (cudaErrorInvalidValue)"),
            std::string::npos)
      << errors.message;
}

}  // namespace
}  // namespace reshard
