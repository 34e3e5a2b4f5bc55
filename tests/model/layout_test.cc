// Tests of model/layout.h: Megatron (source) and vLLM (destination) layouts.
//
// The main property, checked with box arithmetic (no element loops, so 671 B models
// are tested): over all ranks, the pieces of every tensor cover each of its elements
// exactly `replication` times, where the replication is derived here independently
// from the parallel sizes (e.g. dp*cp for a TP-sharded tensor on the source). Each
// tensor's piece boundaries are coordinate-compressed per dimension; every cell of the
// resulting grid is wholly inside or outside each box, so counting per cell is exact.
//
// Per shard: pieces are sorted, lie inside their buffer, never overlap in buffer space,
// and fill their buffers exactly (vocab buffers may carry padding rows).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "model/error.h"
#include "model/layout.h"
#include "model/model.h"

namespace reshard {
namespace {

using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

ModelSpec Preset(const std::string& name) { return BuildModel(ModelPreset(name)); }

// ---- Independent replication factors ----------------------------------------------

bool IsReplicatedKind(TensorKind k) {
  return k == TensorKind::kNorm || k == TensorKind::kRouter || k == TensorKind::kRouterBias ||
         k == TensorKind::kMlaQDown || k == TensorKind::kMlaKvDown;
}
bool IsExpertKind(TensorKind k) {
  return k == TensorKind::kExpertGate || k == TensorKind::kExpertUp || k == TensorKind::kExpertDown;
}
bool IsKvKind(TensorKind k) {
  return k == TensorKind::kAttnK || k == TensorKind::kAttnV || k == TensorKind::kAttnKBias ||
         k == TensorKind::kAttnVBias;
}

// Megatron: DP and CP replicate everything; TP shards everything but replicated kinds;
// experts are spread over ep*etp of the tp*cp*dp ranks (edp copies); a tied embedding
// has a second copy on the last stage when pp > 1.
int64_t SourceReplication(const ModelSpec& m, const TensorSpec& t, const SourceParallel& p) {
  const int64_t dc = int64_t{p.dp} * p.cp;
  if (t.kind == TensorKind::kEmbedding) return dc * (m.config.tied_embeddings && p.pp > 1 ? 2 : 1);
  if (IsReplicatedKind(t.kind)) return dc * p.tp;
  if (IsExpertKind(t.kind)) return dc * p.tp / (int64_t{p.ep} * p.etp);
  return dc;
}

// vLLM: DP replicates all but experts (spread over tp*dp, with or without EP); KV heads
// are replicated tp/kv_heads times when tp > kv_heads.
int64_t DestinationReplication(const ModelSpec& m, const TensorSpec& t, const DestinationParallel& p) {
  const int64_t dp = p.dp;
  if (t.kind == TensorKind::kEmbedding) return dp * (m.config.tied_embeddings && p.pp > 1 ? 2 : 1);
  if (IsReplicatedKind(t.kind)) return dp * p.tp;
  if (IsExpertKind(t.kind)) return 1;
  if (IsKvKind(t.kind) && !m.config.IsMla() && p.tp > m.config.kv_heads) return dp * (p.tp / m.config.kv_heads);
  return dp;
}

// ---- Coverage by coordinate compression ---------------------------------------------

struct Weighted {
  Box box;
  int64_t weight;  // ranks holding this piece
};

AssertionResult CoverageIs(const TensorSpec& t, const std::vector<Weighted>& pieces, int64_t expected) {
  const Shape& s = t.shape;
  std::array<std::vector<int64_t>, kMaxDims> cuts;
  for (int d = 0; d < kMaxDims; ++d) cuts[d] = {0, d < s.ndim ? s.dim[d] : 1};
  for (const auto& p : pieces) {
    if (!InBounds(p.box, s) || Empty(p.box))
      return AssertionFailure() << t.name << ": piece " << ToString(p.box) << " outside " << ToString(s);
    for (int d = 0; d < s.ndim; ++d) cuts[d].push_back(p.box.lo[d]), cuts[d].push_back(p.box.hi[d]);
  }
  std::array<size_t, kMaxDims> n{};
  for (int d = 0; d < kMaxDims; ++d) {
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
    n[d] = cuts[d].size() - 1;
  }
  auto index = [&](int d, int64_t v) {
    return static_cast<size_t>(std::lower_bound(cuts[d].begin(), cuts[d].end(), v) - cuts[d].begin());
  };
  std::vector<int64_t> count(n[0] * n[1] * n[2], 0);
  for (const auto& p : pieces) {
    std::array<size_t, kMaxDims> lo{0, 0, 0}, hi{1, 1, 1};
    for (int d = 0; d < s.ndim; ++d) lo[d] = index(d, p.box.lo[d]), hi[d] = index(d, p.box.hi[d]);
    for (size_t i = lo[0]; i < hi[0]; ++i)
      for (size_t j = lo[1]; j < hi[1]; ++j)
        for (size_t k = lo[2]; k < hi[2]; ++k) count[(i * n[1] + j) * n[2] + k] += p.weight;
  }
  for (size_t i = 0; i < n[0]; ++i)
    for (size_t j = 0; j < n[1]; ++j)
      for (size_t k = 0; k < n[2]; ++k) {
        const int64_t c = count[(i * n[1] + j) * n[2] + k];
        if (c != expected) {
          Box cell;
          cell.ndim = s.ndim;
          const std::array<size_t, kMaxDims> at{i, j, k};
          for (int d = 0; d < s.ndim; ++d) cell.lo[d] = cuts[d][at[d]], cell.hi[d] = cuts[d][at[d] + 1];
          return AssertionFailure() << t.name << ": region " << ToString(cell) << " covered " << c
                                    << " times, expected " << expected;
        }
      }
  return AssertionSuccess();
}

// ---- Per-shard checks -----------------------------------------------------------------

bool IsVocabKind(TensorKind k) { return k == TensorKind::kEmbedding || k == TensorKind::kOutput; }

AssertionResult ShardIsConsistent(const ModelSpec& m, const Shard& sh) {
  for (size_t i = 1; i < sh.pieces.size(); ++i) {
    const Piece& a = sh.pieces[i - 1];
    const Piece& b = sh.pieces[i];
    if (std::tie(a.tensor, a.box) > std::tie(b.tensor, b.box)) return AssertionFailure() << "pieces not sorted";
  }
  int64_t buffer_sum = 0;
  for (const auto& b : sh.buffers) buffer_sum += b.elems;
  if (buffer_sum != sh.Elements()) return AssertionFailure() << "Shard::Elements() " << sh.Elements() << " != " << buffer_sum;

  std::vector<std::vector<const Piece*>> by_buffer(sh.buffers.size());
  int64_t piece_sum = 0;
  for (const Piece& p : sh.pieces) {
    if (p.tensor < 0 || p.tensor >= static_cast<int32_t>(m.tensors.size())) return AssertionFailure() << "bad tensor";
    if (p.buffer < 0 || p.buffer >= static_cast<int32_t>(sh.buffers.size())) return AssertionFailure() << "bad buffer";
    by_buffer[static_cast<size_t>(p.buffer)].push_back(&p);
    piece_sum += Volume(p.box);
  }
  if (buffer_sum < piece_sum) return AssertionFailure() << "buffers smaller than pieces";

  for (size_t bi = 0; bi < sh.buffers.size(); ++bi) {
    const LocalBuffer& buf = sh.buffers[bi];
    const auto& ps = by_buffer[bi];
    if (ps.empty()) {
      // Only a vocab shard made entirely of padding rows may hold no data.
      if (buf.name.find("embed") == std::string::npos && buf.name.find("output") == std::string::npos &&
          buf.name.find("lm_head") == std::string::npos)
        return AssertionFailure() << "buffer " << buf.name << " holds no piece";
      continue;
    }
    // All pieces of a buffer share one dense stride: the buffer is a dense array of
    // shape B (B[d] = stride[d-1]/stride[d], B[0] = elems/stride[0]), and each piece a box in it.
    const Piece& p0 = *ps.front();
    const int nd = p0.box.ndim;
    std::array<int64_t, kMaxDims> B{1, 1, 1};
    if (p0.stride[nd - 1] != 1) return AssertionFailure() << buf.name << ": innermost stride != 1";
    for (int d = 1; d < nd; ++d) {
      if (p0.stride[d - 1] % p0.stride[d] != 0) return AssertionFailure() << buf.name << ": strides not nested";
      B[d] = p0.stride[d - 1] / p0.stride[d];
    }
    if (buf.elems % p0.stride[0] != 0) return AssertionFailure() << buf.name << ": size not a multiple of stride 0";
    B[0] = buf.elems / p0.stride[0];
    std::vector<Box> in_buffer;
    int64_t volume = 0;
    bool vocab = false;
    for (const Piece* p : ps) {
      const TensorSpec& t = m.tensors[static_cast<size_t>(p->tensor)];
      vocab = vocab || IsVocabKind(t.kind);
      if (p->box.ndim != nd || p->stride != p0.stride)
        return AssertionFailure() << buf.name << ": pieces with different strides";
      // Lowest and highest element positions (LocalOffset of the box's corners).
      Extents last = p->box.hi;
      for (int d = 0; d < nd; ++d) last[d] -= 1;
      if (p->offset < 0 || LocalOffset(*p, last) >= buf.elems)
        return AssertionFailure() << buf.name << ": piece of " << t.name << " " << ToString(p->box)
                                  << " leaves its buffer";
      Box c;
      c.ndim = nd;
      int64_t rem = p->offset;
      for (int d = 0; d < nd; ++d) {
        c.lo[d] = rem / p->stride[d];
        rem %= p->stride[d];
        c.hi[d] = c.lo[d] + (p->box.hi[d] - p->box.lo[d]);
        if (c.hi[d] > B[d])
          return AssertionFailure() << buf.name << ": piece of " << t.name << " wraps around dimension " << d;
      }
      for (const Box& other : in_buffer)
        if (Intersect(other, c))
          return AssertionFailure() << buf.name << ": pieces overlap at " << ToString(c) << " and " << ToString(other);
      in_buffer.push_back(c);
      volume += Volume(p->box);
    }
    if (vocab) {
      if (volume > buf.elems || (buf.elems - volume) % m.config.hidden != 0)
        return AssertionFailure() << buf.name << ": vocab buffer " << buf.elems << " vs data " << volume;
    } else if (volume != buf.elems) {
      return AssertionFailure() << buf.name << ": " << buf.elems << " elements but pieces hold " << volume;
    }
  }
  return AssertionSuccess();
}

template <typename Expected>
AssertionResult LayoutIsExact(const ModelSpec& m, const Layout& l, int32_t ranks, Expected&& expected) {
  if (l.Ranks() != ranks) return AssertionFailure() << l.Ranks() << " ranks, expected " << ranks;
  std::vector<int64_t> multiplicity(l.shards.size(), 0);
  for (int32_t s : l.rank_shard) {
    if (s < 0 || s >= static_cast<int32_t>(l.shards.size())) return AssertionFailure() << "bad rank_shard";
    ++multiplicity[static_cast<size_t>(s)];
  }
  for (size_t s = 0; s < l.shards.size(); ++s) {
    if (multiplicity[s] == 0) return AssertionFailure() << "shard " << s << " used by no rank";
    if (auto r = ShardIsConsistent(m, l.shards[s]); !r) return r << " (shard " << s << ")";
  }
  std::vector<std::vector<Weighted>> per_tensor(m.tensors.size());
  for (size_t s = 0; s < l.shards.size(); ++s)
    for (const Piece& p : l.shards[s].pieces) per_tensor[static_cast<size_t>(p.tensor)].push_back({p.box, multiplicity[s]});
  for (size_t t = 0; t < m.tensors.size(); ++t)
    if (auto r = CoverageIs(m.tensors[t], per_tensor[t], expected(m.tensors[t])); !r) return r;
  return AssertionSuccess();
}

AssertionResult SourceIsExact(const ModelSpec& m, const SourceParallel& p) {
  const Layout l = MakeSourceLayout(m, p, DType::kBF16);
  return LayoutIsExact(m, l, p.tp * p.cp * p.dp * p.pp,
                       [&](const TensorSpec& t) { return SourceReplication(m, t, p); });
}
AssertionResult DestinationIsExact(const ModelSpec& m, const DestinationParallel& p) {
  const Layout l = MakeDestinationLayout(m, p, DType::kBF16);
  return LayoutIsExact(m, l, p.tp * p.pp * p.dp, [&](const TensorSpec& t) { return DestinationReplication(m, t, p); });
}

std::string Describe(const SourceParallel& p) {
  return fmt::format("tp{} pp{} vpp{} ep{} etp{} dp{} cp{} pp_layers [{}]", p.tp, p.pp, p.vpp, p.ep, p.etp, p.dp, p.cp,
                     fmt::join(p.pp_layers, ","));
}
std::string Describe(const DestinationParallel& p) {
  return fmt::format("tp{} pp{} ep{} dp{} pp_layers [{}]", p.tp, p.pp, p.ep, p.dp, fmt::join(p.pp_layers, ","));
}

SourceParallel Src(int32_t tp, int32_t pp, int32_t vpp = 1, int32_t ep = 1, int32_t etp = 1, int32_t dp = 1,
                   int32_t cp = 1) {
  SourceParallel p;
  p.tp = tp, p.pp = pp, p.vpp = vpp, p.ep = ep, p.etp = etp, p.dp = dp, p.cp = cp;
  return p;
}
DestinationParallel Dst(int32_t tp, int32_t pp = 1, int32_t ep = 1, int32_t dp = 1) {
  DestinationParallel p;
  p.tp = tp, p.pp = pp, p.ep = ep, p.dp = dp;
  return p;
}

// Models of every family: all presets plus hand-written configs of the HF families
// that no preset covers (mistral, qwen2 at full size, qwen3 dense, MLA without q LoRA).
std::vector<ModelConfig> FamilyConfigs() {
  std::vector<ModelConfig> out;
  ModelConfig mistral;  // mistralai/Mistral-7B-v0.1
  mistral.name = "mistral-7b", mistral.family = "mistral", mistral.vocab = 32000, mistral.hidden = 4096;
  mistral.intermediate = 14336, mistral.layers = 32, mistral.heads = 32, mistral.kv_heads = 8;
  out.push_back(mistral);
  ModelConfig qwen2;  // Qwen/Qwen2.5-7B: 28 heads, 4 KV heads, q/k/v biases
  qwen2.name = "qwen2.5-7b", qwen2.family = "qwen2", qwen2.vocab = 152064, qwen2.hidden = 3584;
  qwen2.intermediate = 18944, qwen2.layers = 28, qwen2.heads = 28, qwen2.kv_heads = 4, qwen2.qkv_bias = true;
  out.push_back(qwen2);
  ModelConfig qwen3;  // Qwen/Qwen3-4B: tied embeddings, q/k norms
  qwen3.name = "qwen3-4b", qwen3.family = "qwen3", qwen3.vocab = 151936, qwen3.hidden = 2560;
  qwen3.intermediate = 9728, qwen3.layers = 36, qwen3.heads = 32, qwen3.kv_heads = 8, qwen3.head_dim = 128;
  qwen3.qk_norm = true, qwen3.tied_embeddings = true;
  out.push_back(qwen3);
  ModelConfig lite;  // deepseek-ai/DeepSeek-V2-Lite shape: MLA without q LoRA, 2 shared experts
  lite.name = "mla-no-q-lora", lite.family = "deepseek_v3", lite.vocab = 102400, lite.hidden = 2048;
  lite.intermediate = 10944, lite.layers = 27, lite.heads = lite.kv_heads = 16;
  lite.kv_lora_rank = 512, lite.qk_nope_head_dim = 128, lite.qk_rope_head_dim = 64, lite.v_head_dim = 128;
  lite.experts = 64, lite.experts_per_token = 6, lite.moe_intermediate = 1408, lite.shared_experts = 2;
  lite.first_dense_layers = 1;
  out.push_back(lite);
  return out;
}

// ---- Stage splits ---------------------------------------------------------------------

TEST(StageLayers, EvenSplit) {
  EXPECT_EQ(StageLayers(32, 4, {}, "f", "source.pp"), (std::vector<int32_t>{8, 8, 8, 8}));
  EXPECT_EQ(StageLayers(7, 1, {}, "f", "source.pp"), (std::vector<int32_t>{7}));
}

TEST(StageLayers, UnevenFirstAndLastShareTheDeficit) {
  // 61 over 16: middle 14 stages take ceil(61/16)=4 (56 layers), 5 left: first 3, last 2.
  std::vector<int32_t> ds{3};
  ds.insert(ds.end(), 14, 4);
  ds.push_back(2);
  EXPECT_EQ(StageLayers(61, 16, {}, "f", "source.pp"), ds);
  // 10 over 4: middle 2 x 3 = 6, 4 left: 2 and 2.
  EXPECT_EQ(StageLayers(10, 4, {}, "f", "source.pp"), (std::vector<int32_t>{2, 3, 3, 2}));
  // 5 over 2: no middle stage; first takes the larger half.
  EXPECT_EQ(StageLayers(5, 2, {}, "f", "source.pp"), (std::vector<int32_t>{3, 2}));
  // 94 over 8 (Qwen3-235B at PP8): middle 6 x 12 = 72, 22 left: 11 and 11.
  EXPECT_EQ(StageLayers(94, 8, {}, "f", "source.pp"), (std::vector<int32_t>{11, 12, 12, 12, 12, 12, 12, 11}));
  // 2 over 4: middle 2 x 1, nothing left: first and last hold only embedding / output.
  EXPECT_EQ(StageLayers(2, 4, {}, "f", "source.pp"), (std::vector<int32_t>{0, 1, 1, 0}));
}

TEST(StageLayers, ExplicitListIsValidated) {
  EXPECT_EQ(StageLayers(10, 3, {4, 4, 2}, "f", "source.pp_layers"), (std::vector<int32_t>{4, 4, 2}));
  EXPECT_EQ(StageLayers(10, 3, {0, 6, 4}, "f", "source.pp_layers"), (std::vector<int32_t>{0, 6, 4}));
  auto field_of = [](auto&& f) {
    try {
      f();
    } catch (const InputError& e) {
      return e.field() + ": " + e.problem();
    }
    return std::string("no error");
  };
  EXPECT_EQ(field_of([] { StageLayers(10, 3, {5, 5}, "f", "source.pp_layers"); }),
            "source.pp_layers: has 2 entries but there are 3 pipeline stages");
  EXPECT_EQ(field_of([] { StageLayers(10, 3, {5, 5, 1}, "f", "source.pp_layers"); }),
            "source.pp_layers: sums to 11 but the model has 10 decoder layers");
  EXPECT_EQ(field_of([] { StageLayers(10, 3, {6, 5, -1}, "f", "source.pp_layers"); }),
            "source.pp_layers: entry 2 is negative (-1)");
  EXPECT_NE(field_of([] { StageLayers(9, 8, {}, "f", "source.pp"); }).find("source.pp: 9 layers do not split over 8"),
            std::string::npos);
  EXPECT_NE(field_of([] { StageLayers(9, 0, {}, "f", "source.pp"); }).find("source.pp"), std::string::npos);
}

TEST(VllmStageLayers, RemainderGoesToStagesBeforeTheLast) {
  // vLLM get_pp_indices: floor, then +1 for partitions[-2], [-3], ...
  std::vector<int32_t> ds{3, 3};
  ds.insert(ds.end(), 13, 4);
  ds.push_back(3);
  EXPECT_EQ(VllmStageLayers(61, 16, {}, "f", "destination.pp"), ds);
  EXPECT_EQ(VllmStageLayers(22, 4, {}, "f", "destination.pp"), (std::vector<int32_t>{5, 6, 6, 5}));
  EXPECT_EQ(VllmStageLayers(5, 3, {}, "f", "destination.pp"), (std::vector<int32_t>{2, 2, 1}));
  EXPECT_EQ(VllmStageLayers(3, 2, {}, "f", "destination.pp"), (std::vector<int32_t>{2, 1}));
  EXPECT_EQ(VllmStageLayers(32, 4, {}, "f", "destination.pp"), (std::vector<int32_t>{8, 8, 8, 8}));
  EXPECT_THROW(VllmStageLayers(10, 2, {4, 5}, "f", "destination.pp_layers"), InputError);
}

// ---- Exact placements, derived by hand ----------------------------------------------

const Piece& PieceOf(const ModelSpec& m, const Shard& sh, const std::string& tensor, int which = 0) {
  for (const Piece& p : sh.pieces)
    if (m.tensors[static_cast<size_t>(p.tensor)].name == tensor && which-- == 0) return p;
  throw std::runtime_error("no piece of " + tensor);
}
const LocalBuffer& BufferOf(const Shard& sh, const Piece& p) { return sh.buffers[static_cast<size_t>(p.buffer)]; }

// tiny-llama: hidden 256, 8 heads, 2 KV heads, head_dim 32 -> q 256 rows, k/v 64 rows,
// 4 q heads (128 rows) per KV group.
TEST(SourcePlacement, MegatronQkvInterleavesPerGroup) {
  const ModelSpec m = Preset("tiny-llama");
  const std::string q = "model.layers.0.self_attn.q_proj.weight", k = "model.layers.0.self_attn.k_proj.weight",
                    v = "model.layers.0.self_attn.v_proj.weight";
  {
    // TP1: two groups of 128 + 32 + 32 = 192 rows. Group 0: q[0,128) at row 0, k[0,32) at
    // row 128, v[0,32) at row 160; group 1: q[128,256) at row 192 (offset 192*256=49152),
    // k[32,64) at row 320 (81920), v[32,64) at row 352 (90112). Buffer 384*256 = 98304.
    const Layout l = MakeSourceLayout(m, Src(1, 1), DType::kBF16);
    const Shard& sh = l.ShardOf(0);
    const Piece& q0 = PieceOf(m, sh, q, 0);
    const Piece& q1 = PieceOf(m, sh, q, 1);
    const Piece& k1 = PieceOf(m, sh, k, 1);
    const Piece& v1 = PieceOf(m, sh, v, 1);
    EXPECT_EQ(BufferOf(sh, q0).name, "layers.0.self_attention.linear_qkv.weight");
    EXPECT_EQ(BufferOf(sh, q0).elems, 98304);
    EXPECT_EQ(q0.offset, 0);
    EXPECT_EQ(ToString(q1.box), "[128:256, 0:256]");
    EXPECT_EQ(q1.offset, 49152);
    EXPECT_EQ(ToString(k1.box), "[32:64, 0:256]");
    EXPECT_EQ(k1.offset, 81920);
    EXPECT_EQ(v1.offset, 90112);
    EXPECT_EQ(PieceOf(m, sh, k, 0).offset, 128 * 256);
    EXPECT_EQ(PieceOf(m, sh, v, 0).offset, 160 * 256);
    EXPECT_EQ(q1.stride[0], 256);
    EXPECT_EQ(q1.stride[1], 1);
  }
  {
    // TP2, rank 1: one group (G=1): q[128,256) at 0, k[32,64) at row 128 (32768),
    // v[32,64) at row 160 (40960); buffer 192*256 = 49152.
    const Layout l = MakeSourceLayout(m, Src(2, 1), DType::kBF16);
    const Shard& sh = l.ShardOf(1);
    EXPECT_EQ(ToString(PieceOf(m, sh, q).box), "[128:256, 0:256]");
    EXPECT_EQ(PieceOf(m, sh, q).offset, 0);
    EXPECT_EQ(PieceOf(m, sh, k).offset, 32768);
    EXPECT_EQ(PieceOf(m, sh, v).offset, 40960);
    EXPECT_EQ(BufferOf(sh, PieceOf(m, sh, q)).elems, 49152);
    // o_proj [256, 256] row-parallel: rank 1 holds columns [128,256) in a [256,128] buffer.
    const Piece& o = PieceOf(m, sh, "model.layers.0.self_attn.o_proj.weight");
    EXPECT_EQ(ToString(o.box), "[0:256, 128:256]");
    EXPECT_EQ(o.stride[0], 128);
    // linear_fc1 = [gate rows 256..512 ; up rows 256..512]: up at row 256 (offset 65536).
    const Piece& up = PieceOf(m, sh, "model.layers.0.mlp.up_proj.weight");
    EXPECT_EQ(ToString(up.box), "[256:512, 0:256]");
    EXPECT_EQ(up.offset, 256 * 256);
    EXPECT_EQ(BufferOf(sh, up).name, "layers.0.mlp.linear_fc1.weight");
  }
}

TEST(DestinationPlacement, VllmQkvConcatenatesAndReplicatesKvHeads) {
  const ModelSpec m = Preset("tiny-llama");
  const std::string q = "model.layers.1.self_attn.q_proj.weight", k = "model.layers.1.self_attn.k_proj.weight",
                    v = "model.layers.1.self_attn.v_proj.weight";
  {
    // TP1: q[0,256) at row 0, all of k at row 256 (65536), all of v at row 320 (81920).
    const Layout l = MakeDestinationLayout(m, Dst(1), DType::kBF16);
    const Shard& sh = l.ShardOf(0);
    EXPECT_EQ(ToString(PieceOf(m, sh, k).box), "[0:64, 0:256]");
    EXPECT_EQ(PieceOf(m, sh, k).offset, 65536);
    EXPECT_EQ(PieceOf(m, sh, v).offset, 81920);
    EXPECT_EQ(BufferOf(sh, PieceOf(m, sh, q)).name, "model.layers.1.self_attn.qkv_proj.weight");
  }
  {
    // TP4 > 2 KV heads: each KV head shared by 2 ranks; rank 3 holds head 3/2 = 1 =
    // rows [32,64). q rows per rank 64: q[192,256) at 0, k at row 64 (16384), v at row 96 (24576).
    const Layout l = MakeDestinationLayout(m, Dst(4), DType::kBF16);
    const Shard& sh = l.ShardOf(3);
    EXPECT_EQ(ToString(PieceOf(m, sh, q).box), "[192:256, 0:256]");
    EXPECT_EQ(ToString(PieceOf(m, sh, k).box), "[32:64, 0:256]");
    EXPECT_EQ(PieceOf(m, sh, k).offset, 16384);
    EXPECT_EQ(PieceOf(m, sh, v).offset, 24576);
    EXPECT_EQ(BufferOf(sh, PieceOf(m, sh, q)).elems, 128 * 256);
    EXPECT_EQ(ToString(PieceOf(m, l.ShardOf(2), k).box), "[32:64, 0:256]");  // rank 2 shares head 1
    EXPECT_EQ(ToString(PieceOf(m, l.ShardOf(1), k).box), "[0:32, 0:256]");
  }
}

TEST(Placement, VocabPaddingDiffersBetweenEngines) {
  ModelConfig c = ModelPreset("tiny-llama");
  c.vocab = 1100;
  const ModelSpec m = BuildModel(c);
  const std::string emb = "model.embed_tokens.weight";
  // Megatron TP2: padded to a multiple of 128*2 = 256 -> 1280, 640 rows per rank;
  // rank 1 holds rows [640,1100) in a 640-row buffer.
  const Layout src = MakeSourceLayout(m, Src(2, 1), DType::kBF16);
  const Piece& s1 = PieceOf(m, src.ShardOf(1), emb);
  EXPECT_EQ(ToString(s1.box), "[640:1100, 0:256]");
  EXPECT_EQ(BufferOf(src.ShardOf(1), s1).elems, 640 * 256);
  // vLLM TP2: padded to a multiple of 64 -> 1152, 576 rows per rank; rank 1: [576,1100).
  const Layout dst = MakeDestinationLayout(m, Dst(2), DType::kBF16);
  const Piece& d1 = PieceOf(m, dst.ShardOf(1), emb);
  EXPECT_EQ(ToString(d1.box), "[576:1100, 0:256]");
  EXPECT_EQ(BufferOf(dst.ShardOf(1), d1).elems, 576 * 256);
  // Qwen3 vocab 151936 at TP8: vLLM 151936 (already a multiple of 64) / 8 = 18992 rows.
  const ModelSpec q = Preset("qwen3-30b-a3b");
  EXPECT_EQ(MakeDestinationLayout(q, Dst(8), DType::kBF16).ShardOf(0).buffers.front().elems, 18992 * 2048);
  // Megatron TP4 (4 KV heads allow at most TP4): multiple of 512 -> 152064, / 4 = 38016 rows.
  EXPECT_EQ(MakeSourceLayout(q, Src(4, 1, 1, 4, 1), DType::kBF16).ShardOf(0).buffers.front().elems, 38016 * 2048);
}

// tiny-moe: 8 experts, moe_intermediate 128, hidden 256.
TEST(SourcePlacement, ExpertsSplitByEpThenEtp) {
  const ModelSpec m = Preset("tiny-moe");
  // tp2 dp2: 4 ranks per stage; ep2 x etp2. Rank 3 -> i=3: etp_rank 1, ep_rank 1:
  // experts [4,8), rows [64,128) of each. fc1 buffer [4, 128, 256]: gate at row 0,
  // up at row 64 (offset 64*256 = 16384), strides {128*256, 256, 1}.
  const Layout l = MakeSourceLayout(m, Src(2, 1, 1, 2, 2, 2), DType::kBF16);
  const Shard& sh = l.ShardOf(3);
  const Piece& g = PieceOf(m, sh, "model.layers.2.mlp.experts.gate_proj.weight");
  const Piece& u = PieceOf(m, sh, "model.layers.2.mlp.experts.up_proj.weight");
  const Piece& d = PieceOf(m, sh, "model.layers.2.mlp.experts.down_proj.weight");
  EXPECT_EQ(ToString(g.box), "[4:8, 64:128, 0:256]");
  EXPECT_EQ(g.offset, 0);
  EXPECT_EQ(u.offset, 16384);
  EXPECT_EQ(g.stride, (Extents{32768, 256, 1}));
  EXPECT_EQ(BufferOf(sh, g).name, "layers.2.mlp.experts.linear_fc1.weight");
  EXPECT_EQ(BufferOf(sh, g).elems, 4 * 128 * 256);
  // fc2 [4, 256, 64]: down[4:8, :, 64:128].
  EXPECT_EQ(ToString(d.box), "[4:8, 0:256, 64:128]");
  EXPECT_EQ(d.stride, (Extents{256 * 64, 64, 1}));
  // Rank 1 (tp_rank 1, i=1): etp_rank 1, ep_rank 0 -> experts [0,4).
  EXPECT_EQ(ToString(PieceOf(m, l.ShardOf(1), "model.layers.2.mlp.experts.gate_proj.weight").box),
            "[0:4, 64:128, 0:256]");
  // Rank 2 (tp_rank 0, dp_rank 1): etp_rank 0, ep_rank 1 -> experts [4,8), rows [0,64).
  EXPECT_EQ(ToString(PieceOf(m, l.ShardOf(2), "model.layers.2.mlp.experts.gate_proj.weight").box),
            "[4:8, 0:64, 0:256]");
}

TEST(DestinationPlacement, ExpertsWholeWithEpAndFlattenedTpWithout) {
  const ModelSpec m = Preset("tiny-moe");
  const std::string gate = "model.layers.0.mlp.experts.gate_proj.weight", up = "model.layers.0.mlp.experts.up_proj.weight";
  // tp2 dp2 ep4: rank 2 = (tp 0, dp 1) -> ep rank 1*2+0 = 2 -> experts [4,6) whole.
  // w13 [2, 256, 256]: up at row 128 (offset 32768), strides {65536, 256, 1}.
  const Layout ep = MakeDestinationLayout(m, Dst(2, 1, 4, 2), DType::kBF16);
  EXPECT_EQ(ToString(PieceOf(m, ep.ShardOf(ep.rank_shard[2]), gate).box), "[4:6, 0:128, 0:256]");
  EXPECT_EQ(PieceOf(m, ep.ShardOf(2), up).offset, 32768);
  EXPECT_EQ(PieceOf(m, ep.ShardOf(2), up).stride, (Extents{65536, 256, 1}));
  // Without EP, tp2 dp2 shards each expert over the flattened group of 4: rank 2 holds
  // rows [64,96) of every expert; w13 [8, 64, 256].
  const Layout tp = MakeDestinationLayout(m, Dst(2, 1, 1, 2), DType::kBF16);
  EXPECT_EQ(ToString(PieceOf(m, tp.ShardOf(2), gate).box), "[0:8, 64:96, 0:256]");
  EXPECT_EQ(PieceOf(m, tp.ShardOf(2), up).offset, 32 * 256);
  EXPECT_EQ(BufferOf(tp.ShardOf(2), PieceOf(m, tp.ShardOf(2), up)).name, "model.layers.0.mlp.experts.w13_weight");
}

TEST(DestinationPlacement, MlaFusesTheDownProjections) {
  // tiny-mla: fused_qkv_a_proj = [q_a_proj (128 rows) ; kv_a_proj_with_mqa (64+16 rows)], replicated.
  const ModelSpec m = Preset("tiny-mla");
  const Layout l = MakeDestinationLayout(m, Dst(2), DType::kBF16);
  const Shard& sh = l.ShardOf(1);
  const Piece& kv = PieceOf(m, sh, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
  EXPECT_EQ(BufferOf(sh, kv).name, "model.layers.0.self_attn.fused_qkv_a_proj.weight");
  EXPECT_EQ(kv.offset, 128 * 256);
  EXPECT_EQ(BufferOf(sh, kv).elems, (128 + 80) * 256);
}

TEST(SourcePlacement, VirtualPipelineChunksAlternateStages) {
  // tiny-llama 4 layers, pp2 vpp2: chunks of 1 layer; chunk k on stage k % 2.
  const ModelSpec m = Preset("tiny-llama");
  const Layout l = MakeSourceLayout(m, Src(1, 2, 2), DType::kBF16);
  auto layers_of = [&](int32_t rank) {
    std::set<int32_t> s;
    for (const auto& b : l.ShardOf(rank).buffers) s.insert(b.layer);
    return s;
  };
  EXPECT_EQ(layers_of(0), (std::set<int32_t>{-1, 0, 2}));
  EXPECT_EQ(layers_of(1), (std::set<int32_t>{1, 3, 4}));
}

TEST(SourcePlacement, TiedEmbeddingCopiedToLastStage) {
  const ModelSpec m = Preset("tiny-qwen2");
  ASSERT_TRUE(m.config.tied_embeddings);
  const Layout pp2 = MakeSourceLayout(m, Src(1, 2), DType::kBF16);
  const Piece& out = PieceOf(m, pp2.ShardOf(1), "model.embed_tokens.weight");
  EXPECT_EQ(BufferOf(pp2.ShardOf(1), out).name, "output_layer.weight");
  const Layout pp1 = MakeSourceLayout(m, Src(1, 1), DType::kBF16);
  int n = 0;
  for (const Piece& p : pp1.ShardOf(0).pieces) n += m.tensors[static_cast<size_t>(p.tensor)].kind == TensorKind::kEmbedding;
  EXPECT_EQ(n, 1);
}

TEST(SourcePlacement, RankOrderAndSharing) {
  // tp2 cp2 dp2 pp2 dense: content depends on (pp, tp) only -> 4 shards.
  // rank = tp + 2*(cp + 2*(dp + 2*pp)): rank 13 = tp1 cp0 dp1 pp1 shares with rank 9 (tp1, pp1).
  const ModelSpec m = Preset("tiny-llama");
  const Layout l = MakeSourceLayout(m, Src(2, 2, 1, 1, 1, 2, 2), DType::kBF16);
  ASSERT_EQ(l.Ranks(), 16);
  EXPECT_EQ(l.shards.size(), 4u);
  EXPECT_EQ(l.rank_shard[13], l.rank_shard[9]);
  EXPECT_NE(l.rank_shard[13], l.rank_shard[8]);
  EXPECT_NE(l.rank_shard[13], l.rank_shard[5]);  // tp1 on stage 0
  EXPECT_EQ(l.rank_shard[0], 0);                 // numbered by first rank
  EXPECT_EQ(l.rank_shard[1], 1);
  EXPECT_EQ(l.RankBytes(3), l.ShardOf(3).Elements() * 2);
  // Destination rank = tp + tp*(pp + pp*dp): rank 5 of tp2 pp2 dp2 = tp1 pp0 dp1 -> same as rank 1.
  const Layout d = MakeDestinationLayout(m, Dst(2, 2, 1, 2), DType::kBF16);
  EXPECT_EQ(d.rank_shard[5], d.rank_shard[1]);
  EXPECT_EQ(d.shards.size(), 4u);
}

TEST(Layout, LocalOffsetFollowsStrides) {
  Piece p;
  p.box.ndim = 3;
  p.box.lo = {4, 64, 0};
  p.box.hi = {8, 128, 256};
  p.offset = 16384;
  p.stride = {32768, 256, 1};
  EXPECT_EQ(LocalOffset(p, {4, 64, 0}), 16384);
  EXPECT_EQ(LocalOffset(p, {5, 65, 3}), 16384 + 32768 + 256 + 3);
}

// Element-by-element cross-check of the box-arithmetic buffer checks on tiny models:
// within each shard, LocalOffset maps the elements of all pieces injectively into
// [0, buffer elems).
// The tiny presets scaled down further (vocab 200 so that both engines pad).
ModelSpec Smaller(const std::string& preset) {
  ModelConfig c = ModelPreset(preset);
  c.vocab = 200, c.hidden = 64, c.intermediate = 128, c.moe_intermediate = 32;
  if (c.IsMla()) {
    c.q_lora_rank = 32, c.kv_lora_rank = 16, c.qk_nope_head_dim = 8, c.qk_rope_head_dim = 8, c.v_head_dim = 8;
  } else {
    c.head_dim = 16;
  }
  return BuildModel(c);
}

TEST(Layout, LocalOffsetsAreInjectiveOnTinyModels) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-moe", "tiny-mla"}) {
    const ModelSpec m = Smaller(name);
    const bool moe = m.config.IsMoe();
    std::vector<Layout> layouts{MakeSourceLayout(m, Src(2, 2, 1, moe ? 2 : 1, moe ? 2 : 1, 2), DType::kBF16),
                                MakeSourceLayout(m, Src(1, 2, 2, moe ? 2 : 1, 1, 2), DType::kBF16),
                                MakeDestinationLayout(m, Dst(4, 1, moe ? 4 : 1), DType::kBF16),
                                MakeDestinationLayout(m, Dst(2, 2, 1, 2), DType::kBF16)};
    for (const Layout& l : layouts)
      for (const Shard& sh : l.shards) {
        std::vector<std::vector<char>> used(sh.buffers.size());
        for (size_t b = 0; b < sh.buffers.size(); ++b) used[b].assign(static_cast<size_t>(sh.buffers[b].elems), 0);
        for (const Piece& p : sh.pieces) {
          Extents i = p.box.lo;
          for (i[0] = p.box.lo[0]; i[0] < p.box.hi[0]; ++i[0])
            for (i[1] = p.box.lo[1]; i[1] < p.box.hi[1]; ++i[1])
              for (i[2] = p.box.lo[2]; i[2] < p.box.hi[2]; ++i[2]) {
                const int64_t o = LocalOffset(p, i);
                ASSERT_GE(o, 0);
                ASSERT_LT(o, sh.buffers[static_cast<size_t>(p.buffer)].elems) << name;
                char& u = used[static_cast<size_t>(p.buffer)][static_cast<size_t>(o)];
                ASSERT_EQ(u, 0) << name << ": element stored twice in " << sh.buffers[static_cast<size_t>(p.buffer)].name;
                u = 1;
              }
        }
      }
  }
}

// ---- Coverage sweeps ----------------------------------------------------------------

// TP 1-8, PP 1-4 (even and uneven splits), VPP 2, DP, CP, and for MoE models EP 1-64
// with ETP. Non-dividing combinations are rejected by the layout and skipped.
std::vector<SourceParallel> SourceSweep(bool moe) {
  using Pairs = std::vector<std::pair<int32_t, int32_t>>;
  std::vector<SourceParallel> out;
  const std::vector<int32_t> tps{1, 2, 3, 4, 8}, pps{1, 2, 3, 4};
  Pairs dpcp{{1, 1}, {2, 1}, {2, 2}};
  Pairs epetp{{1, 1}};
  if (moe) {
    dpcp.push_back({8, 1});
    epetp = Pairs{{1, 1}, {2, 1}, {4, 1}, {2, 2}, {8, 1}, {4, 4}, {16, 1}, {64, 1}};
  }
  for (int32_t tp : tps)
    for (int32_t pp : pps)
      for (int32_t vpp : {1, 2}) {
        if (vpp > 1 && pp < 2) continue;
        for (auto [dp, cp] : dpcp)
          for (auto [ep, etp] : epetp) out.push_back(Src(tp, pp, vpp, ep, etp, dp, cp));
      }
  return out;
}

// TP 1-8, PP 1-4, DP 1-4; MoE models also with EP = tp*dp.
std::vector<DestinationParallel> DestinationSweep(bool moe) {
  std::vector<DestinationParallel> out;
  const std::vector<int32_t> tps{1, 2, 3, 4, 8}, pps{1, 2, 3, 4}, dps{1, 2, 4};
  for (int32_t tp : tps)
    for (int32_t pp : pps)
      for (int32_t dp : dps) {
        out.push_back(Dst(tp, pp, 1, dp));
        if (moe && tp * dp > 1) out.push_back(Dst(tp, pp, tp * dp, dp));
      }
  return out;
}

// Runs a sweep, skipping configurations the model rejects (InputError), and returns how
// many were checked. Rejections are tested on purpose in the Errors tests below.
template <typename P, typename Check>
int RunSweep(const ModelSpec& m, const std::vector<P>& configs, Check&& check) {
  int checked = 0;
  for (const P& p : configs) {
    AssertionResult r = AssertionSuccess();
    try {
      r = check(m, p);
    } catch (const InputError&) {
      continue;
    }
    EXPECT_TRUE(r) << m.config.name << " " << Describe(p);
    ++checked;
  }
  return checked;
}

TEST(Coverage, TinyModelsFullSweep) {
  for (const char* name : {"tiny-llama", "tiny-qwen2", "tiny-moe", "tiny-mla"}) {
    const ModelSpec m = Preset(name);
    const int s = RunSweep(m, SourceSweep(m.config.IsMoe()), SourceIsExact);
    const int d = RunSweep(m, DestinationSweep(m.config.IsMoe()), DestinationIsExact);
    EXPECT_GE(s, 30) << name;  // tiny-llama: tp 1-2 (2 KV heads) x 6 pipeline splits x 3 dp/cp
    EXPECT_GE(d, 30) << name;
  }
}

// Real models: a curated set per kind (a full grid over 61-126 layers and up to 64
// expert shards per stage is too slow for sanitizer builds). Together they cover TP
// 1-8, PP 1-4 even and uneven, VPP 2, CP 2, DP, EP 2-16 and ETP 2 on each model.
std::vector<SourceParallel> RealSourceConfigs(bool moe) {
  if (!moe)
    return {Src(8, 1, 1, 1, 1, 2), Src(2, 4, 2, 1, 1, 1, 2), Src(4, 3), Src(1, 4, 1, 1, 1, 2, 2), Src(8, 2, 2),
            Src(2, 2, 1, 1, 1, 1, 2)};
  return {Src(4, 4, 2, 8, 1, 2), Src(2, 3, 1, 4, 2, 4), Src(4, 2, 1, 16, 1, 4), Src(1, 1, 1, 8, 1, 8),
          Src(2, 4, 1, 2, 2, 1, 2), Src(1, 3, 1, 1, 1, 2, 2)};
}
std::vector<DestinationParallel> RealDestinationConfigs(bool moe) {
  if (!moe) return {Dst(8), Dst(4, 3, 1, 2), Dst(1, 2, 1, 4), Dst(2, 4), Dst(8, 2, 1, 2)};
  return {Dst(8), Dst(4, 2, 8, 2), Dst(2, 3, 1, 4), Dst(8, 1, 16, 2), Dst(1, 4, 4, 4), Dst(4, 1, 1, 2)};
}

TEST(Coverage, RealPresetsAndFamilies) {
  std::vector<ModelConfig> configs;
  for (const auto& n : ModelPresetNames())
    if (n.rfind("tiny-", 0) != 0) configs.push_back(ModelPreset(n));
  for (const auto& c : FamilyConfigs()) configs.push_back(c);
  for (const ModelConfig& c : configs) {
    const ModelSpec m = BuildModel(c);
    const int s = RunSweep(m, RealSourceConfigs(m.config.IsMoe()), SourceIsExact);
    const int d = RunSweep(m, RealDestinationConfigs(m.config.IsMoe()), DestinationIsExact);
    EXPECT_GE(s, 3) << c.name;
    EXPECT_GE(d, 3) << c.name;
  }
}

TEST(Coverage, UnevenAndExplicitPipelineSplits) {
  const ModelSpec m = Preset("tiny-moe");
  SourceParallel p = Src(2, 3, 1, 2, 1, 2);
  p.pp_layers = {0, 3, 1};
  EXPECT_TRUE(SourceIsExact(m, p));
  p = Src(1, 2, 2, 2, 1, 2);
  p.pp_layers = {2, 0, 1, 1};  // vpp: one entry per virtual chunk
  EXPECT_TRUE(SourceIsExact(m, p));
  DestinationParallel d = Dst(2, 3, 4, 2);
  d.pp_layers = {1, 0, 3};
  EXPECT_TRUE(DestinationIsExact(m, d));
}

TEST(Coverage, Qwen3_235bAtDestinationTp8) {
  const ModelSpec m = Preset("qwen3-235b-a22b");
  ASSERT_EQ(m.config.kv_heads, 4);
  EXPECT_TRUE(DestinationIsExact(m, Dst(8)));               // each KV head on 2 ranks
  EXPECT_TRUE(DestinationIsExact(m, Dst(8, 1, 128, 16)));   // TP8 x DP16, EP128
  EXPECT_TRUE(SourceIsExact(m, Src(4, 8, 1, 16, 1, 4)));    // TP4 x PP8 x EP16
}

TEST(Coverage, DeepseekV3Pp16Ep) {
  const ModelSpec m = Preset("deepseek-v3");
  EXPECT_TRUE(SourceIsExact(m, Src(1, 16, 1, 16, 1, 16)));  // PP16 x EP16 (61 layers: 3, 4 x 14, 2)
  EXPECT_TRUE(SourceIsExact(m, Src(2, 16, 1, 64, 1, 32)));  // TP2, EP64
  EXPECT_TRUE(DestinationIsExact(m, Dst(32, 1, 1, 8)));     // TP32 x DP8
  EXPECT_TRUE(DestinationIsExact(m, Dst(8, 1, 64, 8)));     // TP8 x DP8, EP64
}

TEST(Coverage, KimiK2) {
  const ModelSpec m = Preset("kimi-k2");
  EXPECT_TRUE(SourceIsExact(m, Src(8, 4, 1, 32, 1, 8)));     // 256 GPUs
  EXPECT_TRUE(DestinationIsExact(m, Dst(8, 1, 128, 16)));    // 128 GPUs, EP128: 3 experts each
  EXPECT_TRUE(DestinationIsExact(m, Dst(16, 2, 1, 1)));
}

// ---- Errors ---------------------------------------------------------------------------

template <typename F>
std::string ErrorOf(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    EXPECT_EQ(e.file(), "s.yaml");
    return e.field() + ": " + e.problem();
  }
  return "no error";
}

