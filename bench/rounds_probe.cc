// rounds_probe: one scenario planned at forced (segment size, segments per
// round) settings, each simulated, against the planner's own choice; shows
// what a round per phase ("all") gains and the staging it holds.
//
//   rounds_probe SCENARIO [--sizes 64MiB,1GiB] [--per-round 1,2,all] [--json FILE]
//                [--relays on|off] [--send-relays on|off] [--relay-waves K]
//                [--waves-by-segment on|off] [--phase-chunks K] [--early-relays] [--no-simulate] [--max-fragments N] [--replica-blocks N] [--write-plans PREFIX]
//
// SCENARIO: a built-in name or a .yaml file. Each row: predicted time
// (simulator, or with --no-simulate the planner's per-port estimate),
// rounds, the largest staging peak and device peak over the GPUs, and the
// memory policy. The row "auto" is MakePlan's choice. --relays /
// --send-relays force the routing (PlannerOptions::relays / send_relays)
// where the search would choose it; --relay-waves K forces a round per
// phase's relay waves (PlannerOptions::relay_waves: 1 none, 0 searched, the
// default), --waves-by-segment on|off how they cut; --phase-chunks K forces
// PlannerOptions::phase_chunks (1 none, 0 searched), --early-relays its
// PlannerOptions::early_relay_phase; --max-fragments N sets
// PlannerOptions::simulate_max_fragments (0: the large-plan search); --replica-blocks N sets
// PlannerOptions::replica_blocks (1: planned whole); --write-plans writes each row's plan to
// PREFIX.SIZE.PER_ROUND.json (for `reshard simulate --trace`). Progress goes
// to stderr.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/scenario.h"
#include "planner/planner.h"
#include "planner/segments.h"
#include "plan/plan.h"

