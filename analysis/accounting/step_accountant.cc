// The accounting rules implemented here are written down in docs/accounting.md; each rule
// has a unit test in step_accountant_test.cc.  Read that document first.
#include "analysis/accounting/step_accountant.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <unordered_map>

#include "analysis/accounting/flat_map.h"

namespace gpuacct {

Category IdleGap::dominant() const {
  if (data_wait >= launch_gap && data_wait >= host_other) return Category::kDataWait;
  if (launch_gap >= host_other) return Category::kLaunchGap;
  return Category::kHostOther;
}

namespace {

constexpr TimeNs kMinTime = std::numeric_limits<TimeNs>::min();
constexpr TimeNs kUnresolved = std::numeric_limits<TimeNs>::min();

// Timestamps the accounting accepts: [-2^62, 2^62) (+-146 years around the epoch).  Any two of
// them differ by less than 2^63, so window lengths, gaps and "t + timeout" never overflow;
// events outside are garbage (a corrupt record) and are skipped as invalid.
constexpr TimeNs kValidTimeLimit = TimeNs{1} << 62;
bool valid_time(TimeNs t) {
  return t >= -kValidTimeLimit && t < kValidTimeLimit;
}
bool valid_interval(TimeNs start, TimeNs end) {
  return valid_time(start) && valid_time(end) && end >= start;
}

// What the accountant remembers per correlation id: the launch call (if seen) and whether at
// least one GPU op for it has arrived.
struct CorrEntry {
  TimeNs api_start = 0;
  TimeNs api_end = 0;
  uint32_t thread = 0;
  NameId api_name = kNoName;
  bool has_api = false;
  bool has_op = false;
  TimeNs op_end = 0;  // latest end among the ops seen for this id
};

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

struct PendingOp {
  GpuOp op;
  TimeNs launch;  // launch call start, resolved from the correlation id once the call is known
  TimeNs start() const { return op.start; }
};

// GPU ops not yet consumed by a finalised window.  `pending[head..]` are live; they are kept
// sorted by start (lazily: new ops are appended, then the unsorted tail is sorted and merged),
// so a window takes a prefix instead of scanning every op of every later step.
struct DeviceState {
  std::vector<PendingOp> pending;
  size_t head = 0;
  size_t sorted = 0;
  TimeNs finalized_until = kMinTime;
  bool has_window = false;
  // Ops a later step owns that already ran (and were consumed) inside an earlier window, e.g.
  // launched on a free stream while the previous step's work was still running.  They still
  // count for their owner's window end and kernel count.  Rare; dropped once that step is done.
  std::vector<PendingOp> consumed_early;

  size_t live() const { return pending.size() - head; }
  void sort_live() {
    if (sorted == pending.size()) return;
    auto by_start = [](const PendingOp& a, const PendingOp& b) { return a.op.start < b.op.start; };
    const auto first = pending.begin() + static_cast<ptrdiff_t>(head);
    const auto mid = pending.begin() + static_cast<ptrdiff_t>(std::max(sorted, head));
    // The tail is a few sorted runs interleaved (each stream's ops arrive in order):
    // stable_sort (a merge sort) handles that without introsort's bad cases.
    if (!std::is_sorted(mid, pending.end(), by_start))
      std::stable_sort(mid, pending.end(), by_start);
    if (first < mid && by_start(*mid, *std::prev(mid)))
      std::inplace_merge(first, mid, pending.end(), by_start);
    sorted = pending.size();
  }
  // Forgets the consumed prefix once it is large (amortised O(1) per op).
  void compact() {
    if (head > 4096 && head * 2 > pending.size()) {
      pending.erase(pending.begin(), pending.begin() + static_cast<ptrdiff_t>(head));
      sorted -= head;
      head = 0;
    }
  }
};

// Ops a step owns on one device (see docs/accounting.md §1).
struct OwnedStats {
  TimeNs max_end = std::numeric_limits<TimeNs>::min();
  uint32_t kernels = 0;
  uint32_t copies = 0;
  void add(const GpuOp& op) {
    max_end = std::max(max_end, op.end);
    if (op.kind == GpuOpKind::kKernel) {
      ++kernels;
    } else {
      ++copies;
    }
  }
};

struct PendingStep {
  TimeNs begin = 0;
  TimeNs end = 0;
  int64_t number = -1;
  uint32_t thread = 0;
  NameId name = kNoName;
};

// Steps are ordered by host begin; ties (bad input: two ranges opening at the same instant)
// are broken by every other field, shorter first, so the order events arrived in never
// decides which of them is kept.
bool step_before(const PendingStep& a, const PendingStep& b) {
  return std::tie(a.begin, a.end, a.number, a.thread, a.name) <
         std::tie(b.begin, b.end, b.number, b.thread, b.name);
}
bool marker_before(const Marker& a, const Marker& b) {
  return std::tie(a.ts, a.thread, a.number, a.name) < std::tie(b.ts, b.thread, b.number, b.name);
}

// Operation class in the sweep, in priority order (lower wins).
enum OpClass : uint8_t { kClsCompute = 0, kClsComm = 1, kClsCopyInput = 2, kClsCopyOther = 3 };

struct Endpoint {
  TimeNs t;
  uint32_t op;  // index into the window's op list
  int8_t delta;
  uint8_t cls;
};

// LSD radix sort, 8-bit digits, skipping digits that are equal in every key (the high bytes of
// window-relative times usually are).  Faster than std::sort for the few thousand keys of a
// window, and the sweep's main cost.
void radix_sort(std::vector<uint64_t>& keys, std::vector<uint64_t>& scratch) {
  const size_t n = keys.size();
  if (n < 64) {
    std::sort(keys.begin(), keys.end());
    return;
  }
  uint64_t any_diff = 0;
  const uint64_t first = keys[0];
  for (uint64_t k : keys) any_diff |= k ^ first;
  scratch.resize(n);
  uint64_t* src = keys.data();
  uint64_t* dst = scratch.data();
  for (int shift = 0; shift < 64; shift += 8) {
    if (((any_diff >> shift) & 0xFF) == 0) continue;
    size_t count[257] = {};
    for (size_t i = 0; i < n; ++i) ++count[((src[i] >> shift) & 0xFF) + 1];
    for (int b = 0; b < 256; ++b) count[b + 1] += count[b];
    for (size_t i = 0; i < n; ++i) dst[count[(src[i] >> shift) & 0xFF]++] = src[i];
    std::swap(src, dst);
  }
  if (src != keys.data()) std::copy(src, src + n, keys.data());
}

OpClass class_of(const GpuOp& op) {
  if (op.is_communication()) return kClsComm;
  if (op.kind == GpuOpKind::kKernel) return kClsCompute;
  if (op.kind == GpuOpKind::kMemcpy && op.copy_dir == CopyDir::kH2D) return kClsCopyInput;
  return kClsCopyOther;
}

int64_t overlap(TimeNs a0, TimeNs a1, TimeNs b0, TimeNs b1) {
  const TimeNs lo = std::max(a0, b0);
  const TimeNs hi = std::min(a1, b1);
  return hi > lo ? hi - lo : 0;
}

}  // namespace

struct StepAccountant::Impl {
  AccountingConfig cfg;
  RowSink row_sink;
  SegmentSink segment_sink;
  Stats stats;

