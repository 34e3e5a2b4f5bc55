// The network measurement of `reshard calibrate --network` (see measure_network.h).
#include "calib/measure_network.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nccl.h>

#include "calib/measure_common.h"
#include "calib/measure_gpu.h"
#include "calib/measure_nccl.h"
#include "executor/nccl/gpu_check.h"
#include "executor/nccl/gpu_error.h"
#include "model/error.h"

namespace reshard {

namespace {

constexpr int64_t kKiB = int64_t{1} << 10;
constexpr int64_t kGateMaxNs = 10'000'000'000LL;  // a gate opens on its own after 10 s
constexpr int kBusIdChars = 32;

struct Comm {
  ncclComm_t comm = nullptr;
  ~Comm() {
    if (comm != nullptr) (void)ncclCommDestroy(comm);
  }
};

// Repetitions per size (the fit takes the median), as the link sweep times them.
int32_t Repetitions(int64_t bytes, bool quick) {
  if (quick) return bytes <= (int64_t{16} << 20) ? 7 : 4;
  if (bytes <= (int64_t{1} << 20)) return 21;
  return bytes <= (int64_t{64} << 20) ? 11 : 5;
}

// One rank of the measured pair: its GPU buffers, stream, gate and communicator.
struct PairSide {
  ncclComm_t comm = nullptr;
  int device = 0;
  int32_t peer = -1;
  bool first = false;  // rank 0 (sends in the one-way series "forth")
  DeviceBuffer* src = nullptr;
  DeviceBuffer* dst = nullptr;
  DeviceBuffer* tick = nullptr;  // 2 x 8 bytes for the 1-byte exchange and the sample exchange
  TimedStream* stream = nullptr;
  Gate* gate = nullptr;

  // One sample: gate, 1-byte exchange, start, `issue`, end, open the gate.
  double Time(const std::function<void()>& issue) const {
    RESHARD_GPU(cudaStreamSynchronize(stream->stream));
    gate->Hold(stream->stream, kGateMaxNs);
    char* t = static_cast<char*>(tick->ptr);
    RESHARD_GPU(ncclGroupStart());
    RESHARD_GPU(ncclSend(t, 1, ncclUint8, peer, comm, stream->stream));
    RESHARD_GPU(ncclRecv(t + 8, 1, ncclUint8, peer, comm, stream->stream));
    RESHARD_GPU(ncclGroupEnd());
    RESHARD_GPU(cudaEventRecord(stream->start, stream->stream));
    issue();
    RESHARD_GPU(cudaEventRecord(stream->end, stream->stream));
    gate->Release();
    RESHARD_GPU(cudaEventSynchronize(stream->end));
    float ms = 0;
    RESHARD_GPU(cudaEventElapsedTime(&ms, stream->start, stream->end));
    return std::round(static_cast<double>(ms) * 1e6) * 1e-9;  // whole ns
  }

  // `k` transfers of `bytes` each in one group: sends when this side sends
  // (`sends`), receives otherwise, or both with `both`.
  void Group(int32_t k, int64_t bytes, bool sends, bool both) const {
    auto* s = static_cast<char*>(src->ptr);
    auto* d = static_cast<char*>(dst->ptr);
    const auto n = static_cast<size_t>(bytes);
    RESHARD_GPU(ncclGroupStart());
    for (int32_t i = 0; i < k; ++i) {
      if (sends || both) RESHARD_GPU(ncclSend(s + i * bytes, n, ncclUint8, peer, comm, stream->stream));
      if (!sends || both) RESHARD_GPU(ncclRecv(d + i * bytes, n, ncclUint8, peer, comm, stream->stream));
    }
    RESHARD_GPU(ncclGroupEnd());
  }

