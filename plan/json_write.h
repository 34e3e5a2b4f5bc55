// plan.json's big arrays written without a DOM (internal to plan/): one
// element's JSON appended to a string, the same bytes nlohmann's compact
// dump of the ordered_json that json.cc's writers build (keys in their
// order, default fields left out). A plan of 10^6 ops spent most of
// `reshard plan -o` building and freeing those DOMs (deepseek-v3 on 512
// GPUs: 510 MB, ~5 s). Each returns false, appending nothing, where the
// element holds what these leave to nlohmann: a string that needs escaping
// (not printable ASCII, or a quote or backslash) or an op's quantize
// tiles. O(element) each.
#pragma once

#include <string>

#include "plan/plan.h"

namespace reshard::plan_json {

bool AppendOpJson(std::string& out, const Op& op);
bool AppendBufferJson(std::string& out, const PlanBuffer& b);
bool AppendPieceJson(std::string& out, const ContentPiece& c);

}  // namespace reshard::plan_json
