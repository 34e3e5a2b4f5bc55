// `reshard calibrate -o profile.json [--max-bytes N] [--quick] [--json]`:
// measure this host's GPU links (calib/measure_nccl.h) and, on GPU 0, the
// executor's host costs, its copy kernel and the cold-refit terms
// (calib/measure_host.h); fit the simulator's models to them (calib/fit.h,
// calib/host_fit.h) and write a calibration profile that scenarios load with
// `cluster.calibration` (calib/README.md). One GPU is enough (NVLink needs
// two). The profile carries the raw measurements and the fit's residuals
// under "measurements". Progress goes to stderr.
// `--refit old.json` fits the measurements kept in an earlier profile again
// instead of measuring (no GPU needed).
// `mpirun -np N reshard calibrate --network --rendezvous DIR -o p.json`: one
// process per GPU on two nodes or more measures the network between two ranks
// on different nodes (calib/measure_network.h); rank 0 writes the profile.
// `--merge base.json` puts what was measured (or refitted) over an existing
// profile (calib/profile.h MergeProfileJson), so parts measured on different
// machines make one profile.
//
// Exit codes: 0 written; 2 bad flags, or no GPU / a reshard built without
// CUDA and NCCL (nothing to measure), or --network not under a launcher, with
// one rank, or with every rank on one host; 1 a CUDA / NCCL failure.
#include <algorithm>
#include <charconv>
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
#include "calib/launcher.h"
#include "calib/profile.h"
#include "model/error.h"
#include "model/input_file.h"
#include "model/output_file.h"
#include "model/scenario.h"
#ifdef RESHARD_HAVE_NCCL
#include "calib/measure_host.h"
#include "calib/measure_nccl.h"
#include "calib/measure_network.h"
#endif

