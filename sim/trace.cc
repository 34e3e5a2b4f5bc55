// The Chrome / Perfetto trace writer (sim/trace.h): streams one JSON event
// per op slice, port-rate change and memory change as the simulator reports
// them; a launch's slices on one track are buffered and written longest
// first so they nest.
#include "sim/trace.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/output_file.h"

namespace reshard {

namespace {

// Microseconds with exact nanosecond decimals ("12.345").
std::string Us(int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const int64_t a = ns < 0 ? -ns : ns;
  return fmt::format("{}{}.{:03d}", sign, a / 1000, a % 1000);
}

std::string Quote(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

std::string StreamName(const Plan& plan, int32_t s) {
  return s >= 0 && s < static_cast<int32_t>(plan.stream_names.size()) ? plan.stream_names[s]
                                                                       : fmt::format("stream {}", s);
}

// One op's "X" slice on track (pid, tid): named by its label (or kind), its
// bytes, peer, group and segment in args.
std::string SliceJson(const Plan* plan, const Op& op, int32_t pid, int32_t tid, int64_t start_ns, int64_t dur_ns) {
  const std::string name = op.label.empty() ? std::string(OpKindName(op.kind)) : op.label;
  std::string args = fmt::format(R"("op":{})", op.id);
  if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
    const bool known = plan != nullptr && op.buffer >= 0 && op.buffer < static_cast<int32_t>(plan->buffers.size());
    args += fmt::format(R"(,"buffer":{},"bytes":{})", op.buffer, known ? plan->buffers[op.buffer].bytes : 0);
  } else {
    args += fmt::format(R"(,"bytes":{})", op.Bytes());
  }
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) args += fmt::format(R"(,"peer":{})", op.peer);
  if (op.group >= 0) args += fmt::format(R"(,"group":{})", op.group);
  if (op.segment >= 0) args += fmt::format(R"(,"segment":{})", op.segment);
  return fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}","args":{{{}}}}})", pid, tid,
                     Us(start_ns), Us(dur_ns), Quote(name), OpKindName(op.kind), args);
}

}  // namespace

std::string_view TraceDetailName(TraceDetail d) {
  switch (d) {
    case TraceDetail::kOps: return "ops";
    case TraceDetail::kSegments: return "segments";
    case TraceDetail::kLinks: return "links";
  }
  return "?";
}

void ChromeTraceWriter::Event(const std::string& json_object) {
  out_ << (events_ == 0 ? "\n" : ",\n") << json_object;
  bytes_ += static_cast<int64_t>(json_object.size()) + 2;
  ++events_;
}

void ChromeTraceWriter::AddToRun(int64_t t_ns, const Op& op, int64_t start_ns) {
  if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) return;
  const std::pair<int32_t, int32_t> track{op.gpu, op.stream};
  const int64_t key = op.group >= 0 ? op.group : -1 - static_cast<int64_t>(op.kind);
  auto [it, fresh] = runs_.try_emplace(track);
  Run& run = it->second;
  if (!fresh && run.key != key) {
    FlushRun(track, run);
    fresh = true;
  }
  if (fresh) run = Run{key, start_ns, t_ns, 0, 0, op.id, -1, -1, op.kind};
  if (op.segment >= 0) {
    if (run.first_segment < 0 || op.segment < run.first_segment) run.first_segment = op.segment;
    run.last_segment = std::max(run.last_segment, op.segment);
  }
  run.start_ns = std::min(run.start_ns, start_ns);
  run.end_ns = std::max(run.end_ns, t_ns);
  run.bytes += op.Bytes();
  ++run.ops;
}

void ChromeTraceWriter::FlushRun(std::pair<int32_t, int32_t> track, const Run& run) {
  if (run.ops == 0) return;
  std::string name = fmt::format("{} x{}", OpKindName(run.kind), run.ops);
  if (run.first_segment >= 0)
    name = run.first_segment == run.last_segment ? fmt::format("seg {}", run.first_segment)
                                                 : fmt::format("seg {}-{}", run.first_segment, run.last_segment);
  std::string args = fmt::format(R"("first_op":{},"ops":{},"bytes":{})", run.first_op, run.ops, run.bytes);
  if (run.key >= 0) args += fmt::format(R"(,"group":{})", run.key);
  if (run.first_segment >= 0)
    args += fmt::format(R"(,"first_segment":{},"last_segment":{})", run.first_segment, run.last_segment);
  Event(fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}","args":{{{}}}}})",
                    track.first, track.second, Us(run.start_ns), Us(run.end_ns - run.start_ns), Quote(name),
                    run.key >= 0 ? "group" : OpKindName(run.kind), args));
}

