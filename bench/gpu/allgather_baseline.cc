// allgather_baseline: the refit PyTorch RL stacks run, on real GPUs, measured the
// way reshard's executor is measured: the baseline reshard's executor is compared
// against.
//
//   allgather_baseline [--scenario NAME|PATH] [--bucket 64MiB|256MiB|1GiB|per-tensor]
//                      [--flat] [--out-of-place] [--offload none|all|FRACTION] [--no-memory]
//                      [--warmup N] [--runs N] [--out result.json] [--emulate] [--dry-run]
//
// The plan: allgather_plan.h; the GPU run and what it measures: allgather_run.h;
// the printed table and the JSON: allgather_report.h. Reported: refit time (the
// median of --runs after --warmup), the extra peak device memory beyond source +
// destination weights, and whether every element verified. The offload fraction
// comes from the scenario (allgather_plan.h; --offload overrides it); --no-memory
// runs weights and the refit's own buffers only, all allocated once.
//
// --flat sends the same bytes as one ncclSend/ncclRecv per GPU pair (DESIGN's
// ceiling); its time_s is the exchange alone, time_with_unpack_s adds the copies
// into the destination (staging -> weights) that make it verifiable.
// --emulate runs the plan in host memory instead (small models; no GPU needed);
// --dry-run prints the plan (memory included) only.
//
// Exit codes: 0 verified; 2 bad input; 3 does not fit (a device or pinned host
// allocation failed: the JSON has "fits": false and "does_not_fit" names the
// GPU, the allocation, its bytes and the phase); 4 ran but a destination element
// is wrong; 1 anything else (CUDA / NCCL errors name the call, file and line).
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/gpu/allgather_plan.h"
#include "bench/gpu/allgather_report.h"
#include "bench/gpu/allgather_run.h"
#include "model/error.h"
#include "model/scenario.h"

