// What quantization means to a run: the jobs a quantize op's tiles become
// (executor/quantize_math.h), the content maps of pieces of quantized
// tensors, and the expected bytes of fp8 values and scales computed on the
// host from the fill pattern with the kernels' own arithmetic.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "executor/pattern.h"
#include "executor/quantize_math.h"
#include "plan/plan.h"

namespace reshard {

QuantizeJob QuantizeJobOf(const Plan& p, const QuantizeTile& t);
std::vector<QuantizeJob> QuantizeJobsOf(const Plan& p, const Op& op);

// Per tensor: 1 when a values tensor quantizes it (its sources are filled
// with FiniteBf16Pattern).
std::vector<int8_t> QuantizedSources(const Plan& p);
// The map of content piece `c`: plain, finite bf16, or quantized values /
// scales (PieceMap::quant).
PieceMap ContentMapOf(const Plan& p, const ContentPiece& c, const std::vector<int8_t>& quantized_sources);

// Expected element bits of a piece whose map has quant.role != 0. Block
// scales are computed once per block and kept in `scales` (key: block index).
// O(block elements) per new block, O(1) after.
class QuantExpectation {
 public:
  explicit QuantExpectation(const PieceMap& m) : m_(m) {}
  uint64_t Value(int64_t global_index);

 private:
  float Scale(int64_t plane, int64_t i, int64_t j);
  const PieceMap& m_;
  std::unordered_map<int64_t, float> scales_;
};

}  // namespace reshard
