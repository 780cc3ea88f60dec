// Clock alignment of the ranks of a job (docs/job_view.md, *Clock alignment*).
//
// Ranks on one host (the same hostname) read one clock (CUPTI / the profiler timestamp the
// host's GPUs share): they are never shifted relative to each other.  Between hosts the clocks
// differ by an unknown offset (NTP: often milliseconds).  Assumption: all ranks of one
// collective instance finish within its transfer tail (a collective completes on every rank
// when the last piece of data has gone round), so the ENDS of a matched instance -- not its
// starts, which differ by the ranks' skew -- mark one moment on every clock.
//
// Estimator.  Per instance, each host's end is the median of its ranks' ends (one clock; the
// median ignores one rank with a slow link).  Offsets o_h start at 0 and are refined: per
// instance, the reference is the median over the hosts present of (end_h - o_h); each host's
// residual (end_h - o_h - reference) is collected over the instances, and o_h moves by the
// median of its residuals; the reference host's offset is then set to 0.  This is the
// per-host form of "the median of pairwise end differences": for consistent data one step
// solves it exactly (two hosts: the median of the pair's differences), it needs O(hosts) per
// instance instead of O(hosts^2), it takes instances where some hosts are missing (sub-group
// communicators), and the two medians -- over hosts within an instance, over instances per
// host -- make it robust to a minority of outlier instances (a rank descheduled at the end,
// a record with a wrong time).  Memory is bounded: a uniform sample (reservoir) of at most
// `max_instances` instances is kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analysis/model/events.h"

namespace gpuacct {

// A bounded uniform sample of a stream of values, for percentiles of unbounded streams
// (deterministic: a fixed-seed generator).
class SampleReservoir {
 public:
  explicit SampleReservoir(size_t capacity = 65536, uint64_t seed = 0x9e3779b97f4a7c15ULL)
      : capacity_(capacity), state_(seed) {}
  void add(double value);
  int64_t seen() const { return seen_; }
  // Percentile p in [0, 100] of the sample (linear interpolation); 0 when empty.
  double percentile(double p) const;

 private:
  uint64_t next();
  size_t capacity_;
  uint64_t state_;
  int64_t seen_ = 0;
  std::vector<double> values_;
};

// One rank's end of an instance, on its own clock.
struct HostEnd {
  int host = -1;
  TimeNs end = 0;
};

struct ClockAlignment {
  // Subtracted from every time of a rank on that host to put it on the job clock (the
  // reference host's clock).  0 for hosts that shared no instance with another host.
  std::vector<int64_t> host_offset_ns;
  std::vector<bool> host_aligned;  // took part in an instance with another host
  int reference_host = 0;
  int64_t instances_seen = 0;        // instances given (with an end on >= 1 host)
  int64_t instances_cross_host = 0;  // of those, spanning >= 2 hosts: the ones that inform
  int64_t instances_used = 0;        // in the sample the solve used
  int iterations = 0;
};

class ClockAligner {
 public:
  // `hosts`: how many hosts (0..hosts-1); `reference_host`: the one whose clock is the job's.
  ClockAligner(int hosts, int reference_host, size_t max_instances = 4096);
  // The ends of one matched instance on every rank that has it (any order, several per host).
  // Ends of 0 (unknown) are ignored.
  void add_instance(const std::vector<HostEnd>& rank_ends);
  ClockAlignment solve() const;

 private:
  struct Sample {
    std::vector<HostEnd> host_ends;  // one per host present: its ranks' median end
  };
  int hosts_;
  int reference_host_;
  size_t capacity_;
  uint64_t state_ = 0x2545f4914f6cdd1dULL;
  int64_t seen_ = 0;
  int64_t cross_host_ = 0;
  std::vector<Sample> samples_;
  std::vector<HostEnd> scratch_;
};

}  // namespace gpuacct
