#include "analysis/job/blame.h"

#include <algorithm>
#include <limits>

namespace gpuacct {
namespace {

// The median of `values` (the lower middle for an even count: an observed value, never an
// average of two); 0 when empty.  Reorders `values`.
int64_t median_of(std::vector<int64_t>& values) {
  if (values.empty()) return 0;
  const auto mid = values.begin() + static_cast<std::ptrdiff_t>((values.size() - 1) / 2);
  std::nth_element(values.begin(), mid, values.end());
  return *mid;
}

}  // namespace

double bus_bandwidth_factor(CollectiveType type, int nranks) {
  if (nranks < 2) return 1.0;
  const double n = nranks;
  switch (type) {
    case CollectiveType::kAllReduce:
      return 2.0 * (n - 1) / n;
    case CollectiveType::kAllGather:
    case CollectiveType::kReduceScatter:
    case CollectiveType::kAllToAll:
      return (n - 1) / n;
    default:
      return 1.0;
  }
}

double bus_bandwidth_gbs(uint64_t bytes, int64_t transfer, CollectiveType type, int nranks) {
  if (bytes == 0 || transfer <= 0) return 0;
  // bytes per ns is GB/s.
  return static_cast<double>(bytes) / static_cast<double>(transfer) *
         bus_bandwidth_factor(type, nranks);
}

InstanceBlame blame_instance(const std::vector<RankArrival>& ranks) {
  InstanceBlame b;
  TimeNs second = std::numeric_limits<TimeNs>::min();
  TimeNs first = std::numeric_limits<TimeNs>::max();
  TimeNs first_end = std::numeric_limits<TimeNs>::max();
  TimeNs last_end = std::numeric_limits<TimeNs>::min();
  b.last_arrival = std::numeric_limits<TimeNs>::min();
  for (const RankArrival& r : ranks) {
    if (r.start > b.last_arrival) {
      second = b.last_arrival;
      b.last_arrival = r.start;
      b.last_slot = r.slot;
    } else if (r.start > second) {
      second = r.start;
    }
    first = std::min(first, r.start);
    first_end = std::min(first_end, r.end);
    last_end = std::max(last_end, r.end);
  }
  if (ranks.size() < 2) second = b.last_arrival;
  b.lateness_ns = b.last_arrival - second;
  b.arrival_spread_ns = b.last_arrival - first;
  b.end_spread_ns = last_end - first_end;
  std::vector<int64_t> transfers;
  transfers.reserve(ranks.size());
  for (const RankArrival& r : ranks) {
    if (r.end < b.last_arrival) ++b.ends_before_last_arrival;
    transfers.push_back(transfer_ns(b, r));
  }
  b.transfer_ns = median_of(transfers);
  return b;
}

StepBlame blame_step(int64_t step_index, const std::vector<RankStep>& ranks) {
  StepBlame out;
  out.step_index = step_index;
  const RankStep* late = nullptr;
  for (const RankStep& r : ranks) {
    if (r.row == nullptr) continue;
    if (r.row->duration() > out.job_step_ns || out.slowest_slot < 0) {
      out.job_step_ns = r.row->duration();
      out.slowest_slot = r.slot;
    }
    if (r.late_ns > 0 && (late == nullptr || r.late_ns > late->late_ns)) late = &r;
  }
  out.what_if_step_ns = out.job_step_ns;
  if (late == nullptr) return out;
  out.late_slot = late->slot;
  out.late_ns = late->late_ns;
  const WallBreakdown own = late->row->walls();
  int64_t excess_sum = 0;
  std::vector<int64_t> others;
  for (const WallInfo& w : kWalls) {
    if (w.wall == Wall::kCommunication) continue;
    others.clear();
    for (const RankStep& r : ranks) {
      if (r.row != nullptr && &r != late) others.push_back(r.row->walls()[w.wall]);
    }
    const int64_t excess = std::max<int64_t>(0, own[w.wall] - median_of(others));
    out.excess[w.wall] = excess;
    excess_sum += excess;
  }
  // Lateness is split over the excess walls in proportion; when the excess adds up to less
  // than the lateness, the excess itself is what is explained and the rest is unexplained (a
  // late rank that did nothing more than the others: a slower GPU, clocks, the collective
  // issued later in the same work).
  const int64_t explained = std::min(out.late_ns, excess_sum);
  int64_t given = 0;
  for (const WallInfo& w : kWalls) {
    if (excess_sum == 0) break;
    const auto share = static_cast<int64_t>(static_cast<double>(explained) *
                                            static_cast<double>(out.excess[w.wall]) /
                                            static_cast<double>(excess_sum));
    out.attributed[static_cast<size_t>(w.wall)] = share;
    given += share;
  }
  out.unexplained_ns = out.late_ns - given;
  size_t top = 0;
  for (size_t i = 1; i < out.attributed.size(); ++i) {
    if (out.attributed[i] > out.attributed[top]) top = i;
  }
  out.cause = static_cast<Wall>(top);
  out.what_if_step_ns = std::max<int64_t>(0, out.job_step_ns - out.late_ns);
  return out;
}

}  // namespace gpuacct
