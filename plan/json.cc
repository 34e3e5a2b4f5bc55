// Plan <-> JSON (docs/plan-format.md describes the format).
//
// Writing: PlanToJson builds a DOM (keys sorted, as nlohmann::json does);
// WritePlan streams the same content without building the whole DOM: one line
// per top-level scalar field and one line per tensor / buffer / op / piece,
// keys in a readable fixed order, never pretty-printed. So files of 10^6 ops
// stay compact, diff line by line, and cost O(size) time and O(1) extra
// memory per element. Ops, buffers and pieces are written as text directly
// (json_write.h: the bytes their DOM would dump, ~10x faster).
//
// Reading: PlanFromJson walks a DOM. ReadPlan reads with a strict scanner
// (json_fast.cc) that converts the common ops, buffers and pieces straight
// into the Plan, several times faster than through a DOM, and hands
// everything else, as text, to a SAX handler (PlanSax) that builds a DOM
// like nlohmann's parser, converting each element of the big top-level
// arrays as soon as it is complete and dropping its DOM; so memory is the
// Plan plus one element. nlohmann's callback parser is avoided on purpose: it
// rescans the parent container after every object, which is quadratic in
// array length.
// Every problem throws InputError(file, field, problem) with a JSON path
// ("ops[12].region.buffer"); unknown fields are errors (with a suggestion),
// so typos do not silently fall back to defaults.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "model/input_file.h"
#include "model/output_file.h"
#include "plan/json_fast.h"
#include "plan/json_reader.h"
#include "plan/json_write.h"
#include "plan/plan.h"

namespace reshard {
namespace {

using namespace plan_json;  // NOLINT: the shared field readers
constexpr int64_t kFormatVersion = 1;

constexpr std::array kOpKinds{OpKind::kAlloc,   OpKind::kFree,    OpKind::kCopy,  OpKind::kSend,
                              OpKind::kRecv,    OpKind::kOffload, OpKind::kReload, OpKind::kQuantize};
constexpr std::array kSpaces{MemorySpace::kDevice, MemorySpace::kHost};
constexpr std::array kRoles{BufferRole::kSourceWeights, BufferRole::kDestinationWeights, BufferRole::kOptimizer,
                            BufferRole::kGradients,     BufferRole::kKvCache,            BufferRole::kStaging,
                            BufferRole::kHost};

// ---------------------------------------------------------------- elements: read

}  // namespace

Region plan_json::ReadRegion(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p, {"buffer", "offset_bytes", "row_bytes", "rows", "row_stride_bytes", "planes", "plane_stride_bytes"});
  Region g;
  g.buffer = r.RequiredInt32(j, p, "buffer", -1);
  g.offset_bytes = r.Int(j, p, "offset_bytes", 0, 0, kI64Max);
  g.row_bytes = r.RequiredInt(j, p, "row_bytes", 0, kI64Max);
  g.rows = r.Int(j, p, "rows", 1, 1, kI64Max);
  g.row_stride_bytes = r.Int(j, p, "row_stride_bytes", 0, 0, kI64Max);
  g.planes = r.Int(j, p, "planes", 1, 1, kI64Max);
  g.plane_stride_bytes = r.Int(j, p, "plane_stride_bytes", 0, 0, kI64Max);
  return g;
}

