// `reshard sweep SCENARIO [--segment-bytes L] [--offload L] [--domains L]
// [--margin 5%] [--threads N] [--exhaustive] [--csv FILE] [--json]`: plan and
// simulate a scenario over segment sizes, offload fractions, memory policies
// and NVLink domain sizes (planner/sweep.h; points estimated slower than the
// best are not simulated unless --exhaustive); print every point, the Pareto
// front of (time, peak) among those simulated that fit, and a recommended
// default.
//
// Exit 0 whenever the sweep ran, even when no point fits (that is the answer);
// 2 on bad flags or input.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/inputs.h"
#include "model/error.h"
#include "model/output_file.h"
#include "planner/sweep.h"

namespace reshard::cli {

namespace {

struct SweepCmdOptions {
  ScenarioArgs scenario;
  std::string segment_bytes;
  std::string offload;
  std::string domains;
  std::string margin = "5%";
  int32_t threads = 0;
  bool exhaustive = false;
  std::string csv;
  bool json = false;
};

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    if (a != std::string::npos) out.push_back(item.substr(a, b - a + 1));
  }
  return out;
}

double ParseNumber(const std::string& text, const std::string& flag) {
  std::string t = text;
  double scale = 1;
  if (!t.empty() && t.back() == '%') t.pop_back(), scale = 0.01;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != t.size() || !std::isfinite(v))
    throw InputError("<cli>", flag, fmt::format("'{}' is not a number", text));
  return v * scale;
}

SweepGrid GridOf(const SweepCmdOptions& o) {
  SweepGrid g;
  for (const std::string& x : SplitList(o.segment_bytes)) g.segment_bytes.push_back(SizeFlag(x, "--segment-bytes"));
  for (const std::string& x : SplitList(o.offload)) g.offload_fractions.push_back(ParseNumber(x, "--offload"));
  for (const std::string& x : SplitList(o.domains)) {
    const double d = ParseNumber(x, "--domains");
    if (d != std::floor(d) || d < 1 || d > 1e9) throw InputError("<cli>", "--domains", fmt::format("'{}' is not a positive integer", x));
    g.nvlink_domain_nodes.push_back(static_cast<int32_t>(d));
  }
  return g;
}

// A bar on stderr, shown only once the sweep has run a second and stderr is a
// terminal (not with --json).
class ProgressBar {
 public:
  ProgressBar() : tty_(isatty(STDERR_FILENO) != 0), start_(std::chrono::steady_clock::now()) {}
  void Update(int64_t done, int64_t total) {
    if (!tty_) return;
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (elapsed_s < 1.0 && done < total) return;
    if (!shown_ && done == total) return;  // finished within a second: no bar at all
    shown_ = true;
    constexpr int kWidth = 30;
    const int filled = static_cast<int>(kWidth * done / std::max<int64_t>(1, total));
    std::cerr << fmt::format("\rsweep [{}{}] {}/{} points, {:.1f} s", std::string(filled, '#'),
                             std::string(kWidth - filled, ' '), done, total, elapsed_s)
              << std::flush;
  }
  ~ProgressBar() {
    if (shown_) std::cerr << "\n";
  }

 private:
  bool tty_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_;
};

std::string Ms(double s) { return fmt::format("{:.3f}", s * 1e3); }

// 4194304 -> "4MiB", 1073741824 -> "1GiB"; other sizes in bytes.
std::string ShortBytes(int64_t b) {
  if (b >= (int64_t{1} << 30) && b % (int64_t{1} << 30) == 0) return fmt::format("{}GiB", b >> 30);
  if (b >= (int64_t{1} << 20) && b % (int64_t{1} << 20) == 0) return fmt::format("{}MiB", b >> 20);
  if (b >= (int64_t{1} << 10) && b % (int64_t{1} << 10) == 0) return fmt::format("{}KiB", b >> 10);
  return fmt::format("{}B", b);
}

