// Rounds levelled by bytes: segments moved between nearby rounds so that each
// round's busiest port carries fewer bytes, after the colouring (rounds.h)
// has set how many segments a round holds per GPU and direction.
//
// Why: a round ends when its last flow does and the next round on a GPU
// waits for it, so a round takes as long as its busiest port's bytes, while
// the colouring counts segments, not bytes (a pair's segments are its bytes
// over the fewest that fit, 24-33 MiB at 32 MiB, and a GPU below the
// largest degree has empty colours). On grid qwen3-235b TP2xPP8xEP4 -> TP4xDP8
// EP32 on 32 H200 the mean of a round's port bytes was 0.905 of its busiest.
//
// Algorithm: for each round in order, while its busiest port (ties: lowest
// id) has a segment that can move to a round at most `window` away whose
// count limit holds at both ends and whose busiest port the move does not
// raise, the move that leaves the target's ports least loaded is made (the
// segment's two ports, both below the source round's busiest load after
// it). Each move takes one port load at the round's maximum below it and
// puts nothing at or above it, so the sorted load vector falls
// lexicographically and the loop ends. Deterministic: ties by index.
// O(moves · (window · segments of a port and round + P)) plus O(P · R) to
// start, for P = 2 · gpus ports and R rounds.
#pragma once

#include <cstdint>
#include <vector>

namespace reshard {

// How far (in rounds) one move may take a segment: rounds keep roughly the
// layer order the colouring gave them (window 3: smaller gains; 32: two of 34
// at-scale rows slower, bench/results/2026-12-08-cpu-rounds-in-turns).
inline constexpr int32_t kRoundBalanceWindow = 8;

// One segment of the rounds levelled: its ports (out: sender GPU, in:
// receiver GPU), bytes and round (changed in place).
struct RoundItem {
  int32_t src = 0, dst = 0;
  int64_t bytes = 0;
  int32_t round = 0;
};

// Levels `items` (rounds in [0, rounds)) so no GPU sends nor receives more
// than `per_round` of them in a round (given so on entry). Returns the
// moves made.
int64_t BalanceRoundBytes(std::vector<RoundItem>& items, int32_t gpus, int32_t rounds, int32_t per_round,
                          int32_t window);

}  // namespace reshard