namespace reshard::cli {

namespace {

struct CalibrateCmdOptions {
  std::string output;
  std::string refit;
  std::string max_bytes = "1GiB";
  bool quick = false;
  bool json = false;
  bool no_links = false;
  bool no_host_costs = false;
  bool no_copy_kernel = false;
  bool no_quantize_kernel = false;
  bool no_cold = false;
  std::string pin_max_bytes = "16GiB";
  std::string copy_bytes = "256MiB";
  std::string quantize_bytes = "1GiB";
  std::string host_calls = "20000";
  bool network = false;
  std::string rendezvous;
  double rendezvous_timeout_s = 120;
  std::string host;
  std::string merge;
};

// The numeric options, parsed and checked against their ranges before
// anything is opened or measured: a bad value exits 2 naming the option and
// the range it must lie in. Byte sizes are capped at 1 TiB (two to four
// buffers of each must fit on one GPU or in host memory, and sums of them
// must not overflow).
struct CalibrateNumbers {
  int64_t max_bytes = 0, pin_max_bytes = 0, copy_bytes = 0, quantize_bytes = 0;
  int32_t host_calls = 0;
};

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kTiB = int64_t{1} << 40;
constexpr int64_t kMinHostCalls = 256;  // the batches timed need this many calls
constexpr int64_t kMaxHostCalls = 10'000'000;

int64_t SizeInRange(const std::string& text, const char* flag, int64_t lo, const char* lo_name, const char* why = "") {
  const int64_t v = ParseBytes(text, "<cli>", flag);
  if (v > kTiB)
    throw InputError("<cli>", flag, fmt::format("{} bytes is more than 1 TiB (must be in [{}, 1 TiB]){}", v, lo_name, why));
  if (v < lo) throw InputError("<cli>", flag, fmt::format("must be in [{}, 1 TiB], got {}", lo_name, text));
  return v;
}

CalibrateNumbers CheckNumbers(const CalibrateCmdOptions& o) {
  CalibrateNumbers n;
  // Link sizes double (x4 with --quick) from 4 KiB: at least two of them.
  n.max_bytes = SizeInRange(o.max_bytes, "--max-bytes", o.quick ? 16384 : 8192, o.quick ? "16 KiB" : "8 KiB",
                            "; two buffers of it must fit on one GPU");
  n.pin_max_bytes = SizeInRange(o.pin_max_bytes, "--pin-max-bytes", kMiB, "1 MiB");
  n.copy_bytes = SizeInRange(o.copy_bytes, "--copy-bytes", 2 * kMiB, "2 MiB");
  if (n.copy_bytes % kMiB != 0)
    throw InputError("<cli>", "--copy-bytes", fmt::format("must be a whole number of MiB, got {}", o.copy_bytes));
  n.quantize_bytes = SizeInRange(o.quantize_bytes, "--quantize-bytes", kMiB, "1 MiB");
  int64_t calls = 0;
  const char* b = o.host_calls.data();
  const char* e = b + o.host_calls.size();
  const auto [end, ec] = std::from_chars(b, e, calls);
  if (ec != std::errc() || end != e || calls < kMinHostCalls || calls > kMaxHostCalls)
    throw InputError("<cli>", "--host-calls",
                     fmt::format("must be a whole number in [{}, {}], got '{}'", kMinHostCalls, kMaxHostCalls,
                                 o.host_calls));
  n.host_calls = static_cast<int32_t>(calls);
  return n;
}

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
  nlohmann::json j = {{"output", output}, {"name", d.name}, {"links", links}, {"memory", memory}, {"residuals", series}};
  if (fit.has_network_ops)
    j["network"] = {{"hosts", d.network.PairHosts()},
                    {"ranks", {d.network.from, d.network.to}},
                    {"op_gap_ns", fit.network_ops.op_gap_ns},
                    {"op_bytes", fit.network_ops.bytes}};
  if (fit.has_host) {
    if (nlohmann::json host = HostSectionJson(fit.host); !host.is_null()) j["host"] = host;
    j["copy_kernel_points"] = fit.host.copy_kernel.rates.size();
    j["quantize_kernel_points"] = fit.host.quantize_kernel.rates.size();
    j["launch_queue_depth"] = d.host.launch_queue_depth;
  }
  return j;
}

void PrintHost(const CalibrationData& d, const CalibrationFit& fit) {
  if (!fit.has_host) return;
  const HostCosts& h = fit.host.host;
  const nlohmann::json section = HostSectionJson(fit.host);
  if (!section.is_null()) {
    std::cout << "host costs per call (GPU 0):";
    for (const auto& [k, v] : section.items())
      if (k != "source" && k.ends_with("_ns")) std::cout << fmt::format(" {} {}", k, v.get<int64_t>());
    std::cout << "\n";
  }
  if (fit.host.set_device_ns > 0) std::cout << fmt::format("  cudaSetDevice {:.0f} ns per call\n", fit.host.set_device_ns);
  if (d.host.launch_queue_depth >= 0)
    std::cout << fmt::format("  launch queue: {}\n", d.host.launch_queue_depth > 0
                                                         ? fmt::format("{} launches before a launch blocked",
                                                                       d.host.launch_queue_depth)
                                                         : fmt::format("no launch blocked within {}",
                                                                       d.host.launch_queue_limit));
  if (h.pin_bytes_per_s > 0) std::cout << fmt::format("  pinning (cudaHostAlloc) {:.2f} GB/s\n", h.pin_bytes_per_s / 1e9);
  if (h.map_bytes_per_s > 0) std::cout << fmt::format("  mapping (fresh pool) {:.2f} GB/s\n", h.map_bytes_per_s / 1e9);
  const CopyKernelProfile& c = fit.host.copy_kernel;
  if (!c.Empty()) {
    std::cout << "copy kernel (GB/s copied), runs of 64 B / 4 KiB / 64 KiB / whole copy:\n";
    for (double share : {0.125, 0.25, 0.5, 1.0})
      std::cout << fmt::format("  share {:<5} {:7.0f} {:7.0f} {:7.0f} {:7.0f}\n", share, c.Rate(64, share) / 1e9,
                               c.Rate(4096, share) / 1e9, c.Rate(65536, share) / 1e9,
                               c.Rate(int64_t{1} << 40, share) / 1e9);
  }
  for (const QuantizeRatePoint& p : fit.host.quantize_kernel.rates)
    std::cout << fmt::format("quantize kernel: {} MiB of bf16 per launch at {:.0f} GB/s of input\n",
                             p.input_bytes >> 20, p.bytes_per_s / 1e9);
}

void PrintHuman(const std::string& output, const CalibrationData& d, const CalibrationFit& fit) {
  std::cout << fmt::format("calibration profile written to {}\n{}\n", output, d.source);
  PrintHost(d, fit);
  if (fit.links.empty()) return;
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
  if (fit.has_network_ops)
    std::cout << fmt::format("network per-op: {:.2f} us per further send in a group of {} sends (ranks {} and {}, "
                             "line through {} group sizes, max error {:.1f} %)\n",
                             static_cast<double>(fit.network_ops.op_gap_ns) * 1e-3, FormatBytes(fit.network_ops.bytes),
                             d.network.from, d.network.to, fit.network_ops.points.size(),
                             fit.network_ops.line.max_abs_relative_error * 100);
  if (fit.has_network_ops) {
    const auto net = std::find_if(fit.links.begin(), fit.links.end(), [](const auto& c) { return c.link == "network"; });
    if (net != fit.links.end() && fit.network_ops.op_gap_ns < net->profile.latency_ns)
      std::cout << fmt::format("  note: the simulator runs one GPU pair's transfers one at a time, each paying the "
                               "network latency ({:.1f} us): grouped small sends to one peer are predicted slower "
                               "than measured here (calib/README.md)\n",
                               static_cast<double>(net->profile.latency_ns) * 1e-3);
  }
  if (fit.has_cuda_context)
    std::cout << fmt::format("memory: CUDA context {} per GPU\n", FormatBytes(fit.overheads.cuda_context_bytes));
  if (fit.has_nccl_per_peer)
    std::cout << fmt::format("memory: NCCL {} per connected peer (communicator {}, connections {} per peer)\n",
                             FormatBytes(fit.overheads.nccl_bytes_per_peer), FormatBytes(fit.nccl_init_bytes),
                             FormatBytes(fit.nccl_connect_bytes_per_peer));
}

CalibrationData ReadMeasurements(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path, "", "cannot open the profile to refit");
  const std::string text = ReadInputFile(path, "profile to refit");
  nlohmann::json j;
  try {
    j = ParseJsonInput(text, path);  // nesting capped, duplicate keys refused
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "", fmt::format("not valid JSON: {}", e.what()));
  }
  return CalibrationDataFromJson(j, path);
}

