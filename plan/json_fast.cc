// The plan reader's fast path (json_fast.h): a strict JSON scanner over the
// whole text that converts ops, buffers and pieces straight into the Plan,
// and hands everything else to the DOM-building SAX handler.
//
// Idea: the common element (canonical field names, integers in range, plain
// strings) is converted without any DOM, at a few ns per byte. Whatever is
// unusual in an element (an unknown or repeated field, a float where an
// integer goes, an escape, a value out of range, a quantize op's tiles,
// every tensor) sends that one element, as text, through nlohmann's parser
// and the DOM reader, which either returns the same element or throws the
// error the DOM reader always gave. The scanner is at least as strict as
// nlohmann's lexer (same whitespace, number grammar, UTF-8 ranges, escapes,
// surrogates, float overflow), so it never accepts text nlohmann refuses;
// on invalid text it stops and nlohmann's own diagnosis of the whole text
// (CheckPlanSyntax, json_check.cc) gives the message. O(bytes) time; memory is
// the Plan plus one element.
#include "plan/json_fast.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#include "model/input_file.h"

namespace reshard::plan_json {
namespace {

struct SyntaxError {};  // the text is not JSON here: nlohmann diagnoses it
// The text ends where the scanner needs more (all of it before was valid
// JSON, as nlohmann's lexer would read it): nlohmann too would read to the
// end and report it, so the reader need not ask it. (A key repeated inside
// the unfinished value is then not named: the plan is refused as truncated.)
struct EndOfText {};
struct Unsure {};       // not sure it is an error: the DOM reader decides

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// Bytes a string may hold as they are: 0x20..0x7F except '"' and '\\'.
constexpr std::array<bool, 256> kPlainByte = [] {
  std::array<bool, 256> t{};
  for (int c = 0x20; c < 0x80; ++c) t[c] = c != '"' && c != '\\';
  return t;
}();

// A scanned number token.
struct Number {
  const char* begin = nullptr;
  const char* end = nullptr;
  bool integer = false;  // no fraction, no exponent
  bool fits = false;     // integer and within int64
  int64_t value = 0;     // when fits
};

class Scanner {
 public:
  Scanner(const char* b, const char* e) : p_(b), e_(e) {}
  const char* p_;
  const char* const e_;

  void Ws() {
    while (p_ < e_ && IsWs(*p_)) ++p_;
  }
  bool Peek(char c) {
    Ws();
    return p_ < e_ && *p_ == c;
  }
  void Expect(char c) {
    if (Peek(c)) {
      ++p_;
      return;
    }
    if (p_ == e_) throw EndOfText{};
    throw SyntaxError{};
  }

  // A string at p_ (after whitespace): its raw content, validated as
  // nlohmann's lexer does. `plain` is false when it has escapes (the raw
  // bytes then differ from the value).
  std::string_view String(bool* plain) {
    Ws();
    if (p_ == e_) throw EndOfText{};
    if (*p_ != '"') throw SyntaxError{};
    const char* s = ++p_;
    bool pl = true;
    for (;;) {
      while (p_ < e_ && kPlainByte[static_cast<unsigned char>(*p_)]) ++p_;
      if (p_ == e_) throw EndOfText{};
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        std::string_view v(s, static_cast<size_t>(p_ - s));
        ++p_;
        *plain = pl;
        return v;
      }
      if (c == '\\') {
        pl = false;
        Escape();
      } else if (c < 0x20) {
        throw SyntaxError{};
      } else {
        Utf8(c);
      }
    }
  }

