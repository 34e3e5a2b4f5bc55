// Communicators and bounded waits of the NCCL backend (see comms.h).
#include "executor/nccl/comms.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "executor/mpi_session.h"
#include "executor/nccl/backend.h"
#include "executor/nccl/gpu_error.h"
#include "executor/nccl/pool.h"

namespace reshard {

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point Deadline(double timeout_s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
}

// Polling back-off: 1 us doubling up to 1 ms.
void Pause(std::chrono::microseconds& pause) {
  std::this_thread::sleep_for(pause);
  pause = std::min(pause * 2, std::chrono::microseconds(1000));
}

}  // namespace

void ApplyNcclEnvDefaults() {
  setenv("NCCL_NVLS_ENABLE", "0", 0);
  setenv("NCCL_P2P_NVL_CHUNKSIZE", "262144", 0);
}

Communicators::Communicators(GpuStates& gpus, double timeout_s, bool nonblocking, std::function<StuckOps()> locate)
    : gpus_(gpus), timeout_s_(timeout_s), nonblocking_(nonblocking), locate_(std::move(locate)) {}

void Communicators::Create(int32_t world, int32_t rank, const MpiSession* mpi, const std::vector<int>& devices) {
  ApplyNcclEnvDefaults();
  std::vector<int64_t> before;
  for (auto& g : gpus_) {
    RESHARD_GPU(cudaSetDevice(g->device));
    before.push_back(DeviceUsedBytes());
  }
  std::vector<ncclComm_t> comms(gpus_.size(), nullptr);
  if (nonblocking_) {
    // No NCCL call can block this thread, so every wait (connection setup
    // included) is one of ours, bounded by timeout_s.
    ncclUniqueId id{};
    if (mpi == nullptr || rank == 0) RESHARD_GPU(ncclGetUniqueId(&id));
    if (mpi != nullptr) mpi->Broadcast(&id, sizeof(id), 0);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    RESHARD_NCCL(ncclGroupStart());
    for (size_t i = 0; i < gpus_.size(); ++i) {
      RESHARD_GPU(cudaSetDevice(gpus_[i]->device));
      RESHARD_NCCL(ncclCommInitRankConfig(&comms[i], world, id, gpus_[i]->gpu, &config));
    }
    RESHARD_NCCL(ncclGroupEnd());
    for (size_t i = 0; i < gpus_.size(); ++i) gpus_[i]->comm = comms[i];  // polled (and aborted) by WaitComms
    WaitComms("communicator creation (ncclCommInitRankConfig)");
  } else if (mpi == nullptr) {
    std::vector<int> devs(devices.begin(), devices.end());
    RESHARD_GPU(ncclCommInitAll(comms.data(), static_cast<int>(devs.size()), devs.data()));
  } else {
    ncclUniqueId id{};
    if (rank == 0) RESHARD_GPU(ncclGetUniqueId(&id));
    mpi->Broadcast(&id, sizeof(id), 0);
    RESHARD_GPU(ncclGroupStart());
    for (size_t i = 0; i < gpus_.size(); ++i) {
      RESHARD_GPU(cudaSetDevice(gpus_[i]->device));
      RESHARD_GPU(ncclCommInitRank(&comms[i], world, id, gpus_[i]->gpu));
    }
    RESHARD_GPU(ncclGroupEnd());
  }
  for (size_t i = 0; i < gpus_.size(); ++i) {
    GpuState& g = *gpus_[i];
    g.comm = comms[i];
    RESHARD_GPU(cudaSetDevice(g.device));
    g.comm_bytes = DeviceUsedBytes() - before[i];
  }
}

void Communicators::CreateLane2() {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = nonblocking_ ? 0 : 1;
  std::vector<ncclComm_t> split(gpus_.size(), nullptr);
  RESHARD_NCCL(ncclGroupStart());
  for (size_t i = 0; i < gpus_.size(); ++i) {
    RESHARD_GPU(cudaSetDevice(gpus_[i]->device));
    RESHARD_NCCL(ncclCommSplit(gpus_[i]->comm, 0, gpus_[i]->gpu, &split[i], &config));
  }
  RESHARD_NCCL(ncclGroupEnd());
  // Non-blocking: NCCL writes the new handles only when the split is done,
  // which the parent communicators report (polled here, `split` alive).
  WaitComms("the second communicator's creation (ncclCommSplit)");
  for (size_t i = 0; i < gpus_.size(); ++i) {
    if (split[i] == nullptr) Fail(fmt::format("ncclCommSplit gave GPU {} no communicator", gpus_[i]->gpu), -1, -1);
    gpus_[i]->comm2 = split[i];
  }
  WaitComms("the second communicator's creation (ncclCommSplit)");
}