// Measures (or reads back with --refit); exits 2 where nothing can be measured.
// The launcher this process runs under, checked for --network before any GPU
// is touched: exits 2 without a launcher or with one rank.
LauncherEnv NetworkLauncher(const CalibrateCmdOptions& o) {
  const LauncherEnv env = ReadLauncherEnv();
  if (!env.Found())
    throw InputError("<environment>", "--network",
                     "not started by a launcher (no OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK or SLURM_PROCID): run "
                     "one process per GPU on two nodes or more, e.g. `mpirun -np 2 --map-by node reshard calibrate "
                     "--network --rendezvous /shared/dir -o net.json`");
  if (env.size < 2)
    throw InputError("<environment>", "--network",
                     fmt::format("{} started one rank: the network is measured between two ranks on different "
                                 "nodes; start at least two (one per node)",
                                 env.launcher));
  if (o.rendezvous.empty())
    throw InputError("<cli>", "--rendezvous",
                     "--network needs --rendezvous DIR, a directory every node sees (a shared filesystem) where the "
                     "ranks meet");
  return env;
}

CalibrationData Measurements(const CalibrateCmdOptions& o, const CalibrateNumbers& n) {
  if (!o.refit.empty()) return ReadMeasurements(o.refit);
  if (o.network) {
    const LauncherEnv env = NetworkLauncher(o);
    RendezvousOptions ro;
    ro.dir = o.rendezvous;
    ro.timeout_s = o.rendezvous_timeout_s;
    // exits 2 when all ranks share a host
    RankPlacement placement = PlaceRanks(env, ro, o.host.empty() ? ThisHost() : o.host);
#ifdef RESHARD_HAVE_NCCL
    NetworkCalibrateOptions no;
    no.env = env;
    no.rendezvous = ro;
    no.placement = std::move(placement);
    no.max_bytes = n.max_bytes;
    no.quick = o.quick;
    no.progress = [](const std::string& line) { std::cerr << "calibrate: " << line << std::endl; };
    try {
      NetworkCalibration r = MeasureNetwork(no);
      if (!r.root) ExitWith(kExitOk);  // rank 0 writes the profile
      return std::move(r.data);
    } catch (const CalibrationUnavailable& e) {
      std::cerr << "error: " << e.what() << "\n";
      ExitWith(kExitInput);
    }
#else
    std::cerr << "error: `reshard calibrate --network` measures through CUDA and NCCL, and this reshard was built "
                 "without them (CMake found no CUDA toolkit with NCCL; see the configure log)\n";
    ExitWith(kExitInput);
#endif
  }
  const bool host = !o.no_host_costs || !o.no_copy_kernel || !o.no_quantize_kernel || !o.no_cold;
  if (o.no_links && !host)
    throw InputError("<cli>", "--no-links",
                     "with --no-host-costs, --no-copy-kernel, --no-quantize-kernel and --no-cold nothing is left to measure");
#ifdef RESHARD_HAVE_NCCL
  auto progress = [](const std::string& line) { std::cerr << "calibrate: " << line << std::endl; };
  HostCalibrateOptions ho;
  ho.host = !o.no_host_costs;
  ho.copy_kernel = !o.no_copy_kernel;
  ho.quantize_kernel = !o.no_quantize_kernel;
  ho.cold = !o.no_cold;
  ho.quick = o.quick;
  ho.calls = n.host_calls;
  ho.pin_max_bytes = n.pin_max_bytes;
  ho.copy_bytes = n.copy_bytes;
  ho.quantize_max_bytes = n.quantize_bytes;
  ho.progress = progress;
  try {
    CalibrationData d;
    if (!o.no_links) {
      CalibrateOptions co;
      co.max_bytes = n.max_bytes;
      co.quick = o.quick;
      co.progress = progress;
      d = MeasureNccl(co);
    }
    if (host) {
      d.host = MeasureHost(ho);
      if (d.name.empty()) {
        const auto gpu = std::find_if(d.host.environment.begin(), d.host.environment.end(),
                                      [](const auto& kv) { return kv.first == "gpu_name"; });
        d.name = fmt::format("1x {}", gpu != d.host.environment.end() ? gpu->second : "GPU");
        d.source = d.host.source;
      }
    }
    return d;
  } catch (const CalibrationUnavailable& e) {
    std::cerr << "error: " << e.what() << "\n";
    ExitWith(kExitInput);
  }
#else
  (void)n;
  std::cerr << "error: `reshard calibrate` measures GPUs through CUDA and NCCL, and this reshard was built "
               "without them (CMake found no CUDA toolkit with NCCL; see the configure log); `--refit` re-fits "
               "an existing profile without GPUs\n";
  ExitWith(kExitInput);
#endif
}