ModelSpec Custom(int32_t heads, int32_t kv, int64_t inter) {
  ModelConfig c = ModelPreset("tiny-llama");
  c.heads = heads, c.kv_heads = kv, c.head_dim = 32, c.intermediate = inter;
  return BuildModel(c);
}

TEST(Errors, Source) {
  const ModelSpec llama = Preset("tiny-llama"), moe = Preset("tiny-moe");
  auto src = [](const ModelSpec& m, SourceParallel p) { return ErrorOf([&] { MakeSourceLayout(m, p, DType::kBF16, "s.yaml"); }); };
  EXPECT_EQ(src(llama, Src(3, 1)), "source.tp: 8 attention heads are not divisible by tp=3");
  EXPECT_EQ(src(llama, Src(4, 1)), "source.tp: 2 KV heads (query groups) are not divisible by tp=4");
  EXPECT_EQ(src(Custom(8, 8, 516), Src(8, 1)), "source.tp: 516 (intermediate size) is not divisible by tp=8");
  EXPECT_EQ(src(moe, Src(1, 1, 1, 3, 1, 3)), "source.ep: 8 experts are not divisible by ep=3");
  EXPECT_EQ(src(moe, Src(1, 1, 1, 1, 3, 3)), "source.etp: 128 (MoE intermediate size) is not divisible by etp=3");
  EXPECT_NE(src(moe, Src(1, 1, 1, 4, 1, 2)).find("source.ep: ep*etp=4 does not divide tp*cp*dp=2"), std::string::npos);
  EXPECT_NE(src(llama, Src(1, 8)).find("source.pp: 4 layers do not split over 8 pipeline stages"), std::string::npos);
  EXPECT_NE(src(llama, Src(1, 2, 4)).find("source.vpp: 4 layers do not split over 8 pipeline stages"),
            std::string::npos);
  EXPECT_EQ(src(llama, Src(1, 1, 2)), "source.vpp: virtual pipeline stages (vpp=2) need pp > 1");
  EXPECT_EQ(src(llama, Src(1, 1, 1, 2, 1, 2)), "source.ep: ep=2 needs a MoE model; tiny-llama has no experts");
  EXPECT_EQ(src(llama, Src(0, 1)), "source.tp: must be at least 1, got 0");
  SourceParallel p = Src(1, 2);
  p.pp_layers = {1, 2};
  EXPECT_EQ(src(llama, p), "source.pp_layers: sums to 3 but the model has 4 decoder layers");
  p = Src(1, 2, 2);
  p.pp_layers = {2, 2};
  EXPECT_EQ(src(llama, p), "source.pp_layers: has 2 entries but there are 4 pipeline stages");
}

