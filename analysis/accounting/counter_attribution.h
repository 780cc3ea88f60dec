// Attribution of hardware counter samples (CounterSample, docs/counters.md) to steps and walls.
//
// Rule: a sample [start, end) with value v of a metric weighs v by the time it overlaps each
// interval it is attributed to.  The mean of a metric over a set of time T (a step's compute
// time on one device: the union of its `compute` category segments) is
//
//     mean = sum over samples s of |s ∩ T| * v_s  /  sum over samples s of |s ∩ T|
//
// taking only samples whose value for that metric is not NaN.  `covered_ns` is that
// denominator: how much of T the samples covered; time in T with no sample (a gap in the
// sampling) is left out of the mean, not counted as 0.  No covered time: the mean is NaN.
// Samples that straddle a step edge or a wall change are split by the overlap, so each part
// goes where it fell.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <vector>

#include "analysis/accounting/counter_totals.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/taxonomy.h"
#include "analysis/model/events.h"

namespace gpuacct {

// Per-wall totals of one window on one device: each sample's overlap with every category
// segment goes to the segment's wall.  `segments`: the window's category segments of one
// device in start order, disjoint (WindowSweep's output); `samples`: that device's samples
// sorted by start (any overlap among them is allowed; each is weighed on its own).
std::array<CounterTotals, kWallCount> attribute_counters_by_wall(
    const std::vector<CategorySegment>& segments, const std::vector<CounterSample>& samples);

// Whether a sample can be used: a valid interval, a real device, every metric NaN or in
// [0, 100] (a percentage).
bool counter_sample_valid(const CounterSample& sample);

// The counter samples the step accountant holds until the windows they overlap are finalised:
// per device, in arrival order, sorted by start when a window asks for them.
class CounterQueue {
 public:
  void add(const CounterSample& sample);
  bool has(uint16_t device) const;
  // The device's samples that overlap [begin, end), sorted by start (valid until the next call).
  const std::vector<CounterSample>& overlapping(uint16_t device, TimeNs begin, TimeNs end);
  // Forgets the device's samples that end at or before `t`: no later window can overlap them.
  void drop_through(uint16_t device, TimeNs t);
  // drop_through for every device `windowed(device)` is false for.
  template <typename Pred>
  void drop_through_unless(Pred windowed, TimeNs t) {
    for (auto& [device, held] : held_) {
      if (!windowed(device)) drop_through(device, t);
    }
  }
  void clear() { held_.clear(); }
  size_t size() const;

 private:
  struct Held {
    std::vector<CounterSample> samples;
    bool sorted = true;
  };
  std::map<uint16_t, Held> held_;
  std::vector<CounterSample> scratch_;
};

}  // namespace gpuacct
