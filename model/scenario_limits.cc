// Bounds on what a scenario asks of the planner (model/scenario.h,
// CheckSegmentBytes): the work a segment size implies is checked before any
// allocation, so that a tiny or huge size is refused with its numbers rather
// than running away or dividing by zero.
#include <fmt/format.h>

#include "model/checked.h"
#include "model/error.h"
#include "model/layout.h"
#include "model/scenario.h"

namespace reshard {

std::string SegmentBytesProblem(const Scenario& s, int64_t segment_bytes, int64_t destination_bytes) {
  if (segment_bytes < kMinSegmentBytes)
    return fmt::format("segment_bytes below 4 KiB ({} bytes): every segment costs an NCCL launch; give at least 4KiB "
                       "(or auto)",
                       segment_bytes);
  if (segment_bytes > s.cluster.gpu_memory_bytes)
    return fmt::format("{} is more than a GPU's memory ({}): a segment is staged on a GPU", FormatBytes(segment_bytes),
                       FormatBytes(s.cluster.gpu_memory_bytes));
  // Every destination byte travels in some segment (or a direct transfer), so
  // the destination's bytes / segment_bytes bounds the planner's work.
  const int64_t bytes = destination_bytes;
  const int64_t segments = bytes / segment_bytes + (bytes % segment_bytes != 0);
  if (segments > kMaxSegments) {
    const int64_t least = (bytes + kMaxSegments - 1) / kMaxSegments;
    return fmt::format("would cut the destination's {} into {} segments, more than the {} reshard plans; give at "
                       "least {} (or auto)",
                       FormatBytes(bytes), segments, kMaxSegments, FormatBytes(least));
  }
  return "";
}

int64_t DestinationBytes(const Scenario& s, const std::string& file) {
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, file);
  int64_t bytes = 0;
  for (int32_t r = 0; r < dst.Ranks(); ++r) bytes = checked::Add(bytes, dst.RankBytes(r), {file, "destination"});
  return bytes;
}

void CheckSegmentBytes(const Scenario& s, int64_t segment_bytes, const std::string& file, const std::string& field) {
  const std::string problem = SegmentBytesProblem(s, segment_bytes, DestinationBytes(s, file));
  if (!problem.empty()) throw InputError(file, field, problem);
}

}  // namespace reshard
