#include "planner/emitter.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>

#include "model/error.h"
#include "model/union_find.h"
#include "planner/buffer_layout.h"
#include "planner/comm_lanes.h"
#include "planner/emitter_state.h"
#include "planner/memory_ledger.h"

namespace reshard {

namespace {

using emitter_internal::BufferUse;
using emitter_internal::Direction;
using emitter_internal::GpuEmission;
using emitter_internal::Home;
using emitter_internal::RangeWrites;
using emitter_internal::SegmentOps;
using emitter_internal::WavePiece;

constexpr int32_t kStreamRelease = 3;  // training weights -> host, apart from optimizer offload
constexpr int32_t kLocalLeadRounds = 2;  // local copies emitted this many rounds early (MainLoop)
constexpr int32_t kStreamCommLane2 = 4;  // kCommLane2StreamName, when the plan has lanes

class Emitter {
 public:
  Emitter(const Problem& prob, const Schedule& sc, const PlanPolicy& policy, EmitMode mode, bool lanes)
      : prob_(prob), sc_(sc), policy_(policy), c_(prob.scenario.cluster), mode_(mode), full_(mode == EmitMode::kFull),
        lay_(emitter_internal::MakeLaneLayout(prob, sc, policy, lanes)) {
    part_rot_ = emitter_internal::PartRotations(sc);
  }

  EmittedPlan Run() {
    const Scenario& s = prob_.scenario;
    const int32_t gpus = c_.Gpus();
    Plan& p = out_.plan;
    std::vector<std::string> streams{"compute", "comm", "host", "release"};
    if (!lay_.lane.empty()) streams.emplace_back(kCommLane2StreamName);  // stream 4
    StartPlan(p, s, streams);
    out_.comm_lanes = !lay_.lane.empty();
    refit_ = AddRefitBuffers(p, s, prob_.src, prob_.dst, prob_.src_buffers, prob_.dst_buffers, prob_.dst_gpu,
                             prob_.memory_at_start, OptimizerStatesUnder(policy_, s), mode_ != EmitMode::kAnswerOnly);
    buffers_.assign(p.buffers.size(), BufferUse{});
    memory_.emplace(p, c_, prob_.memory_at_start, lay_.lane.empty() ? sc_.peers : LanePeers(sc_, lay_.lane, gpus));
    if (mode_ == EmitMode::kAnswerOnly) {
      AllocateEverything();
      return Result();
    }
    // Ops: per segment a send and a recv, staged ones a pack, an unpack, an alloc and a free of each staging buffer;
    // plus local copies and ~2 memory ops per buffer. Too many reserved costs address space only (pages are touched
    // as ops land); too few copies every op once more (deepseek-v3: 8.2 ops per segment).
    p.ops.reserve(8 * sc_.segments.size() + sc_.locals.size() + 3 * p.buffers.size() + 16);
    emitter_internal::AppendHomes(prob_, refit_, sc_.parts, homes_);
    CountReaders();
    Prologue();
    MainLoop();
    Epilogue();
    return Result();
  }

 private:
  // The memory answer: the emission's or (kAnswerOnly) AllocateEverything's.
  EmittedPlan Result() {
    const int32_t gpus = c_.Gpus();
    out_.planned_peak.assign(gpus, 0);
    out_.start_missing.assign(gpus, 0);
    out_.shortfall.assign(gpus, 0);
    for (int32_t g = 0; g < gpus; ++g) {
      out_.planned_peak[g] = memory_->PlannedPeak(g);
      out_.start_missing[g] = memory_->StartMissingBytes(g);
      out_.shortfall[g] = memory_->ShortfallBytes(g);
      if (memory_->MissingBytes(g) > out_.missing_bytes) {
        out_.fits = false;
        out_.missing_bytes = memory_->MissingBytes(g);
        out_.worst_gpu = g;
      }
      out_.pcie_estimate_s = std::max(out_.pcie_estimate_s, memory_->HostSeconds(g));
    }
    memory_.reset();
    return std::move(out_);
  }

  // EmitMode::kAnswerOnly: a plan that releases nothing before the
  // Epilogue (no optimizer offload, training weights kept, no relay hops;
  // Prologue then moves nothing) allocates every staging slot it uses and every
  // destination buffer before its first free, so each GPU's live bytes only
  // grow until then and its peak, shortfall and start answer do not depend
  // on the order of the allocations: allocated here in any order, they are
  // the emission's. O(GPUs x slots + destination buffers).
  void AllocateEverything() {
    RESHARD_CHECK(MemoryAnswerMode(sc_, policy_) == EmitMode::kAnswerOnly,
                  "the answer without emission is for plans that release nothing before the end");
    Prologue();
    for (int32_t g = 0; g < c_.Gpus(); ++g)
      for (bool send : {true, false}) {
        const Direction& d = DirectionOf(g, send);
        const auto used = std::min<size_t>(static_cast<size_t>(d.slots), d.staged.size());  // slot k: uses k mod slots
        for (size_t k = 0; k < used; ++k) StagingSlot(g, send, static_cast<int32_t>(k));
      }
    for (size_t i = 0; i < sc_.segments.size(); ++i)
      if (sc_.segments[i].hop == 1) ForwardBuffer(static_cast<int32_t>(i));
    AllocAllDest();
  }

  int32_t Emit(Op op) { return AppendOp(out_.plan, std::move(op)); }

  Direction& DirectionOf(int32_t gpu, bool send) { return send ? gpus_[gpu].send : gpus_[gpu].recv; }

