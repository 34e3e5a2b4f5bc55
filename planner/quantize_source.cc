// Quantizing at the source (planner/quantize_source.h).
#include "planner/quantize_source.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "model/error.h"
#include "planner/quantize_parts.h"

namespace reshard {

namespace {

using namespace quant_parts;

bool Quantized(const QuantConfig& q, const TensorSpec& t) {
  return q.Quantizes(t.kind) && (t.shape.ndim == 2 || t.shape.ndim == 3);
}

Shape BytesShape(Shape s, int64_t eb) {
  s.dim[s.ndim - 1] *= eb;
  return s;
}
Box BytesBox(Box b, int64_t eb) {
  b.lo[b.ndim - 1] *= eb;
  b.hi[b.ndim - 1] *= eb;
  return b;
}
Box ElemsBox(Box b, int64_t eb) {
  b.lo[b.ndim - 1] /= eb;
  b.hi[b.ndim - 1] /= eb;
  return b;
}

// A piece of elements of `eb` bytes as a piece of bytes (its last dimension
// contiguous: byte k of element e sits at byte e * eb + k of the row).
Piece BytesPiece(Piece p, int64_t eb) {
  const int nd = p.box.ndim;
  p.box = BytesBox(p.box, eb);
  p.offset *= eb;
  for (int d = 0; d < kMaxDims; ++d)
    if (d != nd - 1) p.stride[d] *= eb;
  return p;
}

Piece DensePiece(int32_t tensor, const Box& box, int32_t buffer, int64_t offset) {
  return Piece{tensor, box, buffer, offset, DenseStrides(box)};
}

void SortPieces(Shard& sh) {
  std::sort(sh.pieces.begin(), sh.pieces.end(), [](const Piece& a, const Piece& b) {
    return std::tie(a.tensor, a.box, a.buffer) < std::tie(b.tensor, b.box, b.buffer);
  });
}

}  // namespace

std::vector<bool> SourceQuantizable(const Scenario& s, const Layout& src) {
  const QuantConfig& q = *s.quantization;
  std::vector<bool> ok(s.model.tensors.size(), false);
  for (size_t t = 0; t < ok.size(); ++t) ok[t] = Quantized(q, s.model.tensors[t]);
  for (const Shard& sh : src.shards)
    for (const Piece& pc : sh.pieces) {
      if (!ok[pc.tensor]) continue;
      const Shape& shape = s.model.tensors[pc.tensor].shape;
      if (pc.stride[shape.ndim - 1] != 1 || !CoversWholeBlocks(GridOf(q, shape), pc.box, shape.ndim))
        ok[pc.tensor] = false;
    }
  return ok;
}

std::optional<SourceQuantView> MakeSourceQuantView(const Scenario& s, const std::vector<bool>& wanted) {
  RESHARD_CHECK(s.quantization.has_value() && s.dtype == DType::kBF16, "a bf16 scenario with a quantized destination");
  const QuantConfig& q = *s.quantization;
  const ModelSpec& m = s.model;
  const int32_t n = static_cast<int32_t>(m.tensors.size());
  const Layout src = MakeSourceLayout(m, s.source, s.dtype, s.path);
  const Layout dst = MakeDestinationLayout(m, s.destination, s.dtype, s.path);
  for (const Shard& sh : dst.shards)
    for (const Piece& pc : sh.pieces)
      if (Quantized(q, m.tensors[pc.tensor]))
        CheckWholeBlocks(s, GridOf(q, m.tensors[pc.tensor].shape), pc.box, m.tensors[pc.tensor].name,
                         m.tensors[pc.tensor].shape);
  // The byte view needs every piece's last dimension contiguous.
  for (const Layout* l : {&src, &dst})
    for (const Shard& sh : l->shards)
      for (const Piece& pc : sh.pieces)
        if (pc.stride[pc.box.ndim - 1] != 1) return std::nullopt;

  SourceQuantView v;
  v.model_tensors = n;
  v.values.assign(n, -1);
  std::vector<bool> at_source = SourceQuantizable(s, src);
  RESHARD_CHECK(wanted.empty() || wanted.size() == at_source.size(), "a wish per model tensor");
  for (size_t t = 0; t < wanted.size(); ++t) at_source[t] = at_source[t] && wanted[t];
  const int64_t sb = DTypeBytes(ScaleDType(q.scale));
  ModelSpec vm = m;
  v.elem_bytes.assign(n, DTypeBytes(s.dtype));
  for (int32_t t = 0; t < n; ++t) {
    vm.tensors[t].shape = BytesShape(m.tensors[t].shape, DTypeBytes(s.dtype));
    v.quantized += Quantized(q, m.tensors[t]);
    if (!at_source[t]) continue;
    const TensorSpec& spec = m.tensors[t];
    v.values[t] = static_cast<int32_t>(vm.tensors.size());
    ++v.at_source;
    vm.tensors.push_back(TensorSpec{spec.name, spec.kind, spec.layer, spec.shape});
    vm.tensors.push_back(TensorSpec{ScaleName(spec.name, q.scheme), spec.kind, spec.layer,
                                    BytesShape(GridOf(q, spec.shape).ScaleShape(spec.shape.ndim), sb)});
    v.elem_bytes.push_back(1);
    v.elem_bytes.push_back(sb);
  }
  if (v.at_source == 0) return std::nullopt;
  auto scale_box = [&](int32_t t, const Box& b) {
    return BytesBox(ScaleBox(GridOf(q, m.tensors[t].shape), b, b.ndim), sb);
  };
  const int64_t eb = DTypeBytes(s.dtype);

  auto inputs = std::make_shared<ProblemInputs>();
  // Source: the bf16 buffers as they are (in bytes), and after them one
  // staging buffer per layer: values of the pieces quantized here, then their scales.
  Layout& vs = inputs->src;
  vs.dtype = DType::kFP8E4M3;
  vs.rank_shard = src.rank_shard;
  std::vector<int64_t> staging_bytes(src.shards.size(), 0);
  for (size_t k = 0; k < src.shards.size(); ++k) {
    const Shard& sh = src.shards[k];
    Shard o;
    for (const LocalBuffer& b : sh.buffers) o.buffers.push_back(LocalBuffer{b.name, b.layer, b.elems * eb});
    const size_t bf16_buffers = o.buffers.size();
    std::map<int32_t, int32_t> staging;  // layer -> buffer
    auto staging_of = [&](int32_t layer) {
      auto [it, fresh] = staging.emplace(layer, static_cast<int32_t>(o.buffers.size()));
      if (fresh) o.buffers.push_back(LocalBuffer{fmt::format("fp8 staging {}", layer), layer, 0});
      return it->second;
    };
    for (const Piece& pc : sh.pieces) o.pieces.push_back(BytesPiece(pc, eb));
    for (const Piece& pc : sh.pieces) {
      if (v.values[pc.tensor] < 0) continue;
      const int32_t b = staging_of(m.tensors[pc.tensor].layer);
      o.buffers[b].elems = AlignUp(o.buffers[b].elems, kPieceAlignBytes);
      o.pieces.push_back(DensePiece(v.values[pc.tensor], pc.box, b, o.buffers[b].elems));
      o.buffers[b].elems += Volume(pc.box);
    }
    for (const Piece& pc : sh.pieces) {
      if (v.values[pc.tensor] < 0) continue;
      const int32_t b = staging_of(m.tensors[pc.tensor].layer);
      const Box box = scale_box(pc.tensor, pc.box);
      o.buffers[b].elems = AlignUp(o.buffers[b].elems, kPieceAlignBytes);
      o.pieces.push_back(DensePiece(v.values[pc.tensor] + 1, box, b, o.buffers[b].elems));
      o.buffers[b].elems += Volume(box);
    }
    for (size_t b = bf16_buffers; b < o.buffers.size(); ++b) {
      o.buffers[b].elems = AlignUp(o.buffers[b].elems, kPieceAlignBytes);  // slots pack buffers end to end
      staging_bytes[k] += o.buffers[b].elems;
    }
    SortPieces(o);
    vs.shards.push_back(std::move(o));
  }
  // Destination: each buffer laid out anew, its pieces densely in their
  // order (bf16 or fp8 values), then the scales.
  Layout& vd = inputs->dst;
  vd.dtype = DType::kFP8E4M3;
  vd.rank_shard = dst.rank_shard;
  for (const Shard& sh : dst.shards) {
    Shard o;
    std::vector<std::vector<const Piece*>> of(sh.buffers.size());
    for (const Piece& pc : sh.pieces) of[pc.buffer].push_back(&pc);
    for (size_t b = 0; b < sh.buffers.size(); ++b) {
      auto& list = of[b];
      std::stable_sort(list.begin(), list.end(), [](const Piece* a, const Piece* c) { return a->offset < c->offset; });
      const int32_t bi = static_cast<int32_t>(b);
      int64_t at = 0;
      for (const Piece* pc : list) {
        const int32_t t = pc->tensor;
        at = AlignUp(at, kPieceAlignBytes);
        if (v.values[t] >= 0) {
          o.pieces.push_back(DensePiece(v.values[t], pc->box, bi, at));
          at += Volume(pc->box);
        } else {
          const Box box = BytesBox(pc->box, eb);
          o.pieces.push_back(DensePiece(t, box, bi, at));
          at += Volume(box);
        }
      }
      for (const Piece* pc : list) {
        if (v.values[pc->tensor] < 0) continue;
        const Box box = scale_box(pc->tensor, pc->box);
        at = AlignUp(at, kPieceAlignBytes);
        o.pieces.push_back(DensePiece(v.values[pc->tensor] + 1, box, bi, at));
        at += Volume(box);
      }
      // Rounded up too: the planner packs a layer's buffers end to end (slots).
      o.buffers.push_back(LocalBuffer{sh.buffers[b].name, sh.buffers[b].layer, AlignUp(at, kPieceAlignBytes)});
    }
    SortPieces(o);
    vd.shards.push_back(std::move(o));
  }
  // Start memory: the bf16 scenario's, every staging buffer counted as
  // present from the start (the planner's bound stays an upper bound; the
  // finished plan allocates each one only while it is used).
  Scenario bf16 = s;
  bf16.destination_dtype = s.dtype;
  bf16.quantization.reset();
  inputs->memory_at_start = MemoryAtStart(bf16, src);
  for (int32_t r = 0; r < src.Ranks(); ++r)
    inputs->memory_at_start[s.source_gpus[r]].training_weights += staging_bytes[src.rank_shard[r]];

  v.scenario = bf16;
  v.scenario.model = std::move(vm);
  v.scenario.dtype = v.scenario.destination_dtype = DType::kFP8E4M3;
  v.inputs = std::move(inputs);
  return v;
}

namespace {

// Where a region of one buffer goes when the buffer is cut at `split`: the
// bytes from `split` on to buffer `tail`.
struct Cut {
  int64_t split = -1;  // -1: not cut
  int32_t tail = -1;   // the staging buffer, -1 until made
};

// Which tiles of one staging buffer some op reads: reads as sorted, merged
// byte spans.
struct Spans {
  std::vector<std::pair<int64_t, int64_t>> v;
  void Finish() {
    std::sort(v.begin(), v.end());
    std::vector<std::pair<int64_t, int64_t>> out;
    for (auto s : v) {
      if (!out.empty() && s.first <= out.back().second) out.back().second = std::max(out.back().second, s.second);
      else out.push_back(s);
    }
    v = std::move(out);
  }
  bool Touches(const Region& r) const {
    auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(r.offset_bytes, std::numeric_limits<int64_t>::max()));
    if (it != v.begin() && std::prev(it)->second > r.offset_bytes) return true;
    return it != v.end() && it->first < r.End();
  }
};

}  // namespace

