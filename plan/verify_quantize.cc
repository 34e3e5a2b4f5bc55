#include "plan/verify_quantize.h"

#include <algorithm>

#include <fmt/format.h>

namespace reshard {

namespace {

bool TensorOk(const Plan& p, int32_t t) { return t >= 0 && static_cast<size_t>(t) < p.tensors.size(); }

std::string BoxText(const Box& b) {
  std::string s = "[";
  for (int d = 0; d < std::clamp(b.ndim, 0, kMaxDims); ++d) s += fmt::format("{}{}:{}", d ? ", " : "", b.lo[d], b.hi[d]);
  return s + "]";
}

// Whether two regions of one buffer may share a byte (their spans overlap).
bool SpansOverlap(const Region& a, const Region& b) {
  if (a.buffer != b.buffer || a.Bytes() == 0 || b.Bytes() == 0) return false;
  return a.offset_bytes < b.End() && b.offset_bytes < a.End();
}

}  // namespace

std::vector<std::string> QuantTensorProblems(const Plan& p) {
  std::vector<std::string> out;
  for (size_t i = 0; i < p.tensors.size(); ++i) {
    const PlanTensor& t = p.tensors[i];
    const TensorQuant& q = t.quant;
    if (q.role == QuantRole::kNone) continue;
    const std::string name = fmt::format("tensor {} '{}'", i, t.name);
    if (!TensorOk(p, q.of)) {
      out.push_back(fmt::format("{}: quant.of {} is not a tensor of the plan", name, q.of));
      continue;
    }
    const PlanTensor& of = p.tensors[q.of];
    if (q.role == QuantRole::kScales) {
      if (of.quant.role != QuantRole::kValues || of.quant.scales != static_cast<int32_t>(i))
        out.push_back(fmt::format("{}: scales of tensor {} '{}', which does not name it as its scales", name, q.of,
                                  of.name));
      continue;
    }
    if (t.dtype != DType::kFP8E4M3)
      out.push_back(fmt::format("{}: quantized values must be fp8_e4m3, not {}", name, DTypeName(t.dtype)));
    if (of.quant.role != QuantRole::kNone || of.dtype != DType::kBF16 || of.shape != t.shape)
      out.push_back(fmt::format("{}: quantizes tensor {} '{}', which must be a plain bf16 tensor of the same shape",
                                name, q.of, of.name));
    if (t.shape.ndim != 2 && t.shape.ndim != 3) {
      out.push_back(fmt::format("{}: only 2-D and 3-D tensors are quantized (ndim {})", name, t.shape.ndim));
      continue;
    }
    if (q.block_rows < 1 || q.block_cols < 1) {
      out.push_back(fmt::format("{}: block {} x {} is empty", name, q.block_rows, q.block_cols));
      continue;
    }
    if (!TensorOk(p, q.scales)) {
      out.push_back(fmt::format("{}: quant.scales {} is not a tensor of the plan", name, q.scales));
      continue;
    }
    const PlanTensor& s = p.tensors[q.scales];
    const Shape want = GridOf(q.block_rows, q.block_cols, t.shape).ScaleShape(t.shape.ndim);
    if (s.quant.role != QuantRole::kScales || s.quant.of != static_cast<int32_t>(i) ||
        s.dtype != ScaleDType(q.scale_format) || s.shape != want)
      out.push_back(fmt::format("{}: its scales, tensor {} '{}', must be a scales tensor of it with dtype {} and "
                                "shape {} (one per {} x {} block)",
                                name, q.scales, s.name, DTypeName(ScaleDType(q.scale_format)), ToString(want),
                                q.block_rows, q.block_cols));
  }
  return out;
}

std::vector<std::string> QuantizeTileProblems(const Plan& p, const QuantizeTile& t) {
  if (!TensorOk(p, t.tensor) || p.tensors[t.tensor].quant.role != QuantRole::kValues)
    return {fmt::format("tensor {} is not a quantized (values) tensor of the plan", t.tensor)};
  const PlanTensor& tensor = p.tensors[t.tensor];
  const TensorQuant& q = tensor.quant;
  const int nd = tensor.shape.ndim;
  if ((nd != 2 && nd != 3) || q.block_rows < 1 || q.block_cols < 1 || !TensorOk(p, q.scales)) return {};  // reported above
  bool inside = t.box.ndim == nd;
  for (int d = 0; inside && d < nd; ++d)
    inside = t.box.lo[d] < t.box.hi[d] && t.box.hi[d] <= tensor.shape.dim[d];
  if (!inside)
    return {fmt::format("box {} is empty or outside tensor '{}' of shape {}", BoxText(t.box), tensor.name,
                        ToString(tensor.shape))};
  std::vector<std::string> out;
  const QuantGrid g = GridOf(q.block_rows, q.block_cols, tensor.shape);
  if (!CoversWholeBlocks(g, t.box, nd))
    out.push_back(fmt::format("box {} cuts a {} x {} quantization block of '{}'", BoxText(t.box), q.block_rows,
                              q.block_cols, tensor.name));
  const int r = nd - 2;
  const int64_t planes = nd == 3 ? t.box.hi[0] - t.box.lo[0] : 1;
  const int64_t rows = t.box.hi[r] - t.box.lo[r], cols = t.box.hi[r + 1] - t.box.lo[r + 1];
  const Box sb = ScaleBox(g, t.box, nd);
  const int64_t scale_bytes = DTypeBytes(p.tensors[q.scales].dtype);
  auto shape = [&](const Region& reg, const char* what, int64_t want_rows, int64_t want_row_bytes) {
    if (reg.planes != planes || reg.rows != want_rows || reg.row_bytes != want_row_bytes)
      out.push_back(fmt::format("{} has {} planes x {} rows x {} bytes; the box needs {} x {} x {}", what, reg.planes,
                                reg.rows, reg.row_bytes, planes, want_rows, want_row_bytes));
  };
  shape(t.input, "input", rows, cols * 2);
  shape(t.output, "output", rows, cols);
  shape(t.scales, "scales", sb.hi[r] - sb.lo[r], (sb.hi[r + 1] - sb.lo[r + 1]) * scale_bytes);
  if (SpansOverlap(t.input, t.output) || SpansOverlap(t.input, t.scales) || SpansOverlap(t.output, t.scales))
    out.push_back("its input, output and scales overlap (a quantize reads and writes separate bytes)");
  return out;
}

}  // namespace reshard
