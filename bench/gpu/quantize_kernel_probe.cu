// Probe of the NCCL backend's fp8 quantize kernels (executor/nccl/quantize_kernels.cu)
// on one GPU: each path (generic; one block per CTA with the per-element
// software conversion or the hardware one; 1, 2 or 4 blocks side by side per
// CTA; the default choice) on one layer-sized
// bf16 matrix in 128 x 128 blocks, filled as validate fills quantized tensors
// (FiniteBf16Pattern) and with weight-like values, against a device-to-device
// cudaMemcpyAsync of the same bf16 bytes (the HBM bound: read + write).
// Before timing it checks that the hardware conversion equals E4M3FromFloat
// on every non-NaN fp32 and that the fast division gives the IEEE one's E4M3
// on every bf16 of a block's range against a spread of scales, and that
// every path writes the same bytes. Then the other block shapes against the
// generic kernel: MXFP8's 1 x 32 blocks with E8M0 scales (the one-row kernel)
// and one fp32 scale per matrix, one plane and eight (the two-pass kernels).
// Prints one JSON object per line. Built by bench/CMakeLists.txt.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "executor/nccl/gpu_check.h"
#include "executor/nccl/kernels.h"
#include "executor/pattern.h"
#include "executor/quantize_math.h"

namespace {

using reshard::gpu::QuantizePath;

// kind 0: the validate pattern (exponents 2^-15 .. 2^16); 1: weight-like
// (|x| in 2^-14 .. 2^-2, as trained weights mostly are).
__global__ void FillKernel(uint16_t* x, int64_t n, int kind) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint16_t v = reshard::FiniteBf16Pattern(7, i);
    if (kind == 1) v = static_cast<uint16_t>((v & 0x807Fu) | ((113u + ((v >> 7) & 15u) % 12u) << 7));
    x[i] = v;
  }
}

// The quantize kernels' traffic without their arithmetic: 16 bytes read and
// 8 written per chunk (the high byte of each bf16), 8 chunks loaded per
// thread before any is stored, grid-stride. The ceiling a quantize kernel
// can reach on this GPU with its 2:1 read:write mix.
__global__ void __launch_bounds__(256) TrafficKernel(const uint4* in, uint2* out, int64_t chunks) {
  constexpr int kUnroll = 8;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t base = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; base < chunks;
       base += step * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * step < chunks) v[u] = in[base + u * step];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (base + u * step < chunks)
        out[base + u * step] = make_uint2(__byte_perm(v[u].x, v[u].y, 0x7531), __byte_perm(v[u].z, v[u].w, 0x7531));
  }
}