  // A number at p_ (after whitespace), JSON grammar; a float that overflows
  // a double is an error, as in nlohmann.
  Number Num() {
    Ws();
    Number n;
    n.begin = p_;
    const bool neg = p_ < e_ && *p_ == '-';
    if (neg) ++p_;
    if (p_ == e_) throw EndOfText{};
    if (!IsDigit(*p_)) throw SyntaxError{};
    uint64_t mag = 0;
    bool overflow = false;
    const char* digits = p_;
    if (*p_ == '0') {
      ++p_;
    } else {
      while (p_ < e_ && IsDigit(*p_)) {
        const auto d = static_cast<uint64_t>(*p_ - '0');
        if (mag > (UINT64_MAX - d) / 10) overflow = true;
        else mag = mag * 10 + d;
        ++p_;
      }
    }
    const char* int_end = p_;
    n.integer = true;
    if (p_ < e_ && *p_ == '.') {
      n.integer = false;
      ++p_;
      if (p_ == e_) throw EndOfText{};
      if (!IsDigit(*p_)) throw SyntaxError{};
      while (p_ < e_ && IsDigit(*p_)) ++p_;
    }
    if (p_ < e_ && (*p_ == 'e' || *p_ == 'E')) {
      n.integer = false;
      ++p_;
      if (p_ < e_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (p_ == e_) throw EndOfText{};
      if (!IsDigit(*p_)) throw SyntaxError{};
      while (p_ < e_ && IsDigit(*p_)) ++p_;
    }
    n.end = p_;
    if (n.integer && !overflow) {
      if (!neg && mag <= static_cast<uint64_t>(INT64_MAX)) {
        n.fits = true;
        n.value = static_cast<int64_t>(mag);
      } else if (neg && mag <= static_cast<uint64_t>(INT64_MAX) + 1) {
        n.fits = true;
        n.value = static_cast<int64_t>(0 - mag);
      }
    }
    // An integer that fits uint64 is stored as one; anything else is read as
    // a double, which must be finite.
    if (!n.fits && !(n.integer && !neg && !overflow) && Overflows(n.begin, n.end, digits, int_end))
      throw SyntaxError{};
    return n;
  }

  // Skips one value (validating it); `enclosing` containers are open around
  // it. Iterative, so depth costs no stack.
  void SkipValue(size_t enclosing) {
    stack_.clear();
    bool need_value = true;
    for (;;) {
      Ws();
      if (need_value) {
        if (p_ == e_) throw EndOfText{};
        const char c = *p_;
        if (c == '{' || c == '[') {
          if (enclosing + stack_.size() >= static_cast<size_t>(kMaxJsonDepth)) throw SyntaxError{};
          ++p_;
          stack_.push_back(c);
          if (Peek(c == '{' ? '}' : ']')) {
            ++p_;
            stack_.pop_back();
            need_value = false;
          } else if (c == '{') {
            KeyColon();
          }
          continue;
        }
        Scalar();
        need_value = false;
        continue;
      }
      if (stack_.empty()) return;
      if (p_ == e_) throw EndOfText{};
      const char top = stack_.back();
      if (*p_ == ',') {
        ++p_;
        if (top == '{') KeyColon();
        need_value = true;
      } else if (*p_ == (top == '{' ? '}' : ']')) {
        ++p_;
        stack_.pop_back();
      } else {
        throw SyntaxError{};
      }
    }
  }

 private:
  void KeyColon() {
    bool plain = true;
    String(&plain);
    Expect(':');
  }
  void Scalar() {
    const char c = *p_;
    if (c == '"') {
      bool plain = true;
      String(&plain);
    } else if (c == '-' || IsDigit(c)) {
      Num();
    } else {
      Literal();
    }
  }
  void Literal() {
    for (std::string_view lit : {"true", "false", "null"}) {
      if (static_cast<size_t>(e_ - p_) >= lit.size() && std::memcmp(p_, lit.data(), lit.size()) == 0) {
        p_ += lit.size();
        return;
      }
    }
    throw SyntaxError{};
  }
  int Hex4() {
    if (e_ - p_ < 4) throw SyntaxError{};
    int v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = *p_++;
      v <<= 4;
      if (IsDigit(c)) v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else throw SyntaxError{};
    }
    return v;
  }
  // p_ at a backslash; a high surrogate must be followed by a low one.
  void Escape() {
    ++p_;
    if (p_ == e_) throw EndOfText{};
    const char c = *p_++;
    if (std::strchr("\"\\/bfnrt", c) != nullptr && c != '\0') return;
    if (c != 'u') throw SyntaxError{};
    const int cp = Hex4();
    if (cp >= 0xDC00 && cp <= 0xDFFF) throw SyntaxError{};
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      if (e_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') throw SyntaxError{};
      p_ += 2;
      const int lo = Hex4();
      if (lo < 0xDC00 || lo > 0xDFFF) throw SyntaxError{};
    }
  }
  // p_ at a byte >= 0x80: one well-formed UTF-8 sequence (RFC 3629 ranges).
  void Utf8(unsigned char c) {
    auto in = [&](int k, unsigned lo, unsigned hi) {
      if (e_ - p_ <= k) throw SyntaxError{};
      const auto b = static_cast<unsigned char>(p_[k]);
      if (b < lo || b > hi) throw SyntaxError{};
    };
    int n = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      in(1, 0x80, 0xBF), n = 1;
    } else if (c == 0xE0) {
      in(1, 0xA0, 0xBF), in(2, 0x80, 0xBF), n = 2;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      in(1, 0x80, 0xBF), in(2, 0x80, 0xBF), n = 2;
    } else if (c == 0xED) {
      in(1, 0x80, 0x9F), in(2, 0x80, 0xBF), n = 2;
    } else if (c == 0xF0) {
      in(1, 0x90, 0xBF), in(2, 0x80, 0xBF), in(3, 0x80, 0xBF), n = 3;
    } else if (c >= 0xF1 && c <= 0xF3) {
      in(1, 0x80, 0xBF), in(2, 0x80, 0xBF), in(3, 0x80, 0xBF), n = 3;
    } else if (c == 0xF4) {
      in(1, 0x80, 0x8F), in(2, 0x80, 0xBF), in(3, 0x80, 0xBF), n = 3;
    } else {
      throw SyntaxError{};
    }
    p_ += n + 1;
  }
  // Whether the decimal [b, e) is beyond a double's range (nlohmann refuses
  // it: "number overflow"). Only the rare out-of-range case estimates the
  // decimal exponent; underflow to zero is accepted, as strtod does.
  static bool Overflows(const char* b, const char* e, const char* digits, const char* int_end) {
    double d = 0;
    const char* s = *b == '-' ? b + 1 : b;
    auto [ptr, ec] = std::from_chars(s, e, d);
    if (ec != std::errc::result_out_of_range) return false;
    (void)ptr;
    // Decimal exponent of the leading digit: integer digits after leading
    // zeros, or minus the fraction's leading zeros, plus the exponent.
    int64_t lead = 0;
    const char* q = digits;
    while (q < int_end && *q == '0') ++q;
    if (q < int_end) {
      lead = int_end - q - 1;
    } else {
      const char* f = int_end < e && *int_end == '.' ? int_end + 1 : int_end;
      lead = -1;
      while (f < e && *f == '0') ++f, --lead;
    }
    const char* x = std::find_if(digits, e, [](char c) { return c == 'e' || c == 'E'; });
    int64_t exp = 0;
    if (x != e) {
      ++x;
      const bool neg = *x == '-';
      if (*x == '+' || *x == '-') ++x;
      for (; x < e; ++x) exp = std::min<int64_t>(exp * 10 + (*x - '0'), int64_t{1} << 40);
      if (neg) exp = -exp;
    }
    return lead + exp > 0;
  }

