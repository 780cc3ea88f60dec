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
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/input/step_stream_reader.h"
#include "analysis/job/rank_inputs.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "analysis/report/report.h"

namespace gpuacct::testing {

struct PlantedJob {
  int ranks = 8;
  std::vector<int> host_of_rank;       // empty: rank % hosts
  int hosts = 2;
  std::vector<int64_t> host_offset_ns;  // added to the true clock; empty: all 0
  int steps = 40;
  int collectives_per_step = 3;
  int collective_every = 1;  // collectives on steps s % collective_every == 0 only
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
  // Every rank's transfers link_slow_factor x longer on steps s % link_slow_every ==
  // link_slow_every - 1 (0: never): a link slow on some steps.
  int link_slow_every = 0;
  double link_slow_factor = 3.0;
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

// Generates a planted job one step at a time (the benchmark writes 1024 ranks x 10,000 steps
// without holding them).
class PlantedJobGenerator {
 public:
  explicit PlantedJobGenerator(const PlantedJob& job)
      : job_(job), rng_(job.seed), n_(static_cast<size_t>(job.ranks)), host_(n_) {
    for (size_t r = 0; r < n_; ++r) {
      host_[r] = job.host_of_rank.empty() ? static_cast<int>(r) % job.hosts : job.host_of_rank[r];
    }
  }
  std::string hostname(size_t rank) const { return "node" + std::to_string(host_[rank]); }

  // The next step's row of every rank (rows[r]) and its records (records[r], cleared first).
  void next_step(std::vector<StepRow>* rows, std::vector<std::vector<CollectiveRecord>>* records) {
    rows->assign(n_, StepRow{});
    records->resize(n_);
    for (auto& r : *records) r.clear();
    const int s = step_++;
    std::vector<int64_t> data(n_, job_.data_ns), comm(n_, 0), last_end(n_, step_start_);
    if (job_.straggler >= 0 && static_cast<size_t>(job_.straggler) < n_) {
      data[static_cast<size_t>(job_.straggler)] += job_.straggler_extra_data_ns;
    }
    int64_t issue = step_start_ + job_.data_ns + job_.work_ns;
    const int collectives = s % std::max(1, job_.collective_every) == 0 ? job_.collectives_per_step : 0;
    std::vector<int64_t> arrival(n_), end(n_), sorted(n_);
    for (int k = 0; k < collectives; ++k) {
      int64_t start = 0;
      for (size_t r = 0; r < n_; ++r) {
        arrival[r] = issue + uniform(job_.arrival_jitter_ns) + (k == 0 ? data[r] - job_.data_ns : 0);
        start = std::max(start, arrival[r]);
      }
      const bool outlier = unit() < job_.outlier_share;
      const auto outlier_rank = static_cast<size_t>(rng_() % n_);
      const bool missing = unit() < job_.missing_share;
      const auto missing_rank = static_cast<size_t>(rng_() % n_);
      const bool slow_step =
          job_.link_slow_every > 0 && s % job_.link_slow_every == job_.link_slow_every - 1;
      for (size_t r = 0; r < n_; ++r) {
        const double factor =
            (static_cast<int>(r) == job_.slow_link ? job_.slow_link_factor : 1.0) *
            (slow_step ? job_.link_slow_factor : 1.0);
        end[r] = start + static_cast<int64_t>(static_cast<double>(job_.transfer_ns) * factor) +
                 uniform(job_.end_jitter_ns) + (outlier && r == outlier_rank ? job_.outlier_ns : 0);
        comm[r] += end[r] - arrival[r];
        last_end[r] = std::max(last_end[r], end[r]);
        if (!job_.with_collectives || (missing && r == missing_rank)) continue;
        CollectiveRecord rec;
        rec.comm_hash = 0x9f2c0a11d2e4b7aaULL;
        rec.seq = seq_;
        rec.bytes = job_.bytes;
        rec.gpu_start = arrival[r] + offset(r);
        rec.gpu_end = end[r] + offset(r);
        rec.host_enqueue = rec.gpu_start - 10'000;
        rec.step_index = s;
        rec.rank = static_cast<int32_t>(r);
        rec.nranks = job_.ranks;
        rec.type = CollectiveType::kAllReduce;
        rec.source = CollectiveSource::kNcclPlugin;
        (*records)[r].push_back(rec);
      }
      ++seq_;
      sorted = end;
      std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>((n_ - 1) / 2),
                       sorted.end());
      issue = sorted[(n_ - 1) / 2] + job_.work_ns;
    }
    if (collectives == 0) {  // a step of work alone
      for (size_t r = 0; r < n_; ++r) {
        last_end[r] = step_start_ + data[r] + job_.work_ns + uniform(job_.arrival_jitter_ns);
      }
    }
    int64_t next_start = 0;
    for (size_t r = 0; r < n_; ++r) {
      StepRow& row = (*rows)[r];
      row.step_index = s;
      row.step_number = s;
      row.window_begin = step_start_ + offset(r);
      row.window_end = last_end[r] + job_.tail_ns + offset(r);
      row.host_begin = row.window_begin;
      row.host_end = row.window_end;
      row.cat.data_wait = data[r];
      row.cat.comm_exposed = comm[r];
      row.cat.host_other = job_.tail_ns;
      row.cat.compute = row.duration() - data[r] - comm[r] - job_.tail_ns;
      row.comm_total = comm[r];
      row.kernels = 10;
      next_start = std::max(next_start, last_end[r] + job_.tail_ns);
    }
    step_start_ = next_start + 100'000;
  }