  TimeNs watermark = kMinTime;
  bool finished = false;

  FlatMap64<CorrEntry> corr;
  std::unordered_map<uint32_t, ThreadHost> threads;
  std::map<uint16_t, DeviceState> devices;

  std::vector<PendingStep> steps;  // unfinalised, sorted lazily
  bool steps_sorted = true;
  std::vector<Marker> boundaries;  // step-boundary markers not yet turned into steps
  std::vector<Marker> flops_markers;

  int64_t next_step_index = 0;
  TimeNs last_step_end = kMinTime;    // host end of the last finalised step
  TimeNs last_step_begin = kMinTime;  // host begin of the last finalised step
  TimeNs host_cutoff = kMinTime;      // host events ending before this were pruned
  TimeNs host_only_until = kMinTime;

  std::vector<StepRow> rows;
  std::vector<KernelExposure> exposure;  // indexed by NameId (ids are dense)
  // Launch calls whose op had not arrived when the call did.  Sorted by start from
  // `pending_head` up to `pending_sorted` (calls arrive nearly in order: sorting the new tail
  // and merging is linear in the usual case); entries before the head are consumed.
  struct PendingLaunch {
    TimeNs start;
    TimeNs end;
    uint64_t corr;
    uint32_t thread;
  };
  std::vector<PendingLaunch> pending_launches;
  size_t pending_head = 0;
  size_t pending_sorted = 0;
  size_t corr_prune_at = 4096;
  TimeNs blocked_step_begin = kMinTime;
  TimeNs blocked_until = kMinTime;
  std::vector<IdleGap> gaps;         // min-heap on length, capacity cfg.top_gaps
  std::vector<IdleGap> gaps_sorted;  // longest first, rebuilt by largest_gaps()

  // Scratch reused across windows (no per-window allocation once warmed up).
  std::vector<GpuOp> window_ops;
  std::vector<Endpoint> endpoints;
  std::vector<uint64_t> packed;
  std::vector<uint64_t> starts;
  std::vector<uint64_t> ends;
  std::vector<uint64_t> radix_scratch;
  std::vector<uint32_t> active[4];
  std::vector<std::pair<TimeNs, TimeNs>> data_scratch;

  // Map elements are stable in memory, so the last lookup can be cached.
  DeviceState* last_device = nullptr;
  uint16_t last_device_id = 0;
  ThreadHost* last_thread = nullptr;
  uint32_t last_thread_id = 0;
  ThreadHost& thread_host(uint32_t tid) {
    if (last_thread == nullptr || last_thread_id != tid) {
      last_thread = &threads[tid];
      last_thread_id = tid;
    }
    return *last_thread;
  }

  // ---- intake ----------------------------------------------------------------------------

  void add_gpu_op(const GpuOp& op) {
    stats.add(Stat::gpu_ops_received);
    if (!valid_interval(op.start, op.end) || op.device == kHostOnlyDevice) {
      stats.add(Stat::invalid_events_skipped);
      return;
    }
    // Consecutive ops are usually on the same device: skip the map lookup.
    if (last_device == nullptr || last_device_id != op.device) {
      last_device = &devices[op.device];
      last_device_id = op.device;
    }
    DeviceState& dev = *last_device;
    if (dev.has_window && op.end <= dev.finalized_until) {
      stats.add(Stat::late_gpu_ops_dropped);
      return;
    }
    dev.pending.push_back(PendingOp{op, kUnresolved});
    if (op.correlation_id != 0) {
      CorrEntry& e = corr[op.correlation_id];
      e.has_op = true;
      e.op_end = std::max(e.op_end, op.end);
    }
  }

  void add_api_call(const HostApiCall& call) {
    stats.add(Stat::api_calls_received);
    if (!valid_interval(call.start, call.end)) {
      stats.add(Stat::invalid_events_skipped);
      return;
    }
    if (call.end < host_cutoff) {
      stats.add(Stat::late_host_events_dropped);
      return;
    }
    thread_host(call.thread).calls.push_back(call);  // sorted lazily (sort_all)
    if (call.correlation_id != 0 &&
        (call.kind == HostApiKind::kLaunch || call.kind == HostApiKind::kCopy)) {
      CorrEntry& e = corr[call.correlation_id];
      // Correlation ids should be unique; when a bad source repeats one, the earliest call
      // wins, so the result does not depend on the order the calls were delivered in.
      if (e.has_api && std::tie(e.api_start, e.thread, e.api_name) <=
                           std::tie(call.start, call.thread, call.name)) {
        return;
      }
      e.api_start = call.start;
      e.api_end = call.end;
      e.thread = call.thread;
      e.api_name = call.name;
      e.has_api = true;
      if (!e.has_op) {
        pending_launches.push_back({call.start, call.end, call.correlation_id, call.thread});
      }
    }
  }

  void add_range(const HostRange& r) {
    stats.add(Stat::ranges_received);
    if (!valid_interval(r.start, r.end)) {
      stats.add(Stat::invalid_events_skipped);
      return;
    }
    switch (r.kind) {
      case RangeKind::kStep: {
        const PendingStep s{r.start, r.end, r.number, r.thread, r.name};
        // A step that merely touches the last finalised one (a rounding overlap) is kept:
        // try_finalize makes it begin where that one ended, as it does all at once.
        if (fit_after(last_step_begin, last_step_end, s) == StepFit::kOverlaps) {
          stats.add(Stat::late_steps_dropped);
          return;
        }
        push_step(s);
        break;
      }
      case RangeKind::kData: {
        if (r.end < host_cutoff) {
          stats.add(Stat::late_host_events_dropped);
          return;
        }
        thread_host(r.thread).data.push_back(r);  // sorted lazily (sort_all)
        break;
      }
      case RangeKind::kUser:
        break;  // shown by timelines; not used for accounting
    }
  }

