#include "model/dtype.h"

#include <array>

#include "model/error.h"

namespace reshard {

namespace {
struct DTypeInfo {
  DType type;
  int64_t bytes;
  std::string_view name;
};
// Canonical names, in enum order.
constexpr std::array<DTypeInfo, 6> kDTypes{{
    {DType::kBF16, 2, "bf16"},
    {DType::kFP16, 2, "fp16"},
    {DType::kFP32, 4, "fp32"},
    {DType::kFP8E4M3, 1, "fp8_e4m3"},
    {DType::kFP8E5M2, 1, "fp8_e5m2"},
    {DType::kE8M0, 1, "e8m0"},
}};
// Aliases users write (PyTorch / HF spellings).
struct Alias {
  std::string_view name;
  DType type;
};
constexpr std::array<Alias, 8> kAliases{{
    {"bfloat16", DType::kBF16},
    {"float16", DType::kFP16},
    {"half", DType::kFP16},
    {"float32", DType::kFP32},
    {"float", DType::kFP32},
    {"fp8", DType::kFP8E4M3},
    {"float8_e4m3fn", DType::kFP8E4M3},
    {"float8_e5m2", DType::kFP8E5M2},
}};

const DTypeInfo& Info(DType t) {
  auto i = static_cast<size_t>(t);
  RESHARD_CHECK(i < kDTypes.size() && kDTypes[i].type == t, "unknown DType value");
  return kDTypes[i];
}
}  // namespace

int64_t DTypeBytes(DType t) { return Info(t).bytes; }

std::string_view DTypeName(DType t) { return Info(t).name; }

std::vector<std::string> DTypeNames() {
  std::vector<std::string> out;
  for (const auto& d : kDTypes) out.emplace_back(d.name);
  return out;
}

DType ParseDType(std::string_view name, const std::string& file, const std::string& field) {
  for (const auto& d : kDTypes)
    if (d.name == name) return d.type;
  for (const auto& a : kAliases)
    if (a.name == name) return a.type;
  std::vector<std::string> all = DTypeNames();
  for (const auto& a : kAliases) all.emplace_back(a.name);
  std::string problem = "unknown dtype '" + std::string(name) + "'";
  if (std::string s = Suggest(name, all); !s.empty()) problem += " (did you mean '" + s + "'?)";
  std::string list;
  for (const auto& n : DTypeNames()) list += (list.empty() ? "" : ", ") + n;
  problem += "; expected one of " + list;
  throw InputError(file, field, problem);
}

}  // namespace reshard
