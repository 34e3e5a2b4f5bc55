// The messages of the CUDA / NCCL error boundary (gpu_check.h).
#include "executor/nccl/gpu_check.h"

#include <cstring>

#include <fmt/format.h>

#include "executor/nccl/gpu_error.h"

namespace reshard {

namespace {

std::string Where(const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  return fmt::format("{}:{}", slash != nullptr ? slash + 1 : file, line);
}

}  // namespace

std::string DescribeGpuStatus(cudaError_t e) {
  return fmt::format("{} ({})", cudaGetErrorString(e), cudaGetErrorName(e));
}

std::string DescribeGpuStatus(ncclResult_t r) {
  const char* last = ncclGetLastError(nullptr);
  return fmt::format("{}{}{}", ncclGetErrorString(r), last != nullptr && *last != '\0' ? ": " : "",
                     last != nullptr ? last : "");
}

std::string GpuFailureText(cudaError_t e, const char* call, const char* file, int line) {
  return fmt::format("{}: {} failed: {}", Where(file, line), call, DescribeGpuStatus(e));
}
std::string GpuFailureText(ncclResult_t r, const char* call, const char* file, int line) {
  return fmt::format("{}: {} failed: {}", Where(file, line), call, DescribeGpuStatus(r));
}

void ThrowGpuError(cudaError_t e, const char* call, const char* file, int line) {
  throw GpuError(GpuFailureText(e, call, file, line));
}
void ThrowGpuError(ncclResult_t r, const char* call, const char* file, int line) {
  throw GpuError(GpuFailureText(r, call, file, line));
}

}  // namespace reshard