  void add_marker(const Marker& m) {
    stats.add(Stat::markers_received);
    if (!valid_time(m.ts)) {
      stats.add(Stat::invalid_events_skipped);
      return;
    }
    switch (m.kind) {
      case MarkerKind::kStepBoundary:
        if (m.ts < last_step_end) {
          stats.add(Stat::late_steps_dropped);
          return;
        }
        boundaries.push_back(m);
        break;
      case MarkerKind::kStepFlops:
        flops_markers.push_back(m);
        break;
      case MarkerKind::kInstant:
        break;
    }
  }

  // ---- steps from markers ------------------------------------------------------------------

  void convert_boundaries(bool at_end) {
    if (boundaries.empty()) return;
    std::sort(boundaries.begin(), boundaries.end(), marker_before);
    size_t used = 0;
    for (size_t i = 0; i + 1 < boundaries.size(); ++i) {
      if (!at_end && boundaries[i + 1].ts > watermark) break;
      const Marker& m = boundaries[i];
      push_step(PendingStep{m.ts, boundaries[i + 1].ts, m.number, m.thread, m.name});
      used = i + 1;
    }
    if (at_end && used < boundaries.size()) {
      // The step opened by the last mark never got a closing mark: it ends at its thread's
      // last CUDA call.  With no CUDA call after the mark there is nothing to account.
      const Marker& m = boundaries.back();
      TimeNs end = kMinTime;
      auto it = threads.find(m.thread);
      if (it != threads.end()) {
        for (const HostApiCall& c : it->second.calls) {
          if (c.start >= m.ts) end = std::max(end, c.end);
        }
      }
      if (end > m.ts) {
        push_step(PendingStep{m.ts, end, m.number, m.thread, m.name});
      } else {
        stats.add(Stat::incomplete_trailing_step);
      }
      used = boundaries.size();
    }
    boundaries.erase(boundaries.begin(), boundaries.begin() + static_cast<ptrdiff_t>(used));
  }

  // How step `s` (sorted after it) relates to the last kept step [prev_begin, prev_end)
  // (docs/accounting.md §1): after it; touching it (it begins at most the touch tolerance
  // before prev_end, later than prev_begin, and ends after prev_end: a rounding overlap, so it
  // begins at prev_end); or overlapping it (nested or concurrent: skipped, counted).  The
  // later step moves, not the earlier one, because a live source may have finalised the
  // earlier step before the later one arrives: both paths make the same choice.
  enum class StepFit : uint8_t { kAfter, kTouches, kOverlaps };
  StepFit fit_after(TimeNs prev_begin, TimeNs prev_end, const PendingStep& s) const {
    if (s.begin >= prev_end) return StepFit::kAfter;
    // Valid times lie in [-2^62, 2^62): the difference cannot overflow.
    if (prev_end - s.begin <= cfg.step_touch_tolerance_ns && s.begin > prev_begin &&
        s.end > prev_end) {
      return StepFit::kTouches;
    }
    return StepFit::kOverlaps;
  }

  void push_step(const PendingStep& s) {
    if (!steps.empty() && step_before(s, steps.back())) steps_sorted = false;
    steps.push_back(s);
  }

  void sort_steps() {
    if (steps_sorted) return;
    std::sort(steps.begin(), steps.end(), step_before);
    steps_sorted = true;
  }

  // ---- finalisation ----------------------------------------------------------------------

  // Launch time of a pending op, cached once its launch call is known.
  TimeNs pending_launch_time(PendingOp& p) {
    TimeNs& lt = p.launch;
    if (lt != kUnresolved) return lt;
    const GpuOp& op = p.op;
    if (op.correlation_id != 0) {
      const CorrEntry* e = corr.find(op.correlation_id);
      if (e != nullptr && e->has_api) return lt = e->api_start;
    }
    return op.start;
  }

  KernelExposure& exposure_of(NameId name) {
    if (name >= exposure.size()) exposure.resize(static_cast<size_t>(name) + 1);
    KernelExposure& k = exposure[name];
    k.name = name;
    return k;
  }

  TimeNs launch_time(const GpuOp& op) const {
    if (op.correlation_id != 0) {
      const CorrEntry* e = corr.find(op.correlation_id);
      if (e != nullptr && e->has_api) return e->api_start;
    }
    return op.start;
  }

  // ---- nested calls ----------------------------------------------------------------------
  // Calls on one thread never overlap except by nesting: a runtime call wraps the driver calls
  // it makes (CUPTI reports both when both API domains are traced, with one correlation id or
  // two; Kineto traces hold cuda_runtime and cuda_driver rows alike).  A call and every call
  // inside it form one *nest*: one launch, and host time in CUDA from the outer call's entry to
  // its exit.  Two calls are in one nest when one starts inside the other (or both start at the
  // same instant: clocks are coarse).  Thread call lists are sorted by start, so a nest is a run
  // of consecutive calls; the walks below look at most kNestScan calls away from a position (a
  // call wrapping more traced calls than that is not a pattern CUDA produces).
  static constexpr int kNestScan = 16;

  using CallIter = std::vector<HostApiCall>::const_iterator;

  static bool in_nest(const HostApiCall& c, TimeNs nest_start, TimeNs nest_end) {
    return c.start < nest_end || c.start == nest_start;
  }

  // The first call at or before `it` that is still running at `t` (a call that started before
  // `t` and wraps it), or `it` when there is none.
  static CallIter first_covering(const ThreadHost& th, CallIter it, TimeNs t) {
    CallIter found = it;
    for (int back = 0; back < kNestScan && it != th.calls.begin(); ++back) {
      --it;
      if (it->end > t) found = it;
    }
    return found;
  }

  // The outermost call of the nest holding the call [start, end) on `th` (the call itself when
  // nothing wraps it); *nest_start / *nest_end: that nest's extent.
  static CallIter nest_of(const ThreadHost& th, TimeNs start, TimeNs end, TimeNs* nest_start,
                          TimeNs* nest_end) {
    CallIter it = std::lower_bound(th.calls.begin(), th.calls.end(), start,
                                   [](const HostApiCall& c, TimeNs t) { return c.start < t; });
    CallIter outer = it;
    *nest_start = start;
    *nest_end = end;
    for (int back = 0; back < kNestScan && it != th.calls.begin(); ++back) {
      --it;
      if (it->end > start || it->start == start) {  // wraps the call (else: an earlier sibling)
        outer = it;
        *nest_start = std::min(*nest_start, it->start);
        *nest_end = std::max(*nest_end, it->end);
      }
    }
    return outer;
  }

