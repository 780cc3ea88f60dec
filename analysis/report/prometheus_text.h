// Live fleet metrics in the Prometheus text exposition format (version 0.0.4, the format
// node-exporter's textfile collector reads): step rows accumulated as they are finalised,
// rendered as text.  Pure: no I/O, no clock.  The injected library writes the text to a file
// (inject/output/prom_output.h); docs/metrics.md is the user's description.
//
// The metrics (each sample labelled job, host, rank and, where it is per device, device --
// never the step number, whose every value would be a new series):
//
//   gpuacct_step_seconds            histogram  a step's window on a device (StepRow::duration),
//                                              buckets kStepSecondsBucketsNs, +Inf
//   gpuacct_wall_seconds_total      counter    time per wall (label wall: taxonomy.h's names)
//   gpuacct_steps_total             counter    step rows finalised on the device
//   gpuacct_data_loss_total         counter    the sum of the data-loss counters
//                                              (Stats::data_loss_total; no device label: the
//                                              counters are the process's)
//
// Which rows: every row finalised, warm-up rows included.  A counter can never take back what
// it counted, and the slow-start rule (run_summary.h) decides after the fact which leading
// steps were warm-up; so the totals here are those of the report's "steps" array, all rows,
// and a dashboard's rate() over a window soon leaves warm-up behind.
//
// Labels: job = RunMetadata::job_id (empty when unknown: Prometheus reads an empty label as
// absent), host = hostname, rank = rank (-1 when not distributed), device = the report's device
// number (-1 for host-only rows, step_row.h reported_device).  Label values are made valid
// UTF-8 (json_safe_utf8) and escaped as the format asks: backslash, double quote, newline.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "analysis/accounting/step_row.h"
#include "analysis/accounting/taxonomy.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"

namespace gpuacct {

// Upper bounds of gpuacct_step_seconds' buckets, in nanoseconds (written exactly in seconds:
// le="0.0005"), fixed so that every rank's and every job's histograms can be summed: 0.5 ms
// (the shortest training steps) to 60 s (a step of a minute is a stall, not a step), about
// 1-2.5-5 per decade.
inline constexpr std::array<int64_t, 17> kStepSecondsBucketsNs = {
    500'000,       1'000'000,      2'500'000,      5'000'000,      10'000'000,    25'000'000,
    50'000'000,    100'000'000,    250'000'000,    500'000'000,    1'000'000'000, 2'500'000'000,
    5'000'000'000, 10'000'000'000, 20'000'000'000, 30'000'000'000, 60'000'000'000};

// The metric names, each written once (the Grafana dashboard's test checks its queries name
// only these: tests/e2e/prometheus_check.py).
inline constexpr std::string_view kStepSecondsMetric = "gpuacct_step_seconds";
inline constexpr std::string_view kWallSecondsMetric = "gpuacct_wall_seconds_total";
inline constexpr std::string_view kStepsMetric = "gpuacct_steps_total";
inline constexpr std::string_view kDataLossMetric = "gpuacct_data_loss_total";

// `value` as a label value between double quotes: valid UTF-8 (json_safe_utf8), then `\` as
// `\\`, `"` as `\"`, newline as `\n` (the text format's three escapes).
std::string prometheus_label_value(std::string_view value);

// Nanoseconds as exact decimal seconds, without trailing zeros: 1500000 -> "0.0015",
// 2000000000 -> "2".
std::string prometheus_seconds(int64_t ns);

// The job's identity as labels (from the run metadata).
struct PrometheusIdentity {
  std::string job;
  std::string host;
  int rank = -1;

  static PrometheusIdentity from(const RunMetadata& meta) {
    return {meta.job_id, meta.hostname, meta.rank};
  }
};

// Totals of the rows added so far, per device.  Not thread-safe (the library's worker owns it).
class PrometheusMetrics {
 public:
  // One finalised row: O(buckets), no allocation after a device's first row.
  void add_row(const StepRow& row);
  // The exposition text: HELP and TYPE of every metric, a sample per device (none before the
  // first row; gpuacct_data_loss_total always), ending with a newline.
  std::string render(const PrometheusIdentity& id, const Stats& stats) const;

  int64_t rows() const { return rows_; }

 private:
  struct DeviceTotals {
    // Rows per bucket, not cumulative: [i] holds those in (bound[i-1], bound[i]]; the last,
    // those above every bound (+Inf only).  Cumulated when rendered.
    std::array<int64_t, kStepSecondsBucketsNs.size() + 1> in_bucket{};
    int64_t rows = 0;
    int64_t duration_ns = 0;
    WallBreakdown walls;
  };
  std::map<int, DeviceTotals> devices_;  // by reported device, in order
  int64_t rows_ = 0;
};

}  // namespace gpuacct
