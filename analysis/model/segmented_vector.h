// An append-only sequence of trivially copyable elements stored in fixed-size segments that
// never move.  Why: a std::vector that grows to N elements copies them at every doubling and
// holds the old and the new array at once, so it writes about twice its final size into fresh
// pages; on a large trace the page faults of those copies were a tenth of the reading thread.
// Segments are allocated uninitialised (their pages are touched only as elements are written)
// and elements stay where they were written: references to them stay valid as it grows.
#pragma once

#include <cstddef>
#include <iterator>
#include <memory>
#include <type_traits>
#include <vector>

namespace gpuacct {

template <typename T, size_t kSegmentElems = size_t{1} << 14>
class SegmentedVector {
  static_assert(std::is_trivially_copyable_v<T>);
  static_assert(std::is_trivially_default_constructible_v<T>);  // new T[n] leaves pages alone
  static_assert(kSegmentElems > 0 && (kSegmentElems & (kSegmentElems - 1)) == 0);

 public:
  void push_back(const T& v) {
    if (size_ == segments_.size() * kSegmentElems) {
      segments_.push_back(std::unique_ptr<T[]>(new T[kSegmentElems]));
    }
    segments_.back()[size_ % kSegmentElems] = v;
    ++size_;
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T& operator[](size_t i) const { return segments_[i / kSegmentElems][i % kSegmentElems]; }
  T& operator[](size_t i) { return segments_[i / kSegmentElems][i % kSegmentElems]; }
  void clear() {
    segments_.clear();
    size_ = 0;
  }

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = const T*;
    using reference = const T&;
    const_iterator(const SegmentedVector* v, size_t i) : v_(v), i_(i) {}
    reference operator*() const { return (*v_)[i_]; }
    pointer operator->() const { return &(*v_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const SegmentedVector* v_;
    size_t i_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  std::vector<std::unique_ptr<T[]>> segments_;
  size_t size_ = 0;
};

}  // namespace gpuacct