void ChromeTraceWriter::FlushCounters() {
  for (int c = 0; c < 4; ++c) {
    if (!class_dirty_[c]) continue;
    class_dirty_[c] = false;
    const auto lc = static_cast<LinkClass>(c);  // the local class is the GPUs' copy engines
    Event(fmt::format(R"j({{"ph":"C","pid":{},"ts":{},"name":"{} (all ports)","args":{{"GB/s":{:.6g}}}}})j", links_pid_,
                      Us(pending_t_), lc == LinkClass::kLocal ? "copy" : LinkClassName(lc), class_rate_[c] / 1e9));
  }
  for (const auto& [gpu, bytes] : memory_dirty_) {
    auto [w, fresh] = memory_written_.try_emplace(gpu, bytes);
    if (!fresh && w->second == bytes) continue;  // nothing new to draw
    w->second = bytes;
    Event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":"memory","args":{{"GiB":{:.9g}}}}})", gpu, Us(pending_t_),
                      static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0)));
  }
  memory_dirty_.clear();
  // An interval that ended below its highest: the next one starts from where it ended.
  for (size_t g = 0; g < memory_now_.size(); ++g) {
    if (memory_now_[g] < 0) continue;
    memory_dirty_[static_cast<int32_t>(g)] = memory_now_[g];
    memory_now_[g] = -1;
  }
}

void ChromeTraceWriter::Flush(std::vector<Slice>& slices) {
  std::stable_sort(slices.begin(), slices.end(), [](const Slice& a, const Slice& b) {
    return a.dur_ns != b.dur_ns ? a.dur_ns > b.dur_ns : a.op < b.op;
  });
  for (const Slice& s : slices) Event(s.json);
  slices.clear();
}

void ChromeTraceWriter::OnBegin(const Plan& plan, const PortModel& ports) {
  plan_ = &plan;
  pending_.clear();
  runs_.clear();
  events_ = 0;
  bytes_ = 0;
  out_ << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"plan\":" << Quote(plan.name) << ",\"detail\":\""
       << TraceDetailName(detail_) << "\"},\"traceEvents\":[";
  // One process per GPU (pid = gpu), one thread per stream used (tid = stream).
  std::set<std::pair<int32_t, int32_t>> streams;
  for (const Op& op : plan.ops) streams.emplace(op.gpu, op.stream);
  const int32_t gpus = plan.cluster.Gpus();
  for (int32_t g = 0; g < gpus; ++g) {
    Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":"GPU {}"}}}})", g, g));
    Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})", g, g));
  }
  for (auto [g, s] : streams) {
    Event(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", g, s,
                      Quote(fmt::format("{} ({})", StreamName(plan, s), s))));
  }
  // Links: one process, one counter track per port that carries bytes.
  links_pid_ = gpus;
  Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":"links"}}}})", links_pid_));
  Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})",
                    links_pid_, links_pid_));
  port_names_.assign(ports.NumPorts(), std::string());
  port_class_.assign(ports.NumPorts(), LinkClass::kLocal);
  port_rate_.assign(ports.NumPorts(), 0);
  class_rate_ = {};
  class_dirty_ = {};
  memory_dirty_.clear();
  memory_now_.clear();
  memory_written_.clear();
  pending_t_ = 0;
  const std::vector<int64_t> loads = PortBytes(ports, plan);
  for (int32_t p = 0; p < ports.NumPorts(); ++p) {
    port_names_[p] = Quote(ports.Name(p));
    port_class_[p] = ports.Class(p);
    if (loads[p] > 0 && detail_ == TraceDetail::kOps) {
      Event(fmt::format(R"({{"ph":"C","pid":{},"ts":0.000,"name":{},"args":{{"GB/s":0}}}})", links_pid_, port_names_[p]));
    }
  }
}

void ChromeTraceWriter::OnOpEnd(int64_t t_ns, const Op& op, int64_t start_ns) {
  if (detail_ == TraceDetail::kLinks) return;
  if (detail_ == TraceDetail::kSegments) return AddToRun(t_ns, op, start_ns);
  auto& [start, slices] = pending_[{op.gpu, op.stream}];
  if (!slices.empty() && start != start_ns) Flush(slices);
  start = start_ns;
  slices.push_back({t_ns - start_ns, op.id, SliceJson(plan_, op, op.gpu, op.stream, start_ns, t_ns - start_ns)});
}

void ChromeTraceWriter::OnPortRate(int64_t t_ns, int32_t port, double bytes_per_s) {
  if (detail_ != TraceDetail::kOps) {
    if (t_ns >= pending_t_ + kTraceSampleNs) FlushCounters(), pending_t_ = t_ns - t_ns % kTraceSampleNs;
    const int c = static_cast<int>(port_class_[port]);
    class_rate_[c] += bytes_per_s - port_rate_[port];
    if (std::abs(class_rate_[c]) < 1e-3) class_rate_[c] = 0;  // sums of doubles drift; a class at rest is 0
    port_rate_[port] = bytes_per_s;
    class_dirty_[c] = true;
    return;
  }
  Event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":{},"args":{{"GB/s":{:.6g}}}}})", links_pid_, Us(t_ns),
                    port_names_[port], bytes_per_s / 1e9));
}

