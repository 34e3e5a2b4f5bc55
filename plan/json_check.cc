// CheckPlanSyntax (json_fast.h): nlohmann's diagnosis of plan text the fast
// scanner found invalid, with the checks the DOM reader makes while parsing
// (nesting depth, duplicate keys; same messages and paths) and no DOM, so
// a syntax error at the end of a plan of hundreds of MB is named in seconds.
#include <set>
#include <string>
#include <vector>

#include "model/input_file.h"
#include "plan/json_fast.h"

namespace reshard::plan_json {
namespace {

// nlohmann's parse with only the checks PlanSax makes while parsing: depth and
// duplicate keys, with the same messages; nothing is built.
class CheckSax : public PlanSaxBase {
 public:
  explicit CheckSax(const Reader& r) : PlanSaxBase(r) {}

  bool null() override { return Value(); }
  bool boolean(bool /*v*/) override { return Value(); }
  bool number_integer(number_integer_t /*v*/) override { return Value(); }
  bool number_unsigned(number_unsigned_t /*v*/) override { return Value(); }
  bool number_float(number_float_t /*v*/, const string_t& /*text*/) override { return Value(); }
  bool string(string_t& /*v*/) override { return Value(); }
  bool binary(binary_t& /*v*/) override { return Value(); }
  bool start_object(std::size_t /*n*/) override { return Open(true); }
  bool start_array(std::size_t /*n*/) override { return Open(false); }
  bool key(string_t& k) override {
    if (!frames_[depth_ - 1].Insert(k)) DuplicateKey(k);
    if (depth_ == 1 && k != top_key_) top_key_ = k, converted_ = 0;
    return true;
  }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

 private:
  // An open container; an object's keys, kept for reuse across objects
  // (a few per object: a linear scan, a set beyond 16).
  struct Frame {
    bool object = false;
    std::vector<std::string> keys;
    size_t used = 0;
    std::set<std::string> many;
    bool Insert(const std::string& k) {
      if (used < 16) {
        for (size_t i = 0; i < used; ++i)
          if (keys[i] == k) return false;
        if (used < keys.size()) keys[used] = k;
        else keys.push_back(k);
        ++used;
        return true;
      }
      if (many.empty())
        for (size_t i = 0; i < used; ++i) many.insert(keys[i]);
      return many.insert(k).second;
    }
  };
  bool Value() {
    if (InStreamedArray()) ++converted_;
    return true;
  }
  bool Open(bool object) {
    CheckDepth(depth_);
    if (depth_ == frames_.size()) frames_.emplace_back();
    Frame& f = frames_[depth_++];
    f.object = object;
    f.used = 0;
    f.many.clear();
    return true;
  }
  bool Close() {
    --depth_;
    return Value();
  }
  bool InStreamedArray() const {
    return depth_ == 2 && frames_[0].object && !frames_[1].object && IsStreamedKey(top_key_);
  }
  std::string PathOfTop() const override {
    const bool in_array = depth_ >= 2 && !frames_[1].object;
    return TopPath(depth_, in_array, top_key_, converted_);
  }

  std::vector<Frame> frames_;  // frames_[0, depth_) are open
  size_t depth_ = 0;
  std::string top_key_;
  size_t converted_ = 0;  // elements of top_key_'s array completed
};

}  // namespace

SyntaxCheck CheckPlanSyntax(const std::string& text, const Reader& r) {
  CheckSax sax(r);
  SyntaxCheck c;
  c.ok = json::sax_parse(text, &sax, json::input_format_t::json, /*strict=*/true);
  c.error_message = std::move(sax.error_message);
  c.error_byte = sax.error_byte;
  return c;
}

}  // namespace reshard::plan_json
