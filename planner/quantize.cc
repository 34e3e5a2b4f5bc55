// Quantizing at the destination (planner/quantize.h).
#include "planner/quantize.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "model/error.h"
#include "plan/issue_order.h"
#include "planner/quantize_parts.h"
#include "planner/quantize_source.h"
#include "planner/search.h"
#include "planner/segments.h"

namespace reshard {

namespace {

using namespace quant_parts;

// The values tensor of every tensor quantized here, indexed by plan tensor
// (-1: kept as it is, or already quantized at the source): values and scales
// appended to p.tensors for quantized weights that have none yet.
std::vector<int32_t> AddQuantTensors(const Scenario& s, Plan& p) {
  const QuantConfig& q = *s.quantization;
  const size_t n = s.model.tensors.size();
  RESHARD_CHECK(p.tensors.size() >= n, "a plan lists the model's tensors first");
  std::vector<bool> done(n, false);
  for (const PlanTensor& t : p.tensors)
    if (t.quant.role == QuantRole::kValues && t.quant.of >= 0 && static_cast<size_t>(t.quant.of) < n)
      done[t.quant.of] = true;
  std::vector<int32_t> values(p.tensors.size(), -1);
  for (size_t t = 0; t < n; ++t) {
    const TensorSpec& spec = s.model.tensors[t];
    if (done[t] || !q.Quantizes(spec.kind) || (spec.shape.ndim != 2 && spec.shape.ndim != 3)) continue;
    const QuantGrid g = GridOf(q, spec.shape);
    const int32_t v = static_cast<int32_t>(p.tensors.size());
    PlanTensor vt{spec.name, spec.shape, DType::kFP8E4M3, {}};
    vt.quant = {QuantRole::kValues, static_cast<int32_t>(t), v + 1, g.block_rows, g.block_cols, q.scale};
    PlanTensor st{ScaleName(spec.name, q.scheme), g.ScaleShape(spec.shape.ndim), ScaleDType(q.scale), {}};
    st.quant = {QuantRole::kScales, v, -1, 0, 0, ScaleFormat::kFP32};
    p.tensors.push_back(std::move(vt));
    p.tensors.push_back(std::move(st));
    values[t] = v;
  }
  values.resize(p.tensors.size(), -1);
  return values;
}

}  // namespace

void QuantizeAtDestination(const Scenario& s, Plan& p) {
  RESHARD_CHECK(s.quantization.has_value(), "no quantization to plan");
  const std::vector<int32_t> values = AddQuantTensors(s, p);
  const int32_t n = static_cast<int32_t>(p.ops.size());
  const size_t nbuf = p.buffers.size();

  std::vector<std::vector<int32_t>> pieces(nbuf);
  for (size_t i = 0; i < p.destinations.size(); ++i) pieces[p.destinations[i].buffer].push_back(static_cast<int32_t>(i));
  std::vector<std::vector<int32_t>> writers(nbuf);
  std::vector<int32_t> alloc_of(nbuf, -1);
  std::vector<int32_t> group_last;  // per NCCL group: its last op
  for (const Op& op : p.ops) {
    if (op.group >= 0) {
      if (static_cast<size_t>(op.group) >= group_last.size()) group_last.resize(static_cast<size_t>(op.group) + 1, -1);
      group_last[op.group] = std::max(group_last[op.group], op.id);
    }
    if (op.kind == OpKind::kAlloc) alloc_of[op.buffer] = op.id;
    if (op.kind == OpKind::kRecv) writers[op.region.buffer].push_back(op.id);
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kReload)
      for (const CopyPair& c : op.copies) writers[c.dst.buffer].push_back(op.id);
  }

