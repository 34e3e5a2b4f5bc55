// Tests of the Plan IR: JSON round trips, Verify's rules, file errors, printing.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "plan/plan.h"
#include "plan/verify_races.h"

namespace reshard {
namespace {

using ::testing::AllOf;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

// ------------------------------------------------------------ helpers

Region Strided(int32_t buffer, int64_t offset, int64_t row_bytes, int64_t rows, int64_t stride) {
  Region r;
  r.buffer = buffer;
  r.offset_bytes = offset;
  r.row_bytes = row_bytes;
  r.rows = rows;
  r.row_stride_bytes = stride;
  return r;
}

Op MakeOp(OpKind kind, int32_t gpu, int32_t stream, std::vector<int32_t> deps = {}) {
  Op op;
  op.kind = kind;
  op.gpu = gpu;
  op.stream = stream;
  op.deps = std::move(deps);
  return op;
}
Op AllocFree(OpKind kind, int32_t gpu, int32_t buffer, std::vector<int32_t> deps = {}) {
  Op op = MakeOp(kind, gpu, kStreamCompute, std::move(deps));
  op.buffer = buffer;
  return op;
}
Op Copy(int32_t gpu, std::vector<CopyPair> pairs, std::vector<int32_t> deps = {}) {
  Op op = MakeOp(OpKind::kCopy, gpu, kStreamCompute, std::move(deps));
  op.copies = std::move(pairs);
  return op;
}
Op P2p(OpKind kind, int32_t gpu, int32_t peer, Region region, int32_t match, int32_t group,
       std::vector<int32_t> deps = {}) {
  Op op = MakeOp(kind, gpu, kStreamComm, std::move(deps));
  op.peer = peer;
  op.region = region;
  op.match = match;
  op.group = group;
  return op;
}
PlanBuffer Buf(int32_t gpu, BufferRole role, int64_t bytes, bool preexisting, std::string name) {
  PlanBuffer b;
  b.gpu = gpu;
  b.role = role;
  b.bytes = bytes;
  b.preexisting = preexisting;
  b.name = std::move(name);
  return b;
}
void Renumber(Plan& p) {
  for (size_t i = 0; i < p.buffers.size(); ++i) p.buffers[i].id = static_cast<int32_t>(i);
  for (size_t i = 0; i < p.ops.size(); ++i) p.ops[i].id = static_cast<int32_t>(i);
}

// Two GPUs exchange weights: alloc staging, pack (strided), a grouped
// exchange (two sends g0→g1, one send g1→g0), unpack, free. Op ids:
//  0 g0 alloc b4 | 1 g0 alloc b6 | 2 g0 alloc b2 | 3 g0 pack b0→b4
//  4 g1 alloc b5 | 5 g1 alloc b7 | 6 g1 alloc b3 | 7 g1 pack b1→b5
//  8 g0 send b4[0,1K)→g1 | 9 g0 send b4[1K,2K)→g1 | 10 g0 recv b6←g1
//  11 g1 send b5→g0 | 12 g1 recv b7[0,1K)←g0 | 13 g1 recv b7[1K,2K)←g0
//  14 g0 unpack b6,b0→b2 | 15 g0 free b4 | 16 g0 free b6
//  17 g1 unpack b7,b1→b3 | 18 g1 free b5 | 19 g1 free b7
Plan GoodPlan() {
  Plan p;
  p.name = "two-gpu-exchange";
  p.cluster = ClusterPreset("h200-x2");
  p.cluster_fingerprint = p.cluster.Fingerprint();
  p.tensors.push_back(PlanTensor{"layers.0.w", MakeShape({4, 1024}), DType::kBF16, {}});
  p.buffers = {
      Buf(0, BufferRole::kSourceWeights, 4096, true, "src.g0"),
      Buf(1, BufferRole::kSourceWeights, 4096, true, "src.g1"),
      Buf(0, BufferRole::kDestinationWeights, 4096, false, "dst.g0"),
      Buf(1, BufferRole::kDestinationWeights, 4096, false, "dst.g1"),
      Buf(0, BufferRole::kStaging, 2048, false, "stage.send.g0"),
      Buf(1, BufferRole::kStaging, 2048, false, "stage.send.g1"),
      Buf(0, BufferRole::kStaging, 2048, false, "stage.recv.g0"),
      Buf(1, BufferRole::kStaging, 2048, false, "stage.recv.g1"),
  };
  p.buffers[0].layer = p.buffers[1].layer = 0;
  p.ops = {
      AllocFree(OpKind::kAlloc, 0, 4),
      AllocFree(OpKind::kAlloc, 0, 6),
      AllocFree(OpKind::kAlloc, 0, 2),
      Copy(0, {{Strided(0, 1024, 1024, 2, 2048), ContiguousRegion(4, 0, 2048)}}),
      AllocFree(OpKind::kAlloc, 1, 5),
      AllocFree(OpKind::kAlloc, 1, 7),
      AllocFree(OpKind::kAlloc, 1, 3),
      Copy(1, {{ContiguousRegion(1, 2048, 2048), ContiguousRegion(5, 0, 2048)}}),
      P2p(OpKind::kSend, 0, 1, ContiguousRegion(4, 0, 1024), 12, 0, {3}),
      P2p(OpKind::kSend, 0, 1, ContiguousRegion(4, 1024, 1024), 13, 0),
      P2p(OpKind::kRecv, 0, 1, ContiguousRegion(6, 0, 2048), 11, 0, {1}),
      P2p(OpKind::kSend, 1, 0, ContiguousRegion(5, 0, 2048), 10, 0, {7}),
      P2p(OpKind::kRecv, 1, 0, ContiguousRegion(7, 0, 1024), 8, 0, {5}),
      P2p(OpKind::kRecv, 1, 0, ContiguousRegion(7, 1024, 1024), 9, 0),
      Copy(0,
           {{ContiguousRegion(6, 0, 2048), ContiguousRegion(2, 2048, 2048)},
            {Strided(0, 0, 1024, 2, 2048), ContiguousRegion(2, 0, 2048)}},
           {10}),
      AllocFree(OpKind::kFree, 0, 4, {9}),
      AllocFree(OpKind::kFree, 0, 6),
      Copy(1,
           {{ContiguousRegion(7, 0, 2048), ContiguousRegion(3, 0, 2048)},
            {ContiguousRegion(1, 0, 2048), ContiguousRegion(3, 2048, 2048)}},
           {13}),
      AllocFree(OpKind::kFree, 1, 5, {11}),
      AllocFree(OpKind::kFree, 1, 7),
  };
  p.ops[8].segment = p.ops[12].segment = 4;
  p.ops[8].label = "seg 4 L0";
  Renumber(p);
  Box rows01 = SliceBox(p.tensors[0].shape, 0, 0, 2), rows23 = SliceBox(p.tensors[0].shape, 0, 2, 4);
  p.sources = {ContentPiece{0, 0, rows01, 0, {1024, 1, 0}}, ContentPiece{1, 0, rows23, 0, {1024, 1, 0}}};
  Box left = SliceBox(p.tensors[0].shape, 1, 0, 512), right = SliceBox(p.tensors[0].shape, 1, 512, 1024);
  p.destinations = {ContentPiece{2, 0, left, 0, {512, 1, 0}}, ContentPiece{3, 0, right, 0, {512, 1, 0}}};
  p.summary.segment_bytes = 1024;
  p.summary.offload_fraction = 0.25;
  p.summary.memory_policy = "dest-per-layer+source-offload";
  p.summary.bytes_moved = BytesMoved{8192, 4096, 0, 0};
  p.summary.lower_bound_s = 1.0 / 3.0;
  p.summary.predicted_time_s = 0.1234567890123;
  p.summary.predicted_peak_bytes = {int64_t{140} << 30, 12345};
  return p;
}

std::vector<std::string> Problems(const Plan& p, const Cluster* expected = nullptr) {
  return Verify(p, expected).problems;
}

// True when some problem contains every fragment.
::testing::Matcher<std::vector<std::string>> HasProblem(const std::string& a, const std::string& b = "") {
  return Contains(AllOf(HasSubstr(a), HasSubstr(b)));
}

std::string TempPath(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("reshard_plan_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}
std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// ------------------------------------------------------------ basics

TEST(PlanBasics, RegionGeometry) {
  Region c = ContiguousRegion(3, 100, 64);
  EXPECT_EQ(c.Bytes(), 64);
  EXPECT_TRUE(c.Contiguous());
  EXPECT_EQ(c.End(), 164);
  Region s = Strided(0, 1024, 1024, 2, 2048);
  EXPECT_EQ(s.Bytes(), 2048);
  EXPECT_FALSE(s.Contiguous());
  EXPECT_EQ(s.End(), 4096);
  Region dense = Strided(0, 0, 256, 4, 256);
  dense.planes = 3;
  dense.plane_stride_bytes = 1024;
  EXPECT_TRUE(dense.Contiguous());
  EXPECT_EQ(dense.Bytes(), 3072);
  EXPECT_EQ(dense.End(), 3072);
  dense.plane_stride_bytes = 2048;
  EXPECT_FALSE(dense.Contiguous());
  EXPECT_EQ(dense.End(), 2 * 2048 + 3 * 256 + 256);
  Region empty = ContiguousRegion(0, 77, 0);
  EXPECT_TRUE(empty.Contiguous());
  EXPECT_EQ(empty.End(), 77);
}

// RegionsOverlap against a byte map, on random shapes small enough that it is
// exact (rows and planes well under its walk limits): contiguous, strided
// rows (one stride or two), planes, rows that overlap or touch each other.
TEST(PlanBasics, RegionsOverlapMatchesAByteMap) {
  std::mt19937_64 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto random_region = [&]() {
    Region r = Strided(0, pick(0, 40), pick(1, 12), pick(1, 6), pick(0, 24));
    if (pick(0, 2) == 0) {
      r.planes = pick(1, 4);
      r.plane_stride_bytes = pick(0, 90);
    }
    if (pick(0, 3) == 0) r = ContiguousRegion(0, pick(0, 60), pick(1, 50));
    return r;
  };
  auto bytes_of = [](const Region& r) {
    std::vector<bool> m(static_cast<size_t>(r.End()) + 1, false);
    for (int64_t p = 0; p < r.planes; ++p)
      for (int64_t q = 0; q < r.rows; ++q)
        for (int64_t b = 0; b < r.row_bytes; ++b)
          m[static_cast<size_t>(r.offset_bytes + p * r.plane_stride_bytes + q * r.row_stride_bytes + b)] = true;
    return m;
  };
  int overlapping = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    const Region a = random_region(), b = random_region();
    const std::vector<bool> ma = bytes_of(a), mb = bytes_of(b);
    bool want = false;
    for (size_t k = 0; k < std::min(ma.size(), mb.size()); ++k) want |= ma[k] && mb[k];
    overlapping += want;
    ASSERT_EQ(RegionsOverlap(a, b), want)
        << "a: off " << a.offset_bytes << " row " << a.row_bytes << " x " << a.rows << " stride " << a.row_stride_bytes
        << " planes " << a.planes << " stride " << a.plane_stride_bytes << "; b: off " << b.offset_bytes << " row "
        << b.row_bytes << " x " << b.rows << " stride " << b.row_stride_bytes << " planes " << b.planes << " stride "
        << b.plane_stride_bytes;
    ASSERT_EQ(RegionsOverlap(b, a), want);
  }
  EXPECT_GT(overlapping, 2000);  // both answers were exercised
  EXPECT_LT(overlapping, 18000);
  // Column slices of one matrix (rows of one stride) that interleave but never meet, at any row count.
  EXPECT_FALSE(RegionsOverlap(Strided(0, 0, 512, 100000, 2048), Strided(0, 512, 1536, 100000, 2048)));
  EXPECT_TRUE(RegionsOverlap(Strided(0, 0, 513, 100000, 2048), Strided(0, 512, 1536, 100000, 2048)));
  EXPECT_FALSE(RegionsOverlap(Strided(0, 0, 512, 4, 2048), Strided(0, 4 * 2048, 512, 4, 2048)));  // rows after
  EXPECT_FALSE(RegionsOverlap(ContiguousRegion(0, 0, 0), ContiguousRegion(0, 0, 10)));            // empty
}

TEST(PlanBasics, OpBytesAndNames) {
  Plan p = GoodPlan();
  EXPECT_EQ(p.ops[0].Bytes(), 0);   // alloc
  EXPECT_EQ(p.ops[3].Bytes(), 2048);
  EXPECT_EQ(p.ops[8].Bytes(), 1024);
  EXPECT_EQ(p.ops[14].Bytes(), 4096);  // two pairs
  EXPECT_EQ(OpKindName(OpKind::kOffload), "offload");
  EXPECT_EQ(BufferRoleName(BufferRole::kKvCache), "kv_cache");
  EXPECT_EQ(MemorySpaceName(MemorySpace::kHost), "host");
}

// ------------------------------------------------------------ JSON

TEST(PlanJson, RoundTripInMemory) {
  Plan p = GoodPlan();
  json j = PlanToJson(p);
  EXPECT_EQ(j["ops"][8]["kind"], "send");
  EXPECT_EQ(j["ops"][8]["region"]["row_bytes"], 1024);
  EXPECT_FALSE(j["ops"][8]["region"].contains("rows"));  // defaults omitted
  EXPECT_FALSE(j["ops"][0].contains("peer"));
  EXPECT_EQ(j["buffers"][0]["role"], "source_weights");
  EXPECT_EQ(j["tensors"][0]["dtype"], "bf16");
  EXPECT_EQ(PlanFromJson(j, "mem"), p);
  // Through text too (doubles must survive printing).
  EXPECT_EQ(PlanFromJson(json::parse(j.dump()), "mem"), p);
}

TEST(PlanJson, RoundTripThroughFile) {
  Plan p = GoodPlan();
  std::string path = TempPath("good.json");
  WritePlan(p, path);
  EXPECT_EQ(ReadPlan(path), p);
  std::string text = ReadText(path);
  // One op per line, compact, and the same content as PlanToJson.
  EXPECT_THAT(text, HasSubstr("\n{\"id\":8,\"kind\":\"send\",\"gpu\":0,\"stream\":1,\"group\":0,\"deps\":[3],"));
  EXPECT_EQ(json::parse(text), PlanToJson(p));
}

TEST(PlanJson, EmptyPlanRoundTrips) {
  Plan p;
  p.cluster = ClusterPreset("dgx-h200");
  std::string path = TempPath("empty.json");
  WritePlan(p, path);
  EXPECT_EQ(ReadPlan(path), p);
  EXPECT_EQ(PlanFromJson(PlanToJson(p), "mem"), p);
}

TEST(PlanJson, OmittedDefaultsReadAsDefaults) {
  json j = PlanToJson(GoodPlan());
  j.erase("stream_names");
  j.erase("summary");
  j.erase("sources");
  j["ops"][0].erase("stream");
  Plan p = PlanFromJson(j, "mem");
  EXPECT_EQ(p.stream_names, (std::vector<std::string>{"compute", "comm", "host"}));
  EXPECT_EQ(p.summary, PlanSummary{});
  EXPECT_TRUE(p.sources.empty());
  EXPECT_EQ(p.ops[0].stream, 0);
}

struct Malformed {
  const char* name;
  std::function<void(json&)> mutate;
  std::string field;
  std::string problem;
};

std::vector<Malformed> MalformedCases() {
  return {
      {"region buffer not int", [](json& j) { j["ops"][12]["region"]["buffer"] = "x"; }, "ops[12].region.buffer",
       "expected an integer"},
      {"unknown kind", [](json& j) { j["ops"][3]["kind"] = "sned"; }, "ops[3].kind", "did you mean 'send'"},
      {"negative bytes", [](json& j) { j["buffers"][2]["bytes"] = -5; }, "buffers[2].bytes", "must be >= 0"},
      {"missing gpu", [](json& j) { j["ops"][0].erase("gpu"); }, "ops[0].gpu", "required field is missing"},
      {"unknown op field", [](json& j) { j["ops"][1]["colour"] = 1; }, "ops[1].colour", "unknown field"},
      {"typo field", [](json& j) { j["ops"][1]["segmnt"] = 1; }, "ops[1].segmnt", "did you mean 'segment'"},
      {"newer version", [](json& j) { j["format_version"] = 2; }, "format_version", "unsupported"},
      {"fraction range", [](json& j) { j["summary"]["offload_fraction"] = 1.5; }, "summary.offload_fraction",
       "must be in [0, 1]"},
      {"inverted box", [](json& j) { j["sources"][0]["box"][1] = json::array({5, 2}); }, "sources[0].box[1]",
       "below lo"},
      {"bad dtype", [](json& j) { j["tensors"][0]["dtype"] = "bf17"; }, "tensors[0].dtype", ""},
      {"cluster field", [](json& j) { j["cluster"]["nodes"] = "two"; }, "cluster.nodes", ""},
      {"deps not array", [](json& j) { j["ops"][0]["deps"] = 5; }, "ops[0].deps", "expected an array"},
      {"fractional id", [](json& j) { j["ops"][5]["id"] = 1.5; }, "ops[5].id", "expected an integer"},
      {"int32 overflow", [](json& j) { j["ops"][5]["gpu"] = 5000000000LL; }, "ops[5].gpu", "too large"},
      {"bad space", [](json& j) { j["buffers"][1]["space"] = "hbm"; }, "buffers[1].space", "device"},
      {"op not object", [](json& j) { j["ops"][4] = 17; }, "ops[4]", "expected an object"},
      {"copy pair missing dst", [](json& j) { j["ops"][14]["copies"][1].erase("dst"); }, "ops[14].copies[1].dst",
       "missing"},
      {"rows zero", [](json& j) { j["ops"][3]["copies"][0]["src"]["rows"] = 0; }, "ops[3].copies[0].src.rows",
       "must be >= 1"},
      {"stride too long", [](json& j) { j["destinations"][1]["stride_elems"] = json::array({1, 2, 3, 4}); },
       "destinations[1].stride_elems", "at most 3"},
      {"top-level typo", [](json& j) { j["opps"] = json::array(); }, "opps", "did you mean 'ops'"},
      {"missing cluster", [](json& j) { j.erase("cluster"); }, "cluster", "missing"},
      {"name not string", [](json& j) { j["buffers"][0]["name"] = 3; }, "buffers[0].name", "expected a string"},
      {"preexisting not bool", [](json& j) { j["buffers"][0]["preexisting"] = "yes"; }, "buffers[0].preexisting",
       "true or false"},
      {"not an object", [](json& j) { j = json::array({1, 2}); }, "", "expected a JSON object"},
  };
}

TEST(PlanJson, MalformedDomNamesTheField) {
  for (const auto& c : MalformedCases()) {
    SCOPED_TRACE(c.name);
    json j = PlanToJson(GoodPlan());
    c.mutate(j);
    try {
      PlanFromJson(j, "plan.json");
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), "plan.json");
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_THAT(e.problem(), HasSubstr(c.problem)) << e.what();
    }
  }
}

// The streaming file reader must report exactly the same paths.
TEST(PlanJson, MalformedFileNamesTheField) {
  std::string path = TempPath("malformed.json");
  for (const auto& c : MalformedCases()) {
    SCOPED_TRACE(c.name);
    json j = PlanToJson(GoodPlan());
    c.mutate(j);
    WriteText(path, j.dump());
    try {
      ReadPlan(path);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(e.file(), path);
      EXPECT_EQ(e.field(), c.field) << e.what();
      EXPECT_THAT(e.problem(), HasSubstr(c.problem)) << e.what();
    }
  }
}

void ExpectFileError(const std::string& path, const std::string& problem) {
  try {
    ReadPlan(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_THAT(e.problem(), HasSubstr(problem)) << e.what();
  }
}

TEST(PlanJson, BadFiles) {
  ExpectFileError(TempPath("does-not-exist.json"), "not found");
  ExpectFileError(std::filesystem::path(TempPath("x")).parent_path().string(), "is a directory");
  std::string path = TempPath("bad.json");
  WriteText(path, "");
  ExpectFileError(path, "file is empty");
  WriteText(path, "  \n\t ");
  ExpectFileError(path, "only whitespace");
  WriteText(path, std::string("\x1f\x8b\x08\x00junk", 8));
  ExpectFileError(path, "binary data");
  WriteText(path, std::string("{\"name\": \"a\0b\"}", 15));
  ExpectFileError(path, "NUL byte at offset 11");
  WriteText(path, "[1, 2, 3]");
  ExpectFileError(path, "expected a JSON object");
  WriteText(path, "\"plan\"");
  ExpectFileError(path, "expected a JSON object");
  WriteText(path, "{\"ops\": [}");
  ExpectFileError(path, "invalid JSON: parse error at line 1, column 10");
  // Truncated: a real plan cut in the middle.
  std::string good = TempPath("good_for_truncation.json");
  WritePlan(GoodPlan(), good);
  std::string text = ReadText(good);
  for (size_t cut : {size_t{1}, text.size() / 7, text.size() / 3, text.size() / 2, text.size() - 3, text.size() - 2}) {
    SCOPED_TRACE(cut);
    WriteText(path, text.substr(0, cut));
    ExpectFileError(path, "truncated");
  }
  {
    // Cut inside a streamed array of 3000 ops (its begun elements counted and
    // reserved at once, the scanner answering "truncated" at the end), and
    // the same text with a syntax error before the cut: that error is named.
    json big = PlanToJson(GoodPlan());
    const json op = big["ops"][0];
    for (int64_t i = static_cast<int64_t>(big["ops"].size()); i < 3000; ++i) {
      big["ops"].push_back(op);
      big["ops"].back()["id"] = i;
      big["ops"].back()["deps"] = json::array();
    }
    const std::string b = big.dump(1);
    const std::string cut = b.substr(0, b.size() / 2);
    WriteText(path, cut);
    const auto lines = std::count(cut.begin(), cut.end(), '\n') + 1;
    ExpectFileError(path, fmt::format("truncated: the JSON ends before the plan is complete (line {}, column {})", lines,
                                      cut.size() - cut.rfind('\n')));
    std::string bad = cut;
    bad[bad.find("\"deps\"")] = '\'';
    WriteText(path, bad);
    ExpectFileError(path, "invalid JSON: parse error");
  }
  // Duplicate keys are refused rather than silently taking the last.
  json j = PlanToJson(GoodPlan());
  std::string dup = j.dump();
  dup.insert(1, "\"name\":\"first\",");
  WriteText(path, dup);
  try {
    ReadPlan(path);
    ADD_FAILURE() << "duplicate accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.field(), "name");
    EXPECT_THAT(e.problem(), HasSubstr("duplicate field"));
  }
}

// The file reader converts common elements without a DOM and hands unusual
// ones to the DOM reader: valid but unusual spellings (escapes, integral
// floats, -0, exponents, whitespace, reordered or escaped keys) must read as
// the DOM reader (PlanFromJson) reads them.
TEST(PlanJson, UnusualSpellingsReadAsTheDomReaderReadsThem) {
  const std::string good = TempPath("spellings_good.json");
  WritePlan(GoodPlan(), good);
  std::ifstream in(good);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::pair<std::string, std::string> cases[] = {
      {"\"gpu\":0", "\"gpu\":0.0"},         {"\"gpu\":0", "\"gpu\":-0"},
      {"\"offset_bytes\":0,", "\"offset_bytes\":0e5,"}, {"\"kind\":", "\"\\u006bind\":"},
      {",\"", " ,\n\t\""},                  {"\"label\":\"", "\"label\":\"\\u00e9\\n\xc3\xa9"},
      {"\"id\":", "\"id\" : "},             {"\"stream\":0,", ""},
      {"\"rows\":2,", "\"rows\":2E0,"},      {"\"sm_share\":0.5", "\"sm_share\":5e-1"},
  };
  const std::string path = TempPath("spellings.json");
  for (const auto& [from, to] : cases) {
    SCOPED_TRACE(from + " -> " + to);
    std::string t = text;
    size_t n = 0;
    for (size_t pos = t.find(from); pos != std::string::npos; pos = t.find(from, pos + to.size()), ++n)
      t.replace(pos, from.size(), to);
    if (n == 0) continue;  // GoodPlan has no such field
    WriteText(path, t);
    EXPECT_EQ(ReadPlan(path), PlanFromJson(json::parse(t), path));
  }
}

TEST(PlanJson, WriteToMissingDirectoryFails) {
  EXPECT_THROW(WritePlan(GoodPlan(), TempPath("no/such/dir/plan.json")), InputError);
}

// Random plans (fields within the JSON ranges, not necessarily valid for
// Verify) survive both round trips exactly.
Region RandomRegion(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> small(0, 5), big(0, int64_t{1} << 40);
  Region r;
  r.buffer = static_cast<int32_t>(small(rng)) - 1;
  r.offset_bytes = big(rng);
  r.row_bytes = big(rng);
  if (small(rng) > 2) {
    r.rows = 1 + small(rng);
    r.row_stride_bytes = big(rng);
  }
  if (small(rng) > 3) {
    r.planes = 1 + small(rng);
    r.plane_stride_bytes = big(rng);
  }
  return r;
}

Plan RandomPlan(std::mt19937_64& rng) {
  std::uniform_int_distribution<int> pick(0, 1000);
  auto coin = [&](int percent) { return pick(rng) % 100 < percent; };
  auto idx = [&](int n) { return static_cast<int32_t>(pick(rng) % n); };
  std::uniform_real_distribution<double> unit(0, 1);
  Plan p;
  std::vector<std::string> presets = ClusterPresetNames();
  p.cluster = ClusterPreset(presets[idx(static_cast<int>(presets.size()))]);
  p.name = coin(80) ? "random-" + std::to_string(pick(rng)) : "";
  p.cluster_fingerprint = coin(90) ? p.cluster.Fingerprint() : "feedface";
  if (coin(20)) p.stream_names.push_back("extra \"quoted\" ✓");
  for (int t = idx(4); t > 0; --t) {
    PlanTensor tensor;
    tensor.name = "t" + std::to_string(t);
    int nd = idx(4);
    std::vector<int64_t> dims;
    for (int d = 0; d < nd; ++d) dims.push_back(1 + idx(5000));
    tensor.shape.ndim = nd;
    for (int d = 0; d < nd; ++d) tensor.shape.dim[d] = dims[d];
    tensor.dtype = std::vector<DType>{DType::kBF16, DType::kFP16, DType::kFP32, DType::kFP8E4M3,
                                      DType::kFP8E5M2}[idx(5)];
    p.tensors.push_back(tensor);
  }
  for (int b = idx(20); b > 0; --b) {
    PlanBuffer buf;
    buf.id = idx(30);
    buf.gpu = idx(64);
    buf.space = coin(30) ? MemorySpace::kHost : MemorySpace::kDevice;
    buf.role = static_cast<BufferRole>(idx(7));
    buf.bytes = static_cast<int64_t>(unit(rng) * 1e12);
    buf.layer = idx(100) - 1;
    buf.preexisting = coin(50);
    buf.name = coin(70) ? "buf" + std::to_string(b) : "";
    p.buffers.push_back(buf);
  }
  for (int i = idx(60); i > 0; --i) {
    Op op;
    op.id = idx(100);
    op.kind = static_cast<OpKind>(idx(7));
    op.gpu = idx(64);
    op.stream = idx(4);
    op.group = idx(10) - 1;
    for (int d = idx(4); d > 0; --d) op.deps.push_back(idx(100));
    op.buffer = idx(10) - 1;
    for (int c = coin(40) ? idx(4) : 0; c > 0; --c) op.copies.push_back({RandomRegion(rng), RandomRegion(rng)});
    if (coin(60)) op.region = RandomRegion(rng);
    op.peer = idx(10) - 1;
    op.match = idx(100) - 1;
    op.segment = idx(50) - 1;
    if (coin(30)) op.label = coin(50) ? "L" + std::to_string(i) + " \\ tab\t" : "seg " + std::to_string(i) + " L3";
    if (coin(10)) op.sm_share = 0.5;
    p.ops.push_back(op);
  }
  for (auto* pieces : {&p.sources, &p.destinations}) {
    for (int k = idx(6); k > 0; --k) {
      ContentPiece c;
      c.buffer = idx(20);
      c.tensor = idx(5);
      c.box.ndim = idx(4);
      for (int d = 0; d < c.box.ndim; ++d) {
        c.box.lo[d] = idx(100);
        c.box.hi[d] = c.box.lo[d] + idx(100);
      }
      c.offset_elems = coin(50) ? idx(100000) : 0;
      if (coin(70)) c.stride_elems = {idx(3) * idx(1000), idx(3), coin(20) ? idx(7) : 0};
      pieces->push_back(c);
    }
  }
  p.summary.segment_bytes = idx(1 << 20);
  p.summary.offload_fraction = coin(30) ? 0.0 : unit(rng);
  p.summary.memory_policy = coin(50) ? "policy" : "";
  p.summary.bytes_moved = BytesMoved{idx(1000), idx(1000), idx(1000), idx(1000)};
  p.summary.lower_bound_s = unit(rng) * 10;
  p.summary.predicted_time_s = unit(rng) * 1e-6;
  for (int g = idx(8); g > 0; --g) p.summary.predicted_peak_bytes.push_back(static_cast<int64_t>(unit(rng) * 1e11));
  return p;
}

TEST(PlanJson, RandomPlansRoundTrip) {
  std::mt19937_64 rng(20240611);
  std::string path = TempPath("random.json");
  for (int iter = 0; iter < 150; ++iter) {
    SCOPED_TRACE(iter);
    Plan p = RandomPlan(rng);
    ASSERT_EQ(PlanFromJson(PlanToJson(p), "mem"), p);
    if (iter % 3 != 0) continue;  // files are slower; a third of the plans is plenty
    WritePlan(p, path);
    ASSERT_EQ(ReadPlan(path), p);
  }
}

// WritePlan writes the big arrays' elements without a DOM where it can
// (plan/json_write.h): every element line must still be nlohmann's compact
// dump of what it parses to (ordered: the file's key order), and the file's
// content PlanToJson's. Plain and escaped labels and names, sm_share and
// default-valued fields all occur in these plans.
TEST(PlanJson, FileLinesAreTheCompactDumpOfTheirContent) {
  std::mt19937_64 rng(20261206);
  std::string path = TempPath("lines.json");
  int64_t lines = 0;
  for (int iter = 0; iter < 60; ++iter) {
    SCOPED_TRACE(iter);
    const Plan p = RandomPlan(rng);
    WritePlan(p, path);
    const std::string text = ReadText(path);
    ASSERT_EQ(json::parse(text), PlanToJson(p));
    std::istringstream in(text);
    std::string line;
    std::getline(in, line);  // the head: the plan's scalars, its object left open
    while (std::getline(in, line)) {
      if (line.empty() || line[0] != '{') continue;  // keys and brackets
      if (line.back() == ',') line.pop_back();
      ASSERT_EQ(nlohmann::ordered_json::parse(line).dump(), line);
      ++lines;
    }
  }
  EXPECT_GT(lines, 1000);
}

// ------------------------------------------------------------ Verify

TEST(PlanVerify, GoodPlanPasses) {
  Plan p = GoodPlan();
  VerifyResult r = Verify(p, &p.cluster);
  EXPECT_TRUE(r.ok()) << ::testing::PrintToString(r.problems);
}

// Each region fits its buffer, but 2,049 copies of 1 PiB sum past 2^62: the
// simulator's per-link byte totals would wrap (they did: a negative NVLink
// byte count, exit 0). Refused by Verify instead.
TEST(PlanVerify, RegionBytesSummingPastInt64AreRefused) {
  Plan p = GoodPlan();
  const int64_t kPiB = int64_t{1} << 50;
  p.cluster.gpu_memory_bytes = kPiB;
  p.cluster_fingerprint = p.cluster.Fingerprint();
  p.buffers.push_back(Buf(0, BufferRole::kSourceWeights, kPiB, true, "big.src"));
  p.buffers.push_back(Buf(0, BufferRole::kStaging, kPiB, true, "big.stage"));
  std::vector<CopyPair> pairs(2049, CopyPair{ContiguousRegion(8, 0, kPiB), ContiguousRegion(9, 0, kPiB)});
  p.ops.push_back(Copy(0, pairs));
  Renumber(p);
  EXPECT_THAT(Problems(p), Contains(HasSubstr("op 20 (copy gpu 0): the plan's ops touch more than 2^62 bytes")));
  EXPECT_TRUE(Verify(GoodPlan(), nullptr).ok());
}

TEST(PlanVerify, Cycle) {
  Plan p = GoodPlan();
  p.ops[3].deps.push_back(14);  // pack waits for unpack, which waits for the exchange, which waits for pack
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("dependency cycle", "op 3 (copy gpu 0)"));
  EXPECT_THAT(problems, HasProblem("op 14 (copy gpu 0)"));
}

TEST(PlanVerify, UngroupedExchangeDeadlocks) {
  // Without the group, g0 issues send, send, recv and g1 issues send, recv,
  // recv: each GPU's first send waits for a recv the other has not issued.
  Plan p = GoodPlan();
  for (int i : {8, 9, 10, 11, 12, 13}) p.ops[i].group = -1;
  EXPECT_THAT(Problems(p), HasProblem("dependency cycle (deadlock): op 8 (send gpu 0→1) ⇢ op 9 (send gpu 0→1) ⇢ "
                                      "op 10 (recv gpu 0←1) ~ op 11 (send gpu 1→0) ⇢ op 12 (recv gpu 1←0) ~ op 8 "
                                      "(send gpu 0→1); 12 ops can never start"));
}

TEST(PlanVerify, GroupOnDisjointPairsIsNotADeadlock) {
  // One group id over two independent pairs (g0→g1, g2→g3). g0's launch
  // finishes once g1 receives, so a chain g0 → g3 behind it is fine.
  Plan p;
  p.cluster = ClusterPreset("dgx-h200");
  p.cluster_fingerprint = p.cluster.Fingerprint();
  for (int g = 0; g < 4; ++g) p.buffers.push_back(Buf(g, BufferRole::kStaging, 1024, true, ""));
  Op x = MakeOp(OpKind::kCopy, 0, kStreamComm);
  x.copies = {{ContiguousRegion(0, 0, 512), ContiguousRegion(0, 512, 512)}};
  Op y = MakeOp(OpKind::kCopy, 3, kStreamComm, {2});
  y.copies = {{ContiguousRegion(3, 0, 512), ContiguousRegion(3, 512, 512)}};
  p.ops = {
      P2p(OpKind::kSend, 0, 1, ContiguousRegion(0, 0, 1024), 1, 5),
      P2p(OpKind::kRecv, 1, 0, ContiguousRegion(1, 0, 1024), 0, 5),
      x,  // after g0's group launch on its stream
      y,  // waits for x, before g3's group launch
      P2p(OpKind::kRecv, 3, 2, ContiguousRegion(3, 0, 1024), 5, 5),
      P2p(OpKind::kSend, 2, 3, ContiguousRegion(2, 0, 1024), 4, 5),
  };
  Renumber(p);
  EXPECT_TRUE(Verify(p).ok()) << ::testing::PrintToString(Problems(p));
  // But if g1's recv waited for y, g0's launch could never finish.
  p.ops[1].deps = {3};
  EXPECT_THAT(Problems(p), HasProblem("dependency cycle (deadlock)"));
}

TEST(PlanVerify, DependencyInsideGroupDeadlocks) {
  Plan p = GoodPlan();
  p.ops[12].deps.push_back(11);  // a recv that waits for a send of its own group
  EXPECT_THAT(Problems(p), HasProblem("op 12 (recv gpu 1←0): depends on op 11 (send gpu 1→0)", "group 0"));
}

TEST(PlanVerify, SendWithoutRecv) {
  Plan p = GoodPlan();
  p.ops[8].match = -1;
  p.ops[12].match = -1;
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 8 (send gpu 0→1): no matching recv"));
  EXPECT_THAT(problems, HasProblem("op 12 (recv gpu 1←0): no matching send"));
}

TEST(PlanVerify, MatchNotMutual) {
  Plan p = GoodPlan();
  p.ops[8].match = 13;  // 13 still points at 9
  EXPECT_THAT(Problems(p), HasProblem("op 8 (send gpu 0→1): no matching recv (op 13 (recv gpu 1←0) names op 9"));
}

TEST(PlanVerify, MismatchedBytes) {
  Plan p = GoodPlan();
  p.ops[12].region.row_bytes = 512;
  EXPECT_THAT(Problems(p),
              HasProblem("op 8 (send gpu 0→1): sends 1024 bytes but its recv op 12 (recv gpu 1←0) receives 512 bytes"));
}

TEST(PlanVerify, MismatchedGroupAndPeer) {
  Plan p = GoodPlan();
  p.ops[11].group = 7;
  p.ops[11].stream = kStreamHost;  // alone in group 7 on g1: no stream conflict
  p.ops[13].peer = 1;
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 11 (send gpu 1→0): is in group 7 but its recv op 10 (recv gpu 0←1) is in group 0"));
  EXPECT_THAT(problems, HasProblem("op 9 (send gpu 0→1): its recv op 13 (recv gpu 1←1) does not mirror it"));
}

TEST(PlanVerify, SendRecvOrderCrossing) {
  Plan p = GoodPlan();
  // Same bytes, but the first send is matched with the second recv.
  p.ops[8].match = 13, p.ops[13].match = 8;
  p.ops[9].match = 12, p.ops[12].match = 9;
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("sends from gpu 0 to gpu 1 are out of order", "op 8 (send gpu 0→1) is send #0"));
  EXPECT_EQ(problems.size(), 1u) << ::testing::PrintToString(problems);
}

