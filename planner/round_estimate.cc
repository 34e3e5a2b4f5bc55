// The round-model estimate (model in round_estimate.h).
#include "planner/round_estimate.h"

#include <algorithm>
#include <array>
#include <vector>

#include "model/cluster.h"
#include "planner/segments.h"

namespace reshard {

namespace {

// LinkProfile::Efficiency(bytes), remembered per distinct `bytes` (direct
// mapped; a collision recomputes): the same value, without its three logs
// per pair. Pairs of one problem share a few sizes (SizeOrder asks ~200
// estimates of 65 k pairs each for deepseek-v3 on 512 GPUs).
class EfficiencyMemo {
 public:
  explicit EfficiencyMemo(const LinkProfile& lp) : lp_(lp) {}
  double operator()(int64_t bytes) {
    Entry& e = entries_[static_cast<uint64_t>(bytes) * 0x9E3779B97F4A7C15ull >> (64 - kBits)];
    if (e.bytes != bytes) e = Entry{bytes, lp_.Efficiency(bytes)};
    return e.value;
  }

 private:
  static constexpr int kBits = 8;
  struct Entry {
    int64_t bytes = -1;
    double value = 0;
  };
  const LinkProfile& lp_;
  std::array<Entry, size_t{1} << kBits> entries_{};
};

// One round holding a phase's segments (kPerRoundAll), every pair assumed
// staged. Per GPU: its host issues the packs (a launch and two event
// records each) and then the group (a send / receive call, its share of
// ncclGroupEnd and two event records each, plus the group's fixed cost);
// the transfers start once both that and its packs (their copy time and
// event bracket on the stream; in a phase split over two communicator
// lanes, lane 0's half of them) are done. Then each port carries all its
// bytes at its rate (ports of different link classes side by side; a NIC
// posts its ops op_gap_ns apart), no flow faster than the largest segment's
// efficiency allows, plus a latency; then the unpacks. Each term is the
// busiest GPU's or port's. O(pairs).
// A pair's phase: sender-relay first hops, direct, relayed (AddRelays).
int PhaseOf(const PairBytes& pb) { return pb.pre ? 0 : pb.relay ? 2 : 1; }

double AllInOneRoundEstimate(const Problem& prob, const std::vector<EstimatePairs::Pair>& pairs,
                             int64_t segment_bytes, int phase, bool copies) {
  const Cluster& c = prob.scenario.cluster;
  const int32_t gpus = c.Gpus();
  constexpr int kClasses = 4;  // LinkClass values
  std::vector<double> out_s(static_cast<size_t>(gpus) * kClasses, 0), in_s(out_s.size(), 0);
  std::vector<int64_t> out_ops(out_s.size(), 0), in_ops(out_s.size(), 0);
  std::vector<double> pack_s(gpus, 0), unpack_s(gpus, 0);
  std::vector<int64_t> packs(gpus, 0), unpacks(gpus, 0);
  const LinkProfile& dc = c.device_copy;
  EfficiencyMemo nvlink(c.nvlink), network(c.network), copy(dc);
  double flow_s = 0;
  const bool any = !pairs.empty();
  for (const EstimatePairs::Pair& pb : pairs) {
    const int64_t nseg = (pb.bytes + segment_bytes - 1) / segment_bytes;
    const int64_t each = (pb.bytes + nseg - 1) / nseg;
    const LinkClass lc = pb.link;
    const LinkProfile& lp = c.Link(lc);
    const size_t so = static_cast<size_t>(pb.src_gpu) * kClasses + static_cast<int>(lc);
    const size_t di = static_cast<size_t>(pb.dst_gpu) * kClasses + static_cast<int>(lc);
    if (lp.bytes_per_s > 0) {
      const double t = pb.bytes / lp.bytes_per_s;
      out_s[so] += t;
      in_s[di] += t;
      flow_s = std::max(flow_s, lp.latency_ns * 1e-9 + each / (lp.bytes_per_s * (lc == LinkClass::kNvlink ? nvlink : network)(each)));
    }
    out_ops[so] += nseg;
    in_ops[di] += nseg;
    packs[pb.src_gpu] += nseg;
    unpacks[pb.dst_gpu] += nseg;
    if (dc.bytes_per_s > 0) {
      const double copy_s =
          static_cast<double>(nseg) * (dc.latency_ns * 1e-9 + each / (dc.bytes_per_s * copy(each)));
      pack_s[pb.src_gpu] += copy_s;
      unpack_s[pb.dst_gpu] += copy_s;
    }
  }
  if (!any) return 0;
  double port_s = 0;
  for (size_t k = 0; k < out_s.size(); ++k) {
    const LinkProfile& lp = c.Link(static_cast<LinkClass>(k % kClasses));
    const double lat_s = lp.latency_ns * 1e-9, gap_s = lp.op_gap_ns * 1e-9;
    port_s = std::max({port_s, lat_s + std::max(out_s[k], gap_s * static_cast<double>(out_ops[k])),
                       lat_s + std::max(in_s[k], gap_s * static_cast<double>(in_ops[k]))});
  }
  const HostCosts& h = c.host;
  const double event_s = h.event_record_ns * 1e-9, event_gpu_s = h.event_gpu_ns * 1e-9;
  const double pack_issue_s = h.kernel_launch_ns * 1e-9 + 2 * event_s;
  const double comm_issue_s = (h.nccl_op_ns + h.nccl_group_op_ns) * 1e-9 + 2 * event_s;
  double front_s = 0, back_s = 0;
  // A phase that is not a relay phase runs over two communicator lanes
  // (comm_lanes.h): only lane 0's packs, half of each sender's bytes,
  // precede its first transfer; lane 1's run during lane 0's transfers.
  const double lane0 = phase != 2 ? 0.5 : 1.0;
  for (int32_t g = 0; g < gpus; ++g) {
    const auto p = static_cast<double>(packs[g]), u = static_cast<double>(unpacks[g]);
    const double issue_s = p > 0 || u > 0 ? p * pack_issue_s + (p + u) * comm_issue_s + h.nccl_group_ns * 1e-9 : 0;
    front_s = std::max({front_s, issue_s, pack_s[g] * lane0 + p * event_gpu_s});
    back_s = std::max(back_s, unpack_s[g] + u * event_gpu_s);
  }
  return copies ? front_s + std::max(port_s, flow_s) + back_s : std::max(port_s, flow_s);
}

// Rounds: per_round segments of the largest size share each port, no flow
// faster than its size's efficiency allows, plus a latency; with one segment
// per round a GPU that both sends and receives has one staging slot per
// direction, so its next pack and last unpack do not overlap the transfers:
// each round adds them. Then the first pack and last unpack. Δ counts a
// GPU's segments over both link classes, as if they took turns; the schedule
// colours each class on its own (segments.h), so this errs high where a GPU
// sends over both. Counting per class ranked 128 MiB first for llama3-405b
// colocated (its plan 1.44 s, against 1.16 at the 38 MiB this count ranks
// first).
double PhaseEstimate(const Problem& prob, const EstimatePairs& all, int64_t segment_bytes, int32_t per_round,
                     int phase, bool copies = true) {
  const std::vector<EstimatePairs::Pair>& pairs = all.phases[static_cast<size_t>(phase)];
  if (per_round == kPerRoundAll) return AllInOneRoundEstimate(prob, pairs, segment_bytes, phase, copies);
  const Cluster& c = prob.scenario.cluster;
  const int32_t gpus = c.Gpus();
  std::vector<int64_t> out(gpus, 0), in(gpus, 0);
  int64_t largest = 0;
  double round_s = 0;
  EfficiencyMemo nvlink(c.nvlink), network(c.network);
  for (const EstimatePairs::Pair& pb : pairs) {
    const int64_t nseg = (pb.bytes + segment_bytes - 1) / segment_bytes;
    const int64_t each = (pb.bytes + nseg - 1) / nseg;
    out[pb.src_gpu] += nseg;
    in[pb.dst_gpu] += nseg;
    largest = std::max(largest, each);
    const LinkClass lc = pb.link;
    const LinkProfile& lp = c.Link(lc);
    if (lp.bytes_per_s > 0)
      round_s = std::max(round_s, lp.latency_ns * 1e-9 +
                                      std::max(static_cast<double>(per_round) * each / lp.bytes_per_s,
                                               each / (lp.bytes_per_s * (lc == LinkClass::kNvlink ? nvlink : network)(each))));
  }
  int64_t delta = 0;
  bool both = false;
  for (int32_t g = 0; g < gpus; ++g) {
    delta = std::max({delta, out[g], in[g]});
    both = both || (out[g] > 0 && in[g] > 0);
  }
  if (delta == 0) return 0;
  const LinkProfile& dc = c.device_copy;
  const double copy_s =
      dc.bytes_per_s > 0 && largest > 0 ? dc.latency_ns * 1e-9 + largest / (dc.bytes_per_s * dc.Efficiency(largest)) : 0;
  if (both && per_round == 1) round_s += 2 * copy_s;
  // Sender-relay first hops have one round of their own; the others ride a
  // round before their second hops, over NVLink beside the network (segments.h).
  const int64_t rounds = phase == 0 ? 1 : (delta + per_round - 1) / per_round;
  return static_cast<double>(rounds) * round_s + 2 * copy_s;
}


}  // namespace

EstimatePairs EstimatePairsOf(const Problem& prob) {
  const Cluster& c = prob.scenario.cluster;
  EstimatePairs out;
  for (const PairBytes& pb : prob.pairs)
    if (pb.src_gpu != pb.dst_gpu)
      out.phases[static_cast<size_t>(PhaseOf(pb))].push_back(
          EstimatePairs::Pair{pb.src_gpu, pb.dst_gpu, c.Between(pb.src_gpu, pb.dst_gpu), pb.bytes});
  return out;
}

double QuickEstimate(const Problem& prob, const EstimatePairs& pairs, int64_t segment_bytes, int32_t per_round) {
  double total_s = 0;  // phases one after another: sender-relay first hops, direct, relayed
  for (int phase : {0, 1, 2}) total_s += PhaseEstimate(prob, pairs, segment_bytes, per_round, phase);
  return total_s;
}

double AllInOneRoundWireEstimate(const Problem& prob, const EstimatePairs& pairs, int64_t segment_bytes) {
  double total_s = 0;
  for (int phase : {0, 1, 2}) total_s += PhaseEstimate(prob, pairs, segment_bytes, kPerRoundAll, phase, false);
  return total_s;
}

double QuickEstimate(const Problem& prob, int64_t segment_bytes, int32_t per_round) {
  return QuickEstimate(prob, EstimatePairsOf(prob), segment_bytes, per_round);
}

}  // namespace reshard