void PrintHuman(const SweepResult& r, bool multi_node) {
  std::cout << fmt::format("sweep of {}: {} points, GPU capacity {}, margin {:.0f}%\n", r.scenario, r.points.size(),
                           FormatBytes(r.capacity_bytes), r.margin * 100);
  std::cout << fmt::format("{:>4}  {:>10}  {:>7}  {:<32}  {}{:>11}  {:>22}  {:<22}  {:>11}  {:>6}  {}\n", "#", "segment",
                           "offload", "memory policy", multi_node ? "domain  " : "", "time ms", "max peak", "fits",
                           "bound ms", "eff", "pareto");
  for (size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    const std::string fits = !p.simulated       ? "not simulated"
                             : !p.error.empty() ? "error"
                             : p.fits           ? "yes"
                                                : fmt::format("no, {} short", FormatBytes(p.missing_bytes));
    const std::string time = p.fits ? Ms(p.time_s) : !p.simulated ? "~" + Ms(p.estimate_s) : "-";
    std::cout << fmt::format("{:>4}  {:>10}  {:>7.2f}  {:<32}  {}{:>11}  {:>22}  {:<22}  {:>11}  {:>6}  {:<6}{}\n", i,
                             ShortBytes(p.segment_bytes),
                             p.offload_fraction, p.policy.Name(),
                             multi_node ? fmt::format("{:>6}  ", p.nvlink_domain_nodes) : "",
                             time, p.simulated ? FormatBytes(p.peak_bytes) : "-", fits,
                             p.fits ? Ms(p.lower_bound_s) : "-",
                             p.fits ? fmt::format("{:.1f}%", p.plan_efficiency * 100) : "-", p.pareto ? "*" : "",
                             p.same_plan_as >= 0 ? fmt::format("  same plan as #{}", p.same_plan_as) : "");
    if (!p.error.empty()) std::cout << "        " << p.error << "\n";
  }
  std::cout << "Pareto front (time, peak) among simulated points that fit:";
  bool any = false;
  for (size_t i = 0; i < r.points.size(); ++i)
    if (r.points[i].pareto) std::cout << (any ? ", #" : " #") << i, any = true;
  std::cout << (any ? "\n" : " none\n");
  const int64_t copied =
      std::count_if(r.points.begin(), r.points.end(), [](const SweepPoint& p) { return p.same_plan_as >= 0; });
  if (copied > 0)
    std::cout << fmt::format("{} points not planned again: their segment size is at least every GPU pair's bytes, "
                             "so they plan as the smaller size they name\n",
                             copied);
  const int64_t pruned =
      std::count_if(r.points.begin(), r.points.end(), [](const SweepPoint& p) { return !p.simulated; });
  if (pruned > 0)
    std::cout << fmt::format("{} points estimated, not simulated (time ~: their size's base point less 5 %, or their "
                             "optimizer offload's PCIe time): slower than the best base point by the estimate; "
                             "--exhaustive simulates every point\n",
                             pruned);
  if (r.recommended) {
    const SweepPoint& p = r.points[*r.recommended];
    std::cout << fmt::format("recommended: #{} segment {} offload {:.2f} {}{}: {} ms, peak {}\n", *r.recommended,
                             ShortBytes(p.segment_bytes), p.offload_fraction, p.policy.Name(),
                             multi_node ? fmt::format(" domain {}", p.nvlink_domain_nodes) : "", Ms(p.time_s),
                             FormatBytes(p.peak_bytes));
    std::cout << "  why: " << r.why << "\n";
  } else {
    std::cout << "recommended: " << r.why << "\n";
  }
}

void WriteCsv(const SweepResult& r, const std::string& path) {
  AtomicOutput file(path);  // a temporary file renamed over `path` once complete
  std::ostream& out = file.stream();
  out << "segment_bytes,offload_fraction,memory_policy,nvlink_domain_nodes,time_s,peak_bytes,fits,missing_bytes,"
         "lower_bound_s,plan_efficiency,routing_bound_s,pareto,recommended,simulated,estimate_s\n";
  for (size_t i = 0; i < r.points.size(); ++i) {
    const SweepPoint& p = r.points[i];
    out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", p.segment_bytes, p.offload_fraction,
                       p.policy.Name(), p.nvlink_domain_nodes, p.fits ? fmt::format("{:.9g}", p.time_s) : "",
                       p.simulated ? std::to_string(p.peak_bytes) : "",
                       !p.simulated ? "" : p.fits ? "yes" : "no", p.missing_bytes,
                       p.fits ? fmt::format("{:.9g}", p.lower_bound_s) : "",
                       p.fits ? fmt::format("{:.6f}", p.plan_efficiency) : "",
                       p.fits ? fmt::format("{:.9g}", p.routing_bound_s) : "", p.pareto ? "yes" : "no",
                       r.recommended == i ? "yes" : "no", p.simulated ? "yes" : "no",
                       p.estimate_s >= 0 ? fmt::format("{:.9g}", p.estimate_s) : "");
  }
  file.Commit();
}

