// PlanScenarioProblems (plan/plan.h): is this plan.json a plan for that
// scenario? Plans travel (made on a laptop, run on a GPU cluster), so before
// any work the CLI compares the plan with the scenario the user says it runs
// on: the cluster (fingerprint; the differing fields are named), the tensors
// (recomputed from the plan itself, so hand-edited sizes show even when the
// plan is still self-consistent and passes Verify) and the recorded
// ScenarioFingerprint (layouts and GPU lists), then the plan's destination
// pieces against the scenario's destination layout (DestinationPieceProblems).
// O(tensors + cluster fields + P log P) for P destination pieces.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "model/layout.h"
#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard {

namespace {

constexpr size_t kMaxListed = 5;

// Leaves of a cluster's JSON as "path=value", labels left out (they do not
// enter the fingerprint either).
void Flatten(const nlohmann::json& j, const std::string& path, std::vector<std::pair<std::string, std::string>>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (path.empty() && (key == "name" || key == "measured" || key == "profile_source" || key == "network_measured" ||
                            key == "network_source" || key == "fingerprint"))
        continue;
      Flatten(value, path.empty() ? key : path + "." + key, out);
    }
  } else if (j.is_array() && !j.empty() && j.front().is_object()) {
    for (size_t i = 0; i < j.size(); ++i) Flatten(j[i], fmt::format("{}[{}]", path, i), out);
  } else {
    out.emplace_back(path, j.dump());
  }
}

// "cluster.gpu_memory_bytes: 85899345920 in the plan, 150323855360 here", ...
std::vector<std::string> ClusterDifferences(const Cluster& planned, const Cluster& here) {
  nlohmann::json a, b;
  to_json(a, planned);
  to_json(b, here);
  std::vector<std::pair<std::string, std::string>> fa, fb;
  Flatten(a, "", fa);
  Flatten(b, "", fb);
  std::sort(fa.begin(), fa.end());
  std::sort(fb.begin(), fb.end());
  std::vector<std::string> out;
  size_t i = 0, k = 0;  // a merge of the two sorted lists
  while (i < fa.size() || k < fb.size()) {
    if (k == fb.size() || (i < fa.size() && fa[i].first < fb[k].first)) {
      out.push_back(fmt::format("cluster.{}: {} in the plan, absent here", fa[i].first, fa[i].second));
      ++i;
    } else if (i == fa.size() || fb[k].first < fa[i].first) {
      out.push_back(fmt::format("cluster.{}: absent in the plan, {} here", fb[k].first, fb[k].second));
      ++k;
    } else {
      if (fa[i].second != fb[k].second)
        out.push_back(fmt::format("cluster.{}: {} in the plan, {} here", fa[i].first, fa[i].second, fb[k].second));
      ++i, ++k;
    }
  }
  return out;
}

std::string ShapeText(const Shape& s) {
  std::string t = "[";
  for (int d = 0; d < s.ndim; ++d) t += fmt::format("{}{}", d == 0 ? "" : ", ", s.dim[d]);
  return t + "]";
}

// What a destination piece is, independent of where the plan put it in memory:
// the tensor, the box and the element strides (the local layout's order).
struct PieceKey {
  int32_t tensor = -1;
  Box box;
  Extents stride{0, 0, 1};
  friend auto operator<=>(const PieceKey&, const PieceKey&) = default;
  friend bool operator==(const PieceKey&, const PieceKey&) = default;
};

std::string KeyText(const Plan& p, const PieceKey& k) {
  std::string box;
  for (int d = 0; d < k.box.ndim; ++d) box += fmt::format("{}[{}, {})", d == 0 ? "" : " x ", k.box.lo[d], k.box.hi[d]);
  const std::string name = k.tensor >= 0 && k.tensor < static_cast<int32_t>(p.tensors.size())
                               ? p.tensors[k.tensor].name
                               : fmt::format("tensor {}", k.tensor);
  return fmt::format("'{}' {}", name, box);
}

// The first piece where two sorted lists differ: "'t' [0, 8) x [0, 4) is missing".
std::string FirstDifference(const Plan& p, const std::vector<PieceKey>& held, const std::vector<PieceKey>& wanted) {
  auto [h, w] = std::mismatch(held.begin(), held.end(), wanted.begin(), wanted.end());
  if (h == held.end() && w == wanted.end()) return "the same pieces as that rank, given to more GPUs than ranks hold them";
  if (w != wanted.end() && (h == held.end() || *w < *h)) return fmt::format("{} is missing", KeyText(p, *w));
  return fmt::format("{} is not in the scenario's layout there", KeyText(p, *h));
}

