// Live fleet metrics (GPUACCT_PROM_DIR): the rows finalised so far as a Prometheus textfile,
// for node-exporter's textfile collector (docs/metrics.md).  The text is analysis's
// (analysis/report/prometheus_text.h); this is only where and when it is written.
//
// The file: <GPUACCT_PROM_DIR>/gpuacct_<job>_<host>_rank<N>.prom (pid<N> instead of rank<N>
// when no rank is set; the job "nojob" when no job id is known), each part reduced to
// [A-Za-z0-9._-] (anything else '_') and bounded, so the name is always one valid file name.
// Named by rank, not pid: a restarted rank (torchrun's elastic restarts) replaces its own file
// instead of leaving a stale one beside it, and its counters restart from 0, which PromQL's
// rate() reads as a counter reset.
//
// When: by the pipeline's tick (the worker thread, never the application's threads) once the
// period (GPUACCT_PROM_PERIOD_MS, default 5 s) has passed since the last write -- the first
// tick writes at once, so a job shows up before its first step ends -- and once more at the
// end, with every row (Pipeline::finish).  The file stays after the job (its final totals);
// removing it is the operator's (docs/metrics.md, *Stale files*).
//
// How: written whole to a temporary name beside it ("<name>.prom.tmp.<pid>": it does not end
// in .prom, which is all the collector reads) and renamed over it (write_file_atomic,
// analysis/model/file_io.h, OutputPolicy::kOwnFilesOnly: the directory is shared with other
// jobs and users), so a reader sees the previous file or the next one, never part of one.
//
// Errors: the first failure (no such directory, permission, disk full) is said in one line and
// turns the metrics off for the rest of the run; the other outputs are not affected.  Never
// throws.  Not thread-safe: the worker owns it, like the pipeline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "analysis/accounting/step_row.h"
#include "analysis/model/stats.h"
#include "analysis/report/prometheus_text.h"
#include "inject/config.h"

namespace gpuacct::inject {

// The file's name (no directory) for this process: see above.
std::string prom_file_name(const Config& config);

class PromOutput {
 public:
  using Clock = std::chrono::steady_clock;

  // Off when config.prom_dir is empty.
  explicit PromOutput(const Config& config);

  bool enabled() const { return enabled_; }
  // A row finalised (the pipeline's row sink): counted; nothing written.
  void add_row(const StepRow& row);
  // Writes the file when the period has passed since the last write (the first call writes).
  void maybe_write(const Stats& stats, Clock::time_point now);
  // Writes the file now, whatever the period (the end of the run).
  void write(const Stats& stats);

  // Where the file goes (a fresh name when the one asked for was not safe, file_io.h).
  const std::string& path() const { return path_; }
  int64_t writes() const { return writes_; }
  // The time the last write took (render, write, rename): for docs/metrics.md's cost and
  // bench/.
  std::chrono::nanoseconds last_write_cost() const { return last_write_cost_; }

 private:
  bool enabled_ = false;
  std::chrono::milliseconds period_;
  std::string path_;
  PrometheusIdentity identity_;
  PrometheusMetrics metrics_;
  Clock::time_point next_write_{};
  int64_t writes_ = 0;
  std::chrono::nanoseconds last_write_cost_{0};
};

}  // namespace gpuacct::inject
