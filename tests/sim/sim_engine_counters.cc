// Planted hardware counters (sim_cuda.h, simPlantCounters): per device, a piecewise-constant
// function of the sim clock that the fake CUPTI's PM sampling averages over each sample.
#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

#include "sim_engine_state.h"

namespace {

struct Segment {
  uint64_t begin;
  uint64_t end;
  double values[SIM_COUNTER_COUNT];
};

struct Plan {
  std::mutex mu;
  std::map<int, std::vector<Segment>> by_device;  // non-overlapping, by begin
};

Plan& P() {
  static Plan* p = new Plan();  // never destroyed: read by the fake CUPTI at exit
  return *p;
}

}  // namespace

namespace sim_engine {
void ClearCounterPlan() {
  std::lock_guard<std::mutex> lock(P().mu);
  P().by_device.clear();
}
}  // namespace sim_engine

SIM_EXPORT void simPlantCounters(int device, uint64_t begin_ns, uint64_t end_ns,
                                 const double values[SIM_COUNTER_COUNT]) {
  if (end_ns <= begin_ns || values == nullptr) return;
  Plan& p = P();
  std::lock_guard<std::mutex> lock(p.mu);
  std::vector<Segment>& segs = p.by_device[device];
  std::vector<Segment> kept;
  for (const Segment& s : segs) {  // cut what the new segment covers out of the old ones
    if (s.end <= begin_ns || s.begin >= end_ns) {
      kept.push_back(s);
      continue;
    }
    if (s.begin < begin_ns) {
      Segment left = s;
      left.end = begin_ns;
      kept.push_back(left);
    }
    if (s.end > end_ns) {
      Segment right = s;
      right.begin = end_ns;
      kept.push_back(right);
    }
  }
  Segment n{begin_ns, end_ns, {}};
  std::copy(values, values + SIM_COUNTER_COUNT, n.values);
  kept.push_back(n);
  std::sort(kept.begin(), kept.end(),
            [](const Segment& a, const Segment& b) { return a.begin < b.begin; });
  segs.swap(kept);
}

SIM_EXPORT void simCounterMean(int device, uint64_t begin_ns, uint64_t end_ns,
                               double out[SIM_COUNTER_COUNT]) {
  std::fill(out, out + SIM_COUNTER_COUNT, 0.0);
  if (end_ns <= begin_ns) return;
  Plan& p = P();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.by_device.find(device);
  if (it == p.by_device.end()) return;
  const double span = static_cast<double>(end_ns - begin_ns);
  for (const Segment& s : it->second) {
    const uint64_t a = std::max(s.begin, begin_ns);
    const uint64_t b = std::min(s.end, end_ns);
    if (b <= a) continue;
    const double w = static_cast<double>(b - a) / span;
    for (int q = 0; q < SIM_COUNTER_COUNT; ++q) out[q] += w * s.values[q];
  }
}
