// Gives each collective the NCCL profiler plugin recorded (inject/nccl_profiler.h) its GPU
// times: the worker matches it to the CUPTI kernel that ran it.
//
// The plugin's startEvent for a collective runs on the thread that enqueues it, inside the
// collective call or ncclGroupEnd, and NCCL launches the operation's kernel from that same
// thread right after.  So (ASSUMPTION, docs/injection.md "NCCL profiler plugin"):
//
//   a record R of thread T is run by the first kernel launch call (HostApiCall kLaunch) of
//   thread T that starts at or after R.host_enqueue and launched a communication kernel
//   (GpuOp::is_communication, by its correlation id); the GpuOp gives gpu_start / gpu_end,
//   device and stream.
//
// Records enqueued with no launch between them (one group: ncclGroupStart ... ncclGroupEnd)
// share the kernel.  A record looks no further than the next record of its thread that follows
// a launch (the next group): a collective whose kernel never shows (a CUDA graph capture, a
// dropped record, CUPTI off) is emitted without GPU times and counted
// (Stat::collectives_unmatched), never matched to a later group's kernel.  A launch whose GPU
// op has not arrived yet holds its records until it arrives or kOwedLaunchNs passes by the
// watermark (then it is taken for not NCCL's: an op that is late that long is counted
// elsewhere).
//
// Memory: per thread, the records not yet decided and the launches since the oldest of them;
// launch calls of threads that never enqueued a collective are not kept.  Not thread-safe (the
// worker owns it).
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "analysis/model/collective.h"
#include "analysis/model/events.h"
#include "analysis/model/stats.h"
#include "inject/nccl_profiler.h"

namespace gpuacct::inject {

class CollectiveMatcher {
 public:
  // A launch whose GPU op is still missing this long past its start (by the watermark) is
  // given up (the accountant's own limit for owed launches).
  static constexpr int64_t kOwedLaunchNs = 10'000'000'000;
  // Launch calls of a thread with no record waiting are kept this long (by the watermark): a
  // plugin record is drained no later than the launch call after it, this is slack.
  static constexpr int64_t kKeepLaunchNs = 2'000'000'000;
  // Communication ops whose launch call never came are kept this long past their end.
  static constexpr int64_t kKeepOpNs = 20'000'000'000;

  // Records drained from the plugin's queues (per thread in enqueue order).
  void add_records(const std::vector<PluginRecord>& records);
  // A batch as the pipeline collects it: launch calls and GPU ops (any order, possibly late).
  void add_events(const EventBatch& batch);
  // Appends the records decided by `watermark` (FlushWatermark::kNone = not yet) to `out`:
  // matched, or unmatched (counted in `stats`).  `final`: everything left is decided.
  void poll(int64_t watermark, bool final, std::vector<CollectiveRecord>& out, Stats& stats);

  bool saw_records() const { return records_seen_ > 0; }
  int64_t records_seen() const { return records_seen_; }
  size_t pending() const;
  // Launch calls and GPU ops kept for matching (tests: memory stays bounded).
  size_t kept() const { return launch_ids_.size() + ops_.size(); }

 private:
  struct Launch {
    TimeNs start = 0;
    uint64_t correlation_id = 0;
  };
  struct Op {
    TimeNs start = 0;
    TimeNs end = 0;
    uint32_t stream = 0;
    uint16_t device = 0;
    bool communication = false;
  };
  struct Thread {
    std::deque<PluginRecord> records;  // undecided, by host_enqueue
    std::deque<Launch> launches;       // by start
  };
  enum class Verdict { kMatched, kUnmatched, kWait };

  Verdict decide(Thread& t, size_t index, int64_t watermark, bool final, CollectiveRecord* out);
  void prune(Thread& t, int64_t watermark);
  void forget_launch(const Launch& l);

  std::unordered_map<uint32_t, Thread> threads_;
  std::unordered_set<uint64_t> launch_ids_;  // correlation ids of the kept launches
  std::unordered_map<uint64_t, Op> ops_;     // by correlation id: ops of kept launches, and
                                             // communication ops (their launch may come later)
  int64_t records_seen_ = 0;
  static constexpr int64_t kSweepNs = 1'000'000'000;
  int64_t last_sweep_ = std::numeric_limits<int64_t>::min();
};

}  // namespace gpuacct::inject
