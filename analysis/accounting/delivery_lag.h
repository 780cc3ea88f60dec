// How late GPU records came, as the step accountant saw them (the report's `delivery` section,
// docs/report_schema.md): each GPU op's lag is how far the watermark had already passed its
// end when it arrived (0 when it came in time, or before any watermark).  A watermark is a
// promise that everything ending before it was delivered, so a positive lag is a record later
// than promised: the accountant waits for such records while their launch is owed
// (docs/accounting.md, "Finalisation"), and this says how long that wait had to be.
//
// The lags go into a log-linear histogram (8 buckets per power of two), so memory is fixed and
// a quantile is the upper end of its bucket: at most 1/8 above the exact value, never below.
// Replaying a recording feeds the same ops between the same watermarks, so offline and live
// give the same numbers; a trace has no watermarks (every lag 0).
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "analysis/model/events.h"

namespace gpuacct {

class DeliveryLag {
 public:
  static constexpr int kSubBits = 3;  // 8 buckets per power of two
  static constexpr size_t kExact = size_t{1} << kSubBits;
  static constexpr size_t kBuckets = kExact + (63 - kSubBits) * kExact;

  void add(TimeNs lag) {
    const uint64_t v = lag > 0 ? static_cast<uint64_t>(lag) : 0;
    ++counts_[bucket(v)];
    ++ops_;
    if (v > 0) ++behind_;
    max_ = std::max(max_, static_cast<TimeNs>(v));
  }

  int64_t ops() const { return ops_; }
  int64_t behind_watermark() const { return behind_; }
  TimeNs max() const { return max_; }
  // The lag at quantile q in [0, 1] over every op: the upper end of the bucket holding it,
  // capped at the maximum.  0 with no ops.
  TimeNs quantile(double q) const {
    if (ops_ == 0) return 0;
    const double want = std::clamp(q, 0.0, 1.0) * static_cast<double>(ops_);
    int64_t rank = static_cast<int64_t>(want);
    if (static_cast<double>(rank) < want) ++rank;  // ceil
    rank = std::max<int64_t>(rank, 1);
    int64_t seen = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      seen += counts_[b];
      if (seen >= rank) return std::min(max_, upper(b));
    }
    return max_;
  }

  // The most events the accountant held for unfinalised steps at a watermark, and the limit.
  void note_held(int64_t held) { held_peak_ = std::max(held_peak_, held); }
  int64_t held_peak() const { return held_peak_; }

 private:
  static size_t bucket(uint64_t v) {
    if (v < kExact) return static_cast<size_t>(v);
    const int e = 63 - std::countl_zero(v);  // >= kSubBits
    const uint64_t sub = (v >> (e - kSubBits)) & (kExact - 1);
    return kExact + static_cast<size_t>(e - kSubBits) * kExact + static_cast<size_t>(sub);
  }
  static TimeNs upper(size_t b) {
    if (b < kExact) return static_cast<TimeNs>(b);
    const size_t e = (b - kExact) / kExact + kSubBits;
    const uint64_t sub = (b - kExact) % kExact;
    const uint64_t top = ((kExact + sub + 1) << (e - kSubBits)) - 1;
    return top > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<TimeNs>(top);
  }

  std::array<int64_t, kBuckets> counts_{};
  int64_t ops_ = 0;
  int64_t behind_ = 0;
  TimeNs max_ = 0;
  int64_t held_peak_ = 0;
};

}  // namespace gpuacct
