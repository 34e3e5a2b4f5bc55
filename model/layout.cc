// Parallel layouts: Megatron-Core (source) and vLLM (destination) sharding rules.
//
// Idea: a rank's content depends only on a few mesh coordinates (pipeline stage, TP
// rank, and for MoE the expert-mesh coordinates); DP and CP only replicate. So each
// side enumerates its ranks once, computes the coordinate key of each, and builds a
// Shard only for a key it has not seen yet (keys numbered in order of first rank:
// deterministic). Cost: O(ranks + distinct_shards * tensors_per_stage * pieces_per_tensor).
//
// Every placement rule cites the code it follows; the coverage tests
// (tests/model/layout_test.cc) check that every element of every tensor is covered
// exactly the expected number of times.
#include "model/layout.h"

#include <algorithm>
#include <array>
#include <map>
#include <string_view>

#include "model/error.h"

namespace reshard {

int64_t Shard::Elements() const {
  int64_t n = 0;
  for (const auto& b : buffers) n += b.elems;
  return n;
}

int64_t LocalOffset(const Piece& p, const Extents& idx) {
  int64_t off = p.offset;
  for (int d = 0; d < p.box.ndim; ++d) {
    RESHARD_CHECK(idx[d] >= p.box.lo[d] && idx[d] < p.box.hi[d], "index outside the piece");
    off += (idx[d] - p.box.lo[d]) * p.stride[d];
  }
  return off;
}

namespace {

std::string Str(int64_t v) { return std::to_string(v); }
int64_t RoundUp(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// ---- Stage splits ---------------------------------------------------------------

void CheckExplicitLayers(int32_t layers, int32_t stages, const std::vector<int32_t>& ex,
                         const std::string& file, const std::string& field) {
  if (static_cast<int64_t>(ex.size()) != stages)
    throw InputError(file, field,
                     "has " + Str(ex.size()) + " entries but there are " + Str(stages) + " pipeline stages");
  int64_t sum = 0;
  for (size_t i = 0; i < ex.size(); ++i) {
    // 0 is allowed: Megatron's pipeline_model_parallel_layout and vLLM's
    // VLLM_PP_LAYER_PARTITION both accept stages without decoder layers (e.g. a
    // last stage holding only the final norm and output layer).
    if (ex[i] < 0)
      throw InputError(file, field, "entry " + Str(i) + " is negative (" + Str(ex[i]) + ")");
    sum += ex[i];
  }
  if (sum != layers)
    throw InputError(file, field,
                     "sums to " + Str(sum) + " but the model has " + Str(layers) + " decoder layers");
}

void CheckStages(int32_t stages, const std::string& file, const std::string& field) {
  if (stages < 1) throw InputError(file, field, "needs at least one pipeline stage, got " + Str(stages));
}

// ---- Model index: which tensor plays which role in each layer -------------------

struct LayerIndex {
  int32_t q = -1, k = -1, v = -1, q_bias = -1, k_bias = -1, v_bias = -1, out = -1;
  int32_t q_down = -1, q_up = -1, kv_down = -1, kv_up = -1;
  int32_t gate = -1, up = -1, down = -1;                    // dense MLP
  int32_t shared_gate = -1, shared_up = -1, shared_down = -1;  // shared experts
  int32_t router = -1, router_bias = -1;
  int32_t expert_gate = -1, expert_up = -1, expert_down = -1;
  std::vector<int32_t> norms;  // in inventory order
};

struct ModelIndex {
  int32_t embedding = -1, output = -1;
  std::vector<int32_t> final_norms;
  std::vector<LayerIndex> layers;
};

void SetOnce(int32_t& slot, int32_t t, const TensorSpec& s) {
  RESHARD_CHECK(slot == -1, "two tensors of kind " + std::string(TensorKindName(s.kind)) + " in layer " +
                                Str(s.layer) + ": " + s.name);
  slot = t;
}

bool IsShared(const TensorSpec& s) { return s.name.find("shared_expert") != std::string::npos; }

ModelIndex IndexModel(const ModelSpec& m) {
  ModelIndex ix;
  const int32_t L = m.config.layers;
  ix.layers.resize(static_cast<size_t>(L));
  for (int32_t t = 0; t < static_cast<int32_t>(m.tensors.size()); ++t) {
    const TensorSpec& s = m.tensors[t];
    if (s.kind == TensorKind::kEmbedding) {
      SetOnce(ix.embedding, t, s);
      continue;
    }
    if (s.kind == TensorKind::kOutput) {
      SetOnce(ix.output, t, s);
      continue;
    }
    if (s.layer == L && s.kind == TensorKind::kNorm) {
      ix.final_norms.push_back(t);
      continue;
    }
    RESHARD_CHECK(s.layer >= 0 && s.layer < L, "tensor " + s.name + " has layer " + Str(s.layer));
    LayerIndex& li = ix.layers[static_cast<size_t>(s.layer)];
    switch (s.kind) {
      case TensorKind::kNorm: li.norms.push_back(t); break;
      case TensorKind::kAttnQ: SetOnce(li.q, t, s); break;
      case TensorKind::kAttnK: SetOnce(li.k, t, s); break;
      case TensorKind::kAttnV: SetOnce(li.v, t, s); break;
      case TensorKind::kAttnQBias: SetOnce(li.q_bias, t, s); break;
      case TensorKind::kAttnKBias: SetOnce(li.k_bias, t, s); break;
      case TensorKind::kAttnVBias: SetOnce(li.v_bias, t, s); break;
      case TensorKind::kAttnOut: SetOnce(li.out, t, s); break;
      case TensorKind::kMlaQDown: SetOnce(li.q_down, t, s); break;
      case TensorKind::kMlaQUp: SetOnce(li.q_up, t, s); break;
      case TensorKind::kMlaKvDown: SetOnce(li.kv_down, t, s); break;
      case TensorKind::kMlaKvUp: SetOnce(li.kv_up, t, s); break;
      case TensorKind::kMlpGate: SetOnce(IsShared(s) ? li.shared_gate : li.gate, t, s); break;
      case TensorKind::kMlpUp: SetOnce(IsShared(s) ? li.shared_up : li.up, t, s); break;
      case TensorKind::kMlpDown: SetOnce(IsShared(s) ? li.shared_down : li.down, t, s); break;
      case TensorKind::kRouter: SetOnce(li.router, t, s); break;
      case TensorKind::kRouterBias: SetOnce(li.router_bias, t, s); break;
      case TensorKind::kExpertGate: SetOnce(li.expert_gate, t, s); break;
      case TensorKind::kExpertUp: SetOnce(li.expert_up, t, s); break;
      case TensorKind::kExpertDown: SetOnce(li.expert_down, t, s); break;
      case TensorKind::kEmbedding:
      case TensorKind::kOutput: break;  // handled above
    }
  }
  RESHARD_CHECK(ix.embedding >= 0, "model has no embedding");
  for (const LayerIndex& li : ix.layers) {
    // Fused groups must be complete: the fusions below place all members.
    RESHARD_CHECK((li.k >= 0) == (li.v >= 0) && (li.k < 0 || li.q >= 0), "incomplete q/k/v");
    RESHARD_CHECK((li.q_bias >= 0) == (li.k_bias >= 0) && (li.k_bias >= 0) == (li.v_bias >= 0), "incomplete q/k/v biases");
    RESHARD_CHECK((li.gate >= 0) == (li.up >= 0) && (li.gate >= 0) == (li.down >= 0), "incomplete dense MLP");
    RESHARD_CHECK((li.shared_gate >= 0) == (li.shared_up >= 0) && (li.shared_gate >= 0) == (li.shared_down >= 0),
                  "incomplete shared experts");
    RESHARD_CHECK((li.expert_gate >= 0) == (li.expert_up >= 0) && (li.expert_gate >= 0) == (li.expert_down >= 0),
                  "incomplete experts");
  }
  return ix;
}

// The part of an HF name after "model.layers.N." ("self_attn.q_norm.weight").
std::string_view LayerSuffix(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return name;
  name.remove_prefix(kPrefix.size());
  size_t dot = name.find('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

// HF name without its last two components: "model.layers.3.self_attn.q_proj.weight" ->
// "model.layers.3.self_attn." (vLLM keeps HF module paths and renames fused leaves).
std::string ModulePrefix(const std::string& name) {
  size_t last = name.rfind('.');
  if (last == std::string::npos || last == 0) return "";
  size_t prev = name.rfind('.', last - 1);
  return prev == std::string::npos ? "" : name.substr(0, prev + 1);
}

// ---- Shard building --------------------------------------------------------------

class ShardBuilder {
 public:
  explicit ShardBuilder(const ModelSpec& m) : m_(m) {}

  const Shape& ShapeOf(int32_t t) const { return m_.tensors[static_cast<size_t>(t)].shape; }

  int32_t Buffer(std::string name, int32_t layer, int64_t elems) {
    RESHARD_CHECK(elems > 0, "empty local buffer " + name);
    shard_.buffers.push_back(LocalBuffer{std::move(name), layer, elems});
    return static_cast<int32_t>(shard_.buffers.size()) - 1;
  }

  void Add(int32_t tensor, const Box& box, int32_t buffer, int64_t offset, Extents stride) {
    RESHARD_CHECK(InBounds(box, ShapeOf(tensor)) && !Empty(box), "bad piece box " + ToString(box));
    // Unused dimensions only ever index 0; give them the buffer's size, as DenseStrides
    // of the buffer's own shape would, so all pieces of a buffer carry equal strides.
    for (int d = box.ndim; d < kMaxDims; ++d) stride[d] = shard_.buffers[static_cast<size_t>(buffer)].elems;
    shard_.pieces.push_back(Piece{tensor, box, buffer, offset, stride});
  }

  // Rows [lo, hi) of dim 0 of tensor t (all of the other dims) at row `row` of a buffer
  // whose rows have the tensor's row width: offset = row * (elements per row).
  void Rows(int32_t t, int64_t lo, int64_t hi, int32_t buffer, int64_t row) {
    const Shape& s = ShapeOf(t);
    const Extents st = DenseStrides(s);
    Add(t, SliceBox(s, 0, lo, hi), buffer, row * st[0], st);
  }

  // The whole tensor in its own buffer (replicated parameters).
  void Whole(int32_t t, std::string name, int32_t layer) {
    const Shape& s = ShapeOf(t);
    int32_t b = Buffer(std::move(name), layer, s.Elements());
    Add(t, WholeBox(s), b, 0, DenseStrides(s));
  }

  // Column-parallel (split dim 0 in n equal parts; rank r keeps part r).
  void Column(int32_t t, std::string name, int32_t layer, int64_t r, int64_t n) {
    const Shape& s = ShapeOf(t);
    RESHARD_CHECK(s.dim[0] % n == 0, "column split of " + ToString(s) + " by " + Str(n));
    const int64_t per = s.dim[0] / n;
    int32_t b = Buffer(std::move(name), layer, s.Elements() / n);
    Rows(t, r * per, (r + 1) * per, b, 0);
  }

  // Row-parallel (split dim 1 of a 2-D weight in n parts): local [rows, cols/n].
  void Row(int32_t t, std::string name, int32_t layer, int64_t r, int64_t n) {
    const Shape& s = ShapeOf(t);
    RESHARD_CHECK(s.ndim == 2 && s.dim[1] % n == 0, "row split of " + ToString(s) + " by " + Str(n));
    const int64_t per = s.dim[1] / n;
    int32_t b = Buffer(std::move(name), layer, s.dim[0] * per);
    Add(t, SliceBox(s, 1, r * per, (r + 1) * per), b, 0, DenseStrides(MakeShape({s.dim[0], per})));
  }

  // Two tensors of equal row width fused row-wise per rank: [rows of a ; rows of b],
  // each split in n parts (Megatron linear_fc1, vLLM gate_up_proj / fused_qkv_a_proj with n=1).
  void FusedColumns(int32_t a, int32_t b, std::string name, int32_t layer, int64_t r, int64_t n) {
    const Shape& sa = ShapeOf(a);
    const Shape& sb = ShapeOf(b);
    RESHARD_CHECK(sa.dim[0] % n == 0 && sb.dim[0] % n == 0 && sa.dim[1] == sb.dim[1], "fused columns");
    const int64_t pa = sa.dim[0] / n, pb = sb.dim[0] / n;
    int32_t buf = Buffer(std::move(name), layer, (pa + pb) * sa.dim[1]);
    Rows(a, r * pa, (r + 1) * pa, buf, 0);
    Rows(b, r * pb, (r + 1) * pb, buf, pa);
  }

  // Vocab-parallel embedding / output: rows padded to `padded`, rank r owns padded/n rows
  // of which only those below the real vocab hold data (the rest are padding rows).
  void Vocab(int32_t t, std::string name, int32_t layer, int64_t r, int64_t n, int64_t padded) {
    const Shape& s = ShapeOf(t);
    RESHARD_CHECK(padded % n == 0 && padded >= s.dim[0], "vocab padding");
    const int64_t per = padded / n;
    const int64_t lo = std::min(s.dim[0], r * per), hi = std::min(s.dim[0], (r + 1) * per);
    int32_t b = Buffer(std::move(name), layer, per * s.dim[1]);
    if (hi > lo) Rows(t, lo, hi, b, 0);
  }

  // Stacked experts [E, rows, cols] of experts [e0, e0+ne), rows [r0, r0+nr) of each,
  // into a buffer [ne, rows_per_expert, cols] at row `row` of each expert.
  void Experts(int32_t t, int32_t buffer, int64_t e0, int64_t ne, int64_t r0, int64_t nr, int64_t buf_rows,
               int64_t row) {
    const Shape& s = ShapeOf(t);
    Box box = WholeBox(s);
    box.lo[0] = e0, box.hi[0] = e0 + ne;
    box.lo[1] = r0, box.hi[1] = r0 + nr;
    const Extents st = DenseStrides(MakeShape({ne, buf_rows, s.dim[2]}));
    Add(t, box, buffer, row * st[1], st);
  }

  // Stacked experts [E, rows, cols] of experts [e0, e0+ne), columns [c0, c0+nc): buffer [ne, rows, nc].
  void ExpertCols(int32_t t, std::string name, int32_t layer, int64_t e0, int64_t ne, int64_t c0, int64_t nc) {
    const Shape& s = ShapeOf(t);
    int32_t b = Buffer(std::move(name), layer, ne * s.dim[1] * nc);
    Box box = WholeBox(s);
    box.lo[0] = e0, box.hi[0] = e0 + ne;
    box.lo[2] = c0, box.hi[2] = c0 + nc;
    Add(t, box, b, 0, DenseStrides(MakeShape({ne, s.dim[1], nc})));
  }

  Shard Finish() {
    std::sort(shard_.pieces.begin(), shard_.pieces.end(), [](const Piece& a, const Piece& b) {
      if (a.tensor != b.tensor) return a.tensor < b.tensor;
      if (a.box != b.box) return a.box < b.box;
      return a.buffer < b.buffer;
    });
    return std::move(shard_);
  }

 private:
  const ModelSpec& m_;
  Shard shard_;
};

// Deduplicates rank contents by a coordinate key; shards are numbered by first rank.
template <typename Key>
class ShardTable {
 public:
  template <typename Build>
  void AddRank(const Key& key, Build&& build) {
    auto it = index_.find(key);
    if (it == index_.end()) {
      it = index_.emplace(key, static_cast<int32_t>(layout_.shards.size())).first;
      layout_.shards.push_back(build());
    }
    layout_.rank_shard.push_back(it->second);
  }
  Layout Take(DType dtype) {
    layout_.dtype = dtype;
    return std::move(layout_);
  }

 private:
  std::map<Key, int32_t> index_;
  Layout layout_;
};

void RequirePositiveSize(const std::string& file, const std::string& field, int32_t v) {
  if (v < 1) throw InputError(file, field, "must be at least 1, got " + Str(v));
}

void RequireDivisible(const std::string& file, const std::string& field, int64_t what, const std::string& noun,
                      int64_t by, const std::string& by_name) {
  if (by <= 0 || what % by != 0)
    throw InputError(file, field, Str(what) + " " + noun + " not divisible by " + by_name + "=" + Str(by));
}

bool HasDenseMlp(const ModelIndex& ix) {
  return std::any_of(ix.layers.begin(), ix.layers.end(), [](const LayerIndex& l) { return l.gate >= 0; });
}
bool HasSharedExperts(const ModelIndex& ix) {
  return std::any_of(ix.layers.begin(), ix.layers.end(), [](const LayerIndex& l) { return l.shared_gate >= 0; });
}
bool HasExperts(const ModelIndex& ix) {
  return std::any_of(ix.layers.begin(), ix.layers.end(), [](const LayerIndex& l) { return l.expert_gate >= 0; });
}

// Width of the shared-expert MLP (n_shared_experts * moe_intermediate).
int64_t SharedWidth(const ModelSpec& m, const ModelIndex& ix) {
  for (const LayerIndex& l : ix.layers)
    if (l.shared_gate >= 0) return m.tensors[static_cast<size_t>(l.shared_gate)].shape.dim[0];
  return 0;
}

// Checks shared by both sides: attention heads, MLP widths over `tp`.
void CheckTensorParallel(const ModelSpec& m, const ModelIndex& ix, int32_t tp, const std::string& file,
                         const std::string& field) {
  const ModelConfig& c = m.config;
  RequireDivisible(file, field, c.heads, "attention heads are", tp, "tp");
  if (HasDenseMlp(ix)) RequireDivisible(file, field, c.intermediate, "(intermediate size) is", tp, "tp");
  if (HasSharedExperts(ix))
    RequireDivisible(file, field, SharedWidth(m, ix), "(shared-expert intermediate size) is", tp, "tp");
}

// ---- Megatron-Core source --------------------------------------------------------
//
// Megatron-LM references (megatron/core):
//  * rank order "tp-cp-ep-dp-pp": parallel_state.RankGenerator; the expert mesh is a
//    second decomposition of the same tp*cp*dp ranks of a stage as (etp, ep, edp),
//    innermost first (expert_decoder_rank_generator, order tp-ep-dp-pp with cp=1).
//  * fused QKV: attention.SelfAttention.get_query_key_value_tensors splits
//    linear_qkv's output per query group as [q heads of the group, k, v].
//  * linear_fc1 = [gate ; up] per TP rank (GLU: transformer/mlp.py chunks in two,
//    silu(first) * second; Megatron-Bridge GatedMLPMapping gives rank i
//    [gate_shard_i ; up_shard_i]). vLLM's gate_up_proj uses the same order.
//  * vocab padding: training/tokenizer _vocab_size_with_padding pads to a multiple
//    of make_vocab_size_divisible_by (128) * tp.
//  * tied embeddings with pp > 1: the last stage keeps output_layer.weight as a copy
//    of the embedding (LanguageModule.setup_embeddings_and_output_layer).
//  * VPP: transformer_block.get_transformer_layer_offset gives virtual chunk c
//    (= vp_rank * pp + pp_rank) the c-th run of layers; chunk c lives on stage c % pp.

struct MegatronStage {
  std::vector<std::pair<int32_t, int32_t>> layer_ranges;  // [first, last) per virtual chunk on this stage
  bool embedding = false, output = false;
};

std::string MegatronNormName(const TensorSpec& s) {
  const std::string L = "layers." + Str(s.layer) + ".";
  const std::string_view suf = LayerSuffix(s.name);
  // Transformer Engine fuses input_layernorm into linear_qkv (layer_norm_weight) and
  // the pre-MLP norm into linear_fc1; the bytes are the same, we keep the unfused names.
  if (suf == "input_layernorm.weight") return L + "input_layernorm.weight";
  if (suf == "post_attention_layernorm.weight") return L + "pre_mlp_layernorm.weight";
  if (suf == "self_attn.q_norm.weight" || suf == "self_attn.q_a_layernorm.weight")
    return L + "self_attention.q_layernorm.weight";
  if (suf == "self_attn.k_norm.weight") return L + "self_attention.k_layernorm.weight";
  if (suf == "self_attn.kv_a_layernorm.weight") return L + "self_attention.kv_layernorm.weight";
  return L + std::string(suf);
}

class MegatronBuilder {
 public:
  MegatronBuilder(const ModelSpec& m, const ModelIndex& ix, const SourceParallel& p, int64_t padded_vocab)
      : m_(m), ix_(ix), p_(p), padded_vocab_(padded_vocab) {}

  Shard Build(const MegatronStage& st, int32_t tp_rank, int32_t ep_rank, int32_t etp_rank) const {
    ShardBuilder b(m_);
    const int64_t tp = p_.tp;
    if (st.embedding) b.Vocab(ix_.embedding, "embedding.word_embeddings.weight", -1, tp_rank, tp, padded_vocab_);
    for (const auto& [first, last] : st.layer_ranges)
      for (int32_t l = first; l < last; ++l) Layer(b, l, tp_rank, ep_rank, etp_rank);
    if (st.output) {
      const int32_t L = m_.config.layers;
      for (int32_t t : ix_.final_norms) b.Whole(t, "final_layernorm.weight", L);
      if (ix_.output >= 0) {
        b.Vocab(ix_.output, "output_layer.weight", L, tp_rank, tp, padded_vocab_);
      } else if (!st.embedding) {
        // Tied, and the embedding lives on another stage: this stage holds a copy.
        b.Vocab(ix_.embedding, "output_layer.weight", L, tp_rank, tp, padded_vocab_);
      }
    }
    return b.Finish();
  }

 private:
  void Layer(ShardBuilder& b, int32_t l, int64_t tp_rank, int64_t ep_rank, int64_t etp_rank) const {
    const LayerIndex& li = ix_.layers[static_cast<size_t>(l)];
    const int64_t tp = p_.tp;
    const std::string L = "layers." + Str(l) + ".";
    for (int32_t t : li.norms) b.Whole(t, MegatronNormName(m_.tensors[static_cast<size_t>(t)]), l);

    // Attention.
    if (li.k >= 0) {
      Qkv(b, li.q, li.k, li.v, L + "self_attention.linear_qkv.weight", l, tp_rank);
      if (li.q_bias >= 0) Qkv(b, li.q_bias, li.k_bias, li.v_bias, L + "self_attention.linear_qkv.bias", l, tp_rank);
    } else if (li.q >= 0) {  // MLA without q LoRA
      b.Column(li.q, L + "self_attention.linear_q_proj.weight", l, tp_rank, tp);
    }
    // MLA (multi_latent_attention.py): down projections are duplicated on every TP
    // rank, up projections column-parallel by heads.
    if (li.q_down >= 0) b.Whole(li.q_down, L + "self_attention.linear_q_down_proj.weight", l);
    if (li.q_up >= 0) b.Column(li.q_up, L + "self_attention.linear_q_up_proj.weight", l, tp_rank, tp);
    if (li.kv_down >= 0) b.Whole(li.kv_down, L + "self_attention.linear_kv_down_proj.weight", l);
    if (li.kv_up >= 0) b.Column(li.kv_up, L + "self_attention.linear_kv_up_proj.weight", l, tp_rank, tp);
    if (li.out >= 0) b.Row(li.out, L + "self_attention.linear_proj.weight", l, tp_rank, tp);

    // MLP.
    if (li.gate >= 0) {
      b.FusedColumns(li.gate, li.up, L + "mlp.linear_fc1.weight", l, tp_rank, tp);
      b.Row(li.down, L + "mlp.linear_fc2.weight", l, tp_rank, tp);
    }
    if (li.router >= 0) b.Whole(li.router, L + "mlp.router.weight", l);
    if (li.router_bias >= 0) b.Whole(li.router_bias, L + "mlp.router.expert_bias", l);
    if (li.expert_gate >= 0) {
      // experts/: ep rank k owns experts [k*E/ep, (k+1)*E/ep); each expert's fc1 is
      // [gate ; up] split over etp, fc2 split over etp along its input dim.
      const Shape& g = b.ShapeOf(li.expert_gate);
      const int64_t ne = g.dim[0] / p_.ep, mi = g.dim[1] / p_.etp;
      const int32_t fc1 = b.Buffer(L + "mlp.experts.linear_fc1.weight", l, ne * 2 * mi * g.dim[2]);
      b.Experts(li.expert_gate, fc1, ep_rank * ne, ne, etp_rank * mi, mi, 2 * mi, 0);
      b.Experts(li.expert_up, fc1, ep_rank * ne, ne, etp_rank * mi, mi, 2 * mi, mi);
      b.ExpertCols(li.expert_down, L + "mlp.experts.linear_fc2.weight", l, ep_rank * ne, ne, etp_rank * mi, mi);
    }
    if (li.shared_gate >= 0) {
      b.FusedColumns(li.shared_gate, li.shared_up, L + "mlp.shared_experts.linear_fc1.weight", l, tp_rank, tp);
      b.Row(li.shared_down, L + "mlp.shared_experts.linear_fc2.weight", l, tp_rank, tp);
    }
  }

  // Megatron's fused QKV (weight or bias): for each of this rank's query groups g, the
  // group's q heads, then its k head, then its v head.
  void Qkv(ShardBuilder& b, int32_t q, int32_t k, int32_t v, std::string name, int32_t layer,
           int64_t tp_rank) const {
    const int64_t groups = m_.config.kv_heads, local = groups / p_.tp;
    const int64_t q_rows = b.ShapeOf(q).dim[0] / groups, kv_rows = b.ShapeOf(k).dim[0] / groups;
    const int64_t row_elems = b.ShapeOf(q).Elements() / b.ShapeOf(q).dim[0];
    const int64_t group_rows = q_rows + 2 * kv_rows;
    const int32_t buf = b.Buffer(std::move(name), layer, local * group_rows * row_elems);
    for (int64_t g = 0; g < local; ++g) {
      const int64_t G = tp_rank * local + g;
      b.Rows(q, G * q_rows, (G + 1) * q_rows, buf, g * group_rows);
      b.Rows(k, G * kv_rows, (G + 1) * kv_rows, buf, g * group_rows + q_rows);
      b.Rows(v, G * kv_rows, (G + 1) * kv_rows, buf, g * group_rows + q_rows + kv_rows);
    }
  }

  const ModelSpec& m_;
  const ModelIndex& ix_;
  const SourceParallel& p_;
  int64_t padded_vocab_;
};

// ---- vLLM destination ------------------------------------------------------------
//
// vLLM references (vllm/model_executor):
//  * QKVParallelLinear (layers/linear.py): per TP rank [q heads ; k heads ; v heads];
//    when tp > total kv heads, num_kv_head_replicas = tp / kv_heads and rank r loads
//    kv head r / num_kv_head_replicas.
//  * MergedColumnParallelLinear gate_up_proj: [gate part ; up part] per rank.
//  * VocabParallelEmbedding / ParallelLMHead: vocab padded to a multiple of 64
//    (DEFAULT_VOCAB_PADDING_SIZE), then divide(padded, tp) rows per rank.
//  * FusedMoE (layers/fused_moe/config.py FusedMoEParallelConfig.make): without EP the
//    experts are TP-sharded over the flattened tp*dp group (rank dp_rank*tp + tp_rank):
//    w13 [E, 2*I/(tp*dp), H] (w1 = gate rows, then w3 = up rows), w2 [E, H, I/(tp*dp)];
//    with EP, ep_size = tp*dp, ep_rank = dp_rank*tp + tp_rank, each rank holds whole
//    experts of its contiguous range (linear placement).
//  * DeepseekV2 MLA: fused_qkv_a_proj = [q_a_proj ; kv_a_proj_with_mqa], disable_tp
//    (replicated); q_b_proj, kv_b_proj column-parallel; o_proj row-parallel.
//  * Tied embeddings with pp > 1: the last rank builds embed_tokens too and ties
//    lm_head to it (LlamaModel / LlamaForCausalLM).

class VllmBuilder {
 public:
  VllmBuilder(const ModelSpec& m, const ModelIndex& ix, const DestinationParallel& p, int64_t padded_vocab)
      : m_(m), ix_(ix), p_(p), padded_vocab_(padded_vocab) {}

  Shard Build(int32_t first, int32_t last, bool is_first, bool is_last, int32_t tp_rank, int32_t dp_rank) const {
    ShardBuilder b(m_);
    const int64_t tp = p_.tp;
    const bool tied = ix_.output < 0;
    if (is_first || (tied && is_last))
      b.Vocab(ix_.embedding, m_.tensors[static_cast<size_t>(ix_.embedding)].name, -1, tp_rank, tp, padded_vocab_);
    for (int32_t l = first; l < last; ++l) Layer(b, l, tp_rank, dp_rank);
    if (is_last) {
      const int32_t L = m_.config.layers;
      for (int32_t t : ix_.final_norms) b.Whole(t, m_.tensors[static_cast<size_t>(t)].name, L);
      if (!tied) b.Vocab(ix_.output, m_.tensors[static_cast<size_t>(ix_.output)].name, L, tp_rank, tp, padded_vocab_);
    }
    return b.Finish();
  }

 private:
  const std::string& Name(int32_t t) const { return m_.tensors[static_cast<size_t>(t)].name; }

  void Layer(ShardBuilder& b, int32_t l, int64_t tp_rank, int64_t dp_rank) const {
    const LayerIndex& li = ix_.layers[static_cast<size_t>(l)];
    const int64_t tp = p_.tp;
    for (int32_t t : li.norms) b.Whole(t, Name(t), l);

    if (li.k >= 0) {
      Qkv(b, li.q, li.k, li.v, ModulePrefix(Name(li.q)) + "qkv_proj.weight", l, tp_rank);
      if (li.q_bias >= 0) Qkv(b, li.q_bias, li.k_bias, li.v_bias, ModulePrefix(Name(li.q_bias)) + "qkv_proj.bias", l, tp_rank);
    } else if (li.q >= 0) {  // MLA without q LoRA
      b.Column(li.q, Name(li.q), l, tp_rank, tp);
    }
    if (li.q_down >= 0 && li.kv_down >= 0) {
      b.FusedColumns(li.q_down, li.kv_down, ModulePrefix(Name(li.q_down)) + "fused_qkv_a_proj.weight", l, 0, 1);
    } else if (li.kv_down >= 0) {
      b.Whole(li.kv_down, Name(li.kv_down), l);
    }
    if (li.q_up >= 0) b.Column(li.q_up, Name(li.q_up), l, tp_rank, tp);
    if (li.kv_up >= 0) b.Column(li.kv_up, Name(li.kv_up), l, tp_rank, tp);
    if (li.out >= 0) b.Row(li.out, Name(li.out), l, tp_rank, tp);

    if (li.gate >= 0) {
      b.FusedColumns(li.gate, li.up, ModulePrefix(Name(li.gate)) + "gate_up_proj.weight", l, tp_rank, tp);
      b.Row(li.down, Name(li.down), l, tp_rank, tp);
    }
    if (li.router >= 0) b.Whole(li.router, Name(li.router), l);
    if (li.router_bias >= 0) b.Whole(li.router_bias, Name(li.router_bias), l);
    if (li.expert_gate >= 0) {
      const std::string prefix = ModulePrefix(Name(li.expert_gate));
      const Shape& g = b.ShapeOf(li.expert_gate);
      const int64_t flat = dp_rank * tp + tp_rank;  // rank in the flattened tp*dp group
      if (p_.ep > 1) {
        const int64_t ne = g.dim[0] / p_.ep, mi = g.dim[1];
        const int32_t w13 = b.Buffer(prefix + "w13_weight", l, ne * 2 * mi * g.dim[2]);
        b.Experts(li.expert_gate, w13, flat * ne, ne, 0, mi, 2 * mi, 0);
        b.Experts(li.expert_up, w13, flat * ne, ne, 0, mi, 2 * mi, mi);
        b.ExpertCols(li.expert_down, prefix + "w2_weight", l, flat * ne, ne, 0, mi);
      } else {
        const int64_t n = tp * p_.dp, ne = g.dim[0], mi = g.dim[1] / n;
        const int32_t w13 = b.Buffer(prefix + "w13_weight", l, ne * 2 * mi * g.dim[2]);
        b.Experts(li.expert_gate, w13, 0, ne, flat * mi, mi, 2 * mi, 0);
        b.Experts(li.expert_up, w13, 0, ne, flat * mi, mi, 2 * mi, mi);
        b.ExpertCols(li.expert_down, prefix + "w2_weight", l, 0, ne, flat * mi, mi);
      }
    }
    if (li.shared_gate >= 0) {
      b.FusedColumns(li.shared_gate, li.shared_up, ModulePrefix(Name(li.shared_gate)) + "gate_up_proj.weight", l,
                     tp_rank, tp);
      b.Row(li.shared_down, Name(li.shared_down), l, tp_rank, tp);
    }
  }

  // vLLM's fused QKV (weight or bias): [this rank's q heads ; its k heads ; its v heads].
  void Qkv(ShardBuilder& b, int32_t q, int32_t k, int32_t v, std::string name, int32_t layer,
           int64_t tp_rank) const {
    const int64_t tp = p_.tp, kv = m_.config.kv_heads;
    const int64_t q_rows = b.ShapeOf(q).dim[0] / tp;
    const int64_t head_rows = b.ShapeOf(k).dim[0] / kv;
    const int64_t row_elems = b.ShapeOf(q).Elements() / b.ShapeOf(q).dim[0];
    // tp <= kv: kv/tp heads from kv_rank*kv/tp; tp > kv: one head, shared by tp/kv ranks.
    const int64_t local_heads = tp <= kv ? kv / tp : 1;
    const int64_t first_head = tp <= kv ? tp_rank * local_heads : tp_rank / (tp / kv);
    const int64_t kv_rows = local_heads * head_rows, kv_lo = first_head * head_rows;
    const int32_t buf = b.Buffer(std::move(name), layer, (q_rows + 2 * kv_rows) * row_elems);
    b.Rows(q, tp_rank * q_rows, (tp_rank + 1) * q_rows, buf, 0);
    b.Rows(k, kv_lo, kv_lo + kv_rows, buf, q_rows);
    b.Rows(v, kv_lo, kv_lo + kv_rows, buf, q_rows + kv_rows);
  }

  const ModelSpec& m_;
  const ModelIndex& ix_;
  const DestinationParallel& p_;
  int64_t padded_vocab_;
};

}  // namespace

std::vector<int32_t> StageLayers(int32_t layers, int32_t stages, const std::vector<int32_t>& explicit_layers,
                                 const std::string& file, const std::string& field) {
  CheckStages(stages, file, field);
  if (!explicit_layers.empty()) {
    CheckExplicitLayers(layers, stages, explicit_layers, file, field);
    return explicit_layers;
  }
  std::vector<int32_t> out(static_cast<size_t>(stages), layers / stages);
  if (layers % stages == 0 || stages == 1) return out;
  // Middle stages take ceil(layers/stages); the first and last share what is left
  // (the first the larger half): the stages holding the embedding and the output
  // layer get fewer decoder layers, as Megatron's decoder_first/last_pipeline_num_layers
  // are used for (e.g. DeepSeek-V3 61 layers over 16 stages: 3, 4 x 14, 2).
  const int32_t ceil = (layers + stages - 1) / stages;
  const int64_t rest = static_cast<int64_t>(layers) - static_cast<int64_t>(stages - 2) * ceil;
  if (rest < 0)
    throw InputError(file, field,
                     Str(layers) + " layers do not split over " + Str(stages) + " pipeline stages: the " +
                         Str(stages - 2) + " middle stages take ceil(" + Str(layers) + "/" + Str(stages) + ")=" +
                         Str(ceil) + " each, which is more than there are; give the layers per stage explicitly");
  for (int32_t s = 1; s + 1 < stages; ++s) out[static_cast<size_t>(s)] = ceil;
  out.front() = static_cast<int32_t>(rest - rest / 2);
  out.back() = static_cast<int32_t>(rest / 2);
  return out;
}

std::vector<int32_t> VllmStageLayers(int32_t layers, int32_t stages, const std::vector<int32_t>& explicit_layers,
                                     const std::string& file, const std::string& field) {
  CheckStages(stages, file, field);
  if (!explicit_layers.empty()) {
    CheckExplicitLayers(layers, stages, explicit_layers, file, field);
    return explicit_layers;
  }
  // vllm/distributed/utils.py get_pp_indices: floor(layers/stages) each, and the
  // remainder one by one to the stages before the last, from the second-to-last back.
  std::vector<int32_t> out(static_cast<size_t>(stages), layers / stages);
  const int32_t rem = layers % stages;
  for (int32_t i = 2; i < rem + 2; ++i) out[static_cast<size_t>(stages - i)] += 1;
  return out;
}

Layout MakeSourceLayout(const ModelSpec& m, const SourceParallel& p, DType dtype, const std::string& file) {
  for (auto [field, v] : {std::pair{"source.tp", p.tp}, {"source.pp", p.pp}, {"source.vpp", p.vpp}, {"source.ep", p.ep},
                          {"source.etp", p.etp}, {"source.dp", p.dp}, {"source.cp", p.cp}})
    RequirePositiveSize(file, field, v);
  const ModelConfig& c = m.config;
  const ModelIndex ix = IndexModel(m);

  CheckTensorParallel(m, ix, p.tp, file, "source.tp");
  if (!c.IsMla())  // parallel_state / TransformerConfig: num_query_groups % tp == 0
    RequireDivisible(file, "source.tp", c.kv_heads, "KV heads (query groups) are", p.tp, "tp");
  if (HasExperts(ix)) {
    RequireDivisible(file, "source.ep", c.experts, "experts are", p.ep, "ep");
    RequireDivisible(file, "source.etp", c.moe_intermediate, "(MoE intermediate size) is", p.etp, "etp");
    const int64_t mesh = static_cast<int64_t>(p.tp) * p.cp * p.dp;
    if (mesh % (static_cast<int64_t>(p.ep) * p.etp) != 0)
      throw InputError(file, "source.ep",
                       "ep*etp=" + Str(static_cast<int64_t>(p.ep) * p.etp) + " does not divide tp*cp*dp=" + Str(mesh) +
                           " (the expert mesh etp x ep x edp spans the tp*cp*dp ranks of a pipeline stage)");
  } else {
    if (p.ep > 1) throw InputError(file, "source.ep", "ep=" + Str(p.ep) + " needs a MoE model; " + c.name + " has no experts");
    if (p.etp > 1)
      throw InputError(file, "source.etp", "etp=" + Str(p.etp) + " needs a MoE model; " + c.name + " has no experts");
  }
  if (p.vpp > 1 && p.pp < 2)
    throw InputError(file, "source.vpp", "virtual pipeline stages (vpp=" + Str(p.vpp) + ") need pp > 1");

  // Chunks: pp*vpp runs of layers; chunk k on stage k % pp.
  const int32_t chunks = p.pp * p.vpp;
  std::string split_field = p.pp_layers.empty() ? (p.vpp > 1 ? "source.vpp" : "source.pp") : "source.pp_layers";
  const std::vector<int32_t> sizes = StageLayers(c.layers, chunks, p.pp_layers, file, split_field);
  std::vector<MegatronStage> stages(static_cast<size_t>(p.pp));
  int32_t first = 0;
  for (int32_t k = 0; k < chunks; ++k) {
    stages[static_cast<size_t>(k % p.pp)].layer_ranges.emplace_back(first, first + sizes[static_cast<size_t>(k)]);
    first += sizes[static_cast<size_t>(k)];
  }
  stages.front().embedding = true;
  stages[static_cast<size_t>((chunks - 1) % p.pp)].output = true;

  const int64_t padded_vocab = RoundUp(c.vocab, int64_t{128} * p.tp);
  const MegatronBuilder builder(m, ix, p, padded_vocab);
  const bool moe = HasExperts(ix);
  const int32_t tcd = p.tp * p.cp * p.dp;
  ShardTable<std::array<int32_t, 4>> table;
  for (int32_t rank = 0; rank < p.Ranks(); ++rank) {
    const int32_t tp_rank = rank % p.tp, pp_rank = rank / tcd;
    const int32_t i = rank % tcd;
    const int32_t etp_rank = moe ? i % p.etp : 0, ep_rank = moe ? (i / p.etp) % p.ep : 0;
    table.AddRank({pp_rank, tp_rank, ep_rank, etp_rank}, [&] {
      return builder.Build(stages[static_cast<size_t>(pp_rank)], tp_rank, ep_rank, etp_rank);
    });
  }
  return table.Take(dtype);
}

Layout MakeDestinationLayout(const ModelSpec& m, const DestinationParallel& p, DType dtype,
                             const std::string& file) {
  for (auto [field, v] :
       {std::pair{"destination.tp", p.tp}, {"destination.pp", p.pp}, {"destination.ep", p.ep}, {"destination.dp", p.dp}})
    RequirePositiveSize(file, field, v);
  const ModelConfig& c = m.config;
  const ModelIndex ix = IndexModel(m);

  CheckTensorParallel(m, ix, p.tp, file, "destination.tp");
  if (!c.IsMla()) {
    if (p.tp > c.kv_heads && p.tp % c.kv_heads != 0)
      throw InputError(file, "destination.tp",
                       "tp=" + Str(p.tp) + " exceeds the " + Str(c.kv_heads) +
                           " KV heads but is not a multiple of them (vLLM replicates each KV head over tp/kv_heads ranks)");
    if (p.tp <= c.kv_heads) RequireDivisible(file, "destination.tp", c.kv_heads, "KV heads are", p.tp, "tp");
  }
  const int64_t padded_vocab = RoundUp(c.vocab, 64);
  if (padded_vocab % p.tp != 0)
    throw InputError(file, "destination.tp",
                     "the vocabulary padded to a multiple of 64 (" + Str(padded_vocab) + ") is not divisible by tp=" +
                         Str(p.tp));
  const bool moe = HasExperts(ix);
  const int64_t tp_dp = static_cast<int64_t>(p.tp) * p.dp;
  if (moe) {
    if (p.ep > 1) {
      if (p.ep != tp_dp)
        throw InputError(file, "destination.ep",
                         "ep=" + Str(p.ep) + " must equal tp*dp=" + Str(tp_dp) +
                             " (vLLM's expert parallelism spans the TP x DP ranks of a stage)");
      RequireDivisible(file, "destination.ep", c.experts, "experts are", p.ep, "ep");
    } else if (c.moe_intermediate % tp_dp != 0) {
      throw InputError(file, "destination.tp",
                       Str(c.moe_intermediate) + " (MoE intermediate size) is not divisible by tp*dp=" + Str(tp_dp) +
                           " (without EP vLLM shards every expert over the flattened TP x DP group)");
    }
  } else if (p.ep > 1) {
    throw InputError(file, "destination.ep", "ep=" + Str(p.ep) + " needs a MoE model; " + c.name + " has no experts");
  }
  const std::vector<int32_t> sizes =
      VllmStageLayers(c.layers, p.pp, p.pp_layers, file, p.pp_layers.empty() ? "destination.pp" : "destination.pp_layers");
  std::vector<int32_t> starts(static_cast<size_t>(p.pp) + 1, 0);
  for (int32_t s = 0; s < p.pp; ++s) starts[static_cast<size_t>(s) + 1] = starts[static_cast<size_t>(s)] + sizes[static_cast<size_t>(s)];

  const VllmBuilder builder(m, ix, p, padded_vocab);
  ShardTable<std::array<int32_t, 3>> table;
  for (int32_t rank = 0; rank < p.Ranks(); ++rank) {
    const int32_t tp_rank = rank % p.tp, pp_rank = (rank / p.tp) % p.pp, dp_rank = rank / (p.tp * p.pp);
    // Attention and dense weights do not depend on the DP rank; MoE experts do (they
    // are spread over the flattened tp*dp group, with or without EP).
    const int32_t key_dp = moe ? dp_rank : 0;
    table.AddRank({pp_rank, tp_rank, key_dp}, [&] {
      const size_t s = static_cast<size_t>(pp_rank);
      return builder.Build(starts[s], starts[s + 1], pp_rank == 0, pp_rank == p.pp - 1, tp_rank, key_dp);
    });
  }
  return table.Take(dtype);
}

}  // namespace reshard
