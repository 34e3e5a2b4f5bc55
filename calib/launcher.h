// How the processes of `mpirun -np N reshard calibrate --network` find each
// other without linking MPI: their rank, size and local rank from the
// launcher's environment, and a rendezvous through files in a directory every
// node shares (rank 0 publishes a secret, e.g. the ncclUniqueId; every rank
// publishes a small JSON payload: host, GPU). No CUDA or NCCL here: tested in
// CI with fake environments and threads as ranks.
//
// Rendezvous protocol (O(N) files, each rank reads all N: O(N^2) reads in all,
// N is a few hundred at most):
//  1. Rank 0 writes `NAME-id.json` = {nonce (fresh random), size, job,
//     written_unix_s, secret}, then `NAME-rank-0.json` = {nonce, rank, size,
//     job, payload}.
//  2. Rank r > 0 waits for an id file of its job and size written less than
//     the timeout ago, and writes `NAME-rank-r.json` with that nonce.
//  3. Every rank waits until `NAME-rank-i.json` of every i carries the
//     nonce, and returns all payloads in rank order. A rank that finds the id
//     file changed while it waits (it had read one left over from an earlier
//     run) writes its file again with the new nonce.
//  4. Rank 0 removes the files once every rank is known to have read them
//     (RendezvousCleanup: after a later rendezvous, or once the NCCL
//     communicator is up).
// Files are written to a temporary name and renamed, so a reader never sees
// half a file. Files left by an earlier run are told apart by the nonce, the
// launcher's job id where it sets one, and the id file's time (clocks of the
// nodes agree to well within the timeout); one left by a run that failed
// less than the timeout ago can still be joined by a rank that starts before
// rank 0 writes the new id: that run then times out. A fresh directory per
// run avoids it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace reshard {

// What the launcher says about this process. rank < 0: no launcher.
struct LauncherEnv {
  std::string launcher;  // "Open MPI", "MPICH / Hydra (PMI)", "PMIx", "Slurm srun"; empty: none found
  int32_t rank = -1;
  int32_t size = 0;
  int32_t local_rank = -1;  // -1: not given (derived from the hosts in the rendezvous)
  int32_t local_size = 0;   // 0: not given
  std::string job;          // an id all ranks of this run share ("" when the launcher sets none)
  bool Found() const { return rank >= 0; }
};

// Looks a variable up: returns nullptr when unset. Default: std::getenv.
using EnvLookup = std::function<const char*(const char*)>;

// Reads, first match wins: Open MPI (OMPI_COMM_WORLD_RANK / _SIZE /
// _LOCAL_RANK / _LOCAL_SIZE; job OMPI_MCA_ess_base_jobid or PMIX_NAMESPACE),
// MPICH / Hydra (PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS),
// PMIx (PMIX_RANK with PMIX_SIZE; job PMIX_NAMESPACE), Slurm srun
// (SLURM_PROCID, SLURM_STEP_NUM_TASKS or SLURM_NTASKS, SLURM_LOCALID;
// job SLURM_JOB_ID.SLURM_STEP_ID). Throws InputError("<environment>",
// VARIABLE, ...) when a launcher's variables are malformed: not a whole
// number, rank outside [0, size), a rank without a size.
LauncherEnv ReadLauncherEnv(const EnvLookup& env = {});

struct RendezvousOptions {
  std::string dir;         // shared by every node; created if missing
  std::string name = "rendezvous";  // file prefix: several rendezvous can share a directory
  int32_t rank = 0;
  int32_t size = 1;
  std::string job;         // LauncherEnv::job
  double timeout_s = 120;  // for the whole rendezvous
  int32_t poll_ms = 20;
};

struct RendezvousResult {
  std::string nonce;                      // this run's
  std::string secret;                     // rank 0's
  std::vector<nlohmann::json> payloads;   // every rank's, in rank order
};

// Joins the rendezvous (protocol above); `secret` is read on rank 0 only.
// Throws InputError(dir, "--rendezvous", ...) when the directory cannot be
// created or written, a rank file of this run disagrees (size), or the
// timeout passes (naming the ranks that did not arrive).
RendezvousResult Rendezvous(const RendezvousOptions& o, const nlohmann::json& payload, const std::string& secret = "");

// Rank 0: removes this run's files (those carrying its nonce). Other ranks:
// nothing. Errors are ignored (a leftover file is harmless: the next run has
// a new nonce).
void RendezvousCleanup(const RendezvousOptions& o, const RendezvousResult& r);

// Local rank of each rank from the hosts they run on: the index of a rank
// among the ranks of its host, in rank order (for launchers that do not say).
std::vector<int32_t> LocalRanksFromHosts(const std::vector<std::string>& hosts);

// gethostname(), or "unknown".
std::string ThisHost();

// Where the ranks of a launcher run: step 1 of `calibrate --network`.
struct RankPlacement {
  std::vector<std::string> hosts;    // per rank
  std::vector<int32_t> local_ranks;  // per rank: the launcher's, else from the hosts
  RendezvousResult rendezvous;       // for RendezvousCleanup once a later step has met
  int32_t Hosts() const;             // distinct hosts
  int32_t PeerOnAnotherHost() const; // the lowest rank not on rank 0's host; -1: none
};

// Every rank's host (`host`, this rank's) and local rank through the
// rendezvous `o` (o.rank, o.size and o.job from `env`). Throws
// InputError("<environment>", "--network", ...) when every rank runs on one
// host: the network is measured between nodes (before any GPU is touched).
RankPlacement PlaceRanks(const LauncherEnv& env, RendezvousOptions o, const std::string& host);

}  // namespace reshard
