// ScratchVector: a std::vector for the planner's large temporary arrays (work
// items, parts and their homes: 40-150 MB each at ~1 M fragments).
//
// Why: these arrays are written once right after they are allocated, so each
// 4 KiB page costs a page fault, a few µs on a VM guest: ~20 % of planning
// time for deepseek-v3 on 512 GPUs. Allocations of 2 MiB or more are mapped
// 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE, honoured
// when THP is "always" or "madvise"): one fault per 2 MiB, and far fewer TLB
// misses for the random lookups that follow. Freed mappings are kept for the
// next allocation that fits in one (a search cuts and emits candidate after
// candidate, each with arrays of the same few sizes): faulting fresh pages
// in again costs the kernel a zeroing of each (a third of deepseek-v3's
// `reshard plan` before they were kept, with the heap's trims). An
// allocation that fits in no kept mapping unmaps them all first, so kept
// mappings stay resident only until the next large ScratchVector
// allocation (at most 16 of them). Smaller allocations, and systems
// without madvise, use operator new. Contents and behaviour are a
// std::vector's; only where the memory comes from differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace reshard {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
// The process's huge-page mappings of ScratchAllocator, freed ones kept for
// reuse (thread-safe: sweeps plan on several threads).
class HugeMappings {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  static constexpr size_t kMaxKept = 16;

  // A mapping of `len` bytes (a multiple of kHugePage), 2 MiB-aligned: the
  // smallest kept one of at least `len` and at most twice it, else a new one
  // (the kept ones are unmapped first).
  static void* Get(size_t len) {
    {
      Kept& k = Instance();
      std::lock_guard<std::mutex> lock(k.mu);
      size_t best = k.n;
      for (size_t i = 0; i < k.n; ++i)
        if (k.len[i] >= len && k.len[i] <= 2 * len && (best == k.n || k.len[i] < k.len[best])) best = i;
      if (best < k.n) {
        void* p = k.ptr[best];
        const size_t got = k.len[best];
        k.ptr[best] = k.ptr[k.n - 1], k.len[best] = k.len[k.n - 1];
        --k.n;
        if (got > len) munmap(static_cast<char*>(p) + len, got - len);
        return p;
      }
      for (size_t i = 0; i < k.n; ++i) munmap(k.ptr[i], k.len[i]);
      k.n = 0;
    }
    // Map one huge page more than needed, then unmap the unaligned ends.
    void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) throw std::bad_alloc();
    const uintptr_t begin = reinterpret_cast<uintptr_t>(raw), end = begin + len + kHugePage;
    const uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
    if (aligned > begin) munmap(raw, aligned - begin);
    if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
    madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // advice only: failure is harmless
    return reinterpret_cast<void*>(aligned);
  }

  // Keeps a mapping from Get (the oldest kept one is unmapped when full).
  static void Put(void* p, size_t len) noexcept {
    Kept& k = Instance();
    std::lock_guard<std::mutex> lock(k.mu);
    if (k.n == kMaxKept) {
      munmap(k.ptr[0], k.len[0]);
      for (size_t i = 1; i < k.n; ++i) k.ptr[i - 1] = k.ptr[i], k.len[i - 1] = k.len[i];
      --k.n;
    }
    k.ptr[k.n] = p, k.len[k.n] = len;
    ++k.n;
  }

 private:
  struct Kept {
    std::mutex mu;
    void* ptr[kMaxKept] = {};
    size_t len[kMaxKept] = {};
    size_t n = 0;
  };
  static Kept& Instance() {
    static Kept k;  // never destroyed before the vectors that use it: they unmap through it
    return k;
  }
};
#endif

template <class T>
struct ScratchAllocator {
  using value_type = T;
  static constexpr size_t kHugePage = size_t{2} << 20;

  ScratchAllocator() = default;
  template <class U>
  ScratchAllocator(const ScratchAllocator<U>&) noexcept {}

  T* allocate(size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "over-aligned types need aligned operator new");
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHugePage) return static_cast<T*>(HugeMappings::Get(Rounded(n)));
#endif
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, size_t n) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHugePage) {
      HugeMappings::Put(p, Rounded(n));
      return;
    }
#endif
    ::operator delete(p);
  }

  friend bool operator==(const ScratchAllocator&, const ScratchAllocator&) noexcept { return true; }

 private:
  static size_t Rounded(size_t n) { return (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage; }
};

template <class T>
using ScratchVector = std::vector<T, ScratchAllocator<T>>;

}  // namespace reshard
