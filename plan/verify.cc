// Verify(): checks DESIGN's plan semantics (docs/plan-format.md lists every rule).
//
// Complexity: O(N·S + E + B + P) time and memory for N ops, S streams, E
// dependency edges, B buffers and P content pieces, plus O(A log A + C) for
// the race check's A accesses of written buffers and C pairs of them whose
// spans overlap (each pair's overlap test bounded, RegionsOverlap); hash maps
// keyed by GPU pair and group are used only for lookups, never iterated into
// output.
//
// The steps:
//  1. Structure: ids equal indices; GPU, stream, buffer, peer, tensor ids in
//     range; no buffer larger than the GPU's (host: the node's) memory;
//     regions inside their buffers, on the op's GPU, in the right memory
//     space; copies of equal byte counts.
//  2. Send/recv pairs: mutual match ids, opposite kinds, swapped gpu/peer,
//     equal bytes, one group. Per ordered GPU pair, the k-th send and the k-th
//     recv (issue order = plan order) must be each other's match, as NCCL
//     pairs point-to-point ops between two ranks in issue order.
//  3. Deadlock freedom: contract into one node the ops of one group on one
//     GPU (one launch: issued together, finished together) and every matched
//     send/recv (neither finishes before the other starts), add the edges of
//     deps and per-(gpu, stream) program order, and run Kahn's algorithm; a
//     leftover node lies on or behind a cycle, and walking leftover
//     predecessors from it finds one to report. A dependency inside a
//     contracted node is itself a deadlock. A cycle of the plain graph (no
//     contraction) shows up as one of these two, so it is acyclic too.
//  4. Buffer lifetimes: alloc happens-before every access happens-before the
//     free. Accesses, alloc and free of a buffer must sit on the buffer's GPU
//     (checked in step 1), and their order must be visible on that GPU: the
//     happens-before used here is the transitive closure of deps and program
//     order between ops of ONE GPU (a path through another GPU does not
//     count; executors order a GPU's memory by that GPU's streams and events).
//     For it, ops are visited in a topological order of the same-GPU edges
//     while keeping a vector clock over the GPU's S streams:
//       clock[v][s] = largest position on stream s of v's GPU of an op that
//                     happens-before v (v itself included on its own stream)
//     = max over same-GPU predecessors u of clock[u], then clock[v][stream(v)]
//     = pos(v). Then x happens-before y (same GPU) iff
//     clock[y][stream(x)] >= pos(x): the op at that position follows x on x's
//     stream and reaches y. So each check is O(1) after O(N·S + E) work.
//     The nodes are launches, not ops: the sends and receives of one group
//     on one GPU are one launch (one NCCL group call, after every dependency
//     of any of them, all finished when it ends), so they share a node and a
//     position, and none of them happens-before another; a group's other ops
//     run before or after the call, each on its own (IssueOrder).
//     Bytes a quantize op writes outside destination buffers (quantized at
//     the source) are read by sends and copies only after it, by the same
//     happens-before.
//  5. Content pieces: tensor and buffer exist, the box fits the tensor, the
//     elements it addresses fit the buffer (element size from the tensor's
//     dtype); source buffers are preexisting, destination buffers never freed.
//  6. The cluster fingerprint matches the plan's cluster and `expected`.
//  7. Byte races: two ops that touch overlapping bytes of one buffer, one of
//     them writing (a recv, a copy's destination, a quantize's output), are
//     ordered by that happens-before one way or the other; two of one launch
//     are not. Pairs come from a sweep over each written buffer by offset
//     (verify_races.h), exact overlap of strided regions (RegionsOverlap).
// Problems are counted in full but only the first kMaxProblems are spelled out.
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "model/error.h"
#include "model/union_find.h"
#include "plan/plan.h"
#include "plan/verify_quantize.h"
#include "plan/verify_races.h"

namespace reshard {
namespace {

constexpr size_t kMaxProblems = 50;

class Problems {
 public:
  template <class... A>
  void Add(fmt::format_string<A...> f, A&&... a) {
    if (count_++ < kMaxProblems) list_.push_back(fmt::format(f, std::forward<A>(a)...));
  }
  size_t Count() const { return count_; }
  VerifyResult Finish() {
    VerifyResult r;
    r.problems = std::move(list_);
    if (count_ > kMaxProblems) r.problems.push_back(fmt::format("... and {} more", count_ - kMaxProblems));
    return r;
  }

