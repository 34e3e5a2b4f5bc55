// Quantization of destination weights during a refit: which tensors a
// generation engine serves in FP8 E4M3, with which block scales, and the
// geometry of those blocks.
//
// Blocks are defined on the logical (Hugging Face, unfused) tensor, as the
// checkpoints vLLM loads store them: a 2-D weight [rows, cols] is cut into
// blocks of block_rows x block_cols (the last block of a dimension may be
// short); a stacked expert tensor [experts, rows, cols] is cut per expert.
// Each block has one scale s with value = fp8 * s (DeepSeek's
// `weight_scale_inv`), s = amax(block) / 448 in fp32, or rounded up to a
// power of two (UE8M0, kept as fp32; E8M0, one byte of biased exponent).
// Schemes:
//   block   128 x 128 blocks (DeepSeek-V3, Kimi-K2: weight_block_size [128, 128])
//   tensor  one scale per matrix (per expert for stacked experts)
//   mxfp8   1 x 32 blocks along the last dimension, E8M0 scales (OCP MX)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/box.h"
#include "model/dtype.h"
#include "model/model.h"

namespace reshard {

enum class QuantScheme : uint8_t { kBlock, kTensor, kMx };
enum class ScaleFormat : uint8_t {
  kFP32,   // amax / 448 as fp32
  kUE8M0,  // rounded up to a power of two, stored as fp32
  kE8M0,   // rounded up to a power of two, stored as one byte: exponent + 127
};
std::string_view QuantSchemeName(QuantScheme s);  // "block", "tensor", "mxfp8"
std::string_view ScaleFormatName(ScaleFormat f);  // "fp32", "ue8m0", "e8m0"
// Throw InputError(file, field, ...) naming the choices.
QuantScheme ParseQuantScheme(std::string_view name, const std::string& file, const std::string& field);
ScaleFormat ParseScaleFormat(std::string_view name, const std::string& file, const std::string& field);
DType ScaleDType(ScaleFormat f);  // kFP32 or kE8M0

// Classes of weights a scenario can quantize; norms and biases (1-D) never are.
enum class QuantClass : uint8_t { kAttention, kMlp, kExperts, kRouter, kEmbedding, kLmHead };
std::string_view QuantClassName(QuantClass c);  // "attention", "mlp", "experts", "router", "embedding", "lm_head"
QuantClass ParseQuantClass(std::string_view name, const std::string& file, const std::string& field);
// The class of a tensor kind; nullopt for norms and biases.
std::optional<QuantClass> QuantClassOf(TensorKind k);

struct QuantConfig {
  QuantScheme scheme = QuantScheme::kBlock;
  int64_t block_rows = 128, block_cols = 128;  // kBlock only
  ScaleFormat scale = ScaleFormat::kFP32;
  // Quantized classes; by default the linear layers (attention, dense and
  // shared MLP) and the experts: embeddings, norms, router and lm_head stay
  // in the training dtype, as vLLM serves FP8 checkpoints.
  std::vector<QuantClass> classes{QuantClass::kAttention, QuantClass::kMlp, QuantClass::kExperts};

  bool Quantizes(TensorKind k) const;
  friend bool operator==(const QuantConfig&, const QuantConfig&) = default;
};
std::string QuantConfigText(const QuantConfig& q);  // "block 128x128 fp32 scales: attention, mlp, experts"

// Block geometry of one tensor (2-D [rows, cols] or 3-D [planes, rows, cols]).
struct QuantGrid {
  int64_t planes = 1, rows = 0, cols = 0;  // the logical matrix (per plane)
  int64_t block_rows = 0, block_cols = 0;
  int64_t ScaleRows() const { return (rows + block_rows - 1) / block_rows; }
  int64_t ScaleCols() const { return (cols + block_cols - 1) / block_cols; }
  Shape ScaleShape(int32_t ndim) const;  // same rank as the tensor
};
QuantGrid GridOf(int64_t block_rows, int64_t block_cols, const Shape& shape);
// The blocks of `q` for `shape` (per-tensor: the whole matrix; mxfp8: 1 x 32).
QuantGrid GridOf(const QuantConfig& q, const Shape& shape);
// Whether box `b` of a tensor with grid `g` consists of whole blocks (a box
// may end at the tensor's edge inside a short block).
bool CoversWholeBlocks(const QuantGrid& g, const Box& b, int32_t ndim);
// The box of scales the blocks of `b` have.
Box ScaleBox(const QuantGrid& g, const Box& b, int32_t ndim);

// The `quantization_config` of a Hugging Face config.json (nullopt when it has
// none): quant_method fp8, fmt e4m3, weight_block_size [r, c] (absent: per
// tensor), scale_fmt ue8m0 (DeepSeek-V3.1). Other methods throw InputError
// naming the file and field.
std::optional<QuantConfig> ReadHfQuantization(const std::string& path);
std::optional<QuantConfig> ParseHfQuantization(const std::string& json_text, const std::string& path);

}  // namespace reshard
