#include "analysis/job/job_merge.h"

#include <algorithm>
#include <cinttypes>
#include <cstdarg>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "analysis/job/job_hosts.h"
#include "analysis/job/job_merge_internal.h"

namespace gpuacct {
namespace job_merge_detail {

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

void Merge::set_up() {
  view_.job_id = in_.job_id;
  view_.world_size = in_.world_size;
  view_.problems = in_.problems;
  link_ref_ = LinkReference(opts_.link_peak_gbs);
  rows_.resize(n_);
  records_.resize(n_);
  device_of_.assign(n_, -1);
  std::vector<std::string> names(n_);
  std::vector<bool> inferred(n_, false);
  for (size_t s = 0; s < n_; ++s) {
    const JobRank& r = in_.ranks[s];
    JobRankResult res;
    res.rank = r.rank;
    res.label = r.label;
    res.verdict_bound = r.verdict_bound;
    res.step_source = r.step_source;
    view_.ranks.push_back(std::move(res));
    // A rank with no host name is a clock of its own until its host is inferred.
    names[s] =
        r.hostname.empty() ? "(rank " + std::to_string(r.rank) + ": host unknown)" : r.hostname;
    inferred[s] = r.hostname.empty();
    if (r.hostname.empty()) ++unknown_hosts_;
    if (r.has_collectives) {
      any_collectives_ = true;
      ++collective_ranks_;
    }
  }
  assign_hosts(names, inferred);
  if (unknown_hosts_ > 0) probe_devices();
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

// The clocks: one per host name (ranks of one host read one clock), offsets reset.
void Merge::assign_hosts(const std::vector<std::string>& names, const std::vector<bool>& inferred) {
  std::map<std::string, int> host_index;
  view_.hosts.clear();
  host_of_.assign(n_, -1);
  offset_of_.assign(n_, 0);
  for (size_t s = 0; s < n_; ++s) {
    auto [it, fresh] = host_index.emplace(names[s], static_cast<int>(view_.hosts.size()));
    if (fresh) view_.hosts.push_back(JobHost{names[s], {}, 0, false, inferred[s]});
    view_.hosts[static_cast<size_t>(it->second)].ranks.push_back(in_.ranks[s].rank);
    host_of_[s] = it->second;
    view_.ranks[s].host = names[s];
    view_.ranks[s].host_index = it->second;
    view_.ranks[s].clock_offset_ns = 0;
  }
  view_.host_count = static_cast<int>(view_.hosts.size());
}

// The device each rank ran on (its first step row's, else its first collective's): the layout
// that tells hosts apart when no host is named (job_hosts.h).
void Merge::probe_devices() {
  auto streams = open_streams(/*steps=*/true, /*quiet=*/true);
  for (size_t s = 0; s < n_; ++s) {
    if (streams[s] == nullptr || !in_.ranks[s].hostname.empty()) continue;
    for (int tries = 0; tries < 4 && device_of_[s] < 0; ++tries) {
      const int64_t next = streams[s]->next_step();
      if (next == kNoMoreSteps) break;
      rows_[s].clear();
      records_[s].clear();
      streams[s]->read_until(next + 1, &rows_[s], &records_[s]);
      uint16_t device = kHostOnlyDevice;
      for (const StepRow& r : rows_[s]) device = std::min(device, r.device);
      if (device != kHostOnlyDevice) {
        device_of_[s] = device;
      } else if (!records_[s].empty()) {
        device_of_[s] = records_[s].front().device;
      }
    }
    rows_[s].clear();
    records_[s].clear();
  }
}

// Hosts for the ranks that name none (job_hosts.h), from their clocks (each aligned as a clock
// of its own) and their device layout; the clocks are aligned again per inferred host.
void Merge::infer_hosts_of_unknown() {
  std::vector<size_t> slots;
  std::vector<int> ranks, devices;
  std::vector<std::optional<int64_t>> offsets;
  for (size_t s = 0; s < n_; ++s) {
    if (!in_.ranks[s].hostname.empty()) continue;
    const JobHost& own = view_.hosts[static_cast<size_t>(host_of_[s])];
    slots.push_back(s);
    ranks.push_back(in_.ranks[s].rank);
    devices.push_back(device_of_[s]);
    // One clock among ranks that all lack a name, when nothing could align them: no evidence.
    const bool aligned = view_.hosts.size() > 1 && own.aligned;
    offsets.push_back(aligned ? std::optional<int64_t>(own.offset_ns) : std::nullopt);
  }
  const HostInference found = infer_hosts(ranks, offsets, devices, kEndToleranceFloorNs);
  if (found.count == 0) {
    view_.host_count = -1;
    view_.host_basis = "unknown";
    for (const size_t s : slots) view_.ranks[s].host = "unknown";
    return;
  }
  std::vector<std::string> names(n_);
  std::vector<bool> inferred(n_, false);
  for (size_t s = 0; s < n_; ++s) names[s] = in_.ranks[s].hostname;
  for (size_t i = 0; i < slots.size(); ++i) {
    names[slots[i]] = "(inferred host " + std::to_string(found.host_of[i]) + ")";
    inferred[slots[i]] = true;
  }
  assign_hosts(names, inferred);
  view_.host_basis = "inferred from " + found.basis;
  if (any_collectives_) {
    unreliable_.clear();
    failed_.clear();
    check_matching();
  }
}

std::vector<std::unique_ptr<RankStream>> Merge::open_streams(bool steps, bool quiet) {
  std::vector<std::unique_ptr<RankStream>> out(n_);
  for (size_t s = 0; s < n_; ++s) {
    if (!in_.ranks[s].open) continue;
    auto opened = in_.ranks[s].open(steps);
    if (opened.ok()) {
      out[s] = std::move(opened.value());
    } else if (steps && !quiet) {  // said once, in the pass that reads everything
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
  link_ref_.clear();
  cross_clock_spread_ = SampleReservoir(4096);
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
      if (!instance_plausible(b, first_end)) {
        ++c.implausible;
        return;
      }
      // The job's own link reference (link_blame.h), and how far apart the ends of an
      // instance on several clocks are (the ties' tolerance).
      const int nranks = first.nranks > 0 ? first.nranks : static_cast<int>(arrivals.size());
      link_ref_.add(first, nranks, b.transfer_ns);
      for (const RankArrival& a : arrivals) {
        if (host_of_[static_cast<size_t>(a.slot)] != host_of_[static_cast<size_t>(begin->slot)]) {
          cross_clock_spread_.add(static_cast<double>(b.end_spread_ns));
          break;
        }
      }
    });
  });
  view_.tie_ns = std::max<int64_t>(1000, static_cast<int64_t>(cross_clock_spread_.percentile(50)));
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
          step.link.assign(n_, {});
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

}  // namespace job_merge_detail

using job_merge_detail::Merge;

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