void Communicators::Close(FirstGpuError& errors) {
  if (nonblocking_) {
    for (auto& g : gpus_)
      for (ncclComm_t* c : {&g->comm, &g->comm2}) {
        if (*c == nullptr) continue;
        RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
        const ncclResult_t r = ncclCommFinalize(*c);
        if (r != ncclSuccess && r != ncclInProgress) {
          RESHARD_GPU_CLEANUP(errors, r);
          (void)ncclCommAbort(*c);
          *c = nullptr;
        }
      }
    const auto deadline = Deadline(timeout_s_);
    for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
      bool pending = false;
      for (auto& g : gpus_)
        for (ncclComm_t c : {g->comm, g->comm2}) {
          if (c == nullptr) continue;
          ncclResult_t state = ncclSuccess;
          if (ncclCommGetAsyncError(c, &state) == ncclSuccess && state == ncclInProgress) pending = true;
        }
      if (!pending) break;
      if (Clock::now() > deadline) {
        if (errors.message.empty())
          errors.message = fmt::format("NCCL backend: ncclCommFinalize did not finish within {} s; communicators "
                                       "aborted",
                                       timeout_s_);
        Abort();
        break;
      }
    }
  }
  for (auto& g : gpus_)
    for (ncclComm_t* c : {&g->comm2, &g->comm}) {  // the split one first
      if (*c == nullptr) continue;
      RESHARD_GPU_CLEANUP(errors, cudaSetDevice(g->device));
      const ncclResult_t r = ncclCommDestroy(*c);
      if (r != ncclInProgress) RESHARD_GPU_CLEANUP(errors, r);
      *c = nullptr;
    }
}

void Communicators::Abort() {
  for (auto& g : gpus_)
    for (ncclComm_t* c : {&g->comm2, &g->comm}) {
      if (*c == nullptr) continue;
      (void)cudaSetDevice(g->device);
      (void)ncclCommAbort(*c);
      *c = nullptr;
    }
}

void Communicators::Fail(const std::string& what, int32_t op, int32_t gpu) {
  const StuckOps stuck = locate_();  // before the abort: the events still say where each GPU is
  if (op < 0 && stuck.op >= 0) {
    op = stuck.op;
    gpu = stuck.gpu;
  }
  Abort();
  throw GpuError(fmt::format("NCCL backend: {}{}; communicators aborted (ncclCommAbort){}", what, stuck.where,
                             stuck.note),
                 op, gpu);
}

void Communicators::TimedOut(const std::string& what) {
  Fail(fmt::format("{} did not finish within {} s (timeout: RESHARD_NCCL_TIMEOUT_S / --timeout)", what, timeout_s_),
       -1, -1);
}

void Communicators::CheckAsyncErrors(const std::string& what, bool* pending) {
  for (auto& g : gpus_)
    for (ncclComm_t c : {g->comm, g->comm2}) {
      if (c == nullptr) continue;
      ncclResult_t state = ncclSuccess;
      const ncclResult_t r = ncclCommGetAsyncError(c, &state);
      if (r != ncclSuccess) state = r;
      if (state == ncclInProgress) {
        if (pending != nullptr) *pending = true;
      } else if (state != ncclSuccess) {
        Fail(fmt::format("NCCL reported an error on GPU {} during {}: {}", g->gpu, what, DescribeGpuStatus(state)),
             -1, g->gpu);
      }
    }
}

void Communicators::WaitComms(const std::string& what) {
  if (!nonblocking_) return;  // blocking calls returned only when done
  const auto deadline = Deadline(timeout_s_);
  for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
    bool pending = false;
    CheckAsyncErrors(what, &pending);
    if (!pending) return;
    if (Clock::now() > deadline) TimedOut(what);
  }
}

void Communicators::WaitStreams(const std::string& what) {
  const auto deadline = Deadline(timeout_s_);
  for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
    bool busy = false;
    for (auto& g : gpus_) {
      RESHARD_GPU(cudaSetDevice(g->device));
      for (cudaStream_t st : g->streams) {
        const cudaError_t e = cudaStreamQuery(st);
        if (e == cudaErrorNotReady) {
          busy = true;
        } else if (e != cudaSuccess) {
          Fail(fmt::format("{} failed on GPU {} (device {}): {}", what, g->gpu, g->device, DescribeGpuStatus(e)), -1,
               g->gpu);
        }
      }
    }
    CheckAsyncErrors(what, nullptr);
    if (!busy) return;
    if (Clock::now() > deadline) TimedOut(what);
  }
}

bool Communicators::DrainForCleanup(FirstGpuError& errors) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto deadline = Deadline(timeout_s_);
    for (auto pause = std::chrono::microseconds(1);; Pause(pause)) {
      bool busy = false;
      for (auto& g : gpus_) {
        if (cudaSetDevice(g->device) != cudaSuccess) continue;
        for (cudaStream_t st : g->streams) {
          const cudaError_t e = cudaStreamQuery(st);
          if (e == cudaErrorNotReady) busy = true;
          else RESHARD_GPU_CLEANUP(errors, e);
        }
      }
      if (!busy) return true;
      if (Clock::now() > deadline) break;
    }
    Abort();
  }
  if (errors.message.empty())
    errors.message = fmt::format("NCCL backend: a GPU was still busy {} s after its communicators were aborted; its "
                                 "buffers were not freed",
                                 timeout_s_);
  return false;
}

}  // namespace reshard
