// Memory at refit start (declared in model/scenario.h).
//
// Per GPU g, summing over the source ranks r placed on g:
//   training_weights = RankBytes(r)                         (the layout's local buffers, dtype bytes)
//   optimizer        = bytes_per_param * (dense_r / (dp*cp) + expert_r / edp)   distributed optimizer
//                    = bytes_per_param * (dense_r + expert_r)                    otherwise
//     dense_r  = parameters of r outside the stacked experts (buffer elements minus expert pieces),
//     expert_r = elements of r's expert pieces,
//     edp      = tp*cp*dp / (ep*etp), Megatron's expert-data-parallel size
//     (Megatron shards dense optimizer state over the DP x CP group and expert
//     state over the expert-data-parallel group); rounded up to whole bytes.
//     Offload is not applied: it is a choice the planner makes during the refit.
//   gradients        = grad_bytes_per_param * (dense_r + expert_r)  if keep_gradients
//     (Megatron's full-size fp32 main_grad buffer; not sharded by the distributed optimizer)
// plus, per GPU: kv_cache on every destination GPU; reserve and the CUDA
// context on every GPU that either side uses. Unused GPUs are all zero.
// Destination weights are not counted: the plan allocates them.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include <fmt/format.h>

#include "model/checked.h"
#include "model/error.h"
#include "model/scenario.h"

