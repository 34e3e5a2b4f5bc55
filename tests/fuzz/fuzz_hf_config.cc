// libFuzzer target: ParseHfConfig (Hugging Face config.json reader) on
// arbitrary text, then BuildModel on what it accepts (parameter counts must
// not overflow silently).
#include <cstddef>
#include <cstdint>
#include <string>

#include "model/model.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  reshard::fuzz::ExpectOnlyInputError("fuzz_hf_config", [&] {
    reshard::ModelConfig c = reshard::ParseHfConfig(text, "fuzz/config.json");
    reshard::ModelSpec m = reshard::BuildModel(c, "fuzz/config.json");
    (void)m.Parameters();
  });
  return 0;
}