  // When the host actually submitted the op of launch call `e`: the start of the last launch or
  // copy call nested inside it (the driver call that a runtime call makes), or its own start.
  // The call the op's correlation id names may be either of the two.
  TimeNs submission_time(const CorrEntry& e, const ThreadHost* th) const {
    TimeNs t = e.api_start;
    if (th == nullptr) return t;
    auto it = std::lower_bound(th->calls.begin(), th->calls.end(), e.api_start,
                               [](const HostApiCall& c, TimeNs x) { return c.start < x; });
    for (int n = 0; n < kNestScan && it != th->calls.end() && in_nest(*it, e.api_start, e.api_end);
         ++n, ++it) {
      if (it->end <= e.api_end &&
          (it->kind == HostApiKind::kLaunch || it->kind == HostApiKind::kCopy))
        t = std::max(t, it->start);
    }
    return t;
  }

  // True when some call of the nest holding the call [start, end) on `thread` has its op: the op
  // of a nested launch carries the correlation id of only one of the calls.
  bool nest_has_op(uint32_t thread, TimeNs start, TimeNs end) {
    auto tit = threads.find(thread);
    if (tit == threads.end()) return false;
    ThreadHost& th = tit->second;
    th.sort_all();
    TimeNs ns = 0, ne = 0;
    CallIter it = nest_of(th, start, end, &ns, &ne);
    for (int n = 0; n < 2 * kNestScan && it != th.calls.end() && in_nest(*it, ns, ne); ++n, ++it) {
      if (it->correlation_id == 0) continue;
      const CorrEntry* e = corr.find(it->correlation_id);
      if (e != nullptr && e->has_op) return true;
    }
    return false;
  }

  // Launches made inside [begin, end) on any thread: one per nest holding a launch call (a
  // runtime launch and the driver launch inside it are one).  `unmatched` counts the nests with
  // a launch or copy call none of whose ops arrived.  A nest whose outer call began before
  // `begin` was counted with the step it began in.
  uint32_t count_launches(TimeNs begin, TimeNs end, uint32_t* unmatched) {
    uint32_t launches = 0;
    uint32_t missing = 0;
    for (auto& [tid, th] : threads) {
      th.sort_all();
      auto it = std::lower_bound(th.calls.begin(), th.calls.end(), begin,
                                 [](const HostApiCall& c, TimeNs t) { return c.start < t; });
      // The nest running at `begin`, if any.
      TimeNs nest_start = kMinTime;
      TimeNs nest_end = kMinTime;
      for (CallIter c = first_covering(th, it, begin); c != it; ++c) {
        if (c->end > begin) {
          nest_start = nest_start == kMinTime ? c->start : nest_start;
          nest_end = std::max(nest_end, c->end);
        }
      }
      bool counting = false;  // the current nest began inside [begin, end)
      bool has_launch = false, wants_op = false, has_op = false;
      auto close_nest = [&] {
        if (!counting) return;
        if (has_launch) ++launches;
        if (wants_op && !has_op) ++missing;
      };
      for (; it != th.calls.end() && it->start < end; ++it) {
        const HostApiCall& c = *it;
        if (!in_nest(c, nest_start, nest_end)) {
          close_nest();
          counting = true;
          has_launch = wants_op = has_op = false;
          nest_start = c.start;
          nest_end = c.end;
        } else {
          nest_end = std::max(nest_end, c.end);
          if (!counting) continue;
        }
        if (c.kind != HostApiKind::kLaunch && c.kind != HostApiKind::kCopy) continue;
        has_launch = has_launch || c.kind == HostApiKind::kLaunch;
        if (c.correlation_id != 0) {
          wants_op = true;
          const CorrEntry* e = corr.find(c.correlation_id);
          has_op = has_op || (e != nullptr && e->has_op);
        }
      }
      close_nest();
    }
    if (unmatched) *unmatched = missing;
    return launches;
  }

  // A step can be finalised when nothing that could still arrive can change its rows: its host
  // range is over, every op it launched has arrived and ended before the watermark, and no
  // launch call made before its window's end is still waiting for its op (such an op could
  // run inside the window).  Launches whose op never comes are given up on after
  // cfg.pending_launch_timeout_ns.
  bool ready_to_finalize(const PendingStep& s) {
    if (watermark < s.end) return false;
    // An op of this step known to end after `blocked_until` keeps it open at least until the
    // watermark passes that time: skip the scan until then.
    if (blocked_step_begin == s.begin && watermark < blocked_until) return false;
    TimeNs horizon = s.end;
    TimeNs blocking = kMinTime;
    for (auto& [id, dev] : devices) {
      for (size_t i = dev.head; i < dev.pending.size(); ++i) {
        const TimeNs lt = pending_launch_time(dev.pending[i]);
        if (lt < s.begin || lt >= s.end) continue;
        const TimeNs end = dev.pending[i].op.end;
        if (end > watermark) blocking = std::max(blocking, end);
        horizon = std::max(horizon, end);
      }
      for (const PendingOp& p : dev.consumed_early) {
        if (p.launch >= s.begin && p.launch < s.end) horizon = std::max(horizon, p.op.end);
      }
    }
    if (blocking != kMinTime) {
      blocked_step_begin = s.begin;
      blocked_until = blocking;
      return false;
    }
    // Drop launches whose op has arrived (or that timed out) from the front; the earliest
    // remaining one decides.
    auto& pl = pending_launches;
    if (pending_sorted < pl.size()) {
      auto by_start = [](const PendingLaunch& a, const PendingLaunch& b) {
        return a.start < b.start;
      };
      const auto mid = pl.begin() + static_cast<ptrdiff_t>(pending_sorted);
      if (!std::is_sorted(mid, pl.end(), by_start)) std::sort(mid, pl.end(), by_start);
      const auto head = pl.begin() + static_cast<ptrdiff_t>(pending_head);
      if (head < mid && by_start(*mid, *std::prev(mid)))
        std::inplace_merge(head, mid, pl.end(), by_start);
      pending_sorted = pl.size();
    }
    while (pending_head < pl.size()) {
      const PendingLaunch& p = pl[pending_head];
      const CorrEntry* e = corr.find(p.corr);
      const bool done = e == nullptr || e->has_op || nest_has_op(p.thread, p.start, p.end);
      const bool timed_out = watermark >= p.end + cfg.pending_launch_timeout_ns;
      if (!done && !timed_out) break;
      ++pending_head;
    }
    if (pending_head > 4096 && pending_head * 2 > pl.size()) {
      pl.erase(pl.begin(), pl.begin() + static_cast<ptrdiff_t>(pending_head));
      pending_sorted -= pending_head;
      pending_head = 0;
    }
    return pending_head == pl.size() || pl[pending_head].start >= horizon;
  }

