// Rolls finalised step rows up into the run summary: percentiles, wall shares, the verdict
// with its recommendation and what-if estimate.  Pure functions of the rows; no I/O.
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_row.h"
#include "analysis/model/run_metadata.h"

namespace gpuacct {

// Verdict bands (docs/accounting.md §5; data, launch and communication after XProf's
// input-pipeline analyzer).  Every wall can be the verdict: the one of data, launch,
// communication and other with the highest band wins (ties: the larger share); compute wins
// when none of them reaches its moderate band.
struct VerdictBands {
  double data_high = 0.20, data_moderate = 0.05;
  double launch_high = 0.15, launch_moderate = 0.03;
  double comm_high = 0.15, comm_moderate = 0.03;
  // Host work outside CUDA calls and data ranges (Python, logging, checkpointing, GC, .item()
  // syncs) and dependency waits.  Every loop has some (the optimizer's Python, the loop
  // itself): a few percent is healthy, so the bands sit above data's.
  double other_high = 0.25, other_moderate = 0.10;
  // A compute verdict is "high" when the GPU computes at least this share of the step (it can
  // only be below it by a hair: the other walls are all under their moderate bands).
  double compute_high = 0.80;
};

// Slow start (docs/accounting.md §6): leading steps far slower than the steady state are
// warm-up whatever the source -- cuDNN autotuning, first-call set-up, allocator growth, lazy
// compilation -- also where no warm-up was configured (a profiler trace without a schedule).
// Over the n summary steps in step order: the steady state is the median step time of the
// last max(min_steady_steps, ceil(n / 2)) steps; the steps before those are candidates, and
// from the first on each is left out while it lasts more than `factor` times the steady
// median (the first that does not ends the rule).  So at most half the steps go, at least
// min_steady_steps stay, and a run of n <= min_steady_steps is left alone.  Why 3x: steady
// steps vary by tens of percent (a GC pause or a slow batch may double one), while first-call
// set-up costs several steps' time (4.7x on a ResNet-50 trace, issue 14); the median of at
// least 3 steps is not moved by one outlier among them.
struct SlowStartRule {
  double factor = 3.0;
  int min_steady_steps = 3;
  // At most this share of the steps (and at least one) is left out: a long slow phase at the
  // start (a cold page cache, a first epoch that really is data-bound) is the run's own finding,
  // not warm-up to hide.
  double max_leading_share = 0.1;
};

// Warm-up by content (issue 27): a step that runs kernels no earlier step ran (StepRow::
// first_use_kernels: autotuning, compilation, a first evaluation, a CUDA graph's first replay)
// and is slower than `factor` times the median step is one-time work, wherever it sits -- not
// only among the first steps.  Over the summary steps left after the other rules; at most a
// tenth of them (the slowest first, at least one) and at least 3 steps stay.  Why 1.5x: a
// first use alone is cheap (a new shape's kernel); one-time work that costs less than half a
// step is the run's own.
struct OneTimeWorkRule {
  double factor = 1.5;
  double max_share = 0.1;
  int min_steady_steps = 3;
};

enum class Severity : uint8_t { kNone, kModerate, kHigh };
const char* to_string(Severity s);

struct Verdict {
  // The wall named by the verdict: "data", "launch", "communication", "other" (host-bound)
  // when one of those reaches its moderate band, else "compute" (the GPU is busy; look at
  // kernel efficiency next), or "none" when nothing could be accounted (`reason` says why).
  std::string bound;
  // For bound == "none": "no_steps", "all_warmup" (every step was left out as warm-up),
  // "no_gpu_activity", "gpu_work_outside_steps", "unsupported_device" (the input holds only
  // another accelerator's events).  Else empty.
  std::string reason;
  Severity severity = Severity::kNone;
  double share = 0;            // that wall's share of summary step time
  std::string headline;        // one line a person reads first
  std::string recommendation;  // one concrete action for that wall
  double what_if_step_ms = 0;  // mean step time with that wall's time removed
  double mean_step_ms = 0;
  std::vector<std::string> notes;  // secondary findings (other wall high, data loss, ...)
};

struct WallShares {
  std::array<double, kWallCount> share{};  // indexed by Wall; sums to 1 when total_ns > 0
  std::array<int64_t, kWallCount> ns{};
  int64_t total_ns = 0;
};

// Work the program declared step by step (StepRow::tokens / samples), over the summary steps
// that declared it: cost.cc's tokens/s per GPU and $ per million tokens (docs/cost.md).
struct DeclaredWork {
  int64_t steps = 0;   // summary steps with work declared in this unit
  double total = 0;    // their work, summed
  double step_ms = 0;  // their step times (slowest device's window), summed
};

struct RunSummary {
  int64_t steps = 0;         // distinct summary (non-warm-up) steps
  int64_t warmup_steps = 0;  // distinct warm-up steps (configured + slow start)
  // Steps the slow-start rule left out as warm-up (by step index; their rows keep the
  // accountant's `warmup` flag), their step times and the median of the steps after them.
  std::vector<int64_t> slow_start_steps;
  std::vector<double> slow_start_step_ms;
  double slow_start_steady_ms = 0;
  SlowStartRule slow_start_rule;  // the rule applied
  // Steps the one-time-work rule left out (OneTimeWorkRule), their times, their first-use
  // kernels and the median step time they were compared with.
  std::vector<int64_t> one_time_steps;
  std::vector<double> one_time_step_ms;
  std::vector<uint32_t> one_time_first_uses;
  double one_time_median_ms = 0;
  int64_t rows = 0;          // summary rows (steps x devices)
  double step_ms_p50 = 0, step_ms_p90 = 0, step_ms_p99 = 0, step_ms_mean = 0;
  CategoryNs categories;  // summed over summary rows
  WallShares walls;
  WallShares warmup_walls;
  int64_t comm_total_ns = 0, comm_overlapped_ns = 0, gpu_busy_ns = 0;
  int64_t kernels = 0, launches = 0;
  double gpu_busy_share = 0;  // union of ops / window: nvidia-smi's view
  double compute_share = 0;   // the real compute share
  // Model FLOPs the user declared (gpuacct_set_step_flops), over the steps that declared them.
  int64_t steps_with_flops = 0;
  double flops_per_step = 0;      // mean
  double achieved_tflops = 0;     // declared FLOPs / step time (slowest device), per process
  double comm_overlap_share = 0;  // overlapped / total communication
  DeclaredWork declared_tokens;   // gpuacct_set_step_work
  DeclaredWork declared_samples;
  // Steps CUPTI did not trace (GPUACCT_SAMPLE; StepRow::sampled false): left out of every
  // number above, warm-up included, and named in a verdict note.
  int64_t untraced_steps = 0;
  // Hardware counters over the summary rows' compute time (docs/counters.md): the rows' sums
  // added, so each mean is weighted by the compute time its samples covered.
  CounterTotals counters;
  Verdict verdict;
};

// `meta` (optional) lets the verdict name what an input held when nothing could be accounted
// (RunMetadata::other_accelerator_events).  Rows flagged warm-up and the steps the slow-start
// rule finds are left out of every summary number and reported apart (warmup_walls).
RunSummary summarize(const std::vector<StepRow>& rows, const Stats& stats,
                     const VerdictBands& bands = {}, const RunMetadata* meta = nullptr,
                     const SlowStartRule& slow_start = {});

// The slow-start rule alone: the step indices it leaves out, given each summary step's time
// (step index -> ms, the slowest device's window).  `steady_ms` (optional) receives the
// steady median (0 when the run is too short to have one).
std::vector<int64_t> slow_start_steps(const std::map<int64_t, double>& step_ms,
                                      const SlowStartRule& rule, double* steady_ms = nullptr);

// Dense bf16 Tensor Core peak of a GPU known by name (TFLOP/s), 0 when unknown.  Used for MFU;
// the table is in run_summary.cc (public data-sheet numbers).
double peak_bf16_tflops(const std::string& device_name);

// Percentile with linear interpolation over sorted values (p in [0, 100]).
double percentile(std::vector<double> values, double p);

}  // namespace gpuacct