// The profile to merge into (--merge), read before anything is measured.
nlohmann::json ReadBaseProfile(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw InputError(path, "", "cannot open the profile to merge into");
  const std::string text = ReadInputFile(path, "profile to merge into");
  try {
    return ParseJsonInput(text, path);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "", fmt::format("not valid JSON: {}", e.what()));
  }
}

void Run(const CalibrateCmdOptions& o) {
  const CalibrateNumbers numbers = CheckNumbers(o);
  if (o.network && !o.refit.empty())
    throw InputError("<cli>", "--network", "measures; --refit fits kept measurements again: give one of them");
  if (!(o.rendezvous_timeout_s > 0 && o.rendezvous_timeout_s <= 86400))
    throw InputError("<cli>", "--rendezvous-timeout", fmt::format("must be in (0, 86400] seconds, got {}", o.rendezvous_timeout_s));
  // Under a launcher only rank 0 writes: the other ranks' nodes need not see -o's directory.
  const bool writes = !o.network || ReadLauncherEnv().rank <= 0;
  if (writes) {
    const std::filesystem::path out(o.output);
    std::error_code ec;
    if (out.has_parent_path() && !std::filesystem::is_directory(out.parent_path(), ec))
      throw InputError("<cli>", "-o", fmt::format("directory '{}' does not exist", out.parent_path().string()));
    CheckOutputFile(o.output, "<cli>", "-o", {o.refit, o.merge});
  }
  const nlohmann::json base = writes && !o.merge.empty() ? ReadBaseProfile(o.merge) : nlohmann::json();
  const CalibrationData data = Measurements(o, numbers);
  const FitOptions fo;
  const CalibrationFit fit = FitCalibration(data, fo);
  nlohmann::json profile = CalibrationProfileJson(data, fit, fo);
  if (!o.merge.empty()) profile = MergeProfileJson(base, profile, o.merge);
  // Never write a profile reshard would refuse to read: measurements no link
  // could produce (a hand-edited --refit file) fit out-of-range links.
  try {
    Cluster check = ClusterPreset("h200-x2");  // any valid cluster: the profile's links and memory go over it
    ApplyProfileJson(check, profile, o.output);
  } catch (const InputError& e) {
    throw InputError(o.refit.empty() ? "<measurements>" : o.refit, e.field(),
                     fmt::format("the profile fitted from these measurements would be refused when read ({}); "
                                 "nothing written",
                                 e.problem()));
  }
  WriteFileAtomically(o.output, profile.dump(2) + "\n");
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
      app.add_subcommand("calibrate", "measure this host's GPU links (NCCL, PCIe, device copies), host issue costs, "
                                      "copy kernel and cold-refit terms, and fit a profile");
  cmd->add_option("-o,--output", o->output, "calibration profile to write (JSON)")->required();
  cmd->add_option("--max-bytes", o->max_bytes, "largest link transfer measured, e.g. 256MiB (default 1GiB)");
  cmd->add_flag("--quick", o->quick, "x4 size steps and fewer repetitions (about a quarter of the time)");
  cmd->add_flag("--json", o->json, "machine-readable summary on stdout (every field: docs/json.md; the profile itself goes to -o)");
  cmd->add_option("--refit", o->refit, "fit the measurements kept in this earlier profile again; measure nothing");
  cmd->add_flag("--no-links", o->no_links, "skip the link sweeps (NCCL, PCIe, device copies)");
  cmd->add_flag("--no-host-costs", o->no_host_costs, "skip the executor's per-call host costs and NCCL groups");
  cmd->add_flag("--no-copy-kernel", o->no_copy_kernel, "skip the copy kernel's rates by run length and SM share");
  cmd->add_flag("--no-quantize-kernel", o->no_quantize_kernel, "skip the fp8 quantize kernel's rates by launch size");
  cmd->add_flag("--no-cold", o->no_cold, "skip pinning host memory and growing a fresh pool (the cold-refit terms)");
  cmd->add_option("--pin-max-bytes", o->pin_max_bytes, "largest size pinned / mapped for the cold terms (default 16GiB)");
  cmd->add_option("--copy-bytes", o->copy_bytes, "bytes per copy-kernel launch (default 256MiB)");
  cmd->add_option("--quantize-bytes", o->quantize_bytes, "largest bf16 input of a quantize launch (default 1GiB)");
  cmd->add_option("--host-calls", o->host_calls, "calls timed per host-cost series, 256 to 10000000 (default 20000)");
  cmd->add_flag("--network", o->network,
                "under mpirun / srun, one process per GPU on two nodes or more: measure the network between two "
                "ranks on different nodes (size curve, per-op cost); rank 0 writes -o");
  cmd->add_option("--rendezvous", o->rendezvous,
                  "with --network: a directory on a filesystem every node shares, where the ranks meet");
  cmd->add_option("--rendezvous-timeout", o->rendezvous_timeout_s,
                  "with --network: seconds to wait for every rank at the rendezvous (default 120)");
  cmd->add_option("--host", o->host,
                  "with --network: this rank's node name at the rendezvous (default: the hostname; for containers "
                  "whose hostnames repeat across nodes)");
  cmd->add_option("--merge", o->merge,
                  "put what is measured (or refitted) over this existing profile, e.g. the network over a host's "
                  "links and host costs");
  cmd->callback([o]() { Run(*o); });
}

}  // namespace reshard::cli
