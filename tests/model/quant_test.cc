// Quantized destinations in scenarios: destination.quantization, the Hugging
// Face quantization_config, block geometry, and errors naming file and field.
#include <gtest/gtest.h>

#include "model/error.h"
#include "model/quant.h"
#include "model/scenario.h"

namespace reshard {
namespace {

std::string Scenario1(const std::string& destination) {
  return "model: tiny-llama\ncluster: h200-x2\nsource: {tp: 2}\ndestination: " + destination + "\n";
}

void ExpectError(const std::string& yaml, const std::string& field, const std::string& words) {
  try {
    ParseScenario(yaml, "s.yaml");
    FAIL() << "expected InputError for " << field;
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "s.yaml");
    EXPECT_EQ(e.field(), field);
    EXPECT_NE(e.problem().find(words), std::string::npos) << e.problem();
  }
}

TEST(Quantization, DefaultsToDeepSeekBlocks) {
  const Scenario s = ParseScenario(Scenario1("{tp: 2, dtype: fp8_e4m3}"), "s.yaml");
  ASSERT_TRUE(s.quantization.has_value());
  EXPECT_EQ(*s.quantization, QuantConfig{});
  EXPECT_EQ(QuantConfigText(*s.quantization), "block 128x128 fp32 scales: attention, mlp, experts");
  EXPECT_FALSE(ParseScenario(Scenario1("{tp: 2}"), "s.yaml").quantization.has_value());
}

TEST(Quantization, SchemesScalesAndClasses) {
  Scenario s = ParseScenario(
      Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {scheme: mxfp8, classes: [experts, lm_head]}}"), "s.yaml");
  EXPECT_EQ(s.quantization->scheme, QuantScheme::kMx);
  EXPECT_EQ(s.quantization->scale, ScaleFormat::kE8M0);
  EXPECT_TRUE(s.quantization->Quantizes(TensorKind::kOutput));
  EXPECT_FALSE(s.quantization->Quantizes(TensorKind::kAttnQ));
  EXPECT_FALSE(s.quantization->Quantizes(TensorKind::kNorm));
  s = ParseScenario(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {block: [64, 32], scale: ue8m0}}"), "s.yaml");
  EXPECT_EQ(s.quantization->block_rows, 64);
  EXPECT_EQ(s.quantization->block_cols, 32);
  EXPECT_EQ(s.quantization->scale, ScaleFormat::kUE8M0);
  // The quantization is part of what a plan is made for.
  const Scenario other = ParseScenario(Scenario1("{tp: 2, dtype: fp8_e4m3}"), "s.yaml");
  EXPECT_NE(ScenarioFingerprint(s), ScenarioFingerprint(other));
}

TEST(Quantization, ErrorsNameTheField) {
  ExpectError(Scenario1("{tp: 2, quantization: {scheme: block}}"), "destination.quantization",
              "needs destination.dtype: fp8_e4m3");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {scheme: blok}}"), "destination.quantization.scheme",
              "did you mean 'block'");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {scheme: tensor, block: [128, 128]}}"),
              "destination.quantization.block", "only the block scheme");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {block: [128, 0]}}"),
              "destination.quantization.block[1]", "must be >= 1");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {classes: [norms]}}"),
              "destination.quantization.classes[0]", "unknown weight class 'norms'");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {scheme: mxfp8, scale: fp32}}"),
              "destination.quantization.scale", "mxfp8 scales are e8m0");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e5m2}"), "destination.dtype", "a refit quantizes to fp8_e4m3");
  ExpectError(Scenario1("{tp: 2, dtype: fp8_e4m3, quantization: {bits: 8}}"), "destination.quantization.bits",
              "unknown field");
}

TEST(Quantization, HuggingFaceQuantizationConfig) {
  const auto ds = ParseHfQuantization(
      R"({"quantization_config": {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
          "weight_block_size": [128, 128]}})",
      "config.json");
  ASSERT_TRUE(ds.has_value());
  EXPECT_EQ(*ds, QuantConfig{});
  const auto v31 = ParseHfQuantization(
      R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128], "scale_fmt": "ue8m0"}})",
      "config.json");
  EXPECT_EQ(v31->scale, ScaleFormat::kUE8M0);
  EXPECT_EQ(ParseHfQuantization(R"({"quantization_config": {"quant_method": "fp8"}})", "c.json")->scheme,
            QuantScheme::kTensor);
  EXPECT_FALSE(ParseHfQuantization(R"({"hidden_size": 8})", "c.json").has_value());
  try {
    ParseHfQuantization(R"({"quantization_config": {"quant_method": "awq"}})", "c.json");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "c.json");
    EXPECT_EQ(e.field(), "quantization_config.quant_method");
  }
  // A scenario on an HF config with quantization_config takes it for an fp8 destination.
  const Scenario s = ParseScenario(std::string("model: {hf_config: ") + RESHARD_TEST_DATA_DIR +
                                       "/hf/deepseek-v3/config.json}\ncluster: {preset: dgx-h200, nodes: 4}\n"
                                       "source: {tp: 8, ep: 4, pp: 1}\ndestination: {tp: 8, dp: 4, ep: 32, dtype: fp8}\n"
                                       "memory: {optimizer: {bytes_per_param: 0}}\n",
                                   "hf.yaml");
  ASSERT_TRUE(s.quantization.has_value());
  EXPECT_EQ(s.quantization->block_rows, 128);
}

TEST(Quantization, BlockGeometry) {
  // A 300 x 200 weight in 128 x 128 blocks: 3 x 2 blocks, the last ones short.
  const QuantGrid g = GridOf(QuantConfig{}, MakeShape({300, 200}));
  EXPECT_EQ(g.ScaleShape(2), MakeShape({3, 2}));
  Box b;
  b.ndim = 2;
  b.lo = {128, 0, 0};
  b.hi = {300, 200, 1};
  EXPECT_TRUE(CoversWholeBlocks(g, b, 2));  // ends at the tensor's edge
  b.lo[0] = 64;
  EXPECT_FALSE(CoversWholeBlocks(g, b, 2));
  // Stacked experts: per expert; per tensor: one block per matrix; MX: 1 x 32.
  QuantConfig t;
  t.scheme = QuantScheme::kTensor;
  EXPECT_EQ(GridOf(t, MakeShape({8, 256, 512})).ScaleShape(3), MakeShape({8, 1, 1}));
  QuantConfig mx;
  mx.scheme = QuantScheme::kMx;
  EXPECT_EQ(GridOf(mx, MakeShape({4, 96})).ScaleShape(2), MakeShape({4, 3}));
}

}  // namespace
}  // namespace reshard
