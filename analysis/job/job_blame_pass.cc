// The blame of each window of the job view's merge (job_merge_internal.h): instances matched
// and blamed, slow links, the transfer floor, steps.
#include <algorithm>
#include <map>
#include <vector>

#include "analysis/job/job_merge_internal.h"

namespace gpuacct::job_merge_detail {

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
      auto [it, fresh] =
          unmatched_.try_emplace(std::make_tuple(s, static_cast<int>(r.type), reason));
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
        export_->collective(ExportRank{&view_.job_id, &view_.ranks[s].host, view_.ranks[s].rank}, r,
                            -1, 0, 0, 0.0);
      }
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
                         : first.nranks > 0                      ? first.nranks
                                                                 : collective_ranks_;
    const auto members = static_cast<int>(end - begin);
    InstanceBlame b;
    const bool blamed = arrivals.size() >= 2;
    if (blamed) b = blame_instance(arrivals);
    const int last_rank = blamed ? in_.ranks[static_cast<size_t>(b.last_slot)].rank : -1;
    const int nranks = first.nranks > 0 ? first.nranks : members;
    // The link (link_blame.h): what the transfer should have taken, and what it took beyond.
    const double expected_transfer = blamed ? link_ref_.expected_ns(first, nranks) : 0.0;
    const auto expected_ns = static_cast<int64_t>(expected_transfer);
    const bool slow = expected_ns > 0 &&
                      static_cast<double>(b.transfer_ns) >= kSlowLinkRatio * expected_transfer &&
                      b.transfer_ns - expected_ns >= kSlowLinkFloorNs;
    const int64_t excess = slow ? b.transfer_ns - expected_ns : 0;
    size_t a = 0;
    for (auto e = begin; e != end; ++e) {
      const CollectiveRecord& r = records_[static_cast<size_t>(e->slot)][e->index];
      const bool timed = a < arrivals.size() && arrivals[a].slot == e->slot;
      const int64_t wait = blamed && timed ? wait_ns(b, arrivals[a]) : 0;
      const int64_t transfer = blamed && timed ? transfer_ns(b, arrivals[a]) : 0;
      if (timed) ++a;
      if (export_ != nullptr) {
        const auto s = static_cast<size_t>(e->slot);
        export_->collective(ExportRank{&view_.job_id, &view_.ranks[s].host, view_.ranks[s].rank}, r,
                            last_rank, wait, transfer,
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
      if (it != steps.end()) {
        it->second.waited[static_cast<size_t>(e->slot)] += wait;
        it->second.link[static_cast<size_t>(e->slot)].push_back(
            LinkPiece{r.gpu_start, r.gpu_end, excess});
      }
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
    auto it = steps.find(last_record.step_index);
    // A tie (the last within view_.tie_ns of the second-latest) has no last rank: nobody made
    // the others wait, and clocks cannot tell who came last.
    if (b.lateness_ns > view_.tie_ns) {
      JobRankResult& late = view_.ranks[static_cast<size_t>(b.last_slot)];
      ++late.last_count;
      ++late.last_by_type[static_cast<size_t>(first.type) & 15];
      late.late_ns += b.lateness_ns;
      if (it != steps.end()) it->second.late[static_cast<size_t>(b.last_slot)] += b.lateness_ns;
    }
    if (expected_ns > 0)
      add_link_instance(first, nranks, b.transfer_ns, expected_transfer, slow,
                        it != steps.end() ? &it->second : nullptr);
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

// One summary instance with an expected transfer: the per-type and job sums of the link blame.
void Merge::add_link_instance(const CollectiveRecord& first, int nranks, int64_t transfer_ns,
                              double expected_ns, bool slow, WindowStep* step) {
  CollectiveTypeRow& t = view_.types[static_cast<size_t>(first.type) & 15];
  ++t.expected_instances;
  t.expected_ns += static_cast<int64_t>(expected_ns);
  t.expected_transfer_ns += transfer_ns;
  const double expected_bw = link_ref_.expected_busbw_gbs(first, nranks);
  if (expected_bw > 0) {
    t.expected_busbw_sum += expected_bw;
    ++t.expected_busbw_instances;
  }
  JobLink& link = view_.link;
  ++link.instances;
  if (!slow) return;
  ++t.slow;
  ++link.slow_instances;
  ++link.slow_by_type[static_cast<size_t>(first.type) & 15];
  link.slow_transfer_ns += transfer_ns;
  link.slow_expected_ns += static_cast<int64_t>(expected_ns);
  const double bw = bus_bandwidth_gbs(first.bytes, transfer_ns, first.type, nranks);
  if (bw > 0 && expected_bw > 0) {
    link.slow_busbw_sum += bw;
    link.slow_expected_busbw_sum += expected_bw;
    ++link.slow_busbw_instances;
  }
  if (link.slow_instances == 1) {
    link.algo = first.algo.text;
    link.proto = first.proto.text;
  }
  if (step != nullptr) {
    ++step->slow_instances;
    step->slowest_ratio =
        std::max(step->slowest_ratio, static_cast<double>(transfer_ns) / expected_ns);
  }
}

// The step at the reference bandwidth: each rank's step less what the link cost its exposed
// communication (link_blame.h link_gain_ns), the longest of them.
void Merge::finish_link_step(int64_t index, const WindowStep& step, int64_t job_step_ns) {
  int64_t what_if = 0;
  for (size_t s = 0; s < n_; ++s) {
    const StepRow* r = step.row[s];
    if (r == nullptr) continue;
    const int64_t gain =
        step.slow_instances > 0 ? link_gain_ns(step.link[s], r->walls()[Wall::kCommunication]) : 0;
    what_if = std::max(what_if, r->duration() - gain);
  }
  what_if = std::min(what_if, job_step_ns);
  JobLink& link = view_.link;
  link.what_if_step_ns += what_if;
  if (step.slow_instances == 0 || static_cast<double>(job_step_ns - what_if) <
                                      kLinkStepShare * static_cast<double>(job_step_ns)) {
    return;
  }
  ++link.steps_slow;
  const LinkStep row{index, job_step_ns, what_if, step.slow_instances, step.slowest_ratio};
  auto& worst = link.worst;
  const auto costlier = [](const LinkStep& a, const LinkStep& b) {
    return a.job_step_ns - a.what_if_step_ns > b.job_step_ns - b.what_if_step_ns;
  };
  worst.insert(std::upper_bound(worst.begin(), worst.end(), row, costlier), row);
  if (worst.size() > opts_.top_steps) worst.pop_back();
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
    finish_link_step(index, step, blame.job_step_ns);
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
    for (size_t w = 0; w < blame.attributed.size(); ++w)
      late.late_attributed[w] += blame.attributed[w];
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

}  // namespace gpuacct::job_merge_detail