namespace {


Op ReadOp(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p,
           {"id", "kind", "gpu", "stream", "group", "deps", "buffer", "copies", "region", "peer", "match", "segment",
            "label", "sm_share", "tiles"});
  Op op;
  op.id = r.RequiredInt32(j, p, "id", 0);
  op.kind = r.Enum(r.Required(j, p, "kind"), p / "kind", kOpKinds, OpKindName);
  op.gpu = r.RequiredInt32(j, p, "gpu", 0);
  op.stream = r.Int32(j, p, "stream", 0, 0);
  op.group = r.Int32(j, p, "group", -1, -1);
  if (const json* d = Reader::Find(j, "deps")) {
    Path dp = p / "deps";
    r.Array(*d, dp);
    op.deps.reserve(d->size());
    for (size_t i = 0; i < d->size(); ++i)
      op.deps.push_back(static_cast<int32_t>(r.Int((*d)[i], dp[static_cast<int64_t>(i)], 0, kI32Max)));
  }
  op.buffer = r.Int32(j, p, "buffer", -1, -1);
  if (const json* c = Reader::Find(j, "copies")) {
    Path cp = p / "copies";
    r.Array(*c, cp);
    op.copies.reserve(c->size());
    for (size_t i = 0; i < c->size(); ++i) {
      Path ep = cp[static_cast<int64_t>(i)];
      const json& e = (*c)[i];
      r.Object(e, ep, {"src", "dst"});
      op.copies.push_back(CopyPair{ReadRegion(r.Required(e, ep, "src"), ep / "src", r),
                                   ReadRegion(r.Required(e, ep, "dst"), ep / "dst", r)});
    }
  }
  if (const json* g = Reader::Find(j, "region")) op.region = ReadRegion(*g, p / "region", r);
  if (const json* t = Reader::Find(j, "tiles")) op.tiles = ReadTiles(*t, p / "tiles", r);
  op.peer = r.Int32(j, p, "peer", -1, -1);
  op.match = r.Int32(j, p, "match", -1, -1);
  op.segment = r.Int32(j, p, "segment", -1, -1);
  op.label = r.String(j, p, "label", "");
  op.sm_share = r.Double(j, p, "sm_share", 1.0, 0.0, 1.0);
  return op;
}

PlanBuffer ReadBuffer(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p, {"id", "gpu", "space", "role", "bytes", "layer", "preexisting", "name"});
  PlanBuffer b;
  b.id = r.RequiredInt32(j, p, "id", 0);
  b.gpu = r.RequiredInt32(j, p, "gpu", 0);
  if (const json* s = Reader::Find(j, "space")) b.space = r.Enum(*s, p / "space", kSpaces, MemorySpaceName);
  if (const json* s = Reader::Find(j, "role")) b.role = r.Enum(*s, p / "role", kRoles, BufferRoleName);
  b.bytes = r.RequiredInt(j, p, "bytes", 0, kI64Max);
  b.layer = r.Int32(j, p, "layer", -1, -1);
  b.preexisting = r.Bool(j, p, "preexisting", false);
  b.name = r.String(j, p, "name", "");
  return b;
}

PlanTensor ReadTensor(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p, {"name", "shape", "dtype", "quant"});
  PlanTensor t;
  t.name = r.String(r.Required(j, p, "name"), p / "name");
  Path sp = p / "shape";
  const json& s = r.Array(r.Required(j, p, "shape"), sp);
  if (s.size() > static_cast<size_t>(kMaxDims))
    r.Fail(sp, fmt::format("has {} dimensions; at most {} are supported", s.size(), kMaxDims));
  t.shape.ndim = static_cast<int>(s.size());
  for (size_t d = 0; d < s.size(); ++d) t.shape.dim[d] = r.Int(s[d], sp[static_cast<int64_t>(d)], 1, kI64Max);
  if (const json* d = Reader::Find(j, "dtype")) t.dtype = ParseDType(r.String(*d, p / "dtype"), r.file(), (p / "dtype").Str());
  if (const json* q = Reader::Find(j, "quant")) t.quant = ReadTensorQuant(*q, p / "quant", r);
  return t;
}

ContentPiece ReadPiece(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p, {"buffer", "tensor", "box", "offset_elems", "stride_elems"});
  ContentPiece c;
  c.buffer = r.RequiredInt32(j, p, "buffer", 0);
  c.tensor = r.RequiredInt32(j, p, "tensor", 0);
  c.box = ReadBox(r.Required(j, p, "box"), p / "box", r);
  c.offset_elems = r.Int(j, p, "offset_elems", 0, 0, kI64Max);
  if (const json* s = Reader::Find(j, "stride_elems")) {
    Path sp = p / "stride_elems";
    r.Array(*s, sp);
    if (s->size() > static_cast<size_t>(kMaxDims))
      r.Fail(sp, fmt::format("has {} entries; at most {} are supported", s->size(), kMaxDims));
    c.stride_elems = Extents{0, 0, 0};  // missing trailing entries are 0 (see the writer)
    for (size_t d = 0; d < s->size(); ++d) c.stride_elems[d] = r.Int((*s)[d], sp[static_cast<int64_t>(d)], 0, kI64Max);
  }
  return c;
}

