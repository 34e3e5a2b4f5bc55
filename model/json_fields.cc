// JSON field readers (see json_fields.h).
#include "model/json_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "model/error.h"

namespace reshard::json_fields {

using nlohmann::json;

std::string Dot(const std::string& a, std::string_view b) { return a.empty() ? std::string(b) : a + "." + std::string(b); }

[[noreturn]] void Bad(const std::string& file, const std::string& field, const std::string& problem) {
  throw InputError(file, field, problem);
}

std::string TypeName(const json& j) { return j.type_name(); }

void CheckObject(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_object()) Bad(file, field, fmt::format("expected an object, got {}", TypeName(j)));
}

void CheckKeys(const json& j, const std::string& file, const std::string& field,
               const std::vector<std::string>& allowed) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (std::find(allowed.begin(), allowed.end(), it.key()) != allowed.end()) continue;
    std::string problem = fmt::format("unknown field '{}'", it.key());
    std::string s = Suggest(it.key(), allowed);
    if (!s.empty()) problem += fmt::format(" (did you mean '{}'?)", s);
    Bad(file, Dot(field, it.key()), problem);
  }
}

const json& Need(const json& j, const std::string& key, const std::string& file, const std::string& field) {
  auto it = j.find(key);
  if (it == j.end()) Bad(file, Dot(field, key), "missing field");
  return *it;
}

int64_t GetInt(const json& j, const std::string& file, const std::string& field) {
  // Unsigned values above int64's range would wrap to negative numbers (and a
  // confusing "must be > 0"): refuse them as what they are.
  if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    Bad(file, field, fmt::format("{} is out of range (at most {})", j.dump(), std::numeric_limits<int64_t>::max()));
  if (j.is_number_integer()) return j.get<int64_t>();
  if (j.is_number_float()) {
    double d = j.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  Bad(file, field, fmt::format("expected an integer, got {} {}", TypeName(j), j.dump()));
}

double GetNumber(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_number()) Bad(file, field, fmt::format("expected a number, got {} {}", TypeName(j), j.dump()));
  double d = j.get<double>();
  if (!std::isfinite(d)) Bad(file, field, "must be finite");
  return d;
}

bool GetBool(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_boolean()) Bad(file, field, fmt::format("expected true or false, got {} {}", TypeName(j), j.dump()));
  return j.get<bool>();
}

std::string GetString(const json& j, const std::string& file, const std::string& field) {
  if (!j.is_string()) Bad(file, field, fmt::format("expected a string, got {} {}", TypeName(j), j.dump()));
  return j.get<std::string>();
}

}  // namespace reshard::json_fields
