#include "analysis/job/clock_align.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace gpuacct {
namespace {

uint64_t splitmix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The lower median (an observed value); 0 when empty.  Reorders `v`.
int64_t median_of(std::vector<int64_t>& v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>((v.size() - 1) / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

}  // namespace

uint64_t SampleReservoir::next() {
  return splitmix(&state_);
}

void SampleReservoir::add(double value) {
  ++seen_;
  if (values_.size() < capacity_) {
    values_.push_back(value);
    return;
  }
  const uint64_t j = next() % static_cast<uint64_t>(seen_);
  if (j < capacity_) values_[static_cast<size_t>(j)] = value;
}

double SampleReservoir::percentile(double p) const {
  if (values_.empty()) return 0;
  std::vector<double> sorted = values_;
  std::sort(sorted.begin(), sorted.end());
  const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

ClockAligner::ClockAligner(int hosts, int reference_host, size_t max_instances)
    : hosts_(hosts), reference_host_(reference_host), capacity_(max_instances) {}

void ClockAligner::add_instance(const std::vector<HostEnd>& rank_ends) {
  scratch_.clear();
  for (const HostEnd& e : rank_ends) {
    if (e.end != 0 && e.host >= 0 && e.host < hosts_) scratch_.push_back(e);
  }
  if (scratch_.empty()) return;
  ++seen_;
  std::sort(scratch_.begin(), scratch_.end(), [](const HostEnd& a, const HostEnd& b) {
    return a.host != b.host ? a.host < b.host : a.end < b.end;
  });
  Sample sample;
  for (size_t i = 0; i < scratch_.size();) {
    size_t j = i;
    while (j < scratch_.size() && scratch_[j].host == scratch_[i].host) ++j;
    // Sorted by end within the host: the lower median is at the middle.
    sample.host_ends.push_back(scratch_[i + (j - i - 1) / 2]);
    i = j;
  }
  if (sample.host_ends.size() < 2) return;  // one clock: says nothing about offsets
  ++cross_host_;
  if (samples_.size() < capacity_) {
    samples_.push_back(std::move(sample));
    return;
  }
  const uint64_t j = splitmix(&state_) % static_cast<uint64_t>(cross_host_);
  if (j < capacity_) samples_[static_cast<size_t>(j)] = std::move(sample);
}

ClockAlignment ClockAligner::solve() const {
  ClockAlignment out;
  const auto n = static_cast<size_t>(std::max(hosts_, 0));
  out.host_offset_ns.assign(n, 0);
  out.host_aligned.assign(n, false);
  out.reference_host = reference_host_;
  out.instances_seen = seen_;
  out.instances_cross_host = cross_host_;
  out.instances_used = static_cast<int64_t>(samples_.size());
  for (const Sample& s : samples_) {
    for (const HostEnd& e : s.host_ends) out.host_aligned[static_cast<size_t>(e.host)] = true;
  }
  std::vector<std::vector<int64_t>> residuals(n);
  std::vector<int64_t> aligned;
  constexpr int kMaxIterations = 30;
  for (int it = 0; it < kMaxIterations && !samples_.empty(); ++it) {
    for (auto& r : residuals) r.clear();
    for (const Sample& s : samples_) {
      aligned.clear();
      for (const HostEnd& e : s.host_ends) {
        aligned.push_back(e.end - out.host_offset_ns[static_cast<size_t>(e.host)]);
      }
      const int64_t reference = median_of(aligned);
      for (const HostEnd& e : s.host_ends) {
        const auto h = static_cast<size_t>(e.host);
        residuals[h].push_back(e.end - out.host_offset_ns[h] - reference);
      }
    }
    int64_t largest_step = 0;
    for (size_t h = 0; h < n; ++h) {
      const int64_t step = median_of(residuals[h]);
      out.host_offset_ns[h] += step;
      largest_step = std::max<int64_t>(largest_step, step < 0 ? -step : step);
    }
    out.iterations = it + 1;
    if (largest_step == 0) break;
  }
  // The job clock is the reference host's; when it shared no instance, the aligned host with
  // the lowest id stands in.
  size_t ref = static_cast<size_t>(reference_host_);
  if (ref >= n || !out.host_aligned[ref]) {
    ref = 0;
    while (ref < n && !out.host_aligned[ref]) ++ref;
  }
  if (ref < n) {
    out.reference_host = static_cast<int>(ref);
    const int64_t base = out.host_offset_ns[ref];
    for (size_t h = 0; h < n; ++h) {
      out.host_offset_ns[h] = out.host_aligned[h] ? out.host_offset_ns[h] - base : 0;
    }
  }
  return out;
}

}  // namespace gpuacct
