// CounterTotals: the time-weighted counter sums a step row carries (docs/counters.md); the
// attribution rule is in counter_attribution.h.
#pragma once

#include <array>
#include <cstdint>

#include "analysis/model/events.h"

namespace gpuacct {

// The time-weighted sums of one set of time; means derived from them.  Sums (not means) so that
// sets can be added: a summary over steps adds the rows' CounterTotals.
struct CounterTotals {
  std::array<double, kCounterMetricCount> weighted{};     // sum of overlap_ns * pct
  std::array<int64_t, kCounterMetricCount> covered_ns{};  // sum of overlap_ns

  double mean(CounterMetric m) const;  // NaN when nothing was covered
  bool any() const;
  CounterTotals& operator+=(const CounterTotals& other);
  // Adds `overlap_ns` of `sample` (its non-NaN metrics).
  void add(const CounterSample& sample, int64_t overlap_ns);
};

}  // namespace gpuacct
