// The GPU ops of one device that no finalised window has consumed yet, kept sorted by start.
// Internal to the step accountant (step_accountant_impl.h).
#pragma once

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <vector>

#include "analysis/accounting/host_state.h"
#include "analysis/model/events.h"

namespace gpuacct::accounting {

// PendingOp::launch before the op's launch call is known.
inline constexpr TimeNs kUnresolved = std::numeric_limits<TimeNs>::min();

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
  // Rows on the device begin with the first step that ends after an op was launched on it
  // (docs/accounting.md §1); from then on it has a window in every step.
  bool has_window = false;
  // Detected steps were folded into set-up (setup_tally.h): the next window begins at its
  // step's host begin, or where the folded windows ended if that is later.
  bool restart = false;
  // Before that: the earliest launch among its pending ops, valid for one intake epoch (a new
  // op or launch call can change it).
  TimeNs first_launch = 0;
  uint64_t first_launch_epoch = 0;
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

}  // namespace gpuacct::accounting
