#include "model/output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "model/error.h"
#include "model/input_file.h"

namespace reshard {

namespace fs = std::filesystem;

namespace {

fs::path DirOf(const std::string& path) {
  const fs::path p(path);
  return p.has_parent_path() ? p.parent_path() : fs::path(".");
}

// Temporary files being written. SIGINT, SIGTERM and SIGHUP remove them
// before the signal's default action ends the process, so an interrupted
// command leaves no partial file (SIGKILL cannot be caught: it leaves the
// hidden temporary file, never a torn target). Each slot points at a live
// AtomicOutput's path; unlink(2) is async-signal-safe.
constexpr int kTempSlots = 16;
std::atomic<const char*> g_temp_files[kTempSlots];

extern "C" void RemoveTempFilesOnSignal(int sig) {
  for (auto& slot : g_temp_files)
    if (const char* path = slot.load()) ::unlink(path);
  ::raise(sig);  // SA_RESETHAND restored the default action; delivered on return
}

// Installed once, and only over the default action: a host program (Python)
// that handles these signals itself keeps its handlers.
void InstallSignalCleanup() {
  static const bool installed = [] {
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction sa {};
      sa.sa_handler = RemoveTempFilesOnSignal;
      sa.sa_flags = SA_RESETHAND;
      sigemptyset(&sa.sa_mask);
      ::sigaction(sig, &sa, nullptr);
    }
    return true;
  }();
  (void)installed;
}

int RegisterTempFile(const char* path) {
  InstallSignalCleanup();
  for (int i = 0; i < kTempSlots; ++i) {
    const char* expected = nullptr;
    if (g_temp_files[i].compare_exchange_strong(expected, path)) return i;
  }
  return -1;  // more outputs open at once than slots: this one is not removed on a signal
}

void UnregisterTempFile(int slot) {
  if (slot >= 0) g_temp_files[slot].store(nullptr);
}

}  // namespace

void CheckOutputFile(const std::string& path, const std::string& file_label, const std::string& field,
                     const std::vector<std::string>& inputs) {
  if (path.empty()) return;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) throw InputError(file_label, field, fmt::format("'{}' is a directory; give a file path", path));
    throw InputError(file_label, field,
                     fmt::format("'{}' is {}; outputs are written as regular files (to a temporary file, then "
                                 "renamed)",
                                 path, FileKindName(st.st_mode)));
  }
  std::error_code ec;
  const fs::path dir = DirOf(path);
  if (!fs::is_directory(dir, ec))
    throw InputError(file_label, field, fmt::format("cannot write '{}': directory '{}' does not exist", path, dir.string()));
  for (const std::string& in : inputs) {
    if (in.empty()) continue;
    if (fs::exists(path, ec) && fs::equivalent(path, in, ec))
      throw InputError(file_label, field, fmt::format("'{}' is an input of this command; writing it would destroy it", path));
  }
}

AtomicOutput::AtomicOutput(std::string path) : path_(std::move(path)) {
  CheckOutputFile(path_, path_, "");
  const fs::path p(path_);
  std::string pattern = (DirOf(path_) / ("." + p.filename().string() + ".tmp-XXXXXX")).string();
  const int fd = ::mkstemp(pattern.data());
  if (fd < 0) throw InputError(path_, "", fmt::format("cannot write: {}", std::strerror(errno)));
  // mkstemp makes 0600; give the file the mode a plain open would (0666 less the umask).
  const mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  ::close(fd);
  temp_ = pattern;
  signal_slot_ = RegisterTempFile(temp_.c_str());
  out_.open(temp_, std::ios::binary | std::ios::trunc);
  if (!out_) {
    const int open_errno = errno;
    UnregisterTempFile(signal_slot_);
    std::remove(temp_.c_str());
    throw InputError(path_, "", fmt::format("cannot write: {}", std::strerror(open_errno)));
  }
}

AtomicOutput::~AtomicOutput() {
  UnregisterTempFile(signal_slot_);
  if (committed_) return;
  out_.close();
  std::remove(temp_.c_str());
}

void AtomicOutput::Commit() {
  out_.flush();
  const bool written = static_cast<bool>(out_);
  const int write_errno = errno;
  out_.close();
  if (!written || !out_)
    throw InputError(path_, "", fmt::format("writing failed: {} (the existing file, if any, is unchanged)",
                                            std::strerror(write_errno ? write_errno : EIO)));
  if (std::rename(temp_.c_str(), path_.c_str()) != 0)
    throw InputError(path_, "", fmt::format("cannot replace the file: {}", std::strerror(errno)));
  committed_ = true;
  UnregisterTempFile(signal_slot_);
  signal_slot_ = -1;
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  AtomicOutput out(path);
  out.stream() << text;
  out.Commit();
}

}  // namespace reshard