  // Both sides end with the longer of their two intervals, sample by sample.
  void KeepLonger(std::vector<double>& seconds) const {
    const size_t n = seconds.size();
    DeviceBuffer mine(device, static_cast<int64_t>(n * sizeof(double)));
    DeviceBuffer theirs(device, static_cast<int64_t>(n * sizeof(double)));
    RESHARD_GPU(cudaMemcpy(mine.ptr, seconds.data(), n * sizeof(double), cudaMemcpyHostToDevice));
    RESHARD_GPU(ncclGroupStart());
    RESHARD_GPU(ncclSend(mine.ptr, n, ncclFloat64, peer, comm, stream->stream));
    RESHARD_GPU(ncclRecv(theirs.ptr, n, ncclFloat64, peer, comm, stream->stream));
    RESHARD_GPU(ncclGroupEnd());
    RESHARD_GPU(cudaStreamSynchronize(stream->stream));
    std::vector<double> other(n);
    RESHARD_GPU(cudaMemcpy(other.data(), theirs.ptr, n * sizeof(double), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; ++i) seconds[i] = std::max(seconds[i], other[i]);
  }
};

std::string Summary(const MeasuredSeries& s) {
  std::vector<double> at_max;
  for (const LinkSample& x : s.samples)
    if (x.bytes == s.samples.back().bytes) at_max.push_back(x.seconds);
  std::sort(at_max.begin(), at_max.end());
  return fmt::format("network {} ranks {} -> {}: {} samples, {:.1f} GB/s at {}", s.mode, s.gpus[0], s.gpus[1],
                     s.samples.size(), static_cast<double>(s.samples.back().bytes) / at_max[at_max.size() / 2] / 1e9,
                     SizeName(s.samples.back().bytes));
}

}  // namespace

NetworkCalibration MeasureNetwork(const NetworkCalibrateOptions& o) {
  const LauncherEnv& env = o.env;
  RESHARD_CHECK(env.Found() && env.size >= 2, "MeasureNetwork needs a launcher with two ranks or more");
  auto progress = [&](const std::string& line) {
    if (env.rank == 0 && o.progress) o.progress(line);
  };
  const RankPlacement& place = o.placement;
  const std::vector<std::string>& hosts = place.hosts;
  const int32_t peer = place.PeerOnAnotherHost();
  RESHARD_CHECK(peer > 0, "MeasureNetwork needs ranks on two hosts (PlaceRanks)");
  const int visible = VisibleGpus();  // NCCL defaults applied; CalibrationUnavailable without a GPU

  // 1. This rank's GPU; rank 0's ncclUniqueId to everyone, everyone's GPU to everyone.
  const int32_t local = place.local_ranks[env.rank];
  const int device = visible == 1 ? 0 : local;
  if (device >= visible)
    throw CalibrationUnavailable(fmt::format(
        "calibrate --network: rank {} is local rank {} on host {}, which sees {} GPUs: start at most one rank per "
        "GPU on each host (or give each rank one GPU with CUDA_VISIBLE_DEVICES)",
        env.rank, local, hosts[env.rank], visible));
  RESHARD_GPU(cudaSetDevice(device));
  RESHARD_GPU(cudaFree(nullptr));
  char bus[kBusIdChars] = {};
  RESHARD_GPU(cudaDeviceGetPCIBusId(bus, kBusIdChars - 1, device));
  ncclUniqueId id{};
  std::string secret;
  if (env.rank == 0) {
    RESHARD_GPU(ncclGetUniqueId(&id));
    for (size_t i = 0; i < sizeof(id.internal); ++i)
      secret += fmt::format("{:02x}", static_cast<unsigned char>(id.internal[i]));
  }
  RendezvousOptions ro = o.rendezvous;
  ro.name = "nccl";
  ro.rank = env.rank;
  ro.size = env.size;
  ro.job = env.job;
  const RendezvousResult rv = Rendezvous(ro, {{"device", device}, {"pci_bus_id", std::string(bus)}}, secret);
  if (env.rank == 0) RendezvousCleanup(o.rendezvous, place.rendezvous);  // every rank is past step 1
  if (rv.secret.size() != 2 * sizeof(id.internal))
    throw InputError(ro.dir, "--rendezvous", "rank 0's nccl-id.json holds no NCCL id of the expected size");
  for (size_t i = 0; i < sizeof(id.internal); ++i)
    id.internal[i] = static_cast<char>(std::stoi(rv.secret.substr(2 * i, 2), nullptr, 16));

  std::vector<NetworkRank> ranks;
  for (int32_t r = 0; r < env.size; ++r) {
    NetworkRank nr;
    nr.rank = r;
    nr.host = hosts[r];
    nr.local_rank = place.local_ranks[r];
    nr.device = rv.payloads[r].value("device", 0);
    nr.pci_bus_id = rv.payloads[r].value("pci_bus_id", std::string());
    for (const NetworkRank& other : ranks)
      if (other.host == nr.host && other.pci_bus_id == nr.pci_bus_id)
        throw CalibrationUnavailable(fmt::format(
            "calibrate --network: ranks {} and {} both use GPU {} on host {} (NCCL needs one rank per GPU): start at "
            "most one rank per GPU on each host",
            other.rank, r, nr.pci_bus_id, nr.host));
    ranks.push_back(nr);
  }
  const NetworkRank& me = ranks[env.rank];
  Comm comm;
  // NCCL refuses what the host exchange cannot see (e.g. two ranks that name
  // different hosts with --host but share a GPU): a usage error, not an
  // internal one (bench/results/2026-12-02-h200-network-calibrate-startup).
  if (const ncclResult_t r = ncclCommInitRank(&comm.comm, env.size, id, env.rank); r != ncclSuccess)
    throw CalibrationUnavailable(fmt::format(
        "calibrate --network: NCCL could not connect the {} ranks ({}: {}); check that each rank has its own GPU "
        "and that --host names each node once (NCCL_DEBUG=WARN says more)",
        env.size, ncclGetErrorString(r), ncclGetLastError(nullptr)));
  if (env.rank == 0) RendezvousCleanup(ro, rv);  // every rank has read the files: it is in the communicator
  TimedStream stream(me.device);

  // 2. The pair: rank 0 and the lowest rank on another host.
  const bool in_pair = env.rank == 0 || env.rank == peer;
  progress(fmt::format("network: {} ranks on {} hosts; measuring rank 0 ({}, GPU {}) <-> rank {} ({}, GPU {})",
                       env.size, place.Hosts(), hosts[0], ranks[0].device, peer, hosts[peer], ranks[peer].device));

  const int64_t factor = o.quick ? 4 : 2;
  std::vector<int64_t> sizes;
  for (int64_t b = 4 * kKiB; b <= o.max_bytes; b *= factor) sizes.push_back(b);
  if (sizes.back() != o.max_bytes) sizes.push_back(o.max_bytes);
  const std::vector<int32_t> op_counts =
      o.quick ? std::vector<int32_t>{1, 4, 16, 64} : std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64, 128};
  const std::vector<int64_t> op_sizes = {4 * kKiB, 64 * kKiB};

