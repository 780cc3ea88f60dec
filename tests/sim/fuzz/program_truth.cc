// The accounting contract (docs/accounting.md §1-§3) applied to a program's log, written from
// the document and apart from analysis/accounting: it walks elementary intervals instead of
// sweeping endpoints, so a shared mistake would have to be made twice in different shapes.
#include <algorithm>
#include <map>

#include "program.h"

namespace sim_fuzz {

const char* const kCatKeys[kNumCats] = {"compute",   "comm_exposed", "copy_input", "copy_other",
                                        "data_wait", "launch_gap",   "host_other"};

namespace {

// Time of [a, b) inside the thread's data ranges (their union: ranges of one thread nest).
uint64_t data_in(const ProgramLog& log, int thread, uint64_t a, uint64_t b) {
  std::vector<std::pair<uint64_t, uint64_t>> parts;
  for (const Range& r : log.data) {
    if (r.thread != thread) continue;
    const uint64_t lo = std::max(r.start, a), hi = std::min(r.end, b);
    if (hi > lo) parts.emplace_back(lo, hi);
  }
  std::sort(parts.begin(), parts.end());
  uint64_t total = 0, pos = a;
  for (const auto& [lo, hi] : parts) {
    const uint64_t from = std::max(lo, pos);
    if (hi > from) total += hi - from;
    pos = std::max(pos, hi);
  }
  return total;
}

struct Split {
  uint64_t data = 0, launch = 0, other = 0;
};

// [a, b) outside data ranges, by the thread's CUDA calls: a pause (no call) whose non-data time
// exceeds the host-pause threshold is host time, calls and shorter pauses are launch time.  A
// call of no length between two pauses still separates them (it was a CUDA call).  "CUDA
// calls" are the calls the library traces: launches, copies and synchronizes
// (cupti_hooks/api_table.cc); another runtime call (a stream creation) is host time.
bool traced(const Call& c) { return c.kind != CallKind::kOther; }

void by_pauses(const ProgramLog& log, int thread, uint64_t a, uint64_t b, const Thresholds& t,
               Split* s) {
  std::vector<const Call*> calls;
  for (const Call& c : log.calls) {
    if (traced(c) && c.thread == thread && c.start < b &&
        (c.end > a || (c.end == c.start && c.start > a)))
      calls.push_back(&c);
  }
  std::sort(calls.begin(), calls.end(),
            [](const Call* x, const Call* y) { return x->start < y->start; });
  auto piece = [&](uint64_t x, uint64_t y, bool pause) {
    if (y <= x) return;
    const uint64_t nondata = (y - x) - data_in(log, thread, x, y);
    (pause && nondata > t.host_pause_ns ? s->other : s->launch) += nondata;
  };
  uint64_t pos = a;
  for (const Call* c : calls) {
    const uint64_t cs = std::max(c->start, a), ce = std::min(c->end, b);
    if (ce <= pos) continue;
    piece(pos, cs, true);
    piece(std::max(cs, pos), ce, false);
    pos = ce;
  }
  piece(pos, b, true);
}

// The idle gap [g0, g1) of a window: `next` is the op that ends it (null: the window ends
// idle), `step_thread` the thread that marked the step.  Host facts are per thread, on every
// device alike.
Split idle(const ProgramLog& log, uint64_t g0, uint64_t g1, const Op* next, int step_thread,
           const Thresholds& t) {
  Split s;
  const int thread = next ? next->thread : step_thread;
  s.data = data_in(log, thread, g0, g1);
  const uint64_t len = g1 - g0;
  if (next != nullptr && next->submitted <= g0) {  // queued: latency if short, else a dependency
    (len < t.launch_latency_ns ? s.launch : s.other) += len - s.data;
  } else if (next != nullptr) {  // submitted during the gap: the host is what the GPU waited for
    const uint64_t cs = std::clamp(next->launch_time, g0, g1);
    by_pauses(log, thread, g0, cs, t, &s);
    s.launch += (g1 - cs) - data_in(log, thread, cs, g1);
    // No data range ended by then: the last pause before an input copy's call is data wait
    // (docs/accounting.md, "Inferred data wait").
    bool marked = false;
    for (const Range& r : log.data) marked = marked || r.end <= cs;
    if (next->cls == kCopyInput && !marked) {
      uint64_t ps = g0;
      for (const Call& c : log.calls) {
        if (traced(c) && c.thread == thread && c.start < cs && c.end <= cs) ps = std::max(ps, c.end);
      }
      const uint64_t pause = (cs - ps) - data_in(log, thread, ps, cs);
      if (pause > t.host_pause_ns) {
        const uint64_t moved = std::min(pause, s.other);
        s.other -= moved;
        s.data += moved;
      }
    }
  } else {
    bool has_calls = false;
    // Calls that began before the gap's end: what the library can know when it reads the gap.
    for (const Call& c : log.calls)
      has_calls = has_calls || (traced(c) && c.thread == thread && c.start < g1);
    if (has_calls) {
      by_pauses(log, thread, g0, g1, t, &s);
    } else {
      (len < t.launch_latency_ns ? s.launch : s.other) += len - s.data;
    }
  }
  return s;
}

// Categories of one window: every elementary interval between op boundaries gets the busy
// class of highest priority running, or, when nothing runs, its share of the idle gap.
void categorize(const ProgramLog& all, int step_thread, const Thresholds& t, ExpectedRow* row) {
  const uint64_t ws = row->window_begin, we = row->window_end;
  ProgramLog log;  // the host facts of every thread, the ops of this row's device
  log.calls = all.calls;
  log.data = all.data;
  for (const Op& op : all.ops)
    if (op.device == row->device) log.ops.push_back(op);
  std::vector<uint64_t> cuts{ws, we};
  for (const Op& op : log.ops) {
    if (op.end <= ws || op.start >= we || op.end <= op.start) continue;
    cuts.push_back(std::max(op.start, ws));
    cuts.push_back(std::min(op.end, we));
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  uint64_t gap_start = 0;
  bool in_gap = false;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const uint64_t a = cuts[i], b = cuts[i + 1];
    int best = -1;
    for (const Op& op : log.ops) {
      if (op.start <= a && op.end >= b && op.end > op.start && (best < 0 || op.cls < best))
        best = op.cls;
    }
    if (best >= 0) {
      row->cat[best] += b - a;
      continue;
    }
    if (!in_gap) gap_start = a;
    in_gap = true;
    const bool gap_ends = i + 2 == cuts.size() || [&] {
      for (const Op& op : log.ops)
        if (op.start <= b && op.end > b && op.end > op.start) return true;
      return false;
    }();
    if (!gap_ends) continue;
    in_gap = false;
    const Op* next = nullptr;  // starts at the gap's end; of several, the one launched first
    for (const Op& op : log.ops) {
      if (op.start == b && op.end > op.start && b < we &&
          (next == nullptr || op.launch_time < next->launch_time))
        next = &op;
    }
    const Split s = idle(log, gap_start, b, next, step_thread, t);
    if (next == nullptr) row->step_thread_ns += b - gap_start;
    row->cat[kCatData] += s.data;
    row->cat[kCatLaunch] += s.launch;
    row->cat[kCatOther] += s.other;
  }
}

}  // namespace

std::vector<ExpectedRow> expected_rows(const ProgramLog& log, const Thresholds& t) {
  // A device has rows from the first step that ends after an op was launched on it; a step
  // before every device's first launch has one host-only row (-1), tiled with the other
  // host-only rows (docs/accounting.md §1).
  std::map<int, uint64_t> first_launch;
  for (const Op& op : log.ops) {
    auto [it, fresh] = first_launch.emplace(op.device, op.launch_time);
    if (!fresh) it->second = std::min(it->second, op.launch_time);
  }
  std::vector<ExpectedRow> rows;
  std::map<int, uint64_t> prev_end;  // per device (-1: host-only) with a window so far
  for (size_t k = 0; k < log.steps.size(); ++k) {
    const StepLog& st = log.steps[k];
    uint64_t launches = 0;  // all threads and devices; a nested launch once
    for (const Call& c : log.calls) {
      if (c.outer && c.kind == CallKind::kLaunch && c.start >= st.begin && c.start < st.end)
        ++launches;
    }
    std::vector<int> devices;
    for (const auto& [d, first] : first_launch)
      if (first < st.end) devices.push_back(d);
    if (devices.empty()) devices.push_back(-1);
    for (int d : devices) {
      ExpectedRow row;
      row.step = k;
      row.device = d;
      row.launches = launches;
      // Window: from the previous window's end on the device (the first: the step's host
      // begin) to the end of the last op the step owns there (launched inside its host range),
      // else its host end.
      const auto prev = prev_end.find(d);
      row.window_begin = prev == prev_end.end() ? st.begin : prev->second;
      uint64_t end = 0;
      bool owns = false;
      for (const Op& op : log.ops) {
        if (op.device == d && op.launch_time >= st.begin && op.launch_time < st.end) {
          end = std::max(end, op.end);
          owns = true;
        }
      }
      row.window_end = std::max(row.window_begin, owns ? end : st.end);
      prev_end[d] = row.window_end;
      categorize(log, st.thread, t, &row);
      rows.push_back(row);
    }
  }
  return rows;
}

}  // namespace sim_fuzz
