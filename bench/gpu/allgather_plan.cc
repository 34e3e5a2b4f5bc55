// Host plan of the PyTorch-style refit baseline (see allgather_plan.h).
//
// Idea: lay every GPU's source buffers out in one arena (moved buffers first, so a
// flat exchange is one contiguous message), then walk the buffers in Megatron's
// order and cut the moved ones into buckets. For each bucket, every destination
// piece on a GPU is intersected with every source piece in the bucket (box
// algebra, model/box.h); each non-empty intersection becomes one strided byte
// copy out of the gathered bucket into the destination buffer, with its
// dimensions coalesced so that contiguous runs become single rows. A coverage
// count per destination piece proves every element is written exactly once.
// Memory: per GPU, the state at refit start from MemoryAtStart, then each
// offload fraction the scenario allows (model/offload.h) until the planned
// peak fits in capacity less reserve.
#include "bench/gpu/allgather_plan.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <utility>

#include "bench/gpu/allgather_copy.h"
#include "model/error.h"
#include "model/layout.h"
#include "model/offload.h"

namespace reshard::baseline {

namespace {

constexpr int64_t kAlign = 256;  // every buffer and slot starts 256-B aligned (vector copies, NCCL)

int64_t AlignUp(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

bool SamePiece(const Piece& a, const Piece& b) {
  return a.tensor == b.tensor && a.box == b.box && a.offset == b.offset && a.stride == b.stride;
}

// Pieces of a shard grouped by buffer, in the shard's (tensor, box) order.
std::vector<std::vector<int32_t>> PiecesByBuffer(const Shard& sh) {
  std::vector<std::vector<int32_t>> out(sh.buffers.size());
  for (int32_t i = 0; i < static_cast<int32_t>(sh.pieces.size()); ++i)
    out[static_cast<size_t>(sh.pieces[static_cast<size_t>(i)].buffer)].push_back(i);
  return out;
}

struct Location {
  Arena arena;
  int64_t offset;  // bytes
};

// Strided byte copy of the elements of `box` (inside both pieces) from a source
// piece whose buffer starts at `src` to a destination piece whose buffer starts
// at `dst_offset` of the destination arena. Dimensions of extent 1 are dropped
// and adjacent dimensions contiguous on both sides merged, so at most three remain.
ByteCopy MakeCopy(const Box& box, const Piece& s, Location src, const Piece& d, int64_t dst_offset, int64_t eb) {
  struct Dim {
    int64_t e, ss, ds;
  };
  std::vector<Dim> dims;  // outer to inner
  int64_t so = s.offset, dof = d.offset;
  for (int k = 0; k < box.ndim; ++k) {
    so += (box.lo[k] - s.box.lo[k]) * s.stride[k];
    dof += (box.lo[k] - d.box.lo[k]) * d.stride[k];
    const int64_t e = box.hi[k] - box.lo[k];
    if (e > 1) dims.push_back({e, s.stride[k], d.stride[k]});
  }
  if (dims.empty() || dims.back().ss != 1 || dims.back().ds != 1) dims.push_back({1, 1, 1});
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i) {
    const Dim& in = dims[static_cast<size_t>(i) + 1];
    const Dim& out = dims[static_cast<size_t>(i)];
    if (out.ss == in.e * in.ss && out.ds == in.e * in.ds) {
      dims[static_cast<size_t>(i) + 1].e *= out.e;
      dims.erase(dims.begin() + i);
    }
  }
  RESHARD_CHECK(dims.size() <= 3, "copy of " + ToString(box) + " needs more than three dimensions");
  while (dims.size() < 3) dims.insert(dims.begin(), Dim{1, 0, 0});
  ByteCopy c;
  c.src_arena = src.arena;
  c.dst_arena = Arena::kDestination;
  c.src_offset = src.offset + so * eb;
  c.dst_offset = dst_offset + dof * eb;
  c.n0 = dims[0].e;
  c.n1 = dims[1].e;
  c.row_bytes = dims[2].e * eb;
  c.src_stride0 = dims[0].ss * eb;
  c.src_stride1 = dims[1].ss * eb;
  c.dst_stride0 = dims[0].ds * eb;
  c.dst_stride1 = dims[1].ds * eb;
  return c;
}

ByteCopy WholeCopy(Arena src, int64_t src_offset, Arena dst, int64_t dst_offset, int64_t bytes) {
  ByteCopy c;
  c.src_arena = src;
  c.dst_arena = dst;
  c.src_offset = src_offset;
  c.dst_offset = dst_offset;
  c.row_bytes = bytes;
  return c;
}

int64_t LastByte(const ByteCopy& c, bool src) {
  const int64_t off = src ? c.src_offset : c.dst_offset;
  const int64_t s0 = src ? c.src_stride0 : c.dst_stride0, s1 = src ? c.src_stride1 : c.dst_stride1;
  return off + (c.n0 - 1) * s0 + (c.n1 - 1) * s1 + c.row_bytes;
}

void CheckCopyBounds(const RefitPlan& p, int32_t g, const ByteCopy& c) {
  RESHARD_CHECK(c.n0 >= 1 && c.n1 >= 1 && c.row_bytes > 0 && c.src_offset >= 0 && c.dst_offset >= 0 &&
                    c.src_stride0 >= 0 && c.src_stride1 >= 0 && c.dst_stride0 >= 0 && c.dst_stride1 >= 0,
                "malformed copy");
  RESHARD_CHECK(LastByte(c, true) <= p.ArenaBytes(g, c.src_arena),
                "copy reads past the " + std::string(ArenaName(c.src_arena)) + " arena of GPU " + std::to_string(g));
  RESHARD_CHECK(LastByte(c, false) <= p.ArenaBytes(g, c.dst_arena),
                "copy writes past the " + std::string(ArenaName(c.dst_arena)) + " arena of GPU " + std::to_string(g));
}

void CheckBounds(const RefitPlan& p) {
  for (const Step& st : p.steps) {
    for (int32_t g = 0; g < p.gpus; ++g) {
      for (const ByteCopy& c : st.pack[static_cast<size_t>(g)]) CheckCopyBounds(p, g, c);
      for (const ByteCopy& c : st.unpack[static_cast<size_t>(g)]) CheckCopyBounds(p, g, c);
    }
    if (st.kind == StepKind::kAllGather || st.kind == StepKind::kBroadcast) {
      for (int32_t g = 0; g < p.gpus; ++g) {
        RESHARD_CHECK(st.GatheredBytes(p.gpus) <= p.ArenaBytes(g, Arena::kBucket), "bucket arena too small");
        if (st.kind == StepKind::kBroadcast && g != st.root) continue;
        RESHARD_CHECK(st.send_offset[static_cast<size_t>(g)] + st.send_bytes <= p.ArenaBytes(g, st.send_arena),
                      "collective sends past its arena");
      }
    }
    for (const FlatSend& f : st.sends) {
      RESHARD_CHECK(f.src_offset + f.bytes <= p.ArenaBytes(f.from, Arena::kSource), "flat send past the source arena");
      RESHARD_CHECK(f.dst_offset + f.bytes <= p.ArenaBytes(f.to, Arena::kStaging), "flat receive past the staging arena");
    }
  }
}

static_assert(kArenas == kCopyArenas, "the copy kernel addresses every arena");

// NCCL peers GPU g connects to: every peer of a flat exchange; the ring
// neighbours of a collective (one with two GPUs, two from three on).
int32_t NcclPeers(const RefitPlan& p, int32_t g) {
  std::set<int32_t> peers;
  bool collective = false;
  for (const Step& st : p.steps) {
    collective |= st.kind == StepKind::kAllGather || st.kind == StepKind::kBroadcast;
    for (const FlatSend& f : st.sends) {
      if (f.from == g) peers.insert(f.to);
      if (f.to == g) peers.insert(f.from);
    }
  }
  if (collective) return std::min(p.gpus - 1, 2);
  return static_cast<int32_t>(peers.size());
}

// Per GPU: the start state, the planned peak for each offload fraction to try,
// the first that fits kept (the last when none does), as planner/baseline_plan.cc.
void PlanMemory(const Scenario& s, const Layout& src, const BaselineOptions& o, RefitPlan& p) {
  const std::vector<GpuMemoryAtStart> at_start = MemoryAtStart(s, src);
  RESHARD_CHECK(static_cast<int32_t>(at_start.size()) >= p.gpus, "memory at start misses a GPU");
  p.memory_modelled = true;
  p.capacity_bytes = s.cluster.gpu_memory_bytes;
  p.memory.assign(static_cast<size_t>(p.gpus), {});
  for (int32_t g = 0; g < p.gpus; ++g) {
    const GpuMemoryAtStart& m = at_start[static_cast<size_t>(g)];
    GpuMemoryPlan& gm = p.memory[static_cast<size_t>(g)];
    gm.optimizer_bytes = m.optimizer;
    gm.gradient_bytes = m.gradients;
    gm.kv_cache_bytes = m.kv_cache;
    gm.reserve_bytes = m.reserve;
    int64_t copies = 0;
    for (const Step& st : p.steps) copies += static_cast<int64_t>(st.pack[static_cast<size_t>(g)].size() +
                                                                   st.unpack[static_cast<size_t>(g)].size());
    gm.descriptor_bytes = std::max<int64_t>(1, copies) * static_cast<int64_t>(sizeof(DeviceCopy));
    gm.nccl_peers = NcclPeers(p, g);
    gm.overhead_bytes = m.overheads + gm.nccl_peers * s.cluster.overheads.nccl_bytes_per_peer;
    gm.start_bytes = p.ArenaBytes(g, Arena::kSource) + gm.optimizer_bytes + gm.gradient_bytes + gm.kv_cache_bytes +
                     gm.descriptor_bytes + gm.overhead_bytes;
  }
  for (double f : BaselineOffloadFractions(s.memory.optimizer, o.offload_fraction)) {
    p.offload_fraction = f;
    p.planned_fits = true;
    p.missing_gpu = -1;
    p.missing_bytes = 0;
    for (int32_t g = 0; g < p.gpus; ++g) {
      GpuMemoryPlan& gm = p.memory[static_cast<size_t>(g)];
      gm.offload_bytes = std::llround(f * static_cast<double>(gm.optimizer_bytes));
      gm.planned_peak_bytes = std::max(gm.start_bytes, gm.start_bytes - gm.offload_bytes + p.RefitBufferBytes(g));
      const int64_t over = gm.planned_peak_bytes - (p.capacity_bytes - gm.reserve_bytes);
      if (over > p.missing_bytes) p.planned_fits = false, p.missing_gpu = g, p.missing_bytes = over;
    }
    if (p.planned_fits) break;
  }
}

}  // namespace

std::string_view TransportName(Transport t) {
  switch (t) {
    case Transport::kBucketed: return "bucketed";
    case Transport::kPerTensor: return "per_tensor";
    case Transport::kFlat: return "flat";
  }
  return "?";
}

std::string_view CollectiveName(Collective c) { return c == Collective::kAllGather ? "all_gather" : "broadcast"; }

std::string_view ArenaName(Arena a) {
  switch (a) {
    case Arena::kSource: return "source";
    case Arena::kDestination: return "destination";
    case Arena::kBucket: return "bucket";
    case Arena::kInput: return "input";
    case Arena::kStaging: return "staging";
  }
  return "?";
}

int64_t Step::GatheredBytes(int32_t gpus) const {
  switch (kind) {
    case StepKind::kAllGather: return send_bytes * gpus;
    case StepKind::kBroadcast: return send_bytes;
    default: return 0;
  }
}

int64_t RefitPlan::CheckedElements(int32_t gpu) const {
  int64_t n = 0;
  for (const PieceMap& m : check[static_cast<size_t>(gpu)]) n += m.Elements();
  return n;
}

int64_t RefitPlan::RefitBufferBytes(int32_t gpu) const {
  return ArenaBytes(gpu, Arena::kDestination) + ArenaBytes(gpu, Arena::kBucket) + ArenaBytes(gpu, Arena::kInput) +
         ArenaBytes(gpu, Arena::kStaging);
}

int32_t RefitPlan::Collectives() const {
  int32_t n = 0;
  for (const Step& s : steps) n += s.kind != StepKind::kLocal;
  return n;
}

RefitPlan PlanRefit(const Scenario& s, const BaselineOptions& o) {
  const std::string& file = s.path;
  if (s.source.pp != 1 || s.source.vpp != 1)
    throw InputError(file, "source.pp",
                     "the all-gather baseline walks one pipeline stage; pp=" + std::to_string(s.source.pp) +
                         " vpp=" + std::to_string(s.source.vpp) + " is not modelled");
  if (s.destination.pp != 1)
    throw InputError(file, "destination.pp", "the all-gather baseline needs destination pp=1");
  if (s.destination_dtype != s.dtype)
    throw InputError(file, "destination.dtype", "the all-gather baseline does not quantise; use the training dtype");
  if (o.transport == Transport::kBucketed && o.bucket_bytes <= 0)
    throw InputError("<cli>", "bucket", "must be positive, got " + std::to_string(o.bucket_bytes));
  if (o.offload_fraction && !(*o.offload_fraction >= 0 && *o.offload_fraction <= 1))
    throw InputError("<cli>", "offload", "must be none, all or a fraction in [0, 1]");

  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype, file);
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, file);
  RESHARD_CHECK(static_cast<int32_t>(s.source_gpus.size()) == src.Ranks() &&
                    static_cast<int32_t>(s.destination_gpus.size()) == dst.Ranks(),
                "scenario GPU lists do not match the layouts");

  RefitPlan p;
  p.scenario = s.name;
  p.options = o;
  p.elem_bytes = static_cast<int32_t>(DTypeBytes(s.dtype));
  const int64_t eb = p.elem_bytes;
  for (int32_t g : s.source_gpus) p.gpus = std::max(p.gpus, g + 1);
  for (int32_t g : s.destination_gpus) p.gpus = std::max(p.gpus, g + 1);
  p.source_rank.assign(static_cast<size_t>(p.gpus), -1);
  p.destination_rank.assign(static_cast<size_t>(p.gpus), -1);
  for (int32_t r = 0; r < src.Ranks(); ++r) {
    int32_t& slot = p.source_rank[static_cast<size_t>(s.source_gpus[static_cast<size_t>(r)])];
    if (slot >= 0)
      throw InputError(file, "source.gpus", "GPU " + std::to_string(s.source_gpus[static_cast<size_t>(r)]) +
                                                " holds two source ranks; the baseline needs one per GPU");
    slot = r;
  }
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    int32_t& slot = p.destination_rank[static_cast<size_t>(s.destination_gpus[static_cast<size_t>(r)])];
    if (slot >= 0)
      throw InputError(file, "destination.gpus", "GPU " + std::to_string(s.destination_gpus[static_cast<size_t>(r)]) +
                                                     " holds two destination ranks; the baseline needs one per GPU");
    slot = r;
  }
  for (int32_t g = 0; g < p.gpus; ++g)
    if (p.source_rank[static_cast<size_t>(g)] < 0 && p.destination_rank[static_cast<size_t>(g)] < 0)
      throw InputError(file, "source.gpus", "GPU " + std::to_string(g) + " holds no rank; use GPUs 0..N-1");

  const bool colocated = std::all_of(p.source_rank.begin(), p.source_rank.end(), [](int32_t r) { return r >= 0; }) &&
                         std::all_of(p.destination_rank.begin(), p.destination_rank.end(), [](int32_t r) { return r >= 0; });
  int32_t root = -1;
  if (colocated && p.gpus > 1) {
    p.collective = Collective::kAllGather;
  } else if (src.Ranks() == 1) {
    p.collective = Collective::kBroadcast;
    root = s.source_gpus[0];
  } else {
    throw InputError(file, "source.gpus",
                     "the baseline handles colocated refits (one source and one destination rank on every GPU: "
                     "all-gather) or one source rank (broadcast)");
  }

  // Source buffers: the same list on every source rank (pp = 1); moved when the
  // ranks differ (all-gather) or always (broadcast: the other GPUs have nothing).
  const Shard& ref = src.ShardOf(0);
  const int32_t nbuf = static_cast<int32_t>(ref.buffers.size());
  std::vector<std::vector<std::vector<int32_t>>> by_buffer(src.shards.size());  // shard -> buffer -> pieces
  for (size_t sh = 0; sh < src.shards.size(); ++sh) {
    by_buffer[sh] = PiecesByBuffer(src.shards[sh]);
    const Shard& other = src.shards[sh];
    RESHARD_CHECK(static_cast<int32_t>(other.buffers.size()) == nbuf, "source ranks have different buffer lists");
    for (int32_t b = 0; b < nbuf; ++b)
      RESHARD_CHECK(other.buffers[static_cast<size_t>(b)].name == ref.buffers[static_cast<size_t>(b)].name &&
                        other.buffers[static_cast<size_t>(b)].elems == ref.buffers[static_cast<size_t>(b)].elems,
                    "source ranks have different buffer lists");
  }
  p.source_buffers.resize(static_cast<size_t>(nbuf));
  for (int32_t b = 0; b < nbuf; ++b) {
    SourceBuffer& sb = p.source_buffers[static_cast<size_t>(b)];
    sb.name = ref.buffers[static_cast<size_t>(b)].name;
    sb.bytes = ref.buffers[static_cast<size_t>(b)].elems * eb;
    sb.moved = p.collective == Collective::kBroadcast;
    for (size_t sh = 1; sh < src.shards.size() && !sb.moved; ++sh) {
      const auto& a = by_buffer[0][static_cast<size_t>(b)];
      const auto& c = by_buffer[sh][static_cast<size_t>(b)];
      sb.moved = a.size() != c.size();
      for (size_t i = 0; i < a.size() && !sb.moved; ++i)
        sb.moved = !SamePiece(ref.pieces[static_cast<size_t>(a[i])], src.shards[sh].pieces[static_cast<size_t>(c[i])]);
    }
  }
  int64_t off = 0;
  for (bool moved : {true, false}) {
    for (SourceBuffer& sb : p.source_buffers) {
      if (sb.moved != moved) continue;
      sb.offset = off;
      off = AlignUp(off + sb.bytes);
    }
    if (moved) p.moved_bytes = off;
  }
  const int64_t source_arena = off;

  // Destination buffers of each GPU, laid out in order.
  std::vector<std::vector<int64_t>> dst_offset(static_cast<size_t>(p.gpus));
  p.arena_bytes.assign(static_cast<size_t>(p.gpus), {});
  for (int32_t g = 0; g < p.gpus; ++g) {
    auto& sizes = p.arena_bytes[static_cast<size_t>(g)];
    if (p.source_rank[static_cast<size_t>(g)] >= 0) sizes[static_cast<size_t>(Arena::kSource)] = source_arena;
    const int32_t q = p.destination_rank[static_cast<size_t>(g)];
    if (q < 0) continue;
    int64_t d = 0;
    for (const LocalBuffer& lb : dst.ShardOf(q).buffers) {
      dst_offset[static_cast<size_t>(g)].push_back(d);
      d = AlignUp(d + lb.elems * eb);
    }
    sizes[static_cast<size_t>(Arena::kDestination)] = d;
  }

  // Pattern pieces.
  p.tensor_names.reserve(s.model.tensors.size());
  for (const TensorSpec& t : s.model.tensors) p.tensor_names.push_back(t.name);
  p.fill.resize(static_cast<size_t>(p.gpus));
  p.check.resize(static_cast<size_t>(p.gpus));
  for (int32_t g = 0; g < p.gpus; ++g) {
    if (const int32_t r = p.source_rank[static_cast<size_t>(g)]; r >= 0)
      for (const Piece& pc : src.ShardOf(r).pieces)
        p.fill[static_cast<size_t>(g)].push_back(MakePieceMap(
            pc.tensor, s.model.tensors[static_cast<size_t>(pc.tensor)].shape, p.elem_bytes, pc.box,
            p.source_buffers[static_cast<size_t>(pc.buffer)].offset / eb + pc.offset, pc.stride));
    if (const int32_t q = p.destination_rank[static_cast<size_t>(g)]; q >= 0)
      for (const Piece& pc : dst.ShardOf(q).pieces)
        p.check[static_cast<size_t>(g)].push_back(MakePieceMap(
            pc.tensor, s.model.tensors[static_cast<size_t>(pc.tensor)].shape, p.elem_bytes, pc.box,
            dst_offset[static_cast<size_t>(g)][static_cast<size_t>(pc.buffer)] / eb + pc.offset, pc.stride));
  }

  // Cut the walk into steps.
  const int32_t contributors = p.collective == Collective::kAllGather ? p.gpus : 1;
  std::vector<int64_t> slot_offset(static_cast<size_t>(nbuf), 0);  // moved buffer -> offset in its step's slot
  std::vector<Step> steps;
  Step cur;
  int64_t cur_slot = 0;
  auto flush = [&] {
    if (cur.buffers.empty() && cur.local_buffers.empty()) return;
    cur.send_bytes = cur_slot;
    steps.push_back(std::move(cur));
    cur = Step{};
    cur_slot = 0;
  };
  if (o.transport == Transport::kFlat) {
    for (int32_t b = 0; b < nbuf; ++b)
      (p.source_buffers[static_cast<size_t>(b)].moved ? cur.buffers : cur.local_buffers).push_back(b);
    flush();
  } else {
    for (int32_t b = 0; b < nbuf; ++b) {
      const SourceBuffer& sb = p.source_buffers[static_cast<size_t>(b)];
      if (!sb.moved) {
        cur.local_buffers.push_back(b);
        continue;
      }
      if (o.transport == Transport::kPerTensor) {
        cur.buffers.push_back(b);
        cur_slot = sb.bytes;  // straight from the parameter: exact size, no padding
        flush();
        continue;
      }
      if (!cur.buffers.empty() && AlignUp(cur_slot + sb.bytes) * contributors > o.bucket_bytes) flush();
      slot_offset[static_cast<size_t>(b)] = cur_slot;
      cur.buffers.push_back(b);
      cur_slot = AlignUp(cur_slot + sb.bytes);
    }
    flush();
  }

  // Collectives, packs, arena sizes.
  for (Step& st : steps) {
    st.pack.assign(static_cast<size_t>(p.gpus), {});
    st.unpack.assign(static_cast<size_t>(p.gpus), {});
    st.send_offset.assign(static_cast<size_t>(p.gpus), 0);
    if (st.buffers.empty()) {
      st.kind = StepKind::kLocal;
      continue;
    }
    if (o.transport == Transport::kFlat) {
      st.kind = StepKind::kFlat;
      st.send_bytes = 0;
      for (int32_t from = 0; from < p.gpus; ++from) {
        if (p.source_rank[static_cast<size_t>(from)] < 0) continue;
        for (int32_t to = 0; to < p.gpus; ++to) {
          if (to == from || p.destination_rank[static_cast<size_t>(to)] < 0) continue;
          const int64_t slot = p.collective == Collective::kAllGather ? (from < to ? from : from - 1) : 0;
          st.sends.push_back(FlatSend{from, to, 0, slot * p.moved_bytes, p.moved_bytes});
          auto& staging = p.arena_bytes[static_cast<size_t>(to)][static_cast<size_t>(Arena::kStaging)];
          staging = std::max(staging, (slot + 1) * p.moved_bytes);
        }
      }
      continue;
    }
    st.kind = p.collective == Collective::kAllGather ? StepKind::kAllGather : StepKind::kBroadcast;
    st.root = root;
    for (int32_t g = 0; g < p.gpus; ++g) {
      if (st.kind == StepKind::kBroadcast && g != root) continue;
      const int64_t own_slot = st.kind == StepKind::kAllGather ? g * st.send_bytes : 0;
      if (o.transport == Transport::kPerTensor) {
        st.send_arena = Arena::kSource;
        st.send_offset[static_cast<size_t>(g)] = p.source_buffers[static_cast<size_t>(st.buffers[0])].offset;
        continue;
      }
      st.send_arena = o.out_of_place ? Arena::kInput : Arena::kBucket;
      st.send_offset[static_cast<size_t>(g)] = o.out_of_place ? 0 : own_slot;
      for (int32_t b : st.buffers) {
        const SourceBuffer& sb = p.source_buffers[static_cast<size_t>(b)];
        st.pack[static_cast<size_t>(g)].push_back(WholeCopy(Arena::kSource, sb.offset, st.send_arena,
                                                            st.send_offset[static_cast<size_t>(g)] +
                                                                slot_offset[static_cast<size_t>(b)],
                                                            sb.bytes));
      }
    }
    for (int32_t g = 0; g < p.gpus; ++g) {
      auto& sizes = p.arena_bytes[static_cast<size_t>(g)];
      sizes[static_cast<size_t>(Arena::kBucket)] = std::max(sizes[static_cast<size_t>(Arena::kBucket)], st.GatheredBytes(p.gpus));
      const bool sends = st.kind == StepKind::kAllGather || g == root;
      if (o.out_of_place && o.transport == Transport::kBucketed && sends)
        sizes[static_cast<size_t>(Arena::kInput)] = std::max(sizes[static_cast<size_t>(Arena::kInput)], st.send_bytes);
    }
  }

  // Unpacks: intersect every destination piece with the source pieces each step delivers.
  auto locate = [&](const Step& st, int32_t g, int32_t h, int32_t b, bool local) -> Location {
    const SourceBuffer& sb = p.source_buffers[static_cast<size_t>(b)];
    if (local) return {Arena::kSource, sb.offset};
    const int64_t in_slot = o.transport == Transport::kPerTensor ? 0 : slot_offset[static_cast<size_t>(b)];
    switch (st.kind) {
      case StepKind::kAllGather: return {Arena::kBucket, h * st.send_bytes + in_slot};
      case StepKind::kBroadcast: return {Arena::kBucket, in_slot};
      case StepKind::kFlat: {
        if (h == g) return {Arena::kSource, sb.offset};
        const int64_t slot = p.collective == Collective::kAllGather ? (h < g ? h : h - 1) : 0;
        return {Arena::kStaging, slot * p.moved_bytes + sb.offset};
      }
      case StepKind::kLocal: break;
    }
    RESHARD_CHECK(false, "moved buffer in a local step");
    return {Arena::kSource, 0};
  };
  std::vector<std::vector<int64_t>> covered(static_cast<size_t>(p.gpus));
  for (int32_t g = 0; g < p.gpus; ++g) {
    const int32_t q = p.destination_rank[static_cast<size_t>(g)];
    if (q < 0) continue;
    const Shard& dsh = dst.ShardOf(q);
    covered[static_cast<size_t>(g)].assign(dsh.pieces.size(), 0);
    // Destination pieces of tensor t: dsh.pieces is sorted by tensor.
    auto pieces_of = [&](int32_t t) {
      auto lo = std::partition_point(dsh.pieces.begin(), dsh.pieces.end(), [t](const Piece& x) { return x.tensor < t; });
      auto hi = std::partition_point(lo, dsh.pieces.end(), [t](const Piece& x) { return x.tensor == t; });
      return std::pair{lo, hi};
    };
    auto deliver = [&](Step& st, int32_t h, int32_t b, bool local) {
      const int32_t r = p.source_rank[static_cast<size_t>(h)];
      const int32_t sh = src.rank_shard[static_cast<size_t>(r)];
      const Location at = locate(st, g, h, b, local);
      for (int32_t pi : by_buffer[static_cast<size_t>(sh)][static_cast<size_t>(b)]) {
        const Piece& sp = src.shards[static_cast<size_t>(sh)].pieces[static_cast<size_t>(pi)];
        auto [lo, hi] = pieces_of(sp.tensor);
        for (auto it = lo; it != hi; ++it) {
          const std::optional<Box> box = Intersect(sp.box, it->box);
          if (!box) continue;
          const size_t di = static_cast<size_t>(it - dsh.pieces.begin());
          covered[static_cast<size_t>(g)][di] += Volume(*box);
          st.unpack[static_cast<size_t>(g)].push_back(
              MakeCopy(*box, sp, at, *it, dst_offset[static_cast<size_t>(g)][static_cast<size_t>(it->buffer)], eb));
        }
      }
    };
    for (Step& st : steps) {
      for (int32_t b : st.buffers) {
        // Each distinct source piece once: identical pieces on several GPUs (DP
        // replicas inside a moved buffer) are taken from the lowest GPU.
        std::set<std::pair<int32_t, Box>> seen;
        for (int32_t h = 0; h < p.gpus; ++h) {
          if (p.source_rank[static_cast<size_t>(h)] < 0) continue;
          const int32_t sh = src.rank_shard[static_cast<size_t>(p.source_rank[static_cast<size_t>(h)])];
          bool fresh = false;
          for (int32_t pi : by_buffer[static_cast<size_t>(sh)][static_cast<size_t>(b)]) {
            const Piece& sp = src.shards[static_cast<size_t>(sh)].pieces[static_cast<size_t>(pi)];
            fresh |= seen.insert({sp.tensor, sp.box}).second;
          }
          if (fresh) deliver(st, h, b, false);
        }
      }
      for (int32_t b : st.local_buffers) {
        if (p.source_rank[static_cast<size_t>(g)] < 0) continue;
        deliver(st, g, b, true);
      }
    }
    for (size_t di = 0; di < dsh.pieces.size(); ++di) {
      const Piece& dp = dsh.pieces[di];
      RESHARD_CHECK(covered[static_cast<size_t>(g)][di] == Volume(dp.box),
                    "GPU " + std::to_string(g) + ": " + s.model.tensors[static_cast<size_t>(dp.tensor)].name + " " +
                        ToString(dp.box) + " receives " + std::to_string(covered[static_cast<size_t>(g)][di]) + " of " +
                        std::to_string(Volume(dp.box)) + " elements");
    }
  }
  p.steps = std::move(steps);
  CheckBounds(p);
  if (o.memory) PlanMemory(s, src, o, p);
  return p;
}

