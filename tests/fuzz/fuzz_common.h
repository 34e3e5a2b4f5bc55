// Shared outcome policy of the libFuzzer targets (docs/fuzzing.md): an
// InputError is the expected answer to bad input; anything else that escapes
// (InternalError, std::exception, a crash, a sanitizer report, a hang) is a
// finding. Findings abort so libFuzzer saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "model/error.h"

namespace reshard::fuzz {

// Runs body(); swallows InputError, aborts with a message on anything else.
template <typename Body>
void ExpectOnlyInputError(const char* target, Body&& body) {
  try {
    body();
  } catch (const InputError&) {
    // Expected: bad input rejected with file/field/problem.
  } catch (const InternalError& e) {
    std::fprintf(stderr, "%s: InternalError escaped: %s\n", target, e.what());
    std::abort();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: non-InputError exception escaped: %s\n", target, e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "%s: unknown exception escaped\n", target);
    std::abort();
  }
}

}  // namespace reshard::fuzz
