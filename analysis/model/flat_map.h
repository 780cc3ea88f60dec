// A small open-addressing hash map from non-zero uint64 keys to trivially copyable values.
// Why not std::unordered_map: the accountant does one insert per event and one lookup per GPU
// op on its hot path; node allocation dominated the profile.  Linear probing, power-of-two
// capacity, backward-shift deletion (no tombstones), key 0 reserved as "empty".  Also the
// importer's and the HTA totals' tables keyed by correlation id (one entry per launch).
//
// Slots: a correlation id's own low bits while that keeps probe runs short (sequential ids
// then sit in neighbouring slots: cache-friendly, the common case).  Sequential ids with a few
// long-lived ones (launches whose records were dropped in bulk) can span more than the
// capacity: each new id then lands in a run of old ones and probes to its end (a worker once
// probed 53,000 slots per lookup).  An insert that probes more than kLongProbe slots switches
// the map to mixed slots for good (until clear()): slower by cache misses, never quadratic.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpuacct {

template <typename V>
class FlatMap64 {
  static_assert(std::is_trivially_copyable_v<V>);

 public:
  FlatMap64() { slots_.resize(16); }

  size_t size() const { return size_; }
  size_t capacity() const { return slots_.size(); }

  // Returns the value for key, inserting a default one if absent.  key must be non-zero.
  V& operator[](uint64_t key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = index_of(key);
    for (size_t probes = 0;; ++probes) {
      Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (s.key == 0) {
        if (probes > kLongProbe && !mixed_) {
          mixed_ = true;
          rehash(slots_.size());
          return (*this)[key];
        }
        s.key = key;
        s.value = V{};
        ++size_;
        return s.value;
      }
      i = (i + 1) & mask();
    }
  }

  // nullptr when absent (key 0 is never present).
  V* find(uint64_t key) {
    if (key == 0) return nullptr;  // 0 marks an empty slot: it would "find" one
    size_t i = index_of(key);
    while (true) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
      i = (i + 1) & mask();
    }
  }
  const V* find(uint64_t key) const { return const_cast<FlatMap64*>(this)->find(key); }

  // Removes `key`; false if it was absent.  The entries after it in its probe run move back
  // over the hole (backward shift), so lookups never meet a tombstone.
  bool erase(uint64_t key) {
    if (key == 0) return false;
    size_t hole = index_of(key);
    for (;; hole = (hole + 1) & mask()) {
      if (slots_[hole].key == 0) return false;
      if (slots_[hole].key == key) break;
    }
    for (size_t j = (hole + 1) & mask(); slots_[j].key != 0; j = (j + 1) & mask()) {
      // The entry at j may fill the hole when the hole lies on its probe path, i.e. between
      // its home slot and j (cyclically).
      const size_t home = index_of(slots_[j].key);
      if (((j - home) & mask()) >= ((j - hole) & mask())) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  // Whether slots are mixed (see the top of this file); for tests and diagnostics.
  bool mixed() const { return mixed_; }
  // The most slots a lookup of a present key probes (its entry's distance from its home slot,
  // plus one); O(capacity), for tests.
  size_t longest_probe() const {
    size_t longest = 0;
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (slots_[i].key != 0)
        longest = std::max(longest, ((i - index_of(slots_[i].key)) & mask()) + 1);
    }
    return longest;
  }

  // How many slots a lookup of key probes (1: it sits in its home slot; 0: absent); for tests.
  size_t probe_length(uint64_t key) const {
    if (key == 0) return 0;
    for (size_t i = index_of(key), n = 1;; i = (i + 1) & mask(), ++n) {
      if (slots_[i].key == key) return n;
      if (slots_[i].key == 0) return 0;
    }
  }

  // Removes every entry and gives the memory back.
  void clear() {
    mixed_ = false;
    std::vector<Slot>(16).swap(slots_);
    std::vector<Slot>().swap(spare_);
    size_ = 0;
  }

  // Removes every entry for which pred(key, value) is true, calling pred once per entry.
  // O(capacity), in place: no allocation unless the map ends up sparse (below), so pruning a
  // table of a whole trace's launches neither doubles its memory nor touches fresh pages.
  //
  // How: the scan starts after an empty slot, so no probe run crosses its start.  Each entry is
  // taken out of its slot and, when kept, put back by probing from its home.  The slots from
  // its home to its old slot were all scanned already and its old slot is free, so it lands at
  // or before where it was, and the entries after it find their path the same way.
  template <typename Pred>
  void erase_if(Pred pred) {
    size_t start = 0;
    while (slots_[start].key != 0) ++start;  // load <= 3/4: an empty slot exists
    for (size_t n = 1; n <= slots_.size(); ++n) {
      const size_t at = (start + n) & mask();
      const Slot s = slots_[at];
      if (s.key == 0) continue;
      slots_[at] = Slot{};
      if (pred(s.key, s.value)) {
        --size_;
        continue;
      }
      size_t i = index_of(s.key);
      while (slots_[i].key != 0) i = (i + 1) & mask();
      slots_[i] = s;
    }
    shrink_if_sparse();
  }

  template <typename Fn>
  void for_each(Fn fn) const {
    for (const Slot& s : slots_) {
      if (s.key != 0) fn(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    V value{};
  };
  size_t mask() const { return slots_.size() - 1; }
  static constexpr size_t kLongProbe = 64;

  size_t index_of(uint64_t key) const {
    if (mixed_) {
      // Fibonacci hashing: the product's high bits, folded so any capacity up to 2^64 works.
      const uint64_t h = key * 0x9E3779B97F4A7C15ull;
      return static_cast<size_t>(h ^ (h >> 29) ^ (h >> 47)) & mask();
    }
    // Correlation ids are handed out sequentially, so the low bits are already well spread and
    // ids that arrive together land in neighbouring slots (cache-friendly).  The high half is
    // folded in so ids with a per-process or per-thread prefix do not all collide.
    return static_cast<size_t>(key ^ (key >> 32)) & mask();
  }
  void grow() { rehash(slots_.size() * 2); }
  // A map that emptied (a live source's settled launches) moves to a table at most half full,
  // in the memory of the one it had before that (spare_): no allocation once warmed up.
  void shrink_if_sparse() {
    size_t cap = 16;
    while (size_ * 2 > cap) cap *= 2;
    if (cap * 4 > slots_.size()) return;
    spare_.swap(slots_);
    slots_.assign(cap, Slot{});
    size_ = 0;
    for (const Slot& s : spare_) {
      if (s.key != 0) (*this)[s.key] = s.value;
    }
  }
  void rehash(size_t capacity) {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) (*this)[s.key] = s.value;
    }
  }

  std::vector<Slot> slots_;
  std::vector<Slot> spare_;
  size_t size_ = 0;
  bool mixed_ = false;
};

}  // namespace gpuacct
