// The walker: one code path for every backend (see executor.h for the steps).
#include "executor/executor.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <queue>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "executor/mpi_session.h"
#include "executor/quantize_content.h"
#include "model/union_find.h"

namespace reshard {

namespace {

std::string Gib(int64_t bytes) { return fmt::format("{:.3f} GiB", static_cast<double>(bytes) / (1 << 30)); }

bool ValidBuffer(const Plan& p, int32_t id) { return id >= 0 && id < static_cast<int32_t>(p.buffers.size()); }

int32_t ElemBytes(const Plan& p, int32_t tensor) { return static_cast<int32_t>(DTypeBytes(p.tensors[tensor].dtype)); }


// The link class an op's bytes travel over (Verify keeps kCopy on device).
LinkClass ClassOf(const Plan& p, const Op& op) {
  switch (op.kind) {
    case OpKind::kSend:
    case OpKind::kRecv: return p.cluster.Between(op.gpu, op.peer);
    case OpKind::kOffload:
    case OpKind::kReload: return LinkClass::kPcie;
    default: return LinkClass::kLocal;
  }
}

int64_t& BytesOf(BytesMoved& b, LinkClass c) {
  switch (c) {
    case LinkClass::kLocal: return b.local;
    case LinkClass::kNvlink: return b.nvlink;
    case LinkClass::kNetwork: return b.network;
    case LinkClass::kPcie: return b.pcie;
  }
  return b.local;
}

constexpr LinkClass kLinkClasses[] = {LinkClass::kLocal, LinkClass::kNvlink, LinkClass::kNetwork, LinkClass::kPcie};

// Recomputes everything derived from op times, memory and the plan (used
// after a single-process run and after merging ranks' parts).
void Summarize(const Plan& p, Measurement& m) {
  const int32_t gpus = p.Gpus();
  std::sort(m.op_times.begin(), m.op_times.end(), [](const OpTime& a, const OpTime& b) { return a.op < b.op; });
  std::sort(m.memory.begin(), m.memory.end(),
            [](const GpuMemoryStats& a, const GpuMemoryStats& b) { return a.gpu < b.gpu; });

  double first = 0, last = 0;
  bool any = false;
  for (const OpTime& t : m.op_times) {
    first = any ? std::min(first, t.start_s) : t.start_s;
    last = any ? std::max(last, t.end_s) : t.end_s;
    any = true;
  }
  m.time_s = any ? std::max(last, 0.0) : 0;  // from the reference (t = 0)
  m.gpu_span_s = any ? last - first : 0;

  m.peak_bytes.assign(gpus, 0);
  for (const GpuMemoryStats& s : m.memory)
    if (s.gpu >= 0 && s.gpu < gpus) m.peak_bytes[s.gpu] = s.peak_bytes;
  m.plan_peak_bytes = PlanPeakFromTimes(p, m.op_times);

  // Bytes and spans per link class, overall and per GPU.
  struct Span {
    double lo = 0, hi = 0;
    bool any = false;
    void Add(double a, double b) {
      lo = any ? std::min(lo, a) : a;
      hi = any ? std::max(hi, b) : b;
      any = true;
    }
    double Length() const { return any ? hi - lo : 0; }
  };
  m.bytes_moved = {};
  m.links.clear();
  for (LinkClass c : kLinkClasses) {
    LinkRate r;
    r.link = c;
    r.gpu_bytes.assign(gpus, 0);
    std::vector<Span> gpu_span(gpus);
    Span all;
    for (const OpTime& t : m.op_times) {
      const Op& op = p.ops[t.op];
      if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree || ClassOf(p, op) != c) continue;
      all.Add(t.start_s, t.end_s);
      gpu_span[op.gpu].Add(t.start_s, t.end_s);
      if (op.kind == OpKind::kRecv) continue;  // counted at the sender
      r.bytes += op.Bytes();
      r.gpu_bytes[op.gpu] += op.Bytes();
      ++r.ops;
    }
    if (r.bytes == 0) continue;
    r.time_s = all.Length();
    r.algbw_bytes_per_s = r.time_s > 0 ? static_cast<double>(r.bytes) / r.time_s : 0;
    r.busbw_bytes_per_s = r.algbw_bytes_per_s;  // point-to-point: busbw == algbw (nccl-tests)
    r.gpu_algbw_bytes_per_s.assign(gpus, 0);
    for (int32_t g = 0; g < gpus; ++g) {
      const double len = gpu_span[g].Length();
      if (len > 0) r.gpu_algbw_bytes_per_s[g] = static_cast<double>(r.gpu_bytes[g]) / len;
    }
    m.links.push_back(std::move(r));
  }
  // What moved where, with the planner's summary's meaning (PlanSummary::bytes_moved).
  for (const OpTime& t : m.op_times) {
    const Op& op = p.ops[t.op];
    if (op.kind == OpKind::kSend || op.kind == OpKind::kOffload || op.kind == OpKind::kReload || IsPlacementCopy(p, op))
      BytesOf(m.bytes_moved, ClassOf(p, op)) += op.Bytes();
  }

