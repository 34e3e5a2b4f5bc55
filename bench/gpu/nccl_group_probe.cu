// Probe of the two effects the simulator must model on a colocated refit:
// (1) the cost of many p2p ops to one peer inside one NCCL group, (2) NVLink
// transfers and device copies slowing each other down when they run at the
// same time on the same GPUs (SMs and HBM shared). GPUs 0 and 1, both
// directions. Prints one line per measurement, best of 5 after a warm-up.
// CUDA / NCCL failures: GpuError (executor/nccl/gpu_check.h), printed by main.
// Built by bench/CMakeLists.txt (target nccl_group_probe).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>

#include "executor/nccl/gpu_check.h"

// Strided 2-D copy by SM threads (what packing a row-parallel shard does).
__global__ void Copy2D(const uint4* src, uint4* dst, size_t rows, size_t row_vec, size_t src_pitch_vec,
                       size_t dst_pitch_vec) {
  const size_t total = rows * row_vec;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const size_t r = i / row_vec, c = i - r * row_vec;
    dst[r * dst_pitch_vec + c] = src[r * src_pitch_vec + c];
  }
}

struct Gpu {
  ncclComm_t comm;
  cudaStream_t net, copy;
  cudaEvent_t a, b, c, d;
  char *send, *recv, *csrc, *cdst;
  int sms;
};

