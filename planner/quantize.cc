// Quantizing at the destination (planner/quantize.h).
#include "planner/quantize.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "model/error.h"
#include "planner/search.h"

namespace reshard {

namespace {

int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

std::string ScaleName(const std::string& weight, QuantScheme scheme) {
  // vLLM's names: block / per-tensor FP8 keep DeepSeek's weight_scale_inv;
  // MX formats use weight_scale.
  const std::string suffix = scheme == QuantScheme::kMx ? "_scale" : "_scale_inv";
  return weight + suffix;
}

// The region of box `c.box` of a piece with elements of `eb` bytes; the
// innermost dimension must be contiguous.
Region PieceRegion(const ContentPiece& c, int32_t buffer, int64_t eb) {
  const int nd = c.box.ndim;
  auto ext = [&](int d) { return c.box.hi[d] - c.box.lo[d]; };
  RESHARD_CHECK(nd >= 1 && nd <= 3 && c.stride_elems[nd - 1] == 1, "destination piece with a strided last dimension");
  Region r;
  r.buffer = buffer;
  r.offset_bytes = c.offset_elems * eb;
  r.row_bytes = ext(nd - 1) * eb;
  if (nd >= 2) {
    r.rows = ext(nd - 2);
    r.row_stride_bytes = r.rows > 1 ? c.stride_elems[nd - 2] * eb : 0;
  }
  if (nd == 3) {
    r.planes = ext(0);
    r.plane_stride_bytes = r.planes > 1 ? c.stride_elems[0] * eb : 0;
  }
  return r;
}

// Row-major strides of a box stored densely; 0 beyond its dimensions.
Extents DenseStrides(const Box& b) {
  Extents s{0, 0, 0};
  int64_t step = 1;
  for (int d = b.ndim - 1; d >= 0; --d) {
    s[d] = step;
    step *= b.hi[d] - b.lo[d];
  }
  return s;
}

// The dense region of box `b` (elements of `eb` bytes) at `offset_bytes`.
Region DenseRegion(const Box& b, int32_t buffer, int64_t offset_bytes, int64_t eb) {
  ContentPiece c;
  c.box = b;
  c.offset_elems = 0;
  c.stride_elems = DenseStrides(b);
  Region r = PieceRegion(c, buffer, eb);
  r.offset_bytes = offset_bytes;
  return r;
}

// The quantized tensors' values and scales, appended to p.tensors; -1 for
// tensors kept as they are.
std::vector<int32_t> AddQuantTensors(const Scenario& s, Plan& p) {
  const QuantConfig& q = *s.quantization;
  const size_t n = s.model.tensors.size();
  RESHARD_CHECK(p.tensors.size() == n, "a bf16 plan lists the model's tensors");
  std::vector<int32_t> values(n, -1);
  for (size_t t = 0; t < n; ++t) {
    const TensorSpec& spec = s.model.tensors[t];
    if (!q.Quantizes(spec.kind) || (spec.shape.ndim != 2 && spec.shape.ndim != 3)) continue;
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
  return values;
}

// vLLM loads a block-quantized weight only when each rank's share is whole
// blocks; so does the planner.
void CheckWholeBlocks(const Scenario& s, const QuantGrid& g, const Box& box, const std::string& name,
                      const Shape& shape) {
  if (CoversWholeBlocks(g, box, shape.ndim)) return;
  const int r = shape.ndim - 2;
  throw InputError(s.path, "destination.tp",
                   fmt::format("a destination rank holds rows [{}, {}) and columns [{}, {}) of '{}' {}, which cut "
                               "its {} x {} quantization blocks; each rank's share must be whole blocks (more "
                               "expert parallelism, destination.ep, keeps experts whole)",
                               box.lo[r], box.hi[r], box.lo[r + 1], box.hi[r + 1], name, ToString(shape),
                               g.block_rows, g.block_cols));
}

// Ops to insert after an existing op; ids >= base are new ops (id - base
// indexes `extra`), renumbered when they are spliced in.
struct Splice {
  std::vector<Op> extra;
  std::vector<std::vector<int32_t>> after;  // per old op: new ops (indices into extra), in order
};

void Apply(Plan& p, Splice& sp) {
  const int32_t n = static_cast<int32_t>(p.ops.size());
  std::vector<int32_t> old_id(n), new_id(sp.extra.size());
  int32_t next = 0;
  for (int32_t i = 0; i < n; ++i) {
    old_id[i] = next++;
    for (int32_t k : sp.after[i]) new_id[k] = next++;
  }
  auto map = [&](int32_t id) { return id < 0 ? id : id < n ? old_id[id] : new_id[id - n]; };
  std::vector<Op> ops;
  ops.reserve(next);
  auto push = [&](Op op) {
    for (int32_t& d : op.deps) d = map(d);
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
    if (op.match >= 0) op.match = map(op.match);
    op.id = static_cast<int32_t>(ops.size());
    ops.push_back(std::move(op));
  };
  for (int32_t i = 0; i < n; ++i) {
    push(std::move(p.ops[i]));
    for (int32_t k : sp.after[i]) push(std::move(sp.extra[k]));
  }
  p.ops = std::move(ops);
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
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kAlloc) alloc_of[op.buffer] = op.id;
    if (op.kind == OpKind::kRecv) writers[op.region.buffer].push_back(op.id);
    if (op.kind == OpKind::kCopy || op.kind == OpKind::kReload)
      for (const CopyPair& c : op.copies) writers[c.dst.buffer].push_back(op.id);
  }

  Splice sp;
  sp.after.resize(n);
  std::vector<ContentPiece> destinations;
  destinations.reserve(p.destinations.size() * 2);
  std::vector<bool> moved(p.destinations.size(), false);
  auto add = [&](Op op) {
    sp.extra.push_back(std::move(op));
    return n + static_cast<int32_t>(sp.extra.size()) - 1;
  };
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
      at = AlignUp(at, eb);
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
      at = AlignUp(at, sb);
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
    const int32_t last = *std::max_element(w.begin(), w.end());
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

PlanResult MakeQuantizedPlan(const Scenario& s, const PlannerOptions& options) {
  if (s.dtype != DType::kBF16)
    throw InputError(s.path, "destination.dtype",
                     fmt::format("quantizing to {} during the refit needs bf16 training weights, not {}",
                                 DTypeName(s.destination_dtype), DTypeName(s.dtype)));
  Scenario view = s;
  view.destination_dtype = s.dtype;
  view.quantization.reset();
  PlanResult res = MakePlan(view, options);
  if (!res.ok()) return res;
  Plan& plan = res.plan;
  QuantizeAtDestination(s, plan);
  PlanSummary& sum = plan.summary;
  sum.memory_policy += "+quantize-at-destination";
  sum.bytes_moved = CountBytesMoved(plan);
  sum.lower_bound_s = LowerBoundSeconds(plan);
  sum.routing_bound_s = RoutingBoundSeconds(plan);
  if (options.simulate) PredictWithSimulator(plan, res.stats);
  res.stats.ops = static_cast<int64_t>(plan.ops.size());
  return res;
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
