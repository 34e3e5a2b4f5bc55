// The scenario reader's field readers, shared by the files that parse parts of
// a scenario (scenario.cc, scenario_quant.cc): a YAML node read as a number,
// size, string or mapping with every error naming the file, the field and the
// line. Internal to model/.
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include "model/cluster.h"
#include "model/error.h"
#include "model/quant.h"
#include "model/scenario.h"

namespace reshard::scenario_detail {

namespace fs = std::filesystem;

inline std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

inline std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

inline bool LooksNonFinite(std::string_view s) {
  std::string l = Lower(Trim(s));
  if (!l.empty() && (l[0] == '+' || l[0] == '-')) l.erase(0, 1);
  if (!l.empty() && l[0] == '.') l.erase(0, 1);
  return l == "nan" || l == "inf" || l == "infinity";
}

inline std::string WithSuggestion(std::string problem, std::string_view name, const std::vector<std::string>& candidates) {
  std::string s = Suggest(name, candidates);
  if (!s.empty()) problem += fmt::format(" (did you mean '{}'?)", s);
  return problem;
}


inline std::string Dot(const std::string& a, std::string_view b) { return a.empty() ? std::string(b) : a + "." + std::string(b); }

class Reader {
 public:
  Reader(std::string file, fs::path dir) : file_(std::move(file)), dir_(std::move(dir)) {}

  const std::string& file() const { return file_; }

  [[noreturn]] void Fail(const std::string& field, const YAML::Node& n, const std::string& problem) const {
    std::string p = problem;
    if (n.IsDefined() && !n.Mark().is_null()) p += fmt::format(" (line {})", n.Mark().line + 1);
    throw InputError(file_, field, p);
  }

  static std::string Describe(const YAML::Node& n) {
    if (!n.IsDefined() || n.IsNull()) return "nothing";
    if (n.IsMap()) return "a mapping";
    if (n.IsSequence()) return "a list";
    return fmt::format("'{}'", n.Scalar());
  }

  void NeedMap(const YAML::Node& n, const std::string& field) const {
    if (!n.IsMap()) Fail(field, n, fmt::format("expected a mapping, got {}", Describe(n)));
  }

  // Every key must be one of `allowed` and appear once.
  void CheckKeys(const YAML::Node& n, const std::string& field, const std::vector<std::string>& allowed) const {
    NeedMap(n, field);
    std::set<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar()) Fail(field, it->first, "keys must be plain names");
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        std::string problem = WithSuggestion(fmt::format("unknown field '{}'", key), key, allowed);
        problem += fmt::format("; allowed: {}", fmt::join(allowed, ", "));
        Fail(Dot(field, key), it->first, problem);
      }
      if (!seen.insert(key).second) Fail(Dot(field, key), it->first, fmt::format("field '{}' appears twice", key));
    }
  }

  std::string Scalar(const YAML::Node& n, const std::string& field, std::string_view what) const {
    if (!n.IsScalar()) Fail(field, n, fmt::format("expected {}, got {}", what, Describe(n)));
    return n.Scalar();
  }

  std::string String(const YAML::Node& n, const std::string& field) const {
    std::string s = Scalar(n, field, "a string");
    if (Trim(s).empty()) Fail(field, n, "must not be empty");
    return s;
  }

  int64_t Int(const YAML::Node& n, const std::string& field, int64_t min, int64_t max) const {
    std::string s(Trim(Scalar(n, field, "a whole number")));
    int64_t v = 0;
    const char* b = s.data();
    const char* e = s.data() + s.size();
    if (!s.empty() && *b == '+') ++b;
    auto [ptr, ec] = std::from_chars(b, e, v);
    if (ec == std::errc::result_out_of_range) Fail(field, n, fmt::format("'{}' is out of range", s));
    if (ec != std::errc() || ptr != e || b == e) {
      if (LooksNonFinite(s)) Fail(field, n, fmt::format("expected a whole number, got '{}' (not finite)", s));
      Fail(field, n, fmt::format("expected a whole number, got '{}'", s));
    }
    if (v < min) Fail(field, n, fmt::format("must be >= {}, got {}", min, v));
    if (v > max) Fail(field, n, fmt::format("must be <= {}, got {}", max, v));
    return v;
  }

  int32_t Positive(const YAML::Node& n, const std::string& field) const {
    return static_cast<int32_t>(Int(n, field, 1, std::numeric_limits<int32_t>::max()));
  }

  double Number(const YAML::Node& n, const std::string& field, double min, double max) const {
    std::string s(Trim(Scalar(n, field, "a number")));
    if (LooksNonFinite(s)) Fail(field, n, fmt::format("must be a finite number, got '{}'", s));
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size()) Fail(field, n, fmt::format("expected a number, got '{}'", s));
    if (!std::isfinite(v)) Fail(field, n, fmt::format("must be a finite number, got '{}'", s));
    if (v < min) Fail(field, n, fmt::format("must be >= {}, got {}", min, s));
    if (v > max) Fail(field, n, fmt::format("must be <= {}, got {}", max, s));
    return v;
  }

  bool Bool(const YAML::Node& n, const std::string& field) const {
    std::string s = Lower(Trim(Scalar(n, field, "true or false")));
    if (s == "true" || s == "yes" || s == "on") return true;
    if (s == "false" || s == "no" || s == "off") return false;
    Fail(field, n, fmt::format("expected true or false, got '{}'", n.Scalar()));
  }

  int64_t Bytes(const YAML::Node& n, const std::string& field) const {
    std::string s = Scalar(n, field, "a size (e.g. 256MiB, 4 GiB, 1.5GB or a number of bytes)");
    try {
      return ParseBytes(s, file_, field);
    } catch (const InputError& e) {
      Fail(field, n, e.problem());
    }
  }

  // Size in GiB given as a number (kv_cache_gib: 10).
  int64_t Gib(const YAML::Node& n, const std::string& field) const {
    // At most 1 PiB (2^20 GiB) per GPU, so that memory totals cannot overflow.
    double v = Number(n, field, 0, static_cast<double>(kMaxMemoryBytes >> 30));
    return static_cast<int64_t>(std::llround(v * static_cast<double>(int64_t{1} << 30)));
  }

  // Paths in a scenario are relative to the scenario file.
  std::string Path(const YAML::Node& n, const std::string& field) const {
    fs::path p = String(n, field);
    if (p.is_relative()) p = dir_ / p;
    return p.lexically_normal().string();
  }

 private:
  std::string file_;
  fs::path dir_;
};

// destination.quantization (scenario_quant.cc): sets s.quantization when the
// destination is fp8_e4m3, from the field, else from `hf` (the model's
// quantization_config), else the default (128 x 128 blocks, fp32 scales).
void ParseQuantization(const Reader& r, const YAML::Node& dest, const std::optional<QuantConfig>& hf, Scenario& s);

}  // namespace reshard::scenario_detail
