// libFuzzer target: JSON scenarios. ParseScenario reads a text starting with
// '{' as JSON (nesting capped, duplicate keys refused, then the YAML reader's
// checks); this target keeps every input on that path by prefixing '{' when
// the fuzzer's bytes do not start with it, so mutations explore the JSON
// reader and the scenario checks behind it rather than the YAML parser.
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/scenario.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (text.empty() || text.front() != '{') text.insert(text.begin(), '{');
  reshard::fuzz::ExpectOnlyInputError("fuzz_scenario_json", [&] {
    reshard::Scenario s = reshard::ParseScenario(text, RESHARD_FUZZ_SCENARIO_PATH);
    (void)s.cluster.Gpus();
  });
  return 0;
}
