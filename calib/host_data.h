// What `reshard calibrate` measures on one GPU besides the links: the host
// cost of each call reshard's executor makes per op, the copy kernel's
// throughput by access pattern and block budget, and the cold-refit terms
// (pinning host memory, mapping fresh device memory into a pool). Raw samples
// and their JSON (the profile's "measurements.host", so a profile can be
// re-fitted without GPUs): calib/host_fit.h turns them into the profile's
// "host" and "copy_kernel" sections, calib/measure_host.h takes them on a GPU.
// No CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace reshard {

// Names of HostCallSeries::call (the executor's calls, timed with the host clock).
inline constexpr const char* kCallEventRecord = "event_record";    // cudaEventRecord
inline constexpr const char* kCallStreamWait = "stream_wait";      // cudaStreamWaitEvent
inline constexpr const char* kCallKernelLaunch = "kernel_launch";  // LaunchCopy, one descriptor by value
inline constexpr const char* kCallMemcpyH2D = "memcpy_h2d";        // cudaMemcpyAsync, small, pinned -> device
inline constexpr const char* kCallMemcpyD2H = "memcpy_d2h";        // cudaMemcpyAsync, small, device -> pinned
inline constexpr const char* kCallAlloc = "alloc";                 // cudaMallocAsync from a warm pool
inline constexpr const char* kCallFree = "free";                   // cudaFreeAsync
inline constexpr const char* kCallSetDevice = "set_device";        // cudaSetDevice (the current device)

// One call timed over many batches: each batch issues `calls_per_batch` calls
// back to back (the GPU drained before the batch, untimed) and yields the
// mean host time per call.
struct HostCallSeries {
  std::string call;    // kCall*
  std::string method;  // what exactly was called, e.g. "cudaMallocAsync 1 MiB, default pool, threshold max"
  int32_t calls_per_batch = 0;
  std::vector<double> batch_ns;  // per-call ns, one per batch
};

// One NCCL group of `ops` ncclSend + ncclRecv calls (ops / 2 pairs to self on
// a one-rank communicator), host clock: ncclGroupStart and the calls, then
// ncclGroupEnd (and, on a non-blocking communicator, polling until it is no
// longer in progress, as the executor does).
struct NcclGroupSample {
  int32_t ops = 0;
  double enqueue_ns = 0;  // ncclGroupStart + the ops calls
  double end_ns = 0;      // ncclGroupEnd (+ the wait)
};

struct NcclGroupSeries {
  std::string method;  // e.g. "non-blocking communicator (the executor's default)"
  bool executor_default = false;  // the series the profile's nccl_* fields come from
  std::vector<NcclGroupSample> samples;
};

// A cold-refit cost: `bytes` pinned or mapped in `seconds` (host clock).
inline constexpr const char* kColdHostAlloc = "pin_host_alloc";        // cudaHostAlloc (the executor's flags)
inline constexpr const char* kColdHostRegister = "pin_host_register";  // cudaHostRegister of touched malloc'ed memory
inline constexpr const char* kColdPoolGrow = "pool_grow";              // cudaMallocAsync from a fresh pool + synchronize
inline constexpr const char* kColdPoolWarm = "pool_warm";              // the same size again from that (now grown) pool
struct ColdSample {
  std::string what;  // kCold*
  int64_t bytes = 0;
  double seconds = 0;
};

// Copy-kernel access patterns (CopyKernelSample::pattern).
inline constexpr const char* kPatternPack = "pack";          // strided rows -> contiguous
inline constexpr const char* kPatternUnpack = "unpack";      // contiguous -> strided rows
inline constexpr const char* kPatternBoth = "both_strided";  // strided rows -> strided rows
inline constexpr const char* kPatternContiguous = "contiguous";
inline constexpr const char* kPatternSize = "contiguous_size";  // the size curve (not in the profile's rates)
// 256 B copies each between two cudaEventRecord on its stream, as the
// executor brackets every op (minus kPatternSize's 256 B: the events' GPU time).
inline constexpr const char* kPatternBracketed = "event_bracketed";
// The fp8 quantize kernel on `bytes` of bf16 input per launch (run_bytes =
// bytes; the profile's quantize_kernel rates, not the copy kernel's): 128 x
// 128 blocks, MXFP8's 1 x 32 blocks, one scale per matrix.
inline constexpr const char* kPatternQuantize = "quantize";
inline constexpr const char* kPatternQuantizeMx = "quantize_mxfp8";
inline constexpr const char* kPatternQuantizeTensor = "quantize_tensor";

// One copy-kernel configuration, timed by CUDA events over repetitions.
struct CopyKernelSample {
  std::string pattern;      // kPattern*
  int64_t run_bytes = 0;    // contiguous run on both sides (DescribeCopy's run)
  int64_t bytes = 0;        // bytes copied per launch
  double sm_share = 1;      // share of the copy grid: blocks = max(1, lround(share * SMs * blocks_per_sm))
  int32_t blocks = 0;       // the launch's block budget
  std::vector<double> seconds;  // one per timed launch
};

struct HostMeasurements {
  std::string source;  // "reshard calibrate <date> on <host>: NVIDIA H200, ..."
  std::vector<std::pair<std::string, std::string>> environment;
  std::vector<HostCallSeries> calls;
  std::vector<NcclGroupSeries> nccl_groups;
  std::vector<ColdSample> cold;
  std::vector<CopyKernelSample> copies;
  int32_t sms = 0;                    // multiprocessors of the GPU measured
  int32_t copy_blocks_per_sm = 0;     // the executor's copy grid per SM
  // Copy-kernel launches queued behind a held stream before one launch call
  // blocked the host (-1: not measured; 0 never blocked within the limit).
  int64_t launch_queue_depth = -1;
  int64_t launch_queue_limit = 0;     // launches tried

  bool Empty() const { return calls.empty() && nccl_groups.empty() && cold.empty() && copies.empty(); }
};

// Every sample as recorded ({"format", "source", "environment", "calls",
// "nccl_groups", "cold", "copies", ...}), with each series' median beside it
// for readers (ignored when read back).
nlohmann::json HostMeasurementsJson(const HostMeasurements& m);

// Back from HostMeasurementsJson's output; every value type- and range-checked.
// Throws InputError(file, "<field>.<path>", ...).
HostMeasurements HostMeasurementsFromJson(const nlohmann::json& j, const std::string& file, const std::string& field);

// The median of `v` (mean of the two middle values for an even count); 0 when empty.
double MedianOf(std::vector<double> v);

}  // namespace reshard
