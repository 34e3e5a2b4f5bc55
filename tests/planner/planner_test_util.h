// Helpers shared by the planner tests: scenarios written inline, and a check
// that runs a plan on element ids.
//
// RunOnElementIds executes a plan in op order on element ids instead of
// bytes: every source element holds its id (tensor base + row-major index),
// copies and send/recv move ids, and afterwards every destination element
// must hold its own id, written exactly once. Plan order is a valid order for
// the plans tested here: every pack precedes its send, every send is
// followed by its recv, every unpack follows its recv.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "model/scenario.h"
#include "plan/plan.h"

namespace reshard::planner_testing {

inline constexpr const char* kDefaultMemory =
    "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache: 64MiB, reserve: 16MiB}\n";

// A scenario in YAML; `memory` replaces kDefaultMemory when not empty.
inline std::string Yaml(const std::string& model, const std::string& cluster, const std::string& src,
                        const std::string& dst, const std::string& memory = "", const std::string& name = "t") {
  return "name: " + name + "\nmodel: " + model + "\ndtype: bf16\ncluster: " + cluster + "\nsource: " + src +
         "\ndestination: " + dst + "\n" + (memory.empty() ? std::string(kDefaultMemory) : memory);
}

inline Scenario FromYaml(const std::string& yaml) { return ParseScenario(yaml, "<test>"); }

// tiny-llama tp2 on node 0 -> tp2 dp2 on node 1 of two: plans with and
// without relays (each box reaches two GPUs of node 1).
inline Scenario TwoNodeRelayScenario() {
  return FromYaml(Yaml("tiny-llama", "{preset: dgx-h200, nodes: 2}", "{tp: 2, gpus: \"0-1\"}",
                       "{tp: 2, dp: 2, gpus: \"8-11\"}", "memory: {optimizer: {bytes_per_param: 12, offload: auto}}\n",
                       "relay"));
}

// tiny-llama TP2 on node 0 -> TP4 on node 1 of two: with relays, the norms
// (replicated over TP) feed relays, the split weights (most bytes) do not.
inline Scenario Tp2ToTp4RelayScenario() {
  return FromYaml(Yaml("tiny-llama", "{preset: dgx-h200, nodes: 2}", "{tp: 2, gpus: \"0-1\"}",
                       "{tp: 4, gpus: \"8-11\"}"));
}

// qwen3-30b-a3b Megatron EP8 x PP2 x DP64 -> vLLM TP2 x DP64 EP128 on 16
// DGX H200, colocated: relays and sender relays both matter.
inline Scenario Qwen30ColocatedEp() {
  return FromYaml(Yaml("qwen3-30b-a3b", "{preset: dgx-h200, nodes: 16}", "{engine: megatron, tp: 1, pp: 2, ep: 8, dp: 64}",
                       "{engine: vllm, tp: 2, dp: 64, ep: 128}",
                       "memory: {optimizer: {bytes_per_param: 12, offload: auto}, kv_cache_gib: 10, "
                       "reserve_gib: 2}\n",
                       "qwen3-30b-a3b-colocated-ep"));
}

// A named scenario of a parameterised test.
struct Case {
  const char* name;
  std::string yaml;
};
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Layout changes both planners must handle: dense, tied embeddings, MoE,
// MLA; colocated, disaggregated over NVLink and the network, mixed; one and
// two nodes.
inline std::vector<Case> LayoutCases() {
  const std::string x2 = "h200-x2", dgx = "dgx-h100", dgx2 = "{preset: dgx-h100, nodes: 2}";
  return {
      {"dense_tp2_to_tp1dp2", Yaml("tiny-llama", x2, "{tp: 2}", "{tp: 1, dp: 2}")},
      {"dense_identity_all_local", Yaml("tiny-llama", x2, "{tp: 2}", "{tp: 2}")},
      {"dense_dp2_to_tp2", Yaml("tiny-llama", x2, "{tp: 1, dp: 2}", "{tp: 2}")},
      {"dense_pp2_to_tp2", Yaml("tiny-llama", x2, "{pp: 2}", "{tp: 2}")},
      {"dense_vpp_to_tp2dp2", Yaml("tiny-llama", dgx, "{tp: 1, pp: 2, vpp: 2, gpus: \"0-3\"}",
                                   "{tp: 2, dp: 2, gpus: \"0-3\"}")},
      {"dense_uneven_pp", Yaml("tiny-llama", dgx, "{pp: 2, pp_layers: [1, 3], dp: 2, gpus: \"0-3\"}",
                               "{tp: 2, dp: 2, gpus: \"0-3\"}")},
      {"dense_to_destination_pp", Yaml("tiny-llama", dgx, "{tp: 2, dp: 2, gpus: \"0-3\"}", "{tp: 2, pp: 2, gpus: \"0-3\"}")},
      {"tied_tp2_to_tp1dp2", Yaml("tiny-qwen2", x2, "{tp: 2}", "{tp: 1, dp: 2}")},
      {"moe_ep2_to_tp2", Yaml("tiny-moe", x2, "{tp: 1, ep: 2, dp: 2}", "{tp: 2}")},
      {"moe_etp_change", Yaml("tiny-moe", dgx, "{tp: 2, ep: 2, etp: 2, dp: 2, gpus: \"0-3\"}", "{tp: 4, gpus: \"0-3\"}")},
      {"mla_ep2pp2_to_tp4", Yaml("tiny-mla", dgx, "{pp: 2, ep: 2, dp: 2, gpus: \"0-3\"}", "{tp: 4, gpus: \"0-3\"}")},
      {"disaggregated_nvlink", Yaml("tiny-llama", dgx, "{tp: 2, gpus: \"0-1\"}", "{tp: 2, dp: 2, gpus: \"2-5\"}")},
      {"disaggregated_network", Yaml("tiny-moe", dgx2, "{tp: 2, ep: 4, dp: 4, gpus: \"0-7\"}",
                                     "{tp: 4, dp: 2, gpus: \"8-15\"}")},
      {"mixed_overlap", Yaml("tiny-llama", dgx, "{tp: 2, dp: 2, gpus: \"0-3\"}", "{tp: 4, gpus: \"2-5\"}")},
      {"multinode_mla_dp_change", Yaml("tiny-mla", dgx2, "{tp: 2, pp: 2, ep: 4, dp: 4}", "{tp: 8, dp: 2}")},
  };
}

// Bytes the destination pieces hold: what every refit must write once.
inline int64_t DestinationBytes(const Plan& p) {
  int64_t n = 0;
  for (const ContentPiece& c : p.destinations) n += Volume(c.box) * DTypeBytes(p.tensors[c.tensor].dtype);
  return n;
}

struct ElementRun {
  int64_t written = 0;      // destination elements written
  int64_t sent_bytes = 0;   // by sends
  int64_t local_bytes = 0;  // into destination buffers by copies outside any segment
};

// Runs `p` in op order on element ids and checks every destination element
// (right value, exactly one producer). `check_not_resent`: also fails when a
// send carries an element that its receiving GPU held at the start (reshard's
// planner promises it; the baselines do not).
// Id: the element id type, int32_t where the plan's elements allow: half the
// shadow memory (filling fresh pages for the shadows is much of the run's time).
template <typename Id>
ElementRun RunOnElementIdsAs(const Plan& p, bool check_not_resent) {
  ElementRun ex;
  const int32_t nt = static_cast<int32_t>(p.tensors.size());
  std::vector<int64_t> tbase(nt + 1, 0);
  for (int32_t t = 0; t < nt; ++t) tbase[t + 1] = tbase[t] + p.tensors[t].shape.Elements();
  const int64_t eb = DTypeBytes(p.tensors.empty() ? DType::kBF16 : p.tensors[0].dtype);
  std::vector<std::vector<Id>> mem(p.buffers.size());
  std::vector<std::vector<uint8_t>> writes(p.buffers.size());  // producers per element, saturating at 255
  auto shadow = [&](int32_t b) -> std::vector<Id>& {
    if (mem[b].empty()) mem[b].assign(p.buffers[b].bytes / eb, -1);
    return mem[b];
  };
  auto moves_weights = [&](BufferRole r) {
    return r == BufferRole::kSourceWeights || r == BufferRole::kDestinationWeights || r == BufferRole::kStaging;
  };
  auto for_each = [&](const ContentPiece& c, auto&& fn) {
    const Box& b = c.box;
    const Shape& sh = p.tensors[c.tensor].shape;
    Extents idx = b.lo;
    if (Empty(b)) return;
    for (;;) {
      int64_t off = c.offset_elems;
      for (int d = 0; d < b.ndim; ++d) off += (idx[d] - b.lo[d]) * c.stride_elems[d];
      fn(off, static_cast<Id>(tbase[c.tensor] + LinearIndex(sh, idx)));
      int d = b.ndim - 1;
      for (; d >= 0; --d) {
        if (++idx[d] < b.hi[d]) break;
        idx[d] = b.lo[d];
      }
      if (d < 0) break;
    }
  };
  std::vector<std::vector<bool>> on_gpu;  // [gpu][element]: held there at the start
  if (check_not_resent) on_gpu.assign(p.Gpus(), std::vector<bool>(tbase[nt], false));
  for (const ContentPiece& c : p.sources) {
    auto& m = shadow(c.buffer);
    const int32_t g = p.buffers[c.buffer].gpu;
    for_each(c, [&](int64_t off, Id id) {
      m[off] = id;
      if (check_not_resent) on_gpu[g][id] = true;
    });
  }
  // A region as runs of contiguous elements (offset, length), in byte order.
  using Runs = std::vector<std::pair<int64_t, int64_t>>;
  auto runs_of = [&](const Region& r) {
    Runs out;
    for (int64_t pl = 0; pl < r.planes; ++pl)
      for (int64_t row = 0; row < r.rows; ++row)
        out.emplace_back((r.offset_bytes + pl * r.plane_stride_bytes + row * r.row_stride_bytes) / eb, r.row_bytes / eb);
    return out;
  };
  auto gather = [&](int32_t b, const Runs& runs) {
    std::vector<Id> v;
    int64_t total = 0;
    for (auto [o, n] : runs) total += n;
    v.reserve(static_cast<size_t>(total));
    const auto& m = shadow(b);
    for (auto [o, n] : runs) v.insert(v.end(), m.begin() + o, m.begin() + o + n);
    return v;
  };
  // Writes `vals` into the runs of buffer b, counting producers of destination elements.
  auto scatter = [&](int32_t b, const Runs& runs, const std::vector<Id>& vals) {
    auto& dm = shadow(b);
    const bool dest = p.buffers[b].role == BufferRole::kDestinationWeights;
    auto& w = writes[b];
    if (dest && w.empty()) w.assign(p.buffers[b].bytes / eb, 0);
    size_t k = 0;
    for (auto [o, n] : runs) {
      std::copy(vals.begin() + k, vals.begin() + k + n, dm.begin() + o);
      if (dest)
        for (int64_t x = o; x < o + n; ++x) w[x] += w[x] < 255;
      k += n;
    }
    if (dest) ex.written += static_cast<int64_t>(vals.size());
    return dest;
  };
  std::map<int32_t, std::vector<Id>> in_flight;
  for (const Op& op : p.ops) {
    if (op.kind == OpKind::kCopy) {
      for (const CopyPair& cp : op.copies) {
        if (!moves_weights(p.buffers[cp.src.buffer].role) || !moves_weights(p.buffers[cp.dst.buffer].role)) continue;
        EXPECT_EQ(cp.src.Bytes(), cp.dst.Bytes()) << "op " << op.id << " (" << op.label << ")";
        const std::vector<Id> vals = gather(cp.src.buffer, runs_of(cp.src));
        if (std::any_of(vals.begin(), vals.end(), [](Id x) { return x < 0; })) {
          ADD_FAILURE() << "op " << op.id << " (" << op.label << ") copies an unwritten element";
          return ex;
        }
        if (scatter(cp.dst.buffer, runs_of(cp.dst), vals) && op.segment < 0)
          ex.local_bytes += static_cast<int64_t>(vals.size()) * eb;
      }
    } else if (op.kind == OpKind::kSend) {
      std::vector<Id> payload = gather(op.region.buffer, runs_of(op.region));
      if (check_not_resent)
        for (Id id : payload)
          if (id >= 0 && on_gpu[op.peer][id]) {
            ADD_FAILURE() << "op " << op.id << " sends an element gpu" << op.peer << " already holds";
            break;
          }
      in_flight[op.id] = std::move(payload);
      ex.sent_bytes += op.region.Bytes();
    } else if (op.kind == OpKind::kRecv) {
      auto it = in_flight.find(op.match);
      if (it == in_flight.end()) {
        ADD_FAILURE() << "recv " << op.id << " before its send";
        return ex;
      }
      if (op.region.Bytes() / eb != static_cast<int64_t>(it->second.size())) {
        ADD_FAILURE() << "recv " << op.id << " size differs from its send";
        return ex;
      }
      scatter(op.region.buffer, runs_of(op.region), it->second);
      in_flight.erase(it);
    }
  }
  EXPECT_TRUE(in_flight.empty()) << in_flight.size() << " sends without a recv";
  // Every destination element: right value, written exactly once.
  int64_t expected = 0, wrong = 0, not_once = 0;
  for (const ContentPiece& c : p.destinations) {
    auto& m = shadow(c.buffer);
    auto& w = writes[c.buffer];
    for_each(c, [&](int64_t off, Id id) {
      ++expected;
      const bool bad_value = m[off] != id, bad_count = (w.empty() ? 0 : w[off]) != 1;
      if ((bad_value || bad_count) && wrong + not_once == 0)
        ADD_FAILURE() << "buffer " << p.buffers[c.buffer].name << " element " << off << ": holds " << m[off]
                      << ", expected " << id << ", written " << (w.empty() ? 0 : int{w[off]}) << " times";
      wrong += bad_value;
      not_once += bad_count;
    });
  }
  EXPECT_EQ(wrong, 0) << "destination elements with the wrong value";
  EXPECT_EQ(not_once, 0) << "destination elements without exactly one producer";
  EXPECT_EQ(ex.written, expected) << "elements written outside the destination pieces, or twice";
  return ex;
}

inline ElementRun RunOnElementIds(const Plan& p, bool check_not_resent) {
  int64_t elements = 0;
  for (const PlanTensor& t : p.tensors) elements += t.shape.Elements();
  return elements < std::numeric_limits<int32_t>::max() ? RunOnElementIdsAs<int32_t>(p, check_not_resent)
                                                        : RunOnElementIdsAs<int64_t>(p, check_not_resent);
}

}  // namespace reshard::planner_testing