// Lane 1 (stream "comm2") is a second communicator: a send and its recv go
// through the same one, else NCCL would never pair them.
TEST(PlanVerify, ASendAndItsRecvShareACommunicatorLane) {
  Plan p = GoodPlan();
  p.stream_names.push_back(std::string(kCommLane2StreamName));
  const int32_t lane2 = static_cast<int32_t>(p.stream_names.size()) - 1;
  EXPECT_EQ(CommLane(p, kStreamComm), 0);
  EXPECT_EQ(CommLane(p, lane2), 1);
  EXPECT_FALSE(UsesCommLane2(p));
  for (int i : {8, 9, 10}) p.ops[i].stream = lane2;  // GPU 0's side of the exchange only
  EXPECT_TRUE(UsesCommLane2(p));
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 8 (send gpu 0→1): goes through communicator lane 1 but its recv op 12 (recv "
                                   "gpu 1←0) through lane 0"));
  EXPECT_THAT(problems, HasProblem("op 11 (send gpu 1→0): goes through communicator lane 0 but its recv op 10"));
  for (int i : {11, 12, 13}) p.ops[i].stream = lane2;  // both sides on lane 1
  EXPECT_TRUE(Verify(p, &p.cluster).ok()) << ::testing::PrintToString(Problems(p));
}

