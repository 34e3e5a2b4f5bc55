// The executor: runs a Plan through a Backend, verifies every destination
// byte, and reports what it measured in the simulator's shape.
//
// Steps (CUTLASS-style: check, size, run):
//  1. Verify(plan) (plan/plan.h) and the executor's own checks (sends and
//     receives contiguous, copies on their GPU, groups without internal
//     dependencies, content on buffers that exist when filled / checked);
//     any problem refuses the plan (PlanRefused) before any work is done.
//  2. Backend::Begin; allocate the preexisting buffers; fill the source
//     pieces with the pattern (executor/pattern.h); warm up peer connections.
//     None of this is timed.
//  3. The timed run: the plan's groups are issued in one topological order
//     (Kahn's algorithm, ties broken by lowest op id: O((ops + deps) log ops)),
//     each op bracketed by OpStart / OpEnd, dependencies not implied by queue
//     order turned into WaitOp.
//  4. Every destination piece is checked element by element; mismatches are
//     reported with tensor name and global element index.
//  5. Per-op times from the reference (t = 0, recorded right before the
//     first op is issued: nothing is queued ahead of the clock), per-GPU
//     memory, bytes and bandwidth per link class. In a multi-process run
//     every process reports to rank 0, which returns the whole Measurement
//     (other ranks return their part, `complete` false).
//
// Bandwidth follows nccl-tests: algbw = bytes / time. For point-to-point
// transfers nccl-tests' bus bandwidth equals algbw (no collective factor), so
// busbw_bytes_per_s == algbw_bytes_per_s here; both are given so tables from
// either tool line up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "executor/backend.h"
#include "model/cluster.h"
#include "model/error.h"
#include "plan/issue_order.h"  // IssueOrder (the walker's order) and PlanRefused
#include "plan/plan.h"

namespace reshard {

struct ExecOptions {
  // The machine the plan is about to run on; its fingerprint must match the
  // plan's. nullptr: trust the plan's own cluster.
  const Cluster* cluster = nullptr;
  std::string plan_source = "<plan>";  // names the plan in errors (a path)
  int32_t max_mismatches = 20;         // mismatches listed; all are counted
  bool warmup = true;                  // connect peers before timing
  // Poison every buffer allocated during the run (Backend::PoisonRunAllocations):
  // a check run, slower than a timed one by a memset per allocation.
  bool check_run = false;
};

// One element that did not hold its expected value after the run.
struct Mismatch {
  std::string tensor;       // PlanTensor::name
  int32_t tensor_id = -1;
  int64_t index = 0;        // global row-major element index in the tensor
  uint64_t expected = 0;    // value bits
  uint64_t got = 0;
  int32_t gpu = -1;         // where the destination buffer lives
  int32_t buffer = -1;
  friend bool operator==(const Mismatch&, const Mismatch&) = default;
};

// Bytes and achieved bandwidth of one link class (nccl-tests definitions).
struct LinkRate {
  LinkClass link = LinkClass::kLocal;
  int64_t bytes = 0;       // all bytes over this class: sends once (not again at the receiver), every copy
  int32_t ops = 0;
  double time_s = 0;       // first start -> last end over this class's ops (receives included)
  double algbw_bytes_per_s = 0;  // bytes / time_s, all GPUs together
  double busbw_bytes_per_s = 0;  // == algbw for point-to-point
  // Per GPU: bytes this GPU sent / copied over this class and the span of its
  // own ops of this class; the busiest GPU's rate is what nccl-tests calls the
  // per-rank algbw.
  std::vector<int64_t> gpu_bytes;
  std::vector<double> gpu_algbw_bytes_per_s;
  friend bool operator==(const LinkRate&, const LinkRate&) = default;
};

struct Measurement {
  std::string backend;
  int32_t processes = 1;
  bool complete = true;           // false on ranks other than 0 of a multi-process run
  // Three clocks of one run (docs/measurements.md says which number is which):
  //  time_s      what a caller waits for: from the call (the reference,
  //              t = 0, recorded right before the first op is issued) to the
  //              last op end on any GPU, host issue included; compare it with
  //              the prediction's time_s (t = 0 to the last op end);
  //  gpu_span_s  first op start -> last op end on any GPU (GPU events only);
  //  wall_s      host clock from the reference to the end of StopClock (the
  //              walker saw every GPU finish: time_s plus the final wait).
  double time_s = 0;
  double gpu_span_s = 0;
  double wall_s = 0;
  std::vector<int64_t> peak_bytes;       // per GPU: GpuMemoryStats::peak_bytes
  std::vector<int64_t> plan_peak_bytes;  // per GPU: the plan's device buffers, from the measured op times
  std::vector<GpuMemoryStats> memory;    // per GPU, as the backend saw it
  // What ran, by link class, as PlanSummary::bytes_moved counts it: sends,
  // offload / reload, and copies from source to destination buffers (copies
  // into or out of staging are packing; LinkRate::bytes includes them).
  BytesMoved bytes_moved;
  std::vector<LinkRate> links;           // classes with traffic, in LinkClass order
  std::vector<OpTime> op_times;          // by op id
  bool verified = false;                 // every destination element held its expected value
  int64_t checked_elements = 0;
  int64_t checked_bytes = 0;
  int64_t mismatch_count = 0;
  std::vector<Mismatch> mismatches;      // the first ExecOptions::max_mismatches, by (tensor, index)
};

// Runs `plan` on `backend`. Throws PlanRefused when the plan fails Verify or
// the executor's checks (before the backend does any work), InputError when
// the backend cannot run it here, RunError (backend.h) when the run fails
// part-way; in every case the backend has ended (End(): memory released).
Measurement Execute(const Plan& plan, Backend& backend, const ExecOptions& options = {});

// The executor's own checks (beyond Verify); empty when the plan can run.
std::vector<std::string> ExecutorProblems(const Plan& plan);

// Per-GPU peak of the plan's device buffers from measured op times: an
// allocation counts from its op's start, a free releases at its op's end
// (ties: allocations first, so the peak is never underestimated).
std::vector<int64_t> PlanPeakFromTimes(const Plan& plan, const std::vector<OpTime>& times);

// JSON with units in names (`time_s`, `peak_bytes`, `algbw_bytes_per_s`);
// MeasurementFromJson reads it back (used to gather results across processes).
void to_json(nlohmann::json& j, const Measurement& m);
Measurement MeasurementFromJson(const nlohmann::json& j);
// A readable summary: time, bandwidth per link class, peak per GPU, verification.
std::string FormatMeasurement(const Measurement& m, const Plan& plan);

}  // namespace reshard
