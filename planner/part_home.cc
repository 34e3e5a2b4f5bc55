// Where each part of a schedule lives, the copies that move it through
// staging, and which relay wave holds a segment: the emitter's per-part
// lookups (planner/emitter_state.h).
#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "planner/comm_lanes.h"
#include "planner/emitter_state.h"

namespace reshard::emitter_internal {

Home HomeOf(const Problem& prob, const RefitBuffers& refit, const Part& pt) {
  const Layout& sl = prob.SendLayout(pt.relay);
  const SideBuffers& sb = prob.SendBuffers(pt.relay);
  const int32_t sshard = sl.rank_shard[pt.src_rank];
  const int32_t dshard = prob.dst.rank_shard[pt.dst_rank];
  const Fragment& f = prob.transfer_set.shard_fragments[dshard][pt.frag];
  Home h;
  h.src_piece = &sl.shards[sshard].pieces[pt.src_piece];
  h.dst_piece = &prob.dst.shards[dshard].pieces[f.dst_piece];
  h.src_buffer = (pt.relay ? refit.dst_first : refit.src_first)[pt.src_rank] + sb.SlotOf(sshard, *h.src_piece);
  h.dst_buffer = refit.dst_first[pt.dst_rank] + prob.dst_buffers.SlotOf(dshard, *h.dst_piece);
  h.src_offset = sb.OffsetIn(sshard, *h.src_piece);
  h.dst_offset = prob.dst_buffers.OffsetIn(dshard, *h.dst_piece);
  auto sr = BoxRegion(h.src_buffer, h.src_offset, h.src_piece->stride, h.src_piece->box, pt.box, prob.elem_bytes);
  auto dr = BoxRegion(h.dst_buffer, h.dst_offset, h.dst_piece->stride, h.dst_piece->box, pt.box, prob.elem_bytes);
  if (sr && dr) h.simple = true, h.src_region = *sr, h.dst_region = *dr;
  return h;
}

void PartCopies(const Problem& prob, const Part& pt, const Home& h, int32_t stage_buf, int64_t* stage_off, bool pack,
                std::vector<CopyPair>& out) {
  auto emit = [&](const Region& sr, const Region& dr) {
    if (stage_buf < 0) {
      out.push_back(CopyPair{sr, dr});
      return;
    }
    const Region& home = pack ? sr : dr;
    Region st = ContiguousRegion(stage_buf, *stage_off, home.Bytes());
    *stage_off += home.Bytes();
    out.push_back(pack ? CopyPair{home, st} : CopyPair{st, home});
  };
  if (h.simple) {
    emit(h.src_region, h.dst_region);
    return;
  }
  std::optional<Region> sr, dr;
  std::vector<Box> todo{pt.box};  // rare: split along the outermost dimension, row-major order
  while (!todo.empty()) {
    Box x = todo.back();
    todo.pop_back();
    sr = BoxRegion(h.src_buffer, h.src_offset, h.src_piece->stride, h.src_piece->box, x, prob.elem_bytes);
    dr = BoxRegion(h.dst_buffer, h.dst_offset, h.dst_piece->stride, h.dst_piece->box, x, prob.elem_bytes);
    if (sr && dr) {
      emit(*sr, *dr);
      continue;
    }
    const int d = OutermostSplitDim(x);
    for (int64_t u = x.hi[d] - 1; u >= x.lo[d]; --u) {
      Box sub = x;
      sub.lo[d] = u, sub.hi[d] = u + 1;
      todo.push_back(sub);
    }
  }
}

bool Waved(const Segment& sg) { return sg.hop == 0 && (sg.relay ? sg.send_direct : sg.recv_direct); }

void AppendHomes(const Problem& prob, const RefitBuffers& refit, const ScratchVector<Part>& parts,
                 ScratchVector<Home>& homes) {
  homes.reserve(homes.size() + parts.size());
  // In blocks: parts' fragments and destination pieces are scattered (parts in sender order); loops that load the
  // fragments and prefetch the pieces keep many misses in flight, and HomeOf finds them cached (deepseek-v3: -35 %).
  constexpr size_t kBlock = 64;
  const Fragment* frag[kBlock];
  for (size_t k0 = 0; k0 < parts.size(); k0 += kBlock) {
    const size_t k1 = std::min(parts.size(), k0 + kBlock);
    for (size_t k = k0; k < k1; ++k) frag[k - k0] = &prob.FragmentOf(parts[k].dst_rank, parts[k].frag);
    for (size_t k = k0; k < k1; ++k)
      __builtin_prefetch(&prob.dst.ShardOf(parts[k].dst_rank).pieces[frag[k - k0]->dst_piece]);
    for (size_t k = k0; k < k1; ++k) homes.push_back(HomeOf(prob, refit, parts[k]));
  }
}

bool InWave(const Segment& sg, int32_t w, int32_t waves, const std::vector<double>& ends,
            const ScratchVector<Home>& homes, const std::vector<BufferUse>& buffers, const RangeWrites& writes) {
  if (Waved(sg) && !sg.relay)
    return WaveStartBytes(sg.bytes, w + 1, waves, ends) > WaveStartBytes(sg.bytes, w, waves, ends);
  int32_t latest = 0;
  std::vector<WavePiece> pieces;
  for (int64_t k = sg.first_part; sg.relay && k < sg.first_part + sg.num_parts; ++k) {
    const int32_t written = buffers[homes[k].src_buffer].write_wave;
    latest = std::max(latest, written);
    if (!Waved(sg)) continue;
    writes.Pieces(homes[k].src_region, written, pieces);
    for (const WavePiece& x : pieces)
      if (x.wave == w) return true;
  }
  return !Waved(sg) && latest == w;
}

std::vector<int64_t> PartRotations(const Schedule& sc) {
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int64_t>> senders;  // (sender, round) -> (J, next j)
  auto rotated = [](const Segment& g) { return g.relay && g.PerPart() && g.num_parts > 1; };
  for (const Segment& g : sc.segments)
    if (rotated(g)) ++senders[{g.src_gpu, g.round}].first;
  std::vector<int64_t> rot;
  if (senders.empty()) return rot;
  rot.assign(sc.segments.size(), 0);
  for (size_t i = 0; i < sc.segments.size(); ++i) {
    const Segment& g = sc.segments[i];
    if (!rotated(g)) continue;
    auto& [count, next] = senders[{g.src_gpu, g.round}];
    rot[i] = next++ * g.num_parts / count;
  }
  return rot;
}

}  // namespace reshard::emitter_internal
