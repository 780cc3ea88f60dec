// Gives each collective the NCCL profiler plugin recorded (inject/nccl/nccl_profiler.h) its GPU
// times: the worker matches it to the CUPTI kernel that ran it.
//
// Where NCCL calls startEvent (NVIDIA/nccl src/enqueue.cc, 2.23-2.28): for each kernel plan of
// a group, the thread that ends the group (ncclGroupEnd, or the collective call outside a group)
// launches the plan's kernel (ncclLaunchKernel: cuLaunchKernelEx) and then, in
// ncclLaunchKernelAfter_NoCuda -> hostStreamPlanTask, starts the events of the plan's
// collectives.  So on one thread: launch, records of that plan, launch, records, ...  The
// matcher supports that order ("launch-first") and the opposite one ("record-first": events
// started before the launch, as a host of the plugin may do), learnt per thread from its first
// record: a communication launch before it on the thread says launch-first, else one after it
// says record-first.  A launch is a communication launch when its GPU op (by correlation id) is
// a communication kernel (GpuOp::is_communication).
//
//   launch-first: a record takes the latest communication launch of its thread that started
//     at or before its host_enqueue and after the previous record, and whose call had
//     returned by then (NCCL starts a plan's events after the launch call: a launch still in
//     its call is the next plan's -- a coarse clock gives it the record's very nanosecond); a
//     record with no launch at
//     all since the previous one (and within kSameGroupNs of it) is in the same plan and shares
//     its kernel;
//   record-first: a record takes the first communication launch at or after its host_enqueue,
//     looking no further than the next group (the first later record enqueued after a launch).
//
// Records of one kernel plan: NCCL names each operation's plan by its Group event (the event
// hierarchy Group -> Coll / P2p -> KernelCh, ext-profiler/README.md; one Group per plan, started
// with the plan's operations right after its launch: src/plugin/profiler.cc and enqueue.cc
// hostStreamPlanTask), which the plugin turns into PluginRecord::group.  A record of the same
// group as the previous one on its thread takes that record's kernel, whatever the time between
// them; one of another group needs a launch of its own.  Without a group (0: an older NCCL, a
// lost handle) the timing rule above (kSameGroupNs) decides.  A kernel can so carry several
// operations: a group's sends and receives, a group's collectives fused into one plan, an
// aggregated launch.  Each of them gets the kernel's GPU times, and kernel_ops = how many it
// carried (1: alone): matched records are held until their kernel's last one is known (a record
// of another kernel on the thread, or the watermark kSameGroupNs past the last).
//
// The kernel gives gpu_start / gpu_end, device, stream and the correlation id.  A collective
// whose kernel is not found (its launch or kernel record lost, CUPTI off) is emitted without GPU
// times and counted (Stat::collectives_unmatched), never given another group's kernel.  A launch
// whose GPU op has not arrived yet holds its records until it arrives or kOwedLaunchNs passes by
// the watermark.  NOT covered: plans NCCL runs from a CUDA host callback (CUDA graph capture,
// while CUDA graphs of the communicator are alive, CUDA_LAUNCH_BLOCKING=1) start their events on
// CUDA's callback thread, whose launches are not the kernel's: those records are unmatched.
//
// Memory: per thread, the records not yet decided and the launches they may still need (the
// last kHistoryLaunches for a thread with no record yet).  Not thread-safe (the worker owns it).
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
#include "inject/nccl/nccl_profiler.h"

namespace gpuacct::inject {

class CollectiveMatcher {
 public:
  // A launch whose GPU op is still missing this long past its start (by the watermark) is
  // given up (the accountant's own limit for owed launches).
  static constexpr int64_t kOwedLaunchNs = 10'000'000'000;
  // Launch calls of a thread with no record waiting are kept this long (by the watermark): a
  // record comes within microseconds of its launch call, this is slack.
  static constexpr int64_t kKeepLaunchNs = 2'000'000'000;
  // Launch calls kept for a thread that has no record yet (its first record's launch is among
  // the last few).
  static constexpr size_t kHistoryLaunches = 64;
  // Launch-first: a record this close after the previous one, with no launch between, is in
  // the same kernel plan (NCCL starts a plan's events in one loop, microseconds apart).
  static constexpr int64_t kSameGroupNs = 5'000'000;
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
  size_t pending() const;  // records not yet emitted (undecided, or held for their kernel)
  // Launch calls and GPU ops kept for matching (tests: memory stays bounded).
  size_t kept() const { return launch_ids_.size() + ops_.size(); }

 private:
  struct Launch {
    TimeNs start = 0;
    TimeNs end = 0;  // the launch call returned (>= start)
    uint64_t correlation_id = 0;
  };
  struct Op {
    TimeNs start = 0;
    TimeNs end = 0;
    uint32_t stream = 0;
    uint16_t device = 0;
    bool communication = false;
  };
  enum class Order { kUnknown, kLaunchFirst, kRecordFirst };
  struct Thread {
    std::deque<PluginRecord> records;  // undecided, by host_enqueue
    std::deque<Launch> launches;       // by start
    Order order = Order::kUnknown;
    bool has_previous = false;         // a record of this thread was decided
    TimeNs previous_enqueue = 0;       // ... enqueued then
    bool previous_matched = false;     // ... and matched to previous_launch
    uint64_t previous_group = 0;       // ... of that kernel plan (0: unknown)
    Launch previous_launch;
    // Matched records of the latest kernel, not yet emitted: how many share it is known only
    // once the next kernel's record (or the watermark) says the plan is over.
    std::vector<CollectiveRecord> held;
  };
  enum class Verdict { kMatched, kUnmatched, kWait };
  enum class OpState { kNccl, kOther, kPending, kGivenUp };

  OpState op_state(const Launch& l, int64_t watermark, bool final) const;
  void fill(const PluginRecord& r, const Launch& l, CollectiveRecord* out) const;
  Order detect_order(const Thread& t, TimeNs enqueued, int64_t watermark, bool final,
                     bool* wait) const;
  Verdict decide(Thread& t, int64_t watermark, bool final, CollectiveRecord* out);
  Verdict decide_launch_first(Thread& t, int64_t watermark, bool final, CollectiveRecord* out);
  Verdict decide_record_first(Thread& t, int64_t watermark, bool final, CollectiveRecord* out);
  void prune(Thread& t, int64_t watermark);
  // Emits the held records, each with kernel_ops = their number.
  static void release_held(Thread& t, std::vector<CollectiveRecord>& out);
  // The same kernel plan as the thread's previous record, by its group (false when unknown).
  static bool same_plan(const Thread& t, const PluginRecord& r) {
    return r.group != 0 && t.has_previous && r.group == t.previous_group;
  }
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