void Run(const SweepCmdOptions& o) {
  // Bad input writes nothing: checked before any work.
  CheckOutputPath(o.csv, "--csv", {o.scenario.scenario, o.scenario.calibration});
  const Scenario s = o.scenario.Load();
  const SweepGrid grid = GridOf(o);
  if (!grid.segment_bytes.empty()) {
    const int64_t destination_bytes = DestinationBytes(s, "<cli>");  // one layout for every size
    for (int64_t b : grid.segment_bytes)
      if (const std::string problem = b > 0 ? SegmentBytesProblem(s, b, destination_bytes) : ""; !problem.empty())
        throw InputError("<cli>", "--segment-bytes", problem);
  }
  SweepOptions so;
  so.threads = o.threads;
  so.exhaustive = o.exhaustive;
  so.margin = ParseNumber(o.margin, "--margin");
  std::optional<ProgressBar> bar;
  if (!o.json) {  // --json is read by programs: nothing beside it
    bar.emplace();
    so.progress = [&bar](int64_t done, int64_t total) { bar->Update(done, total); };
  }
  // Each point builds and drops plans of hundreds of MB: keep freed memory
  // in the heap for the next point instead of handing it back to the kernel
  // and faulting it in again (glibc maps blocks over 32 MiB by default and
  // trims the heap top). About a seventh of the sweep's CPU time on
  // qwen3-235b; the results are the same.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  const SweepResult r = Sweep(s, grid, so);
  bar.reset();  // ends the bar's line before the output
  if (!o.csv.empty()) WriteCsv(r, o.csv);
  const bool any_fits = std::any_of(r.points.begin(), r.points.end(), [](const SweepPoint& p) { return p.fits; });
  if (o.json) {
    PrintJson(nlohmann::json(r));
  } else {
    PrintHuman(r, s.cluster.nodes > 1);
    if (!o.csv.empty()) std::cout << "csv written to " << o.csv << "\n";
  }
  if (!any_fits) {
    std::cerr << "infeasible: no point of the sweep fits in GPU memory (capacity less reserve)\n";
    ExitWith(kExitInfeasible);
  }
}

}  // namespace

void RegisterSweepCommand(CLI::App& app) {
  auto o = std::make_shared<SweepCmdOptions>();
  CLI::App* cmd = app.add_subcommand(
      "sweep", "capacity planning: time and peak memory over segment sizes, offload, memory policies, NVLink domains");
  AddScenarioOptions(cmd, o->scenario);
  cmd->add_option("--segment-bytes", o->segment_bytes, "segment sizes, e.g. 4MiB,16MiB (default 4 MiB .. 4 GiB, x2: those `plan --segment-bytes` accepts, at most 131072 segments)");
  cmd->add_option("--offload", o->offload, "optimizer offload fractions, e.g. 0,0.5,1 (default 0,0.25,0.5,1)");
  cmd->add_option("--domains", o->domains,
                  "nvlink_domain_nodes values to compare, e.g. 1,2 (default: the cluster's own; others describe "
                  "hardware you would need)");
  cmd->add_option("--margin", o->margin, "safety margin of GPU capacity for the recommendation (default 5%)");
  cmd->add_option("--threads", o->threads, "worker threads (default: hardware concurrency)")->check(CLI::Range(0, 4096));
  cmd->add_flag("--exhaustive", o->exhaustive,
                "plan and simulate every point (default: points estimated slower than the best size's base point "
                "are not simulated)");
  cmd->add_option("--csv", o->csv, "also write the points as CSV to this path");
  cmd->add_flag("--json", o->json, "machine-readable output (every field: docs/json.md)");
  cmd->callback([o]() { Run(*o); });
}

}  // namespace reshard::cli