  std::vector<char> stack_;
};

// ---------------------------------------------------------------- elements

constexpr int64_t kMaxI32 = INT32_MAX;

// Converts one element of a streamed array; false when it is unusual in any
// way (the DOM reader then takes it). Never throws InputError.
class ElementReader {
 public:
  explicit ElementReader(Scanner& s) : s_(s) {}

  bool Op(reshard::Op& op) {
    uint32_t seen = 0;
    static constexpr const char* kKeys[] = {"id",   "kind",    "gpu",   "stream", "group", "deps",  "buffer",  "copies",
                                            "region", "peer", "match", "segment", "label", "sm_share"};
    bool ok = Object([&](std::string_view key) {
      const int f = Index(key, kKeys);
      if (f < 0 || (seen & (1u << f)) != 0) return false;
      seen |= 1u << f;
      switch (f) {
        case 0: return Int32(op.id, 0);
        case 1: return Kind(op.kind);
        case 2: return Int32(op.gpu, 0);
        case 3: return Int32(op.stream, 0);
        case 4: return Int32(op.group, -1);
        case 5: return Array([&] {
            int32_t d = 0;
            if (!Int32(d, 0)) return false;
            op.deps.push_back(d);
            return true;
          });
        case 6: return Int32(op.buffer, -1);
        case 7: return Array([&] {
            CopyPair c;
            if (!Pair(c)) return false;
            op.copies.push_back(c);
            return true;
          });
        case 8: return RegionOf(op.region);
        case 9: return Int32(op.peer, -1);
        case 10: return Int32(op.match, -1);
        case 11: return Int32(op.segment, -1);
        case 12: return Str(op.label);
        default: return Fraction(op.sm_share);
      }
    });
    return ok && (seen & 0b111) == 0b111;  // id, kind, gpu are required
  }

