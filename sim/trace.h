// Observing a simulation, a Chrome / Perfetto trace writer, and a writer of
// op timelines (predicted beside measured) in the same format.
//
// The simulator calls a SimObserver synchronously as it runs (op issue and
// end, flow and port rate changes, memory changes). Observers only watch: the
// simulator never reads anything back, so tracing cannot change results.
//
// ChromeTraceWriter streams the JSON trace event format (loads in
// ui.perfetto.dev and chrome://tracing): one process per GPU with one thread
// track per stream ("X" slices for ops) and a "memory" counter ("C", GiB);
// one process "links" with a counter per port (GB/s). Times are microseconds
// with nanosecond decimals. The ops of one launch on a stream start together
// and overlap; they are written longest first so each track nests properly.
#pragma once

#include <cstdint>
#include <array>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "plan/plan.h"
#include "sim/ports.h"
#include "sim/simulator.h"

namespace reshard {

class SimObserver {
 public:
  virtual ~SimObserver() = default;
  virtual void OnBegin(const Plan& /*plan*/, const PortModel& /*ports*/) {}
  virtual void OnOpStart(int64_t /*t_ns*/, const Op& /*op*/) {}                      // issued
  virtual void OnOpEnd(int64_t /*t_ns*/, const Op& /*op*/, int64_t /*start_ns*/) {}  // its own work ended
  // A flow's rate changed; `op` is its send (or its copy / offload / reload).
  virtual void OnFlowRate(int64_t /*t_ns*/, int32_t /*op*/, const Route& /*route*/, double /*bytes_per_s*/) {}
  // Sum of the rates of the flows on `port` changed.
  virtual void OnPortRate(int64_t /*t_ns*/, int32_t /*port*/, double /*bytes_per_s*/) {}
  virtual void OnMemory(int64_t /*t_ns*/, int32_t /*gpu*/, int64_t /*bytes*/) {}
  virtual void OnEnd(int64_t /*t_ns*/) {}
};

// How much a trace holds. Every level has a memory counter per GPU.
//  * kOps: one slice per op (alloc and free included) and a rate counter per
//    port: everything, large at scale (DeepSeek-V3 on 512 GPUs: ~1.4 M events).
//  * kSegments: per GPU stream, consecutive ops of one NCCL group (or,
//    ungrouped, of one kind) as one slice with their count, bytes and
//    segments (a round of segments per slice); no alloc/free slices; one rate
//    counter per link class (the sum over its ports) instead of per port;
//    counters sampled every kTraceSampleNs (link classes: the rate at the
//    end of the interval; memory: the interval's highest).
//  * kLinks: the counters of kSegments only.
enum class TraceDetail : uint8_t { kOps, kSegments, kLinks };
std::string_view TraceDetailName(TraceDetail d);  // "ops", "segments", "links"
// Above this many ops a trace of every op is slow to open (~3 events per
// op, ~100 bytes each): the default becomes kSegments.
inline constexpr size_t kTraceAllOpsMax = 100'000;
inline constexpr int64_t kTraceSampleNs = 10'000;
inline TraceDetail DefaultTraceDetail(const Plan& plan) {
  return plan.ops.size() > kTraceAllOpsMax ? TraceDetail::kSegments : TraceDetail::kOps;
}

class ChromeTraceWriter : public SimObserver {
 public:
  // Writes to `out` as events arrive; the document is complete after OnEnd.
  explicit ChromeTraceWriter(std::ostream& out, TraceDetail detail = TraceDetail::kOps) : out_(out), detail_(detail) {}

  void OnBegin(const Plan& plan, const PortModel& ports) override;
  void OnOpEnd(int64_t t_ns, const Op& op, int64_t start_ns) override;
  void OnPortRate(int64_t t_ns, int32_t port, double bytes_per_s) override;
  void OnMemory(int64_t t_ns, int32_t gpu, int64_t bytes) override;
  void OnEnd(int64_t t_ns) override;

