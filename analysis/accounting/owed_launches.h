// The launch calls whose GPU op had not arrived when the call did -- *owed* launches -- and the
// delivery progress that decides how long they are waited for (docs/accounting.md,
// "Finalisation").  Internal to the step accountant.
//
// The launch frontier is the latest launch-call start among launches whose op has arrived.  GPU
// records that come late hold it back with them, so "ops launched T after this call have
// arrived" measures delivery, not the clock: the accountant gives an owed launch up only once
// both the watermark and the frontier are the pending-launch timeout past it.  A graph launch
// (one op per kernel node, their number unknown) stays owed after its first op until then too.
//
// CUPTI may hand a completed record out a few flushes after records that completed with it or
// later (AccountingConfig::kLateFlushes), so one batch moving the frontier past a launch does
// not yet say its op is lost: the frontier that gives launches up is the one seen that many
// watermarks earlier (a live source advances the watermark once per flush), by which time a
// record held back with it has come.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <limits>
#include <vector>

#include "analysis/accounting/accounting_config.h"
#include "analysis/model/events.h"

namespace gpuacct::accounting {

class OwedLaunches {
 public:
  struct Launch {
    TimeNs start;
    TimeNs end;
    uint64_t corr;
    uint32_t thread;
  };
  static constexpr TimeNs kNoneOwed = std::numeric_limits<TimeNs>::max();

  void add(const Launch& l) {
    q_.push_back(l);
    newest_ = std::max(newest_, l.start);
  }
  // An op arrived for a launch call that began at `launch_start`.
  void delivered(TimeNs launch_start) {
    frontier_ = std::max(frontier_, launch_start);
    newest_ = std::max(newest_, launch_start);
  }
  TimeNs frontier() const { return frontier_; }
  // At every watermark advance: remembers the frontier for settled_frontier().  O(1).
  void on_watermark() {
    seen_.push_back(frontier_);
    if (seen_.size() > kLate + 1) seen_.pop_front();
  }
  // The frontier as it was kLateFlushes watermarks ago (the minimum before that many): the
  // delivery progress that may give an owed launch up now.
  TimeNs settled_frontier() const {
    return seen_.size() > kLate ? seen_.front() : std::numeric_limits<TimeNs>::min();
  }
  // The latest start of any launch call seen, its op come or owed: when the watermark runs far
  // past it, the job has stopped launching (a phase without GPU work) and nothing newer can
  // move the frontier.
  TimeNs newest() const { return newest_; }

  // Drops launches from the front, earliest start first, while `settled(launch)` says so (its
  // op came, it was given up on or cut off), and returns the earliest start still owed
  // (kNoneOwed when none is).
  template <typename Settled>
  TimeNs earliest_owed(Settled&& settled) {
    sort_new();
    while (head_ < q_.size() && settled(q_[head_])) ++head_;
    // Forget the settled prefix once it is large (amortised O(1) per launch).
    if (head_ > 4096 && head_ * 2 > q_.size()) {
      q_.erase(q_.begin(), q_.begin() + static_cast<ptrdiff_t>(head_));
      sorted_ -= head_;
      head_ = 0;
    }
    return head_ == q_.size() ? kNoneOwed : q_[head_].start;
  }

 private:
  // Calls arrive nearly in order: sort only the new tail and merge it into the sorted part.
  void sort_new() {
    if (sorted_ == q_.size()) return;
    auto by_start = [](const Launch& a, const Launch& b) { return a.start < b.start; };
    const auto mid = q_.begin() + static_cast<ptrdiff_t>(sorted_);
    if (!std::is_sorted(mid, q_.end(), by_start)) std::sort(mid, q_.end(), by_start);
    const auto head = q_.begin() + static_cast<ptrdiff_t>(head_);
    if (head < mid && by_start(*mid, *std::prev(mid)))
      std::inplace_merge(head, mid, q_.end(), by_start);
    sorted_ = q_.size();
  }

  std::vector<Launch> q_;  // sorted by start in [head_, sorted_); before head_: settled
  size_t head_ = 0;
  size_t sorted_ = 0;
  static constexpr size_t kLate = static_cast<size_t>(AccountingConfig::kLateFlushes);
  TimeNs frontier_ = std::numeric_limits<TimeNs>::min();
  std::deque<TimeNs> seen_;  // the frontier at the last kLate + 1 watermark advances
  TimeNs newest_ = std::numeric_limits<TimeNs>::min();
};

}  // namespace gpuacct::accounting