  bool Buffer(PlanBuffer& b) {
    uint32_t seen = 0;
    static constexpr const char* kKeys[] = {"id", "gpu", "space", "role", "bytes", "layer", "preexisting", "name"};
    bool ok = Object([&](std::string_view key) {
      const int f = Index(key, kKeys);
      if (f < 0 || (seen & (1u << f)) != 0) return false;
      seen |= 1u << f;
      switch (f) {
        case 0: return Int32(b.id, 0);
        case 1: return Int32(b.gpu, 0);
        case 2: return Name(b.space, MemorySpaceName, 2);
        case 3: return Name(b.role, BufferRoleName, 7);
        case 4: return Int64(b.bytes, 0);
        case 5: return Int32(b.layer, -1);
        case 6: return Bool(b.preexisting);
        default: return Str(b.name);
      }
    });
    return ok && (seen & 0b10011) == 0b10011;  // id, gpu, bytes
  }

  bool Piece(ContentPiece& c) {
    uint32_t seen = 0;
    static constexpr const char* kKeys[] = {"buffer", "tensor", "box", "offset_elems", "stride_elems"};
    bool ok = Object([&](std::string_view key) {
      const int f = Index(key, kKeys);
      if (f < 0 || (seen & (1u << f)) != 0) return false;
      seen |= 1u << f;
      switch (f) {
        case 0: return Int32(c.buffer, 0);
        case 1: return Int32(c.tensor, 0);
        case 2: return BoxOf(c.box);
        case 3: return Int64(c.offset_elems, 0);
        default: {
          c.stride_elems = Extents{0, 0, 0};  // missing trailing entries are 0
          int n = 0;
          return Array([&] { return n < kMaxDims && Int64(c.stride_elems[n++], 0); });
        }
      }
    });
    return ok && (seen & 0b111) == 0b111;  // buffer, tensor, box
  }

 private:
  template <size_t N>
  static int Index(std::string_view key, const char* const (&keys)[N]) {
    for (size_t i = 0; i < N; ++i)
      if (key == keys[i]) return static_cast<int>(i);
    return -1;
  }

  // {"key": value, ...}; `field` reads the value after the colon.
  template <class F>
  bool Object(F field) {
    if (!s_.Peek('{')) return false;
    ++s_.p_;
    if (s_.Peek('}')) return ++s_.p_, true;
    for (;;) {
      bool plain = true;
      std::string_view key = s_.String(&plain);
      if (!plain) return false;
      s_.Expect(':');
      if (!field(key)) return false;
      s_.Ws();
      if (s_.p_ == s_.e_) throw EndOfText{};
      const char c = *s_.p_++;
      if (c == '}') return true;
      if (c != ',') throw SyntaxError{};
    }
  }
  template <class F>
  bool Array(F element) {
    if (!s_.Peek('[')) return false;
    ++s_.p_;
    if (s_.Peek(']')) return ++s_.p_, true;
    for (;;) {
      if (!element()) return false;
      s_.Ws();
      if (s_.p_ == s_.e_) throw EndOfText{};
      const char c = *s_.p_++;
      if (c == ']') return true;
      if (c != ',') throw SyntaxError{};
    }
  }

  bool Int64(int64_t& out, int64_t lo) {
    s_.Ws();
    if (s_.p_ == s_.e_ || !(*s_.p_ == '-' || IsDigit(*s_.p_))) return false;
    const Number n = s_.Num();
    if (!n.fits || n.value < lo) return false;
    out = n.value;
    return true;
  }
  bool Int32(int32_t& out, int64_t lo) {
    int64_t v = 0;
    if (!Int64(v, lo) || v > kMaxI32) return false;
    out = static_cast<int32_t>(v);
    return true;
  }
  // A number in [0, 1] (sm_share); integers convert as nlohmann's get<double>.
  bool Fraction(double& out) {
    s_.Ws();
    if (s_.p_ == s_.e_ || !(*s_.p_ == '-' || IsDigit(*s_.p_))) return false;
    const Number n = s_.Num();
    double d = 0;
    if (n.integer) {
      if (!n.fits) return false;
      d = static_cast<double>(n.value);
    } else {
      const char* b = *n.begin == '-' ? n.begin + 1 : n.begin;
      auto [ptr, ec] = std::from_chars(b, n.end, d);
      if (ec != std::errc() || ptr != n.end) return false;
      if (*n.begin == '-') d = -d;
    }
    if (!std::isfinite(d) || d < 0 || d > 1) return false;
    out = d;
    return true;
  }
  bool Bool(bool& out) {
    s_.Ws();
    if (s_.e_ - s_.p_ >= 4 && std::memcmp(s_.p_, "true", 4) == 0) return s_.p_ += 4, out = true, true;
    if (s_.e_ - s_.p_ >= 5 && std::memcmp(s_.p_, "false", 5) == 0) return s_.p_ += 5, out = false, true;
    return false;
  }
  bool Str(std::string& out) {
    if (!s_.Peek('"')) return false;
    bool plain = true;
    std::string_view v = s_.String(&plain);
    if (!plain) return false;
    out.assign(v);
    return true;
  }
  template <class E>
  bool Name(E& out, std::string_view (*name)(E), int count) {
    std::string s;
    if (!Str(s)) return false;
    for (int i = 0; i < count; ++i)
      if (name(static_cast<E>(i)) == s) return out = static_cast<E>(i), true;
    return false;
  }
  bool Kind(OpKind& out) { return Name(out, OpKindName, static_cast<int>(OpKind::kQuantize) + 1); }