  // Copy pairs of a part (part_home.cc); memory only: none, its home only.
  Home PartCopies(int64_t part, int32_t stage_buf, int64_t* stage_off, bool pack, std::vector<CopyPair>& out) const {
    if (full_) emitter_internal::PartCopies(prob_, sc_.parts[part], homes_[part], stage_buf, stage_off, pack, out);
    return homes_[part];
  }

  // Per source buffer: number of ops still to read it; at zero it may move to host.
  void CountReaders() {
    if (!policy_.source_to_host) return;  // only releases need them
    std::vector<int32_t> seen;
    auto count_parts = [&](int64_t first, int64_t n) {
      seen.clear();
      for (int64_t i = first; i < first + n; ++i)
        if (!sc_.parts[i].relay) seen.push_back(homes_[i].src_buffer);
      std::sort(seen.begin(), seen.end());
      seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
      for (int32_t x : seen) ++buffers_[x].readers;
    };
    for (const Segment& g : sc_.segments)
      if (g.hop != 2) count_parts(g.first_part, g.num_parts);  // a second hop reads the relay peer's buffer
    for (const LocalBatch& l : sc_.locals) count_parts(l.first_part, l.num_parts);
  }

  // Reads of source buffers by op `op_id` are done: release buffers with no reader left.
  void ReadDone(const std::vector<int32_t>& bufs, int32_t op_id) {
    if (!policy_.source_to_host) return;
    for (int32_t buf : bufs) {
      BufferUse& u = buffers_[buf];
      u.reads.push_back(op_id);
      if (--u.readers == 0) memory_->MoveToHost(buf, kStreamRelease, u.reads, false);
    }
  }

  // Every destination buffer not allocated yet. Dest-all-at-once calls it right after the first round: the first
  // transfers are issued after a few allocations instead of all of them (host issue ~4 us per allocation, 68 on 2x
  // H200: 0.3 ms before the first transfer).
  void AllocAllDest() {
    for (int32_t r = 0; r < prob_.dst.Ranks(); ++r) {
      const int32_t n = static_cast<int32_t>(prob_.dst_buffers.slot_layer[prob_.dst.rank_shard[r]].size());
      for (int32_t k = 0; k < n; ++k) {
        const int32_t buf = refit_.dst_first[r] + k;
        if (buffers_[buf].alloc < 0) buffers_[buf].alloc = memory_->Alloc(buf, kStreamCompute);
      }
    }
  }

  void EnsureDest(int32_t buffer, std::vector<int32_t>& deps) {
    if (buffers_[buffer].alloc < 0) buffers_[buffer].alloc = memory_->Alloc(buffer, kStreamCompute);
    deps.push_back(buffers_[buffer].alloc);
  }

  void Prologue() {
    const Scenario& s = prob_.scenario;
    // Optimizer offload: the first fraction of each GPU's optimizer bytes, layer order.
    if (policy_.offload_fraction > 0) {
      for (int32_t r = 0; r < prob_.src.Ranks(); ++r) {
        const int32_t g = s.source_gpus[r];
        if (refit_.opt_slots[r] == 0) continue;
        std::vector<int64_t> slots(refit_.opt_slots[r]);
        for (int32_t k = 0; k < refit_.opt_slots[r]; ++k) slots[k] = out_.plan.buffers[refit_.opt_first[r] + k].bytes;
        const size_t n = OffloadedOptimizerSlots(slots, prob_.memory_at_start[g].optimizer, policy_.offload_fraction);
        for (size_t k = 0; k < n; ++k) memory_->MoveToHost(refit_.opt_first[r] + static_cast<int32_t>(k), kStreamHost, {}, true);
      }
    }
    // Source buffers nobody reads.
    if (policy_.source_to_host)
      for (int32_t r = 0; r < prob_.src.Ranks(); ++r) {
        const int32_t n = static_cast<int32_t>(prob_.src_buffers.slot_layer[prob_.src.rank_shard[r]].size());
        for (int32_t k = 0; k < n; ++k)
          if (buffers_[refit_.src_first[r] + k].readers == 0)
            memory_->MoveToHost(refit_.src_first[r] + k, kStreamRelease, {}, false);
      }
    emitter_internal::AssignStaging(sc_, c_.Gpus(), lay_.lane, lay_.whole, lay_.chunk, gpus_, segment_ops_);
  }

  // Staging slot k of `gpu`'s sending (receiving) side, made and allocated at
  // its first use.
  int32_t StagingSlot(int32_t gpu, bool send, int32_t k, int32_t recv_stream = kStreamComm) {
    Direction& d = DirectionOf(gpu, send);
    if (d.slot_buffer[k] < 0) {
      const int32_t buf = AddPlanBuffer(out_.plan, gpu, MemorySpace::kDevice, BufferRole::kStaging, d.slot_bytes, -1,
                                        false, Label(send ? "send stage" : "recv stage", k, " gpu", gpu));
      d.slot_buffer[k] = buf;
      buffers_.resize(out_.plan.buffers.size());
      // A receive slot is allocated on a comm stream (AllocStream), just before its first transfer: on the compute
      // stream it would wait behind the local copies emitted meanwhile and hold the transfer back.
      buffers_[buf].alloc = memory_->Alloc(buf, send ? kStreamCompute : recv_stream);
    }
    return d.slot_buffer[k];
  }

  // The stream a receive buffer of segment `seg` is allocated on before its group: its lane's with rounds on two
  // lanes (on the other lane's, the group would wait for that lane's group of the round before), else comm.
  int32_t AllocStream(int32_t seg) const {
    return policy_.round_lanes && !lay_.lane.empty() && lay_.lane[seg] ? kStreamCommLane2 : kStreamComm;
  }

