// Test helper: run a program (the built `reshard`) with arguments and capture
// its exit code, stdout and stderr separately. Shared by the CLI tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace reshard::testing {

struct RunResult {
  int code = -1;  // exit status; -1 when the program could not run or was killed
  std::string out, err;
};

// Single-quotes `s` for /bin/sh.
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline RunResult RunBinary(const std::string& binary, const std::vector<std::string>& args) {
  RunResult r;
  char err_path[] = "/tmp/reshard_test_stderr_XXXXXX";  // unique per call (mkstemp)
  const int fd = ::mkstemp(err_path);
  if (fd < 0) return r;
  ::close(fd);
  std::string cmd = ShellQuote(binary);
  for (const auto& a : args) {
    cmd += ' ';
    cmd += ShellQuote(a);
  }
  cmd += " 2>";
  cmd += ShellQuote(err_path);
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf{};
    size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
    const int status = ::pclose(p);
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream in(err_path);
    std::stringstream ss;
    ss << in.rdbuf();
    r.err = ss.str();
  }
  std::remove(err_path);
  return r;
}

}  // namespace reshard::testing