  std::sort(m.mismatches.begin(), m.mismatches.end(), [](const Mismatch& a, const Mismatch& b) {
    return std::tie(a.tensor_id, a.index, a.gpu, a.buffer) < std::tie(b.tensor_id, b.index, b.gpu, b.buffer);
  });
  m.verified = m.mismatch_count == 0;
}

}  // namespace

FaultInjection ParseFaultSpec(std::string_view spec, const std::string& source) {
  FaultInjection f;
  auto trim = [](std::string_view t) {
    while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
    while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
    return t;
  };
  spec = trim(spec);
  if (spec.empty()) return f;
  const std::string whole(spec);
  auto fail = [&](const std::string& problem) -> void {
    throw InputError(source, "RESHARD_FAULT",
                     fmt::format("'{}': {}; expected gpu=G,op=N (e.g. gpu=1,op=6)", whole, problem));
  };
  while (!spec.empty()) {
    const size_t comma = spec.find(',');
    const std::string_view item = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) fail(fmt::format("'{}' is not key=value", item));
    const std::string_view key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    int64_t v = 0;
    if (value.empty() || value.size() > 10) fail(fmt::format("'{}' is not a GPU or op number", value));
    for (char c : value) {
      if (c < '0' || c > '9') fail(fmt::format("'{}' is not a GPU or op number", value));
      v = v * 10 + (c - '0');
    }
    if (v > std::numeric_limits<int32_t>::max()) fail(fmt::format("{} is out of range", value));
    if (key == "gpu" || key == "rank") {
      if (f.gpu >= 0) fail("the GPU is given twice");
      f.gpu = static_cast<int32_t>(v);
    } else if (key == "op") {
      if (f.op >= 0) fail("the op is given twice");
      f.op = static_cast<int32_t>(v);
    } else {
      const std::string hint = Suggest(key, {"gpu", "rank", "op"});
      fail(fmt::format("unknown key '{}'{}", key, hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
    }
  }
  if (f.gpu < 0) fail("the GPU is missing");
  if (f.op < 0) fail("the op is missing");
  return f;
}

std::string FaultProblem(const FaultInjection& f, const Plan& plan) {
  if (!f.active()) return {};
  if (f.op >= static_cast<int32_t>(plan.ops.size()))
    return fmt::format("op {} does not exist (the plan has {} ops)", f.op, plan.ops.size());
  if (plan.ops[f.op].gpu != f.gpu)
    return fmt::format("op {} ({}) runs on GPU {}, not GPU {}", f.op, OpKindName(plan.ops[f.op].kind),
                       plan.ops[f.op].gpu, f.gpu);
  return {};
}

std::vector<std::string> ExecutorProblems(const Plan& p) {
  std::vector<std::string> out;
  const int32_t gpus = p.Gpus();
  auto on_gpu = [&](const Op& op, int32_t buffer, const char* what) {
    if (!ValidBuffer(p, buffer)) {
      out.push_back(fmt::format("op {}: {} buffer {} does not exist", op.id, what, buffer));
    } else if (p.buffers[buffer].gpu != op.gpu) {
      out.push_back(fmt::format("op {} on GPU {}: {} buffer {} ('{}') lives on GPU {}; an op touches only its own "
                                "GPU's buffers",
                                op.id, op.gpu, what, buffer, p.buffers[buffer].name, p.buffers[buffer].gpu));
    }
  };
  std::vector<bool> freed(p.buffers.size(), false), allocated(p.buffers.size(), false);
  for (const Op& op : p.ops) {
    if (op.gpu < 0 || op.gpu >= gpus) {
      out.push_back(fmt::format("op {}: GPU {} outside the cluster's {} GPUs", op.id, op.gpu, gpus));
      continue;
    }
    switch (op.kind) {
      case OpKind::kAlloc:
      case OpKind::kFree:
        on_gpu(op, op.buffer, op.kind == OpKind::kAlloc ? "allocated" : "freed");
        if (ValidBuffer(p, op.buffer)) (op.kind == OpKind::kAlloc ? allocated : freed)[op.buffer] = true;
        break;
      case OpKind::kSend:
      case OpKind::kRecv:
        on_gpu(op, op.region.buffer, op.kind == OpKind::kSend ? "send" : "receive");
        if (ValidBuffer(p, op.region.buffer) && p.buffers[op.region.buffer].space != MemorySpace::kDevice)
          out.push_back(fmt::format("op {}: {} of host memory (buffer {}); NCCL moves device memory", op.id,
                                    OpKindName(op.kind), op.region.buffer));
        if (!op.region.Contiguous())
          out.push_back(fmt::format("op {}: {} region is not contiguous (pack it with a copy first)", op.id,
                                    OpKindName(op.kind)));
        if (op.peer < 0 || op.peer >= gpus) out.push_back(fmt::format("op {}: peer GPU {} does not exist", op.id, op.peer));
        break;
      case OpKind::kQuantize:
        for (const QuantizeTile& t : op.tiles) {
          on_gpu(op, t.input.buffer, "quantize input");
          on_gpu(op, t.output.buffer, "quantize output");
          on_gpu(op, t.scales.buffer, "quantize scales");
        }
        break;
      case OpKind::kCopy:
      case OpKind::kOffload:
      case OpKind::kReload:
        for (const CopyPair& c : op.copies) {
          on_gpu(op, c.src.buffer, "copy source");
          on_gpu(op, c.dst.buffer, "copy destination");
          if (c.src.Bytes() != c.dst.Bytes())
            out.push_back(fmt::format("op {}: copy of {} source bytes into {} destination bytes", op.id, c.src.Bytes(),
                                      c.dst.Bytes()));
        }
        break;
    }
  }
  auto check_piece = [&](const ContentPiece& c, const char* side, size_t i) {
    if (!ValidBuffer(p, c.buffer)) {
      out.push_back(fmt::format("{} piece {}: buffer {} does not exist", side, i, c.buffer));
      return false;
    }
    if (c.tensor < 0 || c.tensor >= static_cast<int32_t>(p.tensors.size())) {
      out.push_back(fmt::format("{} piece {}: tensor {} does not exist", side, i, c.tensor));
      return false;
    }
    const PlanTensor& t = p.tensors[c.tensor];
    const int64_t eb = DTypeBytes(t.dtype);
    if (eb != 1 && eb != 2 && eb != 4 && eb != 8) {
      out.push_back(fmt::format("{} piece {}: tensor '{}' has {}-byte elements", side, i, t.name, eb));
      return false;
    }
    if (c.box.ndim != t.shape.ndim || !InBounds(c.box, t.shape)) {
      out.push_back(fmt::format("{} piece {}: box {} outside tensor '{}' of shape {}", side, i, ToString(c.box), t.name,
                                ToString(t.shape)));
      return false;
    }
    int64_t last = c.offset_elems;
    bool bad_stride = c.offset_elems < 0;
    for (int d = 0; d < c.box.ndim; ++d) {
      if (c.stride_elems[d] < 0) bad_stride = true;
      if (c.box.hi[d] > c.box.lo[d]) last += (c.box.hi[d] - c.box.lo[d] - 1) * c.stride_elems[d];
    }
    if (!Empty(c.box) && (bad_stride || (last + 1) * eb > p.buffers[c.buffer].bytes)) {
      out.push_back(fmt::format("{} piece {} of tensor '{}': elements up to {} do not fit buffer {} ('{}', {} bytes)",
                                side, i, t.name, last, c.buffer, p.buffers[c.buffer].name, p.buffers[c.buffer].bytes));
      return false;
    }
    return true;
  };
  for (size_t i = 0; i < p.sources.size(); ++i) {
    const ContentPiece& c = p.sources[i];
    if (!check_piece(c, "source", i)) continue;
    if (!p.buffers[c.buffer].preexisting || allocated[c.buffer])
      out.push_back(fmt::format("source piece {}: buffer {} ('{}') is not preexisting, so it cannot be filled before "
                                "the run",
                                i, c.buffer, p.buffers[c.buffer].name));
  }
  for (size_t i = 0; i < p.destinations.size(); ++i) {
    const ContentPiece& c = p.destinations[i];
    if (!check_piece(c, "destination", i)) continue;
    if (freed[c.buffer])
      out.push_back(fmt::format("destination piece {}: buffer {} ('{}') is freed by the plan, so nothing is left to "
                                "check",
                                i, c.buffer, p.buffers[c.buffer].name));
  }
  return out;
}

std::vector<int64_t> PlanPeakFromTimes(const Plan& p, const std::vector<OpTime>& times) {
  const int32_t gpus = p.Gpus();
  std::vector<int64_t> base(gpus, 0);
  for (const PlanBuffer& b : p.buffers)
    if (b.preexisting && b.space == MemorySpace::kDevice && b.gpu >= 0 && b.gpu < gpus) base[b.gpu] += b.bytes;
  // (time, order, delta): at equal times allocations (order 0) come before frees (order 1).
  std::vector<std::vector<std::tuple<double, int, int64_t>>> events(gpus);
  for (const OpTime& t : times) {
    const Op& op = p.ops[t.op];
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) continue;
    const PlanBuffer& b = p.buffers[op.buffer];
    if (b.space != MemorySpace::kDevice) continue;
    if (op.kind == OpKind::kAlloc) events[b.gpu].emplace_back(t.start_s, 0, b.bytes);
    else events[b.gpu].emplace_back(t.end_s, 1, -b.bytes);
  }
  std::vector<int64_t> peak(gpus, 0);
  for (int32_t g = 0; g < gpus; ++g) {
    std::sort(events[g].begin(), events[g].end());
    int64_t cur = base[g];
    peak[g] = cur;
    for (const auto& [time, order, delta] : events[g]) {
      cur += delta;
      peak[g] = std::max(peak[g], cur);
    }
  }
  return peak;
}