  Splice sp(static_cast<size_t>(n));
  std::vector<ContentPiece> destinations;
  destinations.reserve(p.destinations.size() * 2);
  std::vector<bool> moved(p.destinations.size(), false);
  auto add = [&](Op op) { return sp.Add(static_cast<size_t>(n), std::move(op)); };
  for (size_t b = 0; b < nbuf; ++b) {
    auto& list = pieces[b];
    if (std::none_of(list.begin(), list.end(), [&](int32_t i) { return values[p.destinations[i].tensor] >= 0; }))
      continue;
    const PlanBuffer old = p.buffers[b];
    RESHARD_CHECK(!old.preexisting && alloc_of[b] >= 0 && !writers[b].empty(),
                  "destination buffers are allocated and written by the plan");
    std::stable_sort(list.begin(), list.end(),
                     [&](int32_t a, int32_t c) { return p.destinations[a].offset_elems < p.destinations[c].offset_elems; });
    // Layout of the new buffer: bf16 pieces, then fp8 values, then scales.
    const int32_t nb = static_cast<int32_t>(p.buffers.size());
    int64_t at = 0;
    std::vector<CopyPair> copies;
    for (int32_t i : list) {
      const ContentPiece& c = p.destinations[i];
      if (values[c.tensor] >= 0) continue;
      const int64_t eb = DTypeBytes(p.tensors[c.tensor].dtype);
      at = AlignUp(at, kPieceAlignBytes);
      copies.push_back({PieceRegion(c, static_cast<int32_t>(b), eb), DenseRegion(c.box, nb, at, eb)});
      destinations.push_back({nb, c.tensor, c.box, at / eb, DenseStrides(c.box)});
      at += Volume(c.box) * eb;
    }
    std::vector<QuantizeTile> tiles;
    for (int32_t i : list) {
      const ContentPiece& c = p.destinations[i];
      const int32_t v = values[c.tensor];
      if (v < 0) continue;
      const PlanTensor& vt = p.tensors[v];
      const QuantGrid g = GridOf(vt.quant.block_rows, vt.quant.block_cols, vt.shape);
      CheckWholeBlocks(s, g, c.box, vt.name, vt.shape);
      QuantizeTile t;
      t.tensor = v;
      t.box = c.box;
      at = AlignUp(at, kPieceAlignBytes);
      t.input = PieceRegion(c, static_cast<int32_t>(b), 2);
      t.output = DenseRegion(c.box, nb, at, 1);
      destinations.push_back({nb, v, c.box, at, DenseStrides(c.box)});
      at += Volume(c.box);
      tiles.push_back(t);
    }
    for (QuantizeTile& t : tiles) {
      const PlanTensor& vt = p.tensors[t.tensor];
      const int64_t sb = DTypeBytes(p.tensors[vt.quant.scales].dtype);
      const Box box = ScaleBox(GridOf(vt.quant.block_rows, vt.quant.block_cols, vt.shape), t.box, vt.shape.ndim);
      at = AlignUp(at, kPieceAlignBytes);
      t.scales = DenseRegion(box, nb, at, sb);
      destinations.push_back({nb, vt.quant.scales, box, at / sb, DenseStrides(box)});
      at += Volume(box) * sb;
    }
    for (int32_t i : list) moved[i] = true;
    PlanBuffer fresh = old;
    fresh.bytes = at;
    fresh.name = old.name + " fp8";
    AppendBuffer(p, fresh);
    p.buffers[b].role = BufferRole::kStaging;
    p.buffers[b].name = old.name + " bf16";

    const std::vector<int32_t>& w = writers[b];
    int32_t last = *std::max_element(w.begin(), w.end());
    // A receive's group is issued at once: spliced after the receive, the ops below would sit on the compute stream
    // before the allocations the group's later receives wait for (a dependency cycle: llama3-8b TP1xPP8 -> vLLM
    // TP2xDP4 fp8 in rounds of two 1 GiB segments, where a round receives the end of one layer and the start of the
    // next); after the group's last op instead.
    if (p.ops[last].group >= 0) last = group_last[p.ops[last].group];
    // On the compute stream of the buffer's GPU: alloc the new buffer, copy
    // the bf16 pieces there, quantize the rest, free the assembly buffer.
    auto op_on = [&](OpKind kind, std::vector<int32_t> deps, std::string label) {
      Op op;
      op.kind = kind;
      op.gpu = old.gpu;
      op.stream = kStreamCompute;
      op.deps = std::move(deps);
      op.label = std::move(label);
      return op;
    };
    Op alloc = op_on(OpKind::kAlloc, {}, "fp8 " + old.name);
    alloc.buffer = nb;
    const int32_t a = add(std::move(alloc));
    std::vector<int32_t> done, deps = w;
    deps.push_back(a);
    if (!copies.empty()) {
      Op copy = op_on(OpKind::kCopy, deps, "bf16 pieces " + old.name);
      copy.copies = std::move(copies);
      done.push_back(add(std::move(copy)));
    }
    Op quant = op_on(OpKind::kQuantize, deps, "quantize " + old.name);
    quant.tiles = std::move(tiles);
    done.push_back(add(std::move(quant)));
    Op free = op_on(OpKind::kFree, done, "");
    free.buffer = static_cast<int32_t>(b);
    const int32_t f = add(std::move(free));
    for (int32_t k = a; k <= f; ++k) sp.after[last].push_back(k - n);
  }
  for (size_t i = 0; i < p.destinations.size(); ++i)
    if (!moved[i]) destinations.push_back(p.destinations[i]);
  std::stable_sort(destinations.begin(), destinations.end(),
                   [](const ContentPiece& a, const ContentPiece& b) { return a.buffer < b.buffer; });
  p.destinations = std::move(destinations);
  Apply(p, sp);
}