TEST(PlanVerify, RegionOutsideBuffer) {
  Plan p = GoodPlan();
  p.ops[8].region.offset_bytes = 2000;
  EXPECT_THAT(Problems(p), HasProblem("op 8 (send gpu 0→1): region [2000, 3024) lies outside buffer 4 "
                                      "'stage.send.g0' (gpu 0), which has 2048 bytes"));
  Plan q = GoodPlan();
  q.ops[3].copies[0].src.row_stride_bytes = 4096;  // second row past the end
  EXPECT_THAT(Problems(q), HasProblem("op 3 (copy gpu 0): copies[0].src [1024, 6144) lies outside buffer 0"));
}

TEST(PlanVerify, NonContiguousSendAndUnequalCopy) {
  Plan p = GoodPlan();
  p.ops[8].region = Strided(4, 0, 256, 4, 512);  // 1024 bytes, strided
  p.ops[14].copies[0].dst.row_bytes = 1024;
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 8 (send gpu 0→1): region is not contiguous"));
  EXPECT_THAT(problems, HasProblem("op 14 (copy gpu 0): copies[0] reads 2048 bytes but writes 1024 bytes"));
}

// Swaps the contents of two ops, keeping ids equal to indices and deps, matches pointing at the same content.
void SwapOps(Plan& p, int a, int b) {
  std::swap(p.ops[a], p.ops[b]);
  for (Op& op : p.ops) {
    for (int32_t& d : op.deps) d = d == a ? b : d == b ? a : d;
    if (op.match == a) op.match = b;
    else if (op.match == b) op.match = a;
  }
  Renumber(p);
}

