// The host backend across processes: run under `mpirun -np 2` (CTest
// executor_mpi_host). Rank 0 checks the gathered measurements; the exit code
// says whether every check passed.
#include <cstdio>
#include <exception>
#include <string>

#include "executor/executor.h"
#include "executor/host_backend.h"
#include "executor/mpi_session.h"
#include "tests/executor/test_plans.h"

namespace {

int failures = 0;

void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
  using namespace reshard;
  std::unique_ptr<MpiSession> mpi;
  try {
    mpi = std::make_unique<MpiSession>();
    if (mpi->size() != 2) {
      std::fprintf(stderr, "executor_mpi_test: run me under mpirun -np 2 (got %d processes)\n", mpi->size());
      return 1;
    }
    const bool root = mpi->rank() == 0;
    HostBackendOptions ho;
    ho.mpi = mpi.get();
    ho.timeout_s = 30;
    auto backend = MakeHostBackend(ho);

    // One GPU per process: a grouped exchange and a pack -> send -> unpack.
    const Plan two = testplans::ExchangePlan();
    Measurement m = Execute(two, *backend);
    if (root) {
      Expect(m.verified && m.complete, "exchange on 2 GPUs verified");
      Expect(m.processes == 2, "2 processes reported");
      Expect(m.op_times.size() == two.ops.size(), "op times of both ranks gathered");
      Expect(m.memory.size() == 2, "memory of both GPUs gathered");
      Expect(m.checked_elements == 2 * 16 * 24, "every destination element of both ranks checked");
    } else {
      Expect(!m.complete, "rank 1 holds only its part");
    }
    m = Execute(testplans::PackSendUnpackPlan(), *backend);
    if (root) Expect(m.verified, "pack/send/unpack across processes verified");
    m = Execute(testplans::OffloadReloadPlan(), *backend);
    if (root) Expect(m.verified, "offload/reload on both ranks verified");

    // Two GPUs per process: channels inside a process and MPI between them.
    testplans::ExchangeOptions four;
    four.gpus = 4;
    m = Execute(testplans::ExchangePlan(four), *backend);
    if (root) Expect(m.verified && m.memory.size() == 4, "exchange on 4 GPUs (2 per process) verified");

    // A missing transfer is refused by Verify (destination coverage) before anything runs.
    four.drop = {0, 3};
    if (root) Expect(!Verify(testplans::ExchangePlan(four)).ok(), "missing transfer refused by Verify");

    // A transfer lost at run time across processes is caught by the byte check
    // on the receiving rank and reported by rank 0.
    four.drop = {-1, -1};
    HostBackendOptions lossy = ho;
    lossy.lose_receive = testplans::LoseReceive("exchange", 0, 3);
    auto lossy_backend = MakeHostBackend(lossy);
    m = Execute(testplans::ExchangePlan(four), *lossy_backend);
    if (root) {
      Expect(!m.verified, "lost transfer caught");
      Expect(m.mismatch_count == 4 * 24, "all elements of the lost block counted");
      Expect(!m.mismatches.empty() && m.mismatches[0].gpu == 3 && m.mismatches[0].index == 0 &&
                 m.mismatches[0].tensor == "model.embed_tokens.weight",
             "mismatch names tensor, GPU and index");
    }
    if (root) std::printf("executor_mpi_test: %s (%d failures)\n", failures == 0 ? "ok" : "FAILED", failures);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "executor_mpi_test: %s\n", e.what());
    return 1;
  }
  return failures == 0 ? 0 : 1;
}