  void try_finalize(bool force) {
    sort_steps();
    // With many steps to finalise at once (the end of a trace or of a run), find every op's
    // owner in one pass instead of scanning all pending ops once per step.
    std::vector<std::map<uint16_t, OwnedStats>> owned;
    if (force && steps.size() > 4) owned = owned_by_step();
    size_t k = 0;
    for (; k < steps.size(); ++k) {
      PendingStep s = steps[k];
      // Steps that overlap the previous one are bad input: skip them, counted.  (A later step
      // that overlaps this one is skipped when its turn comes.)  One that only touches it
      // after rounding begins where it ends.
      const StepFit fit = fit_after(last_step_begin, last_step_end, s);
      if (fit == StepFit::kOverlaps) {
        stats.add(Stat::overlapping_steps_skipped);
        continue;
      }
      if (fit == StepFit::kTouches) s.begin = last_step_end;
      if (!force && !ready_to_finalize(s)) break;
      if (fit == StepFit::kTouches) stats.add(Stat::step_boundaries_aligned);
      finalize_step(s, owned.empty() ? nullptr : &owned[k]);
    }
    steps.erase(steps.begin(), steps.begin() + static_cast<ptrdiff_t>(k));
  }

  // For each pending step (sorted, possibly overlapping), the ops it owns per device.  Only the
  // steps try_finalize will keep can own ops: a step that overlaps the one before it is
  // skipped, and an op launched inside it belongs to the earlier step that contains it.
  std::vector<std::map<uint16_t, OwnedStats>> owned_by_step() {
    std::vector<std::map<uint16_t, OwnedStats>> out(steps.size());
    struct Kept {
      TimeNs begin;  // after aligning a touching step to the one before it
      TimeNs end;
      size_t index;
    };
    std::vector<Kept> kept;  // the steps that will be finalised: disjoint, sorted
    TimeNs last_begin = last_step_begin;
    TimeNs last_end = last_step_end;
    for (size_t k = 0; k < steps.size(); ++k) {
      const StepFit fit = fit_after(last_begin, last_end, steps[k]);
      if (fit == StepFit::kOverlaps) continue;
      const TimeNs begin = fit == StepFit::kTouches ? last_end : steps[k].begin;
      kept.push_back(Kept{begin, steps[k].end, k});
      last_begin = begin;
      last_end = steps[k].end;
    }
    auto owner = [&](TimeNs lt) -> std::map<uint16_t, OwnedStats>* {
      auto it = std::upper_bound(kept.begin(), kept.end(), lt,
                                 [](TimeNs t, const Kept& k) { return t < k.begin; });
      if (it == kept.begin()) return nullptr;
      const Kept& k = *std::prev(it);
      return lt < k.end ? &out[k.index] : nullptr;
    };
    for (auto& [id, dev] : devices) {
      for (size_t i = dev.head; i < dev.pending.size(); ++i) {
        if (auto* o = owner(pending_launch_time(dev.pending[i]))) (*o)[id].add(dev.pending[i].op);
      }
      for (const PendingOp& p : dev.consumed_early) {
        if (auto* o = owner(p.launch)) (*o)[id].add(p.op);
      }
    }
    return out;
  }

  // `pre` (optional): the ops the step owns per device, precomputed by owned_by_step().
  void finalize_step(const PendingStep& s, const std::map<uint16_t, OwnedStats>* pre) {
    const int64_t index = next_step_index++;
    uint32_t unmatched = 0;
    const uint32_t launches = count_launches(s.begin, s.end, &unmatched);
    stats.add(Stat::unmatched_launches, unmatched);
    double flops = 0;
    for (const Marker& m : flops_markers) {
      if (m.ts >= s.begin && m.ts < s.end) flops = m.value;
    }
    flops_markers.erase(std::remove_if(flops_markers.begin(), flops_markers.end(),
                                       [&](const Marker& m) { return m.ts < s.end; }),
                        flops_markers.end());

    StepRow base;
    base.step_index = index;
    base.step_number = s.number >= 0 ? s.number : index;
    base.warmup = index < cfg.warmup_steps;
    base.host_begin = s.begin;
    base.host_end = s.end;
    base.launches = launches;
    base.flops = flops;

    if (devices.empty()) {
      StepRow row = base;
      row.device = kHostOnlyDevice;
      row.window_begin = host_only_until == kMinTime ? s.begin : host_only_until;
      row.window_end = std::max(row.window_begin, s.end);
      host_only_until = row.window_end;
      account_window(row, s, /*dev=*/nullptr);
      emit(row);
    } else {
      for (auto& [id, dev] : devices) {
        StepRow row = base;
        row.device = id;
        row.window_begin = dev.has_window ? dev.finalized_until : s.begin;
        OwnedStats own;
        if (pre != nullptr) {
          if (auto it = pre->find(id); it != pre->end()) own = it->second;
        } else {
          for (size_t i = dev.head; i < dev.pending.size(); ++i) {
            const TimeNs lt = pending_launch_time(dev.pending[i]);
            if (lt >= s.begin && lt < s.end) own.add(dev.pending[i].op);
          }
          for (const PendingOp& p : dev.consumed_early) {
            if (p.launch >= s.begin && p.launch < s.end) own.add(p.op);
          }
        }
        std::erase_if(dev.consumed_early, [&](const PendingOp& p) { return p.launch < s.end; });
        row.kernels = own.kernels;
        row.copies = own.copies;
        row.window_end = own.max_end == kMinTime ? std::max(row.window_begin, s.end)
                                                 : std::max(row.window_begin, own.max_end);
        account_window(row, s, &dev);
        dev.finalized_until = row.window_end;
        dev.has_window = true;
        emit(row);
      }
    }
    last_step_end = s.end;
    prune_host(s);
    last_step_begin = s.begin;
    stats.add(Stat::steps_finalized);
  }

  void emit(const StepRow& row) {
    rows.push_back(row);
    if (row_sink) row_sink(row);
  }