 private:
  size_t count_ = 0;
  std::vector<std::string> list_;
};

// Overflow-checked region arithmetic (a hostile plan must not cause UB).
std::optional<int64_t> CheckedBytes(const Region& g) {
  int64_t b = 0;
  if (__builtin_mul_overflow(g.row_bytes, g.rows, &b) || __builtin_mul_overflow(b, g.planes, &b)) return std::nullopt;
  return b;
}
std::optional<int64_t> CheckedEnd(const Region& g) {
  auto bytes = CheckedBytes(g);
  if (!bytes) return std::nullopt;
  if (*bytes == 0) return g.offset_bytes;
  int64_t a = 0, b = 0, end = 0;
  if (__builtin_mul_overflow(g.planes - 1, g.plane_stride_bytes, &a) ||
      __builtin_mul_overflow(g.rows - 1, g.row_stride_bytes, &b) || __builtin_add_overflow(g.offset_bytes, a, &end) ||
      __builtin_add_overflow(end, b, &end) || __builtin_add_overflow(end, g.row_bytes, &end))
    return std::nullopt;
  return end;
}
bool RegionShapeValid(const Region& g) {
  return g.offset_bytes >= 0 && g.row_bytes >= 0 && g.rows >= 1 && g.planes >= 1 && g.row_stride_bytes >= 0 &&
         g.plane_stride_bytes >= 0;
}

std::string BoxText(const Box& b) {
  std::string s = "[";
  for (int d = 0; d < std::clamp(b.ndim, 0, kMaxDims); ++d) s += fmt::format("{}{}:{}", d ? ", " : "", b.lo[d], b.hi[d]);
  return s + "]";
}
std::string ShapeText(const Shape& sh) {
  std::string s = "[";
  for (int d = 0; d < std::clamp(sh.ndim, 0, kMaxDims); ++d) s += fmt::format("{}{}", d ? ", " : "", sh.dim[d]);
  return s + "]";
}

struct Edge {
  int32_t from, to;
  bool dep;  // a dependency (else program order)
};

class Verifier {
 public:
  Verifier(const Plan& p, const Cluster* expected)
      : p_(p),
        expected_(expected),
        G_(p.Gpus()),
        S_(static_cast<int64_t>(p.stream_names.size())),
        B_(static_cast<int64_t>(p.buffers.size())),
        N_(static_cast<int64_t>(p.ops.size())) {}

  VerifyResult Run() {
    CheckPlanLevel();
    CheckTensors();
    CheckQuantTensors();
    CheckBuffers();
    CheckOps();
    CheckPairOrder();
    BuildEdges();
    bool acyclic = CheckDeadlockFree();
    if (acyclic) {
      CheckLifetimes();
      CheckQuantizedReads();
      sound_ = pr_.Count() == 0;  // races do not make regions or pieces unsound
      CheckByteRaces();
    } else {
      pr_.Add("(buffer lifetimes not checked: the plan has a dependency cycle)");
    }
    const size_t before_pieces = pr_.Count();
    CheckPieces(p_.sources, "sources", true);
    CheckPieces(p_.destinations, "destinations", false);
    sound_ = sound_ && pr_.Count() == before_pieces;
    return pr_.Finish();
  }
  // No problem but byte races (so the coverage check can run).
  bool Sound() const { return sound_; }

 private:
  bool GpuOk(int64_t g) const { return g >= 0 && g < G_; }
  bool BufOk(int64_t b) const { return b >= 0 && b < B_; }
  bool OpOk(int64_t i) const { return i >= 0 && i < N_; }
  bool QueueOk(int64_t i) const { return GpuOk(p_.ops[i].gpu) && p_.ops[i].stream >= 0 && p_.ops[i].stream < S_; }

  std::string OpName(int64_t i) const {
    const Op& op = p_.ops[i];
    if (op.kind == OpKind::kSend) return fmt::format("op {} (send gpu {}→{})", i, op.gpu, op.peer);
    if (op.kind == OpKind::kRecv) return fmt::format("op {} (recv gpu {}←{})", i, op.gpu, op.peer);
    return fmt::format("op {} ({} gpu {})", i, OpKindName(op.kind), op.gpu);
  }
  std::string BufName(int64_t b) const {
    const PlanBuffer& buf = p_.buffers[b];
    if (buf.name.empty()) return fmt::format("buffer {} (gpu {})", b, buf.gpu);
    return fmt::format("buffer {} '{}' (gpu {})", b, buf.name, buf.gpu);
  }

  void CheckPlanLevel() {
    if (p_.format_version != 1) pr_.Add("plan: format_version is {}, expected 1", p_.format_version);
    if (G_ <= 0) pr_.Add("plan: its cluster has no GPUs");
    if (S_ == 0) pr_.Add("plan: stream_names is empty, so no op has a valid stream");
    std::string fp = p_.cluster.Fingerprint();
    if (p_.cluster_fingerprint != fp)
      pr_.Add("plan: cluster_fingerprint '{}' does not match its own cluster '{}' (fingerprint '{}')",
              p_.cluster_fingerprint, p_.cluster.name, fp);
    if (expected_ != nullptr && expected_->Fingerprint() != p_.cluster_fingerprint)
      pr_.Add("plan: made for cluster '{}' (fingerprint '{}') but this cluster '{}' has fingerprint '{}'",
              p_.cluster.name, p_.cluster_fingerprint, expected_->name, expected_->Fingerprint());
  }

  void CheckTensors() {
    for (size_t t = 0; t < p_.tensors.size(); ++t) {
      const Shape& s = p_.tensors[t].shape;
      bool ok = s.ndim >= 0 && s.ndim <= kMaxDims;
      for (int d = 0; ok && d < kMaxDims; ++d) ok = d < s.ndim ? s.dim[d] >= 1 : s.dim[d] == 1;
      if (!ok)
        pr_.Add("tensor {} '{}': invalid shape (ndim {}, dims {}, {}, {})", t, p_.tensors[t].name, s.ndim, s.dim[0],
                s.dim[1], s.dim[2]);
    }
  }

  void CheckQuantTensors() {
    for (const std::string& problem : QuantTensorProblems(p_)) pr_.Add("{}", problem);
  }

