#include "executor/quantize_content.h"

#include "model/error.h"

namespace reshard {

QuantizeJob QuantizeJobOf(const Plan& p, const QuantizeTile& t) {
  const PlanTensor& tensor = p.tensors[t.tensor];
  const TensorQuant& q = tensor.quant;
  const int nd = tensor.shape.ndim;
  QuantizeJob j;
  j.in_buffer = t.input.buffer;
  j.out_buffer = t.output.buffer;
  j.sc_buffer = t.scales.buffer;
  j.planes = nd == 3 ? t.box.hi[0] - t.box.lo[0] : 1;
  j.rows = t.box.hi[nd - 2] - t.box.lo[nd - 2];
  j.cols = t.box.hi[nd - 1] - t.box.lo[nd - 1];
  j.block_rows = q.block_rows;
  j.block_cols = q.block_cols;
  j.scale_format = static_cast<int32_t>(q.scale_format);
  j.scale_bytes = static_cast<int32_t>(DTypeBytes(ScaleDType(q.scale_format)));
  // A region with one row (or plane) may leave its stride 0: the walk never uses it.
  j.in_offset = t.input.offset_bytes;
  j.in_row = t.input.row_stride_bytes;
  j.in_plane = t.input.plane_stride_bytes;
  j.out_offset = t.output.offset_bytes;
  j.out_row = t.output.row_stride_bytes;
  j.out_plane = t.output.plane_stride_bytes;
  j.sc_offset = t.scales.offset_bytes;
  j.sc_row = t.scales.row_stride_bytes;
  j.sc_plane = t.scales.plane_stride_bytes;
  return j;
}

std::vector<QuantizeJob> QuantizeJobsOf(const Plan& p, const Op& op) {
  std::vector<QuantizeJob> jobs;
  jobs.reserve(op.tiles.size());
  for (const QuantizeTile& t : op.tiles) jobs.push_back(QuantizeJobOf(p, t));
  return jobs;
}

std::vector<int8_t> QuantizedSources(const Plan& p) {
  std::vector<int8_t> out(p.tensors.size(), 0);
  for (const PlanTensor& t : p.tensors)
    if (t.quant.role == QuantRole::kValues && t.quant.of >= 0 && static_cast<size_t>(t.quant.of) < out.size())
      out[t.quant.of] = 1;
  return out;
}

PieceMap ContentMapOf(const Plan& p, const ContentPiece& c, const std::vector<int8_t>& quantized_sources) {
  const PlanTensor& t = p.tensors[c.tensor];
  PieceMap m = MakePieceMap(c.tensor, t.shape, static_cast<int32_t>(DTypeBytes(t.dtype)), c.box, c.offset_elems,
                            c.stride_elems);
  m.finite_bf16 = quantized_sources[c.tensor];
  if (t.quant.role == QuantRole::kNone) return m;
  const PlanTensor& values = t.quant.role == QuantRole::kValues ? t : p.tensors[t.quant.of];
  const TensorQuant& q = values.quant;
  const QuantGrid g = GridOf(q.block_rows, q.block_cols, values.shape);
  m.quant.role = t.quant.role == QuantRole::kValues ? 1 : 2;
  m.quant.source = q.of;
  m.quant.scale_format = static_cast<int32_t>(q.scale_format);
  m.quant.planes = g.planes;
  m.quant.rows = g.rows;
  m.quant.cols = g.cols;
  m.quant.block_rows = g.block_rows;
  m.quant.block_cols = g.block_cols;
  return m;
}

float QuantExpectation::Scale(int64_t plane, int64_t i, int64_t j) {
  const QuantMap& q = m_.quant;
  const int64_t key = (plane * ((q.rows + q.block_rows - 1) / q.block_rows) + i) *
                          ((q.cols + q.block_cols - 1) / q.block_cols) + j;
  auto it = scales_.find(key);
  if (it != scales_.end()) return it->second;
  const float s = ExpectedBlockScale(m_, plane, i, j);
  scales_.emplace(key, s);
  return s;
}

uint64_t QuantExpectation::Value(int64_t g) {
  const QuantMap& q = m_.quant;
  if (q.role == 1) {
    const int64_t plane = g / (q.rows * q.cols), rc = g % (q.rows * q.cols);
    const int64_t r = rc / q.cols, c = rc % q.cols;
    const float s = Scale(plane, r / q.block_rows, c / q.block_cols);
    return QuantizeElement(Bf16ToFloat(FiniteBf16Pattern(q.source, g)), s);
  }
  RESHARD_CHECK(q.role == 2, "not a quantized piece");
  const int64_t scale_cols = (q.cols + q.block_cols - 1) / q.block_cols;
  const int64_t scale_rows = (q.rows + q.block_rows - 1) / q.block_rows;
  const int64_t plane = g / (scale_rows * scale_cols), ij = g % (scale_rows * scale_cols);
  return ScaleStoredBits(Scale(plane, ij / scale_cols, ij % scale_cols), q.scale_format);
}

}  // namespace reshard
