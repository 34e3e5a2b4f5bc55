#include "planner/round_balance.h"

#include <algorithm>
#include <cstdlib>
#include <tuple>

#include "model/error.h"

namespace reshard {

int64_t BalanceRoundBytes(std::vector<RoundItem>& items, int32_t gpus, int32_t rounds, int32_t per_round,
                          int32_t window) {
  if (rounds < 2 || window < 1 || items.empty()) return 0;
  const int32_t ports = 2 * gpus;  // out: gpu, in: gpus + gpu
  const auto at = [&](int32_t port, int32_t r) { return static_cast<size_t>(port) * rounds + r; };
  std::vector<int64_t> load(static_cast<size_t>(ports) * rounds, 0);
  std::vector<int32_t> count(load.size(), 0);
  // Per port, its items in index order (CSR); a round's items at a port are found by filtering.
  std::vector<int32_t> begin(ports + 1, 0), list(2 * items.size());
  for (const RoundItem& it : items) {
    RESHARD_CHECK(it.round >= 0 && it.round < rounds && it.src >= 0 && it.src < gpus && it.dst >= 0 && it.dst < gpus,
                  "a round item out of range");
    ++begin[it.src + 1], ++begin[gpus + it.dst + 1];
    for (int32_t q : {it.src, gpus + it.dst}) load[at(q, it.round)] += it.bytes, ++count[at(q, it.round)];
  }
  for (int32_t p = 0; p < ports; ++p) begin[p + 1] += begin[p];
  {
    std::vector<int32_t> fill(begin.begin(), begin.end() - 1);
    for (int32_t i = 0; i < static_cast<int32_t>(items.size()); ++i)
      list[fill[items[i].src]++] = i, list[fill[gpus + items[i].dst]++] = i;
  }
  for (int32_t c : count) RESHARD_CHECK(c <= per_round, "a round over its segment limit before levelling");
  auto busiest = [&](int32_t r) {  // ties: the lowest port id
    int32_t best = 0;
    for (int32_t p = 1; p < ports; ++p)
      if (load[at(p, r)] > load[at(best, r)]) best = p;
    return best;
  };
  std::vector<int64_t> round_max(rounds);
  for (int32_t r = 0; r < rounds; ++r) round_max[r] = load[at(busiest(r), r)];
  int64_t moves = 0;
  for (int32_t r = 0; r < rounds; ++r) {
    for (;;) {
      const int32_t p = busiest(r);
      const int64_t m = load[at(p, r)];
      // The move: (target load, distance, target round, item), least first; only target loads below m.
      std::tuple<int64_t, int32_t, int32_t, int32_t> best{m, 0, -1, -1};
      for (int32_t k = begin[p]; k < begin[p + 1]; ++k) {
        const int32_t i = list[k];
        const RoundItem& it = items[i];
        if (it.round != r) continue;
        const int32_t out = it.src, in = gpus + it.dst;
        for (int32_t r2 = std::max(0, r - window); r2 <= std::min(rounds - 1, r + window); ++r2) {
          if (r2 == r || count[at(out, r2)] >= per_round || count[at(in, r2)] >= per_round) continue;
          const int64_t hi = std::max(load[at(out, r2)], load[at(in, r2)]) + it.bytes;
          if (hi > round_max[r2]) continue;  // that round would take longer
          best = std::min(best, std::make_tuple(hi, std::abs(r2 - r), r2, i));
        }
      }
      const auto [hi, dist, r2, i] = best;
      if (r2 < 0) break;
      RoundItem& it = items[i];
      for (int32_t q : {it.src, gpus + it.dst}) {
        load[at(q, r)] -= it.bytes, --count[at(q, r)];
        load[at(q, r2)] += it.bytes, ++count[at(q, r2)];
      }
      it.round = r2;
      round_max[r] = load[at(busiest(r), r)];
      ++moves;
    }
  }
  return moves;
}

}  // namespace reshard
