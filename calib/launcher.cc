// Launcher environments and the file rendezvous (see launcher.h).
#include "calib/launcher.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "model/error.h"

namespace reshard {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// A launcher's variable as a whole number in [0, 2^30); nullopt when unset.
std::optional<int32_t> EnvNumber(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (v == nullptr) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (*v == '\0' || end == nullptr || *end != '\0' || errno != 0 || x < 0 || x >= (1L << 30))
    throw InputError("<environment>", name, fmt::format("expected a whole number, got '{}'", v));
  return static_cast<int32_t>(x);
}

std::string EnvText(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  return v == nullptr ? "" : v;
}

struct Scheme {
  const char* launcher;
  const char* rank;
  std::vector<const char*> size;  // the first one set
  const char* local_rank;
  const char* local_size;
};

}  // namespace

LauncherEnv ReadLauncherEnv(const EnvLookup& lookup) {
  const EnvLookup env = lookup ? lookup : EnvLookup([](const char* n) -> const char* { return std::getenv(n); });
  static const Scheme kSchemes[] = {
      {"Open MPI", "OMPI_COMM_WORLD_RANK", {"OMPI_COMM_WORLD_SIZE"}, "OMPI_COMM_WORLD_LOCAL_RANK",
       "OMPI_COMM_WORLD_LOCAL_SIZE"},
      {"MPICH / Hydra (PMI)", "PMI_RANK", {"PMI_SIZE"}, "MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
      {"PMIx", "PMIX_RANK", {"PMIX_SIZE"}, nullptr, nullptr},
      {"Slurm srun", "SLURM_PROCID", {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"}, "SLURM_LOCALID", nullptr},
  };
  LauncherEnv out;
  for (const Scheme& s : kSchemes) {
    const std::optional<int32_t> rank = EnvNumber(env, s.rank);
    if (!rank) continue;
    std::optional<int32_t> size;
    const char* size_name = s.size.front();
    for (const char* name : s.size) {
      if ((size = EnvNumber(env, name))) {
        size_name = name;
        break;
      }
    }
    if (!size)
      throw InputError("<environment>", size_name,
                       fmt::format("{} is set ({}) but {} is not: cannot tell how many processes were started",
                                   s.rank, *rank, fmt::join(s.size, " / ")));
    if (*size < 1 || *rank >= *size)
      throw InputError("<environment>", s.rank, fmt::format("rank {} is outside [0, {}) ({} = {})", *rank, *size,
                                                            size_name, *size));
    out.launcher = s.launcher;
    out.rank = *rank;
    out.size = *size;
    if (s.local_rank != nullptr) {
      if (const auto lr = EnvNumber(env, s.local_rank)) {
        if (*lr >= *size)
          throw InputError("<environment>", s.local_rank, fmt::format("local rank {} is not below the {} ranks", *lr, *size));
        out.local_rank = *lr;
      }
    }
    if (s.local_size != nullptr) {
      if (const auto ls = EnvNumber(env, s.local_size)) out.local_size = *ls;
    }
    const std::string launcher = s.launcher;
    if (launcher == "Open MPI") {
      out.job = EnvText(env, "OMPI_MCA_ess_base_jobid");
      if (out.job.empty()) out.job = EnvText(env, "PMIX_NAMESPACE");
    } else if (launcher == "PMIx") {
      out.job = EnvText(env, "PMIX_NAMESPACE");
    } else if (launcher == "Slurm srun") {
      const std::string job = EnvText(env, "SLURM_JOB_ID");
      if (!job.empty()) out.job = job + "." + EnvText(env, "SLURM_STEP_ID");
    }
    return out;
  }
  return out;
}

std::vector<int32_t> LocalRanksFromHosts(const std::vector<std::string>& hosts) {
  std::map<std::string, int32_t> seen;
  std::vector<int32_t> out;
  for (const std::string& h : hosts) out.push_back(seen[h]++);
  return out;
}

std::string ThisHost() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return "unknown";
  return host;
}

int32_t RankPlacement::Hosts() const {
  std::vector<std::string> h = hosts;
  std::sort(h.begin(), h.end());
  return static_cast<int32_t>(std::unique(h.begin(), h.end()) - h.begin());
}

int32_t RankPlacement::PeerOnAnotherHost() const {
  for (size_t r = 1; r < hosts.size(); ++r)
    if (hosts[r] != hosts[0]) return static_cast<int32_t>(r);
  return -1;
}

RankPlacement PlaceRanks(const LauncherEnv& env, RendezvousOptions o, const std::string& host) {
  o.rank = env.rank;
  o.size = env.size;
  o.job = env.job;
  RankPlacement p;
  p.rendezvous = Rendezvous(o, {{"host", host}, {"local_rank", env.local_rank}});
  for (const json& payload : p.rendezvous.payloads) {
    const auto h = payload.find("host");
    p.hosts.push_back(h != payload.end() && h->is_string() ? h->get<std::string>() : "unknown");
  }
  const std::vector<int32_t> by_host = LocalRanksFromHosts(p.hosts);
  for (size_t r = 0; r < p.hosts.size(); ++r) {
    const auto lr = p.rendezvous.payloads[r].find("local_rank");
    const int32_t given = lr != p.rendezvous.payloads[r].end() && lr->is_number_integer() ? lr->get<int32_t>() : -1;
    p.local_ranks.push_back(given >= 0 ? given : by_host[r]);
  }
  if (p.Hosts() < 2)
    throw InputError("<environment>", "--network",
                     fmt::format("all {} ranks run on host {}: the network is measured between nodes, so start ranks "
                                 "on two hosts or more (e.g. `mpirun -np 2 --map-by node`, or `srun -N 2 "
                                 "--ntasks-per-node 1`). Nothing was measured; `reshard calibrate` without --network "
                                 "measures this host's NVLink, PCIe and host costs",
                                 env.size, host));
  return p;
}

// ---- the file rendezvous -----------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

std::string NewNonce() {
  std::random_device rd;
  std::seed_seq seq{rd(), rd(), static_cast<unsigned>(::getpid()),
                    static_cast<unsigned>(Clock::now().time_since_epoch().count())};
  std::mt19937_64 rng(seq);
  return fmt::format("{:016x}{:016x}", rng(), rng());
}

fs::path IdPath(const RendezvousOptions& o) { return fs::path(o.dir) / fmt::format("{}-id.json", o.name); }
fs::path RankPath(const RendezvousOptions& o, int32_t r) {
  return fs::path(o.dir) / fmt::format("{}-rank-{}.json", o.name, r);
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Writes to a temporary name beside `path`, then renames over it.
void WriteAtomically(const RendezvousOptions& o, const fs::path& path, const json& j) {
  const fs::path tmp = path.parent_path() / fmt::format(".{}.{}.{}.tmp", path.filename().string(), ::getpid(), o.rank);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump() << "\n";
    out.close();
    if (!out) throw InputError(o.dir, "--rendezvous", fmt::format("cannot write {}", tmp.string()));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) throw InputError(o.dir, "--rendezvous", fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
}

// The file's JSON object, or null when missing, half-visible or not JSON.
json ReadIfThere(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  std::stringstream text;
  text << in.rdbuf();
  json j = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : json(nullptr);
}

std::string Field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The id file of this run's job and size, written less than the timeout ago
// (older ones are left over from an earlier run), else null.
json ReadId(const RendezvousOptions& o) {
  json id = ReadIfThere(IdPath(o));
  if (id.is_null() || Field(id, "job") != o.job || !id.contains("size") || id["size"] != o.size) return nullptr;
  if (Field(id, "nonce").empty()) return nullptr;
  const auto written = id.find("written_unix_s");
  if (written == id.end() || !written->is_number() || std::abs(UnixNow() - written->get<double>()) > o.timeout_s)
    return nullptr;
  return id;
}

void WriteRankFile(const RendezvousOptions& o, const std::string& nonce, const json& payload) {
  WriteAtomically(o, RankPath(o, o.rank),
                  {{"nonce", nonce}, {"rank", o.rank}, {"size", o.size}, {"job", o.job}, {"payload", payload}});
}

}  // namespace

RendezvousResult Rendezvous(const RendezvousOptions& o, const json& payload, const std::string& secret) {
  RESHARD_CHECK(o.size >= 1 && o.rank >= 0 && o.rank < o.size, "rendezvous rank out of range");
  std::error_code ec;
  fs::create_directories(o.dir, ec);
  if (!fs::is_directory(o.dir, ec))
    throw InputError(o.dir, "--rendezvous", "cannot create the rendezvous directory (it must be on a filesystem every node shares)");
  const Clock::time_point deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.timeout_s));
  auto pause = [&] { std::this_thread::sleep_for(std::chrono::milliseconds(o.poll_ms)); };

  RendezvousResult r;
  if (o.rank == 0) {
    r.nonce = NewNonce();
    r.secret = secret;
    WriteAtomically(o, IdPath(o),
                    {{"nonce", r.nonce}, {"size", o.size}, {"job", o.job}, {"written_unix_s", UnixNow()}, {"secret", secret}});
  } else {
    json id;
    while ((id = ReadId(o)).is_null()) {
      if (Clock::now() > deadline)
        throw InputError(o.dir, "--rendezvous",
                         fmt::format("rank {}: rank 0 wrote no {} for {} ranks{} within {} s: is the directory on a "
                                     "filesystem every node shares, and did rank 0 start?",
                                     o.rank, IdPath(o).string(), o.size,
                                     o.job.empty() ? "" : fmt::format(" of job {}", o.job), o.timeout_s));
      pause();
    }
    r.nonce = Field(id, "nonce");
    r.secret = Field(id, "secret");
  }
  WriteRankFile(o, r.nonce, payload);

  r.payloads.assign(o.size, nullptr);
  std::vector<int32_t> missing;
  for (;;) {
    missing.clear();
    for (int32_t i = 0; i < o.size; ++i) {
      if (!r.payloads[i].is_null()) continue;
      const json f = ReadIfThere(RankPath(o, i));
      if (f.is_null() || Field(f, "nonce") != r.nonce || !f.contains("payload")) {
        missing.push_back(i);
        continue;
      }
      if (f.value("size", -1) != o.size || f.value("rank", -1) != i)
        throw InputError(o.dir, "--rendezvous",
                         fmt::format("{} of this run says rank {} of {}, expected rank {} of {}: are two jobs "
                                     "sharing the directory?",
                                     RankPath(o, i).string(), f.value("rank", -1), f.value("size", -1), i, o.size));
      r.payloads[i] = f["payload"];
    }
    if (missing.empty()) return r;
    if (Clock::now() > deadline) {
      std::vector<int32_t> shown(missing.begin(), missing.begin() + std::min<size_t>(missing.size(), 16));
      throw InputError(o.dir, "--rendezvous",
                       fmt::format("rank {}: {} of {} ranks did not arrive within {} s (rank{} {}{}): did every "
                                   "process start, with the same --rendezvous directory on a shared filesystem?",
                                   o.rank, missing.size(), o.size, o.timeout_s, missing.size() == 1 ? "" : "s",
                                   fmt::join(shown, ", "), missing.size() > shown.size() ? ", ..." : ""));
    }
    if (o.rank != 0) {
      // A stale id.json read before rank 0 wrote this run's: join the new one.
      const json id = ReadId(o);
      if (!id.is_null() && Field(id, "nonce") != r.nonce) {
        r.nonce = Field(id, "nonce");
        r.secret = Field(id, "secret");
        r.payloads.assign(o.size, nullptr);
        WriteRankFile(o, r.nonce, payload);
        continue;
      }
    }
    pause();
  }
}

void RendezvousCleanup(const RendezvousOptions& o, const RendezvousResult& r) {
  if (o.rank != 0) return;
  std::error_code ec;
  for (int32_t i = 0; i < o.size; ++i) {
    const json f = ReadIfThere(RankPath(o, i));
    if (!f.is_null() && Field(f, "nonce") == r.nonce) fs::remove(RankPath(o, i), ec);
  }
  const json id = ReadIfThere(IdPath(o));
  if (!id.is_null() && Field(id, "nonce") == r.nonce) fs::remove(IdPath(o), ec);
}

}  // namespace reshard
