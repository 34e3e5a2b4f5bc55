// ScratchVector: a std::vector for the planner's large temporary arrays (work
// items, parts and their homes: 40-150 MB each at ~1 M fragments).
//
// Why: these arrays are written once right after they are allocated, so each
// 4 KiB page costs a page fault, a few µs on a VM guest: ~20 % of planning
// time for deepseek-v3 on 512 GPUs. Allocations of 2 MiB or more are mapped
// 2 MiB-aligned and advised as transparent huge pages (MADV_HUGEPAGE, honoured
// when THP is "always" or "madvise"): one fault per 2 MiB, and far fewer TLB
// misses for the random lookups that follow. Smaller allocations, and systems
// without madvise, use operator new. Contents and behaviour are a
// std::vector's; only where the memory comes from differs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace reshard {

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
    if (n * sizeof(T) >= kHugePage) {
      // Map one huge page more than needed, then unmap the unaligned ends.
      const size_t len = Rounded(n);
      void* raw = mmap(nullptr, len + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (raw == MAP_FAILED) throw std::bad_alloc();
      const uintptr_t begin = reinterpret_cast<uintptr_t>(raw), end = begin + len + kHugePage;
      const uintptr_t aligned = (begin + kHugePage - 1) & ~(kHugePage - 1);
      if (aligned > begin) munmap(raw, aligned - begin);
      if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
      madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);  // advice only: failure is harmless
      return reinterpret_cast<T*>(aligned);
    }
#endif
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }

  void deallocate(T* p, size_t n) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHugePage) {
      munmap(p, Rounded(n));
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
