// Built-in scenarios: the text of scenarios/*.yaml embedded at build time
// (model/CMakeLists.txt reads the files and fills builtin_scenarios.cc.in),
// so the YAML files are the one source of truth. Internal to reshard_model.
#pragma once

#include <cstddef>

namespace reshard::detail {

struct BuiltinScenarioText {
  const char* name;  // file stem: scenarios/<name>.yaml
  const char* yaml;  // the file's text
};

extern const BuiltinScenarioText kBuiltinScenarios[];
extern const size_t kBuiltinScenarioCount;

}  // namespace reshard::detail
