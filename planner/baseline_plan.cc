#include "planner/baseline_plan.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "model/error.h"
#include "model/offload.h"
#include "planner/buffer_layout.h"
#include "planner/search.h"
#include "planner/transfer_set.h"

namespace reshard {

namespace {

constexpr int32_t kStreamSide = 3;  // local copies, beside the NCCL group (Megatron-Core's side stream)
constexpr int32_t kGroup = 0;       // the one NCCL group

// ---- The baseline --------------------------------------------------------------------

// One side of a fragment: the piece's plan buffer, where the piece's box.lo
// sits in it (elements), its strides and box.
struct Home {
  int32_t buffer = -1;
  int64_t off = 0;
  const Piece* piece = nullptr;
  std::optional<Region> Of(const Box& b, int64_t elem_bytes) const {
    return BoxRegion(buffer, off, piece->stride, piece->box, b, elem_bytes);
  }
};

// Piece `piece` of `rank`'s shard, whose first plan buffer is first[rank].
Home HomeOf(const Layout& l, const SideBuffers& buffers, const std::vector<int32_t>& first, int32_t rank,
            int32_t piece) {
  const int32_t shard = l.rank_shard[rank];
  const Piece& pc = l.shards[shard].pieces[piece];
  return Home{first[rank] + buffers.SlotOf(shard, pc), buffers.OffsetIn(shard, pc), &pc};
}

// Copy pairs moving box `box` from `src` to `dst`; a null side is a staging
// buffer `stage` read / written contiguously from *stage_off (row-major order
// of the box, the wire order of a send). Boxes whose region needs more than
// three levels on a side are split along their outermost dimension, in order.
void AppendCopies(const Home* src, const Home* dst, int32_t stage, int64_t* stage_off, const Box& box, int64_t elem_bytes,
                  std::vector<CopyPair>& out) {
  std::vector<Box> todo{box};
  while (!todo.empty()) {
    const Box x = todo.back();
    todo.pop_back();
    std::optional<Region> sr, dr;
    if (src != nullptr) sr = src->Of(x, elem_bytes);
    if (dst != nullptr) dr = dst->Of(x, elem_bytes);
    if ((src == nullptr || sr) && (dst == nullptr || dr)) {
      Region st;
      if (src == nullptr || dst == nullptr) {
        const int64_t bytes = Volume(x) * elem_bytes;
        st = ContiguousRegion(stage, *stage_off, bytes);
        *stage_off += bytes;
      }
      out.push_back(CopyPair{src != nullptr ? *sr : st, dst != nullptr ? *dr : st});
      continue;
    }
    const int d = OutermostSplitDim(x);
    RESHARD_CHECK(d >= 0, "a single element always has a region");
    for (int64_t u = x.hi[d] - 1; u >= x.lo[d]; --u) {
      Box sub = x;
      sub.lo[d] = u, sub.hi[d] = u + 1;
      todo.push_back(sub);
    }
  }
}

class MegatronBuilder {
 public:
  MegatronBuilder(const Scenario& s, double offload) : s_(s), c_(s.cluster), offload_(offload) {}

  PlanResult Run() {
    src_ = MakeSourceLayout(s_.model, s_.source, s_.dtype, s_.path);
    dst_ = MakeDestinationLayout(s_.model, s_.destination, s_.destination_dtype, s_.path);
    elem_bytes_ = DTypeBytes(s_.dtype);
    ts_ = BuildTransferSet(s_.model, src_, dst_);
    CheckPlanFragments(dst_, ts_, s_.path);  // before anything of the plan's size
    src_buffers_ = LayoutBuffers(src_);
    dst_buffers_ = LayoutBuffers(dst_);
    mem_ = MemoryAtStart(s_, src_);
    const int32_t gpus = c_.Gpus();
    src_ranks_on_gpu_.assign(gpus, {});
    for (int32_t r = 0; r < src_.Ranks(); ++r) src_ranks_on_gpu_[s_.source_gpus[r]].push_back(r);
    ranks_of_shard_.assign(src_.shards.size(), {});
    for (int32_t r = 0; r < src_.Ranks(); ++r) ranks_of_shard_[src_.rank_shard[r]].push_back(r);

    Plan& p = res_.plan;
    StartPlan(p, s_, {"compute", "comm", "host", "side"});
    // Buffers and content as reshard's planner lays them out (per rank and layer).
    // One optimizer buffer per slot: the Megatron-style plan allocates its
    // destination weights at once after the offload.
    refit_ = AddRefitBuffers(p, s_, src_, dst_, src_buffers_, dst_buffers_, s_.destination_gpus, mem_, 1);
    Reserve();
    Offload(offload_);
    AllocateDestinations();
    ChooseAndPrepare();
    EmitGroup();
    EmitAfterGroup();
    Finish(offload_);
    ShareCopiesWithTransfers(res_.plan);
    return std::move(res_);
  }

