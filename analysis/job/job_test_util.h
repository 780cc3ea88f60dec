// A small generator of planted jobs for the job view's tests (not the library's simulator):
// ranks on hosts whose clocks are off by known offsets, steps of data + work + collectives,
// arrival and end jitter, and the faults a test plants -- a straggler (extra data wait at the
// start of every step), a slow link (one rank's transfers slower), instances some rank lacks,
// outlier ends.  Times are built on a true clock, then each rank's are moved to its host's.
//
// Per step s and collective k: the issue time I_k is (k = 0) the step start + data + work, else
// the previous instance's median end + work; each rank arrives at I_k + its arrival jitter (+ the
// straggler's extra data for k = 0); the instance starts when the last arrives; each rank ends
// at start + transfer (x the slow-link factor) + its end jitter.  A rank's step window runs from
// the step start to its last end + a host tail; its walls: data, communication (sum of end -
// arrival), other (the tail), compute (the rest).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "analysis/job/rank_inputs.h"

namespace gpuacct::testing {

struct PlantedJob {
  int ranks = 8;
  std::vector<int> host_of_rank;       // empty: rank % hosts
  int hosts = 2;
  std::vector<int64_t> host_offset_ns;  // added to the true clock; empty: all 0
  int steps = 40;
  int collectives_per_step = 3;
  int64_t data_ns = 1'000'000;
  int64_t work_ns = 6'000'000;
  int64_t transfer_ns = 2'000'000;
  int64_t tail_ns = 500'000;
  uint64_t bytes = 64ull << 20;
  int64_t arrival_jitter_ns = 40'000;  // uniform +-
  int64_t end_jitter_ns = 10'000;      // uniform +-
  int straggler = -1;
  int64_t straggler_extra_data_ns = 15'000'000;
  int slow_link = -1;
  double slow_link_factor = 2.0;
  double missing_share = 0;  // of records dropped (one rank's record of an instance)
  double outlier_share = 0;  // of instances where one rank's end is late by outlier_ns
  int64_t outlier_ns = 3'000'000;
  bool with_collectives = true;
  std::string job_id = "job-7";
  uint64_t seed = 1;
  std::vector<int> input_order;  // order of the ranks in JobInputs (empty: 0..n-1)
};

struct PlantedRank {
  std::vector<StepRow> rows;
  std::vector<CollectiveRecord> records;
  std::string hostname;
};

inline std::vector<PlantedRank> plant(const PlantedJob& job) {
  std::mt19937_64 rng(job.seed);
  const auto uniform = [&](int64_t half) {
    if (half <= 0) return int64_t{0};
    return std::uniform_int_distribution<int64_t>(-half, half)(rng);
  };
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto n = static_cast<size_t>(job.ranks);
  std::vector<PlantedRank> out(n);
  std::vector<int> host(n);
  for (size_t r = 0; r < n; ++r) {
    host[r] = job.host_of_rank.empty() ? static_cast<int>(r) % job.hosts : job.host_of_rank[r];
    out[r].hostname = "node" + std::to_string(host[r]);
  }
  const auto offset = [&](size_t r) {
    return job.host_offset_ns.empty() ? int64_t{0}
                                      : job.host_offset_ns[static_cast<size_t>(host[r])];
  };
  int64_t step_start = 1'000'000'000;
  uint64_t seq = 0;
  for (int s = 0; s < job.steps; ++s) {
    std::vector<int64_t> data(n, job.data_ns), comm(n, 0), last_end(n, 0);
    if (job.straggler >= 0) data[static_cast<size_t>(job.straggler)] += job.straggler_extra_data_ns;
    int64_t issue = step_start + job.data_ns + job.work_ns;
    for (int k = 0; k < job.collectives_per_step; ++k) {
      std::vector<int64_t> arrival(n), end(n);
      int64_t start = 0;
      for (size_t r = 0; r < n; ++r) {
        arrival[r] = issue + uniform(job.arrival_jitter_ns) + (k == 0 ? data[r] - job.data_ns : 0);
        start = std::max(start, arrival[r]);
      }
      const bool outlier = unit(rng) < job.outlier_share;
      const auto outlier_rank = static_cast<size_t>(rng() % n);
      const bool missing = unit(rng) < job.missing_share;
      const auto missing_rank = static_cast<size_t>(rng() % n);
      for (size_t r = 0; r < n; ++r) {
        const double factor = static_cast<int>(r) == job.slow_link ? job.slow_link_factor : 1.0;
        end[r] = start + static_cast<int64_t>(static_cast<double>(job.transfer_ns) * factor) +
                 uniform(job.end_jitter_ns) + (outlier && r == outlier_rank ? job.outlier_ns : 0);
        comm[r] += end[r] - arrival[r];
        last_end[r] = std::max(last_end[r], end[r]);
        if (!job.with_collectives || (missing && r == missing_rank)) continue;
        CollectiveRecord rec;
        rec.comm_hash = 0x9f2c0a11d2e4b7aaULL;
        rec.seq = seq;
        rec.bytes = job.bytes;
        rec.gpu_start = arrival[r] + offset(r);
        rec.gpu_end = end[r] + offset(r);
        rec.host_enqueue = rec.gpu_start - 10'000;
        rec.step_index = s;
        rec.rank = static_cast<int32_t>(r);
        rec.nranks = job.ranks;
        rec.type = CollectiveType::kAllReduce;
        rec.source = CollectiveSource::kNcclPlugin;
        out[r].records.push_back(rec);
      }
      ++seq;
      std::vector<int64_t> sorted = end;
      std::sort(sorted.begin(), sorted.end());
      issue = sorted[(n - 1) / 2] + job.work_ns;
    }
    int64_t next_start = 0;
    for (size_t r = 0; r < n; ++r) {
      StepRow row;
      row.step_index = s;
      row.step_number = s;
      row.window_begin = step_start + offset(r);
      row.window_end = last_end[r] + job.tail_ns + offset(r);
      row.host_begin = row.window_begin;
      row.host_end = row.window_end;
      row.cat.data_wait = data[r];
      row.cat.comm_exposed = comm[r];
      row.cat.host_other = job.tail_ns;
      row.cat.compute = row.duration() - data[r] - comm[r] - job.tail_ns;
      row.comm_total = comm[r];
      row.kernels = 10;
      out[r].rows.push_back(row);
      next_start = std::max(next_start, last_end[r] + job.tail_ns);
    }
    step_start = next_start + 100'000;
  }
  return out;
}

// The planted job as loaded ranks (rows in memory), in job.input_order.
inline JobInputs planted_inputs(const PlantedJob& job) {
  std::vector<PlantedRank> planted = plant(job);
  std::vector<int> order = job.input_order;
  if (order.empty()) {
    for (int r = 0; r < job.ranks; ++r) order.push_back(r);
  }
  std::vector<JobRank> ranks;
  for (int r : order) {
    PlantedRank& p = planted[static_cast<size_t>(r)];
    JobRank rank;
    rank.rank = r;
    rank.world_size = job.ranks;
    rank.hostname = p.hostname;
    rank.job_id = job.job_id;
    rank.label = "rank" + std::to_string(r);
    rank.step_source = "planted";
    rank.has_collectives = job.with_collectives;
    auto rows = std::make_shared<const std::vector<StepRow>>(std::move(p.rows));
    auto records = std::make_shared<const std::vector<CollectiveRecord>>(std::move(p.records));
    const bool with = job.with_collectives;
    rank.open = [rows, records, with](bool steps) -> StatusOr<std::unique_ptr<RankStream>> {
      return make_rank_stream(steps ? pull_rows(rows) : nullptr,
                              with ? pull_collectives(records) : nullptr);
    };
    ranks.push_back(std::move(rank));
  }
  JobInputs in;
  check_job_ranks(std::move(ranks), &in);
  return in;
}

}  // namespace gpuacct::testing