PlanSummary ReadSummary(const json& j, const Path& p, const Reader& r) {
  r.Object(j, p,
           {"segment_bytes", "direct_min_bytes", "offload_fraction", "memory_policy", "bytes_moved", "lower_bound_s",
            "routing_bound_s", "predicted_time_s", "predicted_peak_bytes"});
  constexpr double kInf = std::numeric_limits<double>::infinity();
  PlanSummary s;
  s.segment_bytes = r.Int(j, p, "segment_bytes", 0, 0, kI64Max);
  s.direct_min_bytes = r.Int(j, p, "direct_min_bytes", 0, 0, kI64Max);
  s.offload_fraction = r.Double(j, p, "offload_fraction", 0, 0, 1);
  s.memory_policy = r.String(j, p, "memory_policy", "");
  if (const json* m = Reader::Find(j, "bytes_moved")) {
    Path mp = p / "bytes_moved";
    r.Object(*m, mp, {"local", "nvlink", "network", "pcie"});
    s.bytes_moved.local = r.Int(*m, mp, "local", 0, 0, kI64Max);
    s.bytes_moved.nvlink = r.Int(*m, mp, "nvlink", 0, 0, kI64Max);
    s.bytes_moved.network = r.Int(*m, mp, "network", 0, 0, kI64Max);
    s.bytes_moved.pcie = r.Int(*m, mp, "pcie", 0, 0, kI64Max);
  }
  s.lower_bound_s = r.Double(j, p, "lower_bound_s", 0, 0, kInf);
  s.routing_bound_s = r.Double(j, p, "routing_bound_s", 0, 0, kInf);
  s.predicted_time_s = r.Double(j, p, "predicted_time_s", 0, 0, kInf);
  if (const json* a = Reader::Find(j, "predicted_peak_bytes")) {
    Path ap = p / "predicted_peak_bytes";
    r.Array(*a, ap);
    for (size_t i = 0; i < a->size(); ++i)
      s.predicted_peak_bytes.push_back(r.Int((*a)[i], ap[static_cast<int64_t>(i)], 0, kI64Max));
  }
  return s;
}

Cluster ReadCluster(const json& j, const Reader& r) {
  try {
    return ClusterFromJson(j, r.file());
  } catch (const InputError& e) {
    // Name the field from the plan's root ("cluster.nodes").
    const std::string& f = e.field();
    if (f == "cluster" || f.rfind("cluster.", 0) == 0) throw;
    throw InputError(r.file(), f.empty() ? "cluster" : "cluster." + f, e.problem());
  }
}

template <class T, class F>
std::vector<T> ReadArray(const json& j, const Path& root, const char* key, const Reader& r, F read_one) {
  std::vector<T> out;
  const json* a = Reader::Find(j, key);
  if (a == nullptr) return out;
  Path p = root / key;
  r.Array(*a, p);
  out.reserve(a->size());
  for (size_t i = 0; i < a->size(); ++i) out.push_back(read_one((*a)[i], p[static_cast<int64_t>(i)], r));
  return out;
}

void CheckVersion(const json& j, const Reader& r) {
  Path root;
  int64_t v = r.RequiredInt(j, root, "format_version", 0, kI64Max);
  if (v != kFormatVersion)
    r.Fail(root / "format_version",
           fmt::format("unsupported plan format version {} (this reshard reads version {})", v, kFormatVersion));
}