  void CheckBuffers() {
    for (int64_t b = 0; b < B_; ++b) {
      const PlanBuffer& buf = p_.buffers[b];
      if (buf.id != b) pr_.Add("{}: id is {}, expected {} (ids equal indices)", BufName(b), buf.id, b);
      if (!GpuOk(buf.gpu)) pr_.Add("{}: gpu {} does not exist (the cluster has {} GPUs)", BufName(b), buf.gpu, G_);
      if (buf.bytes < 0) pr_.Add("{}: negative size {} bytes", BufName(b), buf.bytes);
      // One buffer larger than the memory it lives in cannot exist (an absurd
      // or hand-edited size; the simulator would only report a huge peak).
      const int64_t capacity =
          buf.space == MemorySpace::kDevice ? p_.cluster.gpu_memory_bytes : p_.cluster.host_memory_bytes;
      if (capacity > 0 && buf.bytes > capacity)
        pr_.Add("{}: {} bytes is more than the {} memory it lives in ({} bytes)", BufName(b), buf.bytes,
                buf.space == MemorySpace::kDevice ? "GPU's" : "node's host", capacity);
    }
  }

  // Every region's bytes summed: the simulator and the summaries add them up
  // (per link, per class), so their total must stay far inside int64 (each
  // region fits a buffer, but 10^4 regions of 1 PiB would wrap).
  void AddAccessBytes(int64_t i, int64_t bytes) {
    if (access_bytes_overflowed_) return;
    if (__builtin_add_overflow(access_bytes_, bytes, &access_bytes_) || access_bytes_ > kMaxAccessBytes) {
      access_bytes_overflowed_ = true;
      pr_.Add("{}: the plan's ops touch more than 2^62 bytes in all by this op; no refit moves that much",
              OpName(i));
    }
  }
  static constexpr int64_t kMaxAccessBytes = int64_t{1} << 62;
  int64_t access_bytes_ = 0;
  bool access_bytes_overflowed_ = false;

  // Checks one region of op i (which reads it, or writes it); records an
  // access when it is a valid buffer on the op's own GPU, and its bytes for
  // the race check when it is also well formed and inside the buffer.
  // Returns its byte count when the region is well formed.
  std::optional<int64_t> CheckRegion(int64_t i, const Region& g, const std::string& what,
                                     std::optional<MemorySpace> want_space, bool write) {
    const Op& op = p_.ops[i];
    if (!BufOk(g.buffer)) {
      pr_.Add("{}: {} refers to buffer {}, which does not exist", OpName(i), what, g.buffer);
      return std::nullopt;
    }
    const PlanBuffer& b = p_.buffers[g.buffer];
    std::optional<int64_t> bytes;
    if (!RegionShapeValid(g)) {
      pr_.Add("{}: {} has an invalid shape (offset_bytes {}, row_bytes {}, rows {}, row_stride_bytes {}, planes {}, "
              "plane_stride_bytes {})",
              OpName(i), what, g.offset_bytes, g.row_bytes, g.rows, g.row_stride_bytes, g.planes,
              g.plane_stride_bytes);
    } else if (auto end = CheckedEnd(g); !end || *end > b.bytes) {
      pr_.Add("{}: {} [{}, {}) lies outside {}, which has {} bytes", OpName(i), what, g.offset_bytes,
              end ? fmt::format("{}", *end) : std::string("overflow"), BufName(g.buffer), b.bytes);
    } else {
      bytes = CheckedBytes(g);
      AddAccessBytes(i, *bytes);
    }
    if (b.gpu != op.gpu) {
      pr_.Add("{}: {} is in {}, on gpu {} (wrong GPU: an op only touches memory of its own GPU)", OpName(i), what,
              BufName(g.buffer), b.gpu);
    } else if (QueueOk(i)) {
      accesses_.push_back({g.buffer, static_cast<int32_t>(i)});
      if (bytes && *bytes > 0) byte_accesses_.push_back({g.buffer, static_cast<int32_t>(i), &g, write});
    }
    if (want_space && b.space != *want_space)
      pr_.Add("{}: {} is in {}, which is {} memory; a {} needs {} memory there", OpName(i), what, BufName(g.buffer),
              MemorySpaceName(b.space), OpKindName(op.kind), MemorySpaceName(*want_space));
    return bytes;
  }

  void CheckOps() {
    alloc_.assign(B_, {});
    free_.assign(B_, {});
    mutual_.assign(N_, false);
    pair_ok_.assign(N_, false);
    std::unordered_map<int64_t, int32_t> group_first;  // (group, gpu) -> first op
    for (int64_t i = 0; i < N_; ++i) {
      const Op& op = p_.ops[i];
      if (op.id != i) pr_.Add("{}: id is {}, expected {} (ids equal indices)", OpName(i), op.id, i);
      if (!GpuOk(op.gpu)) pr_.Add("{}: gpu {} does not exist (the cluster has {} GPUs)", OpName(i), op.gpu, G_);
      if (op.stream < 0 || op.stream >= S_)
        pr_.Add("{}: stream {} does not exist ({} streams are named)", OpName(i), op.stream, S_);
      if (op.group < -1) pr_.Add("{}: group {} is invalid (use -1 for none)", OpName(i), op.group);
      for (int32_t d : op.deps) {
        if (!OpOk(d)) pr_.Add("{}: depends on op {}, which does not exist", OpName(i), d);
        else if (d == i) pr_.Add("{}: depends on itself", OpName(i));
      }
      if (op.group >= 0 && QueueOk(i)) {
        int64_t key = static_cast<int64_t>(op.group) * std::max<int64_t>(G_, 1) + op.gpu;
        auto [it, fresh] = group_first.try_emplace(key, static_cast<int32_t>(i));
        if (!fresh && p_.ops[it->second].stream != op.stream)
          pr_.Add("{}: group {} uses stream '{}' on gpu {}, but {} of the same group uses stream '{}' (a group's ops "
                  "on one GPU share one stream)",
                  OpName(i), op.group, p_.stream_names[op.stream], op.gpu, OpName(it->second),
                  p_.stream_names[p_.ops[it->second].stream]);
      }
      if (!(op.sm_share > 0 && op.sm_share <= 1))
        pr_.Add("{}: sm_share {} is outside (0, 1]", OpName(i), op.sm_share);
      else if (op.sm_share != 1.0 && op.kind != OpKind::kCopy)
        pr_.Add("{}: sm_share {} on a {} (only copy kernels take a share of the SMs)", OpName(i), op.sm_share,
                OpKindName(op.kind));
      switch (op.kind) {
        case OpKind::kAlloc:
        case OpKind::kFree: CheckAllocFree(i); break;
        case OpKind::kCopy: CheckCopies(i, MemorySpace::kDevice, MemorySpace::kDevice); break;
        case OpKind::kOffload: CheckCopies(i, MemorySpace::kDevice, MemorySpace::kHost); break;
        case OpKind::kReload: CheckCopies(i, MemorySpace::kHost, MemorySpace::kDevice); break;
        case OpKind::kSend:
        case OpKind::kRecv: CheckSendRecv(i); break;
        case OpKind::kQuantize: CheckQuantize(i); break;
      }
    }
  }

