// A problem's routings (planner/problem.h) for the search to switch
// between: plain (the source choice alone), with receive-side relays
// (Problem::AddRelays) and with sender-side relays (Problem::AddSendRelays)
// added to one of those two, each made on first use. Switching swaps the
// routing in and out of the problem: O(1), no copies after the first.
#pragma once

#include <cstdint>
#include <utility>

#include "model/error.h"
#include "planner/problem.h"

namespace reshard {

class Routings {
 public:
  static constexpr int32_t kPlain = 0, kRelayed = 1, kSendRelayed = 2;
  explicit Routings(Problem& prob) : prob_(prob) {}
  // The relayed bytes (0: no box is relayed; both routings are the same).
  int64_t RelayedBytes() {
    if (relayed_bytes_ < 0) {
      Use(kPlain);
      saved_[kPlain] = prob_.SaveRouting();
      relayed_bytes_ = prob_.AddRelays();
      now_ = kRelayed;
    }
    return relayed_bytes_;
  }
  // The bytes moved off their sender's NIC by sender-side relays, and off
  // their receiver's NIC by receiver-side NIC relays (AddRecvRelays), added
  // to routing `base` (kPlain or kRelayed; 0: none, the routing is base's).
  int64_t SendRelayedBytes(int32_t base) {
    if (send_base_ != base) {
      Use(base);
      Problem::Routing copy = prob_.SaveRouting();
      send_relayed_bytes_ = prob_.AddSendRelays();
      send_relayed_bytes_ += prob_.AddRecvRelays();
      saved_[base] = std::move(copy);
      now_ = kSendRelayed;
      send_base_ = base;
    }
    return send_relayed_bytes_;
  }
  void Use(int32_t routing) {
    if (routing == now_) return;
    RESHARD_CHECK(routing == kPlain || (routing == kRelayed ? relayed_bytes_ >= 0 : send_base_ >= 0),
                  "a routing is made before it is used");
    Swap(saved_[now_]);
    Swap(saved_[routing]);
    now_ = routing;
  }
  int32_t Now() const { return now_; }
  // The routing the problem holds, as a schedule cache key: equal routings
  // get one key.
  int32_t Key() const {
    if (now_ == kSendRelayed && send_relayed_bytes_ > 0) return kSendRelayed + send_base_;
    const int32_t base = now_ == kSendRelayed ? send_base_ : now_;
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
  Problem::Routing saved_[3];  // the routings the problem does not hold now
  int32_t now_ = kPlain;
  int64_t relayed_bytes_ = -1;
  int32_t send_base_ = -1;
  int64_t send_relayed_bytes_ = 0;
};

}  // namespace reshard