 private:
  // A remote fragment: its send/recv and the staging of strided sides.
  struct RemoteFragment {
    int32_t dst_rank, frag, src_rank, src_piece;
    int32_t src_gpu, dst_gpu;
    int32_t send_stage = -1, recv_stage = -1;  // staging buffers (-1: in place)
    int32_t pack = -1, recv_stage_alloc = -1;  // ops
    int32_t send = -1, recv = -1;
  };

  int32_t Emit(Op op) { return AppendOp(res_.plan, std::move(op)); }

  // Room for every op and buffer the plan can get (a plan of millions of
  // ops grown by doubling moves each op twice more and touches twice the
  // memory): per optimizer buffer a host buffer and 3 ops, per destination
  // buffer an alloc, per fragment at most 7 ops (pack, 2 allocs, send, recv,
  // unpack, 2 frees) and 2 staging buffers.
  void Reserve() {
    Plan& p = res_.plan;
    int64_t fragments = 0, opt = 0, dst = 0;
    for (int32_t r = 0; r < dst_.Ranks(); ++r) {
      fragments += static_cast<int64_t>(ts_.shard_fragments[dst_.rank_shard[r]].size());
      dst += static_cast<int64_t>(dst_buffers_.slot_layer[dst_.rank_shard[r]].size());
    }
    for (int32_t slots : refit_.opt_slots) opt += slots;
    p.ops.reserve(p.ops.size() + static_cast<size_t>(3 * opt + dst + 7 * fragments));
    p.buffers.reserve(p.buffers.size() + static_cast<size_t>(opt + 2 * fragments));
  }

  int32_t MemOp(OpKind kind, int32_t buffer, int32_t stream, std::vector<int32_t> deps) {
    return AppendMemoryOp(res_.plan, kind, buffer, stream, std::move(deps));
  }

  // The first `fraction` of each GPU's optimizer bytes to host (layer order),
  // on the host stream, before anything else happens on that GPU.
  void Offload(double fraction) {
    last_offload_free_.assign(c_.Gpus(), -1);
    if (fraction <= 0) return;
    for (int32_t r = 0; r < src_.Ranks(); ++r) {
      const int32_t g = s_.source_gpus[r];
      if (refit_.opt_slots[r] == 0) continue;
      const double goal = fraction * static_cast<double>(mem_[g].optimizer);
      int64_t done = 0;
      for (int32_t k = 0; k < refit_.opt_slots[r] && done < goal - 0.5; ++k) {
        const int32_t buf = refit_.opt_first[r] + k;
        done += res_.plan.buffers[buf].bytes;
        const int32_t offload = AppendMoveToHost(res_.plan, buf, kStreamHost, {});
        last_offload_free_[g] = MemOp(OpKind::kFree, buf, kStreamHost, {offload});
      }
    }
  }

  // Every destination weight buffer at once (after the GPU's offload, if any).
  void AllocateDestinations() {
    dst_alloc_.assign(res_.plan.buffers.size(), -1);
    for (int32_t r = 0; r < dst_.Ranks(); ++r) {
      const int32_t g = s_.destination_gpus[r];
      const int32_t n = static_cast<int32_t>(dst_buffers_.slot_layer[dst_.rank_shard[r]].size());
      std::vector<int32_t> deps;
      if (last_offload_free_[g] >= 0) deps.push_back(last_offload_free_[g]);
      for (int32_t k = 0; k < n; ++k) {
        const int32_t buf = refit_.dst_first[r] + k;
        dst_alloc_[buf] = MemOp(OpKind::kAlloc, buf, kStreamCompute, deps);
      }
    }
  }