namespace reshard {

namespace {

bool IsExpert(TensorKind k) {
  return k == TensorKind::kExpertGate || k == TensorKind::kExpertUp || k == TensorKind::kExpertDown;
}

int64_t CeilBytes(double bytes, const checked::Source& at) { return checked::ToInt64(std::ceil(bytes - 1e-9), at); }

}  // namespace

std::vector<GpuMemoryAtStart> MemoryAtStart(const Scenario& s, const Layout& source) {
  const int32_t gpus = s.cluster.Gpus();
  RESHARD_CHECK(source.Ranks() == static_cast<int32_t>(s.source_gpus.size()), "layout does not match the scenario");
  std::vector<GpuMemoryAtStart> out(gpus);
  for (int32_t g = 0; g < gpus; ++g) out[g].gpu = g;

  // Split each distinct shard once into dense and expert elements: O(pieces).
  std::vector<int64_t> expert_elems(source.shards.size(), 0);
  for (size_t i = 0; i < source.shards.size(); ++i)
    for (const Piece& p : source.shards[i].pieces)
      if (IsExpert(s.model.tensors[p.tensor].kind)) expert_elems[i] += Volume(p.box);

  const SourceParallel& sp = s.source;
  const int64_t dp_cp = static_cast<int64_t>(sp.dp) * sp.cp;
  const int64_t edp = std::max<int64_t>(1, static_cast<int64_t>(sp.tp) * sp.cp * sp.dp / (int64_t{sp.ep} * sp.etp));
  const OptimizerConfig& opt = s.memory.optimizer;

  std::vector<bool> used(gpus, false);
  for (int32_t r = 0; r < source.Ranks(); ++r) {
    const int32_t g = s.source_gpus[r];
    RESHARD_CHECK(g >= 0 && g < gpus, "source GPU out of range");
    used[g] = true;
    const int32_t shard = source.rank_shard[r];
    const int64_t total = source.shards[shard].Elements();
    const int64_t expert = expert_elems[shard];
    const int64_t dense = total - expert;
    const checked::Source at{s.path, "source"};
    out[g].training_weights = checked::Add(out[g].training_weights, source.RankBytes(r), at);
    double opt_params = opt.distributed ? static_cast<double>(dense) / static_cast<double>(dp_cp) +
                                              static_cast<double>(expert) / static_cast<double>(edp)
                                        : static_cast<double>(total);
    const checked::Source opt_at{s.path, "memory.optimizer.bytes_per_param"};
    out[g].optimizer = checked::Add(out[g].optimizer, CeilBytes(opt_params * opt.bytes_per_param, opt_at), opt_at);
    if (s.memory.keep_gradients)
      out[g].gradients = checked::Add(out[g].gradients,
                                      CeilBytes(static_cast<double>(total) * s.memory.grad_bytes_per_param,
                                                {s.path, "memory.grad_bytes_per_param"}),
                                      {s.path, "memory.grad_bytes_per_param"});
  }
  for (int32_t g : s.destination_gpus) {
    RESHARD_CHECK(g >= 0 && g < gpus, "destination GPU out of range");
    used[g] = true;
    out[g].kv_cache = checked::Add(out[g].kv_cache, s.memory.kv_cache_bytes, {s.path, "memory.kv_cache"});
  }
  for (int32_t g = 0; g < gpus; ++g) {
    if (!used[g]) continue;
    out[g].reserve = s.memory.reserve_bytes;
    out[g].overheads = s.cluster.overheads.cuda_context_bytes;
    // Total() adds these unchecked: prove here that the sum fits.
    int64_t total = 0;
    for (int64_t part : {out[g].training_weights, out[g].gradients, out[g].optimizer, out[g].kv_cache,
                         out[g].reserve, out[g].overheads})
      total = checked::Add(total, part, {s.path, "memory"});
  }
  return out;
}

Feasibility CheckStartFits(const Scenario& s, const std::vector<GpuMemoryAtStart>& mem) {
  Feasibility f;
  const int64_t capacity = s.cluster.gpu_memory_bytes;
  for (const auto& m : mem) {
    int64_t missing = m.Total() - capacity;
    if (missing > f.missing_bytes) {  // strict: ties keep the lowest GPU id
      f.fits = false;
      f.gpu = m.gpu;
      f.missing_bytes = missing;
      f.message = fmt::format("GPU {} needs {} but has {}: {} missing", m.gpu, FormatBytes(m.Total()),
                              FormatBytes(capacity), FormatBytes(missing));
    }
  }
  return f;
}

// Whatever the plan, a GPU holds during the refit at least what it holds at
// the start, less the optimizer state the scenario lets the refit offload,
// plus the destination weights it receives. Not fitting that is exit 3 too.
Feasibility CheckRefitFloor(const Scenario& s, const std::vector<GpuMemoryAtStart>& mem,
                            const std::vector<int64_t>& destination_bytes) {
  const OptimizerConfig& opt = s.memory.optimizer;
  const double offloadable = opt.offload == OffloadMode::kNone       ? 0.0
                             : opt.offload == OffloadMode::kFraction ? opt.fraction
                                                                     : 1.0;
  Feasibility f;
  for (const GpuMemoryAtStart& m : mem) {
    const int64_t at_least = m.Total() - static_cast<int64_t>(offloadable * static_cast<double>(m.optimizer)) +
                             destination_bytes[static_cast<size_t>(m.gpu)];
    const int64_t missing = at_least - s.cluster.gpu_memory_bytes;
    if (missing > f.missing_bytes) {
      f.fits = false;
      f.gpu = m.gpu;
      f.missing_bytes = missing;
      f.message = fmt::format(
          "GPU {} needs at least {} during the refit (destination weights {} on top of {} in use{}) but has {}: {} "
          "missing whatever the plan",
          m.gpu, FormatBytes(at_least), FormatBytes(destination_bytes[static_cast<size_t>(m.gpu)]),
          FormatBytes(at_least - destination_bytes[static_cast<size_t>(m.gpu)]),
          offloadable > 0 && m.optimizer > 0 ? ", the optimizer state offloaded as far as memory.optimizer.offload allows"
                                             : "",
          FormatBytes(s.cluster.gpu_memory_bytes), FormatBytes(missing));
    }
  }
  return f;
}

std::vector<int64_t> DestinationFloorBytes(const Scenario& s, const Layout& destination) {
  std::vector<int64_t> bytes(static_cast<size_t>(s.cluster.Gpus()), 0);
  int64_t least = std::numeric_limits<int64_t>::max();
  for (int32_t r = 0; r < destination.Ranks(); ++r) least = std::min(least, destination.RankBytes(r));
  for (int32_t r = 0; r < destination.Ranks(); ++r)
    bytes[static_cast<size_t>(s.destination_gpus[static_cast<size_t>(r)])] +=
        s.destination_placement_free ? least : destination.RankBytes(r);
  return bytes;
}

Feasibility CheckRefitFits(const Scenario& s) {
  const Layout src = MakeSourceLayout(s.model, s.source, s.dtype, s.path);
  const Layout dst = MakeDestinationLayout(s.model, s.destination, s.destination_dtype, s.path);
  const std::vector<GpuMemoryAtStart> mem = MemoryAtStart(s, src);
  Feasibility f = CheckStartFits(s, mem);
  if (f.fits) f = CheckRefitFloor(s, mem, DestinationFloorBytes(s, dst));
  return f;
}

// Binary units with three significant figures: "512 B", "7.48 GiB", "151.2 GiB".
std::string FormatBytes(int64_t bytes) {
  if (bytes < 0) {
    if (bytes == std::numeric_limits<int64_t>::min()) return "-8.00 EiB";
    return fmt::format("-{}", FormatBytes(-bytes));
  }
  if (bytes < 1024) return fmt::format("{} B", bytes);
  static constexpr const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes) / 1024;
  size_t u = 0;
  while (v >= 1023.95 && u + 1 < std::size(kUnits)) v /= 1024, ++u;
  return v < 9.995 ? fmt::format("{:.2f} {}", v, kUnits[u]) : fmt::format("{:.1f} {}", v, kUnits[u]);
}

}  // namespace reshard
