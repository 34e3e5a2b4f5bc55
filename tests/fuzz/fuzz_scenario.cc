// libFuzzer target: ParseScenario on arbitrary text (YAML, or JSON by
// content). The scenario "lives" in tests/data/scenarios/ so that relative
// hf_config / calibration paths in the seeds resolve to real files.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/scenario.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  reshard::fuzz::ExpectOnlyInputError("fuzz_scenario", [&] {
    reshard::Scenario s = reshard::ParseScenario(text, RESHARD_FUZZ_SCENARIO_PATH);
    (void)s.cluster.Gpus();
  });
  return 0;
}
