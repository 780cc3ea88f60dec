#include "inject/nccl_match.h"

#include <algorithm>
#include <limits>

namespace gpuacct::inject {
namespace {

// `watermark` is more than `limit` past `t` (kNone, the minimum, is never past anything).
bool past(int64_t watermark, TimeNs t, int64_t limit) {
  return watermark > saturating_add(t, limit);
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
  if (threads_.empty()) return;  // no collective yet: nothing to match launches to
  for (const HostApiCall& c : batch.api_calls) {
    if (c.kind != HostApiKind::kLaunch || c.correlation_id == 0) continue;
    auto it = threads_.find(c.thread);
    if (it == threads_.end()) continue;
    std::deque<Launch>& ls = it->second.launches;
    const Launch l{c.start, c.correlation_id};
    auto at = std::upper_bound(ls.begin(), ls.end(), l.start,
                               [](TimeNs ts, const Launch& x) { return ts < x.start; });
    ls.insert(at, l);
    launch_ids_.insert(c.correlation_id);
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
  for (const auto& [tid, t] : threads_) n += t.records.size();
  return n;
}

CollectiveMatcher::Verdict CollectiveMatcher::decide(Thread& t, size_t index, int64_t watermark,
                                                     bool final, CollectiveRecord* out) {
  const PluginRecord& r = t.records[index];
  const TimeNs enqueued = r.record.host_enqueue;
  auto first = std::lower_bound(t.launches.begin(), t.launches.end(), enqueued,
                                [](const Launch& x, TimeNs ts) { return x.start < ts; });
  // The window ends at the next group: the first later record enqueued after a launch.
  TimeNs window_end = std::numeric_limits<TimeNs>::max();
  if (first != t.launches.end()) {
    for (size_t k = index + 1; k < t.records.size(); ++k) {
      if (t.records[k].record.host_enqueue > first->start) {
        window_end = t.records[k].record.host_enqueue;
        break;
      }
    }
  }
  for (auto it = first; it != t.launches.end() && it->start < window_end; ++it) {
    auto op = ops_.find(it->correlation_id);
    if (op == ops_.end()) {
      if (final || past(watermark, it->start, kOwedLaunchNs)) continue;  // given up on
      return Verdict::kWait;  // its op may still come
    }
    if (!op->second.communication) continue;
    *out = r.record;
    out->gpu_start = op->second.start;
    out->gpu_end = op->second.end;
    out->device = op->second.device;
    out->stream = op->second.stream;
    out->correlation_id = it->correlation_id;
    return Verdict::kMatched;
  }
  const bool closed = window_end != std::numeric_limits<TimeNs>::max();
  if (closed || final || past(watermark, enqueued, kOwedLaunchNs)) {
    *out = r.record;
    return Verdict::kUnmatched;
  }
  return Verdict::kWait;
}

void CollectiveMatcher::forget_launch(const Launch& l) {
  // Its op is reached only through it.
  launch_ids_.erase(l.correlation_id);
  ops_.erase(l.correlation_id);
}

// Launches before the oldest undecided record can match nothing more; with none undecided, the
// launches of the last kKeepLaunchNs are kept for records still on their way.
void CollectiveMatcher::prune(Thread& t, int64_t watermark) {
  while (!t.launches.empty()) {
    const Launch& l = t.launches.front();
    const bool before_oldest =
        !t.records.empty() && l.start < t.records.front().record.host_enqueue;
    const bool stale = t.records.empty() && past(watermark, l.start, kKeepLaunchNs);
    if (!before_oldest && !stale) break;
    forget_launch(l);
    t.launches.pop_front();
  }
}

void CollectiveMatcher::poll(int64_t watermark, bool final, std::vector<CollectiveRecord>& out,
                             Stats& stats) {
  for (auto& [tid, t] : threads_) {
    while (!t.records.empty()) {
      CollectiveRecord decided;
      const Verdict v = decide(t, 0, watermark, final, &decided);
      if (v == Verdict::kWait) break;
      if (v == Verdict::kUnmatched) stats.add(Stat::collectives_unmatched);
      out.push_back(decided);
      t.records.pop_front();
      // The rest of its group shares the verdict's launch: decided on the next turn.
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
