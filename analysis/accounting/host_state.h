// What the step accountant knows of the host, internal to accounting/ (StepAccountant and its
// window sweep): the launch call of every correlation id, and per thread the CUDA calls and the
// data ranges still needed by a window not yet finalised.
//
// Nested calls: calls on one thread never overlap except by nesting -- a runtime call wraps the
// driver calls it makes (CUPTI reports both when both API domains are traced, with one
// correlation id or two; Kineto traces hold cuda_runtime and cuda_driver rows alike).  A call
// and every call inside it form one *nest*: one launch, and host time in CUDA from the outer
// call's entry to its exit.  Two calls are in one nest when one starts inside the other (or
// both start at the same instant: clocks are coarse).  Thread call lists are sorted by start,
// so a nest is a run of consecutive calls; the walks look at most kNestScan calls away from a
// position (a call wrapping more traced calls than that is not a pattern CUDA produces).
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <unordered_map>
#include <vector>

#include "analysis/model/events.h"
#include "analysis/model/flat_map.h"

namespace gpuacct::accounting {

inline constexpr TimeNs kMinTime = std::numeric_limits<TimeNs>::min();

// What the accountant remembers per correlation id: the launch call (if seen) and whether at
// least one GPU op for it has arrived.  The flags sit together at the end: 40 bytes, not 48
// (one entry per launch of a whole trace when it has no watermarks).
struct CorrEntry {
  TimeNs api_start = 0;
  TimeNs api_end = 0;
  TimeNs op_end = 0;  // latest end among the ops seen for this id
  uint32_t thread = 0;
  NameId api_name = kNoName;
  bool has_api = false;
  bool has_op = false;
  // An op of a CUDA graph came node by node (GpuOp::graph_id, not a kGpuOpGraphSpan): such a
  // launch has one op per kernel node, all with this id, so more may still come after the
  // first (docs/accounting.md).  A span is the launch's only op and settles it.
  bool graph = false;
};
static_assert(sizeof(CorrEntry) == 40);

struct ThreadHost {
  std::vector<HostApiCall> calls;  // sorted by start up to `calls_sorted`
  size_t calls_sorted = 0;
  size_t calls_stale = 0;       // calls[0, calls_stale) ended before the host cutoff
  std::vector<HostRange> data;  // data ranges, sorted by start up to `data_sorted`
  size_t data_sorted = 0;
  size_t data_stale = 0;

  // Events arrive mostly in order: sort only the new tail and merge it into the sorted prefix.
  // A merged event that lands inside the known-stale prefix shortens it.
  template <typename V>
  static void sort_tail(V& v, size_t& sorted, size_t& stale) {
    if (sorted == v.size()) return;
    auto by_start = [](const auto& a, const auto& b) { return a.start < b.start; };
    const auto mid = v.begin() + static_cast<ptrdiff_t>(sorted);
    if (!std::is_sorted(mid, v.end(), by_start)) std::sort(mid, v.end(), by_start);
    if (sorted > 0 && by_start(*mid, *std::prev(mid))) {
      const auto at = std::upper_bound(v.begin(), mid, *mid, by_start);
      stale = std::min(stale, static_cast<size_t>(at - v.begin()));
      std::inplace_merge(v.begin(), mid, v.end(), by_start);
    }
    sorted = v.size();
  }
  void sort_all() {
    sort_tail(calls, calls_sorted, calls_stale);
    sort_tail(data, data_sorted, data_stale);
  }
  // Drops the prefix of `v` that ended before `cutoff`.  The scan resumes where the last one
  // stopped (the cutoff only grows), so a backlog of many steps stays linear; stale entries
  // are erased only once they are the larger part, so erasing is amortised O(1).
  template <typename V>
  static void prune(V& v, size_t& sorted, size_t& stale, TimeNs cutoff) {
    auto c = std::find_if(v.begin() + static_cast<ptrdiff_t>(stale), v.end(),
                          [&](const auto& x) { return x.end >= cutoff || x.start >= cutoff; });
    stale = static_cast<size_t>(c - v.begin());
    if (stale * 2 > v.size()) {
      v.erase(v.begin(), c);
      sorted = v.size();
      stale = 0;
    }
  }
  void prune_before(TimeNs cutoff) {
    sort_all();
    prune(calls, calls_sorted, calls_stale, cutoff);
    prune(data, data_sorted, data_stale, cutoff);
  }
  bool empty() const { return calls.empty() && data.empty(); }
};

class HostState {
 public:
  static constexpr int kNestScan = 16;
  using CallIter = std::vector<HostApiCall>::const_iterator;