namespace reshard {
namespace {

std::vector<std::string> Split(const std::string& v) {
  std::vector<std::string> out;
  for (size_t p = 0; p <= v.size();) {
    const size_t q = std::min(v.find(',', p), v.size());
    out.push_back(v.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

struct Flags {
  std::optional<bool> relays, send_relays;
  int32_t relay_waves = 0;
  std::optional<bool> waves_by_segment;
  int32_t phase_chunks = 0;
  bool early_relays = false;
  bool simulate = true;
  int64_t max_fragments = -1;  // PlannerOptions::simulate_max_fragments; -1: its default
  int32_t replica_blocks = 0;  // PlannerOptions::replica_blocks
  std::string write_prefix;
};

nlohmann::json Row(const Scenario& s, const std::string& size, const std::string& per_round, const Flags& f) {
  PlannerOptions po;
  po.relays = f.relays;
  po.send_relays = f.send_relays;
  po.relay_waves = f.relay_waves;
  po.relay_waves_by_segment = f.waves_by_segment;
  po.phase_chunks = f.phase_chunks;
  po.early_relay_phase = f.early_relays;
  po.simulate = f.simulate;
  if (f.max_fragments >= 0) po.simulate_max_fragments = f.max_fragments;
  po.replica_blocks = f.replica_blocks;
  if (size != "auto") po.segment_bytes = ParseBytes(size, "--sizes", "segment");
  if (per_round == "all") po.per_round = kPerRoundAll;
  else if (per_round != "auto") po.per_round = std::stoi(per_round);
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r = MakePlan(s, po);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  nlohmann::json j = {{"segment", size}, {"per_round", per_round}, {"fits", r.ok()}, {"wall_s", wall_s}};
  if (!r.ok()) return j;
  if (!f.write_prefix.empty()) {
    r.plan.scenario_fingerprint = ScenarioFingerprint(s);  // as `reshard plan` writes it: simulate --scenario takes it
    std::ofstream(fmt::format("{}.{}.{}.json", f.write_prefix, size, per_round)) << PlanToJson(r.plan).dump() << "\n";
  }
  int64_t staging = 0, peak = 0;
  for (const MemoryParts& m : r.stats.peak_parts) staging = std::max(staging, m.staging_bytes);
  for (int64_t p : r.plan.summary.predicted_peak_bytes) peak = std::max(peak, p);
  j.update({{"time_s", r.plan.summary.predicted_time_s},
            {"segment_bytes", r.plan.summary.segment_bytes},
            {"rounds", r.stats.rounds},
            {"segments_per_round", r.stats.per_round},
            {"segments", r.stats.segments},
            {"max_staging_at_peak_bytes", staging},
            {"max_peak_bytes", peak},
            {"memory_policy", r.plan.summary.memory_policy},
            {"relayed_bytes", r.stats.relayed_bytes},
            {"fragments", r.stats.fragments},
            {"ops", r.stats.ops}});
  return j;
}

}  // namespace
}  // namespace reshard

int main(int argc, char** argv) {
  using namespace reshard;
  std::string name, json_path;
  std::vector<std::string> sizes = {"auto"}, per_rounds = {"auto"};
  Flags flags;
  auto on_off = [](const std::string& v) -> std::optional<bool> {
    if (v == "on") return true;
    if (v == "off") return false;
    return std::nullopt;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--sizes" && i + 1 < argc) sizes = Split(argv[++i]);
    else if (a == "--per-round" && i + 1 < argc) per_rounds = Split(argv[++i]);
    else if (a == "--json" && i + 1 < argc) json_path = argv[++i];
    else if (a == "--relays" && i + 1 < argc && on_off(argv[i + 1])) flags.relays = on_off(argv[++i]);
    else if (a == "--send-relays" && i + 1 < argc && on_off(argv[i + 1])) flags.send_relays = on_off(argv[++i]);
    else if (a == "--relay-waves" && i + 1 < argc) flags.relay_waves = std::stoi(argv[++i]);
    else if (a == "--phase-chunks" && i + 1 < argc) flags.phase_chunks = std::stoi(argv[++i]);
    else if (a == "--early-relays") flags.early_relays = true;
    else if (a == "--waves-by-segment" && i + 1 < argc && on_off(argv[i + 1])) flags.waves_by_segment = on_off(argv[++i]);
    else if (a == "--no-simulate") flags.simulate = false;
    else if (a == "--max-fragments" && i + 1 < argc) flags.max_fragments = std::stoll(argv[++i]);
    else if (a == "--replica-blocks" && i + 1 < argc) flags.replica_blocks = std::stoi(argv[++i]);
    else if (a == "--write-plans" && i + 1 < argc) flags.write_prefix = argv[++i];
    else if (!a.empty() && a[0] != '-' && name.empty()) name = a;
    else {
      std::cerr << "usage: rounds_probe SCENARIO [--sizes 64MiB,auto] [--per-round 1,2,all,auto] [--json FILE] "
                   "[--relays on|off] [--send-relays on|off] [--relay-waves K] [--waves-by-segment on|off] [--phase-chunks K] [--early-relays] "
                   "[--no-simulate] [--max-fragments N] [--replica-blocks N] [--write-plans PREFIX]\n";
      return 2;
    }
  }
  try {
    const bool file = name.size() > 5 && name.compare(name.size() - 5, 5, ".yaml") == 0;
    const Scenario s = file ? LoadScenario(name) : BuiltinScenario(name);
    nlohmann::json rows = nlohmann::json::array();
    fmt::print("{:<8} {:<5} {:>10} {:>9} {:>7} {:>6} {:>12} {:>10}  {}\n", "segment", "per", "predicted", "seg size",
               "rounds", "Δ/rnd", "staging GiB", "peak GiB", "policy");
    for (const std::string& size : sizes)
      for (const std::string& pr : per_rounds) {
        std::cerr << fmt::format("{} {} ...\n", size, pr);
        nlohmann::json j = Row(s, size, pr, flags);
        if (!j["fits"].get<bool>()) {
          fmt::print("{:<8} {:<5} does not fit\n", size, pr);
        } else {
          fmt::print("{:<8} {:<5} {:>7.2f} ms {:>9} {:>7} {:>6} {:>12.2f} {:>10.2f}  {}\n", size, pr,
                     j["time_s"].get<double>() * 1e3, fmt::format("{:.1f} MiB", j["segment_bytes"].get<int64_t>() / 1048576.0),
                     j["rounds"].get<int64_t>(), j["segments_per_round"].get<int32_t>(),
                     j["max_staging_at_peak_bytes"].get<int64_t>() / 1073741824.0,
                     j["max_peak_bytes"].get<int64_t>() / 1073741824.0, j["memory_policy"].get<std::string>());
        }
        std::fflush(stdout);
        rows.push_back(std::move(j));
      }
    if (!json_path.empty()) std::ofstream(json_path) << nlohmann::json{{"scenario", s.name}, {"rows", rows}}.dump(2) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