  void CheckAllocFree(int64_t i) {
    const Op& op = p_.ops[i];
    if (!BufOk(op.buffer)) {
      pr_.Add("{}: buffer {} does not exist", OpName(i), op.buffer);
      return;
    }
    const PlanBuffer& b = p_.buffers[op.buffer];
    if (b.gpu != op.gpu)
      pr_.Add("{}: {} is on gpu {} (wrong GPU)", OpName(i), BufName(op.buffer), b.gpu);
    auto& slot = op.kind == OpKind::kAlloc ? alloc_[op.buffer] : free_[op.buffer];
    slot.push_back(static_cast<int32_t>(i));
  }

  void CheckCopies(int64_t i, MemorySpace src_space, MemorySpace dst_space) {
    const Op& op = p_.ops[i];
    if (op.copies.empty()) pr_.Add("{}: has no copy pairs", OpName(i));
    for (size_t k = 0; k < op.copies.size(); ++k) {
      auto src = CheckRegion(i, op.copies[k].src, fmt::format("copies[{}].src", k), src_space, false);
      auto dst = CheckRegion(i, op.copies[k].dst, fmt::format("copies[{}].dst", k), dst_space, true);
      if (src && dst && *src != *dst)
        pr_.Add("{}: copies[{}] reads {} bytes but writes {} bytes (both sides must be equal)", OpName(i), k, *src,
                *dst);
    }
  }

  // Regions in bounds and on the op's GPU (accesses recorded for the
  // lifetime check), then shapes, block alignment and overlap
  // (verify_quantize.cc).
  void CheckQuantize(int64_t i) {
    const Op& op = p_.ops[i];
    if (op.tiles.empty()) pr_.Add("{}: has no tiles", OpName(i));
    for (size_t k = 0; k < op.tiles.size(); ++k) {
      const QuantizeTile& t = op.tiles[k];
      bool ok = CheckRegion(i, t.input, fmt::format("tiles[{}].input", k), MemorySpace::kDevice, false).has_value();
      ok &= CheckRegion(i, t.output, fmt::format("tiles[{}].output", k), MemorySpace::kDevice, true).has_value();
      ok &= CheckRegion(i, t.scales, fmt::format("tiles[{}].scales", k), MemorySpace::kDevice, true).has_value();
      if (ok)
        for (const std::string& problem : QuantizeTileProblems(p_, t))
          pr_.Add("{}: tiles[{}]: {}", OpName(i), k, problem);
    }
  }

  void CheckSendRecv(int64_t i) {
    const Op& op = p_.ops[i];
    const bool is_send = op.kind == OpKind::kSend;
    const OpKind opposite = is_send ? OpKind::kRecv : OpKind::kSend;
    const char* want = is_send ? "recv" : "send";
    CheckRegion(i, op.region, "region", std::nullopt, !is_send);
    // Contiguous() multiplies unchecked: only on a region whose size fits int64
    // (an overflowing one is already reported by CheckRegion).
    if (CheckedBytes(op.region) && !op.region.Contiguous())
      pr_.Add("{}: region is not contiguous (a send or recv moves one run of bytes)", OpName(i));
    if (!GpuOk(op.peer)) pr_.Add("{}: peer gpu {} does not exist", OpName(i), op.peer);
    if (!OpOk(op.match)) {
      pr_.Add("{}: no matching {}{}", OpName(i), want,
              op.match == -1 ? std::string() : fmt::format(" (match {} does not exist)", op.match));
      return;
    }
    const Op& m = p_.ops[op.match];
    if (m.match != i || m.kind != opposite) {
      pr_.Add("{}: no matching {} ({} names op {} as its match)", OpName(i), want, OpName(op.match), m.match);
      return;
    }
    mutual_[i] = true;
    if (!is_send) return;  // the pair is checked once, from the send
    const int64_t r = op.match;
    bool ok = true;
    if (m.gpu != op.peer || m.peer != op.gpu) {
      pr_.Add("{}: its recv {} does not mirror it (gpu and peer must be swapped)", OpName(i), OpName(r));
      ok = false;
    }
    auto sb = CheckedBytes(op.region), rb = CheckedBytes(m.region);
    if (sb && rb && *sb != *rb)
      pr_.Add("{}: sends {} bytes but its recv {} receives {} bytes", OpName(i), *sb, OpName(r), *rb);
    if (CommLane(p_, op.stream) != CommLane(p_, m.stream))
      pr_.Add("{}: goes through communicator lane {} but its recv {} through lane {} (stream '{}' is lane 1, any other "
              "lane 0; a send and its recv share a communicator)",
              OpName(i), CommLane(p_, op.stream), OpName(r), CommLane(p_, m.stream), kCommLane2StreamName);
    if ((op.group >= 0 || m.group >= 0) && op.group != m.group)
      pr_.Add("{}: is in group {} but its recv {} is in group {} (a send and its recv share a group)", OpName(i),
              op.group, OpName(r), m.group);
    if (ok && GpuOk(op.gpu) && GpuOk(op.peer)) pair_ok_[i] = pair_ok_[r] = true;
  }

