// A problem's routings (planner/problem.h) for the search to switch
// between: plain (the source choice alone), with receive-side relays
// (Problem::AddRelays) and with sender-side relays (Problem::AddSendRelays)
// added to one of those two (one per base), each made on first use and
// kept. Switching swaps the routing in and out of the problem: O(1), no
// copies after the first.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>

#include "model/error.h"
#include "planner/problem.h"

namespace reshard {

class Routings {
 public:
  // kSendRelayed: the sender-relayed routing on the base SendRelayedBytes
  // last named. Slot(): which routing exactly (kSendOnRelayed where that base
  // is kRelayed), for a caller that must come back to it.
  static constexpr int32_t kPlain = 0, kRelayed = 1, kSendRelayed = 2, kSendOnRelayed = 3;
  static constexpr int32_t kLevelledKey = 4;  // Key() of a levelled routing: its slot's + this
  explicit Routings(Problem& prob) : prob_(prob) {}
  // The relayed bytes (0: no box is relayed; both routings are the same).
  int64_t RelayedBytes() {
    if (relayed_bytes_ < 0) {
      UseSlot(kPlain);
      saved_[kPlain] = prob_.SaveRouting();
      relayed_bytes_ = prob_.AddRelays();
      now_ = kRelayed;
    }
    return relayed_bytes_;
  }
  // The bytes moved off their sender's NIC by sender-side relays, and off
  // their receiver's NIC by receiver-side NIC relays (AddRecvRelays), added
  // to routing `base` (kPlain or kRelayed; 0: none, the routing is base's).
  // The problem holds that routing after. Each base's is made once and kept
  // (the search comes back to the plain one's after trying the relayed
  // one's: remade, 0.4 s of the 8192-GPU row's planning).
  int64_t SendRelayedBytes(int32_t base) {
    RESHARD_CHECK(base == kPlain || base == kRelayed, "sender relays go on the plain or the relayed routing");
    const int32_t slot = kSendRelayed + base;
    if (send_bytes_[base] < 0) {
      UseSlot(base);
      Problem::Routing copy = prob_.SaveRouting();
      send_bytes_[base] = prob_.AddSendRelays();
      send_bytes_[base] += prob_.AddRecvRelays();
      saved_[base] = std::move(copy);
      now_ = slot;
    }
    send_base_ = base;
    UseSlot(slot);
    return send_bytes_[base];
  }
  // The sender-relayed routing in use made again on its base with every NIC
  // levelled (Problem::AddSendRelays(level_all), then AddRecvRelays); returns
  // the one it replaces, for Unlevel. Its Key() is its own (schedules cached
  // for the other are not its); no other routing is used until Unlevel
  // (PlanProblem gives a kept one back once its plan is emitted: a plan
  // session plans on these routings again).
  Problem::Routing Level() {
    RESHARD_CHECK(now_ >= kSendRelayed && !levelled_, "levels a sender-relayed routing");
    Problem::Routing old = prob_.SaveRouting();
    prob_.RestoreRouting(saved_[now_ - kSendRelayed]);  // a copy of the base
    prob_.AddSendRelays(true);
    prob_.AddRecvRelays();
    levelled_ = true;
    return old;
  }
  void Unlevel(Problem::Routing old) {
    RESHARD_CHECK(levelled_, "unlevels a levelled routing");
    prob_.RestoreRouting(std::move(old));
    levelled_ = false;
  }
  bool Levelled() const { return levelled_; }
  void Use(int32_t routing) {
    RESHARD_CHECK(!levelled_, "a levelled routing is kept or given back before another is used");
    RESHARD_CHECK(routing >= kPlain && routing <= kSendRelayed, "a routing is plain, relayed or sender-relayed");
    UseSlot(routing == kSendRelayed ? kSendRelayed + std::max(send_base_, 0) : routing);
  }
  // The routing the problem holds: kSendRelayed for either sender-relayed one.
  int32_t Now() const { return now_ >= kSendRelayed ? kSendRelayed : now_; }
  int32_t Slot() const { return now_; }
  void UseSlot(int32_t slot) {
    if (slot == now_) return;
    RESHARD_CHECK(!levelled_, "a levelled routing is kept or given back before another is used");
    RESHARD_CHECK(slot == kPlain || (slot == kRelayed ? relayed_bytes_ >= 0 : send_bytes_[slot - kSendRelayed] >= 0),
                  "a routing is made before it is used");
    Swap(saved_[now_]);
    Swap(saved_[slot]);
    now_ = slot;
  }
  // The routing the problem holds, as a schedule cache key: equal routings
  // get one key.
  int32_t Key() const {
    if (levelled_) return now_ + kLevelledKey;
    if (now_ >= kSendRelayed && send_bytes_[now_ - kSendRelayed] > 0) return now_;
    const int32_t base = now_ >= kSendRelayed ? now_ - kSendRelayed : now_;
    return base == kRelayed && relayed_bytes_ > 0 ? kRelayed : kPlain;
  }
 private:
  void Swap(Problem::Routing& r) {
    std::swap(prob_.sourced, r.sourced);
    std::swap(prob_.pairs, r.pairs);
    std::swap(prob_.relayed_bytes, r.relayed_bytes);
    std::swap(prob_.send_relayed_bytes, r.send_relayed_bytes);
    std::swap(prob_.recv_relayed_bytes, r.recv_relayed_bytes);
  }
  Problem& prob_;
  Problem::Routing saved_[4];  // per slot: the routings the problem does not hold now
  int32_t now_ = kPlain;
  bool levelled_ = false;
  int64_t relayed_bytes_ = -1;
  int32_t send_base_ = -1;        // the base kSendRelayed names
  int64_t send_bytes_[2] = {-1, -1};  // per base: its sender-relayed routing's bytes (-1: not made)
};

}  // namespace reshard
