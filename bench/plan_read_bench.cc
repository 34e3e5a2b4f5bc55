// plan_read_bench: how long ReadPlan takes on plan.json files (CPU seconds of
// this thread, peak RSS), and whether each was accepted or refused; with
// --write, also how long WritePlan takes to write each plan read (to a file
// in the temporary directory, removed after). One JSON line per file.
// Usage: plan_read_bench [--repeat N] [--write] FILE...
// A refused plan counts as a result (hostile inputs must be answered fast).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench/process_stats.h"
#include "model/error.h"
#include "plan/plan.h"

int main(int argc, char** argv) {
  int repeat = 1;
  bool digest = false, write = false;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (a == "--digest") digest = true;
    else if (a == "--write") write = true;
    else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: plan_read_bench [--repeat N] [--write] FILE...\n");
    return 2;
  }
  for (const std::string& f : files) {
    struct stat st {};
    const double file_bytes = stat(f.c_str(), &st) == 0 ? static_cast<double>(st.st_size) : 0.0;
    double best_cpu_s = 1e300;
    std::vector<double> cpu_s, write_cpu_s;
    const std::string out = (std::filesystem::temp_directory_path() / "plan_read_bench_write.json").string();
    std::string outcome;
    size_t ops = 0;
    size_t hash = 0;
    for (int k = 0; k < repeat; ++k) {
      reshard::bench::ResetPeakRss();
      const double t0 = reshard::bench::ThreadCpuSeconds();
      try {
        reshard::Plan p = reshard::ReadPlan(f);
        ops = p.ops.size();
        if (digest) hash = std::hash<std::string>{}(reshard::PlanToJson(p).dump());
        outcome = "read";
        if (write) {
          const double w0 = reshard::bench::ThreadCpuSeconds();
          reshard::WritePlan(p, out);
          write_cpu_s.push_back(reshard::bench::ThreadCpuSeconds() - w0);
          std::filesystem::remove(out);
        }
      } catch (const reshard::InputError& e) {
        outcome = std::string("refused: ") + e.what();
      }
      const double t = reshard::bench::ThreadCpuSeconds() - t0 - (write_cpu_s.size() > static_cast<size_t>(k) ? write_cpu_s[k] : 0.0);
      cpu_s.push_back(t);
      best_cpu_s = std::min(best_cpu_s, t);
    }
    nlohmann::json j;
    j["file"] = f;
    j["file_bytes"] = file_bytes;
    j["ops"] = ops;
    j["outcome"] = outcome;
    if (digest) j["digest"] = hash;
    j["cpu_s"] = cpu_s;
    j["best_cpu_s"] = best_cpu_s;
    j["cpu_ns_per_byte"] = file_bytes > 0 ? best_cpu_s * 1e9 / file_bytes : 0.0;
    if (!write_cpu_s.empty()) {
      j["write_cpu_s"] = write_cpu_s;
      j["write_best_cpu_s"] = *std::min_element(write_cpu_s.begin(), write_cpu_s.end());
    }
    j["peak_rss_bytes"] = reshard::bench::PeakRssBytes();
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  }
  return 0;
}