  // NCCL pairs the k-th send from a to b with the k-th recv on b from a,
  // per communicator (lane).
  void CheckPairOrder() {
    std::vector<int32_t> seq(N_, -1);
    std::unordered_map<int64_t, int32_t> sends, recvs;  // (lane, from gpu, to gpu) -> count so far
    for (int64_t i = 0; i < N_; ++i) {
      if (!pair_ok_[i]) continue;
      const Op& op = p_.ops[i];
      const int64_t lane = CommLane(p_, op.stream);
      if (op.kind == OpKind::kSend) seq[i] = sends[(lane * G_ + op.gpu) * G_ + op.peer]++;
      else seq[i] = recvs[(lane * G_ + op.peer) * G_ + op.gpu]++;
    }
    std::unordered_set<int64_t> reported;
    for (int64_t i = 0; i < N_; ++i) {
      const Op& op = p_.ops[i];
      if (!pair_ok_[i] || op.kind != OpKind::kSend || seq[i] == seq[op.match]) continue;
      if (!reported.insert(op.gpu * G_ + op.peer).second) continue;
      pr_.Add("sends from gpu {} to gpu {} are out of order with their recvs: {} is send #{} of that pair but its recv "
              "{} is recv #{} (NCCL matches point-to-point ops in issue order)",
              op.gpu, op.peer, OpName(i), seq[i], OpName(op.match), seq[op.match]);
    }
  }

  // Program order and dependency edges; and the launches: the sends and
  // receives of one group on one GPU (one stream) are one launch, at the
  // position of its first op on that stream; any other op is a launch of its
  // own.
  void BuildEdges() {
    launch_.assign(N_, -1);
    launch_pos_.clear();
    launch_stream_.clear();
    std::unordered_map<int64_t, int32_t> group_launch;  // (group, gpu) -> launch; lookup only
    std::vector<int32_t> last(static_cast<size_t>(std::max<int64_t>(G_, 0) * S_), -1), count(last.size(), 0);
    size_t deps = 0;
    for (const Op& op : p_.ops) deps += op.deps.size();
    edges_.reserve(N_ + deps);
    for (int64_t i = 0; i < N_; ++i) {
      const Op& op = p_.ops[i];
      if (QueueOk(i)) {
        size_t q = static_cast<size_t>(op.gpu) * S_ + op.stream;
        if (last[q] >= 0) edges_.push_back({last[q], static_cast<int32_t>(i), false});
        last[q] = static_cast<int32_t>(i);
        const int32_t next = static_cast<int32_t>(launch_pos_.size());
        // Only sends and receives: a group's other ops run before or after its call, each on its own
        // (IssueOrder's `before` / `after`).
        const bool comm = op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
        launch_[i] = op.group >= 0 && comm
                         ? group_launch.try_emplace(static_cast<int64_t>(op.group) * G_ + op.gpu, next).first->second
                         : next;
        if (launch_[i] == next) {
          launch_pos_.push_back(count[q]++);
          launch_stream_.push_back(op.stream);
        }
      }
      for (int32_t d : op.deps)
        if (OpOk(d) && d != i) edges_.push_back({d, static_cast<int32_t>(i), true});
    }
  }

