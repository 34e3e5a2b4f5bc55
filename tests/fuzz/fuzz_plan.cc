// libFuzzer target: the plan loaders on arbitrary text, then Verify on
// whatever loads. Two paths per input: PlanFromJson on a DOM parsed with
// nlohmann (non-JSON is skipped there), and ReadPlan (the streaming reader
// the CLI uses) on the same bytes written to a scratch file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// One scratch file per process (libFuzzer runs inputs sequentially).
const std::string& ScratchPath() {
  static const std::string path = [] {
    const char* dir = std::getenv("TMPDIR");
    std::string p = std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/reshard_fuzz_plan_XXXXXX";
    int fd = mkstemp(p.data());
    if (fd < 0) {
      std::perror("mkstemp");
      std::abort();
    }
    close(fd);
    std::atexit([] { std::remove(ScratchPath().c_str()); });
    return p;
  }();
  return path;
}

void CheckVerify(const reshard::Plan& p) {
  reshard::VerifyResult v = reshard::Verify(p);
  (void)v.ok();
  reshard::VerifyResult w = reshard::Verify(p, &p.cluster);
  (void)w.ok();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    reshard::fuzz::ExpectOnlyInputError("fuzz_plan(PlanFromJson)", [&] {
      CheckVerify(reshard::PlanFromJson(j, "fuzz/plan.json"));
    });
  }

  {
    std::ofstream out(ScratchPath(), std::ios::binary | std::ios::trunc);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  reshard::fuzz::ExpectOnlyInputError("fuzz_plan(ReadPlan)", [&] { CheckVerify(reshard::ReadPlan(ScratchPath())); });
  return 0;
}