Plan ReadPlanObject(const json& j, const Reader& r, Streamed* streamed) {
  Path root;
  if (!j.is_object()) r.Fail(root, "expected a JSON object (a plan) at the top level, got " + Preview(j));
  r.Object(j, root,
           {"format_version", "name", "cluster", "cluster_fingerprint", "scenario_fingerprint", "stream_names", "summary",
            "tensors", "buffers", "ops", "sources", "destinations"});
  CheckVersion(j, r);
  Plan p;
  p.format_version = static_cast<int32_t>(kFormatVersion);
  p.name = r.String(j, root, "name", "");
  p.cluster = ReadCluster(r.Required(j, root, "cluster"), r);
  p.cluster_fingerprint = r.String(j, root, "cluster_fingerprint", "");
  p.scenario_fingerprint = r.String(j, root, "scenario_fingerprint", "");
  if (const json* s = Reader::Find(j, "stream_names")) {
    Path sp = root / "stream_names";
    r.Array(*s, sp);
    p.stream_names.clear();
    for (size_t i = 0; i < s->size(); ++i) p.stream_names.push_back(r.String((*s)[i], sp[static_cast<int64_t>(i)]));
  }
  if (const json* s = Reader::Find(j, "summary")) p.summary = ReadSummary(*s, root / "summary", r);

  auto take = [&](auto& field, auto& streamed_field, const char* key, auto read_one) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    if (streamed != nullptr && streamed_field) {
      field = std::move(*streamed_field);
    } else {
      field = ReadArray<T>(j, root, key, r, read_one);
    }
  };
  Streamed none;
  Streamed& s = streamed != nullptr ? *streamed : none;
  take(p.tensors, s.tensors, "tensors", ReadTensor);
  take(p.buffers, s.buffers, "buffers", ReadBuffer);
  take(p.ops, s.ops, "ops", ReadOp);
  take(p.sources, s.sources, "sources", ReadPiece);
  take(p.destinations, s.destinations, "destinations", ReadPiece);
  return p;
}

// ---------------------------------------------------------------- SAX reader

// Builds a DOM like nlohmann's own parser, except that each element of the
// top-level arrays tensors / buffers / ops / sources / destinations is
// converted when it completes and then dropped. Duplicate keys are errors.
class PlanSax : public PlanSaxBase, public FastSink {
 public:
  PlanSax(const Reader& r, Streamed& out) : PlanSaxBase(r), out_(out) {}

  // FastSink: the fast path's events, as nlohmann would give them.
  void OpenRoot() override { start_object(0); }
  void CloseRoot() override { end_object(); }
  void Key(std::string k) override { key(k); }
  void OpenStreamed() override { start_array(0); }
  void CloseStreamed() override { end_array(); }
  void BeforeElement() override { CheckVersionOnce(); }
  Streamed& Out() override { return out_; }
  bool ParseValue(const char* b, const char* e) override {
    return json::sax_parse(b, e, this, json::input_format_t::json, /*strict=*/true);
  }

  json root;

  bool null() override { return Value(json(nullptr)); }
  bool boolean(bool v) override { return Value(json(v)); }
  bool number_integer(number_integer_t v) override { return Value(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return Value(json(v)); }
  bool number_float(number_float_t v, const string_t& /*text*/) override { return Value(json(v)); }
  bool string(string_t& v) override { return Value(json(std::move(v))); }
  bool binary(binary_t& v) override { return Value(json::binary(std::move(v))); }
  bool start_object(std::size_t /*n*/) override { return Open(json::object()); }
  bool start_array(std::size_t /*n*/) override { return Open(json::array()); }
  bool key(string_t& k) override {
    const json& obj = *stack_.back();
    if (obj.contains(k)) DuplicateKey(k);
    key_ = std::move(k);
    return true;
  }
  bool end_object() override { return Close(); }
  bool end_array() override { return Close(); }

 private:
  // Places `v` into the container on top of the stack (or as the root) and
  // returns where it now lives.
  json* Place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& parent = *stack_.back();
    if (parent.is_object()) {
      if (stack_.size() == 1) top_key_ = key_;
      return &(parent[key_] = std::move(v));
    }
    parent.push_back(std::move(v));
    return &parent.back();
  }
  bool Value(json&& v) {
    Place(std::move(v));
    if (InStreamedArray(stack_.size())) Convert();
    return true;
  }
  bool Open(json&& v) {
    CheckDepth(stack_.size());
    stack_.push_back(Place(std::move(v)));
    return true;
  }
  bool Close() {
    stack_.pop_back();
    if (InStreamedArray(stack_.size())) Convert();
    return true;
  }
  // True when the container on top of a stack of `depth` is one of the
  // streamed top-level arrays, i.e. an element of it just completed.
  bool InStreamedArray(size_t depth) const {
    return depth == 2 && stack_[0]->is_object() && stack_[1]->is_array() && IsStreamedKey(top_key_);
  }
  void CheckVersionOnce() {
    if (!version_checked_) {  // a newer format should fail on its version, not on a new field
      if (root.contains("format_version")) CheckVersion(root, r_);
      version_checked_ = true;
    }
  }
  void Convert() {
    CheckVersionOnce();
    json& array = *stack_[1];
    const json& e = array.back();
    Path base;
    if (top_key_ == "tensors") Append(out_.tensors, e, base / "tensors", ReadTensor);
    else if (top_key_ == "buffers") Append(out_.buffers, e, base / "buffers", ReadBuffer);
    else if (top_key_ == "ops") Append(out_.ops, e, base / "ops", ReadOp);
    else if (top_key_ == "sources") Append(out_.sources, e, base / "sources", ReadPiece);
    else Append(out_.destinations, e, base / "destinations", ReadPiece);
    array.erase(array.size() - 1);
  }
  template <class T, class F>
  void Append(std::optional<std::vector<T>>& v, const json& e, const Path& ap, F read_one) {
    if (!v) v.emplace();
    v->push_back(read_one(e, ap[static_cast<int64_t>(v->size())], r_));
  }
  size_t Converted(const std::string& k) const {
    auto n = [](const auto& v) { return v ? v->size() : size_t{0}; };
    if (k == "tensors") return n(out_.tensors);
    if (k == "buffers") return n(out_.buffers);
    if (k == "ops") return n(out_.ops);
    if (k == "sources") return n(out_.sources);
    return n(out_.destinations);
  }
  std::string PathOfTop() const override {
    const bool in_array = stack_.size() >= 2 && stack_[1]->is_array();
    return TopPath(stack_.size(), in_array, top_key_, stack_.size() >= 3 ? Converted(top_key_) : 0);
  }