  bool CheckDeadlockFree() {
    if (N_ == 0) return true;
    UnionFind groups(N_);  // root = smallest op id of the group
    std::unordered_map<int64_t, int32_t> group_first;  // (group, gpu) -> first op
    for (int64_t i = 0; i < N_; ++i) {
      const Op& op = p_.ops[i];
      if (op.group >= 0 && GpuOk(op.gpu)) {
        auto [it, fresh] = group_first.try_emplace(static_cast<int64_t>(op.group) * G_ + op.gpu, static_cast<int32_t>(i));
        if (!fresh) groups.Unite(it->second, static_cast<int32_t>(i));
      }
      if (mutual_[i] && i < op.match) groups.Unite(static_cast<int32_t>(i), op.match);
    }
    std::vector<int32_t> root(N_);
    for (int64_t i = 0; i < N_; ++i) root[i] = groups.Find(static_cast<int32_t>(i));

    // Dependencies inside a contracted node can never be met.
    bool ok = true;
    for (const Edge& e : edges_) {
      if (e.dep && root[e.from] == root[e.to]) {
        bool same_group = p_.ops[e.from].group >= 0 && p_.ops[e.from].group == p_.ops[e.to].group;
        pr_.Add("{}: depends on {}, but both are issued together ({}): deadlock", OpName(e.to), OpName(e.from),
                same_group ? fmt::format("group {}", p_.ops[e.to].group) : std::string("matched send/recv pairs"));
        ok = false;
      }
    }

    // Kahn's algorithm over contracted nodes (identified by their root op).
    std::vector<int32_t> start(N_ + 1, 0), indeg(N_, 0);
    for (const Edge& e : edges_)
      if (root[e.from] != root[e.to]) ++start[root[e.from] + 1], ++indeg[root[e.to]];
    std::partial_sum(start.begin(), start.end(), start.begin());
    std::vector<int32_t> out(start[N_]), fill(start.begin(), start.end() - 1);
    for (size_t k = 0; k < edges_.size(); ++k) {
      const Edge& e = edges_[k];
      if (root[e.from] != root[e.to]) out[fill[root[e.from]]++] = static_cast<int32_t>(k);
    }
    std::vector<int32_t> ready;
    int64_t nodes = 0, done = 0;
    for (int64_t i = 0; i < N_; ++i)
      if (root[i] == i) {
        ++nodes;
        if (indeg[i] == 0) ready.push_back(static_cast<int32_t>(i));
      }
    while (!ready.empty()) {
      int32_t v = ready.back();
      ready.pop_back();
      ++done;
      for (int32_t k = start[v]; k < start[v + 1]; ++k)
        if (--indeg[root[edges_[out[k]].to]] == 0) ready.push_back(root[edges_[out[k]].to]);
    }
    if (done == nodes) return ok;

    // Every leftover node has a leftover predecessor: walk them back until a
    // node repeats; the walk from there is a cycle.
    std::vector<int32_t> pred_edge(N_, -1);
    for (size_t k = 0; k < edges_.size(); ++k) {
      const Edge& e = edges_[k];
      int32_t u = root[e.from], v = root[e.to];
      if (u != v && indeg[u] > 0 && indeg[v] > 0 && pred_edge[v] < 0) pred_edge[v] = static_cast<int32_t>(k);
    }
    int64_t stuck = 0;
    int32_t first = -1;
    for (int64_t i = 0; i < N_; ++i)
      if (indeg[root[i]] > 0) {
        ++stuck;
        if (first < 0) first = root[i];
      }
    std::vector<int32_t> step(N_, -1), walk;  // walk: edges taken backwards
    int32_t v = first;
    while (step[v] < 0) {
      step[v] = static_cast<int32_t>(walk.size());
      walk.push_back(pred_edge[v]);
      v = root[edges_[pred_edge[v]].from];
    }
    std::vector<int32_t> cycle(walk.begin() + step[v], walk.end());
    std::reverse(cycle.begin(), cycle.end());  // forward order
    std::string text;
    const size_t shown = std::min<size_t>(cycle.size(), 8);
    for (size_t k = 0; k < shown; ++k) {
      const Edge& e = edges_[cycle[k]];
      if (k == 0) text += OpName(e.from);
      else if (e.from != edges_[cycle[k - 1]].to) text += " ~ " + OpName(e.from);
      text += fmt::format(" {} {}", e.dep ? "→" : "⇢", OpName(e.to));
    }
    if (shown < cycle.size()) text += fmt::format(" ... ({} more steps)", cycle.size() - shown);
    else if (edges_[cycle.back()].to != edges_[cycle.front()].from) text += " ~ " + OpName(edges_[cycle.front()].from);
    pr_.Add("dependency cycle (deadlock): {}; {} ops can never start (→ dependency, ⇢ stream order, ~ issued together: "
            "one group or a matched send/recv)",
            text, stuck);
    return false;
  }

  // Happens-before on one GPU, see step 4 at the top.
  void BuildClocks() {
    const int64_t L = static_cast<int64_t>(launch_pos_.size());
    clock_.assign(static_cast<size_t>(L) * S_, -1);
    std::vector<int32_t> start(L + 1, 0), indeg(L, 0);
    auto same_gpu = [&](const Edge& e) {
      return QueueOk(e.from) && QueueOk(e.to) && p_.ops[e.from].gpu == p_.ops[e.to].gpu &&
             launch_[e.from] != launch_[e.to];
    };
    for (const Edge& e : edges_)
      if (same_gpu(e)) ++start[launch_[e.from] + 1], ++indeg[launch_[e.to]];
    std::partial_sum(start.begin(), start.end(), start.begin());
    std::vector<int32_t> out(start[L]), fill(start.begin(), start.end() - 1);
    for (const Edge& e : edges_)
      if (same_gpu(e)) out[fill[launch_[e.from]]++] = launch_[e.to];
    std::vector<int32_t> ready;
    for (int64_t i = 0; i < L; ++i)
      if (indeg[i] == 0) ready.push_back(static_cast<int32_t>(i));
    while (!ready.empty()) {
      int32_t v = ready.back();
      ready.pop_back();
      int32_t* cv = &clock_[static_cast<size_t>(v) * S_];
      cv[launch_stream_[v]] = launch_pos_[v];
      for (int32_t k = start[v]; k < start[v + 1]; ++k) {
        int32_t w = out[k];
        int32_t* cw = &clock_[static_cast<size_t>(w) * S_];
        for (int64_t s = 0; s < S_; ++s) cw[s] = std::max(cw[s], cv[s]);
        if (--indeg[w] == 0) ready.push_back(w);
      }
    }
  }
  // x happens-before y; both on one GPU with valid queues. Two ops of one
  // launch run at once: neither is before the other.
  bool Before(int32_t x, int32_t y) const {
    const int32_t lx = launch_[x], ly = launch_[y];
    return lx != ly && clock_[static_cast<size_t>(ly) * S_ + launch_stream_[lx]] >= launch_pos_[lx];
  }

