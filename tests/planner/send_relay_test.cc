// Sender-side relays (Problem::AddSendRelays): a hand-derived two-node case
// (NIC egress before and after, and the simulated time against the port
// arithmetic), and properties of every plan with them: each destination byte
// written exactly once (Verify's coverage), each relayed part carried by a
// first hop into the relay peer's staging and sent on from there only after
// it arrived, staging accounted.
#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model/scenario.h"
#include "plan/plan.h"
#include "planner/emitter.h"
#include "planner/planner.h"
#include "planner/problem.h"
#include "planner/routings.h"
#include "planner/segments.h"
#include "tests/planner/planner_test_util.h"

namespace reshard {
namespace {

// Two DGX H200 nodes, `model` from `src` to `dst` (default memory).
Scenario TwoNodes(const std::string& model, const std::string& src, const std::string& dst, const std::string& name) {
  return ParseScenario(fmt::format("name: {}\nmodel: {}\ncluster: {{preset: dgx-h200, nodes: 2}}\nsource: {}\n"
                                   "destination: {}\n",
                                   name, model, src, dst),
                       "<test>");
}

// llama3-8b (bf16, B = 16.06 GB) on GPU 0 of node 0 -> TP8 on node 1 of two
// DGX H200 (one NIC per GPU, 48 GB/s each; NVLink 365 GB/s per GPU port).
Scenario OneHolderScenario() {
  return TwoNodes("llama3-8b", "{tp: 1, gpus: \"0\"}", "{tp: 8, gpus: \"8-15\"}", "one-holder");
}

// Network egress per NIC of a problem's routing (a sender relay's second hop
// on the relay peer's NIC; a receiver-side NIC relay's first hop on the
// holder's).
std::vector<int64_t> NicEgress(const Problem& p) {
  const Cluster& c = p.scenario.cluster;
  std::vector<int64_t> out(c.nodes * c.nics_per_node, 0);
  for (const SourcedFragment& sf : p.sourced) {
    if (sf.relay || c.Between(sf.src_gpu, sf.dst_gpu) != LinkClass::kNetwork) continue;
    out[c.NicOf(sf.via >= 0 && !sf.via_recv ? sf.via : sf.src_gpu)] += sf.elems * p.elem_bytes;
  }
  return out;
}

// Before: GPU 0 sends all B over NIC 0 (NICs 1-7 idle), each receiver NIC
// takes B/8: the network phase is B / 48 GB/s = 16.06e9 / 48e9 = 335 ms.
// AddSendRelays: node 0's eight NICs have mean B/8; NIC 0 keeps about B/8
// and GPUs 1-7 each forward about B/8 (whole fragments: within the largest
// one). After: GPU 0 first sends 7B/8 over NVLink (14.05e9 / 365e9 = 38.5
// ms), then every NIC of node 0 sends B/8 (2.01e9 / 48e9 = 41.8 ms): about
// 80 ms, a quarter of the direct plan. A round per phase packs before and
// unpacks after its transfers: at most B through GPU 0's copy engine
// before the first hop (16.06e9 / 2.1e12 = 7.6 ms) and B/8 unpacked per
// receiver (1.0 ms), so at most 89 ms (5 % for ops and latencies). Its two
// communicator lanes (planner/comm_lanes.h) let one lane's second hop run
// while the other's first hop does, so the hops need not add up: no plan
// beats the busier port, max(38.5, 41.8) ms. The relayed plan lands between
// the two, below a third of the direct plan.
TEST(SendRelays, OneHolderSpreadsItsEgressOverTheNodesNics) {
  const Scenario s = OneHolderScenario();
  Problem prob(s);  // no receive-side relays (the norms, replicated over TP, would be)
  const std::vector<int64_t> before = NicEgress(prob);
  const int64_t total = before[0];
  ASSERT_GT(total, int64_t{16'000'000'000});
  for (int32_t n = 1; n < 16; ++n) EXPECT_EQ(before[n], 0) << n;
  int64_t largest = 0;
  for (const SourcedFragment& sf : prob.sourced) largest = std::max(largest, sf.elems * prob.elem_bytes);
  const int64_t moved = prob.AddSendRelays();
  const std::vector<int64_t> after = NicEgress(prob);
  EXPECT_EQ(moved, total - after[0]);
  for (int32_t n = 0; n < 8; ++n) EXPECT_LE(std::abs(after[n] - total / 8), largest) << "NIC " << n;
  for (const SourcedFragment& sf : prob.sourced)
    if (sf.via >= 0) {
      EXPECT_EQ(sf.src_gpu, 0);
      EXPECT_TRUE(sf.via >= 1 && sf.via <= 7) << sf.via;  // a peer of the holder's node
    }

  PlannerOptions never, always;
  never.send_relays = false;
  always.send_relays = true;
  never.relays = always.relays = false;
  never.per_round = always.per_round = kPerRoundAll;
  never.segment_bytes = always.segment_bytes = int64_t{1} << 30;
  const PlanResult direct = MakePlan(s, never), relayed = MakePlan(s, always);
  ASSERT_TRUE(direct.ok() && relayed.ok());
  EXPECT_EQ(direct.stats.send_relayed_bytes, 0);
  EXPECT_EQ(relayed.stats.send_relayed_bytes, moved);
  const double b = static_cast<double>(total);
  const double direct_s = b / 48e9, relayed_s = (b - static_cast<double>(after[0])) / 365e9 + b / 8 / 48e9;
  const double copies_s = b / 2.1e12 + b / 8 / 2.1e12;
  EXPECT_GE(direct.plan.summary.predicted_time_s, direct_s);
  EXPECT_GE(relayed.plan.summary.predicted_time_s,
            std::max((b - static_cast<double>(after[0])) / 365e9, b / 8 / 48e9));
  EXPECT_LE(relayed.plan.summary.predicted_time_s, (relayed_s + copies_s) * 1.05);
  EXPECT_LT(3 * relayed.plan.summary.predicted_time_s, direct.plan.summary.predicted_time_s);
  // The search keeps them (predicted faster).
  PlannerOptions searched;
  searched.relays = false;
  const PlanResult chosen = MakePlan(s, searched);
  ASSERT_TRUE(chosen.ok());
  EXPECT_GT(chosen.stats.send_relayed_bytes, 0);
  EXPECT_LT(chosen.plan.summary.predicted_time_s, direct.plan.summary.predicted_time_s);
}

// Network ingress per NIC of a problem's routing (a receiver-side relay's
// first hop lands on the relay peer's NIC).
std::vector<int64_t> NicIngress(const Problem& p) {
  const Cluster& c = p.scenario.cluster;
  std::vector<int64_t> out(c.nodes * c.nics_per_node, 0);
  for (const SourcedFragment& sf : p.sourced) {
    if (sf.relay || c.Between(sf.src_gpu, sf.dst_gpu) != LinkClass::kNetwork) continue;
    out[c.NicOf(sf.via >= 0 && sf.via_recv ? sf.via : sf.dst_gpu)] += sf.elems * p.elem_bytes;
  }
  return out;
}

// The mirror of OneHolderSpreadsItsEgressOverTheNodesNics: llama3-8b TP8 on
// node 0 -> TP1 on GPU 8 of node 1. Before: NIC 8 takes all B = 16.06 GB
// (NICs 9-15 idle): B / 48 GB/s = 335 ms. AddRecvRelays: node 1's eight
// NICs have mean B/8; NIC 8 keeps about B/8 and GPUs 9-15 each take about
// B/8 over their own NIC (whole fragments: within the largest one) and send
// it on to GPU 8 over NVLink in the relay phase. After: the network phase
// B/8 / 48 GB/s = 41.8 ms, then 7B/8 into GPU 8's NVLink, 14.05e9 / 365e9
// = 38.5 ms: about 80 ms; at least the busier port, 41.8 ms, and the
// unpacks and ops add a few percent. Below a third of the direct plan.
TEST(RecvRelays, OneReceiverSpreadsItsIngressOverTheNodesNics) {
  const Scenario s = TwoNodes("llama3-8b", "{tp: 8, gpus: \"0-7\"}", "{tp: 1, gpus: \"8\"}", "one-receiver");
  Problem prob(s);
  const std::vector<int64_t> before = NicIngress(prob);
  const int64_t total = before[8];
  ASSERT_GT(total, int64_t{16'000'000'000});
  for (int32_t n = 9; n < 16; ++n) EXPECT_EQ(before[n], 0) << n;
  int64_t largest = 0;
  for (const SourcedFragment& sf : prob.sourced) largest = std::max(largest, sf.elems * prob.elem_bytes);
  const int64_t sent_on = prob.AddSendRelays();  // node 0's NICs send about B/8 each already
  EXPECT_LT(100 * sent_on, total);
  const int64_t moved = prob.AddRecvRelays();
  const std::vector<int64_t> after = NicIngress(prob);
  EXPECT_EQ(moved, total - after[8]);
  EXPECT_EQ(prob.recv_relayed_bytes, moved);
  for (int32_t n = 8; n < 16; ++n) EXPECT_LE(std::abs(after[n] - total / 8), largest) << "NIC " << n;
  for (const SourcedFragment& sf : prob.sourced)
    if (sf.via >= 0 && sf.via_recv) {
      EXPECT_EQ(sf.dst_gpu, 8);
      EXPECT_TRUE(sf.via >= 9 && sf.via <= 15) << sf.via;  // a peer of the receiver's node
    }

  PlannerOptions never, always;
  never.send_relays = false;
  always.send_relays = true;
  never.relays = always.relays = false;
  never.per_round = always.per_round = kPerRoundAll;
  never.segment_bytes = always.segment_bytes = int64_t{1} << 30;
  const PlanResult direct = MakePlan(s, never), relayed = MakePlan(s, always);
  ASSERT_TRUE(direct.ok() && relayed.ok());
  EXPECT_EQ(direct.stats.recv_relayed_bytes, 0);
  EXPECT_EQ(relayed.stats.recv_relayed_bytes, moved);
  EXPECT_EQ(relayed.stats.send_relayed_bytes, sent_on);
  const double b = static_cast<double>(total);
  EXPECT_GE(direct.plan.summary.predicted_time_s, b / 48e9);
  EXPECT_GE(relayed.plan.summary.predicted_time_s, std::max(moved / 365e9, b / 8 / 48e9));
  EXPECT_LE(relayed.plan.summary.predicted_time_s, (moved / 365e9 + b / 8 / 48e9) * 1.1);
  EXPECT_LT(3 * relayed.plan.summary.predicted_time_s, direct.plan.summary.predicted_time_s);
  // The search keeps them (predicted faster).
  PlannerOptions searched;
  searched.relays = false;
  const PlanResult chosen = MakePlan(s, searched);
  ASSERT_TRUE(chosen.ok());
  EXPECT_GT(chosen.stats.recv_relayed_bytes, 0);
  EXPECT_LT(chosen.plan.summary.predicted_time_s, direct.plan.summary.predicted_time_s);
}

// A GPU whose NIC sends no more than its domain's mean keeps every byte:
// node 0's GPUs hold the same shards as node 1's need (TP2 DP4 -> TP2 DP4),
// each sends its own to its counterpart, so every NIC sends about the same
// (the source balancing leaves a 512-byte norm apart: below one op's
// latency of network bytes, 576 kB on this cluster).
TEST(SendRelays, BalancedEgressMovesNothing) {
  const Scenario s = TwoNodes("tiny-llama", "{tp: 2, dp: 4, gpus: \"0-7\"}", "{tp: 2, dp: 4, gpus: \"8-15\"}",
                              "balanced");
  Problem prob(s);
  const auto before = prob.SaveRouting();
  EXPECT_EQ(prob.AddSendRelays(), 0);
  EXPECT_EQ(prob.pairs.size(), before.pairs.size());
  for (const SourcedFragment& sf : prob.sourced) EXPECT_EQ(sf.via, -1);
}

// Properties of emitted plans with sender-side relays, over scenarios (the
// one holder, the receive-relay scenario, MoE EP across two nodes), with and
// without AddRelays first, sizes, rounds of 1 and 2 and a round per phase,
// and memory policies:
//  * Verify passes: matched pairs, no deadlock, buffer lifetimes, and every
//    destination byte written exactly once;
//  * each second hop follows its first: same parts and bytes, relay peer =
//    first hop's receiver, a later round, and each of its sends waits on
//    every receive of its first hop (same GPU), and reads only the staging
//    buffer those receives wrote;
//  * the relay peer's staging buffers are allocated before their receives
//    and freed once, after the sends, on that GPU, and counted in its planned
//    peak; with rounds a first hop is in the round before its second;
//    the memory answer without a full emission (EmitMode::kMemoryOnly) is
//    the full one's.
TEST(SendRelays, EveryByteOnceAndRelayedBytesArriveBeforeTheyAreSentOn) {
  const std::vector<Scenario> scenarios = {
      TwoNodes("tiny-llama", "{tp: 1, gpus: \"0\"}", "{tp: 8, gpus: \"8-15\"}", "one-holder-tiny"),
      planner_testing::TwoNodeRelayScenario(),
      TwoNodes("tiny-moe", "{tp: 1, ep: 2, dp: 2, gpus: \"0-1\"}", "{tp: 2, dp: 4, gpus: \"8-15\"}", "moe-two-nodes"),
  };
  int relayed_plans = 0;
  for (const Scenario& s : scenarios) {
    for (bool receive_relays : {false, true}) {
      Problem prob(s);
      if (receive_relays && prob.AddRelays() == 0) continue;
      if (prob.AddSendRelays() == 0) continue;
      for (int32_t per_round : {1, 2, kPerRoundAll})
        for (int64_t size : {int64_t{64} << 10, int64_t{1} << 20})
          for (int64_t direct_min : {int64_t{64} << 20, int64_t{0}})
            for (const PlanPolicy& policy : {PlanPolicy{0.0, false, false}, PlanPolicy{0.0, true, true}}) {
              const std::string what = fmt::format("{} receive relays {} per_round {} size {} in place from {} {}",
                                                   s.name, receive_relays, per_round, size, direct_min, policy.Name());
              const Schedule sc = MakeSchedule(prob, size, direct_min, per_round);
              const EmittedPlan e = EmitPlan(prob, sc, policy);
              ASSERT_TRUE(e.fits) << what;
              const Plan& p = e.plan;
              const VerifyResult v = Verify(p);
              ASSERT_TRUE(v.ok()) << what << ": " << (v.problems.empty() ? "" : v.problems.front());
              EXPECT_TRUE(DestinationCoverageProblems(p).empty()) << what;
              // Hops.
              int hops = 0;
              for (size_t i = 0; i < sc.segments.size(); ++i) {
                const Segment& second = sc.segments[i];
                if (second.hop != 2) continue;
                ++hops;
                ASSERT_GE(second.feed, 0) << what;
                const Segment& first = sc.segments[second.feed];
                EXPECT_EQ(first.hop, 1) << what;
                EXPECT_EQ(first.first_part, second.first_part) << what;
                EXPECT_EQ(first.num_parts, second.num_parts) << what;
                EXPECT_EQ(first.bytes, second.bytes) << what;
                EXPECT_EQ(first.dst_gpu, second.src_gpu) << what;
                EXPECT_EQ(s.cluster.Between(first.src_gpu, first.dst_gpu), LinkClass::kNvlink) << what;
                EXPECT_EQ(s.cluster.Between(second.src_gpu, second.dst_gpu), LinkClass::kNetwork) << what;
                EXPECT_LT(first.round, second.round) << what;
                // With rounds, a first hop rides the round before its second (segments.h).
                if (!sc.all_in_one_round) {
                  EXPECT_EQ(first.round + 1, second.round) << what;
                }
              }
              EXPECT_GT(hops, 0) << what;
              EXPECT_LE(sc.pre_rounds, 1) << what;
              // Ops: a send reading a relay buffer waits on every receive into it.
              std::map<int32_t, std::vector<int32_t>> recvs_into;  // relay buffer -> receives
              for (const Op& op : p.ops)
                if (op.kind == OpKind::kRecv && p.buffers[op.region.buffer].name.rfind("relay ", 0) == 0)
                  recvs_into[op.region.buffer].push_back(op.id);
              EXPECT_FALSE(recvs_into.empty()) << what;
              int64_t relay_sends = 0;
              for (const Op& op : p.ops) {
                if (op.kind != OpKind::kSend || !recvs_into.count(op.region.buffer)) continue;
                ++relay_sends;
                EXPECT_EQ(p.buffers[op.region.buffer].gpu, op.gpu) << what;
                for (int32_t r : recvs_into[op.region.buffer])
                  EXPECT_TRUE(std::find(op.deps.begin(), op.deps.end(), r) != op.deps.end())
                      << what << ": send " << op.id << " does not wait on receive " << r;
              }
              EXPECT_GT(relay_sends, 0) << what;
              // Each relay buffer freed once, after every send from it.
              for (const auto& [buf, rs] : recvs_into) {
                std::vector<int32_t> sends, frees;
                for (const Op& op : p.ops) {
                  if (op.kind == OpKind::kSend && op.region.buffer == buf) sends.push_back(op.id);
                  if (op.kind == OpKind::kFree && op.buffer == buf) frees.push_back(op.id);
                }
                ASSERT_EQ(frees.size(), 1u) << what << " buffer " << buf;
                for (int32_t snd : sends)
                  EXPECT_TRUE(std::find(p.ops[frees[0]].deps.begin(), p.ops[frees[0]].deps.end(), snd) !=
                                  p.ops[frees[0]].deps.end() ||
                                  (p.ops[frees[0]].stream == p.ops[snd].stream && snd < frees[0]))
                      << what << ": free of buffer " << buf << " before send " << snd;
              }
              // Staging on the relay peer: counted in its planned peak.
              std::vector<int64_t> relay_bytes(s.cluster.Gpus(), 0);
              for (const auto& [buf, rs] : recvs_into) relay_bytes[p.buffers[buf].gpu] += p.buffers[buf].bytes;
              for (int32_t g = 0; g < s.cluster.Gpus(); ++g)
                if (relay_bytes[g] > 0) {
                  EXPECT_GE(e.planned_peak[g], relay_bytes[g]) << what << " GPU " << g;
                }
              std::vector<EmitMode> modes = {EmitMode::kMemoryOnly};
              // No answer without emission: relay buffers are freed once sent on, before the end.
              EXPECT_EQ(MemoryAnswerMode(sc, policy), EmitMode::kMemoryOnly) << what;
              for (EmitMode mode : modes) {
                const EmittedPlan answer = EmitPlan(prob, sc, policy, mode);
                EXPECT_EQ(answer.planned_peak, e.planned_peak) << what << " mode " << static_cast<int>(mode);
                EXPECT_EQ(answer.shortfall, e.shortfall) << what << " mode " << static_cast<int>(mode);
              }
              ++relayed_plans;
            }
    }
  }
  EXPECT_GT(relayed_plans, 20);
}

// Routings keeps the sender-relayed routing of each base (plain, relayed):
// the search tries it on the relayed base after keeping the plain one's and
// comes back to that one without making it again. Each routing it hands back
// is the one made first, entry for entry, under its own cache key; the bases
// are what a fresh problem makes.
TEST(SendRelays, RoutingsKeepEachBasesSenderRelays) {
  const Scenario s = planner_testing::TwoNodeRelayScenario();
  using Entry = std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int64_t, bool, bool, int32_t, bool>;
  auto entries = [](const Problem& p) {
    std::vector<Entry> out;
    for (const SourcedFragment& sf : p.sourced)
      out.emplace_back(sf.src_gpu, sf.dst_gpu, sf.src_slot, sf.dst_rank, sf.frag, sf.elems, sf.relay, sf.feeds, sf.via,
                       sf.via_recv);
    return out;
  };
  Problem fresh(s);
  const std::vector<Entry> plain = entries(fresh);
  ASSERT_GT(fresh.AddRelays(), 0);
  const std::vector<Entry> relayed = entries(fresh);

  Problem prob(s);
  Routings routes(prob);
  ASSERT_GT(routes.RelayedBytes(), 0);
  const int64_t on_plain = routes.SendRelayedBytes(Routings::kPlain);
  ASSERT_GT(on_plain, 0);
  EXPECT_EQ(routes.Now(), Routings::kSendRelayed);
  EXPECT_EQ(routes.Key(), Routings::kSendRelayed);
  const std::vector<Entry> send_plain = entries(prob);
  const int64_t on_relayed = routes.SendRelayedBytes(Routings::kRelayed);
  ASSERT_GT(on_relayed, 0);
  EXPECT_EQ(routes.Slot(), Routings::kSendOnRelayed);
  EXPECT_EQ(routes.Key(), Routings::kSendOnRelayed);
  const std::vector<Entry> send_relayed = entries(prob);
  EXPECT_NE(send_plain, send_relayed);

  EXPECT_EQ(routes.SendRelayedBytes(Routings::kPlain), on_plain);  // kept, not made again
  EXPECT_EQ(entries(prob), send_plain);
  EXPECT_EQ(prob.send_relayed_bytes + prob.recv_relayed_bytes, on_plain);
  routes.Use(Routings::kRelayed);
  EXPECT_EQ(entries(prob), relayed);
  routes.UseSlot(Routings::kSendOnRelayed);
  EXPECT_EQ(entries(prob), send_relayed);
  EXPECT_EQ(prob.send_relayed_bytes + prob.recv_relayed_bytes, on_relayed);
  routes.Use(Routings::kSendRelayed);  // the base SendRelayedBytes last named: plain
  EXPECT_EQ(entries(prob), send_plain);
  routes.Use(Routings::kPlain);
  EXPECT_EQ(entries(prob), plain);
  EXPECT_EQ(routes.Key(), Routings::kPlain);
}

// Routings::Level: the sender-relayed routing made again with every NIC levelled (Problem::AddSendRelays'
// level_all). Grid deepseek-v3 TP8xPP4xEP32 -> TP16xDP8 EP128 on 128 GB200 NVL72 (two NVLink domains of 64 GPUs, one
// NIC each), on the relayed base: by default one NIC keeps ~0.69 GB above its domain's mean (the takers' rooms,
// each under half a fragment, add up to more than the last senders' excess); levelled, every NIC ends within one
// fragment of it and the busiest NIC's egress drops by more than 5 %. The domains' sums do not change (relays stay
// inside a domain). Unlevel hands back the routing it replaced, entry for entry, under its own key again.
TEST(SendRelays, LevelledRoutingEndsEveryNicWithinAFragmentOfItsDomainsMean) {
  const Scenario s = LoadScenario(std::string(RESHARD_SOURCE_DIR) +
                                  "/bench/results/2026-12-05-cpu-direct-threshold/"
                                  "deepseek-v3-gb200-nvl72-tp8pp4ep32-to-tp16dp8ep128.yaml");
  const Cluster& c = s.cluster;
  Problem prob(s);
  Routings routes(prob);
  ASSERT_GT(routes.RelayedBytes(), 0);
  ASSERT_GT(routes.SendRelayedBytes(Routings::kRelayed), 0);
  int64_t largest = 0;
  for (const SourcedFragment& sf : prob.sourced) largest = std::max(largest, sf.elems * prob.elem_bytes);
  // Per NIC: its egress above its domain's mean.
  auto above_mean = [&](const std::vector<int64_t>& egress) {
    std::map<int32_t, std::pair<int64_t, int64_t>> domain;  // sum, NICs
    std::vector<int32_t> nic_domain(egress.size(), -1);
    for (int32_t g = 0; g < c.Gpus(); ++g) nic_domain[c.NicOf(g)] = c.DomainOf(g);
    for (size_t n = 0; n < egress.size(); ++n) domain[nic_domain[n]].first += egress[n], ++domain[nic_domain[n]].second;
    std::vector<int64_t> out(egress.size());
    for (size_t n = 0; n < egress.size(); ++n) {
      const auto& [sum, nics] = domain[nic_domain[n]];
      out[n] = egress[n] - (sum + nics - 1) / nics;
    }
    return std::make_pair(out, domain);
  };
  auto entries = [](const Problem& p) {
    std::vector<std::tuple<int32_t, int32_t, int32_t, int32_t, int32_t, int64_t, bool, bool, int32_t, bool>> out;
    for (const SourcedFragment& sf : p.sourced)
      out.emplace_back(sf.src_gpu, sf.dst_gpu, sf.src_slot, sf.dst_rank, sf.frag, sf.elems, sf.relay, sf.feeds, sf.via,
                       sf.via_recv);
    return out;
  };
  const std::vector<int64_t> before = NicEgress(prob);
  const auto held = entries(prob);
  const auto [over_before, domains_before] = above_mean(before);
  // One NIC ~0.69 GB above its mean, more than 4 of this row's largest fragments (58.7 MB).
  EXPECT_GT(*std::max_element(over_before.begin(), over_before.end()), 4 * largest);

  const int32_t key = routes.Key();
  Problem::Routing replaced = routes.Level();
  EXPECT_NE(routes.Key(), key);
  EXPECT_TRUE(routes.Levelled());
  const std::vector<int64_t> after = NicEgress(prob);
  const auto [over_after, domains_after] = above_mean(after);
  EXPECT_EQ(domains_after, domains_before);
  for (size_t n = 0; n < after.size(); ++n) EXPECT_LE(over_after[n], largest) << "NIC " << n;
  EXPECT_LT(*std::max_element(after.begin(), after.end()), 0.95 * *std::max_element(before.begin(), before.end()));

  routes.Unlevel(std::move(replaced));
  EXPECT_FALSE(routes.Levelled());
  EXPECT_EQ(routes.Key(), key);
  EXPECT_EQ(entries(prob), held);
}

}  // namespace
}  // namespace reshard
