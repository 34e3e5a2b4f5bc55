// Helpers the GPU measurements of `reshard calibrate` share (measure_nccl.cc,
// measure_host.cc): size names for progress lines, the date and the versions
// of the tools a profile records. Defined in measure_nccl.cc (CUDA + NCCL).
#pragma once

#include <cstdint>
#include <string>

namespace reshard {

std::string SizeName(int64_t bytes);  // "4 KiB", "256 MiB", "1 GiB", "100 B"
std::string UtcNow();                 // "2026-12-01T22:24:53Z"

struct ToolVersions {
  std::string host;          // gethostname, or "unknown"
  std::string nccl;          // "2.28.9" (the library loaded)
  std::string cuda_runtime;  // "13.0"
  std::string cuda_driver;   // "13.0"
};
// Throws GpuError when CUDA or NCCL cannot say.
ToolVersions ReadToolVersions();

// Applies the NCCL settings runs use (ApplyNcclEnvDefaults), so a profile
// describes them, and returns the number of visible GPUs; throws
// CalibrationUnavailable (measure_nccl.h) when there is none.
int VisibleGpus();

}  // namespace reshard