  void CheckLifetimes() {
    BuildClocks();
    auto list = [](const std::vector<int32_t>& v) {  // the first few: a hostile plan may repeat an op millions of times
      constexpr size_t kShown = 8;
      if (v.size() <= kShown) return fmt::format("{}", fmt::join(v, ", "));
      return fmt::format("{}, ... ({} more)", fmt::join(v.begin(), v.begin() + kShown, ", "), v.size() - kShown);
    };
    // The alloc / free usable for ordering checks: exactly one, on the buffer's GPU.
    std::vector<int32_t> alloc_op(B_, -1), free_op(B_, -1);
    for (int64_t b = 0; b < B_; ++b) {
      const PlanBuffer& buf = p_.buffers[b];
      const auto& a = alloc_[b];
      const auto& f = free_[b];
      if (a.size() > 1) pr_.Add("{}: allocated {} times (ops {})", BufName(b), a.size(), list(a));
      if (f.size() > 1) pr_.Add("{}: freed {} times (ops {})", BufName(b), f.size(), list(f));
      if (buf.preexisting && !a.empty())
        pr_.Add("{}: is preexisting (exists from the start) but {} allocates it", BufName(b), OpName(a[0]));
      if (!buf.preexisting && a.empty() && !f.empty())
        pr_.Add("{}: is freed by {} but never allocated (not preexisting, no alloc op)", BufName(b), OpName(f[0]));
      auto usable = [&](int32_t op) { return QueueOk(op) && p_.ops[op].gpu == buf.gpu; };
      if (a.size() == 1 && usable(a[0]) && !buf.preexisting) alloc_op[b] = a[0];
      if (f.size() == 1 && usable(f[0])) free_op[b] = f[0];
      if (alloc_op[b] >= 0 && free_op[b] >= 0 && !Before(alloc_op[b], free_op[b]))
        pr_.Add("{}: its free {} is not ordered after its alloc {}", BufName(b), OpName(free_op[b]),
                OpName(alloc_op[b]));
    }
    std::vector<bool> never_reported(B_, false);
    std::pair<int32_t, int32_t> prev{-1, -1};
    for (const auto& [b, k] : accesses_) {
      if (std::pair{b, k} == prev) continue;  // several regions of one op in one buffer
      prev = {b, k};
      const PlanBuffer& buf = p_.buffers[b];
      if (!buf.preexisting && alloc_[b].empty()) {
        if (!never_reported[b])
          pr_.Add("{}: uses {}, which is never allocated (not preexisting, no alloc op)", OpName(k), BufName(b));
        never_reported[b] = true;
      }
      if (int32_t a = alloc_op[b]; a >= 0 && !Before(a, k)) {
        if (Before(k, a)) pr_.Add("{}: uses {} before its alloc {}", OpName(k), BufName(b), OpName(a));
        else pr_.Add("{}: uses {} but is not ordered after its alloc {} (add a dependency)", OpName(k), BufName(b),
                     OpName(a));
      }
      if (int32_t f = free_op[b]; f >= 0 && !Before(k, f)) {
        if (Before(f, k)) pr_.Add("{}: uses {} after its free {}", OpName(k), BufName(b), OpName(f));
        else pr_.Add("{}: uses {} but is not ordered before its free {} (add a dependency)", OpName(k), BufName(b),
                     OpName(f));
      }
    }
  }

  // Bytes a quantize op writes into a buffer other than a destination's
  // (quantized at the source: staging that sends and copies read) are read
  // only after it, on its GPU. O(reads x tiles of the buffer read).
  void CheckQuantizedReads() {
    std::vector<std::vector<std::pair<Region, int32_t>>> writes(B_);
    bool any = false;
    for (int32_t i = 0; i < static_cast<int32_t>(p_.ops.size()); ++i)
      if (p_.ops[i].kind == OpKind::kQuantize)
        for (const QuantizeTile& t : p_.ops[i].tiles)
          for (const Region* r : {&t.output, &t.scales})
            if (BufOk(r->buffer) && p_.buffers[r->buffer].role != BufferRole::kDestinationWeights) {
              writes[r->buffer].emplace_back(*r, i);
              any = true;
            }
    if (!any) return;
    for (int32_t i = 0; i < static_cast<int32_t>(p_.ops.size()); ++i) {
      const Op& op = p_.ops[i];
      auto check = [&](const Region& r) {
        if (!BufOk(r.buffer) || r.Bytes() == 0) return;
        for (const auto& [w, q] : writes[r.buffer])
          if (w.offset_bytes < r.End() && r.offset_bytes < w.End() && QueueOk(q) && QueueOk(i) &&
              p_.ops[q].gpu == op.gpu && !Before(q, i)) {
            pr_.Add("{}: reads bytes of {} that {} quantizes, but is not ordered after it (add a dependency)",
                    OpName(i), BufName(r.buffer), OpName(q));
            return;
          }
      };
      if (op.kind == OpKind::kSend) check(op.region);
      if (op.kind == OpKind::kCopy || op.kind == OpKind::kOffload)
        for (const CopyPair& c : op.copies) check(c.src);
    }
  }

