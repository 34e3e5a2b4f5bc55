// MpiSession: MPI when compiled in (RESHARD_HAVE_MPI), a clear refusal otherwise.
#include "executor/mpi_session.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include <fmt/format.h>

#include "model/error.h"

#ifdef RESHARD_HAVE_MPI
#include <mpi.h>
#endif

namespace reshard {

namespace {

int32_t EnvInt(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0' && x > 0 && x < (1L << 30)) ? static_cast<int32_t>(x) : 0;
}

#ifdef RESHARD_HAVE_MPI
void CheckMpi(int rc, const char* call, const char* file, int line) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  throw InternalError(fmt::format("{}:{}: {} failed: {}", file, line, call, std::string(msg, len)));
}
#define RESHARD_MPI(call) CheckMpi((call), #call, __FILE__, __LINE__)
constexpr int64_t kMaxMessageBytes = int64_t{1} << 30;
#endif

}  // namespace

bool MpiCompiledIn() {
#ifdef RESHARD_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int32_t LauncherWorldSize() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"}) {
    if (int32_t n = EnvInt(name); n > 0) return n;
  }
  // srun sets SLURM_NTASKS in the job too; SLURM_PROCID says we were started as a task.
  if (std::getenv("SLURM_PROCID") != nullptr) {
    if (int32_t n = EnvInt("SLURM_NTASKS"); n > 0) return n;
  }
  return 1;
}

struct MpiSession::Request::Impl {
#ifdef RESHARD_HAVE_MPI
  std::vector<MPI_Request> parts;
#endif
};

MpiSession::Request::Request() : impl_(std::make_unique<Impl>()) {}
MpiSession::Request::~Request() = default;
MpiSession::Request::Request(Request&&) noexcept = default;
MpiSession::Request& MpiSession::Request::operator=(Request&&) noexcept = default;

#ifdef RESHARD_HAVE_MPI

MpiSession::MpiSession() {
  int initialized = 0;
  RESHARD_MPI(MPI_Initialized(&initialized));
  RESHARD_CHECK(!initialized, "MPI initialised twice: create one MpiSession per process");
  int provided = 0;
  RESHARD_MPI(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  thread_multiple_ = provided >= MPI_THREAD_MULTIPLE;
  int r = 0, n = 1;
  RESHARD_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &r));
  RESHARD_MPI(MPI_Comm_size(MPI_COMM_WORLD, &n));
  rank_ = r;
  size_ = n;
  void* tag_ub = nullptr;
  int flag = 0;
  RESHARD_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag));
  if (flag && tag_ub != nullptr) max_tag_ = *static_cast<int*>(tag_ub);
}

MpiSession::~MpiSession() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

std::unique_ptr<MpiSession> MpiSession::FromEnvironment() {
  if (LauncherWorldSize() <= 1) return nullptr;
  return std::make_unique<MpiSession>();
}

void MpiSession::Barrier() const { RESHARD_MPI(MPI_Barrier(MPI_COMM_WORLD)); }

void MpiSession::Broadcast(void* data, int64_t bytes, int32_t root) const {
  auto* p = static_cast<char*>(data);
  for (int64_t done = 0; done < bytes; done += kMaxMessageBytes) {
    const int64_t n = std::min(kMaxMessageBytes, bytes - done);
    RESHARD_MPI(MPI_Bcast(p + done, static_cast<int>(n), MPI_BYTE, root, MPI_COMM_WORLD));
  }
}

std::vector<std::string> MpiSession::Gather(const std::string& mine, int32_t root) const {
  RESHARD_CHECK(mine.size() < static_cast<size_t>(kMaxMessageBytes), "gathered result too large");
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(rank_ == root ? size_ : 0);
  RESHARD_MPI(MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, root, MPI_COMM_WORLD));
  std::vector<int> displs(lens.size());
  int64_t total = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    displs[i] = static_cast<int>(total);
    total += lens[i];
  }
  RESHARD_CHECK(total < kMaxMessageBytes, "gathered result too large");
  std::string all(static_cast<size_t>(total), '\0');
  RESHARD_MPI(MPI_Gatherv(mine.data(), len, MPI_BYTE, all.data(), lens.data(), displs.data(), MPI_BYTE, root,
                          MPI_COMM_WORLD));
  std::vector<std::string> out;
  for (size_t i = 0; i < lens.size(); ++i) out.push_back(all.substr(displs[i], lens[i]));
  return out;
}

