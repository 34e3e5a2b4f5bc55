// `reshard validate SCENARIO|plan.json [--backend host|nccl] [--json]
// [--trace FILE]`: plan, simulate, run (verifying every byte) and report how
// far the prediction was from the measurement: time_error and peak_error =
// predicted / measured - 1 (signed, relative), for the whole refit and per GPU.
//
// Time is from the call (t = 0) to the last op end, on both sides: the
// prediction's time_s (simulated with reshard's executor issuing the ops) and
// the measurement's time_s (host issue included; its GPU span, first op
// start to last op end, is printed beside it). Per GPU,
// time is from t = 0 to that GPU's last op end (predicted: the simulator's op
// times; measured: the backend's), so the slowest GPU's equals the whole
// refit's. Peak is device memory, everything counted. --trace writes the
// predicted and the measured op times as two processes of one Perfetto trace.
// With --backend host the measurement is of CPU threads and plan buffers
// only, so the errors say little about GPUs.
#include <algorithm>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_common.h"
#include "sim/simulator.h"
#include "sim/trace.h"

namespace reshard::cli {

namespace {

double RelativeError(double predicted, double measured) { return measured > 0 ? predicted / measured - 1 : 0.0; }

struct GpuError {
  int32_t gpu = -1;
  double predicted_time_s = 0, measured_time_s = 0;
  int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
};

// Per GPU: t = 0 to the last end of its ops (0 for a GPU without ops).
std::vector<double> EndPerGpu(int32_t gpus, const std::vector<std::pair<int32_t, double>>& op_ends) {
  std::vector<double> end(gpus, 0);
  for (const auto& [g, t] : op_ends) end[g] = std::max(end[g], t);
  return end;
}

void Report(const ExecuteArgs& a, const ExecuteOutcome& o) {
  const Plan& plan = o.plan;
  const Measurement& m = o.Chosen();
  // Predicted as it ran: reshard's executor issuing, one host thread per process.
  SimOptions so;
  so.issue = IssueModel::kExecutor;
  so.one_process = m.processes == 1;
  const Prediction pred = Simulate(plan, so);
  const int32_t gpus = plan.Gpus();

  if (!a.trace.empty()) WriteTimelinesTrace(a.trace, plan, {PredictedTimeline(plan, pred), MeasuredTimeline(m)});

  std::vector<std::pair<int32_t, double>> p_ops, m_ops;
  for (const Op& op : plan.ops)
    if (static_cast<size_t>(op.id) < pred.op_end_ns.size()) p_ops.push_back({op.gpu, pred.op_end_ns[op.id] * 1e-9});
  for (const OpTime& t : m.op_times) m_ops.push_back({t.gpu, t.end_s});
  const std::vector<double> p_span = EndPerGpu(gpus, p_ops), m_span = EndPerGpu(gpus, m_ops);

  std::vector<GpuError> rows;
  for (int32_t g = 0; g < gpus; ++g) {
    GpuError r;
    r.gpu = g;
    r.predicted_time_s = p_span[g];
    r.measured_time_s = m_span[g];
    r.predicted_peak_bytes = g < static_cast<int32_t>(pred.peak_bytes.size()) ? pred.peak_bytes[g] : 0;
    r.measured_peak_bytes = g < static_cast<int32_t>(m.peak_bytes.size()) ? m.peak_bytes[g] : 0;
    rows.push_back(r);
  }
  const int64_t p_peak = pred.peak_bytes.empty() ? 0 : *std::max_element(pred.peak_bytes.begin(), pred.peak_bytes.end());
  const int64_t m_peak = m.peak_bytes.empty() ? 0 : *std::max_element(m.peak_bytes.begin(), m.peak_bytes.end());
  const double time_error = RelativeError(pred.time_s, m.time_s);
  const double peak_error = RelativeError(static_cast<double>(p_peak), static_cast<double>(m_peak));
  const std::string over =
      PeakAboveUsable(pred.peak_bytes, plan.cluster, ReserveOfTarget(a.target.target, a.target.scenario));

  if (a.json) {
    nlohmann::json j = PredictedJson(plan);
    j["time_s"] = pred.time_s;  // this run's simulation, not a stale summary
    j["peak_bytes"] = pred.peak_bytes;
    j["lower_bound_s"] = pred.lower_bound_s;
    j["plan_efficiency"] = pred.plan_efficiency;
    j["routing_bound_s"] = pred.routing_bound_s;
    j["backend"] = m.backend;
    j["verified"] = o.verified;
    j["measured"] = MeasuredJson(o);
    j["time_error"] = time_error;
    j["peak_error"] = peak_error;
    nlohmann::json per = nlohmann::json::array();
    for (const GpuError& r : rows) {
      per.push_back({{"gpu", r.gpu},
                     {"predicted_time_s", r.predicted_time_s},
                     {"measured_time_s", r.measured_time_s},
                     {"time_error", RelativeError(r.predicted_time_s, r.measured_time_s)},
                     {"predicted_peak_bytes", r.predicted_peak_bytes},
                     {"measured_peak_bytes", r.measured_peak_bytes},
                     {"peak_error", RelativeError(static_cast<double>(r.predicted_peak_bytes),
                                                  static_cast<double>(r.measured_peak_bytes))}});
    }
    j["per_gpu"] = per;
    j["per_gpu_note"] = "time: from t = 0 (the call) to the GPU's last op end";
    if (!a.trace.empty()) j["trace"] = a.trace;
    PrintJson(j);
    if (!over.empty()) ExitPeakAboveUsable(over);
    return;
  }
  std::cout << FormatMeasurement(m, plan) << CheckRunLine(o);
  if (m.backend == "host")
    std::cout << "note: the host backend measures CPU threads and plan buffers, not GPUs; errors below say little\n";
  std::cout << fmt::format("refit time  predicted {:9.3f} ms  measured {:9.3f} ms  error {:+7.2f} %  (from the call "
                           "to the last op end; measured GPU span {:.3f} ms)\n",
                           pred.time_s * 1e3, m.time_s * 1e3, time_error * 100, m.gpu_span_s * 1e3);
  std::cout << fmt::format("peak        predicted {:9.3f} GiB measured {:9.3f} GiB error {:+7.2f} %\n",
                           p_peak / double(1 << 30), m_peak / double(1 << 30), peak_error * 100);
  constexpr size_t kMaxGpuRows = 16;
  std::cout << "per GPU (ms: from the call to that GPU's last op end):\n";
  std::cout << fmt::format("{:>5}  {:>12}  {:>12}  {:>8}  {:>12}  {:>12}  {:>8}\n", "GPU", "pred ms", "meas ms",
                           "time err", "pred GiB", "meas GiB", "peak err");
  for (size_t i = 0; i < std::min(rows.size(), kMaxGpuRows); ++i) {
    const GpuError& r = rows[i];
    std::cout << fmt::format("{:>5}  {:>12.3f}  {:>12.3f}  {:>+7.2f}%  {:>12.3f}  {:>12.3f}  {:>+7.2f}%\n", r.gpu,
                             r.predicted_time_s * 1e3, r.measured_time_s * 1e3,
                             RelativeError(r.predicted_time_s, r.measured_time_s) * 100,
                             r.predicted_peak_bytes / double(1 << 30), r.measured_peak_bytes / double(1 << 30),
                             RelativeError(static_cast<double>(r.predicted_peak_bytes),
                                           static_cast<double>(r.measured_peak_bytes)) *
                                 100);
  }
  if (rows.size() > kMaxGpuRows) std::cout << fmt::format("  ... {} more GPUs (--json lists all)\n", rows.size() - kMaxGpuRows);
  if (!a.trace.empty())
    std::cout << fmt::format("predicted and measured trace written to {} (open in ui.perfetto.dev)\n", a.trace);
  if (!over.empty()) ExitPeakAboveUsable(over);
}

}  // namespace

void RegisterValidateCommand(CLI::App& app) {
  RegisterExecuteVerb(app, "validate",
                      "plan, simulate and run; report the prediction error (time_error, peak_error) overall and per GPU",
                      Report);
}

}  // namespace reshard::cli