  // Megatron's source choice for fragment `f` of destination rank `r`:
  // (source rank, index of its piece).
  std::pair<int32_t, int32_t> Choose(int32_t r, const Fragment& f) {
    const auto& hs = ts_.holder_sets[f.holder_set].holders;
    auto piece_of = [&](int32_t q) -> int32_t {
      auto it = std::lower_bound(hs.begin(), hs.end(), std::make_pair(src_.rank_shard[q], int32_t{-1}));
      return it != hs.end() && it->first == src_.rank_shard[q] ? it->second : -1;
    };
    for (int32_t q : src_ranks_on_gpu_[s_.destination_gpus[r]])
      if (const int32_t pi = piece_of(q); pi >= 0) return {q, pi};
    // Round-robin by destination rank over the holders, sorted by rank.
    auto& cand = candidates_[f.holder_set];
    if (cand.empty()) {
      for (const auto& h : hs) cand.insert(cand.end(), ranks_of_shard_[h.first].begin(), ranks_of_shard_[h.first].end());
      std::sort(cand.begin(), cand.end());
      cand.erase(std::unique(cand.begin(), cand.end()), cand.end());
      RESHARD_CHECK(!cand.empty(), "a holder set without a source rank");
    }
    const int32_t q = cand[static_cast<size_t>(r) % cand.size()];
    return {q, piece_of(q)};
  }

  Home SrcHome(int32_t q, int32_t pi) const { return HomeOf(src_, src_buffers_, refit_.src_first, q, pi); }
  Home DstHome(int32_t r, const Fragment& f) const {
    return HomeOf(dst_, dst_buffers_, refit_.dst_first, r, f.dst_piece);
  }

  // Source choice for every fragment; local copies on the side stream; for
  // remote ones, staging and packs of strided sides (before the group).
  void ChooseAndPrepare() {
    candidates_.assign(ts_.holder_sets.size(), {});
    for (int32_t r = 0; r < dst_.Ranks(); ++r) {
      const auto& frags = ts_.shard_fragments[dst_.rank_shard[r]];
      const int32_t dg = s_.destination_gpus[r];
      for (size_t i = 0; i < frags.size(); ++i) {
        const Fragment& f = frags[i];
        ++res_.stats.fragments;
        const auto [q, pi] = Choose(r, f);
        RESHARD_CHECK(pi >= 0, "chosen source does not hold the fragment");
        const int32_t sg = s_.source_gpus[q];
        const Home sh = SrcHome(q, pi), dh = DstHome(r, f);
        if (sg == dg) {
          Op op;
          op.kind = OpKind::kCopy, op.gpu = dg, op.stream = kStreamSide;
          op.deps.push_back(dst_alloc_[dh.buffer]);
          int64_t unused = 0;
          AppendCopies(&sh, &dh, -1, &unused, f.box, elem_bytes_, op.copies);
          op.label = fmt::format("local copy d{} f{}", r, i);
          Emit(std::move(op));
          ++res_.stats.local_copy_ops;
          continue;
        }
        RemoteFragment x{r, static_cast<int32_t>(i), q, pi, sg, dg};
        const int64_t bytes = f.elems * elem_bytes_;
        const auto sr = sh.Of(f.box, elem_bytes_);
        if (!sr || !sr->Contiguous()) {  // pack into a staging buffer of its own
          x.send_stage = AddPlanBuffer(res_.plan, sg, MemorySpace::kDevice, BufferRole::kStaging, bytes, -1, false,
                                   fmt::format("stage send d{} f{}", r, i));
          const int32_t a = MemOp(OpKind::kAlloc, x.send_stage, kStreamCompute, {});
          Op op;
          op.kind = OpKind::kCopy, op.gpu = sg, op.stream = kStreamCompute, op.deps = {a};
          int64_t off = 0;
          AppendCopies(&sh, nullptr, x.send_stage, &off, f.box, elem_bytes_, op.copies);
          op.label = fmt::format("pack d{} f{}", r, i);
          x.pack = Emit(std::move(op));
        }
        const auto dr = dh.Of(f.box, elem_bytes_);
        if (!dr || !dr->Contiguous()) {  // receive into a staging buffer of its own
          x.recv_stage = AddPlanBuffer(res_.plan, dg, MemorySpace::kDevice, BufferRole::kStaging, bytes, -1, false,
                                   fmt::format("stage recv d{} f{}", r, i));
          x.recv_stage_alloc = MemOp(OpKind::kAlloc, x.recv_stage, kStreamCompute, {});
        }
        remote_.push_back(x);
      }
    }
  }

