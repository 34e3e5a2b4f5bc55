// `reshard validate SCENARIO|plan.json [--backend host|nccl] [--json]`: plan,
// simulate, run (verifying every byte) and report how far the prediction was
// from the measurement: time_error and peak_error = predicted / measured - 1
// (signed, relative), for the whole refit and per GPU.
//
// Per GPU, time is that GPU's first op start to its last op end (predicted:
// the simulator's op times; measured: the backend's); peak is device memory,
// everything counted. With --backend host the measurement is of CPU threads
// and plan buffers only, so the errors say little about GPUs.
#include <algorithm>
#include <iostream>
#include <limits>
#include <memory>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/run_common.h"
#include "sim/simulator.h"

namespace reshard::cli {

namespace {

double RelativeError(double predicted, double measured) { return measured > 0 ? predicted / measured - 1 : 0.0; }

struct GpuError {
  int32_t gpu = -1;
  double predicted_time_s = 0, measured_time_s = 0;
  int64_t predicted_peak_bytes = 0, measured_peak_bytes = 0;
};

// Per GPU: first start to last end of its ops.
std::vector<double> SpanPerGpu(int32_t gpus, const std::vector<std::pair<int32_t, std::pair<double, double>>>& ops) {
  std::vector<double> lo(gpus, std::numeric_limits<double>::infinity()), hi(gpus, -1), span(gpus, 0);
  for (const auto& [g, t] : ops) {
    lo[g] = std::min(lo[g], t.first);
    hi[g] = std::max(hi[g], t.second);
  }
  for (int32_t g = 0; g < gpus; ++g) span[g] = hi[g] >= lo[g] ? hi[g] - lo[g] : 0;
  return span;
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

  std::vector<std::pair<int32_t, std::pair<double, double>>> p_ops, m_ops;
  for (const Op& op : plan.ops)
    if (static_cast<size_t>(op.id) < pred.op_start_ns.size())
      p_ops.push_back({op.gpu, {pred.op_start_ns[op.id] * 1e-9, pred.op_end_ns[op.id] * 1e-9}});
  for (const OpTime& t : m.op_times) m_ops.push_back({t.gpu, {t.start_s, t.end_s}});
  const std::vector<double> p_span = SpanPerGpu(gpus, p_ops), m_span = SpanPerGpu(gpus, m_ops);

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

  if (a.json) {
    nlohmann::json j = PredictedJson(plan);
    j["time_s"] = pred.time_s;  // this run's simulation, not a stale summary
    j["peak_bytes"] = pred.peak_bytes;
    j["lower_bound_s"] = pred.lower_bound_s;
    j["plan_efficiency"] = pred.plan_efficiency;
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
    PrintJson(j);
    return;
  }
  std::cout << FormatMeasurement(m, plan);
  if (m.backend == "host")
    std::cout << "note: the host backend measures CPU threads and plan buffers, not GPUs; errors below say little\n";
  std::cout << fmt::format("refit time  predicted {:9.3f} ms  measured {:9.3f} ms  error {:+7.2f} %\n",
                           pred.time_s * 1e3, m.time_s * 1e3, time_error * 100);
  std::cout << fmt::format("peak        predicted {:9.3f} GiB measured {:9.3f} GiB error {:+7.2f} %\n",
                           p_peak / double(1 << 30), m_peak / double(1 << 30), peak_error * 100);
  constexpr size_t kMaxRows = 16;
  std::cout << fmt::format("{:>5}  {:>12}  {:>12}  {:>8}  {:>12}  {:>12}  {:>8}\n", "GPU", "pred ms", "meas ms",
                           "time err", "pred GiB", "meas GiB", "peak err");
  for (size_t i = 0; i < std::min(rows.size(), kMaxRows); ++i) {
    const GpuError& r = rows[i];
    std::cout << fmt::format("{:>5}  {:>12.3f}  {:>12.3f}  {:>+7.2f}%  {:>12.3f}  {:>12.3f}  {:>+7.2f}%\n", r.gpu,
                             r.predicted_time_s * 1e3, r.measured_time_s * 1e3,
                             RelativeError(r.predicted_time_s, r.measured_time_s) * 100,
                             r.predicted_peak_bytes / double(1 << 30), r.measured_peak_bytes / double(1 << 30),
                             RelativeError(static_cast<double>(r.predicted_peak_bytes),
                                           static_cast<double>(r.measured_peak_bytes)) *
                                 100);
  }
  if (rows.size() > kMaxRows) std::cout << fmt::format("  ... {} more GPUs (--json lists all)\n", rows.size() - kMaxRows);
}

}  // namespace

void RegisterValidateCommand(CLI::App& app) {
  RegisterExecuteVerb(app, "validate",
                      "plan, simulate and run; report the prediction error (time_error, peak_error) overall and per GPU",
                      Report);
}

}  // namespace reshard::cli
