// Run diff (`gpuacct diff BASE NEW`): how the step time of one run changed against another,
// split by wall, with a bootstrap confidence interval over steps; the kernels whose exposed
// time changed most; the settings and environment that differ between the runs, shown first.
// docs/diff.md has the method and its limits.
//
//   diff_run_from_report(report, rows)  one run as the diff sees it: its summary steps (the
//                                       ones the report's summary covers) and the walls of each;
//   diff_runs(base, next, options)      the comparison, a pure function (deterministic: the
//                                       bootstrap's seed is an option);
//   run_diff_to_json / run_diff_text    its JSON (schema gpuacct.diff/1) and terminal text.
//
// What a step's walls are: the summary's step time is the window of the step's slowest device
// (run_summary.h summarize), so the diff takes, per step, that device's row; its walls partition
// its window exactly (taxonomy.h), so the per-wall changes of the means add up to the change of
// the mean step time.  Summary steps are the rows not flagged warm-up and not left out by the
// slow-start rule (SlowStartRule): the steps the report summarises, whatever the source.
//
// Layering: compare/ sits above report/ (the summary's warm-up rule, percentile) and below
// cli/; it reads report JSON and rows, never files.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_row.h"
#include "analysis/accounting/taxonomy.h"
#include "analysis/model/status.h"

namespace gpuacct {

inline constexpr const char* kDiffSchema = "gpuacct.diff/1";

// One kernel of a report's "top_kernels" list: exposed time summed over the run's devices and
// its summary steps (StepAccountant::kernel_exposure).
struct KernelTime {
  std::string name;
  int64_t exposed_ns = 0;
  int64_t count = 0;
  bool communication = false;
};

// One run as the diff compares it.
struct DiffRun {
  std::string label;                              // the input (its path), as the output names it
  std::vector<WallBreakdown> steps;               // each summary step's walls (ns), in step order
  int64_t warmup_steps = 0;                       // steps left out: flagged warm-up or slow start
  nlohmann::json run = nlohmann::json::object();  // the report's "run" section
  nlohmann::json config = nlohmann::json::object();  // the report's "config" (its settings)
  bool steps_detected = false;  // the input marked no steps: they were detected
  // The report's top kernels, when its source knows kernels (a step stream's rows do not).
  bool kernels_known = false;
  std::string kernels_unknown_why;  // when !kernels_known: one phrase
  std::vector<KernelTime> kernels;
  size_t kernel_list_limit = 0;  // the report lists at most this many (config top_kernels)
  int64_t kernel_steps = 0;      // steps the kernels' exposed time covers (not flagged warm-up)
};

// `report` is a gpuacct report (report/report.h) and `rows` its step rows, as the front door
// gives them (analysis/input/input.h report_input).  An error when no summary step is left.
StatusOr<DiffRun> diff_run_from_report(const nlohmann::json& report,
                                       const std::vector<StepRow>& rows, std::string label);

struct DiffOptions {
  // Bootstrap: each replicate resamples the steps of each run independently, with
  // replacement, and takes the difference of the means; the interval is the replicates'
  // percentile interval.  2000 replicates put the 2.5th / 97.5th percentiles within a few
  // hundredths of a standard error of where infinitely many would.
  int resamples = 2000;
  uint64_t seed = 20261201;
  double confidence = 0.95;
  // A change is "significant" when its interval excludes 0 and it is at least this share of
  // the base run's mean step time: smaller changes are within what reruns of one job on one
  // machine differ by (clocks, thermals, allocator state), whatever the interval says.
  double practical_share = 0.01;
  // Fewer summary steps than this in a run: no interval, so nothing is significant.  The
  // percentile bootstrap of a handful of values is narrower than the truth (two steps give
  // three distinct resample means), so it would call noise a change.
  size_t min_steps_for_interval = 5;
  size_t kernel_changes = 5;  // kernels listed, largest change of exposed time first
};

struct Change {
  double base_ms = 0;  // mean per step
  double new_ms = 0;
  double delta_ms = 0;  // new_ms - base_ms
  // The bootstrap interval of delta_ms; absent when a run has fewer summary steps than
  // DiffOptions::min_steps_for_interval.
  std::optional<std::pair<double, double>> interval_ms;
  bool significant = false;
};

struct WallChange {
  Wall wall = Wall::kCompute;
  Change change;
  double share_of_change = 0;  // delta_ms / the step time's delta_ms (0 when that is 0)
};

struct KernelChange {
  std::string name;
  bool communication = false;
  // Exposed ms per step in each run; absent when the kernel is not in that run's list while
  // the list is full (its time there is at most the list's smallest: unknown).
  std::optional<double> base_ms, new_ms;
  double delta_ms = 0;  // new - base when both are known; else the least the change can be
  bool delta_is_bound = false;
};

struct SettingDifference {
  std::string setting;  // "GPU", "world size", "config.warmup_steps", ...
  std::string base, next;
};

struct RunDiff {
  std::string base_label, new_label;
  int64_t base_steps = 0, new_steps = 0;
  int64_t base_warmup_steps = 0, new_warmup_steps = 0;
  Change step;                                 // the mean step time
  double delta_share = 0;                      // step.delta_ms / step.base_ms
  std::array<WallChange, kWallCount> walls{};  // indexed by Wall; deltas sum to step.delta_ms
  std::vector<SettingDifference> settings;     // what differs between the runs
  bool kernels_known = false;                  // both runs list kernels
  std::string kernels_note;                    // why not, or what is partial
  std::vector<KernelChange> kernels;
  DiffOptions options;
  double practical_ms = 0;  // options.practical_share of the base step time
  std::string headline;
};

RunDiff diff_runs(const DiffRun& base, const DiffRun& next, const DiffOptions& options = {});

// The settings and environment that differ: the device names and count, world size, rank,
// source, host, command, gpuacct version, how steps were found, then every accounting setting
// of the reports' "config" sections.  Per-process values (pid, job id, paths) are left out.
std::vector<SettingDifference> setting_differences(const DiffRun& base, const DiffRun& next);

// True when the step time is significantly slower by more than `percent` % of the base's
// (`gpuacct diff --fail-if-slower`).
bool slower_than(const RunDiff& diff, double percent);

nlohmann::json run_diff_to_json(const RunDiff& diff);
std::string run_diff_text(const RunDiff& diff);

}  // namespace gpuacct