  bool RegionOf(Region& g) {
    uint32_t seen = 0;
    static constexpr const char* kKeys[] = {"buffer", "offset_bytes", "row_bytes", "rows",
                                            "row_stride_bytes", "planes", "plane_stride_bytes"};
    bool ok = Object([&](std::string_view key) {
      const int f = Index(key, kKeys);
      if (f < 0 || (seen & (1u << f)) != 0) return false;
      seen |= 1u << f;
      switch (f) {
        case 0: return Int32(g.buffer, -1);
        case 1: return Int64(g.offset_bytes, 0);
        case 2: return Int64(g.row_bytes, 0);
        case 3: return Int64(g.rows, 1);
        case 4: return Int64(g.row_stride_bytes, 0);
        case 5: return Int64(g.planes, 1);
        default: return Int64(g.plane_stride_bytes, 0);
      }
    });
    return ok && (seen & 0b101) == 0b101;  // buffer, row_bytes
  }
  bool Pair(CopyPair& c) {
    uint32_t seen = 0;
    bool ok = Object([&](std::string_view key) {
      const int f = key == "src" ? 0 : key == "dst" ? 1 : -1;
      if (f < 0 || (seen & (1u << f)) != 0) return false;
      seen |= 1u << f;
      return RegionOf(f == 0 ? c.src : c.dst);
    });
    return ok && seen == 0b11;
  }
  bool BoxOf(Box& b) {
    int n = 0;
    return Array([&] {
      if (n >= kMaxDims) return false;
      int k = 0;
      int64_t v[2] = {0, 0};
      if (!Array([&] { return k < 2 && Int64(v[k++], 0); }) || k != 2 || v[1] < v[0]) return false;
      b.lo[n] = v[0];
      b.hi[n] = v[1];
      b.ndim = ++n;
      return true;
    });
  }

  Scanner& s_;
};

// ---------------------------------------------------------------- the document

// How many elements the array whose '[' is just before `p` holds, by a
// structural scan (strings skipped, brackets counted; no validation), for
// reserving the vector once instead of growing it: a quarter of the read
// time went into reallocation and its page faults. An array the text ends
// in (a truncated plan) counts the elements begun, so it too is read at the
// speed of a whole one before the end is reported. O(bytes of the array).
size_t CountElements(const char* p, const char* e, const char** end) {
  size_t depth = 0, commas = 0;
  bool any = false;
  auto ended = [&] { return *end = e, any ? commas + 1 : 0; };
  while (p < e) {
    const char c = *p++;
    if (c == '"') {
      for (;;) {
        const void* q = std::memchr(p, '"', static_cast<size_t>(e - p));
        if (q == nullptr) return ended();
        const char* quote = static_cast<const char*>(q);
        size_t slashes = 0;
        while (quote - static_cast<std::ptrdiff_t>(slashes) > p && quote[-1 - static_cast<std::ptrdiff_t>(slashes)] == '\\')
          ++slashes;
        p = quote + 1;
        if (slashes % 2 == 0) break;
      }
      any = true;
    } else if (c == '{' || c == '[') {
      ++depth, any = true;
    } else if (c == '}' || c == ']') {
      if (depth == 0) return *end = p, any ? commas + 1 : 0;
      --depth;
    } else if (c == ',') {
      if (depth == 0) ++commas;
    } else if (!IsWs(c)) {
      any = true;
    }
  }
  return ended();
}