  FlatMap64<CorrEntry> corr;
  std::unordered_map<uint32_t, ThreadHost> threads;
  // The earliest end of any data range that came in (any thread): a gap ending after it has
  // its data wait marked, not inferred (AccountingConfig::infer_data_wait).  By end, not by
  // arrival: a range that ended before a gap's end was delivered before the gap's step could be
  // finalised (the watermark), so live and all at once agree.
  TimeNs earliest_data_end = std::numeric_limits<TimeNs>::max();

  // The thread's state, created if new.  Consecutive events are usually on one thread, and map
  // elements are stable in memory, so the last lookup is cached.
  ThreadHost& thread_host(uint32_t tid) {
    if (last_thread_ == nullptr || last_thread_id_ != tid) {
      last_thread_ = &threads[tid];
      last_thread_id_ = tid;
    }
    return *last_thread_;
  }
  // Whether thread `tid` made a CUDA call that began before `t`.  An idle gap with no launch
  // call known is read by the pauses between the step thread's calls once it has made one,
  // else by its length (window_sweep.cc): asked of the calls still held, the answer depended
  // on delivery (a thread's first call not yet come) and on pruning (differential fuzzer seed
  // 15237).  Kept per thread ever seen (a time each), not pruned with its calls.
  bool called_before(uint32_t tid, TimeNs t) const {
    const auto it = first_call_.find(tid);
    return it != first_call_.end() && it->second < t;
  }
  void note_call(uint32_t tid, TimeNs start) {
    if (last_first_ == nullptr || last_first_id_ != tid) {
      last_first_ = &first_call_.emplace(tid, start).first->second;
      last_first_id_ = tid;
    }
    *last_first_ = std::min(*last_first_, start);
  }
  // The thread's state with its lists sorted, or null for a thread never seen.
  ThreadHost* sorted_thread(uint32_t tid) {
    auto it = threads.find(tid);
    if (it == threads.end()) return nullptr;
    it->second.sort_all();
    return &it->second;
  }

  // The launch call of `op` when it is known, else null.
  const CorrEntry* launch_of(const GpuOp& op) const {
    if (op.correlation_id == 0) return nullptr;
    const CorrEntry* e = corr.find(op.correlation_id);
    return e != nullptr && e->has_api ? e : nullptr;
  }
  // When the op was launched: its launch call's start, or its own start when not known.
  TimeNs launch_time(const GpuOp& op) const {
    const CorrEntry* e = launch_of(op);
    return e != nullptr ? e->api_start : op.start;
  }

  static bool in_nest(const HostApiCall& c, TimeNs nest_start, TimeNs nest_end) {
    return c.start < nest_end || c.start == nest_start;
  }
  // The first call at or before `it` that is still running at `t` (a call that started before
  // `t` and wraps it), or `it` when there is none.
  static CallIter first_covering(const ThreadHost& th, CallIter it, TimeNs t);
  // When the host actually submitted the op of launch call `e`: the start of the last launch
  // or copy call nested inside it (the driver call that a runtime call makes), or its own
  // start.  The call the op's correlation id names may be either of the two.
  static TimeNs submission_time(const CorrEntry& e, const ThreadHost* th);

  // True when some call of the nest holding the call [start, end) on `thread` has its op: the
  // op of a nested launch carries the correlation id of only one of the calls.
  bool nest_has_op(uint32_t thread, TimeNs start, TimeNs end) {
    return nest_op(thread, start, end) != nullptr;
  }
  // The entry of the first call of that nest whose op came (nullptr: none).
  const CorrEntry* nest_op(uint32_t thread, TimeNs start, TimeNs end);
  // Launches made inside [begin, end) on any thread: one per nest holding a launch call (a
  // runtime launch and the driver launch inside it are one).  `unmatched` counts the nests
  // with a launch or copy call none of whose ops arrived.  A nest whose outer call began
  // before `begin` was counted with the step it began in.
  uint32_t count_launches(TimeNs begin, TimeNs end, uint32_t* unmatched);

  // Drops every thread's calls and data ranges that ended before `cutoff`; a thread left with
  // nothing is forgotten, so runs that start many short-lived threads keep no per-step work
  // for them (only its first call time, a few dozen bytes: called_before).
  void prune_threads_before(TimeNs cutoff);

 private:
  // The outermost call of the nest holding the call [start, end) on `th` (the call itself
  // when nothing wraps it); *nest_start / *nest_end: that nest's extent.
  static CallIter nest_of(const ThreadHost& th, TimeNs start, TimeNs end, TimeNs* nest_start,
                          TimeNs* nest_end);
  uint32_t count_thread_launches(ThreadHost& th, TimeNs begin, TimeNs end, uint32_t* missing);

  ThreadHost* last_thread_ = nullptr;
  uint32_t last_thread_id_ = 0;
  std::unordered_map<uint32_t, TimeNs> first_call_;  // see called_before
  TimeNs* last_first_ = nullptr;                     // elements are stable in memory
  uint32_t last_first_id_ = 0;
};

}  // namespace gpuacct::accounting
