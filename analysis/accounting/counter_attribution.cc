#include "analysis/accounting/counter_attribution.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "analysis/accounting/step_row.h"

namespace gpuacct {

double CounterTotals::mean(CounterMetric m) const {
  const auto i = static_cast<size_t>(m);
  if (covered_ns[i] <= 0) return std::numeric_limits<double>::quiet_NaN();
  return weighted[i] / static_cast<double>(covered_ns[i]);
}

bool CounterTotals::any() const {
  return std::any_of(covered_ns.begin(), covered_ns.end(), [](int64_t c) { return c > 0; });
}

CounterTotals& CounterTotals::operator+=(const CounterTotals& other) {
  for (size_t i = 0; i < kCounterMetricCount; ++i) {
    weighted[i] += other.weighted[i];
    covered_ns[i] = saturating_add(covered_ns[i], other.covered_ns[i]);
  }
  return *this;
}

void CounterTotals::add(const CounterSample& sample, int64_t overlap_ns) {
  if (overlap_ns <= 0) return;
  for (size_t i = 0; i < kCounterMetricCount; ++i) {
    if (std::isnan(sample.pct[i])) continue;
    weighted[i] += static_cast<double>(overlap_ns) * sample.pct[i];
    covered_ns[i] = saturating_add(covered_ns[i], overlap_ns);
  }
}

std::array<CounterTotals, kWallCount> attribute_counters_by_wall(
    const std::vector<CategorySegment>& segments, const std::vector<CounterSample>& samples) {
  std::array<CounterTotals, kWallCount> out{};
  // Segments come in start order: a sample that ended before one segment began is behind every
  // later one too, so the first live sample only moves forward.
  size_t first = 0;
  for (const CategorySegment& seg : segments) {
    while (first < samples.size() && samples[first].end <= seg.start) ++first;
    CounterTotals& wall = out[static_cast<size_t>(wall_of(seg.category))];
    for (size_t i = first; i < samples.size() && samples[i].start < seg.end; ++i) {
      const TimeNs a = std::max(samples[i].start, seg.start);
      const TimeNs b = std::min(samples[i].end, seg.end);
      if (b > a) wall.add(samples[i], b - a);
    }
  }
  return out;
}

bool counter_sample_valid(const CounterSample& sample) {
  if (sample.end <= sample.start || sample.device == kHostOnlyDevice) return false;
  for (double v : sample.pct) {
    if (!std::isnan(v) && !(v >= 0.0 && v <= 100.0)) return false;
  }
  return true;
}

void CounterQueue::add(const CounterSample& sample) {
  Held& h = held_[sample.device];
  if (!h.samples.empty() && h.samples.back().start > sample.start) h.sorted = false;
  h.samples.push_back(sample);
}

bool CounterQueue::has(uint16_t device) const {
  const auto it = held_.find(device);
  return it != held_.end() && !it->second.samples.empty();
}

const std::vector<CounterSample>& CounterQueue::overlapping(uint16_t device, TimeNs begin,
                                                            TimeNs end) {
  scratch_.clear();
  const auto it = held_.find(device);
  if (it == held_.end()) return scratch_;
  Held& h = it->second;
  if (!h.sorted) {
    std::stable_sort(
        h.samples.begin(), h.samples.end(),
        [](const CounterSample& a, const CounterSample& b) { return a.start < b.start; });
    h.sorted = true;
  }
  for (const CounterSample& s : h.samples) {
    if (s.start >= end) break;
    if (s.end > begin) scratch_.push_back(s);
  }
  return scratch_;
}

void CounterQueue::drop_through(uint16_t device, TimeNs t) {
  const auto it = held_.find(device);
  if (it == held_.end()) return;
  auto& v = it->second.samples;
  v.erase(std::remove_if(v.begin(), v.end(), [t](const CounterSample& s) { return s.end <= t; }),
          v.end());
}

size_t CounterQueue::size() const {
  size_t n = 0;
  for (const auto& [device, h] : held_) n += h.samples.size();
  return n;
}

}  // namespace gpuacct
