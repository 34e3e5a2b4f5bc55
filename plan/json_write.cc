// plan.json's elements without a DOM (plan/json_write.h). The key order and
// the fields left out are json.cc's OpToJson, BufferToJson, PieceToJson and
// json_reader.h's RegionToJson and BoxToJson; a change there must be made
// here too (tests/plan/plan_json_write_test.cc compares the two on every
// field).
#include "plan/json_write.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

namespace reshard::plan_json {

namespace {

// Printable ASCII without a quote or backslash: nlohmann dumps it as it is.
bool Plain(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char ch) { return ch >= 0x20 && ch <= 0x7e && ch != '"' && ch != '\\'; });
}

void Int(std::string& out, int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, r.ptr);
}

// ,"key":value (the first field of an object passes first = true: no comma).
void Field(std::string& out, std::string_view key, int64_t v, bool first = false) {
  if (!first) out += ',';
  out += '"';
  out += key;
  out += "\":";
  Int(out, v);
}

void Text(std::string& out, std::string_view key, std::string_view v) {
  out += ",\"";
  out += key;
  out += "\":\"";
  out += v;
  out += '"';
}

void RegionJson(std::string& out, const Region& g) {
  Field(out, "buffer", g.buffer, true);
  Field(out, "offset_bytes", g.offset_bytes);
  Field(out, "row_bytes", g.row_bytes);
  if (g.rows != 1) Field(out, "rows", g.rows);
  if (g.row_stride_bytes != 0) Field(out, "row_stride_bytes", g.row_stride_bytes);
  if (g.planes != 1) Field(out, "planes", g.planes);
  if (g.plane_stride_bytes != 0) Field(out, "plane_stride_bytes", g.plane_stride_bytes);
}

// [a,b,...] of any integers.
template <class T>
void Ints(std::string& out, const T* v, size_t n) {
  out += '[';
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) out += ',';
    Int(out, v[i]);
  }
  out += ']';
}

}  // namespace

bool AppendOpJson(std::string& out, const Op& op) {
  const std::string_view kind = OpKindName(op.kind);
  if (!op.tiles.empty() || !Plain(kind) || !Plain(op.label)) return false;
  out += '{';
  Field(out, "id", op.id, true);
  Text(out, "kind", kind);
  Field(out, "gpu", op.gpu);
  Field(out, "stream", op.stream);
  if (op.group != -1) Field(out, "group", op.group);
  if (!op.deps.empty()) {
    out += ",\"deps\":";
    Ints(out, op.deps.data(), op.deps.size());
  }
  if (op.buffer != -1) Field(out, "buffer", op.buffer);
  if (!op.copies.empty()) {
    out += ",\"copies\":[";
    for (size_t i = 0; i < op.copies.size(); ++i) {
      out += i > 0 ? ",{\"src\":{" : "{\"src\":{";
      RegionJson(out, op.copies[i].src);
      out += "},\"dst\":{";
      RegionJson(out, op.copies[i].dst);
      out += "}}";
    }
    out += ']';
  }
  if (op.region != Region{}) {
    out += ",\"region\":{";
    RegionJson(out, op.region);
    out += '}';
  }
  if (op.peer != -1) Field(out, "peer", op.peer);
  if (op.match != -1) Field(out, "match", op.match);
  if (op.segment != -1) Field(out, "segment", op.segment);
  if (!op.label.empty()) Text(out, "label", op.label);
  // A double as nlohmann prints it (shortest round trip, its own exponent rules): a number DOM allocates nothing.
  if (op.sm_share != 1.0) out += ",\"sm_share\":", out += nlohmann::ordered_json(op.sm_share).dump();
  out += '}';
  return true;
}

bool AppendBufferJson(std::string& out, const PlanBuffer& b) {
  const std::string_view space = MemorySpaceName(b.space), role = BufferRoleName(b.role);
  if (!Plain(space) || !Plain(role) || !Plain(b.name)) return false;
  out += '{';
  Field(out, "id", b.id, true);
  Field(out, "gpu", b.gpu);
  if (b.space != MemorySpace::kDevice) Text(out, "space", space);
  Text(out, "role", role);
  Field(out, "bytes", b.bytes);
  if (b.layer != -1) Field(out, "layer", b.layer);
  if (b.preexisting) out += ",\"preexisting\":true";
  if (!b.name.empty()) Text(out, "name", b.name);
  out += '}';
  return true;
}

bool AppendPieceJson(std::string& out, const ContentPiece& c) {
  out += '{';
  Field(out, "buffer", c.buffer, true);
  Field(out, "tensor", c.tensor);
  out += ",\"box\":[";
  for (int d = 0; d < std::clamp(c.box.ndim, 0, kMaxDims); ++d) {
    if (d > 0) out += ',';
    const int64_t lo_hi[2] = {c.box.lo[d], c.box.hi[d]};
    Ints(out, lo_hi, 2);
  }
  out += ']';
  if (c.offset_elems != 0) Field(out, "offset_elems", c.offset_elems);
  if (c.stride_elems != Extents{0, 0, 1}) {
    // As PieceToJson: the shortest prefix whose remainder is zero, but at least one entry per box dimension.
    int n = kMaxDims;
    while (n > 0 && n > c.box.ndim && c.stride_elems[n - 1] == 0) --n;
    out += ",\"stride_elems\":";
    Ints(out, c.stride_elems.data(), static_cast<size_t>(n));
  }
  out += '}';
  return true;
}

}  // namespace reshard::plan_json
