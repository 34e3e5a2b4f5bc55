// Environment probe for a GPU machine: CUDA + NCCL p2p between GPU 0 and 1,
// one way and both ways, 4 MiB to 1 GiB (best of 5 after one warm-up each).
// CUDA / NCCL failures: GpuError (executor/nccl/gpu_check.h), printed by main.
#include <cstdio>
#include <exception>

#include <cuda_runtime.h>
#include <nccl.h>

#include "executor/nccl/gpu_check.h"

int Probe() {
  int n = 0;
  RESHARD_GPU(cudaGetDeviceCount(&n));
  printf("gpus %d\n", n);
  if (n < 2) return 0;
  int v;
  ncclGetVersion(&v);
  printf("nccl %d\n", v);
  ncclComm_t comm[2];
  int devs[2] = {0, 1};
  RESHARD_GPU(ncclCommInitAll(comm, 2, devs));
  size_t maxb = 1ull << 30;
  void* buf[2][2];
  cudaStream_t st[2];
  cudaEvent_t e0[2], e1[2];
  for (int g = 0; g < 2; g++) {
    RESHARD_GPU(cudaSetDevice(g));
    RESHARD_GPU(cudaMalloc(&buf[g][0], maxb));
    RESHARD_GPU(cudaMalloc(&buf[g][1], maxb));
    RESHARD_GPU(cudaStreamCreate(&st[g]));
    cudaEventCreate(&e0[g]);
    cudaEventCreate(&e1[g]);
  }
  for (int bidir = 0; bidir < 2; bidir++)
    for (size_t b = 1 << 22; b <= maxb; b *= 4) {
      float best = 1e9;
      for (int it = 0; it < 6; it++) {
        for (int g = 0; g < 2; g++) {
          cudaSetDevice(g);
          cudaEventRecord(e0[g], st[g]);
        }
        RESHARD_GPU(ncclGroupStart());
        RESHARD_GPU(ncclSend(buf[0][0], b, ncclChar, 1, comm[0], st[0]));
        RESHARD_GPU(ncclRecv(buf[1][1], b, ncclChar, 0, comm[1], st[1]));
        if (bidir) {
          RESHARD_GPU(ncclSend(buf[1][0], b, ncclChar, 0, comm[1], st[1]));
          RESHARD_GPU(ncclRecv(buf[0][1], b, ncclChar, 1, comm[0], st[0]));
        }
        RESHARD_GPU(ncclGroupEnd());
        float ms = 0;
        for (int g = 0; g < 2; g++) {
          cudaSetDevice(g);
          cudaEventRecord(e1[g], st[g]);
          cudaEventSynchronize(e1[g]);
          float m;
          cudaEventElapsedTime(&m, e0[g], e1[g]);
          if (m > ms) ms = m;
        }
        if (it > 0 && ms < best) best = ms;
      }
      printf("%s %10zu B  %8.3f ms  %7.1f GB/s\n", bidir ? "bidir" : "uni  ", b, best, b / best / 1e6);
    }
  return 0;
}

int main() {
  try {
    return Probe();
  } catch (const std::exception& e) {
    printf("%s\n", e.what());
    return 1;
  }
}
