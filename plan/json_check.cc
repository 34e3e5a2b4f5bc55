// CheckPlanSyntax (json_fast.h): nlohmann's diagnosis of plan text the fast
// scanner found invalid, with the checks the DOM reader makes while parsing
// (nesting depth, duplicate keys; same messages and paths) and no DOM, so
// a syntax error at the end of a plan of hundreds of MB is named in seconds.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "model/input_file.h"
#include "plan/json_fast.h"

namespace reshard::plan_json {
namespace {

// nlohmann's parse with only the checks PlanSax makes while parsing: depth and
// duplicate keys, with the same messages; nothing is built.
class CheckSax : public nlohmann::json_sax<json> {
 public:
  explicit CheckSax(const Reader& r) : r_(r) {}
  std::string error_message;
  size_t error_byte = 0;

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
    auto& keys = stack_.back().keys;
    if (!keys.insert(k).second) {
      std::string field = PathOfTop();
      field += field.empty() ? k : "." + k;
      throw InputError(r_.file(), field, "duplicate field");
    }
    if (stack_.size() == 1) top_key_ = k;
    return true;
  }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }
  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) override {
    error_byte = position;
    error_message = ex.what();
    return false;
  }

 private:
  struct Frame {
    bool object = false;
    std::set<std::string> keys;
  };
  bool Value() {
    if (InStreamedArray()) ++converted_[top_key_];
    return true;
  }
  bool Open(bool object) {
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth))
      throw InputError(r_.file(), PathOfTop(), fmt::format("nested more than {} levels deep", kMaxJsonDepth));
    stack_.push_back(Frame{object, {}});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return Value();
  }
  bool InStreamedArray() const {
    return stack_.size() == 2 && stack_[0].object && !stack_[1].object && IsStreamedKey(top_key_);
  }
  std::string PathOfTop() const {
    const bool in_array = stack_.size() >= 2 && !stack_[1].object;
    auto it = converted_.find(top_key_);
    return TopPath(stack_.size(), in_array, top_key_, it == converted_.end() ? 0 : it->second);
  }

  const Reader& r_;
  std::vector<Frame> stack_;
  std::string top_key_;
  std::map<std::string, size_t> converted_;
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
