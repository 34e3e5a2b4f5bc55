// Capacity-planning sweep (planner/sweep.h).
#include "planner/sweep.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/layout.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/transfer_set.h"

namespace reshard {

std::string MemoryPolicy::Name() const {
  std::string s = destination_per_layer ? "dest-per-layer" : "dest-all-at-once";
  if (source_to_host) s += "+source-to-host";
  return s;
}

namespace {

bool ValidDomain(const Cluster& c, int32_t d) {
  if (d < 1 || d > c.nodes) return false;
  Cluster t = c;
  t.nvlink_domain_nodes = d;
  try {
    ValidateCluster(t, "<sweep>");
  } catch (const InputError&) {
    return false;
  }
  return true;
}

// One grid point, planned with its choices forced: by `session` (a plan
// session of the point's domain) or, when null, by MakePlan.
SweepPoint Evaluate(const Scenario& base, PlanSession* session, SweepPoint p) {
  Scenario s = base;
  s.cluster.nvlink_domain_nodes = p.nvlink_domain_nodes;
  PlannerOptions o;
  o.segment_bytes = p.segment_bytes;
  o.offload_fraction = p.offload_fraction;
  o.destination_per_layer = p.policy.destination_per_layer;
  o.source_to_host = p.policy.source_to_host;
  // Small plans still simulate the in-place thresholds (plan.direct_min_bytes
  // auto) and keep the fastest, as `reshard plan` does; large ones take the default.
  try {
    const PlanResult r = session ? session->Plan(o) : MakePlan(s, o);
    const std::vector<int64_t>& peaks = r.ok() ? r.plan.summary.predicted_peak_bytes : r.stats.planned_peak_bytes;
    if (!peaks.empty()) {
      const auto it = std::max_element(peaks.begin(), peaks.end());  // first GPU on ties
      p.peak_bytes = *it;
      p.peak_gpu = static_cast<int32_t>(it - peaks.begin());
    }
    if (!r.ok()) {
      p.fits = false;
      p.missing_bytes = r.missing_bytes;
      if (r.gpu >= 0) p.peak_gpu = r.gpu;
      return p;
    }
    const int64_t cap = s.cluster.gpu_memory_bytes - s.memory.reserve_bytes;  // the reserve is never planned into
    p.fits = p.peak_bytes <= cap;  // the planner bounds the peak; the simulator checks it
    p.missing_bytes = p.fits ? 0 : p.peak_bytes - cap;
    p.time_s = r.plan.summary.predicted_time_s;
    p.lower_bound_s = r.plan.summary.lower_bound_s;
    p.plan_efficiency = PlanEfficiency(p.lower_bound_s, p.time_s);
    p.routing_bound_s = r.plan.summary.routing_bound_s;
  } catch (const InputError& e) {
    p.fits = false;
    p.error = e.what();
  }
  return p;
}

// The copy of point `from`'s results for `to`, which plans the same.
SweepPoint SamePlanAs(const SweepPoint& from, size_t from_index, SweepPoint to) {
  SweepPoint p = from;
  p.segment_bytes = to.segment_bytes;
  p.same_plan_as = static_cast<int64_t>(from_index);
  return p;
}

}  // namespace

std::vector<int32_t> DefaultDomainSizes(const Cluster& c) {
  const int32_t v = c.nvlink_domain_nodes;
  if (c.nodes <= 1) return {v};
  std::vector<int32_t> out;
  for (int32_t d = 1; d <= c.nodes; ++d) {
    const bool divisor = v % d == 0;
    const bool multiple = d % v == 0 && c.nodes % d == 0;
    if ((d == v || divisor || multiple) && ValidDomain(c, d)) out.push_back(d);
  }
  if (std::find(out.begin(), out.end(), v) == out.end()) out.insert(out.begin(), v);  // always the cluster's own
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<double> DefaultOffloadFractions(const Scenario& s) {
  const OptimizerConfig& o = s.memory.optimizer;
  if (o.bytes_per_param <= 0 || o.on_host >= 1 || o.offload == OffloadMode::kNone) return {0};
  if (o.offload == OffloadMode::kFraction) return o.fraction > 0 ? std::vector<double>{0, o.fraction} : std::vector<double>{0};
  return {0, 0.25, 0.5, 1};
}

std::vector<bool> ParetoFront(const std::vector<SweepPoint>& points) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < points.size(); ++i)
    if (points[i].fits) idx.push_back(i);
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    if (points[a].time_s != points[b].time_s) return points[a].time_s < points[b].time_s;
    if (points[a].peak_bytes != points[b].peak_bytes) return points[a].peak_bytes < points[b].peak_bytes;
    return a < b;
  });
  std::vector<bool> front(points.size(), false);
  // A point is dominated iff an earlier group (smaller (time, peak)) has a peak <= its peak;
  // of a group of equal points only the first in grid order is listed.
  int64_t best_peak = std::numeric_limits<int64_t>::max();
  for (size_t k = 0; k < idx.size();) {
    size_t e = k;
    while (e < idx.size() && points[idx[e]].time_s == points[idx[k]].time_s &&
           points[idx[e]].peak_bytes == points[idx[k]].peak_bytes)
      ++e;
    const int64_t peak = points[idx[k]].peak_bytes;
    if (peak < best_peak) front[idx[k]] = true;
    best_peak = std::min(best_peak, peak);
    k = e;
  }
  return front;
}

