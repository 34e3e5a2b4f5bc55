// GPU resources the measurements of `reshard calibrate` share
// (measure_nccl.cc, measure_host.cc, measure_network.cc): a device buffer, a
// stream with start / end events, a gate that holds a stream while the host
// queues work behind it. Released in reverse order; cleanup errors are
// ignored. CUDA only (compiled into reshard_calibrate_nccl).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "executor/nccl/gpu_check.h"
#include "executor/nccl/kernels.h"

namespace reshard {

struct DeviceBuffer {
  int device = -1;
  void* ptr = nullptr;
  DeviceBuffer(int d, int64_t bytes) : device(d) {
    RESHARD_GPU(cudaSetDevice(d));
    RESHARD_GPU(cudaMalloc(&ptr, static_cast<size_t>(bytes)));
    RESHARD_GPU(cudaMemset(ptr, 0x5a, static_cast<size_t>(bytes)));
  }
  ~DeviceBuffer() {
    if (ptr != nullptr && cudaSetDevice(device) == cudaSuccess) (void)cudaFree(ptr);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

// A stream with its start / end events, on one device.
struct TimedStream {
  int device = -1;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, end = nullptr;
  explicit TimedStream(int d) : device(d) {
    RESHARD_GPU(cudaSetDevice(d));
    RESHARD_GPU(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    RESHARD_GPU(cudaEventCreate(&start));
    RESHARD_GPU(cudaEventCreate(&end));
  }
  ~TimedStream() {
    if (cudaSetDevice(device) != cudaSuccess) return;
    if (start != nullptr) (void)cudaEventDestroy(start);
    if (end != nullptr) (void)cudaEventDestroy(end);
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
  TimedStream(const TimedStream&) = delete;
  TimedStream& operator=(const TimedStream&) = delete;
};

// A stream held by a one-thread kernel spinning on a flag in mapped host
// memory (gpu::LaunchGate), so work queued behind it stays pending.
struct Gate {
  volatile int* flag = nullptr;
  const int* device_flag = nullptr;
  Gate() {
    RESHARD_GPU(cudaHostAlloc(reinterpret_cast<void**>(const_cast<int**>(&flag)), sizeof(int),
                              cudaHostAllocPortable | cudaHostAllocMapped));
    *flag = 0;
    RESHARD_GPU(cudaHostGetDevicePointer(reinterpret_cast<void**>(const_cast<int**>(&device_flag)),
                                         const_cast<int*>(flag), 0));
  }
  ~Gate() { (void)cudaFreeHost(const_cast<int*>(flag)); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;
  void Hold(cudaStream_t s, long long max_ns) {
    *flag = 0;
    RESHARD_GPU(gpu::LaunchGate(device_flag, max_ns, s));
  }
  void Release() { *flag = 1; }
};

}  // namespace reshard
