// Which weights an FP8 refit quantizes at the source: the candidate
// placements the planner simulates (planner/quantize.h).
#include <algorithm>
#include <unordered_map>

#include "model/error.h"
#include "planner/quantize.h"
#include "planner/quantize_source.h"

namespace reshard {

namespace {

// Destination elements of each tensor with no copy on the destination's GPU
// (they cross a GPU boundary) and on its node (they cross the network).
struct Remote {
  std::vector<int64_t> gpu, node;
};

// Idea: per (GPU, tensor) and (node, tensor), the distinct boxes the
// trainer holds there (data-parallel replicas hold the same boxes; the boxes
// of one partition are disjoint), so a destination piece's local elements
// are the sum of its intersections with them. O(source pieces log +
// destination pieces x boxes per place).
Remote RemoteElements(const Scenario& s, const Layout& src, const Layout& dst) {
  const int64_t n = static_cast<int64_t>(s.model.tensors.size());
  using Places = std::unordered_map<int64_t, std::vector<Box>>;  // place * n + tensor -> boxes
  Places on_gpu, on_node;
  for (int32_t r = 0; r < src.Ranks(); ++r) {
    const int32_t g = s.source_gpus[r];
    for (const Piece& pc : src.ShardOf(r).pieces) {
      on_gpu[g * n + pc.tensor].push_back(pc.box);
      on_node[s.cluster.NodeOf(g) * n + pc.tensor].push_back(pc.box);
    }
  }
  for (Places* m : {&on_gpu, &on_node})
    for (auto& [key, boxes] : *m) {
      std::sort(boxes.begin(), boxes.end());
      boxes.erase(std::unique(boxes.begin(), boxes.end()), boxes.end());
    }
  auto local = [](const Places& m, int64_t key, const Box& box) {
    const auto it = m.find(key);
    int64_t v = 0;
    if (it != m.end())
      for (const Box& b : it->second)
        if (const std::optional<Box> x = Intersect(b, box)) v += Volume(*x);
    return std::min(v, Volume(box));
  };
  Remote out{std::vector<int64_t>(n, 0), std::vector<int64_t>(n, 0)};
  for (int32_t r = 0; r < dst.Ranks(); ++r) {
    const int32_t g = s.destination_gpus[r];
    for (const Piece& pc : dst.ShardOf(r).pieces) {
      const int64_t v = Volume(pc.box);
      out.gpu[pc.tensor] += v - local(on_gpu, g * n + pc.tensor, pc.box);
      out.node[pc.tensor] += v - local(on_node, s.cluster.NodeOf(g) * n + pc.tensor, pc.box);
    }
  }
  return out;
}

bool IsExperts(TensorKind k) {
  return k == TensorKind::kExpertGate || k == TensorKind::kExpertUp || k == TensorKind::kExpertDown;
}

}  // namespace

std::vector<QuantizePlacement> QuantizePlacements(const Scenario& s) {
  RESHARD_CHECK(s.quantization.has_value(), "a quantized destination");
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.dtype, s.path);
  const std::vector<bool> can = SourceQuantizable(s, src);
  const Remote remote = RemoteElements(s, src, dst);
  const size_t n = s.model.tensors.size();
  std::vector<QuantizePlacement> out;
  auto add = [&](std::string rule, auto at_source) {
    QuantizePlacement c{std::move(rule), std::vector<bool>(n, false), 0};
    for (size_t t = 0; t < n; ++t) {
      c.at_source[t] = can[t] && at_source(t);
      c.at_source_count += c.at_source[t];
    }
    if (!out.empty() && c.at_source_count == 0) return;
    for (const QuantizePlacement& o : out)
      if (o.at_source == c.at_source) return;
    out.push_back(std::move(c));
  };
  add("destination", [](size_t) { return false; });
  add("source", [](size_t) { return true; });
  add("gpu-boundary", [&](size_t t) { return remote.gpu[t] > 0; });
  add("node-boundary", [&](size_t t) { return remote.node[t] > 0; });
  add("experts", [&](size_t t) { return IsExperts(s.model.tensors[t].kind); });
  add("dense", [&](size_t t) { return !IsExperts(s.model.tensors[t].kind); });
  return out;
}

}  // namespace reshard