namespace reshard::baseline {
namespace {

constexpr int kDoesNotFitExit = 3;
constexpr int kVerifyExit = 4;

struct Options {
  std::string scenario = "llama3-8b-tp2-to-tp1x2";
  std::string bucket = "256MiB";
  bool flat = false;
  bool out_of_place = false;
  std::string offload;  // empty: the scenario's
  bool no_memory = false;
  int warmup = 2;
  int runs = 7;
  std::string out;
  bool emulate = false;
  bool dry_run = false;
};

Scenario LoadAny(const std::string& name) {
  std::error_code ec;
  if (std::filesystem::exists(name, ec)) return LoadScenario(name);
  return BuiltinScenario(name);
}

BaselineOptions ParseBaseline(const Options& o) {
  BaselineOptions b;
  if (o.flat) {
    b.transport = Transport::kFlat;
  } else if (o.bucket == "per-tensor" || o.bucket == "per_tensor" || o.bucket == "tensor") {
    b.transport = Transport::kPerTensor;
  } else {
    b.transport = Transport::kBucketed;
    b.bucket_bytes = ParseBytes(o.bucket, "<cli>", "bucket");
    if (b.bucket_bytes <= 0) throw InputError("<cli>", "bucket", "must be positive");
  }
  b.out_of_place = o.out_of_place;
  b.memory = !o.no_memory;
  if (!o.offload.empty()) {
    if (o.no_memory) throw InputError("<cli>", "offload", "needs the memory model; drop --no-memory");
    if (o.offload == "none") {
      b.offload_fraction = 0.0;
    } else if (o.offload == "all") {
      b.offload_fraction = 1.0;
    } else {
      size_t used = 0;
      double f = -1;
      try {
        f = std::stod(o.offload, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != o.offload.size() || !(f >= 0 && f <= 1))
        throw InputError("<cli>", "offload", "'" + o.offload + "': expected none, all or a fraction in [0, 1]");
      b.offload_fraction = f;
    }
  }
  return b;
}

int Main(int argc, char** argv) {
  Options o;
  CLI::App app{"PyTorch-style refit baseline: bucketed all-gather (or broadcast), or one flat send/recv, on GPUs"};
  app.add_option("--scenario", o.scenario, "built-in scenario name or scenario file")->capture_default_str();
  app.add_option("--bucket", o.bucket, "gathered bytes per bucket (64MiB, 256MiB, 1GiB, ...) or per-tensor")
      ->capture_default_str();
  app.add_flag("--flat", o.flat, "the same bytes as one ncclSend/ncclRecv per GPU pair (the ceiling)");
  app.add_flag("--out-of-place", o.out_of_place, "pack into a separate input buffer (torch.cat + all_gather_into_tensor)");
  app.add_option("--offload", o.offload,
                 "optimizer offload before the refit: none, all or a fraction (default: the scenario's; auto = none "
                 "when it fits, else all)");
  app.add_flag("--no-memory", o.no_memory,
               "weights and refit buffers only: no optimizer state, KV cache, reserve or offload (as before)");
  app.add_option("--warmup", o.warmup, "untimed runs first (>= 1)")->capture_default_str()->check(CLI::Range(1, 100));
  app.add_option("--runs", o.runs, "timed runs; the median is reported")->capture_default_str()->check(CLI::Range(1, 1000));
  app.add_option("--out", o.out, "write the result as JSON to this file");
  app.add_flag("--emulate", o.emulate, "run the plan in host memory (small models only; no GPU)");
  app.add_flag("--dry-run", o.dry_run, "print the plan and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  // Multicast over NVLink (NVLS) stays off on the lent machines.
  setenv("NCCL_NVLS_ENABLE", "0", 0);

  const Scenario s = LoadAny(o.scenario);
  const RefitPlan plan = PlanRefit(s, ParseBaseline(o));
  PrintPlan(plan, s);
  if (o.dry_run) return 0;
  if (o.emulate) {
    const int64_t bad = EmulateOnHost(plan);
    nlohmann::json j = PlanJson(plan);
    j["emulated"] = true;
    j["verified"] = bad == 0;
    j["mismatches"] = bad;
    WriteJson(o.out, j);
    fmt::print("emulated on host: {} mismatching elements of {} checked (memory is not emulated)\n", bad,
               [&] {
                 int64_t n = 0;
                 for (int32_t g = 0; g < plan.gpus; ++g) n += plan.CheckedElements(g);
                 return n;
               }());
    fmt::print("RESULT scenario={} mode={} time_ms=- refit_ms=- extra_gib=- verified={}\n", plan.scenario,
               ModeLabel(plan), bad == 0 ? "true" : "false");
    return bad == 0 ? 0 : kVerifyExit;
  }
  nlohmann::json j;
  try {
    j = ResultJson(plan, RunOnGpus(plan, o.warmup, o.runs));
  } catch (const DoesNotFit& e) {
    j = PlanJson(plan);
    j["fits"] = false;
    j["does_not_fit"] = {{"gpu", e.gpu},          {"allocation", e.allocation}, {"bytes", e.bytes},
                         {"phase", e.phase},      {"free_bytes", e.free_bytes}, {"total_bytes", e.total_bytes},
                         {"message", e.what()}};
    j["verified"] = false;
    WriteJson(o.out, j);
    fmt::print("DOES NOT FIT: {}\n", e.what());
    fmt::print("RESULT scenario={} mode={} time_ms=- refit_ms=- extra_gib=- offload_fraction={:.2f} fits=false "
               "verified=false\n",
               plan.scenario, ModeLabel(plan), plan.offload_fraction);
    return kDoesNotFitExit;
  }
  PrintResult(j);
  WriteJson(o.out, j);
  return j["verified"].get<bool>() ? 0 : kVerifyExit;
}

}  // namespace
}  // namespace reshard::baseline

int main(int argc, char** argv) {
  try {
    return reshard::baseline::Main(argc, argv);
  } catch (const reshard::InputError& e) {
    std::cerr << "error: " << e.file() << (e.field().empty() ? "" : ": " + e.field()) << ": " << e.problem() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
