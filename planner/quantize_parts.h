// Pieces shared by the two FP8 rewrites (planner/quantize.h): regions of
// content pieces, the scale tensors' names, the whole-block check vLLM makes,
// and splicing new ops into a plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/quant.h"
#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard::quant_parts {

inline int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
// Where the FP8 rewrites lay pieces out anew (staging, fp8 destination
// buffers), each starts at a multiple of this: the copy kernel moves 16-byte
// vectors only between 16-byte aligned sides. Packed densely, fp8 values
// after a 4-byte scale ran at 4-byte vectors: a one-H200 mistral-7b
// per-matrix refit's copies took 11.0 ms against 7.5 predicted
// (bench/results/2026-12-02-h200-copy-merge-events).
inline constexpr int64_t kPieceAlignBytes = 16;

// vLLM's names: block / per-tensor FP8 keep DeepSeek's weight_scale_inv; MX
// formats use weight_scale.
std::string ScaleName(const std::string& weight, QuantScheme scheme);

// The region of box `c.box` of a piece with elements of `eb` bytes; the
// innermost dimension must be contiguous.
Region PieceRegion(const ContentPiece& c, int32_t buffer, int64_t eb);
// Row-major strides of a box stored densely; 0 beyond its dimensions.
Extents DenseStrides(const Box& b);
// The dense region of box `b` (elements of `eb` bytes) at `offset_bytes`.
Region DenseRegion(const Box& b, int32_t buffer, int64_t offset_bytes, int64_t eb);

// vLLM loads a block-quantized weight only when each rank's share is whole
// blocks (vllm/model_executor/layers/quantization/utils/fp8_utils.py,
// validate_fp8_block_shape: "Weight output_partition_size = 576 is not
// divisible by weight quantization block_n = 128"); so does the planner:
// throws InputError(s.path, "destination.tp", ...).
void CheckWholeBlocks(const Scenario& s, const QuantGrid& g, const Box& box, const std::string& name,
                      const Shape& shape);

// New ops put before or after existing ones: ids >= the plan's op count are
// new ops (id - count indexes `extra`), renumbered with every dependency and
// match when spliced in. Deps of existing ops may name new ops.
struct Splice {
  std::vector<Op> extra;
  std::vector<std::vector<int32_t>> before, after;  // per existing op: new ops (indices into extra), in order
  explicit Splice(size_t ops) : before(ops), after(ops) {}
  int32_t Add(size_t ops, Op op) {
    extra.push_back(std::move(op));
    return static_cast<int32_t>(ops + extra.size() - 1);
  }
};
void Apply(Plan& p, Splice& sp);

}  // namespace reshard::quant_parts