std::optional<size_t> Recommend(const std::vector<SweepPoint>& points, int64_t capacity_bytes, double margin,
                                std::string* why) {
  const double limit = (1.0 - margin) * static_cast<double>(capacity_bytes);
  std::optional<size_t> best;
  size_t fitting = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const SweepPoint& p = points[i];
    if (!p.fits) continue;
    ++fitting;
    if (static_cast<double>(p.peak_bytes) > limit) continue;
    if (!best || p.time_s < points[*best].time_s ||
        (p.time_s == points[*best].time_s && p.peak_bytes < points[*best].peak_bytes))
      best = i;
  }
  if (why) {
    if (best) {
      const SweepPoint& p = points[*best];
      *why = fmt::format(
          "the fastest of the {} points that fit whose peak ({}, {:.1f}% of capacity) leaves the {:.0f}% safety margin",
          fitting,
          FormatBytes(p.peak_bytes), 100.0 * static_cast<double>(p.peak_bytes) / static_cast<double>(capacity_bytes),
          margin * 100);
    } else if (fitting > 0) {
      *why = fmt::format("none: {} points fit, but none leaves the {:.0f}% safety margin of {}", fitting, margin * 100,
                         FormatBytes(capacity_bytes));
    } else {
      *why = "none: no point fits in GPU memory";
    }
  }
  return best;
}

