// Errors and invariant checks shared by every module.
//
// Two kinds of failure (abseil/LLVM discipline):
//  * InputError — the user's input is wrong (scenario, HF config, plan.json,
//    profile, flags). It names the file, the field and the problem; the CLI
//    turns it into exit code 2.
//  * InternalError — a broken invariant inside reshard (RESHARD_CHECK). It
//    names the source file and line; the CLI turns it into exit code 1.
// "Does not fit in memory" is not an error: it is a result (see Feasibility
// in model/memory.h) and the CLI exits 3.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace reshard {

class InputError : public std::runtime_error {
 public:
  // file: the input's path ("<cli>" for flags); field: dotted path of the
  // offending field ("source.tp"), empty when the whole file is bad.
  InputError(std::string file, std::string field, std::string problem);

  const std::string& file() const { return file_; }
  const std::string& field() const { return field_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string file_, field_, problem_;
};

class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] void FailCheck(const char* file, int line, const char* cond, const std::string& message);

// The closest of `candidates` to `name` by edit distance, or "" when none is
// close enough to be a useful suggestion ("did you mean 'llama3-8b'?").
std::string Suggest(std::string_view name, const std::vector<std::string>& candidates);

}  // namespace reshard

// Invariant check: on failure throws InternalError("file:line: check `cond` failed: msg").
#define RESHARD_CHECK(cond, ...)                                                   \
  do {                                                                             \
    if (!(cond)) ::reshard::FailCheck(__FILE__, __LINE__, #cond, std::string{__VA_ARGS__}); \
  } while (0)