  // Drops host state no future window can need: gaps of later windows start at or after the
  // earliest device's window end.  Correlation entries lag one step behind so ops that were
  // launched in one step but run in a later window still find their launch call.
  void prune_host(const PendingStep& s) {
    TimeNs cutoff = s.end;
    for (auto& [id, dev] : devices) cutoff = std::min(cutoff, dev.finalized_until);
    if (devices.empty()) cutoff = host_only_until;
    if (cutoff > host_cutoff) {
      host_cutoff = cutoff;
      // Both lists are sorted by start: drop the prefix that ended before the cutoff.  A thread
      // left with nothing is forgotten, so runs that start many short-lived threads keep
      // neither memory nor per-step work for them.
      for (auto it = threads.begin(); it != threads.end();) {
        it->second.prune_before(cutoff);
        if (it->second.empty()) {
          if (last_thread == &it->second) last_thread = nullptr;
          it = threads.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (last_step_begin != kMinTime) {
      const TimeNs corr_cutoff = std::min(last_step_begin, cutoff);
      // Rebuilding is O(map); do it only when the map has grown enough to matter.
      if (corr.size() > corr_prune_at) {
        // An entry goes once its launch is old AND every op it names has been consumed by a
        // window (or, with no op, once the launch has timed out): ops still pending must keep
        // finding their launch call, or their owner and gap classification would change.
        corr.erase_if([&](uint64_t, const CorrEntry& e) {
          if (e.has_op && e.op_end > cutoff) return false;
          if (!e.has_api) return true;
          if (e.api_start >= corr_cutoff) return false;
          return e.has_op || finished || watermark >= e.api_start + cfg.pending_launch_timeout_ns;
        });
        corr_prune_at = std::max<size_t>(4096, corr.size() * 2);
      }
    }
  }

  // ---- the sweep -------------------------------------------------------------------------

  void account_window(StepRow& row, const PendingStep& s, DeviceState* dev) {
    const TimeNs ws = row.window_begin;
    const TimeNs we = row.window_end;
    window_ops.clear();
    if (dev != nullptr) {
      // Partition: ops touching the window are copied out; ops entirely before it ran outside
      // every window (before the first step); ops ending after it are kept for later windows.
      // Pending ops are sorted by start, so the window's ops are a prefix of the live ones.
      // Ops of that prefix that run past the window stay (moved to the prefix's end, order
      // kept); the rest are consumed.
      dev->sort_live();
      size_t j = dev->head;
      while (j < dev->pending.size() && dev->pending[j].op.start < we) ++j;
      size_t keep_at = j;
      for (size_t i = j; i-- > dev->head;) {
        const GpuOp& op = dev->pending[i].op;
        if (op.end > we) {
          window_ops.push_back(op);
          dev->pending[--keep_at] = dev->pending[i];
          continue;
        }
        if (op.end <= ws && !(op.start == op.end && op.start == ws)) {
          stats.add(Stat::ops_outside_steps);
        } else {
          window_ops.push_back(op);
        }
        if (const TimeNs lt = pending_launch_time(dev->pending[i]); lt >= s.end) {
          // Keep the launch time it was owned by (an op with no known launch call has it
          // resolved to its own start only on the fly, not cached).
          PendingOp early = dev->pending[i];
          early.launch = lt;
          dev->consumed_early.push_back(early);
        }
      }
      std::reverse(window_ops.begin(), window_ops.end());  // back to start order
      dev->head = keep_at;
      dev->compact();
    }

    build_sorted_endpoints(ws, we);

    for (auto& a : active) a.clear();
    int count[4] = {0, 0, 0, 0};
    TimeNs cur = ws;
    // Consecutive intervals of one category merge into one timeline segment.
    Category seg_cat = Category::kCompute;
    TimeNs seg_start = ws;
    TimeNs seg_end = ws;
    bool seg_open = false;
    auto segment = [&](TimeNs a, TimeNs b, Category c) {
      if (!segment_sink || a >= b) return;
      if (seg_open && c == seg_cat && a == seg_end) {
        seg_end = b;
        return;
      }
      if (seg_open) {
        segment_sink(CategorySegment{row.device, row.step_index, seg_start, seg_end, seg_cat});
      }
      seg_open = true;
      seg_cat = c;
      seg_start = a;
      seg_end = b;
    };

    const bool summary_step = !row.warmup;
    auto attribute = [&](int cls, int64_t len) {
      if (!summary_step) return;
      const auto& act = active[cls];
      const int64_t n = static_cast<int64_t>(act.size());
      if (n == 0) return;
      const int64_t share = len / n;
      int64_t rem = len - share * n;
      for (uint32_t idx : act) {
        KernelExposure& k = exposure_of(window_ops[idx].name);
        k.communication = cls == kClsComm;
        k.exposed_ns += share + (rem > 0 ? 1 : 0);
        if (rem > 0) --rem;
      }
    };

    size_t i = 0;
    const size_t n = endpoints.size();
    while (i <= n) {
      const TimeNs t = i < n ? endpoints[i].t : we;
      if (t > cur) {
        const int64_t len = t - cur;
        if (count[kClsCompute] + count[kClsComm] + count[kClsCopyInput] + count[kClsCopyOther] >
            0) {
          row.gpu_busy += len;
          if (count[kClsComm] > 0) row.comm_total += len;
          if (count[kClsComm] > 0 && count[kClsCompute] > 0) row.comm_overlapped += len;
          if (count[kClsCompute] > 0) {
            row.cat.compute += len;
            attribute(kClsCompute, len);
            segment(cur, t, Category::kCompute);
          } else if (count[kClsComm] > 0) {
            row.cat.comm_exposed += len;
            attribute(kClsComm, len);
            segment(cur, t, Category::kCommExposed);
          } else if (count[kClsCopyInput] > 0) {
            row.cat.copy_input += len;
            segment(cur, t, Category::kCopyInput);
          } else {
            row.cat.copy_other += len;
            segment(cur, t, Category::kCopyOther);
          }
        } else {
          // Idle gap [cur, t): find the op that ends it (starts at t).
          const GpuOp* next = nullptr;
          if (i < n) {
            for (size_t j = i; j < n && endpoints[j].t == t; ++j) {
              if (endpoints[j].delta > 0) {
                const GpuOp* cand = &window_ops[endpoints[j].op];
                if (next == nullptr || launch_time(*cand) < launch_time(*next)) next = cand;
              }
            }
          }
          segment(cur, t, classify_idle(row, s, cur, t, next, summary_step));
        }
        cur = t;
      }
      if (i == n) break;
      // Apply every endpoint at t.
      for (; i < n && endpoints[i].t == t; ++i) {
        const Endpoint& e = endpoints[i];
        count[e.cls] += e.delta;
        auto& act = active[e.cls];
        if (e.delta > 0) {
          act.push_back(e.op);
          if (summary_step && window_ops[e.op].start >= ws) {
            if (e.cls == kClsCompute || e.cls == kClsComm)
              exposure_of(window_ops[e.op].name).count++;
          }
        } else {
          auto it = std::find(act.begin(), act.end(), e.op);
          if (it != act.end()) {
            *it = act.back();
            act.pop_back();
          }
        }
      }
    }
    if (seg_open) {
      segment_sink(CategorySegment{row.device, row.step_index, seg_start, seg_end, seg_cat});
    }
    assert(row.cat.sum() == we - ws);
  }

  // Fills `endpoints` with the clipped ops' start/end points, sorted by time.  The common case
  // packs each endpoint into one uint64 (time relative to the window, op index, class, kind)
  // and sorts plain integers, about twice as fast as sorting the structs; windows longer than
  // 2^40 ns (18 minutes) or with more than 2^20 ops take the general path.
  void build_sorted_endpoints(TimeNs ws, TimeNs we) {
    endpoints.clear();
    constexpr int kTimeShift = 24;
    const bool packable = we - ws < (TimeNs{1} << 40) && window_ops.size() < (size_t{1} << 20);
    if (packable) {
      // window_ops come in start order (pending ops are kept sorted), so the start keys are
      // already sorted: only the end keys need sorting, then one merge.
      starts.clear();
      ends.clear();
      for (uint32_t i = 0; i < window_ops.size(); ++i) {
        const GpuOp& op = window_ops[i];
        const TimeNs a = std::max(op.start, ws);
        const TimeNs b = std::min(op.end, we);
        if (a >= b) continue;
        const uint64_t tail = (uint64_t{i} << 3) | (uint64_t{class_of(op)} << 1);
        starts.push_back((static_cast<uint64_t>(a - ws) << kTimeShift) | tail | 1u);
        ends.push_back((static_cast<uint64_t>(b - ws) << kTimeShift) | tail);
      }
      if (!std::is_sorted(starts.begin(), starts.end())) radix_sort(starts, radix_scratch);
      radix_sort(ends, radix_scratch);
      packed.resize(starts.size() + ends.size());
      std::merge(starts.begin(), starts.end(), ends.begin(), ends.end(), packed.begin());
      endpoints.resize(packed.size());
      for (size_t j = 0; j < packed.size(); ++j) {
        const uint64_t k = packed[j];
        endpoints[j] =
            Endpoint{ws + static_cast<TimeNs>(k >> kTimeShift),
                     static_cast<uint32_t>((k >> 3) & ((1u << 20) - 1)),
                     static_cast<int8_t>((k & 1u) ? 1 : -1), static_cast<uint8_t>((k >> 1) & 3u)};
      }
      return;
    }
    for (uint32_t i = 0; i < window_ops.size(); ++i) {
      const GpuOp& op = window_ops[i];
      const TimeNs a = std::max(op.start, ws);
      const TimeNs b = std::min(op.end, we);
      if (a >= b) continue;
      const uint8_t cls = class_of(op);
      endpoints.push_back({a, i, +1, cls});
      endpoints.push_back({b, i, -1, cls});
    }
    std::sort(endpoints.begin(), endpoints.end(),
              [](const Endpoint& x, const Endpoint& y) { return x.t < y.t; });
  }

  // Splits the idle gap [g0, g1) into data-wait / launch-gap / host-other (docs/accounting.md,
  // "Idle gaps").  `next` is the op that ends the gap, or null when the window ends idle.
  // Returns the gap's dominant category (timelines show that; the numbers stay exact).
  Category classify_idle(StepRow& row, const PendingStep& s, TimeNs g0, TimeNs g1,
                         const GpuOp* next, bool summary_step) {
    const int64_t len = g1 - g0;
    const CorrEntry* launch = nullptr;
    if (next != nullptr && next->correlation_id != 0) {
      const CorrEntry* e = corr.find(next->correlation_id);
      if (e != nullptr && e->has_api) launch = e;
    }
    const uint32_t tid = launch ? launch->thread : s.thread;
    ThreadHost* th = nullptr;
    if (auto it = threads.find(tid); it != threads.end()) {
      th = &it->second;
      th->sort_all();
    }

    // 1. Data ranges on the launching thread, merged.
    data_scratch.clear();
    NameId data_name = kNoName;
    if (th != nullptr) {
      for (const HostRange& r : th->data) {
        if (r.start >= g1) break;
        if (r.end <= g0) continue;
        const TimeNs a = std::max(r.start, g0);
        const TimeNs b = std::min(r.end, g1);
        if (data_name == kNoName) data_name = r.name;
        if (!data_scratch.empty() && a <= data_scratch.back().second) {
          data_scratch.back().second = std::max(data_scratch.back().second, b);
        } else {
          data_scratch.emplace_back(a, b);
        }
      }
    }
    auto data_in = [&](TimeNs a, TimeNs b) {
      int64_t d = 0;
      for (const auto& [x, y] : data_scratch) d += overlap(a, b, x, y);
      return d;
    };
    const int64_t data = data_in(g0, g1);
    int64_t launch_ns = 0;
    int64_t other_ns = 0;
    NameId context = data > 0 ? data_name : kNoName;

    // 2. The rest, by what the host did.
    auto by_pauses = [&](TimeNs a, TimeNs b) {
      // CUDA calls on the thread cover parts of [a, b); uncovered stretches are pauses.  A pause
      // longer than the threshold is host-other; calls and short pauses are the launch wall.
      TimeNs pos = a;
      auto add_piece = [&](TimeNs x, TimeNs y, bool is_pause) {
        if (y <= x) return;
        const int64_t nondata = (y - x) - data_in(x, y);
        if (is_pause && nondata > cfg.host_pause_threshold_ns) {
          other_ns += nondata;
        } else {
          launch_ns += nondata;
        }
      };
      if (th != nullptr) {
        CallIter it = std::lower_bound(th->calls.cbegin(), th->calls.cend(), a,
                                       [](const HostApiCall& c, TimeNs t) { return c.start < t; });
        // A call that began before `a` may still run at `a`: a runtime call whose nested driver
        // call returned before `a` (the runtime's tail is host time in CUDA too).
        it = first_covering(*th, it, a);
        for (; it != th->calls.end() && it->start < b; ++it) {
          const TimeNs cs = std::max(it->start, a);
          const TimeNs ce = std::min(it->end, b);
          if (ce <= pos) continue;
          if (cs > pos) add_piece(pos, cs, /*is_pause=*/true);
          add_piece(std::max(cs, pos), ce, /*is_pause=*/false);
          if (context == kNoName) context = it->name;
          pos = ce;
        }
      }
      add_piece(pos, b, /*is_pause=*/true);
    };

    bool queued = false;
    if (launch != nullptr) {
      // The op was submitted in the launch call, or in the launch nested inside it (a runtime
      // launch submits through its driver launch); the call before that is host time in CUDA.
      if (submission_time(*launch, th) <= g0) {
        // Already submitted when the GPU went idle: launch latency if short, otherwise the op
        // waited on a dependency (another device, an event) - not the launch wall.
        queued = true;
        const int64_t rest = len - data;
        if (len < cfg.launch_latency_threshold_ns) {
          launch_ns += rest;
        } else {
          other_ns += rest;
        }
      } else {
        const TimeNs call_start = std::clamp(launch->api_start, g0, g1);
        by_pauses(g0, call_start);
        // The launch call itself (and the call it is nested in) and its latency.
        launch_ns += (g1 - call_start) - data_in(call_start, g1);
        if (context == kNoName) context = launch->api_name;
      }
    } else if (th != nullptr && !th->calls.empty()) {
      by_pauses(g0, g1);
    } else {
      // Nothing known about the host: only the length speaks.
      if (len < cfg.launch_latency_threshold_ns) {
        launch_ns += len - data;
      } else {
        other_ns += len - data;
      }
    }

    row.cat.data_wait += data;
    row.cat.launch_gap += launch_ns;
    row.cat.host_other += other_ns;

    Category dominant = Category::kHostOther;
    if (data >= launch_ns && data >= other_ns) {
      dominant = Category::kDataWait;
    } else if (launch_ns >= other_ns) {
      dominant = Category::kLaunchGap;
    }

    if (summary_step && cfg.top_gaps > 0) {
      IdleGap gap;
      gap.step_index = row.step_index;
      gap.device = row.device;
      gap.start = g0;
      gap.end = g1;
      gap.data_wait = data;
      gap.launch_gap = launch_ns;
      gap.host_other = other_ns;
      gap.next_op = next ? next->name : kNoName;
      gap.host_context = context;
      gap.thread = tid;
      gap.op_was_queued = queued;
      keep_gap(gap);
    }
    return dominant;
  }

  void keep_gap(const IdleGap& gap) {
    auto shorter = [](const IdleGap& a, const IdleGap& b) { return a.length() > b.length(); };
    const size_t cap = static_cast<size_t>(cfg.top_gaps);
    if (gaps.size() < cap) {
      gaps.push_back(gap);
      std::push_heap(gaps.begin(), gaps.end(), shorter);
    } else if (gap.length() > gaps.front().length()) {
      std::pop_heap(gaps.begin(), gaps.end(), shorter);
      gaps.back() = gap;
      std::push_heap(gaps.begin(), gaps.end(), shorter);
    }
  }
};

StepAccountant::StepAccountant(AccountingConfig config) : impl_(std::make_unique<Impl>()) {
  impl_->cfg = config;
}
StepAccountant::~StepAccountant() = default;

void StepAccountant::set_row_sink(RowSink sink) {
  impl_->row_sink = std::move(sink);
}
void StepAccountant::set_segment_sink(SegmentSink sink) {
  impl_->segment_sink = std::move(sink);
}

void StepAccountant::add(const EventBatch& batch) {
  for (const auto& e : batch.gpu_ops) impl_->add_gpu_op(e);
  for (const auto& e : batch.api_calls) impl_->add_api_call(e);
  for (const auto& e : batch.ranges) impl_->add_range(e);
  for (const auto& e : batch.markers) impl_->add_marker(e);
}
void StepAccountant::add_gpu_op(const GpuOp& op) {
  impl_->add_gpu_op(op);
}
void StepAccountant::add_api_call(const HostApiCall& call) {
  impl_->add_api_call(call);
}
void StepAccountant::add_range(const HostRange& range) {
  impl_->add_range(range);
}
void StepAccountant::add_marker(const Marker& marker) {
  impl_->add_marker(marker);
}

void StepAccountant::advance_watermark(TimeNs watermark) {
  if (impl_->finished || watermark <= impl_->watermark) return;
  impl_->watermark = watermark;
  impl_->convert_boundaries(false);
  impl_->try_finalize(false);
}

void StepAccountant::finish() {
  if (impl_->finished) return;
  impl_->convert_boundaries(true);
  impl_->finished = true;
  impl_->try_finalize(true);
  for (auto& [id, dev] : impl_->devices) {
    impl_->stats.add(Stat::ops_outside_steps, static_cast<int64_t>(dev.live()));
    dev.pending.clear();
    dev.head = dev.sorted = 0;
  }
}

const std::vector<StepRow>& StepAccountant::rows() const {
  return impl_->rows;
}

std::vector<KernelExposure> StepAccountant::kernel_exposure() const {
  std::vector<KernelExposure> out;
  out.reserve(impl_->exposure.size());
  for (const KernelExposure& k : impl_->exposure) {
    if (k.exposed_ns > 0 || k.count > 0) out.push_back(k);
  }
  return out;
}

const std::vector<IdleGap>& StepAccountant::largest_gaps() const {
  impl_->gaps_sorted = impl_->gaps;
  std::sort(impl_->gaps_sorted.begin(), impl_->gaps_sorted.end(),
            [](const IdleGap& a, const IdleGap& b) { return a.length() > b.length(); });
  return impl_->gaps_sorted;
}

const Stats& StepAccountant::stats() const {
  return impl_->stats;
}
Stats& StepAccountant::mutable_stats() {
  return impl_->stats;
}
const AccountingConfig& StepAccountant::config() const {
  return impl_->cfg;
}

size_t StepAccountant::retained_events() const {
  size_t n = impl_->corr.size() + impl_->steps.size() + impl_->boundaries.size() +
             impl_->flops_markers.size();
  for (const auto& [id, dev] : impl_->devices) n += dev.live();
  // Each known thread holds state of its own, even with no event left.
  for (const auto& [tid, th] : impl_->threads) n += 1 + th.calls.size() + th.data.size();
  return n;
}

}  // namespace gpuacct
