// Pieces shared by the FP8 rewrites (planner/quantize_parts.h).
#include "planner/quantize_parts.h"

#include <algorithm>

#include <fmt/format.h>

#include "model/error.h"

namespace reshard::quant_parts {

std::string ScaleName(const std::string& weight, QuantScheme scheme) {
  const std::string suffix = scheme == QuantScheme::kMx ? "_scale" : "_scale_inv";
  return weight + suffix;
}

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

Extents DenseStrides(const Box& b) {
  Extents s{0, 0, 0};
  int64_t step = 1;
  for (int d = b.ndim - 1; d >= 0; --d) {
    s[d] = step;
    step *= b.hi[d] - b.lo[d];
  }
  return s;
}

Region DenseRegion(const Box& b, int32_t buffer, int64_t offset_bytes, int64_t eb) {
  ContentPiece c;
  c.box = b;
  c.offset_elems = 0;
  c.stride_elems = DenseStrides(b);
  Region r = PieceRegion(c, buffer, eb);
  r.offset_bytes = offset_bytes;
  return r;
}

void CheckWholeBlocks(const Scenario& s, const QuantGrid& g, const Box& box, const std::string& name,
                      const Shape& shape) {
  if (CoversWholeBlocks(g, box, shape.ndim)) return;
  const int r = shape.ndim - 2;
  // vLLM's own words for the cut dimension: output rows (block_n) or input columns (block_k).
  const bool rows_cut = box.lo[r] % g.block_rows != 0 || (box.hi[r] % g.block_rows != 0 && box.hi[r] != g.rows);
  const std::string vllm =
      rows_cut ? fmt::format("Weight output_partition_size = {} is not divisible by weight quantization block_n = {}",
                             box.hi[r] - box.lo[r], g.block_rows)
               : fmt::format("Weight input_size_per_partition = {} is not divisible by weight quantization block_k = {}",
                             box.hi[r + 1] - box.lo[r + 1], g.block_cols);
  throw InputError(s.path, "destination.tp",
                   fmt::format("a destination rank holds rows [{}, {}) and columns [{}, {}) of '{}' {}, which cut "
                               "its {} x {} quantization blocks; each rank's share must be whole blocks, as vLLM "
                               "requires (it refuses this split: \"{}\"): choose a tensor parallelism whose shares "
                               "are whole blocks, or more expert parallelism (destination.ep) to keep experts whole",
                               box.lo[r], box.hi[r], box.lo[r + 1], box.hi[r + 1], name, ToString(shape),
                               g.block_rows, g.block_cols, vllm));
}

void Apply(Plan& p, Splice& sp) {
  const int32_t n = static_cast<int32_t>(p.ops.size());
  std::vector<int32_t> old_id(n), new_id(sp.extra.size());
  int32_t next = 0;
  for (int32_t i = 0; i < n; ++i) {
    for (int32_t k : sp.before[i]) new_id[k] = next++;
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
    for (int32_t k : sp.before[i]) push(std::move(sp.extra[k]));
    push(std::move(p.ops[i]));
    for (int32_t k : sp.after[i]) push(std::move(sp.extra[k]));
  }
  p.ops = std::move(ops);
}

}  // namespace reshard::quant_parts
