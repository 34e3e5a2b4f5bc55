// Max-min fair rates by progressive filling (sim/max_min.h says the problem,
// the algorithm, its tie rules and complexity). The simulator's predictions
// depend on the exact floating-point steps here (each share is
// max(0, remaining) / unfrozen, each frozen rate is subtracted from every port
// it crosses, in freezing order), so change them only on purpose.
#include "sim/max_min.h"

#include <algorithm>

#include "model/error.h"

namespace reshard {

void MaxMinFairRates(std::span<const SharedFlow> flows, std::span<const SharedPort> ports, std::span<double> rates,
                     MaxMinScratch& s) {
  const int32_t nflows = static_cast<int32_t>(flows.size());
  const int32_t nports = static_cast<int32_t>(ports.size());
  RESHARD_CHECK(rates.size() == flows.size(), "one rate per flow");

  // Each port's flows (CSR, by flow index) and starting capacity.
  s.flows_begin.assign(static_cast<size_t>(nports) + 1, 0);
  for (const SharedFlow& f : flows) {
    for (int32_t k = 0; k < f.num_ports; ++k) {
      RESHARD_CHECK(f.ports[k] >= 0 && f.ports[k] < nports, "flow on a port outside the ports");
      ++s.flows_begin[f.ports[k] + 1];
    }
  }
  for (int32_t q = 0; q < nports; ++q) s.flows_begin[q + 1] += s.flows_begin[q];
  s.port_flows.resize(s.flows_begin[nports]);
  s.unfrozen.assign(nports, 0);
  for (int32_t i = 0; i < nflows; ++i) {
    const SharedFlow& f = flows[i];
    for (int32_t k = 0; k < f.num_ports; ++k) {
      const int32_t q = f.ports[k];
      s.port_flows[s.flows_begin[q] + s.unfrozen[q]++] = i;
    }
  }
  s.remaining_capacity.resize(nports);
  s.touched.assign(nports, 0);
  s.touched_ports.clear();
  s.frozen.assign(nflows, 0);

  // Ports by (fair share, tie id), smallest first.
  s.shares.Resize(nports);
  s.shares.Clear();
  auto push_share = [&](int32_t q) {
    s.shares.Set(q, {std::max(0.0, s.remaining_capacity[q]) / s.unfrozen[q], ports[q].tie_id < 0 ? q : ports[q].tie_id});
  };
  for (int32_t q = 0; q < nports; ++q) {
    s.remaining_capacity[q] = ports[q].capacity;
    if (s.unfrozen[q] > 0) push_share(q);
  }

  size_t left = flows.size();
  s.by_cap.clear();
  for (int32_t i = 0; i < nflows; ++i) {
    const SharedFlow& f = flows[i];
    if (f.num_ports == 0) {  // nothing shares it: its cap is its rate
      rates[i] = f.cap;
      s.frozen[i] = 1;
      --left;
      continue;
    }
    double limit = std::numeric_limits<double>::infinity();
    for (int32_t k = 0; k < f.num_ports; ++k) limit = std::min(limit, s.remaining_capacity[f.ports[k]]);
    if (f.cap < limit) s.by_cap.push_back({f.cap, f.tie_id < 0 ? i : f.tie_id, i});
  }
  // A heap, not a sort: usually ports freeze most flows and few caps are popped.
  auto later = [](const MaxMinScratch::CapEntry& a, const MaxMinScratch::CapEntry& b) {
    return a.cap != b.cap ? a.cap > b.cap : a.tie_id > b.tie_id;
  };
  std::make_heap(s.by_cap.begin(), s.by_cap.end(), later);

  auto freeze = [&](int32_t i, double rate) {
    const SharedFlow& f = flows[i];
    s.frozen[i] = 1;
    rates[i] = rate;
    for (int32_t k = 0; k < f.num_ports; ++k) {
      const int32_t q = f.ports[k];
      s.remaining_capacity[q] -= rate;
      --s.unfrozen[q];
      if (!s.touched[q]) {
        s.touched[q] = 1;
        s.touched_ports.push_back(q);
      }
    }
  };
  auto flush = [&]() {  // re-key the ports whose share changed
    for (int32_t q : s.touched_ports) {
      s.touched[q] = 0;
      if (s.unfrozen[q] > 0) push_share(q);
      else s.shares.Erase(q);
    }
    s.touched_ports.clear();
  };
  auto pop_cap = [&]() {
    std::pop_heap(s.by_cap.begin(), s.by_cap.end(), later);
    s.by_cap.pop_back();
  };
  while (left > 0) {
    const double share_next = s.shares.Empty() ? std::numeric_limits<double>::infinity() : s.shares.TopKey().first;
    // The smallest cap binds first when it is at or below the next share;
    // caps above it are not looked at (flows frozen by ports stay in the heap).
    int32_t capped = -1;
    while (!s.by_cap.empty() && s.by_cap.front().cap <= share_next) {
      if (!s.frozen[s.by_cap.front().flow]) {
        capped = s.by_cap.front().flow;
        break;
      }
      pop_cap();
    }
    if (capped >= 0) {
      const double cap = s.by_cap.front().cap;
      pop_cap();
      freeze(capped, cap);
      --left;
      flush();
      continue;
    }
    RESHARD_CHECK(!s.shares.Empty(), "water-filling lost a flow");
    const int32_t q = s.shares.Top();
    const double share = s.shares.TopKey().first;
    s.shares.Erase(q);
    // Every unfrozen flow on q stops at `share` (floored: rates stay positive).
    const double rate = std::max(share, ports[q].min_rate);
    for (int32_t k = s.flows_begin[q]; k < s.flows_begin[q + 1]; ++k) {
      const int32_t i = s.port_flows[k];
      if (s.frozen[i]) continue;
      freeze(i, rate);
      --left;
    }
    flush();
  }
}

std::vector<double> MaxMinFairRates(std::span<const SharedFlow> flows, std::span<const SharedPort> ports) {
  std::vector<double> rates(flows.size(), 0.0);
  MaxMinScratch scratch;
  MaxMinFairRates(flows, ports, rates, scratch);
  return rates;
}

}  // namespace reshard