TEST(PlanVerify, UseAfterFree) {
  Plan p = GoodPlan();
  SwapOps(p, 14, 16);  // free b6 now precedes the unpack that reads it
  p.ops[14].deps = {10};
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 16 (copy gpu 0): uses buffer 6 'stage.recv.g0' (gpu 0) after its free op 14"));
}

TEST(PlanVerify, AccessNotOrderedBeforeFree) {
  Plan p = GoodPlan();
  p.ops[15].deps = {3};  // free b4 waits for the pack only, and
  p.ops[15].stream = kStreamHost;  // is not behind the unpack (which follows the sends) any more
  EXPECT_THAT(Problems(p), HasProblem("op 9 (send gpu 0→1): uses buffer 4", "not ordered before its free op 15"));
}

TEST(PlanVerify, UseBeforeAlloc) {
  Plan p = GoodPlan();
  p.buffers.push_back(Buf(0, BufferRole::kStaging, 16, false, "unused"));
  Renumber(p);
  p.ops[2].buffer = 8;                            // op 2 now allocates the unused buffer
  p.ops[16] = AllocFree(OpKind::kAlloc, 0, 2);    // and b2 is allocated after the unpack wrote it
  Renumber(p);
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 14 (copy gpu 0): uses buffer 2 'dst.g0' (gpu 0) before its alloc op 16"));
}

