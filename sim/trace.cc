// The Chrome / Perfetto trace writer (sim/trace.h): streams one JSON event
// per op slice, port-rate change and memory change as the simulator reports
// them; a launch's slices on one track are buffered and written longest
// first so they nest.
#include "sim/trace.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"

namespace reshard {

namespace {

// Microseconds with exact nanosecond decimals ("12.345").
std::string Us(int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const int64_t a = ns < 0 ? -ns : ns;
  return fmt::format("{}{}.{:03d}", sign, a / 1000, a % 1000);
}

std::string Quote(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }

}  // namespace

void ChromeTraceWriter::Event(const std::string& json_object) {
  out_ << (events_ == 0 ? "\n" : ",\n") << json_object;
  ++events_;
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
  events_ = 0;
  out_ << "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"plan\":" << Quote(plan.name) << "},\"traceEvents\":[";
  // One process per GPU (pid = gpu), one thread per stream used (tid = stream).
  std::set<std::pair<int32_t, int32_t>> streams;
  for (const Op& op : plan.ops) streams.emplace(op.gpu, op.stream);
  const int32_t gpus = plan.cluster.Gpus();
  for (int32_t g = 0; g < gpus; ++g) {
    Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":"GPU {}"}}}})", g, g));
    Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})", g, g));
  }
  for (auto [g, s] : streams) {
    const std::string name = s < static_cast<int32_t>(plan.stream_names.size()) ? plan.stream_names[s]
                                                                                   : fmt::format("stream {}", s);
    Event(fmt::format(R"({{"ph":"M","pid":{},"tid":{},"name":"thread_name","args":{{"name":{}}}}})", g, s,
                      Quote(fmt::format("{} ({})", name, s))));
  }
  // Links: one process, one counter track per port that carries bytes.
  links_pid_ = gpus;
  Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_name","args":{{"name":"links"}}}})", links_pid_));
  Event(fmt::format(R"({{"ph":"M","pid":{},"tid":0,"name":"process_sort_index","args":{{"sort_index":{}}}}})",
                    links_pid_, links_pid_));
  port_names_.assign(ports.NumPorts(), std::string());
  const std::vector<int64_t> loads = PortBytes(ports, plan);
  for (int32_t p = 0; p < ports.NumPorts(); ++p) {
    port_names_[p] = Quote(ports.Name(p));
    if (loads[p] > 0) {
      Event(fmt::format(R"({{"ph":"C","pid":{},"ts":0.000,"name":{},"args":{{"GB/s":0}}}})", links_pid_, port_names_[p]));
    }
  }
}

void ChromeTraceWriter::OnOpEnd(int64_t t_ns, const Op& op, int64_t start_ns) {
  const std::string name = op.label.empty() ? std::string(OpKindName(op.kind)) : op.label;
  std::string args = fmt::format(R"("op":{})", op.id);
  if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
    const bool known = plan_ != nullptr && op.buffer >= 0 && op.buffer < static_cast<int32_t>(plan_->buffers.size());
    args += fmt::format(R"(,"buffer":{},"bytes":{})", op.buffer, known ? plan_->buffers[op.buffer].bytes : 0);
  } else {
    args += fmt::format(R"(,"bytes":{})", op.Bytes());
  }
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) args += fmt::format(R"(,"peer":{})", op.peer);
  if (op.group >= 0) args += fmt::format(R"(,"group":{})", op.group);
  if (op.segment >= 0) args += fmt::format(R"(,"segment":{})", op.segment);
  auto& [start, slices] = pending_[{op.gpu, op.stream}];
  if (!slices.empty() && start != start_ns) Flush(slices);
  start = start_ns;
  slices.push_back({t_ns - start_ns, op.id,
                    fmt::format(R"({{"ph":"X","pid":{},"tid":{},"ts":{},"dur":{},"name":{},"cat":"{}","args":{{{}}}}})",
                                op.gpu, op.stream, Us(start_ns), Us(t_ns - start_ns), Quote(name),
                                OpKindName(op.kind), args)});
}

void ChromeTraceWriter::OnPortRate(int64_t t_ns, int32_t port, double bytes_per_s) {
  Event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":{},"args":{{"GB/s":{:.6g}}}}})", links_pid_, Us(t_ns),
                    port_names_[port], bytes_per_s / 1e9));
}

void ChromeTraceWriter::OnMemory(int64_t t_ns, int32_t gpu, int64_t bytes) {
  Event(fmt::format(R"({{"ph":"C","pid":{},"ts":{},"name":"memory","args":{{"GiB":{:.9g}}}}})", gpu, Us(t_ns),
                    static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0)));
}

void ChromeTraceWriter::OnEnd(int64_t /*t_ns*/) {
  for (auto& [track, pending] : pending_) Flush(pending.second);
  out_ << "\n]}\n";
  out_.flush();
}

Prediction SimulateWithTrace(const Plan& plan, const std::string& path, SimOptions options) {
  std::ofstream out(path);
  if (!out) throw InputError(path, "", "cannot open the trace file for writing");
  ChromeTraceWriter writer(out);
  options.observer = &writer;
  Prediction p = Simulate(plan, options);
  if (!out) throw InputError(path, "", "writing the trace failed");
  return p;
}

}  // namespace reshard