 private:
  int64_t uniform(int64_t half) {
    if (half <= 0) return 0;
    return std::uniform_int_distribution<int64_t>(-half, half)(rng_);
  }
  double unit() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }
  int64_t offset(size_t r) const {
    return job_.host_offset_ns.empty() ? int64_t{0}
                                       : job_.host_offset_ns[static_cast<size_t>(host_[r])];
  }

  PlantedJob job_;
  std::mt19937_64 rng_;
  size_t n_;
  std::vector<int> host_;
  int step_ = 0;
  uint64_t seq_ = 0;
  int64_t step_start_ = 1'000'000'000;
};

inline std::vector<PlantedRank> plant(const PlantedJob& job) {
  PlantedJobGenerator gen(job);
  const auto n = static_cast<size_t>(job.ranks);
  std::vector<PlantedRank> out(n);
  for (size_t r = 0; r < n; ++r) out[r].hostname = gen.hostname(r);
  std::vector<StepRow> rows;
  std::vector<std::vector<CollectiveRecord>> records;
  for (int s = 0; s < job.steps; ++s) {
    gen.next_step(&rows, &records);
    for (size_t r = 0; r < n; ++r) {
      out[r].rows.push_back(rows[r]);
      out[r].records.insert(out[r].records.end(), records[r].begin(), records[r].end());
    }
  }
  return out;
}