// ForEachByteConflict against every pair: random accesses of three buffers
// (one only read), strided or contiguous, reads and writes, several per op.
TEST(PlanVerify, ByteConflictsAreEveryOverlappingPairWithAWrite) {
  std::mt19937_64 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Region> regions;
    std::vector<ByteAccess> accesses;
    regions.reserve(60);
    for (int k = 0; k < 60; ++k) {
      const int32_t buffer = static_cast<int32_t>(pick(0, 2));
      regions.push_back(pick(0, 1) ? ContiguousRegion(buffer, pick(0, 200), pick(1, 40))
                                   : Strided(buffer, pick(0, 100), pick(1, 8), pick(1, 6), pick(0, 20)));
      if (pick(0, 3) == 0) {  // planes, overlapping or not
        regions.back().planes = pick(2, 4);
        regions.back().plane_stride_bytes = pick(0, 60);
      }
      accesses.push_back({buffer, static_cast<int32_t>(pick(0, 30)), &regions.back(), buffer != 2 && pick(0, 2) == 0});
    }
    std::set<std::pair<const Region*, const Region*>> want, got;
    for (const ByteAccess& x : accesses)
      for (const ByteAccess& y : accesses)
        if (&x < &y && x.buffer == y.buffer && x.op != y.op && (x.write || y.write) &&
            RegionsOverlap(*x.region, *y.region))
          want.insert({x.region, y.region});
    ForEachByteConflict(accesses, [&](const ByteAccess& x, const ByteAccess& y) {
      EXPECT_TRUE(x.write || y.write);
      EXPECT_TRUE(got.insert(std::minmax(x.region, y.region)).second) << "a pair met twice";
    });
    ASSERT_EQ(got, want) << "trial " << trial;
  }
}

