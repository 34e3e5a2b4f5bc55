// Atomic outputs (model/output_file.h): a write interrupted by a signal leaves
// an existing file as it was and no temporary file behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "model/output_file.h"

namespace reshard {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("reshard_output_file_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "out.json") << "previous\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  size_t Files() const {
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.is_regular_file();
    return n;
  }
  fs::path dir_;
};

TEST_F(OutputFileTest, CommitReplacesTheFileWhole) {
  WriteFileAtomically((dir_ / "out.json").string(), "new\n");
  EXPECT_EQ(Slurp(dir_ / "out.json"), "new\n");
  EXPECT_EQ(Files(), 1u);
}

// A child process is mid-write (its temporary file flushed and open) when a
// signal ends it: the handler removes the temporary file, the target keeps
// its old content, and the process still dies of the signal.
TEST_F(OutputFileTest, ASignalMidWriteLeavesNoTemporaryFile) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      AtomicOutput out((dir_ / "out.json").string());
      out.stream() << std::string(1 << 20, 'x');
      out.stream().flush();
      ::raise(sig);
      ::_exit(0);  // not reached: the signal's default action ends the process
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "signal " << sig << ", status " << status;
    EXPECT_EQ(Slurp(dir_ / "out.json"), "previous\n") << sig;
    EXPECT_EQ(Files(), 1u) << "signal " << sig << " left a temporary file";
  }
}

}  // namespace
}  // namespace reshard
