// Parallel layouts: where every element of every logical tensor lives.
//
// A Layout maps each rank to a Shard: the local buffers that rank allocates
// (one per local parameter, e.g. Megatron's fused linear_qkv of layer 3) and
// the Pieces it holds. A Piece is a box of one logical tensor plus where that
// box sits in one local buffer: element idx of the box is stored at
//   offset + sum_d (idx[d] - box.lo[d]) * stride[d]      (elements)
// of the buffer. Ranks with identical content (data-parallel replicas) share
// one Shard, so layouts of thousands of ranks stay small.
//
// Source = Megatron-Core rules (TP, PP incl. uneven splits, VPP, EP, ETP, DP,
// CP; fused QKV interleaved per GQA group; fused gate|up per TP rank;
// vocab-parallel embedding and output; replicated norms and routers; experts
// split by EP then ETP; rank order tp-cp-ep-dp-pp).
// Destination = vLLM rules (TP, PP, EP, DP; q|k|v concatenated per rank;
// gate|up concatenated per rank; KV heads replicated when TP > kv_heads;
// EP places whole experts on ranks of the tp*dp group).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/box.h"
#include "model/dtype.h"
#include "model/model.h"

namespace reshard {

struct SourceParallel {              // Megatron-Core
  int32_t tp = 1, pp = 1, vpp = 1, ep = 1, etp = 1, dp = 1, cp = 1;
  std::vector<int32_t> pp_layers;    // optional: decoder layers of each pipeline stage (sums to layers);
                                     // with vpp > 1 one entry per virtual chunk (pp*vpp entries, chunk k on stage k % pp)
  int32_t Ranks() const { return tp * cp * dp * pp; }
  friend bool operator==(const SourceParallel&, const SourceParallel&) = default;
};

struct DestinationParallel {         // vLLM-style generation engine
  int32_t tp = 1, pp = 1, ep = 1, dp = 1;
  std::vector<int32_t> pp_layers;    // optional, as for the source
  int32_t Ranks() const { return tp * pp * dp; }
  friend bool operator==(const DestinationParallel&, const DestinationParallel&) = default;
};

struct LocalBuffer {
  std::string name;   // e.g. "layers.3.self_attention.linear_qkv.weight" (engine's own naming)
  int32_t layer;      // as TensorSpec::layer; lets plans allocate / offload per layer
  int64_t elems;
};

struct Piece {
  int32_t tensor;     // index into ModelSpec::tensors
  Box box;            // region of the logical tensor
  int32_t buffer;     // index into Shard::buffers
  int64_t offset;     // elements: position of box.lo in the buffer
  Extents stride;     // elements per unit step of each box dimension; dimensions beyond
                      // box.ndim only ever index 0 and hold the buffer's size
};

struct Shard {
  std::vector<LocalBuffer> buffers;
  std::vector<Piece> pieces;         // sorted by (tensor, box)
  int64_t Elements() const;          // sum of buffer sizes
};

struct Layout {
  DType dtype = DType::kBF16;
  std::vector<Shard> shards;         // distinct rank contents
  std::vector<int32_t> rank_shard;   // rank -> index into shards

  int32_t Ranks() const { return static_cast<int32_t>(rank_shard.size()); }
  const Shard& ShardOf(int32_t rank) const { return shards[rank_shard[rank]]; }
  int64_t RankBytes(int32_t rank) const { return ShardOf(rank).Elements() * DTypeBytes(dtype); }
};

// Build the layouts. `file` names the scenario for errors; layouts that do not
// divide (heads, KV groups, experts, vocab, layers) throw InputError naming
// the field, e.g. "source.tp: 32 attention heads are not divisible by tp=3".
Layout MakeSourceLayout(const ModelSpec& m, const SourceParallel& p, DType dtype,
                        const std::string& file = "<scenario>");
Layout MakeDestinationLayout(const ModelSpec& m, const DestinationParallel& p, DType dtype,
                             const std::string& file = "<scenario>");

// Decoder layers per pipeline stage: explicit list if given (validated), else
// even; when layers % stages != 0 the middle stages take ceil(layers/stages)
// and the first and last stages share the deficit (first takes the larger part);
// throws InputError(file, field) when the middle stages alone would exceed `layers`.
// An explicit list needs `stages` entries, each >= 0 (a stage may hold only the
// embedding or the output layer), summing to `layers`.
std::vector<int32_t> StageLayers(int32_t layers, int32_t stages, const std::vector<int32_t>& explicit_layers,
                                 const std::string& file, const std::string& field);

// vLLM's own split (vllm/distributed/utils.py get_pp_indices), used for the
// destination: floor(layers/stages) each, the remainder one each to the stages
// before the last, from the second-to-last backwards (61 over 16: 3, 3, 4 x 13, 3).
// An explicit list is validated as for StageLayers.
std::vector<int32_t> VllmStageLayers(int32_t layers, int32_t stages, const std::vector<int32_t>& explicit_layers,
                                     const std::string& file, const std::string& field);

// Position of element idx of tensor piece p in its buffer (elements).
int64_t LocalOffset(const Piece& p, const Extents& idx);

}  // namespace reshard