int Probe(int argc, char** argv) {
  const bool grouped_only = argc > 1 && std::string(argv[1]) == "grouped";
  int n = 0;
  RESHARD_GPU(cudaGetDeviceCount(&n));
  if (n < 2) { printf("needs 2 GPUs\n"); return 0; }
  int v = 0;
  ncclGetVersion(&v);
  printf("nccl %d\n", v);
  ncclComm_t comms[2];
  int devs[2] = {0, 1};
  RESHARD_GPU(ncclCommInitAll(comms, 2, devs));
  const size_t net_bytes = size_t(2) << 30, copy_bytes = size_t(4) << 30;
  Gpu g[2];
  for (int i = 0; i < 2; ++i) {
    RESHARD_GPU(cudaSetDevice(i));
    g[i].comm = comms[i];
    RESHARD_GPU(cudaStreamCreateWithFlags(&g[i].net, cudaStreamNonBlocking));
    RESHARD_GPU(cudaStreamCreateWithFlags(&g[i].copy, cudaStreamNonBlocking));
    for (cudaEvent_t* e : {&g[i].a, &g[i].b, &g[i].c, &g[i].d}) RESHARD_GPU(cudaEventCreate(e));
    RESHARD_GPU(cudaMalloc(&g[i].send, net_bytes));
    RESHARD_GPU(cudaMalloc(&g[i].recv, net_bytes));
    RESHARD_GPU(cudaMalloc(&g[i].csrc, copy_bytes));
    RESHARD_GPU(cudaMalloc(&g[i].cdst, copy_bytes));
    RESHARD_GPU(cudaDeviceGetAttribute(&g[i].sms, cudaDevAttrMultiProcessorCount, i));
  }
  // One group: `ops` sends of `size` each way (contiguous, consecutive).
  auto exchange = [&](size_t size, size_t ops) {
    RESHARD_GPU(ncclGroupStart());
    for (size_t k = 0; k < ops; ++k)
      for (int i = 0; i < 2; ++i) {
        RESHARD_GPU(ncclSend(g[i].send + k * size, size, ncclChar, 1 - i, g[i].comm, g[i].net));
        RESHARD_GPU(ncclRecv(g[i].recv + k * size, size, ncclChar, 1 - i, g[i].comm, g[i].net));
      }
    RESHARD_GPU(ncclGroupEnd());
  };
  // Copy kinds: 0 = none, 1 = cudaMemcpyAsync contiguous, 2 = cudaMemcpy2DAsync half rows,
  // 3 = SM kernel half rows (all SMs), 4 = SM kernel limited to `blocks`.
  const size_t row = 14336 * 2, half = row / 2, rows = copy_bytes / row;
  auto copy = [&](int i, int kind, int blocks) {
    cudaStream_t s = g[i].copy;
    if (kind == 1) RESHARD_GPU(cudaMemcpyAsync(g[i].cdst, g[i].csrc, copy_bytes / 2, cudaMemcpyDeviceToDevice, s));
    if (kind == 2)
      RESHARD_GPU(cudaMemcpy2DAsync(g[i].cdst, half, g[i].csrc, row, half, rows, cudaMemcpyDeviceToDevice, s));
    if (kind >= 3) {
      const int b = kind == 3 ? g[i].sms * 8 : blocks;
      Copy2D<<<b, 256, 0, s>>>(reinterpret_cast<const uint4*>(g[i].csrc), reinterpret_cast<uint4*>(g[i].cdst), rows,
                               half / 16, row / 16, half / 16);
      RESHARD_GPU(cudaGetLastError());
    }
  };
  // Runs net (size x ops, or nothing) and copy together; returns ms of each (max
  // over GPUs) from a common start. net_first: the group is enqueued before the
  // copies (else after). Each side's end event is recorded right after its own work.
  double host_ms = 0;
  auto measure = [&](size_t size, size_t ops, int kind, int blocks, float* net_ms, float* copy_ms,
                     bool net_first = true) {
    float best_net = 1e30f, best_copy = 1e30f;
    for (int it = 0; it < 6; ++it) {
      for (int i = 0; i < 2; ++i) {
        RESHARD_GPU(cudaSetDevice(i));
        RESHARD_GPU(cudaDeviceSynchronize());
        RESHARD_GPU(cudaEventRecord(g[i].a, g[i].net));
        RESHARD_GPU(cudaStreamWaitEvent(g[i].copy, g[i].a, 0));
      }
      auto do_copy = [&]() {
        for (int i = 0; i < 2; ++i) {
          RESHARD_GPU(cudaSetDevice(i));
          if (kind) copy(i, kind, blocks);
          RESHARD_GPU(cudaEventRecord(g[i].d, g[i].copy));
        }
      };
      if (!net_first) do_copy();
      const auto t0 = std::chrono::steady_clock::now();
      if (ops) exchange(size, ops);
      host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      for (int i = 0; i < 2; ++i) {
        RESHARD_GPU(cudaSetDevice(i));
        RESHARD_GPU(cudaEventRecord(g[i].b, g[i].net));
      }
      if (net_first) do_copy();
      float nm = 0, cm = 0;
      for (int i = 0; i < 2; ++i) {
        RESHARD_GPU(cudaSetDevice(i));
        RESHARD_GPU(cudaDeviceSynchronize());
        float m = 0;
        RESHARD_GPU(cudaEventElapsedTime(&m, g[i].a, g[i].b));
        nm = std::max(nm, m);
        RESHARD_GPU(cudaEventElapsedTime(&m, g[i].a, g[i].d));
        cm = std::max(cm, m);
      }
      if (it > 0) best_net = std::min(best_net, nm), best_copy = std::min(best_copy, cm);
    }
    *net_ms = best_net;
    *copy_ms = best_copy;
  };
  float nm = 0, cm = 0;
  // (1) Grouped ops: total per direction fixed where possible.
  printf("# grouped: size_B ops_per_direction ms per_op_us GB/s_each_way\n");
  for (size_t size : {size_t(1) << 20, size_t(4) << 20, size_t(16) << 20, size_t(64) << 20, size_t(208) << 20,
                      size_t(256) << 20, size_t(1) << 30}) {
    for (size_t ops : {size_t(1), size_t(4), size_t(8), size_t(64), size_t(512)}) {
      if (size * ops > net_bytes) continue;
      measure(size, ops, 0, 0, &nm, &cm);
      printf("grouped %10zu %4zu %9.3f %8.2f %7.1f\n", size, ops, nm, nm * 1e3 / ops, size * ops / (nm * 1e6));
    }
  }
  if (grouped_only) return 0;
  // (2) Contention: 2 GiB each way as 8 ops of 256 MiB, with each copy kind.
  const char* names[] = {"none", "memcpy-contig", "memcpy2d-half-rows", "kernel-half-rows", "kernel-half-rows-32blk"};
  printf("# contention: copy_kind net_ms net_GB/s copy_ms copy_GB/s (copy bytes read = written = 2 GiB)\n");
  for (int kind = 1; kind <= 4; ++kind) {
    float alone_copy = 0;
    measure(0, 0, kind, 32, &nm, &alone_copy);
    for (int net_first = 1; net_first >= 0; --net_first) {
      for (size_t ops : {size_t(1), size_t(8)}) {
        measure(net_bytes / ops, ops, kind, 32, &nm, &cm, net_first);
        printf("contention %-22s %s ops %zu copy-alone %8.3f ms %7.1f GB/s | together net %8.3f ms %7.1f GB/s copy "
               "%8.3f ms %7.1f GB/s (group end on host %.3f ms)\n",
               names[kind], net_first ? "net-first " : "copy-first", ops, alone_copy,
               copy_bytes / 2 / (alone_copy * 1e6), nm, net_bytes / (nm * 1e6), cm, copy_bytes / 2 / (cm * 1e6),
               host_ms);
      }
    }
  }
  for (size_t ops : {size_t(1), size_t(8)}) {
    measure(net_bytes / ops, ops, 0, 0, &nm, &cm);
    printf("contention %-22s ops %zu net alone %8.3f ms %7.1f GB/s\n", "none", ops, nm, net_bytes / (nm * 1e6));
  }
  for (int i = 0; i < 2; ++i) ncclCommDestroy(comms[i]);
  return 0;
}

int main(int argc, char** argv) {
  try {
    return Probe(argc, argv);
  } catch (const std::exception& e) {
    printf("%s\n", e.what());
    return 1;
  }
}