float MedianMs(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

const char* PathName(QuantizePath p) {
  switch (p) {
    case QuantizePath::kGeneric: return "generic";
    case QuantizePath::kVecSoftware: return "vec_software";
    case QuantizePath::kVecHardware: return "vec_hardware";
    case QuantizePath::kWide1: return "wide1";
    case QuantizePath::kWide2: return "wide2";
    case QuantizePath::kWide4: return "wide4";
    case QuantizePath::kBlock128: return "block128";
    case QuantizePath::kRow: return "row";
    case QuantizePath::kTensor: return "tensor";
    default: return "auto";
  }
}

int Main() {
  int sms = 0;
  RESHARD_GPU(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t s;
  RESHARD_GPU(cudaStreamCreate(&s));
  cudaEvent_t a, b;
  RESHARD_GPU(cudaEventCreate(&a));
  RESHARD_GPU(cudaEventCreate(&b));

  // 1. Exhaustive conversion check and division check over scales of every
  // bf16 amax (fp32 scales) and power-of-two scales.
  std::vector<float> scales;
  for (uint32_t e = 1; e < 255; ++e)
    for (uint32_t m : {0u, 1u, 37u, 64u, 99u, 127u}) {
      const float amax = reshard::BitsFloat((e << 23) | (m << 16));
      scales.push_back(reshard::QuantScale(amax, 0));
      scales.push_back(reshard::QuantScale(amax, 1));
    }
  float* d_scales = nullptr;
  unsigned long long* d_bad = nullptr;
  RESHARD_GPU(cudaMalloc(&d_scales, scales.size() * sizeof(float)));
  RESHARD_GPU(cudaMalloc(&d_bad, 3 * sizeof(unsigned long long)));
  RESHARD_GPU(cudaMemcpy(d_scales, scales.data(), scales.size() * sizeof(float), cudaMemcpyHostToDevice));
  RESHARD_GPU(cudaMemset(d_bad, 0, 3 * sizeof(unsigned long long)));
  RESHARD_GPU(reshard::gpu::LaunchConvertCheck(0, uint64_t{1} << 32, d_scales, static_cast<int32_t>(scales.size()),
                                               d_bad, s));
  unsigned long long bad[3] = {0, 0, 0};
  RESHARD_GPU(cudaMemcpyAsync(bad, d_bad, sizeof(bad), cudaMemcpyDeviceToHost, s));
  RESHARD_GPU(cudaStreamSynchronize(s));
  std::printf("{\"check\": \"convert\", \"fp32_patterns\": %llu, \"mismatches\": %llu, \"divide_pairs\": %llu, "
              "\"divide_mismatches\": %llu, \"amax_pairs\": %llu, \"amax_mismatches\": %llu}\n",
              1ull << 32, bad[0], static_cast<unsigned long long>(scales.size()) << 16, bad[1], (1ull << 30) - (0x7Fu * 0x7Fu),
              bad[2]);

  // 2. Timing: a 53248 x 4096 bf16 matrix (436 MB, llama3-8b's layer buffer).
  reshard::QuantizeJob j;
  j.rows = 53248;
  j.cols = 4096;
  j.block_rows = j.block_cols = 128;
  j.in_row = 2 * j.cols;
  j.out_row = j.cols;
  j.sc_row = 4 * j.BlockCols();
  const int64_t n = j.rows * j.cols, in_bytes = 2 * n, sc_bytes = 4 * j.BlockRows() * j.BlockCols();
  unsigned char *in = nullptr, *out = nullptr, *sc = nullptr, *copy = nullptr;
  RESHARD_GPU(cudaMalloc(&in, in_bytes));
  RESHARD_GPU(cudaMalloc(&out, n));
  RESHARD_GPU(cudaMalloc(&sc, sc_bytes));
  RESHARD_GPU(cudaMalloc(&copy, in_bytes));
  std::vector<unsigned char> ref_out(n), got_out(n), ref_sc(sc_bytes), got_sc(sc_bytes);
  const int reps = 9;
  auto time_it = [&](auto launch) {
    std::vector<float> ms;
    launch();  // warm-up
    for (int r = 0; r < reps; ++r) {
      RESHARD_GPU(cudaEventRecord(a, s));
      launch();
      RESHARD_GPU(cudaEventRecord(b, s));
      RESHARD_GPU(cudaEventSynchronize(b));
      float t = 0;
      RESHARD_GPU(cudaEventElapsedTime(&t, a, b));
      ms.push_back(t);
    }
    return MedianMs(ms);
  };
  const float copy_ms = time_it([&] { RESHARD_GPU(cudaMemcpyAsync(copy, in, in_bytes, cudaMemcpyDeviceToDevice, s)); });
  std::printf("{\"variant\": \"memcpy_d2d\", \"bytes\": %lld, \"median_ms\": %.4f, \"traffic_tb_s\": %.3f}\n",
              static_cast<long long>(in_bytes), copy_ms, 2.0 * in_bytes / (copy_ms * 1e-3) / 1e12);
  for (int per_sm : {4, 8, 16, 32}) {
    const float ms = time_it([&] {
      TrafficKernel<<<sms * per_sm, 256, 0, s>>>(reinterpret_cast<const uint4*>(in), reinterpret_cast<uint2*>(out),
                                                 n / 8);
      RESHARD_GPU(cudaGetLastError());
    });
    std::printf("{\"variant\": \"traffic_only\", \"ctas_per_sm\": %d, \"bf16_bytes\": %lld, \"median_ms\": %.4f, "
                "\"traffic_tb_s\": %.3f, \"of_memcpy\": %.3f}\n",
                per_sm, static_cast<long long>(in_bytes), ms, 1.5 * in_bytes / (ms * 1e-3) / 1e12,
                (1.5 * in_bytes / ms) / (2.0 * in_bytes / copy_ms));
  }
  for (int kind : {0, 1}) {
    FillKernel<<<sms * 8, 256, 0, s>>>(reinterpret_cast<uint16_t*>(in), n, kind);
    RESHARD_GPU(cudaGetLastError());
    bool have_ref = false;
    for (QuantizePath path : {QuantizePath::kVecSoftware, QuantizePath::kVecHardware, QuantizePath::kWide1,
                              QuantizePath::kWide2, QuantizePath::kWide4, QuantizePath::kBlock128, QuantizePath::kAuto,
                              QuantizePath::kGeneric}) {
      for (int per_sm : {4, 8, 16, 32, 64, 128, 256}) {
        if (per_sm > 32 && path != QuantizePath::kWide1 && path != QuantizePath::kAuto) continue;
        if ((path == QuantizePath::kGeneric || path == QuantizePath::kVecSoftware) && per_sm != 8) continue;
        RESHARD_GPU(cudaMemsetAsync(out, 0xA5, n, s));
        const float ms = time_it([&] { RESHARD_GPU(reshard::gpu::LaunchQuantize(j, in, out, sc, s, sms * per_sm, path)); });
        RESHARD_GPU(cudaMemcpyAsync(got_out.data(), out, n, cudaMemcpyDeviceToHost, s));
        RESHARD_GPU(cudaMemcpyAsync(got_sc.data(), sc, sc_bytes, cudaMemcpyDeviceToHost, s));
        RESHARD_GPU(cudaStreamSynchronize(s));
        if (!have_ref) {
          ref_out = got_out;
          ref_sc = got_sc;
          have_ref = true;
        }
        const bool same = got_out == ref_out && got_sc == ref_sc;
        std::printf("{\"variant\": \"%s\", \"fill\": \"%s\", \"ctas_per_sm\": %d, \"bf16_bytes\": %lld, "
                    "\"median_ms\": %.4f, \"traffic_tb_s\": %.3f, \"of_memcpy\": %.3f, \"same_bytes\": %s}\n",
                    PathName(path), kind == 0 ? "pattern" : "weights", per_sm, static_cast<long long>(in_bytes), ms,
                    1.5 * in_bytes / (ms * 1e-3) / 1e12, (1.5 * in_bytes / ms) / (2.0 * in_bytes / copy_ms),
                    same ? "true" : "false");
        std::fflush(stdout);
      }
    }
  }

  // 3. Other block shapes on the same bytes (weight-like fill), the generic
  // kernel first as the reference.
  struct Shape {
    const char* name;
    int64_t planes, rows, cols, block_rows, block_cols;
    int32_t scale_format, scale_bytes;
  };
  const Shape shapes[] = {{"mxfp8_1x32_e8m0", 1, 53248, 4096, 1, 32, 2, 1},
                          {"tensor_fp32", 1, 53248, 4096, 53248, 4096, 0, 4},
                          {"tensor_fp32_8_planes", 8, 6656, 4096, 6656, 4096, 0, 4}};
  unsigned char* sc2 = nullptr;
  const int64_t sc2_bytes = 53248 * (4096 / 32);
  RESHARD_GPU(cudaMalloc(&sc2, sc2_bytes));
  std::vector<unsigned char> ref_sc2(sc2_bytes), got_sc2(sc2_bytes);
  for (const Shape& sh : shapes) {
    reshard::QuantizeJob q;
    q.planes = sh.planes;
    q.rows = sh.rows;
    q.cols = sh.cols;
    q.block_rows = sh.block_rows;
    q.block_cols = sh.block_cols;
    q.scale_format = sh.scale_format;
    q.scale_bytes = sh.scale_bytes;
    q.in_row = 2 * q.cols;
    q.in_plane = q.rows * q.in_row;
    q.out_row = q.cols;
    q.out_plane = q.rows * q.out_row;
    q.sc_row = q.BlockCols() * q.scale_bytes;
    q.sc_plane = q.BlockRows() * q.sc_row;
    for (const auto& [path, per_sm] : std::vector<std::pair<QuantizePath, int>>{
             {QuantizePath::kGeneric, reshard::gpu::kQuantizeCtasPerSm}, {QuantizePath::kAuto, 16},
             {QuantizePath::kAuto, 32}, {QuantizePath::kAuto, 64}, {QuantizePath::kAuto, 128}}) {
      RESHARD_GPU(cudaMemsetAsync(out, 0xA5, n, s));
      RESHARD_GPU(cudaMemsetAsync(sc2, 0x5A, sc2_bytes, s));
      const float ms = time_it([&] { RESHARD_GPU(reshard::gpu::LaunchQuantize(q, in, out, sc2, s, sms * per_sm, path));
      });
      RESHARD_GPU(cudaMemcpyAsync(got_out.data(), out, n, cudaMemcpyDeviceToHost, s));
      RESHARD_GPU(cudaMemcpyAsync(got_sc2.data(), sc2, sc2_bytes, cudaMemcpyDeviceToHost, s));
      RESHARD_GPU(cudaStreamSynchronize(s));
      if (path == QuantizePath::kGeneric) {
        ref_out = got_out;
        ref_sc2 = got_sc2;
      }
      const bool same = got_out == ref_out && got_sc2 == ref_sc2;
      std::printf("{\"variant\": \"%s\", \"blocks\": \"%s\", \"ctas_per_sm\": %d, \"bf16_bytes\": %lld, "
                  "\"median_ms\": %.4f, \"traffic_tb_s\": %.3f, \"of_memcpy\": %.3f, \"same_bytes\": %s}\n",
                  PathName(path), sh.name, per_sm, static_cast<long long>(in_bytes), ms, 1.5 * in_bytes / (ms * 1e-3) / 1e12,
                  (1.5 * in_bytes / ms) / (2.0 * in_bytes / copy_ms), same ? "true" : "false");
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return Main();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "quantize_kernel_probe: %s\n", e.what());
    return 1;
  }
}