// Step 7: the unpack (op 14) reads the staging buffer the recv (op 10) writes;
// without its dependency nothing orders them on gpu 0 (one is on the compute
// stream, the other on the communication stream).
TEST(PlanVerify, ReadNotOrderedAfterTheWriteOfItsBytes) {
  Plan p = GoodPlan();
  ASSERT_TRUE(Verify(p).ok());
  p.ops[14].deps.clear();
  EXPECT_THAT(Problems(p), HasProblem("op 14 (copy gpu 0): reads bytes of buffer 6 'stage.recv.g0' (gpu 0) that op 10 "
                                      "(recv gpu 0←1) writes; neither is ordered before the other"));
}

// A dependency of one send or receive of a group orders the whole launch:
// with the pack's dependency on op 9 only, op 8 (before it on the stream,
// the same launch) still sends only after the pack. Without it, both race
// with the pack. A group's other ops are not part of its launch: an alloc of
// group 0 on the comm stream after the recv (issued after the group call,
// IssueOrder's `after`) that waits for the pack orders nothing before it.
TEST(PlanVerify, AGroupWaitsForTheDependenciesOfAllItsSendsAndReceives) {
  Plan p = GoodPlan();
  p.ops[8].deps.clear();
  p.ops[9].deps = {3};
  EXPECT_TRUE(Verify(p).ok()) << ::testing::PrintToString(Problems(p));
  p.ops[9].deps.clear();
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 8 (send gpu 0→1): reads bytes of buffer 4", "that op 3 (copy gpu 0) writes"));
  EXPECT_THAT(problems, HasProblem("op 9 (send gpu 0→1): reads bytes of buffer 4", "that op 3 (copy gpu 0) writes"));
  p.buffers.push_back(Buf(0, BufferRole::kStaging, 16, false, "extra.g0"));  // b8
  Op alloc = AllocFree(OpKind::kAlloc, 0, 8, {3});
  alloc.stream = kStreamComm;
  alloc.group = 0;
  p.ops.push_back(alloc);
  Renumber(p);
  EXPECT_THAT(Problems(p), HasProblem("op 8 (send gpu 0→1): reads bytes of buffer 4", "that op 3 (copy gpu 0) writes"));
}

// Ops of one group run at once: a recv that writes the bytes a send of its own
// group reads races with it, whatever their order in the plan.
TEST(PlanVerify, OpsOfOneGroupRunAtOnce) {
  Plan p = GoodPlan();
  p.buffers[4].bytes = 4096;
  p.buffers[6].bytes = 4096;
  p.ops[10].region = ContiguousRegion(4, 1024, 2048);  // the recv now lands on b4 [1K, 3K)
  p.ops[11].region = ContiguousRegion(5, 0, 2048);
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 9 (send gpu 0→1): reads bytes of buffer 4 'stage.send.g0' (gpu 0) that op 10 "
                                   "(recv gpu 0←1) writes; both are issued together in group 0"));
  EXPECT_THAT(problems, Not(HasProblem("op 8 (send gpu 0→1): reads")));  // [0, 1K): other bytes
}

// Two writes of the same bytes race unless ordered; writes of interleaved
// column slices of one matrix do not meet, and need no order.
TEST(PlanVerify, WritesOfTheSameBytesAreOrderedColumnSlicesNeedNot) {
  Plan p = GoodPlan();
  p.buffers.push_back(Buf(0, BufferRole::kStaging, 2048, true, "scratch.g0"));  // b8: 2 rows x 1 KiB
  // Column halves of both rows, on the host and the communication stream (nothing orders them), and the
  // whole buffer on the compute stream.
  p.ops.push_back(Copy(0, {{Strided(0, 0, 512, 2, 2048), Strided(8, 0, 512, 2, 1024)}}));
  p.ops.push_back(Copy(0, {{Strided(0, 512, 512, 2, 2048), Strided(8, 512, 512, 2, 1024)}}));
  p.ops.push_back(Copy(0, {{ContiguousRegion(0, 0, 2048), ContiguousRegion(8, 0, 2048)}}));
  p.ops[20].stream = kStreamHost;
  p.ops[21].stream = kStreamComm;
  Renumber(p);
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 22 (copy gpu 0): writes bytes of buffer 8 'scratch.g0' (gpu 0) that op 20 "
                                   "(copy gpu 0) writes; neither is ordered"));
  EXPECT_THAT(problems, HasProblem("op 21 (copy gpu 0): writes bytes of buffer 8 'scratch.g0' (gpu 0) that op 22"));
  for (const std::string& s : problems) EXPECT_FALSE(s.find("op 21") != s.npos && s.find("op 20") != s.npos) << s;
  p.ops[22].deps = {20};  // 20, then 22, then 21
  p.ops[21].deps = {22};
  EXPECT_TRUE(Verify(p).ok()) << ::testing::PrintToString(Problems(p));
}

TEST(PlanVerify, LifetimeBookkeeping) {
  Plan p = GoodPlan();
  p.ops[19].buffer = 5;  // b5 freed twice, b7 never freed (allowed)
  p.buffers[0].preexisting = false;  // b0 accessed but never allocated; also a source buffer
  p.buffers[6].preexisting = true;   // preexisting yet allocated by op 1
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("buffer 5 'stage.send.g1' (gpu 1): freed 2 times (ops 18, 19)"));
  EXPECT_THAT(problems, HasProblem("uses buffer 0 'src.g0' (gpu 0), which is never allocated"));
  EXPECT_THAT(problems, HasProblem("buffer 6 'stage.recv.g0' (gpu 0): is preexisting", "op 1 (alloc gpu 0)"));
  EXPECT_THAT(problems, HasProblem("sources[0]", "is not preexisting"));
}

