#include "analysis/accounting/host_state.h"

namespace gpuacct::accounting {
namespace {

bool starts_before(const HostApiCall& c, TimeNs t) {
  return c.start < t;
}

}  // namespace

HostState::CallIter HostState::first_covering(const ThreadHost& th, CallIter it, TimeNs t) {
  CallIter found = it;
  for (int back = 0; back < kNestScan && it != th.calls.begin(); ++back) {
    --it;
    if (it->end > t) found = it;
  }
  return found;
}

HostState::CallIter HostState::nest_of(const ThreadHost& th, TimeNs start, TimeNs end,
                                       TimeNs* nest_start, TimeNs* nest_end) {
  CallIter it = std::lower_bound(th.calls.begin(), th.calls.end(), start, starts_before);
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

TimeNs HostState::submission_time(const CorrEntry& e, const ThreadHost* th) {
  TimeNs t = e.api_start;
  if (th == nullptr) return t;
  auto it = std::lower_bound(th->calls.begin(), th->calls.end(), e.api_start, starts_before);
  for (int n = 0; n < kNestScan && it != th->calls.end() && in_nest(*it, e.api_start, e.api_end);
       ++n, ++it) {
    if (it->end <= e.api_end &&
        (it->kind == HostApiKind::kLaunch || it->kind == HostApiKind::kCopy))
      t = std::max(t, it->start);
  }
  return t;
}

const CorrEntry* HostState::nest_op(uint32_t thread, TimeNs start, TimeNs end) {
  ThreadHost* th = sorted_thread(thread);
  if (th == nullptr) return nullptr;
  TimeNs ns = 0, ne = 0;
  CallIter it = nest_of(*th, start, end, &ns, &ne);
  for (int n = 0; n < 2 * kNestScan && it != th->calls.end() && in_nest(*it, ns, ne); ++n, ++it) {
    if (it->correlation_id == 0) continue;
    const CorrEntry* e = corr.find(it->correlation_id);
    if (e != nullptr && e->has_op) return e;
  }
  return nullptr;
}

uint32_t HostState::count_thread_launches(ThreadHost& th, TimeNs begin, TimeNs end,
                                          uint32_t* missing) {
  th.sort_all();
  auto it = std::lower_bound(th.calls.cbegin(), th.calls.cend(), begin, starts_before);
  // The nest running at `begin`, if any.
  TimeNs nest_start = kMinTime;
  TimeNs nest_end = kMinTime;
  for (CallIter c = first_covering(th, it, begin); c != it; ++c) {
    if (c->end > begin) {
      nest_start = nest_start == kMinTime ? c->start : nest_start;
      nest_end = std::max(nest_end, c->end);
    }
  }
  uint32_t launches = 0;
  bool counting = false;  // the current nest began inside [begin, end)
  bool has_launch = false, wants_op = false, has_op = false;
  auto close_nest = [&] {
    if (!counting) return;
    if (has_launch) ++launches;
    if (wants_op && !has_op) ++*missing;
  };
  for (; it != th.calls.cend() && it->start < end; ++it) {
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
  return launches;
}

uint32_t HostState::count_launches(TimeNs begin, TimeNs end, uint32_t* unmatched) {
  uint32_t launches = 0;
  uint32_t missing = 0;
  for (auto& [tid, th] : threads) launches += count_thread_launches(th, begin, end, &missing);
  if (unmatched) *unmatched = missing;
  return launches;
}

void HostState::prune_threads_before(TimeNs cutoff) {
  // Both lists are sorted by start: drop the prefix that ended before the cutoff.
  for (auto it = threads.begin(); it != threads.end();) {
    it->second.prune_before(cutoff);
    if (it->second.empty()) {
      if (last_thread_ == &it->second) last_thread_ = nullptr;
      it = threads.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace gpuacct::accounting
