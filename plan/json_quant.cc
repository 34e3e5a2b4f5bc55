// Reading the quantization parts of a plan: PlanTensor::quant and a
// quantize op's tiles (docs/plan-format.md). The writers are templates in
// json_reader.h.
#include "plan/json_reader.h"

namespace reshard::plan_json {

Box ReadBox(const json& j, const Path& p, const Reader& r) {
  const json& box = r.Array(j, p);
  if (box.size() > static_cast<size_t>(kMaxDims))
    r.Fail(p, fmt::format("has {} dimensions; at most {} are supported", box.size(), kMaxDims));
  Box b;
  b.ndim = static_cast<int>(box.size());
  for (size_t d = 0; d < box.size(); ++d) {
    Path dp = p[static_cast<int64_t>(d)];
    const json& pair = r.Array(box[d], dp);
    if (pair.size() != 2) r.Fail(dp, fmt::format("expected [lo, hi], got {} numbers", pair.size()));
    b.lo[d] = r.Int(pair[0], dp[0], 0, kI64Max);
    b.hi[d] = r.Int(pair[1], dp[1], 0, kI64Max);
    if (b.hi[d] < b.lo[d]) r.Fail(dp, fmt::format("hi {} is below lo {}", b.hi[d], b.lo[d]));
  }
  return b;
}

TensorQuant ReadTensorQuant(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p, {"role", "of", "scales", "block", "scale_format"});
  TensorQuant q;
  const std::string role = r.String(r.Required(j, p, "role"), p / "role");
  if (role == "values") q.role = QuantRole::kValues;
  else if (role == "scales") q.role = QuantRole::kScales;
  else r.Fail(p / "role", fmt::format("unknown value '{}' (one of: values, scales)", role));
  q.of = r.RequiredInt32(j, p, "of", 0);
  if (q.role == QuantRole::kScales) {
    for (const char* k : {"scales", "block", "scale_format"})
      if (Reader::Find(j, k)) r.Fail(p / k, "only a values tensor has it");
    return q;
  }
  q.scales = r.RequiredInt32(j, p, "scales", 0);
  const Path bp = p / "block";
  const json& b = r.Array(r.Required(j, p, "block"), bp);
  if (b.size() != 2) r.Fail(bp, fmt::format("expected [rows, cols], got {} numbers", b.size()));
  q.block_rows = r.Int(b[0], bp[0], 1, kI64Max);
  q.block_cols = r.Int(b[1], bp[1], 1, kI64Max);
  const Path fp = p / "scale_format";
  q.scale_format = ParseScaleFormat(r.String(r.Required(j, p, "scale_format"), fp), r.file(), fp.Str());
  return q;
}

std::vector<QuantizeTile> ReadTiles(const json& j, const Path& p, const Reader& r) {
  r.Array(j, p);
  std::vector<QuantizeTile> tiles;
  tiles.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const Path ep = p[static_cast<int64_t>(i)];
    const json& e = j[i];
    r.Object(e, ep, {"tensor", "box", "input", "output", "scales"});
    QuantizeTile t;
    t.tensor = r.RequiredInt32(e, ep, "tensor", 0);
    t.box = ReadBox(r.Required(e, ep, "box"), ep / "box", r);
    t.input = ReadRegion(r.Required(e, ep, "input"), ep / "input", r);
    t.output = ReadRegion(r.Required(e, ep, "output"), ep / "output", r);
    t.scales = ReadRegion(r.Required(e, ep, "scales"), ep / "scales", r);
    tiles.push_back(t);
  }
  return tiles;
}

}  // namespace reshard::plan_json