  Streamed& out_;
  std::vector<json*> stack_;
  std::string key_, top_key_;
  bool version_checked_ = false;
};

std::pair<int64_t, int64_t> LineColumn(const std::string& text, size_t byte) {
  byte = std::min(byte, text.size());
  const auto end = text.begin() + static_cast<std::ptrdiff_t>(byte);
  const int64_t line = 1 + std::count(text.begin(), end, '\n');
  const size_t last = byte == 0 ? std::string::npos : text.rfind('\n', byte - 1);
  const int64_t col = static_cast<int64_t>(last == std::string::npos ? byte + 1 : byte - last);
  return {line, col};
}

// ---------------------------------------------------------------- elements: write

// Writers are templates so WritePlan can use ordered_json (readable key
// order in files) and PlanToJson plain json. Default-valued fields are
// omitted where the reader restores them exactly.

template <class J>
J OpToJson(const Op& op) {
  J j;
  j["id"] = op.id;
  j["kind"] = OpKindName(op.kind);
  j["gpu"] = op.gpu;
  j["stream"] = op.stream;
  if (op.group != -1) j["group"] = op.group;
  if (!op.deps.empty()) j["deps"] = op.deps;
  if (op.buffer != -1) j["buffer"] = op.buffer;
  if (!op.copies.empty()) {
    J a = J::array();
    for (const auto& c : op.copies) {
      J e;
      e["src"] = RegionToJson<J>(c.src);
      e["dst"] = RegionToJson<J>(c.dst);
      a.push_back(std::move(e));
    }
    j["copies"] = std::move(a);
  }
  if (op.region != Region{}) j["region"] = RegionToJson<J>(op.region);
  if (!op.tiles.empty()) j["tiles"] = TilesToJson<J>(op.tiles);
  if (op.peer != -1) j["peer"] = op.peer;
  if (op.match != -1) j["match"] = op.match;
  if (op.segment != -1) j["segment"] = op.segment;
  if (!op.label.empty()) j["label"] = op.label;
  if (op.sm_share != 1.0) j["sm_share"] = op.sm_share;
  return j;
}

template <class J>
J BufferToJson(const PlanBuffer& b) {
  J j;
  j["id"] = b.id;
  j["gpu"] = b.gpu;
  if (b.space != MemorySpace::kDevice) j["space"] = MemorySpaceName(b.space);
  j["role"] = BufferRoleName(b.role);
  j["bytes"] = b.bytes;
  if (b.layer != -1) j["layer"] = b.layer;
  if (b.preexisting) j["preexisting"] = true;
  if (!b.name.empty()) j["name"] = b.name;
  return j;
}

