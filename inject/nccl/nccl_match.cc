#include "inject/nccl/nccl_match.h"

#include <algorithm>
#include <limits>

namespace gpuacct::inject {
namespace {

// `watermark` is more than `limit` past `t` (kNone, the minimum, is never past anything).
bool past(int64_t watermark, TimeNs t, int64_t limit) {
  return watermark > saturating_add(t, limit);
}

// Every launch call that started before `t` has been delivered: the watermark is past it
// (FlushWatermark's promise, held buffers included).  Until then a launch call may still come
// *before* the launches already known: CUPTI hands a thread's buffer back only once every
// record in it is complete, so a buffer holding the call that launched a long NCCL kernel can
// come back after the next buffer, whose calls are later (seen in the simulated jobs, both
// orders: the record then took the next group's kernel, or none).  Deciding on what has come so
// far made the rows depend on delivery timing; deciding once the watermark passed does not.
bool delivered_before(int64_t watermark, TimeNs t, bool final) {
  return final || watermark > t;
}

}  // namespace

void CollectiveMatcher::add_records(const std::vector<PluginRecord>& records) {
  for (const PluginRecord& r : records) {
    Thread& t = threads_[r.thread];
    // Drained per thread in enqueue order; a stray out-of-order record is put in its place.
    auto at = std::upper_bound(t.records.begin(), t.records.end(), r.record.host_enqueue,
                               [](TimeNs ts, const PluginRecord& x) {
                                 return ts < x.record.host_enqueue;
                               });
    t.records.insert(at, r);
    ++records_seen_;
  }
}

void CollectiveMatcher::add_events(const EventBatch& batch) {
  for (const HostApiCall& c : batch.api_calls) {
    if (c.kind != HostApiKind::kLaunch || c.correlation_id == 0) continue;
    // Every thread's recent launches: NCCL's launch call can come in a batch before its record.
    std::deque<Launch>& ls = threads_[c.thread].launches;
    const Launch l{c.start, std::max(c.start, c.end), c.correlation_id};
    auto at = std::upper_bound(ls.begin(), ls.end(), l.start,
                               [](TimeNs ts, const Launch& x) { return ts < x.start; });
    ls.insert(at, l);
    launch_ids_.insert(c.correlation_id);
    Thread& t = threads_[c.thread];
    if (!t.has_previous && t.records.empty() && t.launches.size() > kHistoryLaunches) {
      forget_launch(t.launches.front());
      t.launches.pop_front();
    }
  }
  for (const GpuOp& op : batch.gpu_ops) {
    if (op.kind != GpuOpKind::kKernel || op.correlation_id == 0) continue;
    if (!op.is_communication() && launch_ids_.count(op.correlation_id) == 0) continue;
    // The first op of a launch is kept (a graph launch runs several under one id).
    ops_.emplace(op.correlation_id,
                 Op{op.start, op.end, op.stream, op.device, op.is_communication()});
  }
}

size_t CollectiveMatcher::pending() const {
  size_t n = 0;
  for (const auto& [tid, t] : threads_) n += t.records.size() + t.held.size();
  return n;
}

void CollectiveMatcher::release_held(Thread& t, std::vector<CollectiveRecord>& out) {
  const auto n = static_cast<uint16_t>(std::min<size_t>(t.held.size(), 0xFFFF));
  for (CollectiveRecord& r : t.held) {
    r.kernel_ops = n;
    out.push_back(r);
  }
  t.held.clear();
}

// What a launch's op says: a communication kernel, something else, or not known yet (`given_up`
// once it is owed too long).
CollectiveMatcher::OpState CollectiveMatcher::op_state(const Launch& l, int64_t watermark,
                                                       bool final) const {
  auto op = ops_.find(l.correlation_id);
  if (op != ops_.end()) return op->second.communication ? OpState::kNccl : OpState::kOther;
  return final || past(watermark, l.start, kOwedLaunchNs) ? OpState::kGivenUp : OpState::kPending;
}

void CollectiveMatcher::fill(const PluginRecord& r, const Launch& l, CollectiveRecord* out) const {
  const Op& op = ops_.at(l.correlation_id);
  *out = r.record;
  out->gpu_start = op.start;
  out->gpu_end = op.end;
  out->device = op.device;
  out->stream = op.stream;
  out->correlation_id = l.correlation_id;
}

// The thread's order, from its first record: a communication launch before it on the thread
// (within the history kept; its call returned by the record's time) says launch-first (NCCL
// itself); else the first one after it says record-first.  kUnknown: wait (an op still pending) or nothing to tell from yet.
CollectiveMatcher::Order CollectiveMatcher::detect_order(const Thread& t, TimeNs enqueued,
                                                         int64_t watermark, bool final,
                                                         bool* wait) const {
  *wait = false;
  // Told from the launches around it only once every call up to it is in.
  if (!delivered_before(watermark, enqueued, final)) {
    *wait = true;
    return Order::kUnknown;
  }
  // Before the record: a launch whose call had returned by then.  One starting on the record's
  // very nanosecond (a clock that did not move between the two) is after it.
  auto first_after = std::lower_bound(t.launches.begin(), t.launches.end(), enqueued + 1,
                                      [](const Launch& x, TimeNs ts) { return x.start < ts; });
  for (auto it = std::make_reverse_iterator(first_after); it != t.launches.rend(); ++it) {
    if (it->end > enqueued) continue;
    const OpState s = op_state(*it, watermark, final);
    if (s == OpState::kNccl) return Order::kLaunchFirst;
    if (s == OpState::kPending) {
      *wait = true;
      return Order::kUnknown;
    }
  }
  auto first_not_before = std::lower_bound(t.launches.begin(), t.launches.end(), enqueued,
                                           [](const Launch& x, TimeNs ts) { return x.start < ts; });
  for (auto it = first_not_before; it != t.launches.end(); ++it) {
    if (it->end <= enqueued) continue;  // a zero-length call on the record's nanosecond
    if (!delivered_before(watermark, it->start, final)) {
      *wait = true;
      return Order::kUnknown;
    }
    const OpState s = op_state(*it, watermark, final);
    if (s == OpState::kNccl) return Order::kRecordFirst;
    if (s == OpState::kPending) {
      *wait = true;
      return Order::kUnknown;
    }
  }
  return Order::kUnknown;
}

CollectiveMatcher::Verdict CollectiveMatcher::decide(Thread& t, int64_t watermark, bool final,
                                                     CollectiveRecord* out) {
  if (t.order == Order::kUnknown) {
    bool wait = false;
    t.order = detect_order(t, t.records.front().record.host_enqueue, watermark, final, &wait);
    if (t.order == Order::kUnknown) {
      if (wait) return Verdict::kWait;
      // No communication launch around it at all (CUPTI off, its launch record lost).
      if (final || past(watermark, t.records.front().record.host_enqueue, kOwedLaunchNs)) {
        *out = t.records.front().record;
        return Verdict::kUnmatched;
      }
      return Verdict::kWait;
    }
  }
  return t.order == Order::kLaunchFirst ? decide_launch_first(t, watermark, final, out)
                                        : decide_record_first(t, watermark, final, out);
}

// NCCL's order: the plan's kernel is launched, then its collectives' events start.  The record
// takes the latest communication launch of its thread since the previous record; with no
// launch at all since then, and within kSameGroupNs of it, it is in the previous record's plan
// and shares its launch (NCCL starts a plan's events in one loop); later, its launch record was
// lost: unmatched.
CollectiveMatcher::Verdict CollectiveMatcher::decide_launch_first(Thread& t, int64_t watermark,
                                                                  bool final,
                                                                  CollectiveRecord* out) {
  const PluginRecord& r = t.records.front();
  const TimeNs enqueued = r.record.host_enqueue;
  if (same_plan(t, r)) {  // the hierarchy: the previous record's plan, so its kernel
    if (t.previous_matched && ops_.count(t.previous_launch.correlation_id) != 0) {
      fill(r, t.previous_launch, out);
      return Verdict::kMatched;
    }
    *out = r.record;  // the plan's kernel was not found for its first operation either
    return Verdict::kUnmatched;
  }
  // Its launch came before it: every call up to the record must be in.
  if (!delivered_before(watermark, enqueued, final)) return Verdict::kWait;
  auto first_after = std::lower_bound(t.launches.begin(), t.launches.end(), enqueued + 1,
                                      [](const Launch& x, TimeNs ts) { return x.start < ts; });
  bool any_launch = false;
  for (auto it = std::make_reverse_iterator(first_after); it != t.launches.rend(); ++it) {
    // Launches before the previous record belong to earlier plans.
    if (t.has_previous && it->start < t.previous_enqueue) break;
    // NCCL starts a plan's events after its launch call returned: a launch still running at
    // the record's time is the next plan's.  A clock that does not move between calls (coarse,
    // or the simulator's without a host cost per call) gives that launch the record's very
    // nanosecond; by start time alone the record would take it.
    if (it->end > enqueued) continue;
    any_launch = true;
    const OpState s = op_state(*it, watermark, final);
    if (s == OpState::kPending) return Verdict::kWait;
    if (s != OpState::kNccl) continue;
    fill(r, *it, out);
    return Verdict::kMatched;
  }
  // Without groups, timing: no launch since the previous record, and close to it.
  if (!any_launch && r.group == 0 && t.has_previous && t.previous_matched &&
      enqueued - t.previous_enqueue <= kSameGroupNs &&
      ops_.count(t.previous_launch.correlation_id) != 0) {
    fill(r, t.previous_launch, out);  // same group as the previous record
    return Verdict::kMatched;
  }
  // Its launch should have come before it: records come after their launch call, so a launch
  // record that is missing now is lost -- unless CUPTI delivers API records late: wait a while.
  if (!final && !past(watermark, enqueued, kOwedLaunchNs)) return Verdict::kWait;
  *out = r.record;
  return Verdict::kUnmatched;
}

// The other order (a plugin host that starts the events before launching): the record takes the
// first communication launch at or after it, looking no further than the next group (the first
// later record enqueued after a launch).
CollectiveMatcher::Verdict CollectiveMatcher::decide_record_first(Thread& t, int64_t watermark,
                                                                  bool final,
                                                                  CollectiveRecord* out) {
  const PluginRecord& r = t.records.front();
  const TimeNs enqueued = r.record.host_enqueue;
  if (same_plan(t, r) && t.previous_matched && ops_.count(t.previous_launch.correlation_id) != 0) {
    fill(r, t.previous_launch, out);  // the hierarchy: the previous record's plan
    return Verdict::kMatched;
  }
  auto first = std::lower_bound(t.launches.begin(), t.launches.end(), enqueued,
                                [](const Launch& x, TimeNs ts) { return x.start < ts; });
  TimeNs window_end = std::numeric_limits<TimeNs>::max();
  if (first != t.launches.end()) {
    for (size_t k = 1; k < t.records.size(); ++k) {
      // A later record of the same plan (group) does not close the window: its kernel is ours.
      if (r.group != 0 && t.records[k].record.host_enqueue > first->start &&
          t.records[k].group == r.group)
        continue;
      if (t.records[k].record.host_enqueue > first->start) {
        window_end = t.records[k].record.host_enqueue;
        break;
      }
    }
  }
  for (auto it = first; it != t.launches.end() && it->start < window_end; ++it) {
    // A launch between the record and this one may not have come yet.
    if (!delivered_before(watermark, it->start, final)) return Verdict::kWait;
    const OpState s = op_state(*it, watermark, final);
    if (s == OpState::kPending) return Verdict::kWait;  // its op may still come
    if (s != OpState::kNccl) continue;                  // not NCCL's, or given up on
    fill(r, *it, out);
    return Verdict::kMatched;
  }
  // The next group bounds the search once every launch before it is in.
  const bool closed = window_end != std::numeric_limits<TimeNs>::max() &&
                      delivered_before(watermark, window_end, final);
  if (closed || final || past(watermark, enqueued, kOwedLaunchNs)) {
    *out = r.record;
    return Verdict::kUnmatched;
  }
  return Verdict::kWait;
}

void CollectiveMatcher::forget_launch(const Launch& l) {
  // Its op is reached only through it (a launch-first group keeps its launch's op until the
  // group is over: previous_launch).
  launch_ids_.erase(l.correlation_id);
  ops_.erase(l.correlation_id);
}

// What the next record can still need:
//   - no record seen on the thread yet: its last kHistoryLaunches launch calls (NCCL launches
//     the kernel just before the record);
//   - record-first: launches from the oldest undecided record on;
//   - launch-first: launches after the last decided record;
// and with no record waiting, launches of the last kKeepLaunchNs.
void CollectiveMatcher::prune(Thread& t, int64_t watermark) {
  while (!t.launches.empty()) {
    const Launch& l = t.launches.front();
    bool drop = false;
    if (!t.has_previous && t.records.empty()) {
      drop = t.launches.size() > kHistoryLaunches;
    } else if (t.order == Order::kRecordFirst) {
      drop = !t.records.empty() && l.start < t.records.front().record.host_enqueue &&
             l.correlation_id != t.previous_launch.correlation_id;
    } else if (t.order == Order::kLaunchFirst) {
      drop = t.has_previous && l.start < t.previous_enqueue &&
             l.correlation_id != t.previous_launch.correlation_id;
    }
    drop = drop || (t.records.empty() && past(watermark, l.start, kKeepLaunchNs));
    if (!drop) break;
    forget_launch(l);
    t.launches.pop_front();
  }
}

void CollectiveMatcher::poll(int64_t watermark, bool final, std::vector<CollectiveRecord>& out,
                             Stats& stats) {
  for (auto& [tid, t] : threads_) {
    while (!t.records.empty()) {
      CollectiveRecord decided;
      const Verdict v = decide(t, watermark, final, &decided);
      if (v == Verdict::kWait) break;
      // A record of another kernel: the held ones' kernel is complete.
      if (!t.held.empty() &&
          (v != Verdict::kMatched || decided.correlation_id != t.held.back().correlation_id)) {
        release_held(t, out);
      }
      if (v == Verdict::kUnmatched) {
        stats.add(Stat::collectives_unmatched);
        decided.kernel_ops = 0;
        out.push_back(decided);
      } else {
        t.held.push_back(decided);
        auto it = std::find_if(t.launches.begin(), t.launches.end(), [&](const Launch& l) {
          return l.correlation_id == decided.correlation_id;
        });
        if (it != t.launches.end()) t.previous_launch = *it;
      }
      t.has_previous = true;
      t.previous_matched = v == Verdict::kMatched;
      t.previous_group = t.records.front().group;
      t.previous_enqueue = t.records.front().record.host_enqueue;
      t.records.pop_front();
      // The rest of its plan shares the verdict's launch: decided on the next turn.
    }
    // The plan is over once nothing of it can still come: NCCL starts its operations' events
    // back to back (microseconds), all drained before a watermark this far past the last.
    if (!t.held.empty() && (final || past(watermark, t.held.back().host_enqueue, kSameGroupNs))) {
      release_held(t, out);
    }
    prune(t, watermark);
  }
  // Communication ops whose launch never came (another thread's, a dropped API record): swept
  // once per second of watermark, not every tick.
  if (!final && watermark < saturating_add(last_sweep_, kSweepNs)) return;
  last_sweep_ = watermark;
  for (auto it = ops_.begin(); it != ops_.end();) {
    if (it->second.communication && launch_ids_.count(it->first) == 0 &&
        (final || past(watermark, it->second.end, kKeepOpNs))) {
      it = ops_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gpuacct::inject
