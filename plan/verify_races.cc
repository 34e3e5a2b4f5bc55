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
  std::vector<const ByteAccess*> open_writes, open_reads;
  auto close_before = [](std::vector<const ByteAccess*>& open, int64_t offset) {
    std::erase_if(open, [&](const ByteAccess* a) { return a->end <= offset; });
  };
  for (int32_t b = 0; b < buffers; ++b) {
    const auto first = sorted.begin() + start[b], last = sorted.begin() + start[b + 1];
    std::sort(first, last, [](const ByteAccess& x, const ByteAccess& y) {
      if (x.begin != y.begin) return x.begin < y.begin;
      if (x.op != y.op) return x.op < y.op;
      return x.write < y.write;
    });
    open_writes.clear();
    open_reads.clear();
    for (auto it = first; it != last; ++it) {
      const ByteAccess& a = *it;
      close_before(open_writes, a.begin);
      if (a.write) close_before(open_reads, a.begin);  // reads meet writes only: pruned when a write looks
      auto meet = [&](const std::vector<const ByteAccess*>& open) {
        for (const ByteAccess* o : open)
          if (o->op != a.op && RegionsOverlap(*o->region, *a.region)) conflict(*o, a);
      };
      meet(open_writes);
      if (a.write) meet(open_reads);
      (a.write ? open_writes : open_reads).push_back(&a);
    }
  }
}

}  // namespace reshard
