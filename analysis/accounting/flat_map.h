// A small open-addressing hash map from non-zero uint64 keys to trivially copyable values.
// Why not std::unordered_map: the accountant does one insert per event and one lookup per GPU
// op on its hot path; node allocation dominated the profile.  Linear probing, power-of-two
// capacity, backward-shift deletion (no tombstones), key 0 reserved as "empty".
#pragma once

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

  // Returns the value for key, inserting a default one if absent.  key must be non-zero.
  V& operator[](uint64_t key) {
    if ((size_ + 1) * 4 > slots_.size() * 3) grow();
    size_t i = index_of(key);
    while (true) {
      Slot& s = slots_[i];
      if (s.key == key) return s.value;
      if (s.key == 0) {
        s.key = key;
        s.value = V{};
        ++size_;
        return s.value;
      }
      i = (i + 1) & mask();
    }
  }

  V* find(uint64_t key) {
    size_t i = index_of(key);
    while (true) {
      Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == 0) return nullptr;
      i = (i + 1) & mask();
    }
  }
  const V* find(uint64_t key) const { return const_cast<FlatMap64*>(this)->find(key); }

  // Removes every entry for which pred(key, value) is true.  O(capacity).
  template <typename Pred>
  void erase_if(Pred pred) {
    spare_.swap(slots_);  // reuse the previous table's memory: no allocation once warmed up
    size_t cap = 16;
    size_t keep = 0;
    for (const Slot& s : spare_) keep += (s.key != 0 && !pred(s.key, s.value)) ? 1u : 0u;
    while (keep * 2 > cap) cap *= 2;
    slots_.assign(cap, Slot{});
    size_ = 0;
    for (const Slot& s : spare_) {
      if (s.key != 0 && !pred(s.key, s.value)) (*this)[s.key] = s.value;
    }
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
  size_t index_of(uint64_t key) const {
    // Correlation ids are handed out sequentially, so the low bits are already well spread and
    // ids that arrive together land in neighbouring slots (cache-friendly).  The high half is
    // folded in so ids with a per-process or per-thread prefix do not all collide.
    return static_cast<size_t>(key ^ (key >> 32)) & mask();
  }
  void grow() {
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(old.size() * 2, Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != 0) (*this)[s.key] = s.value;
    }
  }

  std::vector<Slot> slots_;
  std::vector<Slot> spare_;
  size_t size_ = 0;
};

}  // namespace gpuacct