Measurement Execute(const Plan& plan, Backend& backend, const ExecOptions& options) {
  // 1. Check: nothing touches the backend before the plan passed every check.
  const VerifyResult verify = Verify(plan, options.cluster);
  if (!verify.ok()) throw PlanRefused(options.plan_source, verify.problems);
  if (auto problems = ExecutorProblems(plan); !problems.empty()) throw PlanRefused(options.plan_source, problems);
  const std::vector<IssueStep> steps = IssueOrder(plan, options.plan_source);

  const MpiSession* mpi = backend.Processes();
  const int32_t processes = mpi != nullptr ? mpi->size() : 1;
  const int32_t gpus = plan.Gpus();
  if (processes > 1) {
    std::vector<std::string> problems;
    for (const Op& op : plan.ops) {
      for (int32_t d : op.deps) {
        const Op& dep = plan.ops[d];
        if (GpuOwner(dep.gpu, gpus, processes) != GpuOwner(op.gpu, gpus, processes))
          problems.push_back(fmt::format("op {} on GPU {} depends on op {} on GPU {}, which another process drives; "
                                         "across processes only a send and its receive synchronise",
                                         op.id, op.gpu, d, dep.gpu));
      }
    }
    if (!problems.empty()) throw PlanRefused(options.plan_source, problems);
  }

  // 2. Set up, untimed.
  backend.PoisonRunAllocations(options.check_run);
  backend.Begin(plan);
  Measurement m;
  try {
    std::vector<bool> local(gpus, false);
    for (int32_t g : backend.LocalGpus()) local.at(g) = true;
    for (const PlanBuffer& b : plan.buffers)
      if (b.preexisting && local[b.gpu]) backend.Allocate(b, -1);
    const std::vector<int8_t> quantized = QuantizedSources(plan);
    for (const ContentPiece& c : plan.sources)
      if (local[plan.buffers[c.buffer].gpu]) backend.Fill(plan.buffers[c.buffer], ContentMapOf(plan, c, quantized));
    if (options.warmup) {
      std::set<std::pair<int32_t, int32_t>> pairs;
      for (const Op& op : plan.ops)
        if (op.kind == OpKind::kSend) pairs.emplace(op.gpu, op.peer);
      backend.Warmup({pairs.begin(), pairs.end()});
    }

    // 3. The timed run.
    auto issue_one = [&](const Op& op) {
      for (int32_t d : op.deps) {
        const Op& dep = plan.ops[d];
        if (dep.gpu == op.gpu && dep.stream == op.stream) continue;  // queue order implies it
        backend.WaitOp(op.gpu, op.stream, d);
      }
      backend.OpStart(op.id, op.gpu, op.stream);
    };
    auto run_local = [&](const Op& op) {
      switch (op.kind) {
        case OpKind::kAlloc: backend.Allocate(plan.buffers[op.buffer], op.stream); break;
        case OpKind::kFree: backend.Free(plan.buffers[op.buffer], op.stream); break;
        case OpKind::kCopy:
        case OpKind::kOffload:
        case OpKind::kReload: backend.Copy(op.gpu, op.stream, op.copies, op.sm_share); break;
        case OpKind::kQuantize: backend.Quantize(op.gpu, op.stream, QuantizeJobsOf(plan, op)); break;
        default: RESHARD_CHECK(false, "communication op outside a group call");
      }
    };
    backend.StartClock();
    const auto wall_start = std::chrono::steady_clock::now();  // just after the reference
    for (const IssueStep& step : steps) {
      for (int32_t id : step.before) {
        const Op& op = plan.ops[id];
        if (!local[op.gpu]) continue;
        issue_one(op);
        run_local(op);
        backend.OpEnd(op.id, op.gpu, op.stream);
      }
      bool any_comm = false;
      for (int32_t id : step.comm) {
        const Op& op = plan.ops[id];
        if (!local[op.gpu]) continue;
        issue_one(op);
        any_comm = true;
      }
      if (any_comm) {
        backend.GroupStart();
        for (int32_t id : step.comm) {
          const Op& op = plan.ops[id];
          if (!local[op.gpu]) continue;
          if (op.kind == OpKind::kSend) backend.Send(op.gpu, op.stream, op.region, op.peer);
          else backend.Recv(op.gpu, op.stream, op.region, op.peer);
        }
        backend.GroupEnd();
        for (int32_t id : step.comm) {
          const Op& op = plan.ops[id];
          if (local[op.gpu]) backend.OpEnd(op.id, op.gpu, op.stream);
        }
      }
      for (int32_t id : step.after) {
        const Op& op = plan.ops[id];
        if (!local[op.gpu]) continue;
        issue_one(op);
        run_local(op);
        backend.OpEnd(op.id, op.gpu, op.stream);
      }
    }
    backend.StopClock();
    m.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall_start).count();
    m.op_times = backend.OpTimes();

    // 4. Verify every destination element, untimed.
    for (size_t i = 0; i < plan.destinations.size(); ++i) {
      const ContentPiece& c = plan.destinations[i];
      if (local[plan.buffers[c.buffer].gpu])
        backend.Check(plan.buffers[c.buffer], ContentMapOf(plan, c, quantized), static_cast<int32_t>(i));
    }
    for (const PieceCheck& r : backend.CheckResults(options.max_mismatches)) {
      const ContentPiece& c = plan.destinations[r.piece];
      m.checked_elements += r.elements;
      m.checked_bytes += r.elements * ElemBytes(plan, c.tensor);
      m.mismatch_count += r.mismatches;
      for (const ElementMismatch& e : r.first)
        m.mismatches.push_back({plan.tensors[c.tensor].name, c.tensor, e.index, e.expected, e.got,
                                plan.buffers[c.buffer].gpu, c.buffer});
    }
    m.memory = backend.MemoryStats();
  } catch (...) {
    try {
      backend.End();
    } catch (...) {  // the first error wins
    }
    throw;
  }
  backend.End();

  // 5. Report (gathered on rank 0 in a multi-process run).
  m.backend = backend.Name();
  m.processes = processes;
  if (processes > 1) {
    const nlohmann::json part = m;
    const std::vector<std::string> parts = mpi->Gather(part.dump(), 0);
    if (mpi->rank() != 0) {
      m.complete = false;
      Summarize(plan, m);
      return m;
    }
    Measurement all;
    all.backend = m.backend;
    all.processes = processes;
    for (const std::string& s : parts) {
      const Measurement r = MeasurementFromJson(nlohmann::json::parse(s));
      all.wall_s = std::max(all.wall_s, r.wall_s);
      all.op_times.insert(all.op_times.end(), r.op_times.begin(), r.op_times.end());
      all.memory.insert(all.memory.end(), r.memory.begin(), r.memory.end());
      all.checked_elements += r.checked_elements;
      all.checked_bytes += r.checked_bytes;
      all.mismatch_count += r.mismatch_count;
      all.mismatches.insert(all.mismatches.end(), r.mismatches.begin(), r.mismatches.end());
    }
    m = std::move(all);
  }
  Summarize(plan, m);
  if (m.mismatches.size() > static_cast<size_t>(std::max(options.max_mismatches, 0)))
    m.mismatches.resize(std::max(options.max_mismatches, 0));
  return m;
}