  // The relay peer's buffer a relay's first hop `seg` fills (its parts packed, in part order) and its second hop
  // sends on: made and allocated (on AllocStream, before the first hop's group) at first use.
  int32_t ForwardBuffer(int32_t seg) {
    SegmentOps& so = segment_ops_[seg];
    if (so.forward < 0) {
      const Segment& sg = sc_.segments[seg];
      so.forward = AddPlanBuffer(out_.plan, sg.dst_gpu, MemorySpace::kDevice, BufferRole::kStaging, sg.bytes, -1,
                                 false, Label("relay s", seg, " gpu", sg.dst_gpu));
      buffers_.resize(out_.plan.buffers.size());
      buffers_[so.forward].alloc = memory_->Alloc(so.forward, AllocStream(seg));
    }
    return so.forward;
  }

  // Frees the relay buffer second hop `seg` sent from, after its round, on its sends' stream (on the compute
  // stream it held back the unpacks behind it): later allocations may count on it.
  void FreeForward(int32_t seg) {
    const int32_t buf = segment_ops_[sc_.segments[seg].feed].forward;
    const std::vector<int32_t>& sends = segment_ops_[seg].sends;
    const int32_t free = AppendMemoryOp(out_.plan, OpKind::kFree, buf, out_.plan.ops[sends.front()].stream, sends);
    memory_->RecordFree(sc_.segments[seg].src_gpu, free, out_.plan.buffers[buf].bytes);
  }

  // The staging slot a staged receive of segment `seg` uses; appends to
  // `deps` the slot's alloc and the unpack of its previous user.
  int32_t RecvSlot(int32_t seg, std::vector<int32_t>& deps) {
    const Segment& sg = sc_.segments[seg];
    const Direction& d = gpus_[sg.dst_gpu].recv;
    const int32_t k = segment_ops_[seg].recv_use;
    const int32_t slot = StagingSlot(sg.dst_gpu, false, k % d.slots, AllocStream(seg));
    deps.push_back(buffers_[slot].alloc);
    if (k >= d.slots) deps.push_back(segment_ops_[d.staged[k - d.slots]].unpack);
    return slot;
  }

  void EmitPack(int32_t seg) {
    const Segment& sg = sc_.segments[seg];
    const int32_t g = sg.src_gpu;
    const Direction& d = gpus_[g].send;
    const int32_t k = segment_ops_[seg].send_use;
    Op op;
    op.kind = OpKind::kCopy, op.gpu = g, op.stream = kStreamCompute, op.segment = seg;
    const int32_t slot = StagingSlot(g, true, k % d.slots);
    op.deps.push_back(buffers_[slot].alloc);
    // The slot is free once the send that used it `slots` sends ago is done.
    if (k >= d.slots) {
      const auto& prev = segment_ops_[d.staged[k - d.slots]].sends;
      op.deps.insert(op.deps.end(), prev.begin(), prev.end());
    }
    int64_t off = 0;
    std::vector<int32_t> bufs;
    op.copies.reserve(sg.num_parts);
    for (int64_t i = sg.first_part; i < sg.first_part + sg.num_parts; ++i)
      bufs.push_back(PartCopies(i, slot, &off, true, op.copies).src_buffer);
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    if (sg.relay) {
      for (const CopyPair& cp : op.copies) WaitForRegionWrites(cp.src, op.deps);
    }
    if (full_) op.label = Label("pack s", seg);
    segment_ops_[seg].pack = Emit(std::move(op));
    if (!sg.relay) ReadDone(bufs, segment_ops_[seg].pack);
  }

  // A relayed part read from `r` (written in earlier rounds, emitted already: relayed segments are packed only once
  // every earlier round is) waits for the last compute write of its buffer (unpacks and local copies run in stream
  // order) and for the receives that wrote bytes of `r`: not the buffer's last receive, which need not be the one
  // `r` read (another lane's), nor every receive into it (one on the other lane would hold the relay back).
  void WaitForRegionWrites(const Region& r, std::vector<int32_t>& deps) {
    if (const int32_t w = buffers_[r.buffer].last_compute_write; w >= 0) deps.push_back(w);
    range_writes_.Writers(r, deps);
  }

  // Writes before the relay rounds only: relayed parts read bytes that came
  // over the network, and a relay round's own receives share its groups.
  void Wrote(int32_t buffer, int32_t stream, int32_t op) {
    if (relay_rounds_started_) return;
    if (stream != kStreamComm) buffers_[buffer].last_compute_write = op;  // receives: range_writes_
    buffers_[buffer].write_wave = std::max(buffers_[buffer].write_wave, wave_);
  }

  // Relay waves (comm_lanes.h; part_home.cc).
  void RelayPieces(int64_t k, std::vector<WavePiece>& out) const {
    range_writes_.Pieces(homes_[k].src_region, buffers_[homes_[k].src_buffer].write_wave, out);
  }
  int32_t Chunk(size_t i) const { return lay_.chunk.empty() ? -1 : lay_.chunk[i]; }
  // Phase chunks' turns of round r (chunk / 2), 1 without.
  int32_t Turns(int32_t r, const std::vector<int32_t>& round_begin) const {
    const bool chunked = r >= sc_.pre_rounds && round_begin[r + 1] > round_begin[r] && Chunk(round_begin[r]) >= 0;
    return chunked ? (policy_.phase_chunks + 1) / 2 : 1;
  }
  bool InWave(const Segment& sg, int32_t w) const {
    if (!lay_.whole.empty() && lay_.whole[&sg - sc_.segments.data()] >= 0) return lay_.whole[&sg - sc_.segments.data()] == w;
    return emitter_internal::InWave(sg, w, lay_.waves, lay_.wave_ends, homes_, buffers_, range_writes_);
  }

