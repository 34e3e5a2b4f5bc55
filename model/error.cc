#include "model/error.h"

#include <algorithm>
#include <numeric>

namespace reshard {

namespace {
std::string Compose(const std::string& file, const std::string& field, const std::string& problem) {
  std::string out = file;
  if (!field.empty()) out += ": " + field;
  out += ": " + problem;
  return out;
}

// Levenshtein distance, O(|a|·|b|).
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

InputError::InputError(std::string file, std::string field, std::string problem)
    : std::runtime_error(Compose(file, field, problem)),
      file_(std::move(file)),
      field_(std::move(field)),
      problem_(std::move(problem)) {}

void FailCheck(const char* file, int line, const char* cond, const std::string& message) {
  std::string what = std::string(file) + ":" + std::to_string(line) + ": check `" + cond + "` failed";
  if (!message.empty()) what += ": " + message;
  throw InternalError(what);
}

std::string Suggest(std::string_view name, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::string::npos;
  for (const auto& c : candidates) {  // candidates order breaks ties: deterministic
    size_t d = EditDistance(name, c);
    if (d < best_d) best_d = d, best = c;
  }
  // Useful only when reasonably close: at most a third of the longer word.
  size_t limit = std::max<size_t>(2, std::max(name.size(), best.size()) / 3);
  return best_d <= limit ? best : std::string{};
}

}  // namespace reshard
