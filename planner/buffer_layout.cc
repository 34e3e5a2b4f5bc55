#include "planner/buffer_layout.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

namespace reshard {

SideBuffers LayoutBuffers(const Layout& l) {
  SideBuffers sb;
  const size_t n = l.shards.size();
  sb.slot_of.resize(n), sb.base_of.resize(n), sb.slot_layer.resize(n), sb.slot_elems.resize(n);
  for (size_t s = 0; s < n; ++s) {
    const auto& bufs = l.shards[s].buffers;
    auto& layers = sb.slot_layer[s];
    for (const auto& b : bufs) layers.push_back(b.layer);
    std::sort(layers.begin(), layers.end());
    layers.erase(std::unique(layers.begin(), layers.end()), layers.end());
    sb.slot_elems[s].assign(layers.size(), 0);
    for (const auto& b : bufs) {
      const int32_t slot = static_cast<int32_t>(std::lower_bound(layers.begin(), layers.end(), b.layer) - layers.begin());
      sb.slot_of[s].push_back(slot);
      sb.base_of[s].push_back(sb.slot_elems[s][slot]);
      sb.slot_elems[s][slot] += b.elems;
    }
  }
  return sb;
}

std::optional<Region> BoxRegion(int32_t buffer, int64_t off, const Extents& stride, const Box& pbox, const Box& b,
                                int64_t eb) {
  struct Level {
    int64_t ext, st;
  };
  Level lv[kMaxDims];
  int n = 0;
  for (int d = 0; d < b.ndim; ++d) {
    off += (b.lo[d] - pbox.lo[d]) * stride[d];
    const int64_t ext = b.hi[d] - b.lo[d];
    if (ext > 1) lv[n++] = {ext, stride[d]};
  }
  // Coalesce from the inside: an outer level whose stride is the inner span merges.
  for (int i = n - 1; i > 0; --i) {
    if (lv[i - 1].st == lv[i].ext * lv[i].st) {
      lv[i - 1] = {lv[i - 1].ext * lv[i].ext, lv[i].st};
      for (int j = i; j + 1 < n; ++j) lv[j] = lv[j + 1];
      --n;
    }
  }
  Region r;
  r.buffer = buffer;
  r.offset_bytes = off * eb;
  r.row_bytes = eb;
  if (n > 0 && lv[n - 1].st == 1) {
    r.row_bytes = lv[n - 1].ext * eb;
    --n;
  }
  if (n > 2) return std::nullopt;
  if (n >= 1) r.rows = lv[n - 1].ext, r.row_stride_bytes = lv[n - 1].st * eb;
  if (n == 2) r.planes = lv[0].ext, r.plane_stride_bytes = lv[0].st * eb;
  if (r.rows == 1) r.row_stride_bytes = r.row_bytes;
  if (r.planes == 1) r.plane_stride_bytes = r.row_bytes * r.rows;
  return r;
}

int OutermostSplitDim(const Box& b) {
  for (int d = 0; d < b.ndim; ++d)
    if (b.hi[d] - b.lo[d] > 1) return d;
  return -1;
}

void ShareCopiesWithTransfers(Plan& p) {
  std::vector<bool> transfers(static_cast<size_t>(std::max(p.Gpus(), 0)), false);
  for (const Op& op : p.ops)
    if ((op.kind == OpKind::kSend || op.kind == OpKind::kRecv) && op.peer != op.gpu && op.gpu >= 0 &&
        op.gpu < p.Gpus())
      transfers[op.gpu] = true;
  for (Op& op : p.ops)
    if (op.kind == OpKind::kCopy) op.sm_share = op.gpu >= 0 && op.gpu < p.Gpus() && transfers[op.gpu] ? kCopyShareBesideTransfers : 1.0;
}

void StartPlan(Plan& p, const Scenario& s, std::vector<std::string> stream_names) {
  p.name = s.name;
  p.cluster = s.cluster;
  p.cluster_fingerprint = s.cluster.Fingerprint();
  p.stream_names = std::move(stream_names);
  for (const auto& t : s.model.tensors) p.tensors.push_back(PlanTensor{t.name, t.shape, s.dtype, {}});
}

int32_t AddPlanBuffer(Plan& p, int32_t gpu, MemorySpace space, BufferRole role, int64_t bytes, int32_t layer,
                      bool preexisting, std::string name) {
  PlanBuffer pb;
  pb.gpu = gpu, pb.space = space, pb.role = role, pb.bytes = bytes, pb.layer = layer, pb.preexisting = preexisting;
  pb.name = std::move(name);
  return AppendBuffer(p, std::move(pb));
}

int32_t OptimizerStates(double bytes_per_param) {
  return std::max(1, static_cast<int32_t>(std::ceil(bytes_per_param / 4 - 1e-9)));
}

int64_t OptimizerStateBytes(int64_t slot_bytes, int32_t states, int32_t j) {
  return j + 1 == states ? slot_bytes - (states - 1) * (slot_bytes / states) : slot_bytes / states;
}

std::vector<int64_t> OptimizerBufferBytes(int64_t optimizer_bytes, const std::vector<int64_t>& slot_elems,
                                          int32_t states) {
  const int64_t total = std::accumulate(slot_elems.begin(), slot_elems.end(), int64_t{0});
  std::vector<int64_t> out;
  out.reserve(slot_elems.size() * static_cast<size_t>(states));
  int64_t given = 0;
  for (size_t k = 0; k < slot_elems.size(); ++k) {
    const int64_t bytes = k + 1 == slot_elems.size()
                              ? optimizer_bytes - given
                              : static_cast<int64_t>(static_cast<long double>(optimizer_bytes) * slot_elems[k] /
                                                     std::max<int64_t>(1, total));
    given += bytes;
    for (int32_t j = 0; j < states; ++j) out.push_back(OptimizerStateBytes(bytes, states, j));
  }
  return out;
}

std::string LayerName(int32_t layer) { return layer < 0 ? "emb" : Label("L", layer); }

RefitBuffers AddRefitBuffers(Plan& p, const Scenario& s, const Layout& src, const Layout& dst,
                             const SideBuffers& src_buffers, const SideBuffers& dst_buffers,
                             const std::vector<int32_t>& dst_gpu, const std::vector<GpuMemoryAtStart>& mem,
                             int32_t optimizer_states, bool content) {
  const int64_t eb = DTypeBytes(s.dtype);
  const int32_t gpus = s.cluster.Gpus();
  RefitBuffers out;
  out.src_first.resize(src.Ranks());
  out.opt_first.resize(src.Ranks());
  out.opt_slots.assign(src.Ranks(), 0);
  std::vector<bool> gpu_state_done(gpus, false);  // optimizer and gradients, once per GPU
  for (int32_t r = 0; r < src.Ranks(); ++r) {
    const int32_t g = s.source_gpus[r], shard = src.rank_shard[r];
    const auto& layers = src_buffers.slot_layer[shard];
    const auto& elems = src_buffers.slot_elems[shard];
    out.src_first[r] = static_cast<int32_t>(p.buffers.size());
    for (size_t k = 0; k < layers.size(); ++k)
      AddPlanBuffer(p, g, MemorySpace::kDevice, BufferRole::kSourceWeights, elems[k] * eb, layers[k], true,
                    Label("src r", r, " ", LayerName(layers[k])));
    out.opt_first[r] = static_cast<int32_t>(p.buffers.size());
    const int64_t opt = gpu_state_done[g] ? 0 : mem[g].optimizer;
    if (opt > 0) {
      const int32_t states = std::max(1, optimizer_states);
      const std::vector<int64_t> bytes = OptimizerBufferBytes(opt, elems, states);
      for (size_t i = 0; i < bytes.size(); ++i) {
        const int32_t layer = layers[i / static_cast<size_t>(states)];
        AddPlanBuffer(p, g, MemorySpace::kDevice, BufferRole::kOptimizer, bytes[i], layer, true,
                      states == 1 ? Label("opt r", r, " ", LayerName(layer))
                                  : Label("opt r", r, " ", LayerName(layer), " s", i % static_cast<size_t>(states)));
      }
      out.opt_slots[r] = static_cast<int32_t>(bytes.size());
    }
    if (!gpu_state_done[g] && mem[g].gradients > 0)
      AddPlanBuffer(p, g, MemorySpace::kDevice, BufferRole::kGradients, mem[g].gradients, -1, true,
                    Label("grad r", r));
    gpu_state_done[g] = true;
  }
  std::vector<bool> kv_done(gpus, false);
  out.dst_first.resize(dst.Ranks());
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    const int32_t g = dst_gpu[r], shard = dst.rank_shard[r];
    if (!kv_done[g] && mem[g].kv_cache > 0)
      AddPlanBuffer(p, g, MemorySpace::kDevice, BufferRole::kKvCache, mem[g].kv_cache, -1, true,
                    Label("kv gpu", g));
    kv_done[g] = true;
    const auto& layers = dst_buffers.slot_layer[shard];
    out.dst_first[r] = static_cast<int32_t>(p.buffers.size());
    for (size_t k = 0; k < layers.size(); ++k)
      AddPlanBuffer(p, g, MemorySpace::kDevice, BufferRole::kDestinationWeights, dst_buffers.slot_elems[shard][k] * eb,
                    layers[k], false, Label("dst r", r, " ", LayerName(layers[k])));
  }
  if (!content) return out;
  // Content: what source buffers hold and destination buffers must hold.
  size_t ns = 0, nd = 0;
  for (int32_t r = 0; r < src.Ranks(); ++r) ns += src.ShardOf(r).pieces.size();
  for (int32_t r = 0; r < dst.Ranks(); ++r) nd += dst.ShardOf(r).pieces.size();
  p.sources.reserve(p.sources.size() + ns);
  p.destinations.reserve(p.destinations.size() + nd);
  for (int32_t r = 0; r < src.Ranks(); ++r) {
    const int32_t shard = src.rank_shard[r];
    for (const Piece& pc : src.shards[shard].pieces)
      p.sources.push_back(ContentPiece{out.src_first[r] + src_buffers.SlotOf(shard, pc), pc.tensor, pc.box,
                                       src_buffers.OffsetIn(shard, pc), pc.stride});
  }
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    const int32_t shard = dst.rank_shard[r];
    for (const Piece& pc : dst.shards[shard].pieces)
      p.destinations.push_back(ContentPiece{out.dst_first[r] + dst_buffers.SlotOf(shard, pc), pc.tensor, pc.box,
                                            dst_buffers.OffsetIn(shard, pc), pc.stride});
  }
  return out;
}