  // Local batches [first, last) of one GPU as one copy op: its destinations
  // allocated first, its sources' reads done when it is.
  void EmitLocal(size_t first, size_t last) {
    const LocalBatch& lb = sc_.locals[first];
    Op op;
    op.kind = OpKind::kCopy, op.gpu = lb.gpu, op.stream = kStreamCompute;
    std::vector<int32_t> bufs;
    int64_t parts = 0;
    for (size_t k = first; k < last; ++k) parts += sc_.locals[k].num_parts;
    op.copies.reserve(parts);
    for (size_t k = first; k < last; ++k) {
      const LocalBatch& b = sc_.locals[k];
      for (int64_t i = b.first_part; i < b.first_part + b.num_parts; ++i) {
        int64_t unused = 0;
        const Home h = PartCopies(i, -1, &unused, true, op.copies);
        EnsureDest(h.dst_buffer, op.deps);
        bufs.push_back(h.src_buffer);
      }
    }
    std::sort(op.deps.begin(), op.deps.end());
    op.deps.erase(std::unique(op.deps.begin(), op.deps.end()), op.deps.end());
    if (full_) {
      const LocalBatch& e = sc_.locals[last - 1];
      op.label = last - first == 1 ? Label("local copy gpu", lb.gpu, " r", lb.src_rank, " slot ", lb.src_slot)
                                   : Label("local copy gpu", lb.gpu, " r", lb.src_rank, " slot ", lb.src_slot, " .. r",
                                           e.src_rank, " slot ", e.src_slot);
    }
    std::vector<int32_t> written;
    for (const CopyPair& cp : op.copies) written.push_back(cp.dst.buffer);
    std::sort(written.begin(), written.end());
    written.erase(std::unique(written.begin(), written.end()), written.end());
    const int32_t id = Emit(std::move(op));
    for (int32_t b : written) Wrote(b, kStreamCompute, id);
    ++out_.local_ops;
    std::sort(bufs.begin(), bufs.end());
    bufs.erase(std::unique(bufs.begin(), bufs.end()), bufs.end());
    ReadDone(bufs, id);
  }

  // A matched send / recv of segment `seg`.
  void EmitPair(int32_t seg, Op send, Op recv) {
    const int32_t written = recv.region.buffer;
    const int32_t sid = Emit(std::move(send));
    const int32_t rid = Emit(std::move(recv));
    Wrote(written, kStreamComm, rid);
    if (sc_.relay_rounds > 0 && !relay_rounds_started_) range_writes_.Add(out_.plan.ops[rid].region, wave_, rid);
    out_.plan.ops[sid].match = rid;
    out_.plan.ops[rid].match = sid;
    segment_ops_[seg].sends.push_back(sid);
    segment_ops_[seg].recvs.push_back(rid);
  }