// The planted job as loaded ranks (rows in memory), in job.input_order; `tamper` (optional)
// edits the planted ranks first (a test's fault the generator does not plant).
inline JobInputs planted_inputs(const PlantedJob& job,
                                const std::function<void(std::vector<PlantedRank>&)>& tamper = {}) {
  std::vector<PlantedRank> planted = plant(job);
  if (tamper) tamper(planted);
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

// ---- the planted job as rank files ---------------------------------------------------------

namespace gpuacct::testing {

enum class StepFormat { kStepStream, kReport };

struct WrittenJob {
  std::vector<std::string> paths;  // every file written
  int64_t step_rows = 0;
  int64_t collective_rows = 0;
};

// Writes rank<R>.steps.jsonl (or rank<R>.report.json) and rank<R>.collectives.csv per rank into
// `dir`, a step at a time (the step streams and rows files stream; a report is built per rank
// at the end, so use it for small jobs only).  `ranks_written` (empty: all) leaves ranks out.
inline StatusOr<WrittenJob> write_planted_job(const PlantedJob& job, const std::string& dir,
                                              StepFormat format = StepFormat::kStepStream,
                                              const std::vector<int>& ranks_written = {}) {
  PlantedJobGenerator gen(job);
  const auto n = static_cast<size_t>(job.ranks);
  std::vector<bool> wanted(n, ranks_written.empty());
  for (int r : ranks_written) wanted[static_cast<size_t>(r)] = true;
  WrittenJob out;
  std::vector<std::unique_ptr<OutputFile>> streams(n);
  std::vector<std::unique_ptr<CollectiveRowWriter>> writers(n);
  std::vector<std::vector<StepRow>> held(n);
  for (size_t r = 0; r < n; ++r) {
    if (!wanted[r]) continue;
    const std::string base = dir + "/rank" + std::to_string(r);
    RunMetadata meta;
    meta.source = "injected";
    meta.hostname = gen.hostname(r);
    meta.rank = static_cast<int>(r);
    meta.world_size = job.ranks;
    meta.job_id = job.job_id;
    if (format == StepFormat::kStepStream) {
      streams[r] = std::make_unique<OutputFile>();
      GPUACCT_RETURN_IF_ERROR(streams[r]->open(base + ".steps.jsonl"));
      nlohmann::json header = {{"schema", kStepStreamSchema}, {"source", meta.source},
                               {"hostname", meta.hostname},   {"pid", 100 + r},
                               {"rank", meta.rank},           {"world_size", meta.world_size},
                               {"job_id", meta.job_id}};
      GPUACCT_RETURN_IF_ERROR(streams[r]->write(dump_json(header) + "\n"));
      out.paths.push_back(base + ".steps.jsonl");
    } else {
      out.paths.push_back(base + ".report.json");
    }
    if (job.with_collectives) {
      writers[r] = std::make_unique<CollectiveRowWriter>();
      CollectiveRowsHeader h;
      h.metadata = meta;
      h.identity = CollectiveSource::kNcclPlugin;
      GPUACCT_RETURN_IF_ERROR(writers[r]->open(base + kCollectiveRowsSuffix, h));
      out.paths.push_back(base + kCollectiveRowsSuffix);
    }
  }
  std::vector<StepRow> rows;
  std::vector<std::vector<CollectiveRecord>> records;
  std::string line;
  for (int s = 0; s < job.steps; ++s) {
    gen.next_step(&rows, &records);
    for (size_t r = 0; r < n; ++r) {
      if (!wanted[r]) continue;
      ++out.step_rows;
      if (streams[r] != nullptr) {
        line = dump_json(step_row_to_json(rows[r]));
        line += '\n';
        GPUACCT_RETURN_IF_ERROR(streams[r]->write(line));
      } else {
        held[r].push_back(rows[r]);
      }
      for (const CollectiveRecord& rec : records[r]) writers[r]->append(rec);
      out.collective_rows += static_cast<int64_t>(records[r].size());
    }
  }
  for (size_t r = 0; r < n; ++r) {
    if (!wanted[r]) continue;
    if (writers[r] != nullptr) GPUACCT_RETURN_IF_ERROR(writers[r]->finish());
    if (streams[r] != nullptr) {
      GPUACCT_RETURN_IF_ERROR(streams[r]->write(
          "{\"summary\":{},\"verdict\":{},\"provisional\":false,\"step_rows\":" +
          std::to_string(job.steps) + ",\"stats\":[]}\n"));
      GPUACCT_RETURN_IF_ERROR(streams[r]->commit());
      continue;
    }
    RunMetadata meta;
    meta.source = "injected";
    meta.hostname = gen.hostname(r);
    meta.rank = static_cast<int>(r);
    meta.world_size = job.ranks;
    meta.job_id = job.job_id;
    AccountingConfig cfg;
    cfg.warmup_steps = 0;
    nlohmann::json report = summary_report(held[r], Stats{}, cfg, meta);
    report["schema"] = kReportSchema;
    nlohmann::json steps = nlohmann::json::array();
    for (const StepRow& row : held[r]) steps.push_back(step_row_to_json(row));
    report["steps"] = std::move(steps);
    GPUACCT_RETURN_IF_ERROR(write_file_atomic(dir + "/rank" + std::to_string(r) + ".report.json",
                                              dump_json(report, 2) + "\n"));
  }
  return out;
}

}  // namespace gpuacct::testing