int32_t AppendMemoryOp(Plan& p, OpKind kind, int32_t buffer, int32_t stream, std::vector<int32_t> deps) {
  const PlanBuffer& b = p.buffers[buffer];
  Op op;
  op.kind = kind, op.gpu = b.gpu, op.stream = stream, op.buffer = buffer, op.deps = std::move(deps);
  op.label = Label(kind == OpKind::kAlloc ? "alloc " : "free ", b.name);
  return AppendOp(p, std::move(op));
}

int32_t AppendMoveToHost(Plan& p, int32_t buffer, int32_t stream, std::vector<int32_t> deps) {
  const PlanBuffer pb = p.buffers[buffer];  // a copy: adding a buffer may move p.buffers
  const int32_t host =
      AddPlanBuffer(p, pb.gpu, MemorySpace::kHost, BufferRole::kHost, pb.bytes, pb.layer, false, "host " + pb.name);
  const int32_t alloc = AppendMemoryOp(p, OpKind::kAlloc, host, stream, {});
  Op o;
  o.kind = OpKind::kOffload, o.gpu = pb.gpu, o.stream = stream, o.deps = std::move(deps);
  o.deps.push_back(alloc);
  o.copies.push_back(CopyPair{ContiguousRegion(buffer, 0, pb.bytes), ContiguousRegion(host, 0, pb.bytes)});
  o.label = "offload " + pb.name;
  return AppendOp(p, std::move(o));
}

}  // namespace reshard
