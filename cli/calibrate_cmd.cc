// `reshard calibrate -o profile.json [--max-bytes N] [--quick] [--json]`:
// measure this host's GPU links (calib/measure_nccl.h), fit the
// simulator's link model to them (calib/fit.h) and write a
// calibration profile that scenarios load with `cluster.calibration`
// (calib/README.md). The profile carries the raw measurements and the fit's
// residuals under "measurements". Progress goes to stderr.
// `--refit old.json` fits the measurements kept in an earlier profile again
// instead of measuring (no GPU needed).
//
// Exit codes: 0 written; 2 bad flags, or no GPU / a reshard built without
// CUDA and NCCL (nothing to measure); 1 a CUDA / NCCL failure.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "calib/profile.h"
#include "model/error.h"
#include "model/scenario.h"
#ifdef RESHARD_HAVE_NCCL
#include "calib/measure_nccl.h"
#endif

namespace reshard::cli {

namespace {

struct CalibrateCmdOptions {
  std::string output;
  std::string refit;
  std::string max_bytes = "1GiB";
  bool quick = false;
  bool json = false;
};

nlohmann::json SummaryJson(const std::string& output, const CalibrationData& d, const CalibrationFit& fit) {
  nlohmann::json links = nlohmann::json::object();
  for (const LinkCalibration& c : fit.links) {
    nlohmann::json l = {{"latency_ns", c.profile.latency_ns},
                        {"bytes_per_s", c.profile.bytes_per_s},
                        {"duplex_bytes_per_s", c.profile.duplex_bytes_per_s},
                        {"efficiency_points", c.profile.efficiency.size()},
                        {"duplex_efficiency_points", c.profile.duplex_efficiency.size()}};
    links[c.link] = l;
  }
  nlohmann::json series = nlohmann::json::array();
  for (const SeriesFit& s : fit.series)
    series.push_back({{"link", d.series[s.series].link},
                      {"mode", d.series[s.series].mode},
                      {"max_abs_relative_error", s.residuals.max_abs_relative_error},
                      {"rms_relative_error", s.residuals.rms_relative_error}});
  nlohmann::json memory = nlohmann::json::object();
  if (fit.has_cuda_context) memory["cuda_context_bytes"] = fit.overheads.cuda_context_bytes;
  if (fit.has_nccl_per_peer) memory["nccl_bytes_per_peer"] = fit.overheads.nccl_bytes_per_peer;
  return {{"output", output}, {"name", d.name}, {"links", links}, {"memory", memory}, {"residuals", series}};
}

void PrintHuman(const std::string& output, const CalibrationData& d, const CalibrationFit& fit) {
  std::cout << fmt::format("calibration profile written to {}\n{}\n", output, d.source);
  // points: efficiency points (+ duplex_efficiency points).
  std::cout << fmt::format("  {:<14} {:>10} {:>12} {:>12}  {}\n", "link", "latency", "peak", "both ways",
                           "points");
  for (const LinkCalibration& c : fit.links) {
    const LinkProfile& l = c.profile;
    std::cout << fmt::format(
        "  {:<14} {:>7.1f} us {:>7.1f} GB/s {:>12}  {}\n", c.link, static_cast<double>(l.latency_ns) * 1e-3,
        l.bytes_per_s / 1e9, c.has_both_ways ? fmt::format("{:.1f} GB/s", l.duplex_bytes_per_s / 1e9) : "-",
        c.has_both_ways ? fmt::format("{}+{}", l.efficiency.size(), l.duplex_efficiency.size())
                        : fmt::format("{}", l.efficiency.size()));
  }
  std::cout << "fit residuals (model / measured median - 1, over the measured sizes):\n";
  for (const SeriesFit& s : fit.series)
    std::cout << fmt::format("  {:<14} {:<10} max {:5.2f} %  rms {:5.2f} %\n", d.series[s.series].link,
                             d.series[s.series].mode, s.residuals.max_abs_relative_error * 100,
                             s.residuals.rms_relative_error * 100);
  if (fit.has_cuda_context)
    std::cout << fmt::format("memory: CUDA context {} per GPU\n", FormatBytes(fit.overheads.cuda_context_bytes));
  if (fit.has_nccl_per_peer)
    std::cout << fmt::format("memory: NCCL {} per connected peer (communicator {}, connections {} per peer)\n",
                             FormatBytes(fit.overheads.nccl_bytes_per_peer), FormatBytes(fit.nccl_init_bytes),
                             FormatBytes(fit.nccl_connect_bytes_per_peer));
}

CalibrationData ReadMeasurements(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open the profile to refit");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, false);
  if (j.is_discarded()) throw InputError(path, "", "not valid JSON");
  return CalibrationDataFromJson(j, path);
}

// Measures (or reads back with --refit); exits 2 where nothing can be measured.
CalibrationData Measurements(const CalibrateCmdOptions& o, int64_t max_bytes) {
  if (!o.refit.empty()) return ReadMeasurements(o.refit);
#ifdef RESHARD_HAVE_NCCL
  CalibrateOptions co;
  co.max_bytes = max_bytes;
  co.quick = o.quick;
  co.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << std::endl; };
  try {
    return MeasureNccl(co);
  } catch (const CalibrationUnavailable& e) {
    std::cerr << "error: " << e.what() << "\n";
    ExitWith(kExitInput);
  }
#else
  (void)max_bytes;
  std::cerr << "error: `reshard calibrate` measures GPUs through CUDA and NCCL, and this reshard was built "
               "without them (CMake found no CUDA toolkit with NCCL; see the configure log); `--refit` re-fits "
               "an existing profile without GPUs\n";
  ExitWith(kExitInput);
#endif
}

void Run(const CalibrateCmdOptions& o) {
  const int64_t max_bytes = ParseBytes(o.max_bytes, "<cli>", "--max-bytes");
  const std::filesystem::path out(o.output);
  std::error_code ec;
  if (out.has_parent_path() && !std::filesystem::is_directory(out.parent_path(), ec))
    throw InputError("<cli>", "-o", fmt::format("directory '{}' does not exist", out.parent_path().string()));
  const CalibrationData data = Measurements(o, max_bytes);
  const FitOptions fo;
  const CalibrationFit fit = FitCalibration(data, fo);
  const nlohmann::json profile = CalibrationProfileJson(data, fit, fo);
  {
    std::ofstream f(o.output, std::ios::binary | std::ios::trunc);
    if (!f) throw InputError("<cli>", "-o", fmt::format("cannot write '{}'", o.output));
    f << profile.dump(2) << "\n";
    if (!f) throw InputError("<cli>", "-o", fmt::format("writing '{}' failed", o.output));
  }
  if (o.json) {
    PrintJson(SummaryJson(o.output, data, fit));
  } else {
    PrintHuman(o.output, data, fit);
  }
}

}  // namespace

void RegisterCalibrateCommand(CLI::App& app) {
  auto o = std::make_shared<CalibrateCmdOptions>();
  CLI::App* cmd =
      app.add_subcommand("calibrate", "measure this host's GPU links (NCCL, PCIe, device copies) and fit a profile");
  cmd->add_option("-o,--output", o->output, "calibration profile to write (JSON)")->required();
  cmd->add_option("--max-bytes", o->max_bytes, "largest transfer measured, e.g. 256MiB (default 1GiB)");
  cmd->add_flag("--quick", o->quick, "x4 size steps and fewer repetitions (about a quarter of the time)");
  cmd->add_flag("--json", o->json, "machine-readable summary on stdout (the profile itself goes to -o)");
  cmd->add_option("--refit", o->refit, "fit the measurements kept in this earlier profile again; measure nothing");
  cmd->callback([o]() { Run(*o); });
}

}  // namespace reshard::cli