void to_json(nlohmann::json& j, const Measurement& m) {
  using nlohmann::json;
  json links = json::array();
  for (const LinkRate& r : m.links) {
    links.push_back({{"link", LinkClassName(r.link)},
                     {"bytes", r.bytes},
                     {"ops", r.ops},
                     {"time_s", r.time_s},
                     {"algbw_bytes_per_s", r.algbw_bytes_per_s},
                     {"busbw_bytes_per_s", r.busbw_bytes_per_s},
                     {"gpu_bytes", r.gpu_bytes},
                     {"gpu_algbw_bytes_per_s", r.gpu_algbw_bytes_per_s}});
  }
  json memory = json::array();
  for (const GpuMemoryStats& s : m.memory) {
    memory.push_back({{"gpu", s.gpu},
                      {"peak_bytes", s.peak_bytes},
                      {"plan_peak_bytes", s.plan_peak_bytes},
                      {"host_peak_bytes", s.host_peak_bytes},
                      {"context_bytes", s.context_bytes},
                      {"comm_bytes", s.comm_bytes}});
  }
  json mism = json::array();
  for (const Mismatch& x : m.mismatches) {
    mism.push_back({{"tensor", x.tensor},
                    {"tensor_id", x.tensor_id},
                    {"index", x.index},
                    {"expected", x.expected},
                    {"got", x.got},
                    {"gpu", x.gpu},
                    {"buffer", x.buffer}});
  }
  // Op times as parallel arrays: compact for plans of many ops.
  json op_ids = json::array(), op_gpus = json::array(), starts = json::array(), ends = json::array();
  for (const OpTime& t : m.op_times) {
    op_ids.push_back(t.op);
    op_gpus.push_back(t.gpu);
    starts.push_back(t.start_s);
    ends.push_back(t.end_s);
  }
  j = json{{"backend", m.backend},
           {"processes", m.processes},
           {"complete", m.complete},
           {"time_s", m.time_s},
           {"gpu_span_s", m.gpu_span_s},
           {"wall_s", m.wall_s},
           {"time_note", "time_s: from the call (t = 0) to the last op end, host issue included; gpu_span_s: first "
                         "op start to last op end; wall_s: host clock from t = 0 to the end of the final wait"},
           {"peak_bytes", m.peak_bytes},
           {"plan_peak_bytes", m.plan_peak_bytes},
           {"memory", memory},
           {"bytes_moved", m.bytes_moved},
           {"links", links},
           {"busbw_note", "point-to-point: busbw = algbw (nccl-tests)"},
           {"verified", m.verified},
           {"checked_elements", m.checked_elements},
           {"checked_bytes", m.checked_bytes},
           {"mismatch_count", m.mismatch_count},
           {"mismatches", mism},
           {"ops", {{"op", op_ids}, {"gpu", op_gpus}, {"start_s", starts}, {"end_s", ends}}}};
}

