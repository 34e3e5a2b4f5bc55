// PlanScenarioProblems (plan/plan.h): is this plan.json a plan for that
// scenario? Plans travel (made on a laptop, run on a GPU cluster), so before
// any work the CLI compares the plan with the scenario the user says it runs
// on: the cluster (fingerprint; the differing fields are named), the tensors
// (recomputed from the plan itself, so hand-edited sizes show even when the
// plan is still self-consistent and passes Verify) and the recorded
// ScenarioFingerprint (layouts and GPU lists). O(tensors + cluster fields).
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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
      if (path.empty() && (key == "name" || key == "measured" || key == "profile_source" || key == "fingerprint"))
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
  if (p.tensors.size() != s.model.tensors.size()) {
    out.push_back(fmt::format("the plan has {} tensors but the scenario's model '{}' has {}", p.tensors.size(),
                              s.model.config.name, s.model.tensors.size()));
  } else {
    size_t differing = 0;
    for (size_t i = 0; i < p.tensors.size(); ++i) {
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
  return out;
}

}  // namespace reshard