namespace {

// A rewritten plan's summary and prediction, again.
void Resummarize(PlanResult& res, const PlannerOptions& options, const std::string& policy) {
  Plan& plan = res.plan;
  PlanSummary& sum = plan.summary;
  sum.memory_policy += policy;
  sum.bytes_moved = CountBytesMoved(plan);
  sum.lower_bound_s = LowerBoundSeconds(plan);
  sum.routing_bound_s = RoutingBoundSeconds(plan);
  if (options.simulate) PredictWithSimulator(plan, res.stats);
  res.stats.ops = static_cast<int64_t>(plan.ops.size());
}

PlanResult PlanAtDestination(const Scenario& s, const PlannerOptions& options) {
  Scenario view = s;
  view.destination_dtype = s.dtype;
  view.quantization.reset();
  PlannerOptions o = options;
  o.merge_local_copies = false;  // its copies go through staging
  PlanResult res = MakePlan(view, o);
  if (!res.ok()) return res;
  QuantizeAtDestination(s, res.plan);
  Resummarize(res, options, "+quantize-at-destination");
  return res;
}

// nullopt where no weight of `wanted` (empty: any) can be quantized at its source.
std::optional<PlanResult> PlanAtSource(const Scenario& s, PlannerOptions options, const std::vector<bool>& wanted) {
  const std::optional<SourceQuantView> v = MakeSourceQuantView(s, wanted);
  if (!v) return std::nullopt;
  Feasibility floor = CheckStartFits(v->scenario, v->inputs->memory_at_start);
  if (floor.fits)
    floor = CheckRefitFloor(v->scenario, v->inputs->memory_at_start, DestinationFloorBytes(v->scenario, v->inputs->dst));
  if (!floor.fits) {
    PlanResult res;
    res.status = PlanStatus::kInfeasible;
    res.gpu = floor.gpu;
    res.missing_bytes = floor.missing_bytes;
    res.message = floor.message + " (quantizing at the source, its staging counted from the start)";
    return res;
  }
  options.inputs = v->inputs;
  options.merge_local_copies = false;  // its copies go through staging
  PlanResult res = MakePlan(v->scenario, options);
  if (!res.ok()) return res;
  FinishSourceQuantized(s, *v, res.plan);
  if (v->at_source < v->quantized) QuantizeAtDestination(s, res.plan);
  res.plan.name = s.name;
  Resummarize(res, options,
              v->at_source == v->quantized
                  ? std::string("+quantize-at-source")
                  : fmt::format("+quantize-at-source-{}-of-{}", v->at_source, v->quantized));
  return res;
}

// The planner options every quantized plan is made with; refuses training
// weights other than bf16.
PlannerOptions QuantizedOptions(const Scenario& s, const PlannerOptions& given) {
  // The quantize rewrites add ops the byte plan's issue check never saw; a
  // round per phase (planner/segments.h) can close a cycle through them
  // (quantize before a send, in one group with receives it waits for), so
  // quantized plans keep rounds of 1 and 2 unless asked (MakeQuantizedPlan
  // then tries the placement kept as a round per phase).
  PlannerOptions options = given;
  if (options.per_round == 0 && options.per_round_candidates.empty()) options.per_round_candidates = {1, 2};
  if (s.dtype != DType::kBF16)
    throw InputError(s.path, "destination.dtype",
                     fmt::format("quantizing to {} during the refit needs bf16 training weights, not {}",
                                 DTypeName(s.destination_dtype), DTypeName(s.dtype)));
  return options;
}

}  // namespace