SweepResult Sweep(const Scenario& s, const SweepGrid& grid, const SweepOptions& options) {
  SweepGrid g = grid;
  if (g.segment_bytes.empty())
    for (int64_t x = int64_t{4} << 20; x <= int64_t{4} << 30; x *= 2) g.segment_bytes.push_back(x);
  if (g.offload_fractions.empty()) g.offload_fractions = DefaultOffloadFractions(s);
  if (g.policies.empty()) g.policies = {{false, false}, {true, false}, {false, true}, {true, true}};
  if (g.nvlink_domain_nodes.empty()) g.nvlink_domain_nodes = {s.cluster.nvlink_domain_nodes};
  for (int64_t b : g.segment_bytes)
    if (b <= 0) throw InputError("<cli>", "--segment-bytes", fmt::format("segment size {} is not positive", b));
  for (double f : g.offload_fractions)
    if (!(f >= 0 && f <= 1))
      throw InputError("<cli>", "--offload", fmt::format("offload fraction {} is outside [0, 1]", f));
  {
    // Too large to plan is the same answer at every grid point: say it once (exit 2).
    const Layout src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
    const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
    CheckPlanFragments(dst, BuildTransferSet(s.model, src, dst), s.path);
  }
  for (int32_t d : g.nvlink_domain_nodes)
    if (!ValidDomain(s.cluster, d))
      throw InputError("<cli>", "--domains",
                       fmt::format("nvlink_domain_nodes {} is not valid on {} nodes of cluster {}", d, s.cluster.nodes,
                                   s.cluster.name));
  if (!(options.margin >= 0 && options.margin < 1))
    throw InputError("<cli>", "--margin", fmt::format("margin {} is outside [0, 1)", options.margin));

  const size_t points = g.nvlink_domain_nodes.size() * g.segment_bytes.size() * g.offload_fractions.size() *
                        g.policies.size();  // each list is at most a few thousand values (flag length), no overflow
  if (points > static_cast<size_t>(kMaxSweepPoints))
    throw InputError("<cli>",
                     g.offload_fractions.size() > g.segment_bytes.size() ? "--offload"
                     : g.nvlink_domain_nodes.size() > g.segment_bytes.size() ? "--domains"
                                                                               : "--segment-bytes",
                     fmt::format("{} domain sizes x {} segment sizes x {} offload fractions x {} memory policies = {} "
                                 "points, more than the {} a sweep plans; give fewer values",
                                 g.nvlink_domain_nodes.size(), g.segment_bytes.size(), g.offload_fractions.size(),
                                 g.policies.size(), points, kMaxSweepPoints));

  SweepResult res;
  res.scenario = s.name;
  res.capacity_bytes = s.cluster.gpu_memory_bytes - s.memory.reserve_bytes;
  res.margin = options.margin;
  for (int32_t d : g.nvlink_domain_nodes)
    for (int64_t b : g.segment_bytes)
      for (double f : g.offload_fractions)
        for (const MemoryPolicy& pol : g.policies) {
          SweepPoint p;
          p.segment_bytes = b;
          p.offload_fraction = f;
          p.policy = pol;
          p.nvlink_domain_nodes = d;
          res.points.push_back(p);
        }

  // Work queue: an atomic index over groups of points of one (domain,
  // segment size), each written to its own slot. A worker plans through one
  // plan session per domain (threads.size() x domains sessions at most), so
  // a group's policies share the problem and its schedules.
  int64_t threads = options.threads > 0 ? options.threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
  std::vector<std::map<int32_t, std::unique_ptr<PlanSession>>> sessions(static_cast<size_t>(threads));
  auto session_of = [&](size_t worker, int32_t domain) -> PlanSession* {
    if (!options.share_problem) return nullptr;
    std::unique_ptr<PlanSession>& x = sessions[worker][domain];
    if (!x) {
      Scenario sd = s;
      sd.cluster.nvlink_domain_nodes = domain;
      x = std::make_unique<PlanSession>(sd);
    }
    return x.get();
  };

  // Points whose segment size plans as a smaller one's: copied after the others.
  std::vector<int64_t> source_of(res.points.size(), -1);
  if (options.reuse_equal_plans) {
    for (int32_t d : g.nvlink_domain_nodes) {
      int64_t largest = -1;
      try {
        if (PlanSession* x = session_of(0, d)) {
          largest = x->LargestRemotePairBytes();
        } else {
          Scenario sd = s;
          sd.cluster.nvlink_domain_nodes = d;
          largest = PlanSession(sd).LargestRemotePairBytes();
        }
      } catch (const InputError&) {
        largest = -1;  // each point reports the planner's refusal
      }
      if (largest < 0) continue;
      // Each such point copies the first planned one of a size >= largest with the same other choices.
      for (size_t i = 0; i < res.points.size(); ++i) {
        const SweepPoint& p = res.points[i];
        if (p.nvlink_domain_nodes != d || p.segment_bytes < largest) continue;
        for (size_t j = 0; j < i; ++j) {
          const SweepPoint& q = res.points[j];
          if (q.nvlink_domain_nodes == d && q.segment_bytes >= largest && source_of[j] < 0 &&
              q.offload_fraction == p.offload_fraction && q.policy == p.policy) {
            source_of[i] = static_cast<int64_t>(j);
            break;
          }
        }
      }
    }
  }
  // Groups of points to plan: grid order keeps a (domain, size) contiguous.
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < res.points.size(); ++i) {
    if (source_of[i] >= 0) continue;
    const SweepPoint& p = res.points[i];
    if (groups.empty() || res.points[groups.back().front()].segment_bytes != p.segment_bytes ||
        res.points[groups.back().front()].nvlink_domain_nodes != p.nvlink_domain_nodes)
      groups.emplace_back();
    groups.back().push_back(i);
  }

  const int64_t total = static_cast<int64_t>(res.points.size());
  const int64_t num_groups = static_cast<int64_t>(groups.size());
  threads = std::min(threads, std::max<int64_t>(1, num_groups));
  std::atomic<int64_t> next{0};
  std::mutex progress_mu;
  int64_t done = 0;
  auto work = [&](size_t worker) {
    for (int64_t k; (k = next.fetch_add(1)) < num_groups;) {
      for (size_t i : groups[k]) {
        res.points[i] = Evaluate(s, session_of(worker, res.points[i].nvlink_domain_nodes), res.points[i]);
        if (options.progress) {
          std::lock_guard<std::mutex> lock(progress_mu);
          options.progress(++done, total);
        }
      }
    }
  };
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    try {
      for (int64_t t = 0; t < threads; ++t) pool.emplace_back(work, static_cast<size_t>(t));
    } catch (const std::system_error&) {
      // No more threads (ulimit, memory for stacks): the ones started take
      // every group from the shared index; with none, this thread does.
      if (pool.empty()) work(0);
    }
    for (std::thread& t : pool) t.join();
  }
  sessions.clear();
  for (size_t i = 0; i < res.points.size(); ++i)
    if (source_of[i] >= 0) res.points[i] = SamePlanAs(res.points[source_of[i]], source_of[i], res.points[i]);
  if (options.progress)
    while (done < total) options.progress(++done, total);

  const std::vector<bool> front = ParetoFront(res.points);
  for (size_t i = 0; i < res.points.size(); ++i) res.points[i].pareto = front[i];
  res.recommended = Recommend(res.points, res.capacity_bytes, res.margin, &res.why);
  return res;
}