bool MpiSession::AllTrue(bool mine) const {
  int in = mine ? 1 : 0, out = 0;
  RESHARD_MPI(MPI_Allreduce(&in, &out, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD));
  return out != 0;
}

void MpiSession::Abort(int code) const {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::abort();  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

bool MpiSession::Request::Test() {
  for (MPI_Request& r : impl_->parts) {
    if (r == MPI_REQUEST_NULL) continue;
    int done = 0;
    RESHARD_MPI(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
    if (!done) return false;
  }
  return true;
}

MpiSession::Request MpiSession::Isend(const void* data, int64_t bytes, int32_t dest, int32_t tag) const {
  Request req;
  const auto* p = static_cast<const char*>(data);
  int64_t done = 0;
  do {  // at least one message, so a 0-byte send still matches its receive
    const int64_t n = std::min(kMaxMessageBytes, bytes - done);
    req.impl_->parts.emplace_back();
    RESHARD_MPI(MPI_Isend(p + done, static_cast<int>(n), MPI_BYTE, dest, tag, MPI_COMM_WORLD,
                          &req.impl_->parts.back()));
    done += n;
  } while (done < bytes);
  return req;
}

MpiSession::Request MpiSession::Irecv(void* data, int64_t bytes, int32_t source, int32_t tag) const {
  Request req;
  auto* p = static_cast<char*>(data);
  int64_t done = 0;
  do {
    const int64_t n = std::min(kMaxMessageBytes, bytes - done);
    req.impl_->parts.emplace_back();
    RESHARD_MPI(MPI_Irecv(p + done, static_cast<int>(n), MPI_BYTE, source, tag, MPI_COMM_WORLD,
                          &req.impl_->parts.back()));
    done += n;
  } while (done < bytes);
  return req;
}

#else  // !RESHARD_HAVE_MPI

namespace {
[[noreturn]] void NoMpi() {
  throw InputError("<environment>", "mpirun",
                   fmt::format("started as one of {} processes by a launcher, but this reshard was built without "
                               "MPI: install OpenMPI (libopenmpi-dev) and rebuild, or run a single process that "
                               "drives every GPU",
                               LauncherWorldSize()));
}
}  // namespace

MpiSession::MpiSession() { NoMpi(); }
MpiSession::~MpiSession() = default;
std::unique_ptr<MpiSession> MpiSession::FromEnvironment() {
  if (LauncherWorldSize() <= 1) return nullptr;
  NoMpi();
}
void MpiSession::Barrier() const {}
void MpiSession::Broadcast(void*, int64_t, int32_t) const {}
std::vector<std::string> MpiSession::Gather(const std::string& mine, int32_t) const { return {mine}; }
bool MpiSession::AllTrue(bool mine) const { return mine; }
void MpiSession::Abort(int code) const { std::exit(code); }
bool MpiSession::Request::Test() { return true; }
MpiSession::Request MpiSession::Isend(const void*, int64_t, int32_t, int32_t) const { NoMpi(); }
MpiSession::Request MpiSession::Irecv(void*, int64_t, int32_t, int32_t) const { NoMpi(); }

#endif

std::vector<int32_t> GpuBlock(int32_t gpus, int32_t processes, int32_t rank) {
  if (processes <= 0 || gpus % processes != 0) {
    throw InputError("<environment>", "processes",
                     fmt::format("the plan has {} GPUs, which do not split evenly over {} processes: start one "
                                 "process per GPU or per equal block of GPUs",
                                 gpus, processes));
  }
  const int32_t per = gpus / processes;
  std::vector<int32_t> out;
  for (int32_t g = rank * per; g < (rank + 1) * per; ++g) out.push_back(g);
  return out;
}

int32_t GpuOwner(int32_t gpu, int32_t gpus, int32_t processes) { return gpu / (gpus / processes); }

}  // namespace reshard
