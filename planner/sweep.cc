// Capacity-planning sweep (planner/sweep.h).
#include "planner/sweep.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <system_error>
#include <thread>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/layout.h"
#include "planner/buffer_layout.h"
#include "planner/emitter.h"
#include "planner/memory_ledger.h"
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
// session of the point's domain) or, when null, by MakePlan. `moves`, when
// given, gets the plan's HostMoves (empty when it does not fit).
SweepPoint Evaluate(const Scenario& base, PlanSession* session, SweepPoint p,
                    HostMoves* moves = nullptr) {
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
    if (moves && r.ok()) *moves = HostMovesOf(r.plan, OptimizerStatesOf(s, p));
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

HostMoves HostMovesOf(const Plan& p, int32_t plan_states) {
  HostMoves m;
  m.optimizer = OptimizerSlotBytes(p);
  if (plan_states > 1)
    for (std::vector<int64_t>& gpu : m.optimizer) {
      RESHARD_CHECK(gpu.size() % static_cast<size_t>(plan_states) == 0, "optimizer buffers are not whole slots");
      for (size_t k = 0; k < gpu.size() / plan_states; ++k)
        gpu[k] = std::accumulate(gpu.begin() + k * plan_states, gpu.begin() + (k + 1) * plan_states, int64_t{0});
      gpu.resize(gpu.size() / plan_states);
    }
  m.source.resize(m.optimizer.size());
  for (const PlanBuffer& b : p.buffers)
    if (b.role == BufferRole::kSourceWeights && b.preexisting && b.space == MemorySpace::kDevice)
      m.source[b.gpu].push_back(b.bytes);
  return m;
}

int32_t OptimizerStatesOf(const Scenario& s, const SweepPoint& p) {
  PlanPolicy policy;
  policy.offload_fraction = p.offload_fraction;
  policy.destination_per_layer = p.policy.destination_per_layer;
  policy.source_to_host = p.policy.source_to_host;
  return OptimizerStatesUnder(policy, s);
}

double HostMoveBoundSeconds(const Cluster& c, const HostMoves& moves, double fraction, bool source_to_host,
                            int32_t states) {
  if (!(c.pcie.bytes_per_s > 0)) return 0;
  int64_t most = 0;
  std::vector<int64_t> slots;
  for (size_t g = 0; g < moves.optimizer.size(); ++g) {
    slots.clear();
    for (int64_t slot : moves.optimizer[g])
      for (int32_t j = 0; j < states; ++j) slots.push_back(OptimizerStateBytes(slot, states, j));
    const int64_t optimizer = std::accumulate(slots.begin(), slots.end(), int64_t{0});  // the slots split it whole
    const size_t n = OffloadedOptimizerSlots(slots, optimizer, fraction);
    int64_t bytes = std::accumulate(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(n), int64_t{0});
    if (source_to_host) bytes = std::accumulate(moves.source[g].begin(), moves.source[g].end(), bytes);
    most = std::max(most, bytes);
  }
  return static_cast<double>(most) / c.pcie.bytes_per_s;
}

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

std::vector<int64_t> DefaultSegmentSizes(const Scenario& s) {
  std::vector<int64_t> out;
  std::string problem;
  const int64_t destination_bytes = DestinationBytes(s, s.path);
  for (int64_t x = int64_t{4} << 20; x <= int64_t{4} << 30; x *= 2) {
    problem = SegmentBytesProblem(s, x, destination_bytes);
    if (problem.empty()) out.push_back(x);
  }
  if (out.empty()) throw InputError(s.path, "--segment-bytes", problem);  // the largest size's problem
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
  if (g.segment_bytes.empty()) g.segment_bytes = DefaultSegmentSizes(s);
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
  // The cluster's own domain size is the scenario's, valid as loaded (a partial last domain plans with a warning).
  for (int32_t d : g.nvlink_domain_nodes)
    if (d != s.cluster.nvlink_domain_nodes && !ValidDomain(s.cluster, d))
      throw InputError("<cli>", "--domains",
                       fmt::format("nvlink_domain_nodes {} is not valid on {} nodes of cluster {}", d, s.cluster.nodes,
                                   s.cluster.name));
  if (!(options.margin >= 0 && options.margin < 1))
    throw InputError("<cli>", "--margin", fmt::format("margin {} is outside [0, 1)", options.margin));
  RESHARD_CHECK(options.prune_tolerance >= 0 && options.prune_tolerance < 1, "a pruning tolerance in [0, 1)");

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
  const int64_t threads =
      options.threads > 0 ? options.threads : std::max<int64_t>(1, std::thread::hardware_concurrency());
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
  std::mutex progress_mu;
  int64_t done = 0;
  auto note_done = [&]() {
    if (!options.progress) return;
    std::lock_guard<std::mutex> lock(progress_mu);
    options.progress(++done, total);
  };
  // Plans and simulates `todo` (lists of points of one (domain, size)) on
  // the pool; `moves[k]`, when given, gets todo[k]'s first plan's
  // HostMoves. A worker w takes first[w] first (when >= 0: the group whose size
  // its session last cut, so that a policy equal to the point planned there
  // is not simulated again, known_plan.h), then any group not taken, and
  // notes in last[w] the last it planned; `after`, when given, is called
  // (worker, k) once the worker planned todo[k]. Which worker plans a group
  // changes only the time.
  std::vector<int64_t> last(static_cast<size_t>(threads), -1);
  auto run_groups = [&](const std::vector<std::vector<size_t>>& todo,
                        std::vector<HostMoves>* moves, const std::vector<int64_t>& first,
                        const std::function<void(size_t, int64_t)>& after) {
    const int64_t num_groups = static_cast<int64_t>(todo.size());
    const int64_t pool_size = std::min(threads, std::max<int64_t>(1, num_groups));
    std::atomic<int64_t> next{0};
    std::vector<std::atomic<bool>> taken(todo.size());
    auto work = [&](size_t worker) {
      auto plan_group = [&](int64_t k) {
        if (taken[k].exchange(true)) return;
        for (size_t i : todo[k]) {
          res.points[i] = Evaluate(s, session_of(worker, res.points[i].nvlink_domain_nodes), res.points[i],
                                   moves && i == todo[k].front() ? &(*moves)[k] : nullptr);
          note_done();
        }
        last[worker] = k;
        if (after) after(worker, k);
      };
      if (worker < first.size() && first[worker] >= 0) plan_group(first[worker]);
      for (int64_t k; (k = next.fetch_add(1)) < num_groups;) plan_group(k);
    };
    if (pool_size == 1) {
      work(0);
      return;
    }
    // A worker's exception (an internal error) stops the others taking new
    // groups and is thrown here once all have joined, as on one thread.
    std::exception_ptr failure;
    std::mutex failure_mu;
    auto guarded = [&](size_t worker) {
      try {
        work(worker);
      } catch (...) {
        next = num_groups;
        std::lock_guard<std::mutex> lock(failure_mu);
        if (!failure) failure = std::current_exception();
      }
    };
    // This thread is worker 0: its allocations come from the main heap,
    // which keeps freed blocks (mallopt in `reshard sweep`), where another
    // thread's blocks over 64 MiB are mapped and unmapped for every plan.
    std::vector<std::thread> pool;
    try {
      for (int64_t t = 1; t < pool_size; ++t) pool.emplace_back(guarded, static_cast<size_t>(t));
    } catch (const std::system_error&) {
      // No more threads (ulimit, memory for stacks): the ones started and
      // this one take every group from the shared index.
    }
    guarded(0);
    for (std::thread& t : pool) t.join();
    if (failure) std::rethrow_exception(failure);
  };

  if (options.exhaustive) {
    run_groups(groups, nullptr, {}, nullptr);
  } else {
    // Pruning (see sweep.h). The base point of each group: least offload,
    // then fewest memory savers, then grid order.
    auto savers = [](const SweepPoint& p) {
      return int{p.policy.destination_per_layer} + int{p.policy.source_to_host};
    };
    std::vector<std::vector<size_t>> bases(groups.size());
    for (size_t k = 0; k < groups.size(); ++k)
      bases[k] = {*std::min_element(groups[k].begin(), groups[k].end(), [&](size_t a, size_t b) {
        const SweepPoint &x = res.points[a], &y = res.points[b];
        return std::make_tuple(x.offload_fraction, savers(x), a) < std::make_tuple(y.offload_fraction, savers(y), b);
      })};
    std::vector<HostMoves> moves(groups.size());
    const double limit = (1.0 - options.margin) * static_cast<double>(res.capacity_bytes);
    auto within_margin = [&](const SweepPoint& p) {
      return p.fits && p.error.empty() && static_cast<double>(p.peak_bytes) <= limit;
    };
    auto estimate_of = [&](size_t k, const SweepPoint& p) {
      const SweepPoint& base = res.points[bases[k].front()];
      const double bound_s = HostMoveBoundSeconds(s.cluster, moves[k], p.offload_fraction, p.policy.source_to_host,
                                                  OptimizerStatesOf(s, p));
      return within_margin(base) ? std::max(bound_s, base.time_s * (1 - options.prune_tolerance)) : bound_s;
    };
    // A base point's twin (the same but destination_per_layer) is cheapest
    // right after it, on its session: mostly the same plan, whose prediction
    // is taken (known_plan.h) instead of simulated again, where any other
    // worker would cut and simulate it. So the worker plans it then if the
    // bar so far lets it through (the bar only falls, so the final one lets
    // through no more); where the final bar does not, the result is dropped:
    // the results are those of planning it with the others, only the time
    // differs (deepseek-v3: two twins 6.6 and 5.4 -> ~1.6 CPU-s each).
    std::vector<int64_t> twin(groups.size(), -1);
    for (size_t k = 0; k < groups.size(); ++k) {
      const SweepPoint& b = res.points[bases[k].front()];
      for (size_t i : groups[k]) {
        const SweepPoint& p = res.points[i];
        if (p.offload_fraction == b.offload_fraction && p.policy.source_to_host == b.policy.source_to_host &&
            p.policy.destination_per_layer != b.policy.destination_per_layer)
          twin[k] = static_cast<int64_t>(i);
      }
    }
    std::vector<char> twin_planned(groups.size(), 0);
    std::vector<SweepPoint> twin_unplanned(groups.size());
    std::mutex bar_mu;
    double bar_so_far = std::numeric_limits<double>::infinity();
    auto plan_twin = [&](size_t worker, int64_t k) {
      const SweepPoint& base = res.points[bases[k].front()];
      double bar_seen = 0;
      {
        std::lock_guard<std::mutex> lock(bar_mu);
        if (within_margin(base)) bar_so_far = std::min(bar_so_far, base.time_s);
        bar_seen = bar_so_far;
      }
      const int64_t t = twin[k];
      if (t < 0 || estimate_of(k, res.points[t]) > bar_seen) return;
      twin_unplanned[k] = res.points[t];
      res.points[t] = Evaluate(s, session_of(worker, res.points[t].nvlink_domain_nodes), res.points[t]);
      twin_planned[k] = 1;
      note_done();
    };
    run_groups(bases, &moves, {}, plan_twin);
    double bar = std::numeric_limits<double>::infinity();  // the fastest base point that fits within the margin
    for (const std::vector<size_t>& b : bases)
      if (within_margin(res.points[b.front()])) bar = std::min(bar, res.points[b.front()].time_s);
    // The points to simulate, in lists of one group's points that differ only
    // in destination_per_layer (which often changes nothing: the second
    // takes the first's prediction, known_plan.h, on the same session), so
    // that both threads have work to the end: 2.5 simulated policies per
    // group, three groups on two threads left one idle for a group's time.
    std::vector<std::vector<size_t>> rest;
    std::vector<int64_t> rest_of(groups.size(), -1), first(last.size(), -1);
    for (size_t k = 0; k < groups.size(); ++k) {
      std::map<std::pair<double, bool>, size_t> list_of;  // (offload, source_to_host) -> index into rest
      for (size_t i : groups[k]) {
        if (i == bases[k].front()) continue;
        SweepPoint& p = res.points[i];
        const double estimate_s = estimate_of(k, p);
        if (twin_planned[k] && static_cast<int64_t>(i) == twin[k]) {
          if (estimate_s > bar) p = twin_unplanned[k], p.simulated = false;  // counted done when planned
          p.estimate_s = estimate_s;
          continue;
        }
        p.estimate_s = estimate_s;
        if (p.estimate_s <= bar) {
          const auto [it, added] = list_of.try_emplace(std::make_pair(p.offload_fraction, p.policy.source_to_host),
                                                       rest.size());
          if (added) rest.emplace_back();
          if (rest_of[k] < 0) rest_of[k] = static_cast<int64_t>(it->second);
          rest[it->second].push_back(i);
        } else {
          p.simulated = false;
          note_done();
        }
      }
    }
    for (size_t w = 0; w < last.size(); ++w)
      if (last[w] >= 0) first[w] = rest_of[last[w]];
    run_groups(rest, nullptr, first, nullptr);
  }
  sessions.clear();
  for (size_t i = 0; i < res.points.size(); ++i)
    if (source_of[i] >= 0) res.points[i] = SamePlanAs(res.points[source_of[i]], source_of[i], res.points[i]);
  if (options.progress)
    while (done < total) options.progress(++done, total);

  const std::vector<bool> front = ParetoFront(res.points);
  for (size_t i = 0; i < res.points.size(); ++i) res.points[i].pareto = front[i];
  res.recommended = Recommend(res.points, res.capacity_bytes, res.margin, &res.why);
  const auto pruned = std::count_if(res.points.begin(), res.points.end(), [](const SweepPoint& p) { return !p.simulated; });
  if (pruned > 0)
    res.why += fmt::format("; {} more points were estimated slower and not simulated", pruned);
  return res;
}

void to_json(nlohmann::json& j, const SweepPoint& p) {
  const nlohmann::json null;
  j = nlohmann::json{{"segment_bytes", p.segment_bytes},
                     {"offload_fraction", p.offload_fraction},
                     {"memory_policy", p.policy.Name()},
                     {"nvlink_domain_nodes", p.nvlink_domain_nodes},
                     {"simulated", p.simulated},
                     {"estimate_s", p.estimate_s >= 0 ? nlohmann::json(p.estimate_s) : null},
                     {"fits", p.simulated ? nlohmann::json(p.fits) : null},
                     {"peak_bytes", p.simulated ? nlohmann::json(p.peak_bytes) : null},
                     {"peak_gpu", p.simulated ? nlohmann::json(p.peak_gpu) : null},
                     {"pareto", p.pareto},
                     {"same_plan_as", p.same_plan_as >= 0 ? nlohmann::json(p.same_plan_as) : null}};
  const bool timed = p.simulated && p.fits;
  j["time_s"] = timed ? nlohmann::json(p.time_s) : null;
  j["lower_bound_s"] = timed ? nlohmann::json(p.lower_bound_s) : null;
  j["plan_efficiency"] = timed ? nlohmann::json(p.plan_efficiency) : null;
  j["routing_bound_s"] = timed ? nlohmann::json(p.routing_bound_s) : null;
  if (p.simulated && !p.fits) j["missing_bytes"] = p.missing_bytes;
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