PlanResult MakeQuantizedPlan(const Scenario& s, const PlannerOptions& given) {
  const PlannerOptions options = QuantizedOptions(s, given);
  std::optional<bool> forced = options.quantize_at_source;
  if (!forced && s.plan.quantize_at != PlanOptions::QuantizeAt::kAuto)
    forced = s.plan.quantize_at == PlanOptions::QuantizeAt::kSource;
  // One placement (mask of weights quantized at their source; empty: every one that can be).
  auto plan_at = [&](const PlannerOptions& o, bool at_source, const std::vector<bool>& mask) {
    std::optional<PlanResult> r = at_source ? PlanAtSource(s, o, mask) : std::nullopt;
    return r ? std::move(*r) : PlanAtDestination(s, o);
  };
  std::optional<PlanResult> best;
  std::vector<bool> best_mask;
  if (forced) {
    best = plan_at(options, *forced, {});
  } else {
    // Each placement planned and predicted; the fastest that fits kept, ties
    // to the earlier placement (the destination first).
    for (const QuantizePlacement& c : QuantizePlacements(s)) {
      std::optional<PlanResult> r = c.at_source_count == 0 ? std::optional<PlanResult>(PlanAtDestination(s, options))
                                                           : PlanAtSource(s, options, c.at_source);
      if (!r) continue;
      if (!best || (r->ok() && (!best->ok() || r->plan.summary.predicted_time_s < best->plan.summary.predicted_time_s)))
        best = std::move(r), best_mask = c.at_source_count == 0 ? std::vector<bool>{} : c.at_source;
    }
  }
  // The placement kept, planned again as a round per phase where no segments per round were asked: kept where it
  // fits, can be issued (QuantizedOptions) and is predicted faster (deepseek-v3 PP16xEP16 -> vLLM TP8xDP32 EP256 fp8
  // on 256+256 H100: rounds of 2 at 304.4 MiB 164.0 ms, a round per phase 153.3).
  if (!best->ok() || !options.simulate || given.per_round != 0 || !given.per_round_candidates.empty()) return std::move(*best);
  PlannerOptions all = options;
  all.per_round = kPerRoundAll;
  const bool at_source = forced ? *forced : !best_mask.empty();
  try {
    PlanResult r = plan_at(all, at_source, best_mask);
    if (r.ok() && r.stats.round_per_phase && r.plan.summary.predicted_time_s < best->plan.summary.predicted_time_s)
      return r;
  } catch (const PlanRefused&) {
  }
  return std::move(*best);
}

PlanResult PlanQuantizedAt(const Scenario& s, const PlannerOptions& given, const std::vector<bool>& at_source) {
  const PlannerOptions options = QuantizedOptions(s, given);
  if (std::find(at_source.begin(), at_source.end(), true) == at_source.end()) return PlanAtDestination(s, options);
  std::optional<PlanResult> r = PlanAtSource(s, options, at_source);
  return r ? std::move(*r) : PlanAtDestination(s, options);
}

QuantizedBytes DestinationQuantizedBytes(const Plan& p) {
  QuantizedBytes out;
  for (const ContentPiece& c : p.destinations) {
    const PlanTensor& t = p.tensors[c.tensor];
    const int64_t n = Volume(c.box);
    switch (t.quant.role) {
      case QuantRole::kNone: out.plain_bytes += n * DTypeBytes(t.dtype); break;
      case QuantRole::kValues:
        out.bf16_bytes += n * 2;
        out.fp8_bytes += n;
        break;
      case QuantRole::kScales: out.scale_bytes += n * DTypeBytes(t.dtype); break;
    }
  }
  return out;
}

QuantizedBytes ScenarioQuantizedBytes(const Scenario& s) {
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.dtype, s.path);
  QuantizedBytes out;
  for (int32_t r = 0; r < dst.Ranks(); ++r)
    for (const Piece& pc : dst.ShardOf(r).pieces) {
      const TensorSpec& t = s.model.tensors[pc.tensor];
      const int64_t n = Volume(pc.box);
      if (!s.quantization || !s.quantization->Quantizes(t.kind) || (t.shape.ndim != 2 && t.shape.ndim != 3)) {
        out.plain_bytes += n * DTypeBytes(s.dtype);
        continue;
      }
      const QuantGrid g = GridOf(*s.quantization, t.shape);
      CheckWholeBlocks(s, g, pc.box, t.name, t.shape);
      out.bf16_bytes += n * 2;
      out.fp8_bytes += n;
      out.scale_bytes += Volume(ScaleBox(g, pc.box, t.shape.ndim)) * DTypeBytes(ScaleDType(s.quantization->scale));
    }
  return out;
}

}  // namespace reshard
