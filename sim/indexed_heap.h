// IndexedHeap: a d-ary min-heap (d = kArity, 4 by default) of small integer
// ids ordered by (key, id) that knows where each id sits, so an id's key can
// change or the id can leave in O(log n), and no stale entries pile up. Four
// children per node halve the depth that a key moving up pays, for at most
// three more comparisons per level moving down; the simulator's keys mostly
// move by a little, so that is cheaper than two (bench/results/
// 2026-12-02-cpu-sim-speed/).
//
// The simulator keeps its flows' end times in one (a component of F flows
// re-rated F times would otherwise leave F^2 lazy entries) and max-min
// sharing keeps its ports' fair shares in another. Ties are broken by id, so
// Top() is the same whatever order the keys were set in. Build fills it in
// O(n); Move renames an id (the simulator's flow slots move when one ends).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace reshard {

template <typename Key, int kArity = 4>
class IndexedHeap {
  static_assert(kArity >= 2);
 public:
  void Resize(size_t ids) { pos_.resize(ids, -1); }  // ids 0 .. ids-1 may be used
  bool Empty() const { return heap_.empty(); }
  int32_t Top() const { return heap_.front().id; }
  Key TopKey() const { return heap_.front().key; }
  // Inserts `id` or moves it to `key`.
  void Set(int32_t id, Key key) {
    if (pos_[id] < 0) {
      pos_[id] = static_cast<int32_t>(heap_.size());
      heap_.push_back({key, id});
      Up(pos_[id]);
    } else {
      const int32_t i = pos_[id];
      const Entry old = heap_[i];
      heap_[i].key = key;
      if (Less(heap_[i], old)) Up(i); else Down(i);
    }
  }
  void Erase(int32_t id) {  // no-op when absent
    const int32_t i = pos_[id];
    if (i < 0) return;
    pos_[id] = -1;
    const Entry last = heap_.back();
    heap_.pop_back();
    if (i == static_cast<int32_t>(heap_.size())) return;
    Place(i, last);
    Up(i);
    Down(pos_[last.id]);
  }
  bool Contains(int32_t id) const { return pos_[id] >= 0; }
  // Renames id `from` (present or absent) to absent id `to`, keeping its key.
  // O(1); the order stays a heap only when no two keys are equal.
  void Move(int32_t from, int32_t to) {
    const int32_t i = pos_[from];
    pos_[to] = i;
    pos_[from] = -1;
    if (i >= 0) heap_[i].id = to;
  }
  // Replaces the contents with (id, key) pairs of distinct absent-or-present
  // ids. O(n): bottom-up heap construction.
  template <typename Pairs>
  void Build(const Pairs& entries) {
    Clear();
    for (const auto& [id, key] : entries) {
      pos_[id] = static_cast<int32_t>(heap_.size());
      heap_.push_back({key, id});
    }
    const int32_t n = static_cast<int32_t>(heap_.size());
    if (n >= 2)
      for (int32_t i = (n - 2) / kArity; i >= 0; --i) Down(i);
  }
  void Clear() {
    for (const Entry& e : heap_) pos_[e.id] = -1;
    heap_.clear();
  }

 private:
  struct Entry {
    Key key;
    int32_t id;
  };
  static bool Less(const Entry& a, const Entry& b) { return a.key != b.key ? a.key < b.key : a.id < b.id; }
  void Place(int32_t i, const Entry& e) {
    heap_[i] = e;
    pos_[e.id] = i;
  }
  void Up(int32_t i) {
    const Entry e = heap_[i];
    while (i > 0) {
      const int32_t parent = (i - 1) / kArity;
      if (!Less(e, heap_[parent])) break;
      Place(i, heap_[parent]);
      i = parent;
    }
    Place(i, e);
  }
  void Down(int32_t i) {
    const Entry e = heap_[i];
    const int32_t n = static_cast<int32_t>(heap_.size());
    while (true) {
      const int32_t first = kArity * i + 1;
      if (first >= n) break;
      const int32_t end = first + kArity < n ? first + kArity : n;
      int32_t c = first;
      for (int32_t k = first + 1; k < end; ++k)
        if (Less(heap_[k], heap_[c])) c = k;
      if (!Less(heap_[c], e)) break;
      Place(i, heap_[c]);
      i = c;
    }
    Place(i, e);
  }
  std::vector<Entry> heap_;
  std::vector<int32_t> pos_;  // id -> index in heap_, -1 when absent
};

}  // namespace reshard
