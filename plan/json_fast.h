// The plan reader's fast path (json_fast.cc), internal to plan/: a strict
// scanner that converts the common elements of plan.json's big arrays
// straight into the Plan and hands the rest, as text, to the DOM-building
// SAX handler (PlanSax in json.cc) through FastSink; CheckPlanSyntax,
// nlohmann's diagnosis of text the scanner found invalid; and the error
// handling both SAX handlers share (PlanSaxBase).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/error.h"
#include "model/input_file.h"
#include "plan/json_reader.h"

namespace reshard::plan_json {

// The top-level arrays converted while parsing (the DOM keeps an empty
// array in their place). Unset when the array was not streamed.
struct Streamed {
  std::optional<std::vector<PlanTensor>> tensors;
  std::optional<std::vector<PlanBuffer>> buffers;
  std::optional<std::vector<Op>> ops;
  std::optional<std::vector<ContentPiece>> sources, destinations;
};

// What the fast path asks of the DOM-building handler; each call is the SAX
// event the handler would get from nlohmann at that point of the text, so
// its checks (duplicate keys, depth, format version, element errors) fire in
// the same order and with the same messages.
class FastSink {
 public:
  virtual ~FastSink() = default;
  virtual void OpenRoot() = 0;                  // start_object of the plan
  virtual void CloseRoot() = 0;                 // its end_object
  virtual void Key(std::string key) = 0;        // a top-level key
  virtual void OpenStreamed() = 0;              // start_array of tensors / ops / ...
  virtual void CloseStreamed() = 0;             // its end_array
  virtual void BeforeElement() = 0;             // an element converted by the fast path completes
  virtual Streamed& Out() = 0;                  // where the fast path appends elements
  // nlohmann's parse of [b, e), a value placed where the next SAX value goes
  // (a top-level field, or an element of the open array); false on a syntax
  // error (the fast path then defers to the DOM reader).
  virtual bool ParseValue(const char* b, const char* e) = 0;
};

// What both SAX handlers of plan text share (PlanSax in json.cc, the syntax
// check's in json_check.cc): nlohmann's syntax error kept, and the DOM
// reader's depth and duplicate-key errors, with the same messages and the
// place each handler names (PathOfTop).
class PlanSaxBase : public nlohmann::json_sax<json> {
 public:
  std::string error_message;  // nlohmann's, after a syntax error
  size_t error_byte = 0;      // its count of characters read; past the end when input ran out

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const nlohmann::detail::exception& ex) override {
    error_byte = position;
    error_message = ex.what();
    return false;
  }

 protected:
  explicit PlanSaxBase(const Reader& r) : r_(r) {}
  // The object on top of the handler's stack, as far as cheaply known:
  // "ops[12]", or "ops[12]..." when nested deeper.
  virtual std::string PathOfTop() const = 0;
  [[noreturn]] void DuplicateKey(const std::string& k) const {
    std::string field = PathOfTop();
    field += field.empty() ? k : "." + k;
    throw InputError(r_.file(), field, "duplicate field");
  }
  // Before a container opens with `open` containers around it.
  void CheckDepth(size_t open) const {
    if (open >= static_cast<size_t>(kMaxJsonDepth))
      throw InputError(r_.file(), PathOfTop(), fmt::format("nested more than {} levels deep", kMaxJsonDepth));
  }

  const Reader& r_;
};

enum class FastReadResult {
  kDone,         // read: the sink holds the plan's DOM and streamed arrays
  kSyntaxError,  // the text is not valid JSON: CheckPlanSyntax says where and why
  kTruncated,    // valid JSON up to its end, where a plan needs more: truncated
  kUnsure,       // something the fast path does not decide: read it with the DOM reader
};
// O(bytes). InputErrors from the sink propagate.
FastReadResult FastReadPlan(std::string_view text, FastSink& sink);

struct SyntaxCheck {
  bool ok = true;
  std::string error_message;  // nlohmann's, when !ok
  size_t error_byte = 0;
};
// nlohmann's parse of `text` with the depth and duplicate-key checks of the
// DOM reader (InputError) and no DOM.
SyntaxCheck CheckPlanSyntax(const std::string& text, const Reader& r);

}  // namespace reshard::plan_json