  CalibrationData d;
  if (in_pair) {
    const int64_t buffer = std::max(o.max_bytes, op_counts.back() * op_sizes.back());
    DeviceBuffer src(me.device, buffer), dst(me.device, buffer), tick(me.device, 64);
    Gate gate;
    PairSide side{comm.comm, me.device, env.rank == 0 ? peer : 0, env.rank == 0, &src, &dst, &tick, &stream, &gate};
    // NCCL connects lazily: a first transfer each way of the largest size.
    side.Group(1, o.max_bytes, side.first, /*both=*/true);
    RESHARD_GPU(cudaStreamSynchronize(stream.stream));

    // The size sweeps: an untimed pass, then per size 2 untimed and Repetitions() timed.
    auto sweep = [&](const std::function<void(int64_t)>& issue) {
      std::vector<LinkSample> out;
      for (int64_t b : sizes) (void)side.Time([&] { issue(b); });
      for (int64_t b : sizes)
        for (int32_t r = 0; r < 2 + Repetitions(b, o.quick); ++r) {
          const double s = side.Time([&] { issue(b); });
          if (r >= 2) out.push_back({b, s});
        }
      std::vector<double> seconds;
      for (const LinkSample& x : out) seconds.push_back(x.seconds);
      side.KeepLonger(seconds);
      for (size_t i = 0; i < out.size(); ++i) out[i].seconds = seconds[i];
      return out;
    };
    struct Mode {
      const char* mode;
      int32_t from, to;
      bool both;
    };
    for (const Mode m : {Mode{"one_way", 0, peer, false}, Mode{"one_way", peer, 0, false}, Mode{"both_ways", 0, peer, true}}) {
      MeasuredSeries s{"network", m.mode, "ncclSend/ncclRecv between ranks on two hosts (one group)", "cuda_events",
                       {m.from, m.to}, {}};
      const bool sends = env.rank == m.from;
      s.samples = sweep([&](int64_t b) { side.Group(1, b, sends, m.both); });
      progress(Summary(s));
      d.series.push_back(std::move(s));
    }
    // The per-op series: k sends of one size in one group, 0 -> peer.
    std::vector<NetworkOpSample> ops;
    for (int64_t b : op_sizes)
      for (int32_t k : op_counts)
        for (int32_t r = 0; r < 2 + (o.quick ? 5 : 11); ++r) {
          const double s = side.Time([&] { side.Group(k, b, side.first, false); });
          if (r >= 2) ops.push_back({k, b, s});
        }
    std::vector<double> seconds;
    for (const NetworkOpSample& x : ops) seconds.push_back(x.seconds);
    side.KeepLonger(seconds);
    for (size_t i = 0; i < ops.size(); ++i) ops[i].seconds = seconds[i];
    d.network.ops = std::move(ops);
  }
  // Everyone waits here until the pair is done.
  {
    DeviceBuffer one(me.device, 8);
    RESHARD_GPU(ncclAllReduce(one.ptr, one.ptr, 1, ncclFloat64, ncclSum, comm.comm, stream.stream));
    RESHARD_GPU(cudaStreamSynchronize(stream.stream));
  }
  NetworkCalibration out;
  out.root = env.rank == 0;
  if (!out.root) return out;

  const ToolVersions v = ReadToolVersions();
  cudaDeviceProp prop{};
  RESHARD_GPU(cudaGetDeviceProperties(&prop, me.device));
  d.network.launcher = env.launcher;
  d.network.ranks = ranks;
  d.network.from = 0;
  d.network.to = peer;
  d.network.source = fmt::format(
      "reshard calibrate --network {}: rank 0 on {} <-> rank {} on {} ({} ranks on {} hosts, {}), {}, NCCL {}, CUDA "
      "runtime {}, driver {}",
      UtcNow(), hosts[0], peer, hosts[peer], env.size, place.Hosts(), env.launcher, prop.name, v.nccl,
      v.cuda_runtime, v.cuda_driver);
  d.name = fmt::format("network {} <-> {}", hosts[0], hosts[peer]);
  d.source = d.network.source;
  const NetworkOpFit fit = FitNetworkOps(d.network.ops);
  progress(fmt::format("network per-op: {} ns per further op in a group of {} B sends (line through {} group sizes, "
                       "max error {:.1f} %)",
                       fit.op_gap_ns, fit.bytes, fit.points.size(), fit.line.max_abs_relative_error * 100));
  out.data = std::move(d);
  return out;
}

}  // namespace reshard