template <class J>
J TensorToJson(const PlanTensor& t) {
  J j;
  j["name"] = t.name;
  J shape = J::array();
  for (int d = 0; d < std::clamp(t.shape.ndim, 0, kMaxDims); ++d) shape.push_back(t.shape.dim[d]);
  j["shape"] = std::move(shape);
  j["dtype"] = DTypeName(t.dtype);
  if (t.quant.role != QuantRole::kNone) j["quant"] = TensorQuantToJson<J>(t.quant);
  return j;
}

template <class J>
J PieceToJson(const ContentPiece& c) {
  J j;
  j["buffer"] = c.buffer;
  j["tensor"] = c.tensor;
  j["box"] = BoxToJson<J>(c.box);
  if (c.offset_elems != 0) j["offset_elems"] = c.offset_elems;
  if (c.stride_elems != Extents{0, 0, 1}) {
    // The shortest prefix whose remainder is zero (the reader fills zeros),
    // but at least one entry per box dimension.
    int n = kMaxDims;
    while (n > 0 && n > c.box.ndim && c.stride_elems[n - 1] == 0) --n;
    J s = J::array();
    for (int d = 0; d < n; ++d) s.push_back(c.stride_elems[d]);
    j["stride_elems"] = std::move(s);
  }
  return j;
}

template <class J>
J SummaryToJson(const PlanSummary& s) {
  J j;
  j["segment_bytes"] = s.segment_bytes;
  j["direct_min_bytes"] = s.direct_min_bytes;
  j["offload_fraction"] = s.offload_fraction;
  j["memory_policy"] = s.memory_policy;
  j["bytes_moved"] = s.bytes_moved;
  j["lower_bound_s"] = s.lower_bound_s;
  j["routing_bound_s"] = s.routing_bound_s;
  j["predicted_time_s"] = s.predicted_time_s;
  j["predicted_peak_bytes"] = s.predicted_peak_bytes;
  return j;
}

template <class J>
std::string Dump(const J& j) {
  return j.dump(-1, ' ', false, J::error_handler_t::replace);
}

}  // namespace

// ---------------------------------------------------------------- public API

nlohmann::json PlanToJson(const Plan& p) {
  json j = json::object();
  j["format_version"] = p.format_version;
  j["name"] = p.name;
  j["cluster_fingerprint"] = p.cluster_fingerprint;
  if (!p.scenario_fingerprint.empty()) j["scenario_fingerprint"] = p.scenario_fingerprint;
  j["stream_names"] = p.stream_names;
  j["summary"] = SummaryToJson<json>(p.summary);
  json c;
  to_json(c, p.cluster);
  j["cluster"] = std::move(c);
  auto array = [](const auto& v, auto to_json_one) {
    json a = json::array();
    a.get_ref<json::array_t&>().reserve(v.size());
    for (const auto& e : v) a.push_back(to_json_one(e));
    return a;
  };
  j["tensors"] = array(p.tensors, TensorToJson<json>);
  j["buffers"] = array(p.buffers, BufferToJson<json>);
  j["ops"] = array(p.ops, OpToJson<json>);
  j["sources"] = array(p.sources, PieceToJson<json>);
  j["destinations"] = array(p.destinations, PieceToJson<json>);
  return j;
}

Plan PlanFromJson(const nlohmann::json& j, const std::string& file) {
  Reader r(file);
  return ReadPlanObject(j, r, nullptr);
}

