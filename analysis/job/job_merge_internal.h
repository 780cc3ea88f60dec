// The job view's merge, inside (analysis/job/job_merge.h says what it does): the Merge of one
// job, its window tables, and the walks over windows and instances that its passes share.
// job_merge.cc holds the set-up, hosts, clocks and matching passes; job_blame_pass.cc the blame
// of each window (instances, links, the floor, steps).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/job/job_merge.h"
#include "analysis/job/link_blame.h"

namespace gpuacct::job_merge_detail {

// One record's place in a window's instance table.
struct Entry {
  uint64_t comm = 0;
  uint64_t seq = 0;
  int slot = 0;
  uint32_t index = 0;  // into the slot's records of the window
};

// Per step of a window: each rank's first-device row and its waits / lateness.
struct WindowStep {
  std::vector<const StepRow*> row;  // by slot
  std::vector<int64_t> late;
  std::vector<int64_t> waited;
  std::vector<std::vector<LinkPiece>> link;  // by slot: its records, with their excess
  int64_t slow_instances = 0;                // instances slow on the link
  double slowest_ratio = 0;
  bool warmup = false;
  bool matched = false;    // a trusted instance was blamed in it
  bool unmatched = false;  // some rank has a record in it that was not matched
};

// One communicator's plausibility check (job_merge.h, *Matching*).
struct CommCheck {
  int64_t instances = 0;    // matched instances with >= 2 timed ranks
  int64_t implausible = 0;  // of those, not one operation (instance_plausible)
  CollectiveType type = CollectiveType::kNone;
  CollectiveSource source = CollectiveSource::kNone;
  SampleReservoir spread{1024};
};

// Why a record was not matched (index into kUnmatchedReasons).
enum UnmatchedReason { kReasonNoPeer = 0, kReasonImplausible = 1, kReasonAlone = 2 };
inline constexpr const char* kUnmatchedReasons[] = {kUnmatchedNoPeer, kUnmatchedImplausible,
                                                    "no_other_rank"};

std::string format_text(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string hex(uint64_t v);

class Merge {
 public:
  Merge(const JobInputs& in, const JobOptions& opts, JobExport* exporter)
      : in_(in), opts_(opts), export_(exporter), n_(in.ranks.size()) {}

  JobView run() {
    set_up();
    if (any_collectives_) check_matching();
    if (unknown_hosts_ > 0) infer_hosts_of_unknown();
    link_ref_.finish();
    // Instances are used only where some can be trusted; else every step is blamed by the floor.
    by_instances_ = any_collectives_ && trusted_instances_;
    if (!by_instances_) view_.method = kMethodStepRowsFloor;
    blame_pass();
    if (by_instances_ && view_.floor_steps > 0) view_.method = kMethodMixed;
    finish_matching_notes();
    view_.top_steps_limit = opts_.top_steps;
    view_.link_peak_gbs = opts_.link_peak_gbs;
    finish_job_summary(&view_);
    return std::move(view_);
  }

 private:
  void set_up();
  void probe_devices();
  void infer_hosts_of_unknown();
  void assign_hosts(const std::vector<std::string>& host_names, const std::vector<bool>& inferred);
  void align_clocks();
  void check_matching();
  void check_pass();
  void finish_matching_notes();
  void note_unmatched(std::map<int64_t, WindowStep>& steps);
  bool matched(const CollectiveRecord& r) const {
    return matchable_across_ranks(r) && unreliable_.count(r.comm_hash) == 0;
  }
  void blame_pass();
  std::vector<std::unique_ptr<RankStream>> open_streams(bool steps, bool quiet = false);
  void collect_notes(const std::vector<std::unique_ptr<RankStream>>& streams);
  template <typename OnWindow>
  void for_each_window(std::vector<std::unique_ptr<RankStream>>& streams, bool steps,
                       OnWindow on_window);
  template <typename OnInstance>
  void for_each_instance(OnInstance on_instance);
  void blame_instances(std::map<int64_t, WindowStep>& steps);
  void add_link_instance(const CollectiveRecord& first, int nranks, int64_t transfer_ns,
                         double expected_ns, bool slow, WindowStep* step);
  void finish_link_step(int64_t index, const WindowStep& step, int64_t job_step_ns);
  void blame_by_floor(std::map<int64_t, WindowStep>& steps, bool unmatched_steps_only);
  void finish_steps(std::map<int64_t, WindowStep>& steps);
  void align_window();

  const JobInputs& in_;
  JobOptions opts_;
  JobExport* export_;
  size_t n_;
  JobView view_;
  bool any_collectives_ = false;
  int collective_ranks_ = 0;
  bool trusted_instances_ = false;  // the check found a trusted instance with >= 2 ranks
  bool by_instances_ = false;
  bool blaming_ = false;                  // in the blame pass (the one that counts)
  std::set<uint64_t> unreliable_;         // communicators whose matching failed the check
  std::map<uint64_t, CommCheck> checks_;  // the last check pass, by communicator
  std::map<uint64_t, CommCheck> failed_;  // the unreliable ones, as the pass that found them
  std::map<std::tuple<size_t, int, int>, UnmatchedCollectiveRow> unmatched_;
  int64_t no_peer_records_ = 0;
  std::vector<int> host_of_;
  std::vector<int64_t> offset_of_;
  int unknown_hosts_ = 0;                     // ranks whose inputs name no host
  std::vector<int> device_of_;                // the device each rank ran on (-1: unknown)
  SampleReservoir cross_clock_spread_{4096};  // the check pass: ends of instances on >1 clock
  LinkReference link_ref_;
  // The current window, by slot.
  std::vector<std::vector<StepRow>> rows_;
  std::vector<std::vector<CollectiveRecord>> records_;
  std::vector<Entry> entries_;
};

template <typename OnWindow>
void Merge::for_each_window(std::vector<std::unique_ptr<RankStream>>& streams, bool steps,
                            OnWindow on_window) {
  const int64_t width = std::max<int64_t>(1, opts_.window_steps);
  while (true) {
    int64_t start = kNoMoreSteps;
    for (const auto& s : streams) {
      if (s != nullptr) start = std::min(start, s->next_step());
    }
    if (start == kNoMoreSteps) break;
    const int64_t end = start + width;
    for (size_t s = 0; s < n_; ++s) {
      rows_[s].clear();
      records_[s].clear();
      if (streams[s] != nullptr) {
        streams[s]->read_until(end, steps ? &rows_[s] : nullptr, &records_[s]);
      }
    }
    on_window();
  }
}

// Groups the window's records by (comm, seq) and calls on_instance(begin, end) for each group
// (entries_ sorted; one record per slot, duplicates counted and left out).
template <typename OnInstance>
void Merge::for_each_instance(OnInstance on_instance) {
  entries_.clear();
  for (size_t s = 0; s < n_; ++s) {
    for (size_t i = 0; i < records_[s].size(); ++i) {
      const CollectiveRecord& r = records_[s][i];
      if (!matched(r)) continue;
      entries_.push_back(Entry{r.comm_hash, r.seq, static_cast<int>(s), static_cast<uint32_t>(i)});
    }
  }
  std::sort(entries_.begin(), entries_.end(), [](const Entry& a, const Entry& b) {
    if (a.comm != b.comm) return a.comm < b.comm;
    if (a.seq != b.seq) return a.seq < b.seq;
    return a.slot < b.slot;
  });
  size_t i = 0;
  while (i < entries_.size()) {
    size_t j = i + 1;
    size_t kept = i + 1;
    while (j < entries_.size() && entries_[j].comm == entries_[i].comm &&
           entries_[j].seq == entries_[i].seq) {
      if (entries_[j].slot == entries_[kept - 1].slot) {
        if (blaming_) ++view_.duplicate_records;  // counted once, not per pass
      } else {
        entries_[kept++] = entries_[j];
      }
      ++j;
    }
    on_instance(entries_.begin() + static_cast<std::ptrdiff_t>(i),
                entries_.begin() + static_cast<std::ptrdiff_t>(kept));
    i = j;
  }
}

}  // namespace gpuacct::job_merge_detail
