// The destination's quantization (destination.quantization, or a Hugging Face
// config's quantization_config) read into Scenario::quantization.
#include "model/quant.h"
#include "model/scenario_reader.h"

namespace reshard::scenario_detail {

void ParseQuantization(const Reader& r, const YAML::Node& dest, const std::optional<QuantConfig>& hf, Scenario& s) {
  const std::string f = "destination.quantization";
  const YAML::Node n = dest["quantization"];
  if (s.destination_dtype == DType::kFP8E5M2 || s.destination_dtype == DType::kE8M0)
    r.Fail("destination.dtype", dest["dtype"],
           fmt::format("{} destinations are not modelled; a refit quantizes to fp8_e4m3", DTypeName(s.destination_dtype)));
  if (s.destination_dtype != DType::kFP8E4M3) {
    if (n) r.Fail(f, n, fmt::format("needs destination.dtype: fp8_e4m3 (it is {})", DTypeName(s.destination_dtype)));
    return;
  }
  QuantConfig q = hf.value_or(QuantConfig{});
  if (n) {
    r.CheckKeys(n, f, {"scheme", "block", "scale", "classes"});
    if (n["scheme"]) {
      q.scheme = ParseQuantScheme(r.String(n["scheme"], Dot(f, "scheme")), r.file(), Dot(f, "scheme"));
      q.scale = q.scheme == QuantScheme::kMx ? ScaleFormat::kE8M0 : ScaleFormat::kFP32;
    }
    if (n["block"]) {
      if (q.scheme != QuantScheme::kBlock) r.Fail(Dot(f, "block"), n["block"], "only the block scheme has a block size");
      const YAML::Node b = n["block"];
      if (!b.IsSequence() || b.size() != 2) r.Fail(Dot(f, "block"), b, "expected [rows, cols], e.g. [128, 128]");
      q.block_rows = r.Int(b[0], Dot(f, "block[0]"), 1, int64_t{1} << 20);
      q.block_cols = r.Int(b[1], Dot(f, "block[1]"), 1, int64_t{1} << 20);
    }
    if (n["scale"]) q.scale = ParseScaleFormat(r.String(n["scale"], Dot(f, "scale")), r.file(), Dot(f, "scale"));
    if (n["classes"]) {
      const YAML::Node c = n["classes"];
      if (!c.IsSequence()) r.Fail(Dot(f, "classes"), c, "expected a list, e.g. [attention, mlp, experts]");
      q.classes.clear();
      for (size_t i = 0; i < c.size(); ++i) {
        const std::string fi = fmt::format("{}.classes[{}]", f, i);
        const QuantClass k = ParseQuantClass(r.String(c[i], fi), r.file(), fi);
        if (std::find(q.classes.begin(), q.classes.end(), k) != q.classes.end())
          r.Fail(fi, c[i], fmt::format("'{}' is listed twice", QuantClassName(k)));
        q.classes.push_back(k);
      }
    }
  }
  if (q.scheme == QuantScheme::kMx && q.scale != ScaleFormat::kE8M0)
    r.Fail(Dot(f, "scale"), n ? n["scale"] : n, "mxfp8 scales are e8m0");
  if (q.scheme == QuantScheme::kTensor && q.scale != ScaleFormat::kFP32)
    r.Fail(Dot(f, "scale"), n ? n["scale"] : n, "per-tensor scales are fp32");
  s.quantization = q;
}

}  // namespace reshard::scenario_detail
