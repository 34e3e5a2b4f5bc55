// The plan reader's field readers (JSON paths built on the stack, typed
// reads that throw InputError naming the path), shared by json.cc and
// json_quant.cc. Internal to plan/.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "model/box.h"
#include "model/error.h"
#include "plan/plan.h"

namespace reshard::plan_json {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------- paths

// A JSON path built on the stack and turned into text only on error, so
// reading 10^6 ops allocates no path strings.
struct Path {
  const Path* parent = nullptr;
  const char* key = nullptr;  // member name, or
  int64_t index = -1;         // array index (when key is null)

  Path operator/(const char* k) const { return Path{this, k, -1}; }
  Path operator[](int64_t i) const { return Path{this, nullptr, i}; }
  std::string Str() const {
    std::vector<const Path*> chain;
    for (const Path* q = this; q != nullptr; q = q->parent) chain.push_back(q);
    std::string s;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const Path* q = *it;
      if (q->key != nullptr) {
        if (!s.empty()) s += '.';
        s += q->key;
      } else if (q->index >= 0) {
        s += fmt::format("[{}]", q->index);
      }
    }
    return s;
  }
};

// The top-level arrays the readers convert element by element; and TopPath
// names the container on top of a SAX parse's stack for duplicate-key and
// depth errors, as far as cheaply known: "" at the top level, "ops[12]" in
// an element of a top-level array (`converted` elements before it), with
// "..." when nested deeper.
inline bool IsStreamedKey(std::string_view k) {
  return k == "tensors" || k == "buffers" || k == "ops" || k == "sources" || k == "destinations";
}
inline std::string TopPath(size_t depth, bool second_is_array, const std::string& top_key, size_t converted) {
  if (depth <= 1) return "";
  std::string s = top_key;
  if (depth >= 3 && second_is_array && IsStreamedKey(top_key)) s += fmt::format("[{}]", converted);
  if (depth > 3) s += "...";
  return s;
}

inline std::string Preview(const json& v) {
  if (v.is_object()) return "an object";
  if (v.is_array()) return "an array";
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 40) s = s.substr(0, 37) + "...";
  return fmt::format("{} {}", v.type_name(), s);
}

// ---------------------------------------------------------------- reading helpers

class Reader {
 public:
  explicit Reader(const std::string& file) : file_(file) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void Fail(const Path& p, const std::string& problem) const {
    throw InputError(file_, p.Str(), problem);
  }

  // `j` must be an object whose keys are all in `allowed`.
  void Object(const json& j, const Path& p, std::initializer_list<std::string_view> allowed) const {
    if (!j.is_object()) Fail(p, "expected an object, got " + Preview(j));
    for (const auto& [key, value] : j.items()) {
      if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
      std::vector<std::string> names(allowed.begin(), allowed.end());
      std::string hint = Suggest(key, names);
      std::string field = p.Str();
      field += field.empty() ? key : "." + key;
      throw InputError(file_, field,
                       hint.empty() ? "unknown field" : fmt::format("unknown field (did you mean '{}'?)", hint));
    }
  }

  static const json* Find(const json& obj, const char* key) {
    auto it = obj.find(key);
    return it == obj.end() ? nullptr : &*it;
  }
  const json& Required(const json& obj, const Path& p, const char* key) const {
    const json* v = Find(obj, key);
    if (v == nullptr) Fail(p / key, "required field is missing");
    return *v;
  }

