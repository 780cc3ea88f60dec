#include "analysis/accounting/collective_steps.h"

#include <algorithm>
#include <utility>

namespace gpuacct {

namespace {

// Heap order: the smallest key on top (then the oldest arrival, so ties are decided the same
// way whatever the order).
template <typename Entry>
bool later(const Entry& a, const Entry& b) {
  return a.key != b.key ? a.key > b.key : a.arrival > b.arrival;
}

template <typename Ranges, typename Range>
void insert_by_begin(Ranges& ranges, const Range& range) {
  if (ranges.empty() || ranges.back().begin <= range.begin) {
    ranges.push_back(range);
    return;
  }
  // A row out of step order (not what the accountant does): kept in place all the same.
  const auto at = std::upper_bound(ranges.begin(), ranges.end(), range.begin,
                                   [](TimeNs t, const Range& r) { return t < r.begin; });
  ranges.insert(at, range);
}

// The step of the range holding `t`, or -1.  Ranges are sorted by begin and do not overlap;
// an empty range (a window whose step's work all finished earlier) holds nothing.
template <typename Ranges>
int64_t step_holding(const Ranges& ranges, TimeNs t) {
  auto at = std::upper_bound(ranges.begin(), ranges.end(), t,
                             [](TimeNs time, const auto& r) { return time < r.begin; });
  if (at == ranges.begin()) return -1;
  --at;
  return t < at->end ? at->step : -1;
}

}  // namespace

CollectiveStepAssigner::CollectiveStepAssigner(Sink sink, CollectiveStepAssignerOptions options)
    : sink_(std::move(sink)), options_(options) {
  options_.held_record_limit = std::max<size_t>(options_.held_record_limit, 1);
  options_.kept_step_limit = std::max<size_t>(options_.kept_step_limit, 1);
}

void CollectiveStepAssigner::add(const CollectiveRecord& record) {
  ++counts_.records;
  CollectiveRecord copy = record;
  const Decision decision = decide(copy, finished_);
  if (decision != Decision::kEmitted) hold(copy, decision);
}

void CollectiveStepAssigner::add_row(const StepRow& row) {
  if (host_ranges_.empty() || host_ranges_.back().step != row.step_index)
    insert_by_begin(host_ranges_, Range{row.host_begin, row.host_end, row.step_index});
  host_frontier_ = any_host_ ? std::max(host_frontier_, row.host_end) : row.host_end;
  any_host_ = true;
  Device* device = nullptr;
  if (row.device != kHostOnlyDevice) {
    device = &devices_[row.device];
    insert_by_begin(device->windows, Range{row.window_begin, row.window_end, row.step_index});
    device->frontier = device->any ? std::max(device->frontier, row.window_end) : row.window_end;
    device->any = true;
  }
  forget_old_steps();
  drain(host_waiting_, host_frontier_);
  if (device != nullptr) drain(device->waiting, device->frontier);
}

void CollectiveStepAssigner::finish() {
  finished_ = true;
  std::deque<Waiting> held;
  held.swap(by_arrival_);
  for (const Waiting& entry : held) {
    if (!is_live(entry)) continue;
    CollectiveRecord record = slots_[entry.slot].record;
    release(entry.slot);
    decide(record, /*final=*/true);
  }
  host_waiting_.clear();
  for (auto& [id, device] : devices_) device.waiting.clear();
  stale_waiting_ = 0;
}

// Rules 1-3 of the header.  `final`: no more rows will come, decide with those known.
CollectiveStepAssigner::Decision CollectiveStepAssigner::decide(CollectiveRecord& record,
                                                                bool final) {
  if (record.host_enqueue != 0) {
    const TimeNs t = record.host_enqueue;
    if (forgot_ && t < forgotten_host_end_) {
      ++counts_.too_late;
      emit(record, -1);
      return Decision::kEmitted;
    }
    if (!final && !(any_host_ && t < host_frontier_)) return Decision::kWaitHost;
    const int64_t step = step_holding(host_ranges_, t);
    if (step >= 0) {
      emit(record, step);
      return Decision::kEmitted;
    }
  }
  if (record.gpu_start == 0) {
    emit(record, -1);
    return Decision::kEmitted;
  }
  const TimeNs t = record.gpu_start;
  const auto it = devices_.find(record.device);
  const Device* device = it == devices_.end() ? nullptr : &it->second;
  if (device != nullptr && device->forgot && t < device->forgotten_end) {
    ++counts_.too_late;
    emit(record, -1);
    return Decision::kEmitted;
  }
  if (!final && !(device != nullptr && device->any && t < device->frontier))
    return Decision::kWaitDevice;
  emit(record, device != nullptr ? step_holding(device->windows, t) : -1);
  return Decision::kEmitted;
}

void CollectiveStepAssigner::hold(const CollectiveRecord& record, Decision wait) {
  uint32_t slot = 0;
  if (free_slots_.empty()) {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  const uint64_t arrival = next_arrival_++;
  slots_[slot] = Slot{record, arrival, true};
  by_arrival_.push_back(Waiting{0, arrival, slot});
  push_waiting(wait, Waiting{0, arrival, slot});
  ++held_;
  while (held_ > options_.held_record_limit) evict_oldest();
  counts_.held_peak = std::max(counts_.held_peak, static_cast<int64_t>(held_));
  compact();
}

void CollectiveStepAssigner::push_waiting(Decision wait, const Waiting& entry) {
  const CollectiveRecord& record = slots_[entry.slot].record;
  Waiting keyed = entry;
  std::vector<Waiting>* heap = &host_waiting_;
  if (wait == Decision::kWaitHost) {
    keyed.key = record.host_enqueue;
  } else {
    keyed.key = record.gpu_start;
    heap = &devices_[record.device].waiting;
  }
  heap->push_back(keyed);
  std::push_heap(heap->begin(), heap->end(), later<Waiting>);
}

bool CollectiveStepAssigner::is_live(const Waiting& entry) const {
  const Slot& slot = slots_[entry.slot];
  return slot.live && slot.arrival == entry.arrival;
}

void CollectiveStepAssigner::release(uint32_t slot) {
  slots_[slot].live = false;
  free_slots_.push_back(slot);
  --held_;
}

// Decides every record of `heap` (a min-heap by its key) whose key the frontier has passed:
// emitted, or (in no host range) moved to its device's heap.
void CollectiveStepAssigner::drain(std::vector<Waiting>& heap, TimeNs frontier) {
  while (!heap.empty() && heap.front().key < frontier) {
    std::pop_heap(heap.begin(), heap.end(), later<Waiting>);
    const Waiting entry = heap.back();
    heap.pop_back();
    if (!is_live(entry)) {
      --stale_waiting_;
      continue;
    }
    CollectiveRecord record = slots_[entry.slot].record;
    const Decision decision = decide(record, /*final=*/false);
    if (decision == Decision::kEmitted) {
      release(entry.slot);
    } else {
      push_waiting(decision, entry);
    }
  }
}

void CollectiveStepAssigner::emit(CollectiveRecord& record, int64_t step) {
  record.step_index = step;
  if (step >= 0) {
    ++counts_.assigned;
  } else {
    ++counts_.unassigned;
  }
  if (sink_) sink_(record);
}

void CollectiveStepAssigner::evict_oldest() {
  while (!by_arrival_.empty()) {
    const Waiting entry = by_arrival_.front();
    by_arrival_.pop_front();
    if (!is_live(entry)) continue;
    CollectiveRecord record = slots_[entry.slot].record;
    release(entry.slot);
    ++stale_waiting_;  // its entry in a waiting heap stays until popped or compacted
    ++counts_.over_limit;
    emit(record, -1);
    return;
  }
}

void CollectiveStepAssigner::forget_old_steps() {
  while (host_ranges_.size() > options_.kept_step_limit) {
    const Range oldest = host_ranges_.front();
    host_ranges_.pop_front();
    forgot_ = true;
    forgotten_host_end_ = std::max(forgotten_host_end_, oldest.end);
    for (auto& [id, device] : devices_) {
      while (!device.windows.empty() && device.windows.front().step <= oldest.step) {
        device.forgotten_end = device.forgot
                                   ? std::max(device.forgotten_end, device.windows.front().end)
                                   : device.windows.front().end;
        device.forgot = true;
        device.windows.pop_front();
      }
    }
  }
}

// Index entries of records that left another way are skipped when met; this drops them once
// they outnumber the live ones, so the index stays proportional to what is held.
void CollectiveStepAssigner::compact() {
  const size_t slack = held_ + 1024;
  if (by_arrival_.size() > 2 * slack) {
    std::deque<Waiting> live;
    for (const Waiting& entry : by_arrival_)
      if (is_live(entry)) live.push_back(entry);
    by_arrival_.swap(live);
  }
  if (stale_waiting_ > slack) {
    const auto rebuild = [&](std::vector<Waiting>& heap) {
      heap.erase(std::remove_if(heap.begin(), heap.end(),
                                [&](const Waiting& e) { return !is_live(e); }),
                 heap.end());
      std::make_heap(heap.begin(), heap.end(), later<Waiting>);
    };
    rebuild(host_waiting_);
    for (auto& [id, device] : devices_) rebuild(device.waiting);
    stale_waiting_ = 0;
  }
}

}  // namespace gpuacct