Measurement MeasurementFromJson(const nlohmann::json& j) {
  Measurement m;
  m.backend = j.at("backend").get<std::string>();
  m.processes = j.at("processes").get<int32_t>();
  m.complete = j.at("complete").get<bool>();
  m.time_s = j.at("time_s").get<double>();
  m.gpu_span_s = j.at("gpu_span_s").get<double>();
  m.wall_s = j.at("wall_s").get<double>();
  m.peak_bytes = j.at("peak_bytes").get<std::vector<int64_t>>();
  m.plan_peak_bytes = j.at("plan_peak_bytes").get<std::vector<int64_t>>();
  for (const auto& s : j.at("memory")) {
    m.memory.push_back({s.at("gpu").get<int32_t>(), s.at("peak_bytes").get<int64_t>(),
                        s.at("plan_peak_bytes").get<int64_t>(), s.at("host_peak_bytes").get<int64_t>(),
                        s.at("context_bytes").get<int64_t>(), s.at("comm_bytes").get<int64_t>()});
  }
  m.bytes_moved = j.at("bytes_moved").get<BytesMoved>();
  for (const auto& r : j.at("links")) {
    LinkRate x;
    const std::string name = r.at("link").get<std::string>();
    for (LinkClass c : kLinkClasses)
      if (LinkClassName(c) == name) x.link = c;
    x.bytes = r.at("bytes").get<int64_t>();
    x.ops = r.at("ops").get<int32_t>();
    x.time_s = r.at("time_s").get<double>();
    x.algbw_bytes_per_s = r.at("algbw_bytes_per_s").get<double>();
    x.busbw_bytes_per_s = r.at("busbw_bytes_per_s").get<double>();
    x.gpu_bytes = r.at("gpu_bytes").get<std::vector<int64_t>>();
    x.gpu_algbw_bytes_per_s = r.at("gpu_algbw_bytes_per_s").get<std::vector<double>>();
    m.links.push_back(std::move(x));
  }
  m.verified = j.at("verified").get<bool>();
  m.checked_elements = j.at("checked_elements").get<int64_t>();
  m.checked_bytes = j.at("checked_bytes").get<int64_t>();
  m.mismatch_count = j.at("mismatch_count").get<int64_t>();
  for (const auto& x : j.at("mismatches")) {
    m.mismatches.push_back({x.at("tensor").get<std::string>(), x.at("tensor_id").get<int32_t>(),
                            x.at("index").get<int64_t>(), x.at("expected").get<uint64_t>(), x.at("got").get<uint64_t>(),
                            x.at("gpu").get<int32_t>(), x.at("buffer").get<int32_t>()});
  }
  const auto& ops = j.at("ops");
  const auto ids = ops.at("op").get<std::vector<int32_t>>();
  const auto op_gpus = ops.at("gpu").get<std::vector<int32_t>>();
  const auto starts = ops.at("start_s").get<std::vector<double>>();
  const auto ends = ops.at("end_s").get<std::vector<double>>();
  for (size_t i = 0; i < ids.size(); ++i) m.op_times.push_back({ids[i], op_gpus[i], starts[i], ends[i]});
  return m;
}

