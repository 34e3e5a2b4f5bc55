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
#include <map>
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

class ChromeTraceWriter : public SimObserver {
 public:
  // Writes to `out` as events arrive; the document is complete after OnEnd.
  explicit ChromeTraceWriter(std::ostream& out) : out_(out) {}

  void OnBegin(const Plan& plan, const PortModel& ports) override;
  void OnOpEnd(int64_t t_ns, const Op& op, int64_t start_ns) override;
  void OnPortRate(int64_t t_ns, int32_t port, double bytes_per_s) override;
  void OnMemory(int64_t t_ns, int32_t gpu, int64_t bytes) override;
  void OnEnd(int64_t t_ns) override;

  int64_t events_written() const { return events_; }

 private:
  struct Slice {
    int64_t dur_ns;
    int32_t op;
    std::string json;
  };
  void Event(const std::string& json_object);
  void Flush(std::vector<Slice>& slices);

  std::ostream& out_;
  const Plan* plan_ = nullptr;
  // Per (gpu, stream) track: the slices of the launch that started last.
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, std::vector<Slice>>> pending_;
  int32_t links_pid_ = 0;
  std::vector<std::string> port_names_;  // JSON-escaped, by port id
  int64_t events_ = 0;
};

// Simulates `plan` (with `options`, whose observer it replaces) writing its
// trace to `path`; returns the prediction. Throws InputError when the file
// cannot be written.
Prediction SimulateWithTrace(const Plan& plan, const std::string& path, SimOptions options = {});

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