  // One send / recv per part: from / into the part's home where that side is
  // contiguous, else from / into the staging slot at the part's packed offset.
  // `send0` / `recv0` carry the fields common to all parts.
  void EmitPerPart(int32_t i, const Op& send0, const Op& recv0, int32_t wave = -1) {
    const Segment& sg = sc_.segments[i];
    const Direction& sender = gpus_[sg.src_gpu].send;
    const int32_t sslot = sg.send_direct ? -1
                          : sg.hop == 2  ? segment_ops_[sg.feed].forward
                                         : sender.slot_buffer[segment_ops_[i].send_use % sender.slots];
    std::vector<int32_t> rdeps;
    int32_t rslot = -1;
    if (sg.hop == 1) {
      rslot = ForwardBuffer(i);
      rdeps.push_back(buffers_[rslot].alloc);
    } else if (!sg.recv_direct) {
      rslot = RecvSlot(i, rdeps);
    }
    std::vector<std::pair<int32_t, int32_t>> reads;  // (source buffer, send op) read in place
    int64_t off = 0;
    // Parts back to back on every in-place side (staged sides always are)
    // travel as one op: a layer's whole shard is one send, not one per tensor.
    Op send, recv;
    int32_t sbuf = -1, ops = 0;
    auto flush = [&] {
      if (send.region.buffer < 0) return;
      if (full_) {
        send.label = Label("send s", i, ".", ops);
        recv.label = Label("recv s", i, ".", ops);
      }
      ++ops;
      EmitPair(i, std::move(send), std::move(recv));
      if (sg.send_direct) reads.emplace_back(sbuf, segment_ops_[i].sends.back());
      send.region.buffer = -1;
    };
    send.region.buffer = -1;
    // With a wave: its bytes only (relay phase: the pieces its receives wrote in that wave, else bytes [w0, w1)).
    auto start = [&](int32_t w) { return WaveStartBytes(sg.bytes, w, lay_.waves, lay_.wave_ends); };
    const int64_t w0 = wave < 0 || sg.relay ? 0 : start(wave);
    const int64_t w1 = wave < 0 || sg.relay ? sg.bytes : start(wave + 1);
    std::vector<WavePiece> pieces;
    const int64_t rot = part_rot_.empty() ? 0 : part_rot_[i];  // PartRotations
    for (int64_t n = 0; n < sg.num_parts; ++n) {
      const int64_t k = sg.first_part + (n + rot) % sg.num_parts;
      if (rot > 0 && n + rot == sg.num_parts) flush();  // the wrap: not back to back
      const Home& h = homes_[k];
      RESHARD_CHECK(h.simple && (!sg.send_direct || h.src_region.Contiguous()) &&
                        (!sg.recv_direct || h.dst_region.Contiguous()),
                    "an in-place transfer needs a contiguous region on that side");
      const int64_t part_bytes = h.src_region.Bytes();
      if (wave >= 0 && sg.relay) {
        RelayPieces(k, pieces);
      } else {
        pieces.assign(1, {std::max(w0, off) - off, std::min(w1, off + part_bytes) - off, wave, -1});
      }
      for (const WavePiece& x : pieces) {
        if (x.end <= x.begin || x.wave != wave) {
          flush();  // another wave's: its own group
          continue;
        }
        const int64_t bytes = x.end - x.begin;
        const Region src = ContiguousRegion(h.src_region.buffer, h.src_region.offset_bytes + x.begin, bytes);
        const Region dst = ContiguousRegion(h.dst_region.buffer, h.dst_region.offset_bytes + x.begin, bytes);
        auto follows = [](const Region& run, const Region& next) {
          return run.buffer == next.buffer && run.offset_bytes + run.Bytes() == next.offset_bytes;
        };
        if (send.region.buffer >= 0 && (!sg.send_direct || follows(send.region, src)) &&
            (!sg.recv_direct || follows(recv.region, dst))) {
          send.region = ContiguousRegion(send.region.buffer, send.region.offset_bytes, send.region.Bytes() + bytes);
          recv.region = ContiguousRegion(recv.region.buffer, recv.region.offset_bytes, recv.region.Bytes() + bytes);
          // The bytes appended have writers of their own (another lane's receive with rounds on two lanes).
          if (x.write >= 0) send.deps.push_back(x.write);
          else if (sg.send_direct && sg.relay) WaitForRegionWrites(src, send.deps);
          continue;  // an in-place receive side stays in the same (allocated) buffer
        }
        flush();
        send = send0, recv = recv0;
        sbuf = h.src_buffer;
        if (sg.send_direct) {
          send.region = src;
          if (x.write >= 0) {
            send.deps.push_back(x.write);
            if (const int32_t w = buffers_[h.src_buffer].last_compute_write; w >= 0) send.deps.push_back(w);
          } else if (sg.relay) {
            WaitForRegionWrites(src, send.deps);
          }
        } else {
          send.region = ContiguousRegion(sslot, off + x.begin, bytes);
          SentAfter(i, send.deps);
        }
        if (sg.recv_direct) {
          recv.region = dst;
          EnsureDest(h.dst_buffer, recv.deps);
        } else {
          recv.region = ContiguousRegion(rslot, off + x.begin, bytes);
          recv.deps = rdeps;
        }
      }
      off += part_bytes;
    }
    flush();
    if (!policy_.source_to_host || reads.empty() || sg.relay) return;
    // Each source buffer read in place is done after its last send here, but
    // is released only once the round's groups are emitted (ReleaseGroupReads);
    // with waves, after the segment's last wave (a reader is counted per segment).
    bool last = true;
    for (int32_t w = wave + 1; wave >= 0 && w < lay_.waves; ++w)
      last = last && !InWave(sg, w);
    std::stable_sort(reads.begin(), reads.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t a = 0; a < reads.size();) {
      size_t e = a;
      while (e < reads.size() && reads[e].first == reads[a].first) ++e;
      for (size_t q = a; q + 1 < e; ++q) buffers_[reads[q].first].reads.push_back(reads[q].second);
      if (last) group_reads_.push_back(reads[e - 1]);
      else buffers_[reads[e - 1].first].reads.push_back(reads[e - 1].second);
      a = e;
    }
  }

  // Reads by sends of the round's groups are done. Their releases wait for
  // those sends, so an allocation that takes one must follow the groups: an
  // allocation a receive of the same group waits for would make the group
  // wait for itself (send -> move to host -> free -> alloc -> recv).
  void ReleaseGroupReads() {
    for (const auto& [buf, op] : group_reads_) ReadDone({buf}, op);
    group_reads_.clear();
  }

  // What a staged send of segment `i` waits for: its pack, or for a
  // sender-relay second hop, every receive of its first hop.
  void SentAfter(int32_t i, std::vector<int32_t>& deps) const {
    const Segment& sg = sc_.segments[i];
    if (sg.hop != 2) {
      deps.push_back(segment_ops_[i].pack);
      return;
    }
    const auto& recvs = segment_ops_[sg.feed].recvs;
    RESHARD_CHECK(!recvs.empty(), "a second hop is sent after its first");
    deps.insert(deps.end(), recvs.begin(), recvs.end());
  }

  // The send and receive of a segment staged on both sides: one op each,
  // from the sender's slot into the receiver's.
  void EmitStagedPair(int32_t i, Op send, Op recv) {
    const Segment& sg = sc_.segments[i];
    const Direction& sender = gpus_[sg.src_gpu].send;
    const int32_t sslot = sg.hop == 2 ? segment_ops_[sg.feed].forward
                                      : sender.slot_buffer[segment_ops_[i].send_use % sender.slots];
    send.region = ContiguousRegion(sslot, 0, sg.bytes);
    SentAfter(i, send.deps);
    int32_t rslot;
    if (sg.hop == 1) {
      rslot = ForwardBuffer(i);
      recv.deps.push_back(buffers_[rslot].alloc);
    } else {
      rslot = RecvSlot(i, recv.deps);
    }
    recv.region = ContiguousRegion(rslot, 0, sg.bytes);
    if (full_) {
      send.label = Label("send s", i);
      recv.label = Label("recv s", i);
    }
    EmitPair(i, std::move(send), std::move(recv));
  }

