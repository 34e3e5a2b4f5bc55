// ScenarioFingerprint (model/scenario.h): a stable hash of what a plan is
// made for. Plans record it (plan/plan.h, Plan::scenario_fingerprint) so a
// plan carried to another cluster, model or layout is refused before any work.
//
// The hashed text is canonical: the cluster's own fingerprint (topology,
// memory, link numbers), the training and destination dtypes, every tensor's
// name and shape in inventory order, and both layouts with their GPU lists.
// Memory state and planning options are left out on purpose: they change which
// plan is best, not whether a plan moves the right bytes to the right GPUs.
// O(tensors + GPUs).
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "model/hash.h"
#include "model/scenario.h"

namespace reshard {

namespace {

std::string List(const std::vector<int32_t>& v) { return fmt::format("[{}]", fmt::join(v, ",")); }

}  // namespace

std::string ScenarioFingerprint(const Scenario& s) {
  std::string text = "reshard-scenario-v1\n";
  text += fmt::format("cluster={}\ndtype={}\ndestination_dtype={}\n", s.cluster.Fingerprint(), DTypeName(s.dtype),
                      DTypeName(s.destination_dtype));
  if (s.quantization) text += fmt::format("quantization={}\n", QuantConfigText(*s.quantization));
  text += fmt::format("tensors={}\n", s.model.tensors.size());
  for (const TensorSpec& t : s.model.tensors) {
    text += t.name;
    text += ':';
    for (int d = 0; d < t.shape.ndim; ++d) text += fmt::format("{}{}", d == 0 ? "" : "x", t.shape.dim[d]);
    text += '\n';
  }
  const SourceParallel& a = s.source;
  text += fmt::format("source=tp{},pp{},vpp{},ep{},etp{},dp{},cp{};pp_layers={};gpus={}\n", a.tp, a.pp, a.vpp, a.ep,
                      a.etp, a.dp, a.cp, List(a.pp_layers), List(s.source_gpus));
  const DestinationParallel& b = s.destination;
  text += fmt::format("destination=tp{},pp{},ep{},dp{};pp_layers={};gpus={};placement={}\n", b.tp, b.pp, b.ep, b.dp,
                      List(b.pp_layers), List(s.destination_gpus), s.destination_placement_free ? "free" : "fixed");
  return fmt::format("{:016x}", Fnv1a(text));
}

}  // namespace reshard