  // Every remote fragment's send/recv in one group, Megatron's order.
  void EmitGroup() {
    for (RemoteFragment& x : remote_) {
      const Fragment& f = ts_.shard_fragments[dst_.rank_shard[x.dst_rank]][x.frag];
      const int64_t bytes = f.elems * elem_bytes_;
      Op send;
      send.kind = OpKind::kSend, send.gpu = x.src_gpu, send.stream = kStreamComm, send.group = kGroup;
      send.peer = x.dst_gpu;
      if (x.send_stage >= 0) {
        send.region = ContiguousRegion(x.send_stage, 0, bytes);
        send.deps.push_back(x.pack);
      } else {
        send.region = *SrcHome(x.src_rank, x.src_piece).Of(f.box, elem_bytes_);
      }
      send.label = fmt::format("send d{} f{}", x.dst_rank, x.frag);
      Op recv;
      recv.kind = OpKind::kRecv, recv.gpu = x.dst_gpu, recv.stream = kStreamComm, recv.group = kGroup;
      recv.peer = x.src_gpu;
      if (x.recv_stage >= 0) {
        recv.region = ContiguousRegion(x.recv_stage, 0, bytes);
        recv.deps.push_back(x.recv_stage_alloc);
      } else {
        const Home dh = DstHome(x.dst_rank, f);
        recv.region = *dh.Of(f.box, elem_bytes_);
        recv.deps.push_back(dst_alloc_[dh.buffer]);
      }
      recv.label = fmt::format("recv d{} f{}", x.dst_rank, x.frag);
      x.send = Emit(std::move(send));
      x.recv = Emit(std::move(recv));
      res_.plan.ops[x.send].match = x.recv;
      res_.plan.ops[x.recv].match = x.send;
      ++res_.stats.segments;
      if (x.send_stage < 0 && x.recv_stage < 0) ++res_.stats.direct;
    }
  }

  // Unpacks, then staging freed (Megatron-Core keeps it to the batch's end).
  void EmitAfterGroup() {
    for (const RemoteFragment& x : remote_) {
      if (x.send_stage >= 0) MemOp(OpKind::kFree, x.send_stage, kStreamCompute, {x.send});
      if (x.recv_stage < 0) continue;
      const Fragment& f = ts_.shard_fragments[dst_.rank_shard[x.dst_rank]][x.frag];
      const Home dh = DstHome(x.dst_rank, f);
      Op op;
      op.kind = OpKind::kCopy, op.gpu = x.dst_gpu, op.stream = kStreamCompute, op.deps = {x.recv};
      int64_t off = 0;
      AppendCopies(nullptr, &dh, x.recv_stage, &off, f.box, elem_bytes_, op.copies);
      op.label = fmt::format("unpack d{} f{}", x.dst_rank, x.frag);
      const int32_t u = Emit(std::move(op));
      MemOp(OpKind::kFree, x.recv_stage, kStreamCompute, {u});
    }
  }