  void EmitUnpack(int32_t i) {
    const Segment& sg = sc_.segments[i];
    const Direction& receiver = gpus_[sg.dst_gpu].recv;
    Op op;
    op.kind = OpKind::kCopy, op.gpu = sg.dst_gpu, op.stream = kStreamCompute, op.segment = i;
    const int32_t slot = receiver.slot_buffer[segment_ops_[i].recv_use % receiver.slots];
    int64_t off = 0;
    op.copies.reserve(sg.num_parts);
    std::vector<int32_t> written;
    for (int64_t k = sg.first_part; k < sg.first_part + sg.num_parts; ++k) {
      written.push_back(PartCopies(k, slot, &off, false, op.copies).dst_buffer);
      EnsureDest(written.back(), op.deps);
    }
    const auto& recvs = segment_ops_[i].recvs;
    op.deps.insert(op.deps.end(), recvs.begin(), recvs.end());
    if (full_) op.label = Label("unpack s", i);
    segment_ops_[i].unpack = Emit(std::move(op));
    for (int32_t b : written) Wrote(b, kStreamCompute, segment_ops_[i].unpack);
  }

  // Packs of `gpu`'s sends up to round `max_round`, stopping at one whose
  // slot's previous user is not sent yet (its round is not emitted), and at
  // relayed ones while rounds before the relays' are still to be emitted
  // (`round` is the one being emitted).
  void PackUpTo(int32_t gpu, int32_t max_round, int32_t round) {
    GpuEmission& ge = gpus_[gpu];
    const auto& v = ge.send.segments;
    while (ge.next_pack < static_cast<int32_t>(v.size()) && sc_.segments[v[ge.next_pack]].round <= max_round) {
      const int32_t id = v[ge.next_pack];
      if (sc_.segments[id].relay && round < sc_.rounds - sc_.relay_rounds) break;
      const int32_t k = segment_ops_[id].send_use;
      if (k >= ge.send.slots && segment_ops_[ge.send.staged[k - ge.send.slots]].sends.empty()) break;
      ++ge.next_pack;
      if (sc_.segments[id].Packs()) EmitPack(id);
    }
  }

  // Local copies of `gpu` up to layer priority `priority`. The batches due
  // together run back to back on the compute stream anyway, so where no
  // memory rule needs their boundaries (destinations allocated all at once,
  // sources kept) they are one op: one launch, one event bracket and one
  // grid tail instead of one per source slot (one H200, llama3-8b TP1 -> TP1:
  // 34 ops of 436 MB, 8.35 -> 8.19 ms with allocs unstamped). Not for a
  // quantized destination: its copies go through staging, each after its
  // slot's quantize while that slot's bytes are still in L2 (merged, a
  // one-H200 fp8 refit's copy took 5.8 ms instead of 4.3).
  void LocalsUpTo(int32_t gpu, int32_t priority) {
    GpuEmission& ge = gpus_[gpu];
    size_t end = ge.next_local;
    while (end < static_cast<size_t>(ge.local_end) && sc_.locals[end].priority <= priority) ++end;
    const bool merge = policy_.merge_local_copies && !policy_.source_to_host && !policy_.destination_per_layer;
    if (merge && end > ge.next_local) {
      EmitLocal(ge.next_local, end);
    } else {
      for (size_t k = ge.next_local; k < end; ++k) EmitLocal(k, k + 1);
    }
    ge.next_local = end;
  }

