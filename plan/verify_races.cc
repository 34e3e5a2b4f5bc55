// Verify's byte-race sweep (verify_races.h).
#include "plan/verify_races.h"

#include <algorithm>

namespace reshard {

void ForEachByteConflict(std::vector<ByteAccess> accesses,
                         const std::function<void(const ByteAccess&, const ByteAccess&)>& conflict) {
  // Only buffers something writes (sources, read by most copies, drop out), spans kept beside the ids; grouped
  // by buffer with a counting sort, then each buffer's accesses sorted by (offset, op, write).
  int32_t buffers = 0;
  for (const ByteAccess& a : accesses) buffers = std::max(buffers, a.buffer + 1);
  std::vector<int64_t> start(static_cast<size_t>(buffers) + 1, 0);
  std::vector<bool> written(buffers, false);
  for (const ByteAccess& a : accesses)
    if (a.write) written[a.buffer] = true;
  for (const ByteAccess& a : accesses)
    if (written[a.buffer]) ++start[a.buffer + 1];
  for (int32_t b = 0; b < buffers; ++b) start[b + 1] += start[b];
  std::vector<ByteAccess> sorted(start[buffers]);
  {
    std::vector<int64_t> fill(start.begin(), start.end() - 1);
    for (const ByteAccess& a : accesses) {
      if (!written[a.buffer]) continue;
      ByteAccess& s = sorted[fill[a.buffer]++];
      s = a;
      s.begin = a.region->offset_bytes;
      s.end = a.region->End();
    }
  }
  accesses = {};
  for (int32_t b = 0; b < buffers; ++b)
    std::sort(sorted.begin() + start[b], sorted.begin() + start[b + 1], [](const ByteAccess& x, const ByteAccess& y) {
      if (x.begin != y.begin) return x.begin < y.begin;
      if (x.op != y.op) return x.op < y.op;
      return x.write < y.write;
    });
  std::vector<const ByteAccess*> open_writes, open_reads;
  auto close_before = [](std::vector<const ByteAccess*>& open, int64_t offset) {
    std::erase_if(open, [&](const ByteAccess* a) { return a->end <= offset; });
  };
  for (size_t lo = 0; lo < sorted.size();) {
    size_t hi = lo;
    while (hi < sorted.size() && sorted[hi].buffer == sorted[lo].buffer) ++hi;
    open_writes.clear();
    open_reads.clear();
    for (size_t k = lo; k < hi; ++k) {
      const ByteAccess& a = sorted[k];
      close_before(open_writes, a.begin);
      if (a.write) close_before(open_reads, a.begin);  // reads meet writes only: pruned when a write looks
      auto meet = [&](const std::vector<const ByteAccess*>& open) {
        for (const ByteAccess* b : open)
          if (b->op != a.op && RegionsOverlap(*b->region, *a.region)) conflict(*b, a);
      };
      meet(open_writes);
      if (a.write) meet(open_reads);
      (a.write ? open_writes : open_reads).push_back(&a);
    }
    lo = hi;
  }
}

}  // namespace reshard