// The destination pieces the executor checks byte by byte must be the ones the
// scenario's destination layout asks for, so a plan whose destination list was
// edited (pieces dropped, moved to another GPU, boxes changed) cannot verify a
// refit the user did not ask for. Each GPU's pieces, sorted, must equal the
// shard of the destination rank on it (with placement 'auto' the planner may
// permute ranks over the destination GPUs: each GPU's pieces must then be one
// rank's shard, each shard used as often as ranks hold it). Where the plan put
// a piece in memory (buffer, offset) is the plan's choice; Verify checks it.
// O(P log P) time for P destination pieces, one index per piece of memory.
std::vector<std::string> DestinationPieceProblems(const Plan& p, const Scenario& s) {
  std::vector<std::string> out;
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  const int32_t gpus = std::max(s.cluster.Gpus(), p.Gpus());
  // A quantized plan lays its destination out anew (fp8 values and scales
  // beside bf16 pieces): its pieces are compared by tensor and box, values
  // standing for the tensor they quantize; scales follow from the values.
  const bool quantized = std::any_of(p.tensors.begin(), p.tensors.end(),
                                     [](const PlanTensor& t) { return t.quant.role != QuantRole::kNone; });
  auto stride_key = [&](const Extents& e) { return quantized ? Extents{0, 0, 0} : e; };
  std::vector<std::vector<PieceKey>> shard_keys(dst.shards.size());
  for (size_t k = 0; k < dst.shards.size(); ++k) {
    for (const Piece& pc : dst.shards[k].pieces) shard_keys[k].push_back({pc.tensor, pc.box, stride_key(pc.stride)});
    std::sort(shard_keys[k].begin(), shard_keys[k].end());
  }
  std::vector<std::vector<int32_t>> ranks_on(gpus);
  bool distinct = true;
  for (int32_t r = 0; r < dst.Ranks() && r < static_cast<int32_t>(s.destination_gpus.size()); ++r) {
    const int32_t g = s.destination_gpus[r];
    if (g < 0 || g >= gpus) continue;
    distinct = distinct && ranks_on[g].empty();
    ranks_on[g].push_back(r);
  }
  // Plan pieces by GPU (indices only; keys are built one GPU at a time).
  std::vector<std::vector<int32_t>> pieces_on(gpus);
  for (size_t i = 0; i < p.destinations.size(); ++i) {
    const int32_t b = p.destinations[i].buffer;
    if (b < 0 || b >= static_cast<int32_t>(p.buffers.size())) continue;  // Verify names it
    const int32_t t = p.destinations[i].tensor;
    if (t >= 0 && t < static_cast<int32_t>(p.tensors.size()) && p.tensors[t].quant.role == QuantRole::kScales) continue;
    const int32_t g = p.buffers[b].gpu;
    if (g >= 0 && g < gpus) pieces_on[g].push_back(static_cast<int32_t>(i));
  }
  auto held_on = [&](int32_t g) {
    std::vector<PieceKey> keys;
    keys.reserve(pieces_on[g].size());
    for (int32_t i : pieces_on[g]) {
      const ContentPiece& c = p.destinations[i];
      const TensorQuant& q = p.tensors[c.tensor].quant;
      keys.push_back({q.role == QuantRole::kValues ? q.of : c.tensor, c.box, stride_key(c.stride_elems)});
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  };
  auto report = [&](std::string what) {
    if (out.size() < kMaxListed) out.push_back(std::move(what));
    else if (out.size() == kMaxListed) out.push_back("... and more destination pieces differ");
  };
  if (!s.destination_placement_free || !distinct) {
    // Fixed placement (or GPUs listed twice): GPU g holds the shards of the ranks on it.
    for (int32_t g = 0; g < gpus && out.size() <= kMaxListed; ++g) {
      if (pieces_on[g].empty() && ranks_on[g].empty()) continue;
      std::vector<PieceKey> wanted;
      for (int32_t r : ranks_on[g]) {
        const auto& k = shard_keys[dst.rank_shard[r]];
        wanted.insert(wanted.end(), k.begin(), k.end());
      }
      if (ranks_on[g].size() > 1) std::sort(wanted.begin(), wanted.end());
      const std::vector<PieceKey> held = held_on(g);
      if (held != wanted)
        report(fmt::format("destinations on GPU {}: {} pieces where the scenario's destination layout puts {}; {}", g,
                           held.size(), wanted.size(), FirstDifference(p, held, wanted)));
    }
    return out;
  }
  // Placement 'auto': each destination GPU holds one rank's shard.
  std::vector<int32_t> left(dst.shards.size(), 0);
  for (int32_t r = 0; r < dst.Ranks(); ++r) ++left[dst.rank_shard[r]];
  std::map<std::pair<size_t, PieceKey>, std::vector<int32_t>> by_first;  // (size, first key) -> shards
  for (size_t k = 0; k < shard_keys.size(); ++k)
    by_first[{shard_keys[k].size(), shard_keys[k].empty() ? PieceKey{} : shard_keys[k].front()}].push_back(
        static_cast<int32_t>(k));
  for (int32_t g = 0; g < gpus && out.size() <= kMaxListed; ++g) {
    if (pieces_on[g].empty() && ranks_on[g].empty()) continue;
    const std::vector<PieceKey> held = held_on(g);
    if (ranks_on[g].empty()) {
      report(fmt::format("destinations on GPU {}: {} pieces, but GPU {} is not a destination GPU of the scenario", g,
                         held.size(), g));
      continue;
    }
    int32_t found = -1;
    if (auto it = by_first.find({held.size(), held.empty() ? PieceKey{} : held.front()}); it != by_first.end())
      for (int32_t k : it->second)
        if (left[k] > 0 && shard_keys[k] == held) found = k;
    if (found >= 0) {
      --left[found];
      continue;
    }
    const auto& own = shard_keys[dst.rank_shard[ranks_on[g].front()]];
    report(fmt::format("destinations on GPU {}: {} pieces that are no destination rank's shard (or one more time "
                       "than ranks hold it); against the rank the scenario places there: {}",
                       g, held.size(), FirstDifference(p, held, own)));
  }
  return out;
}

}  // namespace

