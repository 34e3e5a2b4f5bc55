// Writing output files so that no reader ever sees a torn one: the text goes
// to a temporary file in the same directory, which replaces the target by
// rename(2) only once every write, the flush and the close succeeded. A failed
// or interrupted write leaves any existing file as it was; two concurrent
// writers each leave a whole file (the last rename wins). SIGINT, SIGTERM
// and SIGHUP during a write remove the temporary file before the process ends.
#pragma once

#include <fstream>
#include <string>
#include <vector>

namespace reshard {

// Throws InputError(file_label, field, ...) when `path` cannot be an output:
// it exists and is not a regular file (a directory, FIFO, /dev/full...), its
// directory does not exist, or it names the same file as one of `inputs`
// (which would be overwritten). "" passes. Called before any work.
void CheckOutputFile(const std::string& path, const std::string& file_label, const std::string& field,
                     const std::vector<std::string>& inputs = {});

class AtomicOutput {
 public:
  // Opens a temporary file next to `path`; throws InputError(path, "", ...) if
  // it cannot (no such directory, not writable, `path` not a regular file).
  explicit AtomicOutput(std::string path);
  ~AtomicOutput();  // removes the temporary file unless committed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  std::ostream& stream() { return out_; }
  // Flushes, closes and renames over `path`; throws InputError naming `path`
  // when any write failed (disk full, I/O error).
  void Commit();

 private:
  std::string path_, temp_;
  std::ofstream out_;
  bool committed_ = false;
  int signal_slot_ = -1;  // where the signal handler finds temp_ (output_file.cc)
};

// The whole of `text` written to `path` through an AtomicOutput.
void WriteFileAtomically(const std::string& path, const std::string& text);

}  // namespace reshard