int64_t EmulateOnHost(const RefitPlan& p) {
  using Bytes = std::vector<unsigned char>;
  std::vector<std::array<Bytes, kArenas>> mem(static_cast<size_t>(p.gpus));
  for (int32_t g = 0; g < p.gpus; ++g)
    for (int a = 0; a < kArenas; ++a)
      mem[static_cast<size_t>(g)][static_cast<size_t>(a)].assign(static_cast<size_t>(p.ArenaBytes(g, static_cast<Arena>(a))),
                                                                  0xA5);
  auto at = [&](int32_t g, Arena a, int64_t off) {
    return mem[static_cast<size_t>(g)][static_cast<size_t>(a)].data() + off;
  };
  const int32_t eb = p.elem_bytes;
  for (int32_t g = 0; g < p.gpus; ++g)
    for (const PieceMap& m : p.fill[static_cast<size_t>(g)])
      ForEachElement(m, [&](int64_t gi, int64_t l) {
        StoreElement(at(g, Arena::kSource, l * eb), eb, PatternValue(m.tensor, gi, eb));
      });
  // Copies go through the copy kernel's own descriptor and chunk arithmetic (allgather_copy.h).
  std::vector<ArenaBases> bases(static_cast<size_t>(p.gpus));
  for (int32_t g = 0; g < p.gpus; ++g)
    for (int a = 0; a < kArenas; ++a) {
      unsigned char* base = mem[static_cast<size_t>(g)][static_cast<size_t>(a)].data();
      RESHARD_CHECK(reinterpret_cast<uintptr_t>(base) % kArenaBaseAlign == 0, "host arena is not aligned");
      bases[static_cast<size_t>(g)].base[a] = base;
    }
  auto run = [&](int32_t g, const ByteCopy& c) {
    const DeviceCopy d = MakeDeviceCopy(static_cast<int32_t>(c.src_arena), c.src_offset, static_cast<int32_t>(c.dst_arena),
                                        c.dst_offset, c.n0, c.n1, c.row_bytes, c.src_stride0, c.src_stride1,
                                        c.dst_stride0, c.dst_stride1, 0);
    for (int64_t k = d.chunk_begin; k < d.chunk_end; ++k) {
      const unsigned char* s = nullptr;
      unsigned char* t = nullptr;
      int64_t n = 0;
      ChunkAt(d, bases[static_cast<size_t>(g)], k, &s, &t, &n);
      RESHARD_CHECK(n > 0 && n % d.vec == 0, "chunk length is not a multiple of the vector width");
      std::memmove(t, s, static_cast<size_t>(n));
    }
  };
  for (const Step& st : p.steps) {
    for (int32_t g = 0; g < p.gpus; ++g)
      for (const ByteCopy& c : st.pack[static_cast<size_t>(g)]) run(g, c);
    if (st.kind == StepKind::kAllGather) {
      for (int32_t g = 0; g < p.gpus; ++g)
        for (int32_t h = 0; h < p.gpus; ++h)
          std::memmove(at(g, Arena::kBucket, h * st.send_bytes),
                       at(h, st.send_arena, st.send_offset[static_cast<size_t>(h)]), static_cast<size_t>(st.send_bytes));
    } else if (st.kind == StepKind::kBroadcast) {
      for (int32_t g = 0; g < p.gpus; ++g)
        std::memmove(at(g, Arena::kBucket, 0), at(st.root, st.send_arena, st.send_offset[static_cast<size_t>(st.root)]),
                     static_cast<size_t>(st.send_bytes));
    }
    for (const FlatSend& f : st.sends)
      std::memcpy(at(f.to, Arena::kStaging, f.dst_offset), at(f.from, Arena::kSource, f.src_offset),
                  static_cast<size_t>(f.bytes));
    for (int32_t g = 0; g < p.gpus; ++g)
      for (const ByteCopy& c : st.unpack[static_cast<size_t>(g)]) run(g, c);
  }
  int64_t bad = 0;
  for (int32_t g = 0; g < p.gpus; ++g)
    for (const PieceMap& m : p.check[static_cast<size_t>(g)])
      ForEachElement(m, [&](int64_t gi, int64_t l) {
        bad += LoadElement(at(g, Arena::kDestination, l * eb), eb) != PatternValue(m.tensor, gi, eb);
      });
  return bad;
}

}  // namespace reshard::baseline