  int64_t Int(const json& v, const Path& p, int64_t lo, int64_t hi) const {
    int64_t x = 0;
    if (v.is_number_unsigned()) {
      uint64_t u = v.get<uint64_t>();
      if (u > static_cast<uint64_t>(kI64Max)) Fail(p, fmt::format("{} is out of range", u));
      x = static_cast<int64_t>(u);
    } else if (v.is_number_integer()) {
      x = v.get<int64_t>();
    } else if (v.is_number_float()) {
      // Accept integral floats (1e9 from Python) that are exact in a double.
      double d = v.get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9007199254740992.0)
        Fail(p, "expected an integer, got " + Preview(v));
      x = static_cast<int64_t>(d);
    } else {
      Fail(p, "expected an integer, got " + Preview(v));
    }
    if (x < lo || x > hi) {
      if (hi == kI64Max || hi == kI32Max)
        Fail(p, fmt::format("must be >= {}, got {}", lo, x) + (x > hi ? " (too large)" : ""));
      Fail(p, fmt::format("must be in [{}, {}], got {}", lo, hi, x));
    }
    return x;
  }
  int64_t Int(const json& obj, const Path& p, const char* key, int64_t def, int64_t lo, int64_t hi) const {
    const json* v = Find(obj, key);
    return v == nullptr ? def : Int(*v, p / key, lo, hi);
  }
  int64_t RequiredInt(const json& obj, const Path& p, const char* key, int64_t lo, int64_t hi) const {
    return Int(Required(obj, p, key), p / key, lo, hi);
  }
  int32_t Int32(const json& obj, const Path& p, const char* key, int32_t def, int64_t lo) const {
    return static_cast<int32_t>(Int(obj, p, key, def, lo, kI32Max));
  }
  int32_t RequiredInt32(const json& obj, const Path& p, const char* key, int64_t lo) const {
    return static_cast<int32_t>(RequiredInt(obj, p, key, lo, kI32Max));
  }

  double Double(const json& obj, const Path& p, const char* key, double def, double lo, double hi) const {
    const json* v = Find(obj, key);
    if (v == nullptr) return def;
    if (!v->is_number()) Fail(p / key, "expected a number, got " + Preview(*v));
    double d = v->get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) {
      if (std::isinf(hi)) Fail(p / key, fmt::format("must be a finite number >= {}, got {}", lo, d));
      Fail(p / key, fmt::format("must be in [{}, {}], got {}", lo, hi, d));
    }
    return d;
  }

  std::string String(const json& v, const Path& p) const {
    if (!v.is_string()) Fail(p, "expected a string, got " + Preview(v));
    return v.get<std::string>();
  }
  std::string String(const json& obj, const Path& p, const char* key, const std::string& def) const {
    const json* v = Find(obj, key);
    return v == nullptr ? def : String(*v, p / key);
  }

  bool Bool(const json& obj, const Path& p, const char* key, bool def) const {
    const json* v = Find(obj, key);
    if (v == nullptr) return def;
    if (!v->is_boolean()) Fail(p / key, "expected true or false, got " + Preview(*v));
    return v->get<bool>();
  }

  const json& Array(const json& v, const Path& p) const {
    if (!v.is_array()) Fail(p, "expected an array, got " + Preview(v));
    return v;
  }

  template <class E, size_t N>
  E Enum(const json& v, const Path& p, const std::array<E, N>& values, std::string_view (*name)(E)) const {
    if (!v.is_string()) Fail(p, "expected a string, got " + Preview(v));
    const auto& s = v.get_ref<const std::string&>();
    for (E e : values)
      if (name(e) == s) return e;
    std::vector<std::string> names;
    for (E e : values) names.emplace_back(name(e));
    std::string hint = Suggest(s, names);
    Fail(p, fmt::format("unknown value '{}'{} (one of: {})", s,
                        hint.empty() ? "" : fmt::format(", did you mean '{}'?", hint), fmt::join(names, ", ")));
  }

 private:
  const std::string& file_;
};


// A box as [[lo, hi], ...], at most kMaxDims entries, hi >= lo.
Box ReadBox(const json& j, const Path& p, const Reader& r);

// PlanTensor::quant and Op::tiles (json_quant.cc); the writers return null
// / an empty array for a plain tensor / an op without tiles.
TensorQuant ReadTensorQuant(const json& j, const Path& p, const Reader& r);
std::vector<QuantizeTile> ReadTiles(const json& j, const Path& p, const Reader& r);
Region ReadRegion(const json& j, const Path& p, const Reader& r);

// Writers are templates so WritePlan can use ordered_json (readable key
// order in files) and PlanToJson plain json. Default-valued fields are
// omitted where the reader restores them exactly.
template <class J>
J RegionToJson(const Region& g) {
  J j;
  j["buffer"] = g.buffer;
  j["offset_bytes"] = g.offset_bytes;
  j["row_bytes"] = g.row_bytes;
  if (g.rows != 1) j["rows"] = g.rows;
  if (g.row_stride_bytes != 0) j["row_stride_bytes"] = g.row_stride_bytes;
  if (g.planes != 1) j["planes"] = g.planes;
  if (g.plane_stride_bytes != 0) j["plane_stride_bytes"] = g.plane_stride_bytes;
  return j;
}

template <class J>
J BoxToJson(const Box& b) {
  J box = J::array();
  for (int d = 0; d < std::clamp(b.ndim, 0, kMaxDims); ++d) box.push_back(J::array({b.lo[d], b.hi[d]}));
  return box;
}

template <class J>
J TensorQuantToJson(const TensorQuant& q) {
  J j;
  j["role"] = q.role == QuantRole::kValues ? "values" : "scales";
  j["of"] = q.of;
  if (q.role == QuantRole::kValues) {
    j["scales"] = q.scales;
    j["block"] = J::array({q.block_rows, q.block_cols});
    j["scale_format"] = ScaleFormatName(q.scale_format);
  }
  return j;
}

template <class J>
J TilesToJson(const std::vector<QuantizeTile>& tiles) {
  J a = J::array();
  for (const QuantizeTile& t : tiles) {
    J e;
    e["tensor"] = t.tensor;
    e["box"] = BoxToJson<J>(t.box);
    e["input"] = RegionToJson<J>(t.input);
    e["output"] = RegionToJson<J>(t.output);
    e["scales"] = RegionToJson<J>(t.scales);
    a.push_back(std::move(e));
  }
  return a;
}

}  // namespace reshard::plan_json
