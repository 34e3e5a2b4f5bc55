#include "model/quant.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/error.h"
#include "model/input_file.h"
#include "model/json_fields.h"

namespace reshard {

namespace {

template <class E, size_t N>
E ParseName(const std::array<std::pair<std::string_view, E>, N>& table, std::string_view name, std::string_view what,
            const std::string& file, const std::string& field) {
  std::vector<std::string> names;
  for (const auto& [n, e] : table) {
    if (n == name) return e;
    names.emplace_back(n);
  }
  std::string problem = fmt::format("unknown {} '{}'", what, name);
  if (std::string s = Suggest(name, names); !s.empty()) problem += fmt::format(" (did you mean '{}'?)", s);
  throw InputError(file, field, problem + fmt::format("; expected one of {}", fmt::join(names, ", ")));
}

template <class E, size_t N>
std::string_view NameOf(const std::array<std::pair<std::string_view, E>, N>& table, E e) {
  for (const auto& [n, v] : table)
    if (v == e) return n;
  RESHARD_CHECK(false, "unknown enum value");
  return "";
}

constexpr std::array<std::pair<std::string_view, QuantScheme>, 3> kSchemes{
    {{"block", QuantScheme::kBlock}, {"tensor", QuantScheme::kTensor}, {"mxfp8", QuantScheme::kMx}}};
constexpr std::array<std::pair<std::string_view, ScaleFormat>, 3> kScales{
    {{"fp32", ScaleFormat::kFP32}, {"ue8m0", ScaleFormat::kUE8M0}, {"e8m0", ScaleFormat::kE8M0}}};
constexpr std::array<std::pair<std::string_view, QuantClass>, 6> kClasses{{{"attention", QuantClass::kAttention},
                                                                           {"mlp", QuantClass::kMlp},
                                                                           {"experts", QuantClass::kExperts},
                                                                           {"router", QuantClass::kRouter},
                                                                           {"embedding", QuantClass::kEmbedding},
                                                                           {"lm_head", QuantClass::kLmHead}}};

}  // namespace

std::string_view QuantSchemeName(QuantScheme s) { return NameOf(kSchemes, s); }
std::string_view ScaleFormatName(ScaleFormat f) { return NameOf(kScales, f); }
std::string_view QuantClassName(QuantClass c) { return NameOf(kClasses, c); }
QuantScheme ParseQuantScheme(std::string_view name, const std::string& file, const std::string& field) {
  return ParseName(kSchemes, name, "quantization scheme", file, field);
}
ScaleFormat ParseScaleFormat(std::string_view name, const std::string& file, const std::string& field) {
  return ParseName(kScales, name, "scale format", file, field);
}
QuantClass ParseQuantClass(std::string_view name, const std::string& file, const std::string& field) {
  return ParseName(kClasses, name, "weight class", file, field);
}
DType ScaleDType(ScaleFormat f) { return f == ScaleFormat::kE8M0 ? DType::kE8M0 : DType::kFP32; }

std::optional<QuantClass> QuantClassOf(TensorKind k) {
  switch (k) {
    case TensorKind::kEmbedding: return QuantClass::kEmbedding;
    case TensorKind::kOutput: return QuantClass::kLmHead;
    case TensorKind::kAttnQ:
    case TensorKind::kAttnK:
    case TensorKind::kAttnV:
    case TensorKind::kAttnOut:
    case TensorKind::kMlaQDown:
    case TensorKind::kMlaQUp:
    case TensorKind::kMlaKvDown:
    case TensorKind::kMlaKvUp: return QuantClass::kAttention;
    case TensorKind::kMlpGate:
    case TensorKind::kMlpUp:
    case TensorKind::kMlpDown: return QuantClass::kMlp;
    case TensorKind::kRouter: return QuantClass::kRouter;
    case TensorKind::kExpertGate:
    case TensorKind::kExpertUp:
    case TensorKind::kExpertDown: return QuantClass::kExperts;
    case TensorKind::kNorm:
    case TensorKind::kAttnQBias:
    case TensorKind::kAttnKBias:
    case TensorKind::kAttnVBias:
    case TensorKind::kRouterBias: return std::nullopt;
  }
  return std::nullopt;
}

bool QuantConfig::Quantizes(TensorKind k) const {
  const auto c = QuantClassOf(k);
  return c && std::find(classes.begin(), classes.end(), *c) != classes.end();
}

std::string QuantConfigText(const QuantConfig& q) {
  std::vector<std::string_view> names;
  for (QuantClass c : q.classes) names.push_back(QuantClassName(c));
  std::string blocks = q.scheme == QuantScheme::kBlock ? fmt::format(" {}x{}", q.block_rows, q.block_cols) : "";
  return fmt::format("{}{} {} scales: {}", QuantSchemeName(q.scheme), blocks, ScaleFormatName(q.scale),
                     fmt::join(names, ", "));
}

Shape QuantGrid::ScaleShape(int32_t ndim) const {
  Shape s;
  s.ndim = ndim;
  if (ndim == 3) {
    s.dim[0] = planes;
    s.dim[1] = ScaleRows();
    s.dim[2] = ScaleCols();
  } else {
    s.dim[0] = ScaleRows();
    s.dim[1] = ScaleCols();
  }
  return s;
}

QuantGrid GridOf(int64_t block_rows, int64_t block_cols, const Shape& shape) {
  RESHARD_CHECK(shape.ndim == 2 || shape.ndim == 3, "only 2-D and 3-D tensors are quantized");
  QuantGrid g;
  const int r = shape.ndim - 2;
  g.planes = shape.ndim == 3 ? shape.dim[0] : 1;
  g.rows = shape.dim[r];
  g.cols = shape.dim[r + 1];
  g.block_rows = std::max<int64_t>(block_rows, 1);
  g.block_cols = std::max<int64_t>(block_cols, 1);
  return g;
}

QuantGrid GridOf(const QuantConfig& q, const Shape& shape) {
  switch (q.scheme) {
    case QuantScheme::kBlock: return GridOf(q.block_rows, q.block_cols, shape);
    case QuantScheme::kMx: return GridOf(1, 32, shape);
    case QuantScheme::kTensor: {
      QuantGrid g = GridOf(1, 1, shape);
      g.block_rows = g.rows;
      g.block_cols = g.cols;
      return g;
    }
  }
  return {};
}

bool CoversWholeBlocks(const QuantGrid& g, const Box& b, int32_t ndim) {
  const int r = ndim - 2;
  auto whole = [](int64_t lo, int64_t hi, int64_t block, int64_t dim) {
    return lo % block == 0 && (hi % block == 0 || hi == dim);
  };
  return whole(b.lo[r], b.hi[r], g.block_rows, g.rows) && whole(b.lo[r + 1], b.hi[r + 1], g.block_cols, g.cols);
}

Box ScaleBox(const QuantGrid& g, const Box& b, int32_t ndim) {
  Box s = b;
  const int r = ndim - 2;
  s.lo[r] = b.lo[r] / g.block_rows;
  s.hi[r] = (b.hi[r] + g.block_rows - 1) / g.block_rows;
  s.lo[r + 1] = b.lo[r + 1] / g.block_cols;
  s.hi[r + 1] = (b.hi[r + 1] + g.block_cols - 1) / g.block_cols;
  return s;
}

std::optional<QuantConfig> ParseHfQuantization(const std::string& json_text, const std::string& path) {
  using namespace json_fields;
  nlohmann::json j;
  try {
    j = ParseJsonInput(json_text, path);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path, "", fmt::format("invalid JSON: {}", e.what()));
  }
  if (!j.is_object() || !j.contains("quantization_config") || j["quantization_config"].is_null()) return std::nullopt;
  const std::string f = "quantization_config";
  const nlohmann::json& q = j["quantization_config"];
  CheckObject(q, path, f);
  const std::string method = GetString(Need(q, "quant_method", path, f), path, Dot(f, "quant_method"));
  if (method != "fp8")
    Bad(path, Dot(f, "quant_method"),
        fmt::format("'{}' is not modelled; only fp8 (E4M3 with block or per-tensor scales) is", method));
  if (q.contains("fmt")) {
    const std::string fmt_name = GetString(q["fmt"], path, Dot(f, "fmt"));
    if (fmt_name != "e4m3") Bad(path, Dot(f, "fmt"), fmt::format("'{}': only e4m3 is modelled", fmt_name));
  }
  QuantConfig c;
  if (q.contains("weight_block_size") && !q["weight_block_size"].is_null()) {
    const nlohmann::json& b = q["weight_block_size"];
    const std::string bf = Dot(f, "weight_block_size");
    if (!b.is_array() || b.size() != 2) Bad(path, bf, "expected [rows, cols], two positive numbers");
    c.block_rows = GetInt(b[0], path, bf + "[0]");
    c.block_cols = GetInt(b[1], path, bf + "[1]");
    if (c.block_rows < 1 || c.block_cols < 1) Bad(path, bf, "block sizes must be >= 1");
  } else {
    c.scheme = QuantScheme::kTensor;
  }
  if (q.contains("scale_fmt") && !q["scale_fmt"].is_null()) {
    const std::string s = GetString(q["scale_fmt"], path, Dot(f, "scale_fmt"));
    if (s != "ue8m0") Bad(path, Dot(f, "scale_fmt"), fmt::format("'{}': expected ue8m0 (or no scale_fmt: fp32)", s));
    c.scale = ScaleFormat::kUE8M0;
  }
  return c;
}

std::optional<QuantConfig> ReadHfQuantization(const std::string& path) {
  return ParseHfQuantization(ReadInputFile(path, "Hugging Face config"), path);
}

}  // namespace reshard