void FinishSourceQuantized(const Scenario& s, const SourceQuantView& v, Plan& p) {
  const QuantConfig& q = *s.quantization;
  const int32_t n = v.model_tensors;
  // Tensors: the model's in their dtype, then values and scales pairs.
  RESHARD_CHECK(p.tensors.size() == v.elem_bytes.size(), "a plan of the byte view lists its tensors");
  for (int32_t t = 0; t < n; ++t) {
    const TensorSpec& spec = s.model.tensors[t];
    p.tensors[t] = PlanTensor{spec.name, spec.shape, s.dtype, {}};
    const int32_t vt = v.values[t];
    if (vt < 0) continue;
    const QuantGrid g = GridOf(q, spec.shape);
    p.tensors[vt] = PlanTensor{spec.name, spec.shape, DType::kFP8E4M3, {}};
    p.tensors[vt].quant = {QuantRole::kValues, t, vt + 1, g.block_rows, g.block_cols, q.scale};
    p.tensors[vt + 1] = PlanTensor{ScaleName(spec.name, q.scheme), g.ScaleShape(spec.shape.ndim), ScaleDType(q.scale), {}};
    p.tensors[vt + 1].quant = {QuantRole::kScales, vt, -1, 0, 0, ScaleFormat::kFP32};
  }
  // Staging parts of source buffers: from their first values / scales byte on.
  std::vector<Cut> cut(p.buffers.size());
  for (const ContentPiece& c : p.sources)
    if (c.tensor >= n) {
      int64_t& at = cut[c.buffer].split;
      at = at < 0 ? c.offset_elems : std::min(at, c.offset_elems);
    }
  // Content back in elements. Staging content is no source: quantize ops write it.
  auto elems = [&](ContentPiece c) {
    const int64_t eb = v.elem_bytes[c.tensor];
    const int nd = c.box.ndim;
    c.box = ElemsBox(c.box, eb);
    c.offset_elems /= eb;
    for (int d = 0; d < kMaxDims; ++d)
      if (d != nd - 1) c.stride_elems[d] /= eb;
    return c;
  };
  // Staging pieces by (buffer, tensor, byte box) for the tiles.
  std::map<std::tuple<int32_t, int32_t, Box>, ContentPiece> staged;  // values / scales, in bytes
  std::vector<ContentPiece> sources;
  sources.reserve(p.sources.size());
  for (const ContentPiece& c : p.sources) {
    if (c.tensor >= n) staged.emplace(std::make_tuple(c.buffer, c.tensor, c.box), c);
    else sources.push_back(elems(c));
  }
  p.sources = std::move(sources);
  for (ContentPiece& c : p.destinations) {
    const bool dense = c.stride_elems == DenseStrides(c.box);
    c = elems(c);
    if (dense) c.stride_elems = DenseStrides(c.box);
  }
  // Cut the buffers: regions past the split move to a new staging buffer,
  // made only where some op reads them (a replica the planner did not pick
  // quantizes nothing).
  const size_t nbuf = p.buffers.size();
  const int32_t nops = static_cast<int32_t>(p.ops.size());
  auto cut_of = [&](int32_t b) { return b >= 0 && static_cast<size_t>(b) < nbuf && cut[b].split >= 0; };
  std::vector<bool> staged_reads(nbuf, false);
  std::vector<std::vector<int32_t>> releases(nbuf);  // ops freeing or moving to host a cut buffer
  for (const Op& op : p.ops) {
    auto read = [&](const Region& r) {
      if (cut_of(r.buffer) && r.End() > cut[r.buffer].split && r.offset_bytes >= cut[r.buffer].split)
        staged_reads[r.buffer] = true;
    };
    if (op.kind == OpKind::kSend) read(op.region);
    for (const CopyPair& c : op.copies) read(c.src);
    if (op.kind == OpKind::kFree && cut_of(op.buffer)) releases[op.buffer].push_back(op.id);
    if (op.kind == OpKind::kOffload)
      for (const CopyPair& c : op.copies)
        if (cut_of(c.src.buffer)) releases[c.src.buffer].push_back(op.id);
  }
  for (size_t b = 0; b < nbuf; ++b) {
    Cut& k = cut[b];
    if (k.split < 0) continue;
    if (staged_reads[b]) {
      PlanBuffer tail = p.buffers[b];
      tail.bytes -= k.split;
      tail.role = BufferRole::kStaging;
      tail.preexisting = false;
      tail.name = "fp8 " + tail.name;
      k.tail = AppendBuffer(p, tail);
    }
    p.buffers[b].bytes = k.split;
  }
  std::vector<int32_t> first(p.buffers.size(), nops), last(p.buffers.size(), -1);  // ops touching a staging buffer
  std::vector<std::vector<int32_t>> readers(p.buffers.size());
  std::vector<Spans> reads(p.buffers.size());
  auto remap = [&](Region& r, const Op& op, bool read) {
    if (!cut_of(r.buffer)) return;
    const Cut& k = cut[r.buffer];
    if (r.offset_bytes < k.split) {
      if (r.End() <= k.split) return;
      // Only moving a whole source buffer to host spans both parts: the
      // staging part need not go.
      RESHARD_CHECK(op.kind == OpKind::kOffload && r.offset_bytes == 0 && r.Contiguous(),
                    "an op reads across the staging part of a source buffer");
      r.row_bytes = k.split;
      return;
    }
    RESHARD_CHECK(k.tail >= 0, "a staging part some op touches is made");
    r.buffer = k.tail;
    r.offset_bytes -= k.split;
    first[k.tail] = std::min(first[k.tail], op.id);
    last[k.tail] = std::max(last[k.tail], op.id);
    if (read) {
      readers[k.tail].push_back(op.id);
      reads[k.tail].v.emplace_back(r.offset_bytes, r.End());
    }
  };
  for (Op& op : p.ops) {
    if (op.kind == OpKind::kSend) remap(op.region, op, true);
    if (op.kind == OpKind::kRecv) remap(op.region, op, false);
    for (CopyPair& c : op.copies) {
      const bool offload = op.kind == OpKind::kOffload && cut_of(c.src.buffer);
      remap(c.src, op, true);
      if (offload) {
        if (c.dst.Bytes() != c.src.Bytes()) {  // the host copy holds the bf16 part only
          c.dst.row_bytes = c.src.row_bytes;
          p.buffers[c.dst.buffer].bytes = c.src.Bytes();
        }
        continue;
      }
      remap(c.dst, op, false);
    }
  }

  std::map<std::tuple<int32_t, int32_t, Box>, const ContentPiece*> bf16;  // source pieces by (buffer, tensor, box)
  for (const ContentPiece& c : p.sources)
    if (cut_of(c.buffer)) bf16.emplace(std::make_tuple(c.buffer, c.tensor, c.box), &c);
  Splice sp(static_cast<size_t>(nops));
  auto op_on = [](OpKind kind, int32_t gpu, int32_t stream, std::vector<int32_t> deps, std::string label) {
    Op op;
    op.kind = kind, op.gpu = gpu, op.stream = stream, op.deps = std::move(deps), op.label = std::move(label);
    return op;
  };
  // An op's whole NCCL group: new ops go before its first member or after its last.
  auto group_start = [&](int32_t i) {
    while (i > 0 && p.ops[i].group >= 0 && p.ops[i - 1].group == p.ops[i].group) --i;
    return i;
  };
  auto group_end = [&](int32_t i) {
    while (i + 1 < nops && p.ops[i].group >= 0 && p.ops[i + 1].group == p.ops[i].group) ++i;
    return i;
  };
  for (size_t b = 0; b < nbuf; ++b) {
    const int32_t nb = cut[b].tail, buf = static_cast<int32_t>(b);
    if (nb < 0) continue;
    const int64_t split = cut[b].split;
    const PlanBuffer& src = p.buffers[b];
    reads[nb].Finish();
    // Tiles: each staged values piece with its bf16 piece and its scales.
    std::vector<QuantizeTile> tiles;
    for (auto it = staged.lower_bound(std::make_tuple(buf, -1, Box{})); it != staged.end() && std::get<0>(it->first) == buf;
         ++it) {
      const auto& [key, c] = *it;
      const int32_t tensor = std::get<1>(key);
      const Box& box = std::get<2>(key);
      if (p.tensors[tensor].quant.role != QuantRole::kValues) continue;
      const PlanTensor& vt = p.tensors[tensor];
      const QuantGrid g = GridOf(vt.quant.block_rows, vt.quant.block_cols, vt.shape);
      const int64_t sbytes = v.elem_bytes[vt.quant.scales];
      const Box sbox = ScaleBox(g, box, box.ndim);
      const auto sc = staged.find(std::make_tuple(buf, vt.quant.scales, BytesBox(sbox, sbytes)));
      RESHARD_CHECK(sc != staged.end(), "a staged values piece has its scales beside it");
      const auto in = bf16.find(std::make_tuple(buf, vt.quant.of, box));
      RESHARD_CHECK(in != bf16.end(), "a staged values piece has its bf16 piece in the same buffer");
      QuantizeTile tile;
      tile.tensor = tensor;
      tile.box = box;
      tile.input = PieceRegion(*in->second, buf, 2);
      tile.output = DenseRegion(box, nb, c.offset_elems - split, 1);
      tile.scales = DenseRegion(sbox, nb, sc->second.offset_elems - split, sbytes);
      if (reads[nb].Touches(tile.output) || reads[nb].Touches(tile.scales)) tiles.push_back(tile);
    }
    RESHARD_CHECK(!tiles.empty(), "bytes read from a staging buffer are quantized there");
    int32_t at = first[nb];
    for (int32_t r : releases[b]) at = std::min(at, r);
    at = group_start(at);
    const int32_t a = sp.Add(nops, op_on(OpKind::kAlloc, src.gpu, kStreamCompute, {}, "alloc fp8 " + src.name));
    sp.extra.back().buffer = nb;
    Op quant = op_on(OpKind::kQuantize, src.gpu, kStreamCompute, {a}, "quantize " + src.name);
    quant.tiles = std::move(tiles);
    const int32_t qz = sp.Add(nops, std::move(quant));
    sp.before[at].push_back(a - nops);
    sp.before[at].push_back(qz - nops);
    for (int32_t r : readers[nb]) p.ops[r].deps.push_back(qz);
    for (int32_t r : releases[b]) p.ops[r].deps.push_back(qz);
    Op free = op_on(OpKind::kFree, src.gpu, p.ops[last[nb]].stream, readers[nb], "free fp8 " + src.name);
    free.buffer = nb;
    sp.after[group_end(last[nb])].push_back(sp.Add(nops, std::move(free)) - nops);
  }
  Apply(p, sp);
}

}  // namespace reshard
