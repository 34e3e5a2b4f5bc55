// Stable hashing for fingerprints (cluster, scenario): the same text gives the
// same hash on every build and platform, which std::hash does not promise.
#pragma once

#include <cstdint>
#include <string_view>

namespace reshard {

// FNV-1a, 64 bit (Fowler-Noll-Vo). O(|s|).
inline uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char ch : s) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace reshard