  // Planned peak and summary. Replaying alloc / free in plan order is exact
  // here: an allocation after a free in plan order also waits for it (the
  // destination allocations depend on the offload frees; staging is freed
  // after the group, after every allocation).
  void Finish(double offload) {
    Plan& p = res_.plan;
    const int32_t gpus = c_.Gpus();
    std::vector<int64_t> live(gpus, 0), peak(gpus, 0);
    for (const PlanBuffer& b : p.buffers)
      if (b.preexisting && b.space == MemorySpace::kDevice) live[b.gpu] += b.bytes;
    peak = live;
    std::vector<std::vector<int32_t>> peers(gpus);
    for (const Op& op : p.ops) {
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) peers[op.gpu].push_back(op.peer);
      if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) continue;
      const PlanBuffer& b = p.buffers[op.buffer];
      if (b.space != MemorySpace::kDevice) continue;
      live[b.gpu] += op.kind == OpKind::kAlloc ? b.bytes : -b.bytes;
      peak[b.gpu] = std::max(peak[b.gpu], live[b.gpu]);
    }
    res_.stats.planned_peak_bytes.assign(gpus, 0);
    for (int32_t g = 0; g < gpus; ++g) {
      auto& v = peers[g];
      std::sort(v.begin(), v.end());
      const int64_t npeers = std::unique(v.begin(), v.end()) - v.begin();
      const int64_t overhead = mem_[g].overheads + npeers * c_.overheads.nccl_bytes_per_peer;
      const int64_t planned = peak[g] + (peak[g] > 0 ? overhead : 0);
      res_.stats.planned_peak_bytes[g] = planned;
      const int64_t over = planned - (c_.gpu_memory_bytes - mem_[g].reserve);
      if (over > res_.missing_bytes) res_.missing_bytes = over, res_.gpu = g;
    }
    if (res_.gpu >= 0)
      res_.message = fmt::format("no memory bound: GPU {} peaks at {}, {} more than it has (capacity less reserve)",
                                 res_.gpu, FormatBytes(res_.stats.planned_peak_bytes[res_.gpu]),
                                 FormatBytes(res_.missing_bytes));

    PlanSummary& sum = p.summary;
    sum.segment_bytes = 0;  // no segments: every fragment is a message of its own
    sum.offload_fraction = offload;
    sum.memory_policy = "megatron: one NCCL group, destination all at once, no memory bound";
    if (offload >= 1) sum.memory_policy += ", optimizer offloaded first";
    else if (offload > 0) sum.memory_policy += fmt::format(", {:.2f} of the optimizer offloaded first", offload);
    sum.bytes_moved = CountBytesMoved(p);
    sum.lower_bound_s = LowerBoundSeconds(p);
    sum.routing_bound_s = RoutingBoundSeconds(p);
    sum.predicted_time_s = 0;  // MakeMegatronPlan simulates the plan it keeps, when asked
    sum.predicted_peak_bytes = res_.stats.planned_peak_bytes;
    res_.stats.predicted_by = "not predicted";
    res_.stats.groups = res_.stats.rounds = remote_.empty() ? 0 : 1;
    res_.stats.ops = static_cast<int64_t>(p.ops.size());
  }

  const Scenario& s_;
  const Cluster& c_;
  const double offload_;
  Layout src_, dst_;
  int64_t elem_bytes_ = 2;
  TransferSet ts_;
  SideBuffers src_buffers_, dst_buffers_;
  std::vector<GpuMemoryAtStart> mem_;
  RefitBuffers refit_;
  std::vector<std::vector<int32_t>> src_ranks_on_gpu_, ranks_of_shard_, candidates_;
  std::vector<int32_t> dst_alloc_, last_offload_free_;
  std::vector<RemoteFragment> remote_;
  PlanResult res_;
};

}  // namespace

std::vector<std::string> BaselineNames() { return {"megatron"}; }

PlanResult MakeMegatronPlan(const Scenario& s, const BaselineOptions& options) {
  if (s.destination_dtype != s.dtype)
    throw InputError(s.path, "destination.dtype",
                     fmt::format("the megatron baseline moves {} weights as they are; converting to {} during the "
                                 "refit is not supported",
                                 DTypeName(s.dtype), DTypeName(s.destination_dtype)));
  PlanResult r;
  // The offload fractions to try, in order; the first that fits is kept (model/offload.h).
  for (double f : BaselineOffloadFractions(s.memory.optimizer, options.offload_fraction)) {
    r = MegatronBuilder(s, f).Run();
    if (r.gpu < 0) break;  // fits
  }
  if (options.simulate) PredictWithSimulator(r.plan, r.stats);
  return r;
}

PlanResult MakeBaselinePlan(const Scenario& s, const std::string& name, const BaselineOptions& options) {
  if (name == "megatron") return MakeMegatronPlan(s, options);
  throw InputError("<cli>", "--baseline",
                   fmt::format("unknown baseline '{}'; known: {}", name, fmt::join(BaselineNames(), ", ")));
}

}  // namespace reshard
