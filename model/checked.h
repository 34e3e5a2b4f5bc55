// Checked arithmetic on numbers that come from inputs: byte sizes, counts and
// nanoseconds. An overflow is the input's fault, so it throws InputError
// naming the file and the field instead of wrapping into a wrong answer.
#pragma once

#include <cstdint>
#include <string>

#include "model/error.h"

namespace reshard::checked {

// Where a number came from, for the message: the input file and the field.
struct Source {
  std::string file, field;
};

[[noreturn]] void ThrowOverflow(const Source& at, const char* op, int64_t a, int64_t b);

inline int64_t Add(int64_t a, int64_t b, const Source& at) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) ThrowOverflow(at, "+", a, b);
  return r;
}

inline int64_t Mul(int64_t a, int64_t b, const Source& at) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) ThrowOverflow(at, "x", a, b);
  return r;
}

// A double (bytes / bandwidth, seconds * 1e9) rounded to int64, or an input
// error when it is not finite or does not fit.
int64_t ToInt64(double v, const Source& at);

}  // namespace reshard::checked