std::vector<std::string> PlanScenarioProblems(const Plan& p, const Scenario& s) {
  std::vector<std::string> out;
  // 1. The cluster.
  const std::string here = s.cluster.Fingerprint();
  if (p.cluster_fingerprint != here || p.cluster.Fingerprint() != here) {
    std::vector<std::string> diff = ClusterDifferences(p.cluster, s.cluster);
    std::string what = fmt::format("made for cluster '{}' (fingerprint {}) but scenario '{}' runs on cluster '{}' "
                                   "(fingerprint {})",
                                   p.cluster.name, p.cluster_fingerprint, s.name, s.cluster.name, here);
    if (!diff.empty()) {
      const size_t n = std::min(diff.size(), kMaxListed);
      what += fmt::format(": {}", fmt::join(diff.begin(), diff.begin() + static_cast<std::ptrdiff_t>(n), "; "));
      if (diff.size() > n) what += fmt::format("; and {} more", diff.size() - n);
    }
    out.push_back(std::move(what));
  }
  // 2. The tensors, from the plan itself (what a hand edit changes).
  // A quantized destination adds values and scales tensors after the model's.
  size_t quant_tensors = 0;
  for (size_t i = s.model.tensors.size(); i < p.tensors.size(); ++i)
    quant_tensors += s.quantization && p.tensors[i].quant.role != QuantRole::kNone;
  if (p.tensors.size() - quant_tensors != s.model.tensors.size() || p.tensors.size() < s.model.tensors.size()) {
    out.push_back(fmt::format("the plan has {} tensors but the scenario's model '{}' has {}", p.tensors.size(),
                              s.model.config.name, s.model.tensors.size()));
  } else {
    size_t differing = 0;
    for (size_t i = 0; i < s.model.tensors.size(); ++i) {
      const PlanTensor& a = p.tensors[i];
      const TensorSpec& b = s.model.tensors[i];
      std::string why;
      if (a.name != b.name) why = fmt::format("is '{}' in the plan but '{}' in the scenario's model", a.name, b.name);
      else if (a.shape != b.shape)
        why = fmt::format("has shape {} in the plan but {} in the scenario's model", ShapeText(a.shape),
                          ShapeText(b.shape));
      else if (a.dtype != s.dtype)
        why = fmt::format("has dtype {} in the plan but the scenario trains in {}", DTypeName(a.dtype),
                          DTypeName(s.dtype));
      if (why.empty()) continue;
      ++differing;
      if (differing <= kMaxListed) out.push_back(fmt::format("tensors[{}] '{}' {}", i, a.name, why));
    }
    if (differing > kMaxListed) out.push_back(fmt::format("... and {} more tensors differ", differing - kMaxListed));
  }
  // 3. Layouts and GPU lists: only the recorded fingerprint knows them.
  const std::string fp = ScenarioFingerprint(s);
  if (out.empty() && p.scenario_fingerprint.empty())
    out.push_back(fmt::format("scenario_fingerprint is missing, so the plan's layouts and GPU lists cannot be checked "
                              "against scenario '{}' (fingerprint {}); plan the scenario again",
                              s.name, fp));
  if (out.empty() && !p.scenario_fingerprint.empty() && p.scenario_fingerprint != fp)
    out.push_back(fmt::format("scenario_fingerprint {} does not match scenario '{}' (fingerprint {}): the layouts, "
                              "dtypes or GPU lists differ",
                              p.scenario_fingerprint, s.name, fp));
  // 4. The destination pieces the run will check (only once the rest matches:
  //    a plan for another layout has already been named).
  if (out.empty()) {
    for (std::string& d : DestinationPieceProblems(p, s)) out.push_back(std::move(d));
  }
  return out;
}

}  // namespace reshard