TEST(Errors, Destination) {
  const ModelSpec llama = Preset("tiny-llama"), moe = Preset("tiny-moe");
  auto dst = [](const ModelSpec& m, DestinationParallel p) {
    return ErrorOf([&] { MakeDestinationLayout(m, p, DType::kBF16, "s.yaml"); });
  };
  EXPECT_EQ(dst(llama, Dst(3)), "destination.tp: 8 attention heads are not divisible by tp=3");
  EXPECT_EQ(dst(Custom(8, 2, 516), Dst(8)), "destination.tp: 516 (intermediate size) is not divisible by tp=8");
  EXPECT_NE(dst(Custom(12, 4, 768), Dst(6)).find("destination.tp: tp=6 exceeds the 4 KV heads but is not a multiple"),
            std::string::npos);
  EXPECT_EQ(dst(Custom(12, 4, 768), Dst(3)), "destination.tp: 4 KV heads are not divisible by tp=3");
  EXPECT_EQ(dst(Custom(12, 12, 768), Dst(3)),
            "destination.tp: the vocabulary padded to a multiple of 64 (1024) is not divisible by tp=3");
  EXPECT_NE(dst(moe, Dst(2, 1, 2, 2)).find("destination.ep: ep=2 must equal tp*dp=4"), std::string::npos);
  EXPECT_EQ(dst(moe, Dst(1, 1, 3, 3)), "destination.ep: 8 experts are not divisible by ep=3");
  EXPECT_NE(dst(moe, Dst(1, 1, 1, 3)).find("destination.tp: 128 (MoE intermediate size) is not divisible by tp*dp=3"),
            std::string::npos);
  EXPECT_EQ(dst(llama, Dst(1, 1, 2, 2)), "destination.ep: ep=2 needs a MoE model; tiny-llama has no experts");
  DestinationParallel p = Dst(1, 2);
  p.pp_layers = {4};
  EXPECT_EQ(dst(llama, p), "destination.pp_layers: has 1 entries but there are 2 pipeline stages");
  EXPECT_EQ(dst(llama, Dst(1, 1, 1, 0)), "destination.dp: must be at least 1, got 0");
}

}  // namespace
}  // namespace reshard
