// FP8 quantization in the executor: hand-checked E4M3 encodings and scales
// (executor/quantize_math.h), and hand-built plans with a quantize op run on
// the host backend with every destination byte checked.
#include <cmath>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "executor/quantize_content.h"
#include "executor/quantize_math.h"
#include "tests/executor/test_plans.h"

namespace reshard {
// Named, not anonymous: the test programs compile in unity batches
// (RESHARD_UNITY_BUILD) and these helpers share names with another file's.
namespace quantize_test {

using testplans::Box2;
using testplans::PlanBuilder;

// ---- E4M3 encodings, derived by hand ------------------------------------
// E4M3: value = 2^(e-7) * (1 + m/8) for e in 1..15, subnormal m * 2^-9.

TEST(E4M3, ExactValues) {
  EXPECT_EQ(E4M3FromFloat(0.0f), 0x00);
  EXPECT_EQ(E4M3FromFloat(-0.0f), 0x80);
  EXPECT_EQ(E4M3FromFloat(1.0f), 0x38);     // e = 7, m = 0
  EXPECT_EQ(E4M3FromFloat(0.5f), 0x30);     // e = 6
  EXPECT_EQ(E4M3FromFloat(-2.0f), 0xC0);    // sign, e = 8
  EXPECT_EQ(E4M3FromFloat(448.0f), 0x7E);   // 2^8 * 1.75: the largest finite
  EXPECT_EQ(E4M3FromFloat(-448.0f), 0xFE);
  EXPECT_EQ(E4M3FromFloat(1.125f), 0x39);   // m = 1
  EXPECT_EQ(E4M3FromFloat(0.015625f), 0x08);  // 2^-6: the smallest normal
}

TEST(E4M3, Subnormals) {
  EXPECT_EQ(E4M3FromFloat(std::ldexp(1.0f, -9)), 0x01);       // the smallest subnormal
  EXPECT_EQ(E4M3FromFloat(std::ldexp(7.0f, -9)), 0x07);       // the largest subnormal
  EXPECT_EQ(E4M3FromFloat(std::ldexp(3.0f, -10)), 0x02);      // 1.5 units: tie, to even 2
  EXPECT_EQ(E4M3FromFloat(std::ldexp(5.0f, -10)), 0x02);      // 2.5 units: tie, to even 2
  EXPECT_EQ(E4M3FromFloat(std::ldexp(1.0f, -10)), 0x00);      // 0.5 units: tie, to even 0
  EXPECT_EQ(E4M3FromFloat(-std::ldexp(1.0f, -10)), 0x80);     // ... keeping the sign
  EXPECT_EQ(E4M3FromFloat(std::ldexp(1.1f, -10)), 0x01);      // above the tie
  EXPECT_EQ(E4M3FromFloat(std::ldexp(15.0f, -10)), 0x08);     // 7.5 units: tie, to even 8 = 2^-6
  EXPECT_EQ(E4M3FromFloat(std::ldexp(1.0f, -20)), 0x00);      // far below
  EXPECT_EQ(E4M3FromFloat(std::ldexp(1.0f, -130)), 0x00);     // an fp32 subnormal
}

TEST(E4M3, RoundToNearestEven) {
  EXPECT_EQ(E4M3FromFloat(1.0625f), 0x38);  // 1 + 1/16: tie between m=0 and m=1, to even m=0
  EXPECT_EQ(E4M3FromFloat(1.1875f), 0x3A);  // 1 + 3/16: tie between m=1 and m=2, to even m=2
  EXPECT_EQ(E4M3FromFloat(1.07f), 0x39);    // above the tie
  EXPECT_EQ(E4M3FromFloat(1.9375f), 0x40);  // 1 + 15/16: tie between 1.875 and 2, to even: 2 (carry into e)
  EXPECT_EQ(E4M3FromFloat(0.01464844f), 0x08);  // 2^-6 * 0.9375: 7.5 units, rounds up into the normals
}

TEST(E4M3, Saturates) {
  EXPECT_EQ(E4M3FromFloat(464.0f), 0x7E);   // the tie between 448 and 480 (not finite in E4M3)
  EXPECT_EQ(E4M3FromFloat(500.0f), 0x7E);
  EXPECT_EQ(E4M3FromFloat(1e30f), 0x7E);
  EXPECT_EQ(E4M3FromFloat(-INFINITY), 0xFE);
  EXPECT_EQ(E4M3FromFloat(NAN), 0x7F);
  EXPECT_EQ(E4M3FromFloat(416.0f), 0x7D);   // 2^8 * 1.625
  EXPECT_EQ(E4M3FromFloat(440.0f), 0x7E);   // above the 432 tie between 416 and 448
}

TEST(QuantScale, Formats) {
  // amax 448: fp32 scale 1; amax 896: 2; amax 600: 600/448 = 1.3392857 -> UE8M0 2.
  EXPECT_EQ(QuantScale(448.0f, 0), 1.0f);
  EXPECT_EQ(QuantScale(896.0f, 1), 2.0f);
  EXPECT_EQ(QuantScale(600.0f, 0), 600.0f / 448.0f);
  EXPECT_EQ(QuantScale(600.0f, 1), 2.0f);
  EXPECT_EQ(QuantScale(600.0f, 2), 2.0f);
  EXPECT_EQ(QuantScale(0.0f, 0), 1.0f);  // an all-zero block
  EXPECT_EQ(QuantScale(1.0f, 1), 0.00390625f);  // 1/448 = 2^-8.8 -> 2^-8
  EXPECT_EQ(ScaleStoredBits(2.0f, 2), 128u);   // E8M0: exponent 1 + bias 127
  EXPECT_EQ(ScaleStoredBits(0.00390625f, 2), 119u);
  EXPECT_EQ(ScaleStoredBits(2.0f, 0), 0x40000000u);  // fp32 bits
  // With an fp32 scale the block's amax lands exactly on 448.
  EXPECT_EQ(QuantizeElement(600.0f, QuantScale(600.0f, 0)), 0x7E);
}

TEST(QuantScale, FinitePatternIsFinite) {
  for (int64_t i = 0; i < 100000; ++i) {
    const float v = Bf16ToFloat(FiniteBf16Pattern(3, i));
    ASSERT_TRUE(std::isfinite(v));
    ASSERT_GE(std::fabs(v), std::ldexp(1.0f, -15));
    ASSERT_LT(std::fabs(v), std::ldexp(1.0f, 17));
  }
}

// ---- plans with a quantize op ---------------------------------------------

// One GPU: bf16 tensor W [rows, cols] in a source buffer is quantized into an
// fp8 destination buffer and a scales buffer, in blocks of br x bc.
Plan QuantizePlan(int64_t rows, int64_t cols, int64_t br, int64_t bc, ScaleFormat fmt) {
  PlanBuilder b(1, "quantize");
  const int32_t w = b.Tensor("layers.0.mlp.down_proj.weight", MakeShape({rows, cols}));
  const int32_t v = b.Tensor("layers.0.mlp.down_proj.weight", MakeShape({rows, cols}), DType::kFP8E4M3);
  const QuantGrid g = GridOf(br, bc, MakeShape({rows, cols}));
  const int32_t s = b.Tensor("layers.0.mlp.down_proj.weight_scale_inv", g.ScaleShape(2), ScaleDType(fmt));
  Plan& p = b.plan();
  p.tensors[v].quant = {QuantRole::kValues, w, s, br, bc, fmt};
  p.tensors[s].quant = {QuantRole::kScales, v, -1, 0, 0, ScaleFormat::kFP32};
  const int64_t sb = DTypeBytes(ScaleDType(fmt));
  const int32_t src = b.Buffer(0, rows * cols * 2, BufferRole::kSourceWeights, true, "train.w");
  const int32_t out = b.Buffer(0, rows * cols, BufferRole::kDestinationWeights, false, "gen.w");
  const int32_t sc = b.Buffer(0, g.ScaleRows() * g.ScaleCols() * sb, BufferRole::kDestinationWeights, false,
                              "gen.w_scale");
  b.Source(src, w, Box2(0, rows, 0, cols), 0, {cols, 1, 1});
  const int32_t a1 = b.Alloc(0, kStreamCompute, out);
  const int32_t a2 = b.Alloc(0, kStreamCompute, sc);
  Op q;
  q.kind = OpKind::kQuantize;
  q.gpu = 0;
  q.stream = kStreamCompute;
  q.deps = {a1, a2};
  q.tiles.push_back({v, Box2(0, rows, 0, cols), ContiguousRegion(src, 0, rows * cols * 2),
                     ContiguousRegion(out, 0, rows * cols), ContiguousRegion(sc, 0, g.ScaleRows() * g.ScaleCols() * sb)});
  q.tiles[0].input = testplans::Strided(src, 0, cols * 2, rows, cols * 2);
  q.tiles[0].output = testplans::Strided(out, 0, cols, rows, cols);
  q.tiles[0].scales = testplans::Strided(sc, 0, g.ScaleCols() * sb, g.ScaleRows(), g.ScaleCols() * sb);
  b.Add(q);
  b.Destination(out, v, Box2(0, rows, 0, cols), 0, {cols, 1, 1});
  b.Destination(sc, s, Box2(0, g.ScaleRows(), 0, g.ScaleCols()), 0, {g.ScaleCols(), 1, 1});
  return b.Build();
}

Measurement RunHost(const Plan& p) {
  auto backend = MakeHostBackend();
  return Execute(p, *backend, {});
}

TEST(QuantizeOp, EveryByteVerifiedForEachScaleFormat) {
  // 300 x 200 in 128 x 128 blocks: short last blocks in both dimensions.
  for (ScaleFormat f : {ScaleFormat::kFP32, ScaleFormat::kUE8M0, ScaleFormat::kE8M0}) {
    const Plan p = QuantizePlan(300, 200, 128, 128, f);
    ASSERT_TRUE(Verify(p).ok()) << Verify(p).problems[0];
    const Measurement m = RunHost(p);
    EXPECT_TRUE(m.verified) << ScaleFormatName(f);
    EXPECT_EQ(m.mismatch_count, 0);
    EXPECT_EQ(m.checked_elements, 300 * 200 + 3 * 2);
  }
}

TEST(QuantizeOp, MxBlocksAlongRows) {
  const Plan p = QuantizePlan(4, 96, 1, 32, ScaleFormat::kE8M0);
  const Measurement m = RunHost(p);
  EXPECT_TRUE(m.verified);
  EXPECT_EQ(m.checked_elements, 4 * 96 + 4 * 3);
}

TEST(QuantizeOp, ExpectedBytesMatchAHandComputation) {
  // Block (0, 0) of a 2 x 4 tensor, one block: scale = amax / 448, each
  // element x / scale rounded, from the fill pattern itself.
  const Plan p = QuantizePlan(2, 4, 2, 4, ScaleFormat::kFP32);
  const PieceMap m = ContentMapOf(p, p.destinations[0], QuantizedSources(p));
  QuantExpectation e(m);
  float amax = 0;
  for (int64_t i = 0; i < 8; ++i) amax = std::max(amax, std::fabs(Bf16ToFloat(FiniteBf16Pattern(0, i))));
  for (int64_t i = 0; i < 8; ++i)
    EXPECT_EQ(e.Value(i), E4M3FromFloat(Bf16ToFloat(FiniteBf16Pattern(0, i)) / (amax / 448.0f)));
  // The element at amax encodes as +-448.
  const PieceMap ms = ContentMapOf(p, p.destinations[1], QuantizedSources(p));
  QuantExpectation es(ms);
  EXPECT_EQ(es.Value(0), FloatBits(amax / 448.0f));
}

TEST(QuantizeOp, WrongBytesAreCaught) {
  // Two tiles of 128 rows whose inputs are swapped: a valid plan (Verify
  // passes) whose fp8 bytes and scales are wrong, which the check must see.
  Plan p = QuantizePlan(256, 128, 128, 128, ScaleFormat::kFP32);
  QuantizeTile a = p.ops.back().tiles[0];
  a.box.hi[0] = 128;
  a.input.rows = a.output.rows = a.scales.rows = 128;
  a.scales.rows = 1;
  QuantizeTile b = a;
  b.box.lo[0] = 128;
  b.box.hi[0] = 256;
  b.output.offset_bytes = 128 * 128;
  b.scales.offset_bytes = 4;
  a.input.offset_bytes = 128 * 128 * 2;  // rows 128..255
  p.ops.back().tiles = {a, b};
  ASSERT_TRUE(Verify(p).ok()) << Verify(p).problems[0];
  const Measurement m = RunHost(p);
  EXPECT_FALSE(m.verified);
  EXPECT_GT(m.mismatch_count, 256 * 128 / 2);
}

TEST(QuantizeOp, VerifyNamesShapeAndOverlapProblems) {
  Plan p = QuantizePlan(256, 256, 128, 128, ScaleFormat::kFP32);
  Plan bad = p;
  bad.ops.back().tiles[0].output.row_bytes = 255;
  VerifyResult r = Verify(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("output has 1 planes x 256 rows x 255 bytes"), std::string::npos) << r.problems[0];
  bad = p;
  bad.ops.back().tiles[0].box.lo[1] = 64;  // cuts a block
  bad.ops.back().tiles[0].input.row_bytes = 384;
  bad.ops.back().tiles[0].output.row_bytes = 192;
  r = Verify(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("cuts a 128 x 128 quantization block"), std::string::npos) << r.problems[0];
  bad = p;
  bad.ops.back().tiles[0].scales.buffer = bad.ops.back().tiles[0].output.buffer;  // scales over the values
  r = Verify(bad);
  ASSERT_FALSE(r.ok());
  bool overlap = false;
  for (const auto& s : r.problems) overlap |= s.find("overlap") != std::string::npos;
  EXPECT_TRUE(overlap);
  bad = p;
  bad.tensors[2].dtype = DType::kE8M0;  // scales of the wrong dtype
  r = Verify(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.problems[0].find("must be a scales tensor of it with dtype fp32"), std::string::npos) << r.problems[0];
}

TEST(QuantizeOp, JsonRoundTrip) {
  const Plan p = QuantizePlan(300, 200, 128, 128, ScaleFormat::kUE8M0);
  EXPECT_EQ(PlanFromJson(PlanToJson(p), "<test>"), p);
  EXPECT_NE(ToString(p).find("quantize"), std::string::npos);
}

}  // namespace quantize_test
}  // namespace reshard
