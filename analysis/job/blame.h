// Blame: who made a collective wait, and what that rank was doing instead (docs/job_view.md,
// *Blame*).  Pure functions over times already on the job clock (clock_align.h).
//
// Per matched collective instance ((comm, seq) on every rank):
//   arrival(r)   = r's aligned gpu_start: the rank's kernel starts when the rank reaches the
//                  collective, and cannot progress until the last rank has started its own;
//   last arrival = max arrival; the rank with it is the instance's last rank;
//   lateness     = last arrival - the second-latest arrival: how much sooner the instance would
//                  have started had the last rank come with the next one.  This is the time
//                  that one rank alone cost (the median would charge it for a spread the others
//                  share among themselves);
//   wait(r)      = last arrival - arrival(r): r's kernel ran but could not move data;
//   transfer(r)  = end(r) - last arrival (>= 0): moving the data, once everyone was there;
//   the instance's transfer is the median of transfer(r) (one slow link does not make the
//                  instance slow for the table; its rank's own transfer shows it).
// Per step, the rank that cost the others the most lateness is the step's late rank; its walls
// (taxonomy.h) in excess of the other ranks' median for the same step say what it was doing
// instead of arriving (blame_step).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "analysis/accounting/step_row.h"
#include "analysis/accounting/taxonomy.h"
#include "analysis/model/events.h"

namespace gpuacct {

// nccl-tests' bus-bandwidth factor: busbw = algbw x factor, so that every collective type is
// compared with the hardware's link bandwidth.  AllReduce 2(n-1)/n; AllGather, ReduceScatter,
// AllToAll (n-1)/n; Broadcast, Reduce, SendRecv 1; unknown types and n < 2: 1.
double bus_bandwidth_factor(CollectiveType type, int nranks);
// GB/s (1e9 bytes per second) from bytes over ns, times the bus factor; 0 when either is 0.
double bus_bandwidth_gbs(uint64_t bytes, int64_t transfer_ns, CollectiveType type, int nranks);

// One rank's part in an instance, on the job clock.
struct RankArrival {
  int slot = -1;  // the rank's position in the job (JobView::ranks)
  TimeNs start = 0;
  TimeNs end = 0;
};

struct InstanceBlame {
  int last_slot = -1;
  TimeNs last_arrival = 0;
  int64_t lateness_ns = 0;        // last - second-latest arrival (0 with one rank)
  int64_t arrival_spread_ns = 0;  // last - first arrival
  int64_t transfer_ns = 0;        // median over ranks of end - last arrival
  int64_t end_spread_ns = 0;      // last - first end: the alignment residual of this instance
  int64_t ends_before_last_arrival = 0;  // ranks whose end precedes the last arrival (clocks)
};

// `ranks` must not be empty.  Times are not checked for order beyond what is counted.
InstanceBlame blame_instance(const std::vector<RankArrival>& ranks);
inline int64_t wait_ns(const InstanceBlame& b, const RankArrival& r) {
  return b.last_arrival - r.start;
}
inline int64_t transfer_ns(const InstanceBlame& b, const RankArrival& r) {
  return r.end > b.last_arrival ? r.end - b.last_arrival : 0;
}

// One rank's step, as blame_step sees it.
struct RankStep {
  int slot = -1;
  const StepRow* row = nullptr;  // the rank's row of the step (its first device)
  int64_t late_ns = 0;           // lateness of the step's instances where it was last
  int64_t waited_ns = 0;         // its waits in the step's instances
};

struct StepBlame {
  int64_t step_index = 0;
  int64_t job_step_ns = 0;  // the slowest rank's step (window) time
  int slowest_slot = -1;
  int late_slot = -1;  // the rank with the most lateness in the step; -1: nobody was late
  int64_t late_ns = 0;
  // The late rank's walls in excess of the other ranks' median for the step (>= 0).
  // Communication is left at 0: a late rank's communication is what it made others wait in,
  // not what made it late.
  WallBreakdown excess;
  // late_ns split over the walls in proportion to `excess`; what excess cannot explain (none,
  // or less than late_ns) stays in `unexplained_ns`.
  std::array<int64_t, kWallCount> attributed{};
  int64_t unexplained_ns = 0;
  Wall cause = Wall::kCompute;  // the wall with the most attributed time (valid if late_slot >= 0)
  // The job's step time had the late rank arrived with the others: job_step_ns - late_ns
  // (the others' waits shrink by its lateness; nobody else's time changes).
  int64_t what_if_step_ns = 0;
};

// `ranks`: the ranks that have a row for the step (row != nullptr).
StepBlame blame_step(int64_t step_index, const std::vector<RankStep>& ranks);

}  // namespace gpuacct