std::string FormatMeasurement(const Measurement& m, const Plan& plan) {
  auto gb = [](double bytes) { return bytes / 1e9; };
  std::string out = fmt::format("run of '{}' on the {} backend ({} process{}): {:.3f} ms from the call to the last op "
                                "end (GPU span {:.3f} ms: first op start to last op end; host wall {:.3f} ms)\n",
                                plan.name, m.backend, m.processes, m.processes == 1 ? "" : "es", m.time_s * 1e3,
                                m.gpu_span_s * 1e3, m.wall_s * 1e3);
  out += "bandwidth per link class (nccl-tests: algbw = bytes / time; point-to-point busbw = algbw):\n";
  for (const LinkRate& r : m.links) {
    const double busiest =
        r.gpu_algbw_bytes_per_s.empty()
            ? 0
            : *std::max_element(r.gpu_algbw_bytes_per_s.begin(), r.gpu_algbw_bytes_per_s.end());
    out += fmt::format("  {:<8} {:>10.3f} GB in {:>5} ops over {:.3f} ms: {:.1f} GB/s all GPUs, {:.1f} GB/s busiest "
                       "GPU\n",
                       LinkClassName(r.link), gb(static_cast<double>(r.bytes)), r.ops, r.time_s * 1e3,
                       gb(r.algbw_bytes_per_s), gb(busiest));
  }
  out += "peak memory per GPU (measured | plan buffers):\n";
  for (size_t g = 0; g < m.peak_bytes.size(); ++g) {
    out += fmt::format("  GPU {}: {} | {}\n", g, Gib(m.peak_bytes[g]),
                       Gib(g < m.plan_peak_bytes.size() ? m.plan_peak_bytes[g] : 0));
  }
  if (m.verified) {
    out += fmt::format("verified: all {} destination elements ({}) hold their expected values\n", m.checked_elements,
                       Gib(m.checked_bytes));
  } else {
    out += fmt::format("NOT verified: {} of {} destination elements are wrong; first ones:\n", m.mismatch_count,
                       m.checked_elements);
    for (const Mismatch& x : m.mismatches)
      out += fmt::format("  tensor '{}' element {}: expected {:#x}, got {:#x} (GPU {}, buffer {})\n", x.tensor, x.index,
                         x.expected, x.got, x.gpu, x.buffer);
  }
  return out;
}

}  // namespace reshard