  int64_t events_written() const { return events_; }
  int64_t bytes_written() const { return bytes_; }

 private:
  struct Slice {
    int64_t dur_ns;
    int32_t op;
    std::string json;
  };
  // kSegments: the run of ops on one track being merged into one slice.
  struct Run {
    int64_t key = 0;  // group id, or -1 - kind outside groups
    int64_t start_ns = 0, end_ns = 0, bytes = 0;
    int32_t ops = 0, first_op = -1;
    int32_t first_segment = -1, last_segment = -1;
    OpKind kind = OpKind::kCopy;
  };
  // Coarse counters (kSegments, kLinks): values changed in the sampling
  // interval that starts at pending_t_, written when time leaves it.
  void FlushCounters();
  void Event(const std::string& json_object);
  void Flush(std::vector<Slice>& slices);
  void AddToRun(int64_t t_ns, const Op& op, int64_t start_ns);
  void FlushRun(std::pair<int32_t, int32_t> track, const Run& run);

  std::ostream& out_;
  const Plan* plan_ = nullptr;
  // Per (gpu, stream) track: the slices of the launch that started last.
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, std::vector<Slice>>> pending_;
  int32_t links_pid_ = 0;
  std::vector<std::string> port_names_;  // JSON-escaped, by port id
  int64_t events_ = 0;
  int64_t bytes_ = 0;
  TraceDetail detail_ = TraceDetail::kOps;
  std::map<std::pair<int32_t, int32_t>, Run> runs_;  // kSegments, per (gpu, stream)
  int64_t pending_t_ = 0;
  std::vector<LinkClass> port_class_;
  std::vector<double> port_rate_;                      // per port, bytes/s
  std::array<double, 4> class_rate_{};                 // per LinkClass, sum of its ports
  std::array<bool, 4> class_dirty_{};
  std::map<int32_t, int64_t> memory_dirty_;            // gpu -> highest bytes in the interval
  std::vector<int64_t> memory_now_;                    // per gpu
  std::map<int32_t, int64_t> memory_written_;          // gpu -> last value written
};

// Simulates `plan` (with `options`, whose observer it replaces) writing its
// trace to `path` at `detail` (default: DefaultTraceDetail); returns the
// prediction, and the trace's events and bytes in `written` when given.
// Throws InputError when the file cannot be written.
struct TraceWritten {
  TraceDetail detail = TraceDetail::kOps;
  int64_t events = 0;
  int64_t bytes = 0;
};
Prediction SimulateWithTrace(const Plan& plan, const std::string& path, SimOptions options = {},
                             std::optional<TraceDetail> detail = std::nullopt, TraceWritten* written = nullptr);

// When each op of one run ran, in nanoseconds from t = 0 (the call): a
// prediction's op times, or a measurement's (the executor's CUDA events).
struct TimedOp {
  int32_t op = -1;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};
struct Timeline {
  std::string name;  // "predicted", "measured"
  std::vector<TimedOp> ops;
};
// The prediction's op times (SimOptions::record_op_times) as a timeline.
Timeline PredictedTimeline(const Plan& plan, const Prediction& prediction, std::string name = "predicted");

// Writes timelines of `plan` as one Chrome / Perfetto trace, so a predicted
// and a measured run sit side by side: one process per timeline (in order,
// named by it), one thread track per (GPU, stream) its ops use ("GPU 0 comm
// (1)"), an "X" slice per op as ChromeTraceWriter writes them (same name,
// category and args). O(ops log ops). Every op must belong to `plan`.
void WriteTimelinesTrace(std::ostream& out, const Plan& plan, const std::vector<Timeline>& timelines);
// The same into `path`; throws InputError when the file cannot be written.
void WriteTimelinesTrace(const std::string& path, const Plan& plan, const std::vector<Timeline>& timelines);

}  // namespace reshard
