#include <cstdio>
#include <algorithm>
#include "model/scenario.h"
#include "planner/problem.h"
using namespace reshard;
int main() {
  Scenario s = BuiltinScenario("deepseek-v3-pp16ep16-to-tp32dp8");
  Problem prob(s);
  auto largest = [&] { int64_t m = 0; size_t n=0; for (auto& pb : prob.pairs) if (pb.src_gpu != pb.dst_gpu) m = std::max(m, pb.bytes), ++n; printf("pairs %zu largest %lld\n", n, (long long)m); };
  largest();
  prob.AddRelays();
  largest();
}
