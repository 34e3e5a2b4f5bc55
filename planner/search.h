// The search behind MakePlan (planner/planner.h): which segment size, in-place
// threshold and memory policy to plan with, chosen by predicting candidate
// plans. Also the predictions every planner's result carries (reshard's and
// the baselines'): the lower bound and the simulator's time and peak.
//
// This file's implementation (search.cc, search_predict.cc) is the only
// planner code that calls the simulator (sim/): the rest of planner/ builds
// plans without predicting them.
#pragma once

#include "plan/plan.h"
#include "planner/planner.h"

namespace reshard {

// The least time any plan of `plan`'s contents could take on its cluster
// (sim/topology_bound.h), in seconds.
double LowerBoundSeconds(const Plan& plan);
// The bound of `plan`'s own routing (sim/ports.h: max over ports of the bytes
// the plan puts on a port / its bandwidth), in seconds.
double RoutingBoundSeconds(const Plan& plan);

// Simulates `plan` (a warm refit, no op times kept) and writes the predicted
// time and per-GPU peak into its summary; stats.predicted_by = "simulator".
void PredictWithSimulator(Plan& plan, PlanStats& stats);

struct Problem;
class Routings;
struct KnownPlan;
namespace search_candidates {
class ScheduleCache;
}

// MakePlan's search on a problem already set up; `routes` and `cache` may
// hold earlier plans' work (PlanSession), and so may `known`: that changes
// nothing but time. plan_session.cc calls it (MakePlan, PlanSession::Plan).
//
// Candidates: segment sizes (given, or 4 MiB .. 1 GiB: powers of two, four per doubling for large plans of many
// fragments), segments per round (given, or 1, 2 and all: a round per phase), in-place thresholds (given, or 64 MiB
// then, for small plans, "never" and 0) and memory policies (planner/emitter.h), fastest first: no offload, then the
// cheap memory savers (training weights to host, destination per layer), then more optimizer offload. Each (size,
// threshold, per_round) is cut once (planner/segments.h) and emitted under policies in order until one fits.
//  * Small plans (at most simulate_max_fragments fragment pairs): the sizes are simulated at one segment per round,
//    largest first until kSmallSizeLosses in a row lose, and the fastest kept; the other thresholds are then tried at
//    that size only, then more segments per round (2, then twice as many while kept; then half that size at twice the
//    segments per round, doubled while kept), kept only if kPerRoundGain faster (they hold more staging); a round per
//    phase is tried at the largest size under every threshold. Thresholds giving the segments of one already tried
//    are skipped. Where rounds are kept, they are tried on two lanes (PlanPolicy::round_lanes), then at twice the
//    segments per round while kept, each kept only if kPerRoundGain faster (a second communicator's buffers), then
//    at the other thresholds, each kept where faster.
//    Large plans do not try them (they lost on every large row: bench/results/2026-12-06-cpu-round-lanes).
//  * Large plans: a round-model estimate from the pair byte totals ranks the (size, per_round) pairs without cutting
//    them (O(pairs) each); the best is planned (ties: fewer segments per round, then larger sizes); a round per phase
//    goes first only if its estimate is kPerRoundGain better than the best of the others; sizes over max_segments
//    compete only when none is under it; only if no policy fits are that size at one segment per round and then the
//    smallest size tried. The first plan that fits is kept and simulated, then where the estimate errs a few more
//    (a round per phase, one with relays in place where the relay phase is long, rounds at the largest size, rounds
//    of as many segments as fit, rounds of three where two won, rounds kept at the default threshold with every piece
//    staged, then, where that loses, with every contiguous piece in place, and where either won the next larger size
//    at its threshold, a memory-releasing policy's dest-per-layer twin, and last, a plan kept on sender relays on the
//    routing with every NIC levelled, where its port bound is kLevelledBoundGain lower): the fastest wins. Segment
//    counts jump between neighbouring sizes: the finer grid finds the sizes that cut evenly.
// Relays (Problem::AddRelays): where any box would reach several GPUs of one NVLink domain over the network, the whole
// search runs with and without relays and relays are kept only if predicted faster (simulated or estimated as above;
// the estimate adds the relay rounds as a second phase). Large plans search first the side whose first candidate
// estimates faster; the other side's candidates whose schedule estimate already loses to it are not emitted, and those
// of at most two segments per round whose port bound (PortBoundSeconds, from the pair totals) loses are not even cut.
// Sender-side relays (Problem::AddSendRelays) and receiver-side NIC relays (Problem::AddRecvRelays) are then added to
// the routing chosen and searched the same way, with the plan in hand to beat: kept only if predicted faster.
// A round per phase holds all of a GPU's staged segments at once: it is planned under the first policy only (never
// bought with a memory saver); where that does not fit, large plans try it at 64, 32, 16 MiB, then the next one, except
// the sizes below two that missed where the fall in memory between them says none can cover what is still missing
// (search_candidates.h SmallerSizesCannotFit).
// Memory pressure: once a policy does not fit, the next ones are emitted for their memory answer only
// (planner/emitter.h's kMemoryOnly) before the full plan, and one that only adds optimizer offload to a policy that did
// not fit is skipped when the exact prediction (PredictMissingBytes) says it misses bytes too.
// Nothing fits: the result names the GPU and the bytes missing under the policy that came closest. A plan that fits but
// cannot be issued (its groups would wait on each other: plan/issue_order.h) is never chosen; when only such plans fit,
// MakePlan throws InternalError.
//
// A simulation whose only use is to beat a time (a small plan's candidate against the plan in hand, a large plan's
// runner-up against the prediction in hand) gives up once its clock passes that time (SimulateWithin): the same
// choices, the losers not run to their end.
//
// Complexity: O(F) to set up the problem (planner/problem.h), O(pairs) per candidate size for the estimate, and per
// plan built O(F log F) to cut and emit it plus, for small plans, one simulation.
PlanResult PlanProblem(const Scenario& s, const PlannerOptions& options, Problem& prob, Routings& routes,
                       search_candidates::ScheduleCache& cache, KnownPlan* known = nullptr);

}  // namespace reshard
