// `mpirun -np N reshard calibrate --network --rendezvous DIR -o profile.json`:
// measures the network between two ranks on different nodes (CUDA + NCCL, one
// process per GPU, no MPI linked).
//
//  1. Rank, size and local rank from the launcher, every rank's host through
//     the file rendezvous in DIR (calib/launcher.h PlaceRanks; the caller
//     does this first, so "every rank on one host" is refused, exit 2,
//     before any GPU is touched).
//  2. Each rank takes GPU `local rank` (GPU 0 when it sees only one); rank 0
//     creates an ncclUniqueId, a second rendezvous hands it to every rank
//     and collects each rank's GPU (PCI bus id): two ranks on one GPU are
//     refused (CalibrationUnavailable, exit 2). One communicator
//     (ncclCommInitRank).
//  3. The pair: rank 0 and the lowest rank on another host; the others wait
//     at the closing all-reduce. After a first transfer each way of the
//     largest size (NCCL connects lazily), the pair measures, every size from
//     4 KiB to max_bytes (x2, x4 with quick): one way 0 -> peer, one way
//     peer -> 0, both ways at once; then groups of k = 1, 2, 4 ... 128 sends
//     of 4 KiB and of 64 KiB 0 -> peer (the per-op series). Each sample:
//     both ranks hold their stream with a gate kernel, queue a 1-byte
//     exchange with each other (lines the two GPUs up), a start event, the
//     timed group and an end event, then open the gate: no host issue time
//     is inside the interval. A sample is the longer of the two ranks'
//     intervals (exchanged after the series).
// Rank 0 gets the measurements (network series, ranks, pair, per-op
// samples); the others get an empty CalibrationData (and write nothing).
// CUDA / NCCL failures throw GpuError; rendezvous problems InputError.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "calib/launcher.h"
#include "calib/profile.h"

namespace reshard {

struct NetworkCalibrateOptions {
  LauncherEnv env;              // ReadLauncherEnv(), checked by the caller: size >= 2
  RendezvousOptions rendezvous; // dir and timeout; rank, size and job are env's
  RankPlacement placement;      // PlaceRanks(): at least two hosts
  int64_t max_bytes = int64_t{1} << 30;
  bool quick = false;
  std::function<void(const std::string&)> progress;  // rank 0 only; may be empty
};

struct NetworkCalibration {
  bool root = false;     // this process is rank 0 and holds the data
  CalibrationData data;  // rank 0: what was measured
};

NetworkCalibration MeasureNetwork(const NetworkCalibrateOptions& options);

}  // namespace reshard