TEST(PlanVerify, DestinationBufferFreed) {
  Plan p = GoodPlan();
  p.ops.push_back(AllocFree(OpKind::kFree, 0, 2));
  Renumber(p);
  EXPECT_THAT(Problems(p), HasProblem("destinations[0]", "is freed by op 20 (free gpu 0)"));
}

TEST(PlanVerify, WrongFingerprint) {
  Plan p = GoodPlan();
  p.cluster_fingerprint = "deadbeef";
  EXPECT_THAT(Problems(p), HasProblem("cluster_fingerprint 'deadbeef' does not match its own cluster 'h200-x2'"));
  Plan q = GoodPlan();
  Cluster other = ClusterPreset("dgx-h200");
  EXPECT_THAT(Problems(q, &other), HasProblem("made for cluster 'h200-x2'", "'dgx-h200'"));
  EXPECT_TRUE(Verify(q, &q.cluster).ok());
}

TEST(PlanVerify, ContentPieceOutOfBounds) {
  Plan p = GoodPlan();
  p.destinations[0].box.hi[1] = 2000;  // tensor has 1024 columns
  p.sources[1].offset_elems = 100;     // rows 2-3 at element 100 overrun the 4096-byte buffer
  p.sources[0].tensor = 9;
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("destinations[0] (tensor 0 'layers.0.w' box [0:4, 0:2000]): box is out of bounds",
                                   "[4, 1024]"));
  EXPECT_THAT(problems, HasProblem("sources[1]", "lies outside buffer 1 'src.g1' (gpu 1): needs bytes up to 4296"));
  EXPECT_THAT(problems, HasProblem("sources[0]: tensor 9 does not exist"));
}

TEST(PlanVerify, WrongGpu) {
  Plan p = GoodPlan();
  p.ops[3].copies[0].dst.buffer = 5;  // g1's staging from a g0 copy
  p.ops[18].gpu = 0;                  // g1's buffer freed on g0
  p.ops[18].deps.clear();
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 3 (copy gpu 0): copies[0].dst is in buffer 5 'stage.send.g1' (gpu 1), on gpu 1",
                                   "wrong GPU"));
  EXPECT_THAT(problems, HasProblem("op 18 (free gpu 0): buffer 5 'stage.send.g1' (gpu 1) is on gpu 1 (wrong GPU)"));
}

TEST(PlanVerify, MemorySpaces) {
  Plan p = GoodPlan();
  p.buffers.push_back(Buf(0, BufferRole::kHost, 4096, false, "host.g0"));
  p.buffers.back().space = MemorySpace::kHost;
  Renumber(p);
  Op off = MakeOp(OpKind::kOffload, 0, kStreamHost);
  off.copies = {{ContiguousRegion(0, 0, 4096), ContiguousRegion(8, 0, 4096)}};
  Op alloc = AllocFree(OpKind::kAlloc, 0, 8);
  alloc.stream = kStreamHost;
  Op bad = MakeOp(OpKind::kReload, 0, kStreamHost);  // "reload" from device to host: wrong direction
  bad.copies = {{ContiguousRegion(0, 0, 4096), ContiguousRegion(8, 0, 4096)}};
  p.ops.push_back(alloc);
  p.ops.push_back(off);
  p.ops.push_back(bad);
  Renumber(p);
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 22 (reload gpu 0): copies[0].src is in buffer 0 'src.g0' (gpu 0), which is "
                                   "device memory; a reload needs host memory there"));
  EXPECT_THAT(problems, HasProblem("op 22 (reload gpu 0): copies[0].dst", "needs device memory"));
  for (const auto& s : problems) EXPECT_THAT(s, ::testing::Not(HasSubstr("op 21"))) << s;
}

TEST(PlanVerify, IdsStreamsAndGroups) {
  Plan p = GoodPlan();
  p.ops[5].id = 50;
  p.ops[6].stream = 7;
  p.ops[9].stream = kStreamCompute;  // same group on g0 split over two streams
  p.ops[2].deps.push_back(99);
  p.buffers[3].gpu = 5;
  auto problems = Problems(p);
  EXPECT_THAT(problems, HasProblem("op 5 (alloc gpu 1): id is 50, expected 5"));
  EXPECT_THAT(problems, HasProblem("op 6 (alloc gpu 1): stream 7 does not exist"));
  EXPECT_THAT(problems, HasProblem("op 9 (send gpu 0→1): group 0 uses stream 'compute' on gpu 0, but op 8"));
  EXPECT_THAT(problems, HasProblem("op 2 (alloc gpu 0): depends on op 99, which does not exist"));
  EXPECT_THAT(problems, HasProblem("buffer 3 'dst.g1' (gpu 5): gpu 5 does not exist"));
}

TEST(PlanVerify, StopsAfterFiftyProblems) {
  Plan p = GoodPlan();
  for (int i = 0; i < 70; ++i) p.buffers.push_back(Buf(9, BufferRole::kStaging, 1, true, ""));
  Renumber(p);
  auto problems = Problems(p);
  ASSERT_EQ(problems.size(), 51u);
  EXPECT_EQ(problems.back(), "... and 20 more");
}

// A random but valid plan: segments between random GPU pairs, each with
// staging alloc, pack, a grouped send/recv, unpack and free, on several streams.
Plan RandomValidPlan(std::mt19937_64& rng, int gpus_wanted, int segments) {
  Plan p;
  p.cluster = ClusterPreset(gpus_wanted <= 2 ? "h200-x2" : "dgx-h200");
  p.cluster_fingerprint = p.cluster.Fingerprint();
  const int G = p.Gpus();
  std::uniform_int_distribution<int> gpu(0, G - 1), size(1, 64);
  for (int g = 0; g < G; ++g) p.buffers.push_back(Buf(g, BufferRole::kSourceWeights, 1 << 20, true, ""));
  for (int s = 0; s < segments; ++s) {
    int a = gpu(rng), b = gpu(rng);
    if (a == b) b = (a + 1) % G;
    int64_t bytes = 1024 * size(rng);
    int32_t sa = static_cast<int32_t>(p.buffers.size()), sb = sa + 1;
    p.buffers.push_back(Buf(a, BufferRole::kStaging, bytes, false, ""));
    p.buffers.push_back(Buf(b, BufferRole::kStaging, bytes, false, ""));
    auto add = [&](Op op) {
      p.ops.push_back(std::move(op));
      return static_cast<int32_t>(p.ops.size() - 1);
    };
    int32_t alloc_a = add(AllocFree(OpKind::kAlloc, a, sa));
    int32_t alloc_b = add(AllocFree(OpKind::kAlloc, b, sb));
    int32_t pack = add(Copy(a, {{ContiguousRegion(a, 0, bytes), ContiguousRegion(sa, 0, bytes)}}, {alloc_a}));
    int32_t send = add(P2p(OpKind::kSend, a, b, ContiguousRegion(sa, 0, bytes), -1, s, {pack}));
    int32_t recv = add(P2p(OpKind::kRecv, b, a, ContiguousRegion(sb, 0, bytes), send, s, {alloc_b}));
    p.ops[send].match = recv;
    int32_t unpack = add(Copy(b, {{ContiguousRegion(sb, 0, bytes), ContiguousRegion(b, 0, bytes)}}, {recv}));
    add(AllocFree(OpKind::kFree, a, sa, {send}));
    Op fb = AllocFree(OpKind::kFree, b, sb, {unpack});
    fb.stream = kStreamHost;  // another stream: ordered by the dependency only
    add(fb);
  }
  Renumber(p);
  return p;
}

TEST(PlanVerify, RandomValidPlansPass) {
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 20; ++iter) {
    Plan p = RandomValidPlan(rng, iter % 2 ? 8 : 2, 1 + iter * 5);
    VerifyResult r = Verify(p, &p.cluster);
    ASSERT_TRUE(r.ok()) << iter << ": " << ::testing::PrintToString(r.problems);
    // Dropping the dependency of a free on its user is always caught.
    Plan q = p;
    int32_t free_op = static_cast<int32_t>(q.ops.size()) - 1;  // last segment's free on the host stream
    q.ops[free_op].deps.clear();
    EXPECT_THAT(Problems(q), HasProblem("not ordered before its free op " + std::to_string(free_op))) << iter;
  }
}

