// Which step each collective instance belongs to: the one rule, used by the live pipeline
// (inject/pipeline/pipeline.cc, records from NCCL's profiler plugin as they are matched) and
// offline (analysis/input: records from a trace or a recording), so that both give a record the
// same step_index.
//
// The rule (docs/job_view.md, `step_index`):
//   1. a record with a host enqueue time (host_enqueue != 0) belongs to the step whose host
//      range [host_begin, host_end) contains it -- the step that enqueued it, as the accountant
//      gives a GPU op to the step that launched it;
//   2. otherwise (no host time, or a host time between / outside every step's host range) to
//      the step whose window on the record's device [window_begin, window_end) contains its
//      gpu_start (windows tile each device's timeline, so at most one does);
//   3. otherwise step -1.
//
// Streaming.  Records are added in any order; step rows (StepRow, the accountant's output) are
// added as they are finalised, in step order, possibly one row per device of a step.  Steps
// never overlap and are finalised in host order, so once a row has ended past a record's time
// no later row can hold it: a record is emitted to the sink (with step_index set) as soon as
// the rows that could hold it are in -- for rule 1, once a row's host range ends after its
// host_enqueue; for rule 2, once a row on its device has a window ending after its gpu_start.
// Emission order is therefore not time order.  finish() decides and emits what is still held
// with the rows known (records after the last step get -1).
//
// Order independence: while neither limit below is reached, every record gets the same
// step_index whatever the order records and rows arrive in (rows in step order).
//
// Bounded memory:
//   - at most `held_record_limit` records wait for their rows; over it the oldest (by arrival)
//     is emitted with step -1 and counted (over_limit);
//   - the host ranges and windows of the newest `kept_step_limit` steps are kept; a record
//     that comes after its step was forgotten is emitted with step -1 and counted (too_late).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <vector>

#include "analysis/accounting/step_row.h"
#include "analysis/model/collective.h"

namespace gpuacct {

struct CollectiveStepAssignerOptions {
  size_t held_record_limit = size_t{1} << 18;  // ~50 MB of held records at most
  size_t kept_step_limit = size_t{1} << 16;    // steps whose ranges are kept for late records
};

struct CollectiveStepCounts {
  int64_t records = 0;     // added
  int64_t assigned = 0;    // emitted with a step
  int64_t unassigned = 0;  // emitted with step -1 (over_limit and too_late included)
  int64_t over_limit = 0;  // emitted early, unassigned, because held_record_limit was reached
  int64_t too_late = 0;    // came after the steps that could hold them were forgotten
  int64_t held_peak = 0;   // most records held at once
};

class CollectiveStepAssigner {
 public:
  using Sink = std::function<void(const CollectiveRecord&)>;

  explicit CollectiveStepAssigner(Sink sink, CollectiveStepAssignerOptions options = {});

  void add(const CollectiveRecord& record);
  void add_row(const StepRow& row);
  // Emits every record still held (rule above, with the rows known).  Records added after
  // finish() are decided at once with the rows known.
  void finish();

  const CollectiveStepCounts& counts() const { return counts_; }
  size_t held() const { return held_; }

 private:
  struct Range {
    TimeNs begin = 0;
    TimeNs end = 0;
    int64_t step = -1;
  };
  // Records wait in a slot; an index entry names the slot and the arrival it was made for, so
  // an entry whose record has gone (emitted another way) is recognised and skipped.
  struct Slot {
    CollectiveRecord record;
    uint64_t arrival = 0;
    bool live = false;
  };
  struct Waiting {
    TimeNs key = 0;
    uint64_t arrival = 0;
    uint32_t slot = 0;
  };
  struct Device {
    std::deque<Range> windows;  // by begin
    bool any = false;
    TimeNs frontier = 0;  // the latest window end seen
    bool forgot = false;  // older windows were forgotten (kept_step_limit)
    TimeNs forgotten_end = 0;
    std::vector<Waiting> waiting;  // min-heap by gpu_start
  };

  enum class Decision { kEmitted, kWaitHost, kWaitDevice };
  Decision decide(CollectiveRecord& record, bool final);
  void hold(const CollectiveRecord& record, Decision wait);
  void push_waiting(Decision wait, const Waiting& entry);
  bool is_live(const Waiting& entry) const;
  void release(uint32_t slot);
  void drain(std::vector<Waiting>& heap, TimeNs frontier);
  void emit(CollectiveRecord& record, int64_t step);
  void evict_oldest();
  void forget_old_steps();
  void compact();

  Sink sink_;
  CollectiveStepAssignerOptions options_;
  CollectiveStepCounts counts_;
  bool finished_ = false;

  std::deque<Range> host_ranges_;  // one per step, by begin
  bool any_host_ = false;
  TimeNs host_frontier_ = 0;  // the latest host end seen
  bool forgot_ = false;       // older steps were forgotten (kept_step_limit)
  TimeNs forgotten_host_end_ = 0;
  std::map<uint16_t, Device> devices_;

  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  std::deque<Waiting> by_arrival_;    // oldest first (stale entries skipped)
  std::vector<Waiting> host_waiting_;  // min-heap by host_enqueue
  uint64_t next_arrival_ = 0;
  size_t held_ = 0;
  size_t stale_waiting_ = 0;  // heap entries whose record was evicted
};

}  // namespace gpuacct
