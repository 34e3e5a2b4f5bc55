// Pinned host buffers kept between runs, and filling them (pinned.h).
#include "executor/nccl/pinned.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

namespace reshard {

cudaError_t PinnedHostBuffers::KeepOnly(const std::function<bool(int32_t, int32_t, int64_t)>& reusable) {
  cudaError_t first = cudaSuccess;
  for (auto it = kept_.begin(); it != kept_.end();) {
    if (reusable(it->first, it->second.gpu, it->second.bytes)) {
      ++it;
      continue;
    }
    const cudaError_t e = cudaFreeHost(it->second.ptr);
    if (first == cudaSuccess) first = e;
    it = kept_.erase(it);
  }
  return first;
}

void* PinnedHostBuffers::Take(int32_t id) {
  const auto it = kept_.find(id);
  if (it == kept_.end()) return nullptr;
  void* p = it->second.ptr;
  kept_.erase(it);
  return p;
}

int64_t PinnedHostBuffers::Bytes() const {
  int64_t bytes = 0;
  for (const auto& [id, k] : kept_) bytes += k.bytes;
  return bytes;
}

void PinnedHostBuffers::FreeAll() {
  for (auto& [id, k] : kept_) (void)cudaFreeHost(k.ptr);
  kept_.clear();
}

void PoisonHost(void* p, size_t bytes, unsigned char value) {
  constexpr size_t kPerThread = size_t{256} << 20;
  const size_t threads =
      std::clamp<size_t>(bytes / kPerThread, 1, std::max<size_t>(std::thread::hardware_concurrency(), 1));
  if (threads == 1) {
    std::memset(p, value, bytes);
    return;
  }
  const size_t step = (bytes + threads - 1) / threads;
  std::vector<std::thread> pool;
  for (size_t i = 0; i < threads; ++i) {
    const size_t begin = i * step, end = std::min(bytes, begin + step);
    if (begin < end) pool.emplace_back([=] { std::memset(static_cast<unsigned char*>(p) + begin, value, end - begin); });
  }
  for (std::thread& t : pool) t.join();
}

}  // namespace reshard
