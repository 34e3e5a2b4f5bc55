// Verify's checks of quantized content: the values / scales tensor pairs of
// PlanTensor::quant, and each tile of a quantize op (shapes against its box,
// whole blocks, no overlap between what it reads and writes). O(tensors) and
// O(1) per tile.
#pragma once

#include <string>
#include <vector>

#include "plan/plan.h"

namespace reshard {

std::vector<std::string> QuantTensorProblems(const Plan& p);
// The tile's regions are known to be well formed (Verify checks them first).
std::vector<std::string> QuantizeTileProblems(const Plan& p, const QuantizeTile& t);

}  // namespace reshard