void to_json(nlohmann::json& j, const SweepPoint& p) {
  j = nlohmann::json{{"segment_bytes", p.segment_bytes},
                     {"offload_fraction", p.offload_fraction},
                     {"memory_policy", p.policy.Name()},
                     {"nvlink_domain_nodes", p.nvlink_domain_nodes},
                     {"fits", p.fits},
                     {"peak_bytes", p.peak_bytes},
                     {"peak_gpu", p.peak_gpu},
                     {"pareto", p.pareto},
                     {"same_plan_as", p.same_plan_as >= 0 ? nlohmann::json(p.same_plan_as) : nlohmann::json(nullptr)}};
  if (p.fits) {
    j["time_s"] = p.time_s;
    j["lower_bound_s"] = p.lower_bound_s;
    j["plan_efficiency"] = p.plan_efficiency;
    j["routing_bound_s"] = p.routing_bound_s;
  } else {
    j["time_s"] = nullptr;
    j["lower_bound_s"] = nullptr;
    j["plan_efficiency"] = nullptr;
    j["routing_bound_s"] = nullptr;
    j["missing_bytes"] = p.missing_bytes;
  }
  if (!p.error.empty()) j["error"] = p.error;
}

void to_json(nlohmann::json& j, const SweepResult& r) {
  j = nlohmann::json{{"scenario", r.scenario},
                     {"capacity_bytes", r.capacity_bytes},
                     {"margin", r.margin},
                     {"points", r.points}};
  if (r.recommended) {
    nlohmann::json rec = r.points[*r.recommended];
    rec["index"] = *r.recommended;
    rec["why"] = r.why;
    j["recommended"] = rec;
  } else {
    j["recommended"] = nullptr;
    j["recommended_why"] = r.why;
  }
}

}  // namespace reshard
