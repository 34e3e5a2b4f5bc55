// The processes of a multi-process run (mpirun / srun), behind one small class.
//
// MPI is process-global by nature; an MpiSession is the one object that owns
// MPI_Init / MPI_Finalize, created once by main() (the CLI, a test driver) and
// handed to backends by pointer. Without it (nullptr) a backend drives every
// GPU of the plan from this process.
//
// The MPI part is compiled only when CMake found MPI (RESHARD_HAVE_MPI). A
// binary built without it still detects that it was started by a launcher
// with several processes and says so, instead of running N copies of the same
// single-process job.
//
// GPU ownership: with P processes and G plan GPUs (G % P == 0), process r
// drives the block of GPUs [r*G/P, (r+1)*G/P).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace reshard {

// True when this binary was compiled with MPI support.
bool MpiCompiledIn();

// Processes the launcher announces in the environment (OMPI_COMM_WORLD_SIZE,
// PMI_SIZE, PMIX_SIZE, SLURM_NTASKS with SLURM_PROCID); 1 when none.
int32_t LauncherWorldSize();

class MpiSession {
 public:
  // Joins the MPI job (MPI_Init_thread, asking for MPI_THREAD_MULTIPLE).
  // Throws InputError when MPI is not compiled in.
  MpiSession();
  ~MpiSession();  // MPI_Finalize
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  // A session when the launcher started several processes, nullptr when this
  // is a plain single-process run. Throws InputError (file "<environment>")
  // when several processes were started but MPI is not compiled in.
  static std::unique_ptr<MpiSession> FromEnvironment();

  int32_t rank() const { return rank_; }
  int32_t size() const { return size_; }
  bool thread_multiple() const { return thread_multiple_; }

  void Barrier() const;
  void Broadcast(void* data, int64_t bytes, int32_t root) const;
  // Every rank's `mine`, in rank order, on `root`; empty elsewhere.
  std::vector<std::string> Gather(const std::string& mine, int32_t root) const;
  // Logical AND of a flag over all ranks (e.g. "my part of the setup worked").
  bool AllTrue(bool mine) const;
  // Ends every process of the job (after an error on one rank, the others
  // would wait forever in the next collective).
  [[noreturn]] void Abort(int code) const;

  // Point-to-point bytes, split into messages of at most 1 GiB (MPI counts
  // are int). Requests are polled so callers can give up on a timeout.
  class Request {
   public:
    Request();
    ~Request();
    Request(Request&&) noexcept;
    Request& operator=(Request&&) noexcept;
    bool Test();  // true when every part completed
   private:
    friend class MpiSession;
    struct Impl;
    std::unique_ptr<Impl> impl_;
  };
  Request Isend(const void* data, int64_t bytes, int32_t dest, int32_t tag) const;
  Request Irecv(void* data, int64_t bytes, int32_t source, int32_t tag) const;
  int64_t MaxTag() const { return max_tag_; }

 private:
  int32_t rank_ = 0;
  int32_t size_ = 1;
  int64_t max_tag_ = 32767;
  bool thread_multiple_ = false;
};

// The GPUs process `rank` of `processes` drives out of `gpus` (block split).
// Throws InputError when gpus % processes != 0.
std::vector<int32_t> GpuBlock(int32_t gpus, int32_t processes, int32_t rank);
int32_t GpuOwner(int32_t gpu, int32_t gpus, int32_t processes);

}  // namespace reshard