// Reserves room for the elements counted, bounded by the array's bytes (no
// element is shorter than 24 bytes of text) so hostile text cannot ask for
// more than a few times its own size; a refused reservation is no error.
template <class T>
void ReserveFor(std::optional<std::vector<T>>& v, const char* p, const char* e) {
  const char* end = p;
  size_t n = CountElements(p, e, &end);
  if (n < 1024) return;
  n = std::min(n, static_cast<size_t>(end - p) / 24);
  if (!v) v.emplace();
  try {
    v->reserve(v->size() + n);
    AdviseHugePages(v->data(), v->capacity() * sizeof(T));
  } catch (const std::bad_alloc&) {  // read on without it
  }
}

class Document {
 public:
  Document(std::string_view text, FastSink& sink) : s_(text.data(), text.data() + text.size()), sink_(sink) {}

  void Read() {
    if (!s_.Peek('{')) throw Unsure{};  // a BOM, or not an object: the DOM reader's case
    ++s_.p_;
    sink_.OpenRoot();
    if (!s_.Peek('}')) {
      for (;;) {
        bool plain = true;
        std::string_view key = s_.String(&plain);
        if (!plain) throw Unsure{};
        sink_.Key(std::string(key));  // a repeated field fails here
        s_.Expect(':');
        if (IsStreamedKey(key) && s_.Peek('[')) {
          StreamedArray(key);
        } else {
          Value(1);
        }
        s_.Ws();
        if (s_.p_ == s_.e_) throw EndOfText{};
        const char c = *s_.p_++;
        if (c == '}') break;
        if (c != ',') throw SyntaxError{};
      }
    } else {
      ++s_.p_;
    }
    sink_.CloseRoot();
    s_.Ws();
    if (s_.p_ != s_.e_) throw SyntaxError{};
  }

 private:
  // Any value, through nlohmann into the DOM (top-level scalars, cluster,
  // summary) or, inside a streamed array, the DOM reader's conversion.
  void Value(size_t enclosing) {
    s_.Ws();
    const char* b = s_.p_;
    s_.SkipValue(enclosing);
    if (!sink_.ParseValue(b, s_.p_)) throw Unsure{};  // nlohmann refused what the scanner took
  }

  void StreamedArray(std::string_view key) {
    ++s_.p_;
    sink_.OpenStreamed();
    Streamed& out = sink_.Out();
    if (s_.Peek(']')) {
      ++s_.p_;
      sink_.CloseStreamed();
      return;
    }
    if (key == "ops") ReserveFor(out.ops, s_.p_, s_.e_);
    else if (key == "buffers") ReserveFor(out.buffers, s_.p_, s_.e_);
    else if (key == "sources") ReserveFor(out.sources, s_.p_, s_.e_);
    else if (key == "destinations") ReserveFor(out.destinations, s_.p_, s_.e_);
    ElementReader er(s_);
    for (;;) {
      s_.Ws();
      const char* b = s_.p_;
      bool done = false;
      if (key == "ops") done = Fast(out.ops, [&](reshard::Op& v) { return er.Op(v); });
      else if (key == "buffers") done = Fast(out.buffers, [&](PlanBuffer& v) { return er.Buffer(v); });
      else if (key == "sources") done = Fast(out.sources, [&](ContentPiece& v) { return er.Piece(v); });
      else if (key == "destinations") done = Fast(out.destinations, [&](ContentPiece& v) { return er.Piece(v); });
      if (!done) {
        s_.p_ = b;
        Value(2);
      }
      s_.Ws();
      if (s_.p_ == s_.e_) throw EndOfText{};
      const char c = *s_.p_++;
      if (c == ']') break;
      if (c != ',') throw SyntaxError{};
    }
    sink_.CloseStreamed();
  }

  template <class T, class F>
  bool Fast(std::optional<std::vector<T>>& v, F read_one) {
    T e;
    if (!read_one(e)) return false;
    sink_.BeforeElement();
    if (!v) v.emplace();
    v->push_back(std::move(e));
    return true;
  }

  Scanner s_;
  FastSink& sink_;
};

}  // namespace

FastReadResult FastReadPlan(std::string_view text, FastSink& sink) {
  Document doc(text, sink);
  try {
    doc.Read();
  } catch (const SyntaxError&) {
    return FastReadResult::kSyntaxError;
  } catch (const EndOfText&) {
    return FastReadResult::kTruncated;
  } catch (const Unsure&) {
    return FastReadResult::kUnsure;
  }
  return FastReadResult::kDone;
}

}  // namespace reshard::plan_json
