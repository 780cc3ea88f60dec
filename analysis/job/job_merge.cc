#include "analysis/job/job_merge.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

namespace gpuacct {
namespace {

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
constexpr const char* kUnmatchedReasons[] = {kUnmatchedNoPeer, kUnmatchedImplausible,
                                             "no_other_rank"};

std::string format_text(const char* f, ...) __attribute__((format(printf, 1, 2)));
std::string format_text(const char* f, ...) {
  char buf[512];
  va_list args;
  va_start(args, f);
  std::vsnprintf(buf, sizeof buf, f, args);
  va_end(args);
  return buf;
}

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

class Merge {
 public:
  Merge(const JobInputs& in, const JobOptions& opts, JobExport* exporter)
      : in_(in), opts_(opts), export_(exporter), n_(in.ranks.size()) {}

  JobView run() {
    set_up();
    if (any_collectives_) check_matching();
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
  void align_clocks();
  void check_matching();
  void check_pass();
  void finish_matching_notes();
  void note_unmatched(std::map<int64_t, WindowStep>& steps);
  bool matched(const CollectiveRecord& r) const {
    return matchable_across_ranks(r) && unreliable_.count(r.comm_hash) == 0;
  }
  void blame_pass();
  std::vector<std::unique_ptr<RankStream>> open_streams(bool steps);
  void collect_notes(const std::vector<std::unique_ptr<RankStream>>& streams);
  template <typename OnWindow>
  void for_each_window(std::vector<std::unique_ptr<RankStream>>& streams, bool steps,
                       OnWindow on_window);
  template <typename OnInstance>
  void for_each_instance(OnInstance on_instance);
  void blame_instances(std::map<int64_t, WindowStep>& steps);
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
  bool blaming_ = false;  // in the blame pass (the one that counts)
  std::set<uint64_t> unreliable_;          // communicators whose matching failed the check
  std::map<uint64_t, CommCheck> checks_;   // the last check pass, by communicator
  std::map<uint64_t, CommCheck> failed_;   // the unreliable ones, as the pass that found them
  std::map<std::tuple<size_t, int, int>, UnmatchedCollectiveRow> unmatched_;
  int64_t no_peer_records_ = 0;
  std::vector<int> host_of_;
  std::vector<int64_t> offset_of_;
  // The current window, by slot.
  std::vector<std::vector<StepRow>> rows_;
  std::vector<std::vector<CollectiveRecord>> records_;
  std::vector<Entry> entries_;
};

void Merge::set_up() {
  view_.job_id = in_.job_id;
  view_.world_size = in_.world_size;
  view_.problems = in_.problems;
  std::map<std::string, int> host_index;
  host_of_.assign(n_, -1);
  offset_of_.assign(n_, 0);
  rows_.resize(n_);
  records_.resize(n_);
  for (size_t s = 0; s < n_; ++s) {
    const JobRank& r = in_.ranks[s];
    // A rank with no host name is a clock of its own.
    const std::string host =
        r.hostname.empty() ? "(rank " + std::to_string(r.rank) + ": host unknown)" : r.hostname;
    auto [it, fresh] = host_index.emplace(host, static_cast<int>(view_.hosts.size()));
    if (fresh) view_.hosts.push_back(JobHost{host, {}, 0, false});
    view_.hosts[static_cast<size_t>(it->second)].ranks.push_back(r.rank);
    host_of_[s] = it->second;
    JobRankResult res;
    res.rank = r.rank;
    res.label = r.label;
    res.host = host;
    res.host_index = it->second;
    res.verdict_bound = r.verdict_bound;
    res.step_source = r.step_source;
    view_.ranks.push_back(std::move(res));
    if (r.has_collectives) {
      any_collectives_ = true;
      ++collective_ranks_;
    }
  }
  view_.types.resize(16);
  for (size_t t = 0; t < view_.types.size(); ++t) {
    view_.types[t].type = static_cast<CollectiveType>(t);
  }
  if (any_collectives_ && collective_ranks_ < static_cast<int>(n_)) {
    for (const JobRank& r : in_.ranks) {
      if (!r.has_collectives) {
        view_.problems.push_back("rank " + std::to_string(r.rank) + " (" + r.label +
                                 ") has no collective rows: it takes no part in the blame");
      }
    }
  }
}

std::vector<std::unique_ptr<RankStream>> Merge::open_streams(bool steps) {
  std::vector<std::unique_ptr<RankStream>> out(n_);
  for (size_t s = 0; s < n_; ++s) {
    if (!in_.ranks[s].open) continue;
    auto opened = in_.ranks[s].open(steps);
    if (opened.ok()) {
      out[s] = std::move(opened.value());
    } else if (steps) {  // said once, in the pass that reads everything
      view_.problems.push_back(opened.status().message());
    }
  }
  return out;
}

void Merge::collect_notes(const std::vector<std::unique_ptr<RankStream>>& streams) {
  for (const auto& s : streams) {
    if (s == nullptr) continue;
    for (std::string& note : s->notes()) view_.problems.push_back(std::move(note));
  }
}

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

void Merge::align_clocks() {
  int reference = 0;
  for (size_t s = 0; s < n_; ++s) {
    if (in_.ranks[s].rank == 0) reference = host_of_[s];
  }
  ClockAligner aligner(static_cast<int>(view_.hosts.size()), reference, opts_.max_align_instances);
  auto streams = open_streams(/*steps=*/false);
  std::vector<HostEnd> ends;
  for_each_window(streams, /*steps=*/false, [&] {
    for_each_instance([&](auto begin, auto end) {
      ends.clear();
      for (auto e = begin; e != end; ++e) {
        const CollectiveRecord& r = records_[static_cast<size_t>(e->slot)][e->index];
        ends.push_back(HostEnd{host_of_[static_cast<size_t>(e->slot)], r.gpu_end});
      }
      aligner.add_instance(ends);
    });
  });
  view_.alignment = aligner.solve();
  for (size_t h = 0; h < view_.hosts.size(); ++h) {
    view_.hosts[h].offset_ns = view_.alignment.host_offset_ns[h];
    view_.hosts[h].aligned = view_.alignment.host_aligned[h];
  }
  for (size_t s = 0; s < n_; ++s) {
    offset_of_[s] = view_.hosts[static_cast<size_t>(host_of_[s])].offset_ns;
    view_.ranks[s].clock_offset_ns = offset_of_[s];
  }
}

// Aligns the clocks (several hosts) and checks every matched instance's ends on the job clock;
// a communicator found unreliable is left out and the clocks aligned again without it.
void Merge::check_matching() {
  for (int round = 0; round < 3; ++round) {
    if (view_.hosts.size() > 1) align_clocks();
    const size_t before = unreliable_.size();
    check_pass();
    if (unreliable_.size() == before) return;
  }
  if (view_.hosts.size() > 1) align_clocks();
}

void Merge::check_pass() {
  checks_.clear();
  std::vector<RankArrival> arrivals;
  auto streams = open_streams(/*steps=*/false);
  for_each_window(streams, /*steps=*/false, [&] {
    align_window();
    for_each_instance([&](auto begin, auto end) {
      arrivals.clear();
      TimeNs first_end = 0;
      for (auto e = begin; e != end; ++e) {
        const CollectiveRecord& r = records_[static_cast<size_t>(e->slot)][e->index];
        if (r.gpu_start == 0 || r.gpu_end == 0) continue;
        first_end = arrivals.empty() ? r.gpu_end : std::min(first_end, r.gpu_end);
        arrivals.push_back(RankArrival{e->slot, r.gpu_start, r.gpu_end});
      }
      if (arrivals.size() < 2) return;
      const CollectiveRecord& first = records_[static_cast<size_t>(begin->slot)][begin->index];
      CommCheck& c = checks_[first.comm_hash];
      if (c.instances == 0) {
        c.type = first.type;
        c.source = first.source;
      }
      ++c.instances;
      const InstanceBlame b = blame_instance(arrivals);
      c.spread.add(static_cast<double>(b.end_spread_ns));
      if (!instance_plausible(b, first_end)) ++c.implausible;
    });
  });
  trusted_instances_ = false;
  for (const auto& [comm, c] : checks_) {
    // Most instances failing is the matching (or the clocks), not a few slow ranks: the
    // estimator's medians tolerate a minority of outliers, so a minority is left to them.
    if (c.implausible * 2 > c.instances) {
      unreliable_.insert(comm);
      failed_.emplace(comm, c);
    } else {
      trusted_instances_ = true;
    }
  }
}

void Merge::finish_matching_notes() {
  std::set<uint64_t> checked(unreliable_);
  for (const auto& [comm, c] : checks_) checked.insert(comm);
  view_.communicators_checked = static_cast<int64_t>(checked.size());
  view_.communicators_unreliable = static_cast<int64_t>(unreliable_.size());
  for (auto& [key, row] : unmatched_) view_.unmatched.push_back(row);
  if (no_peer_records_ > 0) {
    view_.matching_notes.push_back(format_text(
        "%lld point-to-point records without their peer were not matched across ranks "
        "(the record does not say which rank is on the other end, so the i-th send/recv of two "
        "ranks need not be one transfer): listed per rank as unmatched, not split into waiting and transfer",
        static_cast<long long>(no_peer_records_)));
  }
  for (const auto& [comm, c] : failed_) {
    view_.matching_notes.push_back(format_text(
        "communicator %s (%s, %s identity): %lld of %lld matched instances are not one operation "
        "(an end before the last arrival, or ends further apart than the tolerance; median "
        "spread of aligned ends %.1f us): matching unreliable, not used for clocks or blame",
        hex(comm).c_str(), to_string(c.type), to_string(c.source),
        static_cast<long long>(c.implausible), static_cast<long long>(c.instances),
        c.spread.percentile(50) / 1e3));
  }
  if (any_collectives_ && !by_instances_) {
    view_.matching_notes.push_back(
        "no matched collective could be trusted: waiting and transfer are from step rows "
        "(transfer floor: the least exposed communication across ranks per step)");
  } else if (view_.floor_steps > 0) {
    view_.matching_notes.push_back(format_text(
        "%lld steps whose collectives could not be matched are blamed by the transfer floor",
        static_cast<long long>(view_.floor_steps)));
  }
}

// Records that are not matched this pass: kept in the per-rank table, exported without blame,
// and their steps marked for the floor.
void Merge::note_unmatched(std::map<int64_t, WindowStep>& steps) {
  for (size_t s = 0; s < n_; ++s) {
    for (const CollectiveRecord& r : records_[s]) {
      if (by_instances_ && matched(r)) continue;
      const int reason = !matchable_across_ranks(r)           ? kReasonNoPeer
                         : unreliable_.count(r.comm_hash) > 0 ? kReasonImplausible
                                                               : kReasonAlone;
      if (reason == kReasonNoPeer) ++no_peer_records_;
      auto [it, fresh] = unmatched_.try_emplace(
          std::make_tuple(s, static_cast<int>(r.type), reason));
      UnmatchedCollectiveRow& row = it->second;
      if (fresh) {
        row.rank = in_.ranks[s].rank;
        row.type = r.type;
        row.reason = kUnmatchedReasons[reason];
      }
      ++row.records;
      if (r.gpu_start != 0 && r.gpu_end > r.gpu_start) {
        row.duration_ns += r.gpu_end - r.gpu_start;
        ++row.timed;
      }
      if (r.bytes > 0) {
        row.bytes += r.bytes;
        ++row.bytes_known;
      }
      const auto step = steps.find(r.step_index);
      if (step != steps.end()) step->second.unmatched = true;
      if (export_ != nullptr) {
        export_->collective(ExportRank{&view_.job_id, &view_.ranks[s].host, view_.ranks[s].rank},
                            r, -1, 0, 0, 0.0);
      }
    }
  }
}

void Merge::align_window() {
  const auto shift = [](TimeNs t, int64_t offset) { return t == 0 ? t : t - offset; };
  for (size_t s = 0; s < n_; ++s) {
    const int64_t o = offset_of_[s];
    if (o == 0) continue;
    for (StepRow& r : rows_[s]) {
      r.host_begin = shift(r.host_begin, o);
      r.host_end = shift(r.host_end, o);
      r.window_begin -= o;
      r.window_end -= o;
    }
    for (CollectiveRecord& r : records_[s]) {
      r.host_enqueue = shift(r.host_enqueue, o);
      r.gpu_start = shift(r.gpu_start, o);
      r.gpu_end = shift(r.gpu_end, o);
    }
  }
}

void Merge::blame_instances(std::map<int64_t, WindowStep>& steps) {
  std::vector<RankArrival> arrivals;
  const auto warm = [&](int64_t step) {
    const auto it = steps.find(step);
    return it != steps.end() && it->second.warmup;
  };
  for_each_instance([&](auto begin, auto end) {
    arrivals.clear();
    const CollectiveRecord& first = records_[static_cast<size_t>(begin->slot)][begin->index];
    for (auto e = begin; e != end; ++e) {
      const CollectiveRecord& r = records_[static_cast<size_t>(e->slot)][e->index];
      if (r.gpu_start == 0 || r.gpu_end == 0) {
        ++view_.records_without_times;
        continue;
      }
      arrivals.push_back(RankArrival{e->slot, r.gpu_start, r.gpu_end});
    }
    // A transfer has two ends whatever the communicator's size.
    const int expected = first.type == CollectiveType::kSendRecv ? 2
                         : first.nranks > 0                     ? first.nranks
                                                                : collective_ranks_;
    const auto members = static_cast<int>(end - begin);
    InstanceBlame b;
    const bool blamed = arrivals.size() >= 2;
    if (blamed) b = blame_instance(arrivals);
    const int last_rank = blamed ? in_.ranks[static_cast<size_t>(b.last_slot)].rank : -1;
    const int nranks = first.nranks > 0 ? first.nranks : members;
    size_t a = 0;
    for (auto e = begin; e != end; ++e) {
      const CollectiveRecord& r = records_[static_cast<size_t>(e->slot)][e->index];
      const bool timed = a < arrivals.size() && arrivals[a].slot == e->slot;
      const int64_t wait = blamed && timed ? wait_ns(b, arrivals[a]) : 0;
      const int64_t transfer = blamed && timed ? transfer_ns(b, arrivals[a]) : 0;
      if (timed) ++a;
      if (export_ != nullptr) {
        const auto s = static_cast<size_t>(e->slot);
        export_->collective(ExportRank{&view_.job_id, &view_.ranks[s].host, view_.ranks[s].rank},
                            r, last_rank, wait, transfer,
                            bus_bandwidth_gbs(r.bytes, transfer, r.type, nranks));
      }
      if (!blamed || !timed) continue;
      if (auto it = steps.find(r.step_index); it != steps.end()) it->second.matched = true;
      if (warm(r.step_index)) continue;
      JobRankResult& res = view_.ranks[static_cast<size_t>(e->slot)];
      ++res.instances;
      ++res.instances_by_type[static_cast<size_t>(r.type) & 15];
      res.waited_ns += wait;
      res.transfer_ns += transfer;
      if (wait > 0 && e->slot != b.last_slot) res.waited_for[last_rank] += wait;
      auto it = steps.find(r.step_index);
      if (it != steps.end()) it->second.waited[static_cast<size_t>(e->slot)] += wait;
    }
    if (!blamed) return;
    const CollectiveRecord& last_record = [&]() -> const CollectiveRecord& {
      for (auto e = begin; e != end; ++e) {
        if (e->slot == b.last_slot) return records_[static_cast<size_t>(e->slot)][e->index];
      }
      return first;
    }();
    if (warm(last_record.step_index)) return;
    ++view_.instances;
    const bool incomplete = members < expected;
    if (incomplete) ++view_.incomplete_instances;
    view_.clock_suspect_records += b.ends_before_last_arrival;
    view_.residual_sample.add(static_cast<double>(b.end_spread_ns));
    JobRankResult& late = view_.ranks[static_cast<size_t>(b.last_slot)];
    ++late.last_count;
    ++late.last_by_type[static_cast<size_t>(first.type) & 15];
    late.late_ns += b.lateness_ns;
    auto it = steps.find(last_record.step_index);
    if (it != steps.end()) it->second.late[static_cast<size_t>(b.last_slot)] += b.lateness_ns;
    CollectiveTypeRow& t = view_.types[static_cast<size_t>(first.type) & 15];
    ++t.instances;
    if (incomplete) ++t.incomplete;
    t.transfer_ns += b.transfer_ns;
    t.lateness_ns += b.lateness_ns;
    for (const RankArrival& r : arrivals) t.wait_ns += wait_ns(b, r);
    t.rank_records += static_cast<int64_t>(arrivals.size());
    const double bw = bus_bandwidth_gbs(first.bytes, b.transfer_ns, first.type, nranks);
    if (bw > 0) {
      t.busbw_gbs_sum += bw;
      ++t.busbw_instances;
    }
  });
}

// Without collective rows (cross-rank floor): per step, the least exposed communication is
// the transfer, each rank's excess waiting, and the rank with the most other work is late by
// the longest wait it caused.
// With `unmatched_steps_only`, only the steps with unmatched records and no trusted instance.
void Merge::blame_by_floor(std::map<int64_t, WindowStep>& steps, bool unmatched_steps_only) {
  for (auto& [index, step] : steps) {
    if (unmatched_steps_only && (step.matched || !step.unmatched)) continue;
    int64_t floor = -1;
    int busiest = -1;
    int64_t most_work = -1;
    for (size_t s = 0; s < n_; ++s) {
      const StepRow* r = step.row[s];
      if (r == nullptr) continue;
      if (floor < 0 || r->cat.comm_exposed < floor) floor = r->cat.comm_exposed;
      const int64_t work = r->duration() - r->cat.comm_exposed;
      if (work > most_work) {
        most_work = work;
        busiest = static_cast<int>(s);
      }
    }
    if (busiest < 0) continue;
    if (!step.warmup) {
      const auto rows = std::count_if(step.row.begin(), step.row.end(),
                                      [](const StepRow* r) { return r != nullptr; });
      if (rows >= 2) ++view_.floor_steps;
    }
    int64_t longest = 0;
    for (size_t s = 0; s < n_; ++s) {
      const StepRow* r = step.row[s];
      if (r == nullptr) continue;
      const int64_t waited = r->cat.comm_exposed - floor;
      step.waited[s] = waited;
      if (static_cast<int>(s) != busiest) longest = std::max(longest, waited);
      if (step.warmup) continue;
      view_.ranks[s].waited_ns += waited;
      view_.ranks[s].transfer_ns += floor;
      if (static_cast<int>(s) != busiest && waited > 0) {
        view_.ranks[s].waited_for[in_.ranks[static_cast<size_t>(busiest)].rank] += waited;
      }
    }
    step.late[static_cast<size_t>(busiest)] = longest;
    if (!step.warmup) view_.ranks[static_cast<size_t>(busiest)].late_ns += longest;
  }
}

void Merge::finish_steps(std::map<int64_t, WindowStep>& steps) {
  std::vector<RankStep> ranks;
  for (auto& [index, step] : steps) {
    ranks.clear();
    for (size_t s = 0; s < n_; ++s) {
      if (step.row[s] != nullptr) {
        ranks.push_back(RankStep{static_cast<int>(s), step.row[s], step.late[s], step.waited[s]});
      }
    }
    const StepBlame blame = blame_step(index, ranks);
    if (export_ != nullptr) {
      for (size_t s = 0; s < n_; ++s) {
        for (const StepRow& r : rows_[s]) {
          if (r.step_index != index) continue;
          export_->step(ExportRank{&view_.job_id, &view_.ranks[s].host, view_.ranks[s].rank}, r,
                        offset_of_[s], blame.job_step_ns, step.waited[s], step.late[s]);
        }
      }
    }
    if (step.warmup || ranks.size() < 2) continue;
    ++view_.steps;
    view_.job_step_ns += blame.job_step_ns;
    view_.what_if_step_ns += blame.what_if_step_ns;
    view_.job_step_sample.add(static_cast<double>(blame.job_step_ns));
    for (const RankStep& r : ranks) {
      JobRankResult& res = view_.ranks[static_cast<size_t>(r.slot)];
      ++res.steps;
      res.step_ns += r.row->duration();
      const WallBreakdown w = r.row->walls();
      for (const WallInfo& info : kWalls) res.walls[info.wall] += w[info.wall];
    }
    if (blame.late_slot < 0) continue;
    ++view_.blamed_steps;
    JobRankResult& late = view_.ranks[static_cast<size_t>(blame.late_slot)];
    ++late.late_steps;
    for (size_t w = 0; w < blame.attributed.size(); ++w) late.late_attributed[w] += blame.attributed[w];
    late.late_unexplained_ns += blame.unexplained_ns;
    // The top steps by lateness, bounded.
    auto& top = view_.top_steps;
    const auto later = [](const StepBlame& a, const StepBlame& b) { return a.late_ns > b.late_ns; };
    if (top.size() < opts_.top_steps || (!top.empty() && blame.late_ns > top.back().late_ns)) {
      top.insert(std::upper_bound(top.begin(), top.end(), blame, later), blame);
      if (top.size() > opts_.top_steps) top.pop_back();
    }
  }
}

void Merge::blame_pass() {
  blaming_ = true;
  auto streams = open_streams(/*steps=*/true);
  std::map<int64_t, WindowStep> steps;
  for_each_window(streams, /*steps=*/true, [&] {
    align_window();
    steps.clear();
    for (size_t s = 0; s < n_; ++s) {
      for (const StepRow& r : rows_[s]) {
        WindowStep& step = steps[r.step_index];
        if (step.row.empty()) {
          step.row.assign(n_, nullptr);
          step.late.assign(n_, 0);
          step.waited.assign(n_, 0);
        }
        const StepRow*& first = step.row[s];
        if (first == nullptr || r.device < first->device) first = &r;
        // A step CUPTI did not trace (GPUACCT_SAMPLE) has no GPU side to blame: left out of
        // blame, as warm-up is.
        step.warmup = step.warmup || r.warmup || !r.sampled;
      }
    }
    if (any_collectives_) note_unmatched(steps);
    if (by_instances_) {
      blame_instances(steps);
      blame_by_floor(steps, /*unmatched_steps_only=*/true);
    } else {
      blame_by_floor(steps, /*unmatched_steps_only=*/false);
    }
    finish_steps(steps);
  });
  collect_notes(streams);
  view_.residual_p50_ns = view_.residual_sample.percentile(50);
  view_.residual_p99_ns = view_.residual_sample.percentile(99);
  view_.residual_instances = view_.residual_sample.seen();
}

}  // namespace

bool matchable_across_ranks(const CollectiveRecord& record) {
  if (record.type != CollectiveType::kSendRecv) return true;
  switch (record.source) {
    case CollectiveSource::kKineto:  // the pair's comm when the trace names the peer
      return true;
    case CollectiveSource::kNcclPlugin:  // the transfer's comm and count: rank and peer known
      return record.rank >= 0 && record.seq > 0;
    case CollectiveSource::kKernelOrder:
    case CollectiveSource::kNone:
      break;
  }
  return false;
}

int64_t end_tolerance_ns(int64_t median_transfer_ns) {
  return kEndToleranceFloorNs + 2 * std::max<int64_t>(0, median_transfer_ns);
}

bool instance_plausible(const InstanceBlame& blame, TimeNs first_end) {
  const bool causal = blame.last_arrival - first_end <= kEndToleranceFloorNs;
  return causal && blame.end_spread_ns <= end_tolerance_ns(blame.transfer_ns);
}

JobView build_job_view(const JobInputs& inputs, const JobOptions& options, JobExport* exporter) {
  return Merge(inputs, options, exporter).run();
}

}  // namespace gpuacct