void ChromeTraceWriter::OnMemory(int64_t t_ns, int32_t gpu, int64_t bytes) {
  if (detail_ != TraceDetail::kOps) {
    if (t_ns >= pending_t_ + kTraceSampleNs) FlushCounters(), pending_t_ = t_ns - t_ns % kTraceSampleNs;
    if (gpu >= static_cast<int32_t>(memory_now_.size())) memory_now_.resize(gpu + 1, -1);
    auto [it, fresh] = memory_dirty_.try_emplace(gpu, bytes);
    if (!fresh) it->second = std::max(it->second, bytes);
    memory_now_[gpu] = bytes;
    return;
  }
  Event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":"memory","args":{{"GiB":{:.9g}}}}})", gpu, Us(t_ns),
                    static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0)));
}

void ChromeTraceWriter::OnEnd(int64_t /*t_ns*/) {
  for (auto& [track, pending] : pending_) Flush(pending.second);
  for (const auto& [track, run] : runs_) FlushRun(track, run);
  runs_.clear();
  FlushCounters();
  pending_t_ += kTraceSampleNs;
  FlushCounters();  // where the last interval ended
  out_ << "\n]}\n";
  out_.flush();
}

Prediction SimulateWithTrace(const Plan& plan, const std::string& path, SimOptions options,
                             std::optional<TraceDetail> detail, TraceWritten* written) {
  AtomicOutput file(path);  // a temporary file renamed over `path` once complete
  const TraceDetail d = detail.value_or(DefaultTraceDetail(plan));
  ChromeTraceWriter writer(file.stream(), d);
  options.observer = &writer;
  Prediction p = Simulate(plan, options);
  file.Commit();
  if (written) *written = {d, writer.events_written(), writer.bytes_written()};
  return p;
}

Timeline PredictedTimeline(const Plan& plan, const Prediction& prediction, std::string name) {
  Timeline t;
  t.name = std::move(name);
  const size_t n = std::min({plan.ops.size(), prediction.op_start_ns.size(), prediction.op_end_ns.size()});
  for (size_t i = 0; i < n; ++i)
    t.ops.push_back({static_cast<int32_t>(i), prediction.op_start_ns[i], prediction.op_end_ns[i]});
  return t;
}

void WriteTimelinesTrace(std::ostream& out, const Plan& plan, const std::vector<Timeline>& timelines) {
  // Tracks: tid = gpu * streams + stream, so they sort by GPU, then stream.
  int32_t streams = static_cast<int32_t>(std::max<size_t>(plan.stream_names.size(), 1));
  for (const Op& op : plan.ops) streams = std::max(streams, op.stream + 1);
  int64_t events = 0;
  auto event = [&](const std::string& json) { out << (events++ == 0 ? "\n" : ",\n") << json; };
  out << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"plan\":" << Quote(plan.name)
      << ",\"t0\":\"the call: the first op is issued right after it\"},\"traceEvents\":[";
  for (size_t pid = 0; pid < timelines.size(); ++pid) {
    const Timeline& tl = timelines[pid];
    event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":{}}}}})", pid,
                      Quote(tl.name)));
    event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})", pid,
                      pid));
    // Per track, parents before children: by start, longest first, then op id.
    std::map<int32_t, std::vector<TimedOp>> tracks;
    for (const TimedOp& t : tl.ops) {
      RESHARD_CHECK(t.op >= 0 && t.op < static_cast<int32_t>(plan.ops.size()),
                    fmt::format("timeline '{}': op {} is not in the plan", tl.name, t.op));
      const Op& op = plan.ops[t.op];
      tracks[op.gpu * streams + op.stream].push_back(t);
    }
    for (auto& [tid, ops] : tracks) {
      const Op& first = plan.ops[ops.front().op];
      event(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", pid, tid,
                        Quote(fmt::format("GPU {} {} ({})", first.gpu, StreamName(plan, first.stream), first.stream))));
      event(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_sort_index","args":{{"sort_index":{}}}}})", pid,
                        tid, tid));
      std::sort(ops.begin(), ops.end(), [](const TimedOp& a, const TimedOp& b) {
        if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
        if (a.end_ns != b.end_ns) return a.end_ns > b.end_ns;
        return a.op < b.op;
      });
      for (const TimedOp& t : ops)
        event(SliceJson(&plan, plan.ops[t.op], static_cast<int32_t>(pid), tid, t.start_ns,
                        std::max<int64_t>(t.end_ns - t.start_ns, 0)));
    }
  }
  out << "\n]}\n";
  out.flush();
}

void WriteTimelinesTrace(const std::string& path, const Plan& plan, const std::vector<Timeline>& timelines) {
  AtomicOutput file(path);  // a temporary file renamed over `path` once complete
  WriteTimelinesTrace(file.stream(), plan, timelines);
  file.Commit();
}

}  // namespace reshard
