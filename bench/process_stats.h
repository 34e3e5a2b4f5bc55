// What the benchmarks report about their own process: peak resident memory
// (Linux VmHWM, resettable) and per-thread CPU time. Linux only (the benches
// read /proc).
#pragma once

#include <malloc.h>
#include <time.h>

#include <fstream>
#include <string>

namespace reshard::bench {

// Peak resident set since the last ResetPeakRss (VmHWM), in bytes; 0 when
// /proc is not there.
inline double PeakRssBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  return 0;
}

// Returns freed heap memory to the system, then resets VmHWM to the current
// resident set, so the next PeakRssBytes() measures only what follows (a fresh
// `reshard plan` starts on a trimmed heap too).
inline void ResetPeakRss() {
  malloc_trim(0);
  std::ofstream("/proc/self/clear_refs") << "5";
}

// CPU seconds this thread has used (not wall time: the benches run beside
// other work on shared machines).
inline double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

}  // namespace reshard::bench
