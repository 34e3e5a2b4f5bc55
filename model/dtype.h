// Element types of weights and their sizes in bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace reshard {

// kE8M0: a power-of-two scale, one byte of biased exponent (OCP MX scales).
enum class DType : uint8_t { kBF16, kFP16, kFP32, kFP8E4M3, kFP8E5M2, kE8M0 };

int64_t DTypeBytes(DType t);
std::string_view DTypeName(DType t);  // "bf16", "fp16", "fp32", "fp8_e4m3", "fp8_e5m2", "e8m0"
// Parses a name (also "bfloat16", "float16", "float32", "fp8" = e4m3);
// throws InputError(file, field, ...) on an unknown name, with a suggestion.
DType ParseDType(std::string_view name, const std::string& file, const std::string& field);
std::vector<std::string> DTypeNames();

}  // namespace reshard