  void MainLoop() {
    const int32_t gpus = c_.Gpus();
    const int32_t R = sc_.rounds;
    // Round r's segments: [round_begin[r], round_begin[r+1]).
    std::vector<int32_t> round_begin(R + 1, 0);
    for (const Segment& sg : sc_.segments) ++round_begin[sg.round + 1];
    for (int32_t r = 0; r < R; ++r) round_begin[r + 1] += round_begin[r];
    // With lanes, lane 0's in-place receives must not wait for the destination allocs behind lane 1's packs.
    if (!lay_.lane.empty() && !policy_.destination_per_layer) AllocAllDest();
    for (int32_t g = 0; g < gpus; ++g) PackUpTo(g, 0, 0);
    // Per round, reset for the GPUs the round touches; an early relay phase has its own (its groups come
    // between the chunks of the phase before, whose groups need that phase's components).
    UnionFind components(gpus), relay_components(lay_.early_relays ? gpus : 0);
    // Round r before its groups: packs and local copies due, receive slots, the groups' components.
    auto begin_round = [&](int32_t r, UnionFind& groups_of) {
      relay_rounds_started_ = r >= R - sc_.relay_rounds;
      if (r == R - sc_.relay_rounds) range_writes_.Seal();
      // Local copies run kLocalLeadRounds ahead of the transfers whose
      // priority they share: the compute stream is FIFO, so copies left for
      // the last rounds queued behind their unpacks and ran after the last
      // transfer (0.5 ms of 25 on 2x H200). Not when training weights move to
      // host as they are read: an early copy's allocation could then wait for
      // a release that follows a send of this round's group (a deadlock).
      const int32_t rl = std::min(r + (policy_.source_to_host ? 0 : kLocalLeadRounds), R - 1);
      const int32_t prio = R <= 1 ? 1023 : static_cast<int32_t>(static_cast<int64_t>(rl) * 1023 / (R - 1));
      for (int32_t g = 0; g < gpus; ++g) {
        // With two rounds of send slots, pack one round ahead; with one, a
        // slot is free only after this round's sends (emitted below).
        PackUpTo(g, r + gpus_[g].send.slots / gpus_[g].send.round_staged - 1, r);
        LocalsUpTo(g, prio);
      }
      const int32_t b0 = round_begin[r], b1 = round_begin[r + 1];
      // Receive slots first used in this round: allocated on the comm stream
      // before the round's group (inside it, an alloc would split the group).
      for (int32_t i = b0; i < b1; ++i) {
        const Segment& sg = sc_.segments[i];
        if (sg.hop == 1) ForwardBuffer(i);
        else if (sg.Unpacks())
          StagingSlot(sg.dst_gpu, false, segment_ops_[i].recv_use % gpus_[sg.dst_gpu].recv.slots, AllocStream(i));
      }
      // Groups: connected components of this round's transfers.
      for (int32_t i = b0; i < b1; ++i) {
        groups_of.Reset(sc_.segments[i].src_gpu);
        groups_of.Reset(sc_.segments[i].dst_gpu);
      }
      for (int32_t i = b0; i < b1; ++i) groups_of.Unite(sc_.segments[i].src_gpu, sc_.segments[i].dst_gpu);
    };
    // Lane 0's ops first: every GPU issues lane 0's group before lane 1's (the same order on all GPUs, which
    // concurrent communicators need). With relay waves, the relay phase and the one before it go wave by wave.
    // With phase chunks, chunk by chunk (comm_lanes.h): (chunk / 2, lane), turns [t0, t1).
    auto round_groups = [&](int32_t r, int32_t t0, int32_t t1, UnionFind& groups_of,
                            std::map<int32_t, int32_t>& group_of_root) {
      const int32_t b0 = round_begin[r], b1 = round_begin[r + 1];
      const int32_t waves = lay_.waves > 1 && r >= R - sc_.relay_rounds - 1 ? lay_.waves : 1, turns = Turns(r, round_begin);
      // First hops moved into the chunks (LaneLayout::first_hops_in_chunks): in the chunked round, not in theirs.
      const bool moved = lay_.first_hops_in_chunks && r == sc_.pre_rounds;
      for (int32_t turn = t0; turn < t1; ++turn)
      for (int32_t lane = 0; lane < (lay_.lane.empty() ? 1 : 2); ++lane)
      for (wave_ = 0; wave_ < waves; ++wave_)
      for (int32_t i = moved ? round_begin[0] : b0; i < b1; ++i) {
        const Segment& sg = sc_.segments[i];
        if ((!lay_.lane.empty() && lay_.lane[i] != lane) || (turns > 1 && Chunk(i) / 2 != turn)) continue;
        if (i < b0 ? Chunk(i) < 0 : r < sc_.pre_rounds && Chunk(i) >= 0) continue;  // first hops where they run
        if (waves > 1 && !InWave(sg, wave_)) continue;
        const bool split = waves > 1 && emitter_internal::Waved(sg) && (lay_.whole.empty() || sg.relay);
        auto [it, fresh] = group_of_root.try_emplace(((2 * groups_of.Find(sg.src_gpu) + lane) * waves + wave_) * turns + turn, next_group_);
        if (fresh) ++next_group_;
        const int32_t group = it->second, stream = lane ? kStreamCommLane2 : kStreamComm;
        Op send;
        send.kind = OpKind::kSend, send.gpu = sg.src_gpu, send.stream = stream, send.group = group;
        send.peer = sg.dst_gpu, send.segment = i;
        Op recv;
        recv.kind = OpKind::kRecv, recv.gpu = sg.dst_gpu, recv.stream = stream, recv.group = group;
        recv.peer = sg.src_gpu, recv.segment = i;
        if (sg.PerPart()) EmitPerPart(i, send, recv, split ? wave_ : -1);
        else EmitStagedPair(i, std::move(send), std::move(recv));
      }
      wave_ = 0;
    };
    // Unpacks of round r (pass 0: those feeding relays, then the relays' packs; pass 1: the others).
    auto unpacks = [&](int32_t r, int32_t pass) {
      const int32_t b0 = round_begin[r], b1 = round_begin[r + 1], turns = Turns(r, round_begin);
      const bool relays_next = sc_.all_in_one_round && sc_.relay_rounds > 0 && r + 1 == R - sc_.relay_rounds;
      for (int32_t turn = 0; turn < turns; ++turn)
        for (int lane = 0; lane < (lay_.lane.empty() ? 1 : 2); ++lane)
          for (int32_t i = b0; i < b1; ++i)
            if (sc_.segments[i].Unpacks() && (!relays_next || sc_.segments[i].feeds == (pass == 0)) &&
                (lay_.lane.empty() || lay_.lane[i] == lane) && (turns == 1 || Chunk(i) / 2 == turn))
              EmitUnpack(i);
      for (int32_t g = 0; pass == 0 && g < gpus; ++g) PackUpTo(g, r + 1, r + 1);
    };
    auto end_round = [&](int32_t r) {
      ReleaseGroupReads();
      // Relay buffers sent on in this round: freed after their sends, on the relay peer.
      for (int32_t i = round_begin[r]; i < round_begin[r + 1]; ++i)
        if (sc_.segments[i].hop == 2) FreeForward(i);
    };
    for (int32_t r = 0; r < R; ++r) {
      // A round per phase, before its relay round: unpacks feeding relays, the relays' packs, then the
      // other unpacks, so the relay group does not wait behind them all (deepseek-v3 NVL72: -5 ms).
      const bool relays_next = sc_.all_in_one_round && sc_.relay_rounds > 0 && r + 1 == R - sc_.relay_rounds;
      const int32_t turns = Turns(r, round_begin);
      // PlanPolicy::early_relay_phase: the relay round (the last) right after the first turn (or two, lay_.early_turns).
      const bool early = relays_next && turns > 1 && lay_.early_relays;
      begin_round(r, components);
      for (int32_t i = 0; lay_.first_hops_in_chunks && r == sc_.pre_rounds && i < round_begin[r]; ++i)
        if (Chunk(i) >= 0) components.Unite(sc_.segments[i].src_gpu, sc_.segments[i].dst_gpu);
      std::map<int32_t, int32_t> group_of_root;
      const int32_t before_relays = std::min(lay_.early_turns, turns - 1);  // turns of the phase before its relay phase
      round_groups(r, 0, early ? before_relays : turns, components, group_of_root);
      if (early) {
        unpacks(r, 0);
        begin_round(r + 1, relay_components);
        std::map<int32_t, int32_t> relay_groups;
        round_groups(r + 1, 0, 1, relay_components, relay_groups);
        end_round(r + 1);
        unpacks(r + 1, 1);
        round_groups(r, before_relays, turns, components, group_of_root);
      }
      end_round(r);
      for (int pass = relays_next && !early ? 0 : 1; pass < 2; ++pass) unpacks(r, pass);
      if (r == 0 && !policy_.destination_per_layer) AllocAllDest();
      if (early) break;
    }
    // Local copies not yet emitted (plans without rounds, or late priorities).
    for (int32_t g = 0; g < gpus; ++g) LocalsUpTo(g, INT32_MAX);
  }