void WritePlan(const Plan& p, const std::string& path) {
  AtomicOutput file(path);  // a temporary file renamed over `path` once complete
  std::ostream& out = file.stream();
  // Scalars and small objects first, then one line per array element.
  ojson head;
  head["format_version"] = p.format_version;
  head["name"] = p.name;
  head["cluster_fingerprint"] = p.cluster_fingerprint;
  if (!p.scenario_fingerprint.empty()) head["scenario_fingerprint"] = p.scenario_fingerprint;
  head["stream_names"] = p.stream_names;
  std::string h = Dump(head);
  out << h.substr(0, h.size() - 1) << ",\n";  // drop the closing brace
  out << "\"summary\":" << Dump(SummaryToJson<ojson>(p.summary)) << ",\n";
  json c;
  to_json(c, p.cluster);
  out << "\"cluster\":" << Dump(c);
  // Elements through json_write.h where it writes them (the same bytes), else through a DOM; written out in blocks.
  std::string text;
  auto array = [&](const char* key, const auto& v, auto to_json_one, auto append_one) {
    out << ",\n\"" << key << "\":[";
    for (size_t i = 0; i < v.size(); ++i) {
      text += i == 0 ? "\n" : ",\n";
      if (!append_one(text, v[i])) text += Dump(to_json_one(v[i]));
      if (text.size() >= (size_t{1} << 20)) out << text, text.clear();
    }
    out << text << (v.empty() ? "]" : "\n]");
    text.clear();
  };
  auto no_fast_path = [](std::string&, const PlanTensor&) { return false; };  // few and small
  array("tensors", p.tensors, TensorToJson<ojson>, no_fast_path);
  array("buffers", p.buffers, BufferToJson<ojson>, AppendBufferJson);
  array("ops", p.ops, OpToJson<ojson>, AppendOpJson);
  array("sources", p.sources, PieceToJson<ojson>, AppendPieceJson);
  array("destinations", p.destinations, PieceToJson<ojson>, AppendPieceJson);
  out << "}\n";
  file.Commit();
}

Plan ReadPlan(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw InputError(path, "", "plan file not found");
  if (fs::is_directory(path, ec)) throw InputError(path, "", "is a directory, not a plan file");
  const std::string text = ReadInputFile(path, "plan", kMaxPlanInputBytes);

  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw InputError(path, "", text.empty() ? "file is empty" : "file is empty (only whitespace)");
  // Binary data: a NUL anywhere, or control bytes at the start (gzip, ELF...).
  if (size_t nul = text.find('\0'); nul != std::string::npos)
    throw InputError(path, "", fmt::format("not a JSON plan: binary data (NUL byte at offset {})", nul));
  for (size_t i = 0; i < std::min<size_t>(text.size(), 4096); ++i) {
    auto ch = static_cast<unsigned char>(text[i]);
    if (ch < 0x20 && ch != '\t' && ch != '\n' && ch != '\r')
      throw InputError(path, "", fmt::format("not a JSON plan: binary data (control byte 0x{:02x} at offset {})", ch, i));
  }

  // The fast path reads valid plans; on invalid JSON nlohmann's diagnosis of
  // the whole text names the problem; where the fast path is unsure, the DOM
  // reader reads the plan from the start (json_fast.cc says why the three
  // give the same plan and the same first error).
  Reader r(path);
  auto out_of_memory = [&] {
    return InputError(path, "", fmt::format("the plan ({} bytes) needs more memory than this process could get to read it",
                                            text.size()));
  };
  try {
    Streamed streamed;
    PlanSax sax(r, streamed);
    const FastReadResult fast = FastReadPlan(text, sax);
    if (fast == FastReadResult::kDone) return ReadPlanObject(sax.root, r, &streamed);
    auto truncated = [&] {
      auto [line, col] = LineColumn(text, text.size());
      return InputError(path, "", fmt::format("truncated: the JSON ends before the plan is complete (line {}, column {})",
                                              line, col));
    };
    // nlohmann would read the whole text again only to say the same.
    if (fast == FastReadResult::kTruncated) throw truncated();
    SyntaxCheck check;
    if (fast == FastReadResult::kSyntaxError) check = CheckPlanSyntax(text, r);
    if (check.ok) {
      Streamed slow_streamed;
      PlanSax slow(r, slow_streamed);
      check.ok = json::sax_parse(text, &slow, json::input_format_t::json, /*strict=*/true);
      check.error_message = slow.error_message;
      check.error_byte = slow.error_byte;
      if (check.ok) return ReadPlanObject(slow.root, r, &slow_streamed);
    }
    std::string msg = check.error_message;  // "[json.exception.parse_error.101] parse error at line 3, column 5: ..."
    if (auto pos = msg.find("] "); msg.rfind("[json.exception", 0) == 0 && pos != std::string::npos)
      msg = msg.substr(pos + 2);
    if (check.error_byte > text.size() || msg.find("unexpected end of input") != std::string::npos) throw truncated();
    throw InputError(path, "", "invalid JSON: " + msg);
  } catch (const std::bad_alloc&) {
    throw out_of_memory();
  }
}

}  // namespace reshard