// A bigger plan stays fast: every step is near-linear (a quadratic step
// would make this test take minutes).
TEST(PlanVerify, LargePlanVerifiesAndRoundTrips) {
  std::mt19937_64 rng(11);
  Plan p = RandomValidPlan(rng, 8, 2500);  // 20k ops
  ASSERT_TRUE(Verify(p).ok());
  std::string path = TempPath("large.json");
  WritePlan(p, path);
  EXPECT_EQ(ReadPlan(path), p);
  std::string text = ToString(p);
  EXPECT_THAT(text, HasSubstr("ops elided"));
  EXPECT_LT(text.size(), 200000u);
}

// ------------------------------------------------------------ printing

// The coverage check passes a buffer of column shards without expanding its
// rows (plan/verify_coverage.cc) and names problems through the byte runs:
// against a byte map, on pieces of a 2-D tensor at an offset in a buffer
// that also holds a 1-D tensor, written by random row and column blocks
// with random overlaps and gaps. The messages name the first bytes (in
// buffer order) written twice or never written, as before the fast path.
TEST(PlanVerify, CoverageOfColumnShardsMatchesAByteMap) {
  constexpr int64_t kRows = 12, kCols = 10, kElem = 2, kVec = 6;  // bf16: a 12 x 10 matrix after a 6-vector
  constexpr int64_t kPitch = kCols * kElem, kMatrixAt = kVec * kElem, kBufBytes = kMatrixAt + kRows * kPitch;
  std::mt19937 rng(7);
  int passed = 0, twice = 0, gaps = 0;
  for (int iter = 0; iter < 400; ++iter) {
    SCOPED_TRACE(iter);
    Plan p;
    p.tensors.push_back(PlanTensor{"vec", Shape{1, {kVec, 1, 1}}, DType::kBF16, {}});
    p.tensors.push_back(PlanTensor{"mat", Shape{2, {kRows, kCols, 1}}, DType::kBF16, {}});
    p.buffers.push_back(Buf(0, BufferRole::kDestinationWeights, kBufBytes, false, "dst"));
    p.buffers.push_back(Buf(0, BufferRole::kStaging, kBufBytes, false, "src"));
    ContentPiece vec;
    vec.buffer = 0, vec.tensor = 0, vec.box = Box{1, {0, 0, 0}, {kVec, 1, 1}}, vec.stride_elems = {1, 1, 1};
    ContentPiece mat;
    mat.buffer = 0, mat.tensor = 1, mat.box = Box{2, {0, 0, 0}, {kRows, kCols, 1}};
    mat.offset_elems = kVec, mat.stride_elems = {kCols, 1, 1};
    p.destinations = {vec, mat};
    std::vector<int> hits(kBufBytes, 0);
    auto write = [&](Region dst) {
      for (int64_t r = 0; r < dst.rows; ++r)
        for (int64_t b = 0; b < dst.row_bytes; ++b) ++hits[dst.offset_bytes + r * dst.row_stride_bytes + b];
      Region src = ContiguousRegion(1, 0, dst.Bytes());
      p.ops.push_back(Copy(0, {CopyPair{src, dst}}));
    };
    write(ContiguousRegion(0, 0, kMatrixAt));
    // Column shards cut at random columns, each in a few row blocks; one shard may stretch a column or a row.
    std::vector<int64_t> cuts{0, kCols};
    for (int k = std::uniform_int_distribution<int>(0, 3)(rng); k > 0; --k)
      cuts.push_back(std::uniform_int_distribution<int64_t>(1, kCols - 1)(rng));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const int flaw = std::uniform_int_distribution<int>(0, 3)(rng);  // 0, 1: none; 2: a column off; 3: a row off
    for (size_t c = 0; c + 1 < cuts.size(); ++c) {
      int64_t c0 = cuts[c], c1 = cuts[c + 1];
      if (flaw == 2 && c == 0) c1 = std::min(kCols, c1 + (rng() % 2 ? 1 : -1));  // overlap or gap
      if (c1 <= c0) continue;
      const int64_t split = std::uniform_int_distribution<int64_t>(1, kRows - 1)(rng);
      int64_t mid0 = split, mid1 = split;
      if (flaw == 3 && c == 0) (rng() % 2 ? mid0 : mid1) += 1;  // a row twice or never
      const int64_t w = (c1 - c0) * kElem;
      for (const auto& [r0, r1] : {std::pair{int64_t{0}, mid0}, std::pair{mid1, kRows}})
        if (r1 > r0) write(Strided(0, kMatrixAt + r0 * kPitch + c0 * kElem, w, r1 - r0, kPitch));
    }
    Renumber(p);
    const std::vector<std::string> problems = DestinationCoverageProblems(p);
    const auto first_twice = std::find_if(hits.begin(), hits.end(), [](int h) { return h > 1; });
    const auto first_gap = std::find(hits.begin(), hits.end(), 0);
    if (first_twice == hits.end() && first_gap == hits.end()) {
      EXPECT_TRUE(problems.empty()) << ::testing::PrintToString(problems);
      ++passed;
      continue;
    }
    ASSERT_FALSE(problems.empty());
    if (first_twice != hits.end()) {
      ++twice;
      EXPECT_THAT(problems, Contains(HasSubstr(fmt::format("bytes [{}, ", first_twice - hits.begin()))));
      EXPECT_THAT(problems, Contains(HasSubstr("written twice")));
    }
    if (first_gap != hits.end()) {
      ++gaps;
      EXPECT_THAT(problems, Contains(HasSubstr(fmt::format("never written at bytes [{}, ", first_gap - hits.begin()))));
    }
  }
  EXPECT_GT(passed, 100);  // every kind of case was drawn
  EXPECT_GT(twice, 20);
  EXPECT_GT(gaps, 20);
}

TEST(PlanPrint, ToStringListsBuffersAndOpsPerQueue) {
  Plan p = GoodPlan();
  std::string s = ToString(p);
  EXPECT_THAT(s, HasSubstr("plan \"two-gpu-exchange\""));
  EXPECT_THAT(s, HasSubstr("cluster \"h200-x2\""));
  EXPECT_THAT(s, HasSubstr("buffers (8):\n  b0 g0 device source_weights 4.0 KiB preexisting L0 \"src.g0\"\n"));
  EXPECT_THAT(s, HasSubstr("  g0/comm (3 ops):\n"
                           "    #8 g0/comm send 1.0 KiB → g1 [group 0] deps{3} seg 4 match #12 b4+0 \"seg 4 L0\"\n"
                           "    #9 g0/comm send 1.0 KiB → g1 [group 0] match #13 b4+1024\n"
                           "    #10 g0/comm recv 2.0 KiB ← g1 [group 0] deps{1} match #11 b6+0\n"));
  EXPECT_THAT(s, HasSubstr("    #0 g0/compute alloc b4 2.0 KiB\n"));
  EXPECT_THAT(s, HasSubstr("    #14 g0/compute copy 4.0 KiB b6→b2 (2 pairs) deps{10}\n"));
  EXPECT_THAT(s, HasSubstr("offload 25%"));
  // Queues in (gpu, stream) order.
  EXPECT_LT(s.find("g0/compute ("), s.find("g0/comm ("));
  EXPECT_LT(s.find("g0/comm ("), s.find("g1/compute ("));
}

TEST(PlanPrint, ToDotHasNodesAndEdges) {
  std::string d = ToDot(GoodPlan());
  EXPECT_THAT(d, HasSubstr("digraph plan {"));
  EXPECT_THAT(d, HasSubstr("subgraph cluster_g1 {"));
  EXPECT_THAT(d, HasSubstr("op8 [label=\"#8 send 1.0 KiB → g1\\ncomm [group 0]\"];"));
  EXPECT_THAT(d, HasSubstr("op3 -> op8;"));
  EXPECT_THAT(d, HasSubstr("op8 -> op9 [style=dotted];"));
  EXPECT_THAT(d, HasSubstr("op8 -> op12 [style=dashed"));
}

}  // namespace
}  // namespace reshard