  void Epilogue() {
    // Free staging after its last use; destination buffers never written are
    // still allocated (they may hold nothing, e.g. padding-free layouts).
    AllocAllDest();
    for (int32_t g = 0; g < c_.Gpus(); ++g) {
      for (bool send : {true, false}) {
        const Direction& d = DirectionOf(g, send);
        for (int32_t k = 0; k < static_cast<int32_t>(d.slot_buffer.size()); ++k) {
          const int32_t slot = d.slot_buffer[k];
          if (slot < 0) continue;
          std::vector<int32_t> deps;  // the last staged use of this slot
          for (int32_t idx = static_cast<int32_t>(d.segments.size()) - 1; idx >= 0; --idx) {
            const SegmentOps& so = segment_ops_[d.segments[idx]];
            const int32_t use = send ? so.send_use : so.recv_use;
            if (use < 0 || use % d.slots != k) continue;  // in place, or another slot
            if (send) deps.insert(deps.end(), so.sends.begin(), so.sends.end());
            else deps.push_back(so.unpack);
            break;
          }
          const int32_t free = AppendMemoryOp(out_.plan, OpKind::kFree, slot, kStreamCompute, std::move(deps));
          memory_->RecordFree(g, free, out_.plan.buffers[slot].bytes);
        }
      }
    }
    // Releases no allocation needed: freed on their own stream.
    memory_->EmitPendingReleases();
    out_.groups = next_group_;
  }

  const Problem& prob_;
  const Schedule& sc_;
  const PlanPolicy& policy_;
  const Cluster& c_;
  const EmitMode mode_;
  const bool full_;                     // EmitMode::kFull: copies and labels too
  const emitter_internal::LaneLayout lay_;  // lanes, relay waves, phase chunks (lane_layout.cc)
  EmittedPlan out_;
  RefitBuffers refit_;                  // the buffers the refit starts from
  std::optional<MemoryLedger> memory_;  // accounts out_.plan's device memory
  ScratchVector<Home> homes_;           // per part, computed once (the lookups are cache misses)
  std::vector<BufferUse> buffers_;      // per plan buffer (host buffers may be missing)
  std::vector<SegmentOps> segment_ops_; // per segment
  std::vector<GpuEmission> gpus_;       // per GPU
  std::vector<std::pair<int32_t, int32_t>> group_reads_;  // (source buffer, its last send) in this round's groups
  int32_t next_group_ = 0;
  bool relay_rounds_started_ = false;
  int32_t wave_ = 0;                    // the relay wave being emitted
  std::vector<int64_t> part_rot_;       // per segment its first part (PartRotations); empty: none
  RangeWrites range_writes_;            // with relay waves: who wrote what before the relay phase
};

}  // namespace

bool EarlyRelayPhase(const Schedule& sc, const PlanPolicy& policy) {
  return policy.early_relay_phase && policy.comm_lanes && policy.relay_waves <= 1 && policy.phase_chunks > 2 &&
         sc.relay_rounds == 1 && policy.feed_chunks >= 1 &&
         (policy.feed_chunks == 1 || policy.feed_chunks + 2 <= policy.phase_chunks) &&
         FeedsInFirstChunk(sc, policy.phase_chunks, policy.feed_chunks);
}

EmittedPlan EmitPlan(const Problem& prob, const Schedule& sc, const PlanPolicy& policy, EmitMode mode) {
  EmittedPlan e = Emitter(prob, sc, policy, mode, policy.comm_lanes).Run();
  // The second lane's NCCL buffers may be what does not fit: then one lane.
  // One lane saves each GPU its lane-1 connections' buffers and nothing
  // else, so it is emitted only where that could cover the shortfall (a
  // sweep's many points that do not fit would otherwise emit twice).
  if (!e.fits && e.comm_lanes) {
    const int32_t gpus = prob.scenario.cluster.Gpus();
    const std::vector<int32_t> two = LanePeers(sc, LanesWithoutWaves(sc, policy.round_lanes, gpus), gpus);
    int64_t most = 0;
    for (int32_t g = 0; g < gpus; ++g) most = std::max<int64_t>(most, two[g] - sc.peers[g]);
    if (e.missing_bytes <= most * prob.scenario.cluster.overheads.nccl_bytes_per_peer)
      e = Emitter(prob, sc, policy, mode, false).Run();
  }
  if (mode == EmitMode::kFull) ShareCopiesWithTransfers(e.plan);
  return e;
}

}  // namespace reshard
