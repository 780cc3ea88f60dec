// The sweep of one window (docs/accounting.md §2 and "Idle gaps"); each rule has a unit test in
// step_accountant_test.cc.
#include "analysis/accounting/window_sweep.h"

#include <algorithm>
#include <cassert>

namespace gpuacct::accounting {
namespace {

// The sweep's op classes are the busy categories, in priority order (the first with an op
// running wins); they are packed into 2 bits.
static_assert(static_cast<int>(Category::kCompute) == 0 &&
              static_cast<int>(Category::kCommExposed) == 1 &&
              static_cast<int>(Category::kCopyInput) == 2 &&
              static_cast<int>(Category::kCopyOther) == 3);
constexpr int kCompute = 0, kComm = 1, kCopyInput = 2, kCopyOther = 3;

uint8_t class_of(const GpuOp& op) {
  if (op.is_communication()) return kComm;
  if (op.kind == GpuOpKind::kKernel) return kCompute;
  if (op.kind == GpuOpKind::kMemcpy && op.copy_dir == CopyDir::kH2D) return kCopyInput;
  return kCopyOther;
}

int64_t overlap(TimeNs a0, TimeNs a1, TimeNs b0, TimeNs b1) {
  const TimeNs lo = std::max(a0, b0);
  const TimeNs hi = std::min(a1, b1);
  return hi > lo ? hi - lo : 0;
}

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

}  // namespace

void WindowSweep::account(StepRow& row, uint32_t step_thread, const std::vector<GpuOp>& ops,
                          HostState& host,
                          const std::function<void(const CategorySegment&)>& segments) {
  row_ = &row;
  step_thread_ = step_thread;
  ops_ = &ops;
  host_ = &host;
  segments_ = segments ? &segments : nullptr;
  // Untraced rows (GPUACCT_SAMPLE) are idle only for want of records: no gaps, no kernels.
  summary_step_ = !row.warmup && row.sampled;
  seg_open_ = false;
  build_sorted_endpoints(row.window_begin, row.window_end);
  row_gaps_.clear();
  sweep();
  flush_segment();
  // The row's top_gaps longest go on to the run's list: one row can never fill more of it, so
  // the headroom below holds kGapHeadroom - 1 whole rows that the summary may leave out.
  const size_t run_cap = static_cast<size_t>(std::max(cfg_.top_gaps, 0)) * kGapHeadroom;
  for (const IdleGap& g : row_gaps_) keep_longest(gaps_, g, run_cap);
  assert(row.cat.sum() == row.window_end - row.window_begin);
}

// Fills `endpoints_` with the clipped ops' start/end points, sorted by time.  The common case
// packs each endpoint into one uint64 (time relative to the window, op index, class, kind) and
// sorts plain integers, about twice as fast as sorting the structs; windows longer than 2^40 ns
// (18 minutes) or with more than 2^20 ops take the general path.
void WindowSweep::build_sorted_endpoints(TimeNs ws, TimeNs we) {
  const std::vector<GpuOp>& ops = *ops_;
  endpoints_.clear();
  constexpr int kTimeShift = 24;
  const bool packable = we - ws < (TimeNs{1} << 40) && ops.size() < (size_t{1} << 20);
  if (packable) {
    // The ops come in start order (pending ops are kept sorted), so the start keys are already
    // sorted: only the end keys need sorting, then one merge.
    starts_.clear();
    ends_.clear();
    for (uint32_t i = 0; i < ops.size(); ++i) {
      const GpuOp& op = ops[i];
      const TimeNs a = std::max(op.start, ws);
      const TimeNs b = std::min(op.end, we);
      if (a >= b) continue;
      const uint64_t tail = (uint64_t{i} << 3) | (uint64_t{class_of(op)} << 1);
      starts_.push_back((static_cast<uint64_t>(a - ws) << kTimeShift) | tail | 1u);
      ends_.push_back((static_cast<uint64_t>(b - ws) << kTimeShift) | tail);
    }
    if (!std::is_sorted(starts_.begin(), starts_.end())) radix_sort(starts_, radix_scratch_);
    radix_sort(ends_, radix_scratch_);
    packed_.resize(starts_.size() + ends_.size());
    std::merge(starts_.begin(), starts_.end(), ends_.begin(), ends_.end(), packed_.begin());
    endpoints_.resize(packed_.size());
    for (size_t j = 0; j < packed_.size(); ++j) {
      const uint64_t k = packed_[j];
      endpoints_[j] =
          Endpoint{ws + static_cast<TimeNs>(k >> kTimeShift),
                   static_cast<uint32_t>((k >> 3) & ((1u << 20) - 1)),
                   static_cast<int8_t>((k & 1u) ? 1 : -1), static_cast<uint8_t>((k >> 1) & 3u)};
    }
    return;
  }
  for (uint32_t i = 0; i < ops.size(); ++i) {
    const GpuOp& op = ops[i];
    const TimeNs a = std::max(op.start, ws);
    const TimeNs b = std::min(op.end, we);
    if (a >= b) continue;
    const uint8_t cls = class_of(op);
    endpoints_.push_back({a, i, +1, cls});
    endpoints_.push_back({b, i, -1, cls});
  }
  std::sort(endpoints_.begin(), endpoints_.end(),
            [](const Endpoint& x, const Endpoint& y) { return x.t < y.t; });
}

// One pass over the sorted endpoints: every interval between two consecutive endpoint times
// gets one category -- the busy class with the highest priority running, or the idle split.
void WindowSweep::sweep() {
  for (auto& a : active_) a.clear();
  int count[4] = {0, 0, 0, 0};
  TimeNs cur = row_->window_begin;
  const TimeNs we = row_->window_end;
  size_t i = 0;
  const size_t n = endpoints_.size();
  while (i <= n) {
    const TimeNs t = i < n ? endpoints_[i].t : we;
    if (t > cur) {
      if (count[kCompute] + count[kComm] + count[kCopyInput] + count[kCopyOther] > 0) {
        add_busy(cur, t, count);
      } else {
        segment(cur, t, classify_idle(cur, t, op_ending_gap(i, t)));
      }
      cur = t;
    }
    if (i == n) break;
    // Apply every endpoint at t.
    for (; i < n && endpoints_[i].t == t; ++i) {
      const Endpoint& e = endpoints_[i];
      count[e.cls] += e.delta;
      auto& act = active_[e.cls];
      if (e.delta > 0) {
        act.push_back(e.op);
        const GpuOp& op = (*ops_)[e.op];
        if (summary_step_ && op.start >= row_->window_begin &&
            (e.cls == kCompute || e.cls == kComm))
          exposure_of(op.name).count++;
      } else {
        auto it = std::find(act.begin(), act.end(), e.op);
        if (it != act.end()) {
          *it = act.back();
          act.pop_back();
        }
      }
    }
  }
}

inline void WindowSweep::add_busy(TimeNs a, TimeNs b, const int count[4]) {
  StepRow& row = *row_;
  const int64_t len = b - a;
  row.gpu_busy += len;
  if (count[kComm] > 0) row.comm_total += len;
  if (count[kComm] > 0 && count[kCompute] > 0) row.comm_overlapped += len;
  if (count[kCompute] > 0) {
    row.cat.compute += len;
    attribute(Category::kCompute, len);
    segment(a, b, Category::kCompute);
  } else if (count[kComm] > 0) {
    row.cat.comm_exposed += len;
    attribute(Category::kCommExposed, len);
    segment(a, b, Category::kCommExposed);
  } else if (count[kCopyInput] > 0) {
    row.cat.copy_input += len;
    segment(a, b, Category::kCopyInput);
  } else {
    row.cat.copy_other += len;
    segment(a, b, Category::kCopyOther);
  }
}

// The op that ends the idle gap at `t` (starts there; the earliest launched), or null when the
// window ends idle.
const GpuOp* WindowSweep::op_ending_gap(size_t i, TimeNs t) const {
  const GpuOp* next = nullptr;
  for (size_t j = i; j < endpoints_.size() && endpoints_[j].t == t; ++j) {
    if (endpoints_[j].delta > 0) {
      const GpuOp* cand = &(*ops_)[endpoints_[j].op];
      if (next == nullptr || host_->launch_time(*cand) < host_->launch_time(*next)) next = cand;
    }
  }
  return next;
}

// Exposed time of a busy interval, split equally among the ops of its class running.
inline void WindowSweep::attribute(Category cls, int64_t len) {
  if (!summary_step_) return;
  const auto& act = active_[static_cast<size_t>(cls)];
  const int64_t n = static_cast<int64_t>(act.size());
  if (n == 0) return;
  const int64_t share = len / n;
  int64_t rem = len - share * n;
  for (uint32_t idx : act) {
    KernelExposure& k = exposure_of((*ops_)[idx].name);
    k.communication = cls == Category::kCommExposed;
    k.exposed_ns += share + (rem > 0 ? 1 : 0);
    if (rem > 0) --rem;
  }
}

inline void WindowSweep::segment(TimeNs a, TimeNs b, Category c) {
  if (segments_ == nullptr || a >= b) return;
  if (seg_open_ && c == seg_cat_ && a == seg_end_) {
    seg_end_ = b;
    return;
  }
  flush_segment();
  seg_open_ = true;
  seg_cat_ = c;
  seg_start_ = a;
  seg_end_ = b;
}

void WindowSweep::flush_segment() {
  if (!seg_open_) return;
  (*segments_)(CategorySegment{row_->device, row_->step_index, seg_start_, seg_end_, seg_cat_});
  seg_open_ = false;
}

// ---- idle gaps ------------------------------------------------------------------------------

// Splits the idle gap [g0, g1) into data-wait / launch-gap / host-other.  `next` is the op that
// ends the gap, or null when the window ends idle.  Returns the gap's dominant category
// (timelines show that; the numbers stay exact).
Category WindowSweep::classify_idle(TimeNs g0, TimeNs g1, const GpuOp* next) {
  const CorrEntry* launch = next != nullptr ? host_->launch_of(*next) : nullptr;
  const uint32_t tid = launch ? launch->thread : step_thread_;
  const ThreadHost* th = host_->sorted_thread(tid);

  // 1. Data ranges on the launching thread always win.
  const NameId data_name = collect_data_ranges(th, g0, g1);
  IdleSplit split;
  split.data = data_in(g0, g1);
  if (split.data > 0) split.context = data_name;

  // 2. The rest, by what the host did.
  if (launch != nullptr) {
    // The op was submitted in the launch call, or in the launch nested inside it (a runtime
    // launch submits through its driver launch); the call before that is host time in CUDA.
    if (HostState::submission_time(*launch, th) <= g0) {
      // Already submitted when the GPU went idle: launch latency if short, otherwise the op
      // waited on a dependency (another device, an event) - not the launch wall.
      split.queued = true;
      split_by_length(g1 - g0, &split);
    } else {
      const TimeNs call_start = std::clamp(launch->api_start, g0, g1);
      split_by_pauses(th, g0, call_start, &split);
      if (next->kind == GpuOpKind::kMemcpy && next->copy_dir == CopyDir::kH2D)
        infer_input_wait(th, g0, call_start, &split);
      // The launch call itself (and the call it is nested in) and its latency.
      split.launch += (g1 - call_start) - data_in(call_start, g1);
      if (split.context == kNoName) split.context = launch->api_name;
    }
  } else if (host_->called_before(tid, g1)) {  // not "calls held": that depends on delivery
    split_by_pauses(th, g0, g1, &split);
  } else {
    split_by_length(g1 - g0, &split);  // nothing known about the host: only the length speaks
  }

  StepRow& row = *row_;
  row.cat.data_wait += split.data;
  row.cat.launch_gap += split.launch;
  row.cat.host_other += split.other;

  IdleGap gap;
  gap.step_index = row.step_index;
  gap.device = row.device;
  gap.start = g0;
  gap.end = g1;
  gap.data_wait = split.data;
  gap.launch_gap = split.launch;
  gap.host_other = split.other;
  gap.next_op = next ? next->name : kNoName;
  gap.host_context = split.context;
  gap.thread = tid;
  gap.op_was_queued = split.queued;
  if (summary_step_ && cfg_.top_gaps > 0) keep_gap(gap);
  return gap.dominant();
}

// Merges the data ranges of `th` that overlap [g0, g1) into data_scratch_ (clipped); returns
// the first one's name.
NameId WindowSweep::collect_data_ranges(const ThreadHost* th, TimeNs g0, TimeNs g1) {
  data_scratch_.clear();
  NameId name = kNoName;
  if (th == nullptr) return name;
  for (const HostRange& r : th->data) {
    if (r.start >= g1) break;
    if (r.end <= g0) continue;
    const TimeNs a = std::max(r.start, g0);
    const TimeNs b = std::min(r.end, g1);
    if (name == kNoName) name = r.name;
    if (!data_scratch_.empty() && a <= data_scratch_.back().second) {
      data_scratch_.back().second = std::max(data_scratch_.back().second, b);
    } else {
      data_scratch_.emplace_back(a, b);
    }
  }
  return name;
}

int64_t WindowSweep::data_in(TimeNs a, TimeNs b) const {
  int64_t d = 0;
  for (const auto& [x, y] : data_scratch_) d += overlap(a, b, x, y);
  return d;
}

// [a, b) outside data ranges, by the CUDA calls on the thread: calls and pauses up to the
// host-pause threshold are the launch wall; longer pauses are host-other.
void WindowSweep::split_by_pauses(const ThreadHost* th, TimeNs a, TimeNs b,
                                  IdleSplit* split) const {
  TimeNs pos = a;
  auto add_piece = [&](TimeNs x, TimeNs y, bool is_pause) {
    if (y <= x) return;
    const int64_t nondata = (y - x) - data_in(x, y);
    if (is_pause && nondata > cfg_.host_pause_threshold_ns) {
      split->other += nondata;
    } else {
      split->launch += nondata;
    }
  };
  if (th != nullptr) {
    HostState::CallIter it =
        std::lower_bound(th->calls.cbegin(), th->calls.cend(), a,
                         [](const HostApiCall& c, TimeNs t) { return c.start < t; });
    // A call that began before `a` may still run at `a`: a runtime call whose nested driver
    // call returned before `a` (the runtime's tail is host time in CUDA too).
    it = HostState::first_covering(*th, it, a);
    for (; it != th->calls.cend() && it->start < b; ++it) {
      const TimeNs cs = std::max(it->start, a);
      const TimeNs ce = std::min(it->end, b);
      if (ce <= pos) continue;
      if (cs > pos) add_piece(pos, cs, /*is_pause=*/true);
      add_piece(std::max(cs, pos), ce, /*is_pause=*/false);
      if (split->context == kNoName) split->context = it->name;
      pos = ce;
    }
  }
  add_piece(pos, b, /*is_pause=*/true);
}

// No data range anywhere so far (AccountingConfig::infer_data_wait): the last pause before the
// launch of a host-to-device copy that ends the gap -- the host preparing the step's input --
// moves from host-other to data wait.  Only that pause: host work separated from the copy by
// CUDA calls stays host-other.
void WindowSweep::infer_input_wait(const ThreadHost* th, TimeNs g0, TimeNs call_start,
                                   IdleSplit* split) {
  if (!cfg_.infer_data_wait || host_->earliest_data_end <= call_start || split->other == 0)
    return;
  TimeNs pause_start = g0;
  if (th != nullptr) {
    auto it = std::lower_bound(th->calls.cbegin(), th->calls.cend(), call_start,
                               [](const HostApiCall& c, TimeNs t) { return c.start < t; });
    // The calls before the copy's: the latest end among those that began before it.
    for (int k = 0; k < HostState::kNestScan && it != th->calls.cbegin(); ++k) {
      --it;
      if (it->end <= call_start) pause_start = std::max(pause_start, it->end);
    }
  }
  const int64_t pause = (call_start - pause_start) - data_in(pause_start, call_start);
  if (pause <= cfg_.host_pause_threshold_ns) return;
  const int64_t moved = std::min<int64_t>(pause, split->other);
  split->other -= moved;
  split->data += moved;
  ++inferred_data_waits_;
}

// A gap of `len` outside data ranges judged by its length alone: launch latency below the
// launch-latency threshold, else host-other.
void WindowSweep::split_by_length(int64_t len, IdleSplit* split) const {
  const int64_t rest = len - split->data;
  if (len < cfg_.launch_latency_threshold_ns) {
    split->launch += rest;
  } else {
    split->other += rest;
  }
}

// Keeps the `cap` longest gaps in `heap` (a min-heap on length).
void WindowSweep::keep_longest(std::vector<IdleGap>& heap, const IdleGap& gap, size_t cap) {
  auto shorter = [](const IdleGap& a, const IdleGap& b) { return a.length() > b.length(); };
  if (heap.size() < cap) {
    heap.push_back(gap);
    std::push_heap(heap.begin(), heap.end(), shorter);
  } else if (cap > 0 && gap.length() > heap.front().length()) {
    std::pop_heap(heap.begin(), heap.end(), shorter);
    heap.back() = gap;
    std::push_heap(heap.begin(), heap.end(), shorter);
  }
}

void WindowSweep::keep_gap(const IdleGap& gap) {
  keep_longest(row_gaps_, gap, static_cast<size_t>(cfg_.top_gaps));
}

}  // namespace gpuacct::accounting