  // Two ops touching the same bytes of a buffer, one of them writing, are
  // ordered one way or the other on its GPU (step 7). One problem per pair.
  void CheckByteRaces() {
    std::unordered_set<int64_t> reported;  // lookup only
    ForEachByteConflict(std::move(byte_accesses_), [&](const ByteAccess& x, const ByteAccess& y) {
      if (Before(x.op, y.op) || Before(y.op, x.op)) return;
      const auto [first, second] = std::minmax(x.op, y.op);
      if (!reported.insert(static_cast<int64_t>(first) * N_ + second).second) return;
      const ByteAccess& w = x.write ? x : y;  // a writer
      const ByteAccess& o = x.write ? y : x;
      const std::string together =
          launch_[x.op] == launch_[y.op]
              ? fmt::format("both are issued together in group {}, so they run at once", p_.ops[x.op].group)
              : std::string("neither is ordered before the other on its GPU (add a dependency)");
      pr_.Add("{}: {} bytes of {} that {} writes; {}", OpName(o.op), o.write ? "writes" : "reads", BufName(w.buffer),
              OpName(w.op), together);
    });
  }

  void CheckPieces(const std::vector<ContentPiece>& pieces, const char* what, bool is_source) {
    for (size_t i = 0; i < pieces.size(); ++i) {
      const ContentPiece& c = pieces[i];
      std::string name = fmt::format("{}[{}]", what, i);
      bool ok = true;
      if (c.tensor < 0 || c.tensor >= static_cast<int64_t>(p_.tensors.size())) {
        pr_.Add("{}: tensor {} does not exist ({} tensors)", name, c.tensor, p_.tensors.size());
        ok = false;
      }
      if (!BufOk(c.buffer)) {
        pr_.Add("{}: buffer {} does not exist", name, c.buffer);
        ok = false;
      }
      if (!ok) continue;
      const PlanTensor& t = p_.tensors[c.tensor];
      const PlanBuffer& b = p_.buffers[c.buffer];
      name += fmt::format(" (tensor {} '{}' box {})", c.tensor, t.name, BoxText(c.box));
      if (is_source && !b.preexisting)
        pr_.Add("{}: {} is not preexisting, so it holds nothing at the start", name, BufName(c.buffer));
      if (!is_source && !free_[c.buffer].empty())
        pr_.Add("{}: {} is freed by {}, but must hold this content at the end", name, BufName(c.buffer),
                OpName(free_[c.buffer][0]));
      if (c.box.ndim != t.shape.ndim) {
        pr_.Add("{}: the box has {} dimensions but the tensor has {}", name, c.box.ndim, t.shape.ndim);
        continue;
      }
      bool in_bounds = true;
      int64_t volume = 1;
      for (int d = 0; d < kMaxDims; ++d) {
        bool used = d < c.box.ndim;
        int64_t extent = used ? t.shape.dim[d] : 1;
        in_bounds = in_bounds && c.box.lo[d] >= 0 && c.box.lo[d] <= c.box.hi[d] && c.box.hi[d] <= extent &&
                    (used || (c.box.lo[d] == 0 && c.box.hi[d] == 1));
        volume = c.box.hi[d] > c.box.lo[d] ? volume : 0;
      }
      if (!in_bounds) {
        pr_.Add("{}: box is out of bounds of the tensor's shape {}", name, ShapeText(t.shape));
        continue;
      }
      if (c.offset_elems < 0 || c.stride_elems[0] < 0 || c.stride_elems[1] < 0 || c.stride_elems[2] < 0) {
        pr_.Add("{}: negative offset_elems or stride_elems", name);
        continue;
      }
      if (volume == 0) continue;
      // Last element addressed, then bytes: (last + 1) * element size.
      int64_t last = c.offset_elems, end_bytes = 0;
      bool overflow = false;
      for (int d = 0; d < c.box.ndim; ++d) {
        int64_t term = 0;
        overflow |= __builtin_mul_overflow(c.box.hi[d] - c.box.lo[d] - 1, c.stride_elems[d], &term);
        overflow |= __builtin_add_overflow(last, term, &last);
      }
      overflow |= __builtin_add_overflow(last, 1, &last);
      overflow |= __builtin_mul_overflow(last, DTypeBytes(t.dtype), &end_bytes);
      if (overflow || end_bytes > b.bytes)
        pr_.Add("{}: lies outside {}: needs bytes up to {} but the buffer has {}", name, BufName(c.buffer),
                overflow ? std::string("overflow") : fmt::format("{}", end_bytes), b.bytes);
    }
  }

  const Plan& p_;
  const Cluster* expected_;
  bool sound_ = false;
  const int64_t G_, S_, B_, N_;
  Problems pr_;
  std::vector<std::vector<int32_t>> alloc_, free_;    // per buffer: alloc / free ops
  std::vector<std::pair<int32_t, int32_t>> accesses_; // (buffer, op), op order
  std::vector<bool> mutual_, pair_ok_;                // send/recv match each other; and mirror gpus
  std::vector<Edge> edges_;
  std::vector<ByteAccess> byte_accesses_;             // well-formed regions, op order
  std::vector<int32_t> launch_;                       // per op: its launch (-1: invalid queue)
  std::vector<int32_t> launch_pos_, launch_stream_;   // per launch: position on its (gpu, stream), the stream
  std::vector<int32_t> clock_;                        // launches x S vector clocks
};

}  // namespace

VerifyResult Verify(const Plan& p, const Cluster* expected) {
  Verifier verifier(p, expected);
  VerifyResult r = verifier.Run();
  // Coverage expands regions and pieces, so only once they are known to be sound (byte races aside).
  if (verifier.Sound())
    for (std::string& problem : DestinationCoverageProblems(p)) r.problems.push_back(std::move(problem));
  return r;
}

}  // namespace reshard
