// Change points within a run (docs/change_points.md): level shifts in step time and in each
// wall over the step sequence (PELT with an L2 cost), and periodic slow steps (every Nth step
// slower), each attributed to the walls that carry it.  Pure functions of the summary's rows:
// the report stage computes the `change_points` section from them, so the live report and
// `gpuacct analyze` give the same one.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_row.h"
#include "analysis/accounting/taxonomy.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {

using WallMs = std::array<double, kWallCount>;  // indexed by Wall

// The documented defaults (docs/change_points.md gives the reasons and the false-alarm
// measurements behind them).
struct ChangePointOptions {
  // PELT's penalty per change point: beta = penalty_factor * sigma^2 * ln(n), sigma the noise
  // of step time (BIC-like: a change must explain more than ln(n) noise variances).  4 left no
  // false change over 100 seeds each of Gaussian, Laplace and Student-t(3) noise
  // (change_points_test.cc, NoFalseChangeOnFlatRuns).
  double penalty_factor = 4.0;
  // ln(n) with n at least this many steps: a short run (a profiler trace of 20 steps) has few
  // places for a change but a noisy sigma from few differences; without the floor 1% of flat
  // 10- to 30-step runs showed a false shift.
  double penalty_min_steps = 200;
  // The same for each wall's own search: five more searches, so a higher bar for the same
  // false-alarm rate per run.
  double wall_penalty_factor = 6.0;
  // PELT keeps every candidate since the last change (a flat stretch is never pruned), so its
  // time grows with the square of the longest flat stretch.  Longer runs are searched over
  // ceil(n / max_exact_steps) step blocks (the same objective, changes at block edges, at
  // least two blocks per segment), then each change moves to its best raw step within two
  // blocks: exact up to max_exact_steps steps, about a second per series at 1M steps.
  size_t max_exact_steps = 2048;
  // The shortest segment PELT may make, in steps: shorter level changes are bursts, which the
  // outlier rule below handles.
  int64_t min_segment = 5;
  // A step is an outlier when it departs from its baseline (the running median over
  // 2 * baseline_half_window + 1 steps) by more than outlier_z noise sigmas.  Outliers are
  // held out of the level-shift search (one slow step is not a new level) and are the
  // candidates of periodic slow steps.
  double outlier_z = 5.0;
  int64_t baseline_half_window = 7;
  // Periodic slow steps: slow outliers whose step indices are an arithmetic progression.  The
  // period is the most common gap between consecutive slow outliers (at least min_period), the
  // phase the most common step index modulo that period; accepted when at least
  // min_occurrences steps fall on it, they are at least min_coverage of the progression's
  // steps from the first to the last, and chance is ruled out: the probability that outliers
  // scattered at random (at the run's outlier rate) fill that many places, times the number
  // of pairs of outliers that could have suggested the pattern, is below periodic_alpha.
  int64_t min_period = 3;
  int64_t min_occurrences = 3;
  double min_coverage = 0.8;
  double periodic_alpha = 1e-3;
  // Relative floor of sigma (of the median step time): a run with no noise at all (a
  // simulator) still has a finite penalty.
  double min_relative_sigma = 1e-4;
  // A wall's own change point is listed (wall_shifts) when step time shows no change within
  // this many steps of it and it moves that wall by at least min_wall_shift of the median
  // step time: a shift that other walls cancel (data up, compute down).
  int64_t wall_match_steps = 10;
  double min_wall_shift = 0.02;
  size_t max_listed = 50;  // segments, shifts and wall shifts listed in the report, each
};

// PELT (Killick, Fearnhead & Eckley 2012) with the L2 cost (sum of squared deviations from the
// segment mean), each segment at least min_segment long: the exact minimiser of total cost +
// penalty x changes.  Returns the first index of each new segment, ascending (ruptures'
// breakpoints without the final n).  O(n) memory; time O(n) when changes keep coming, but
// quadratic in the length of a flat stretch (pruning never drops a candidate of the current
// segment).  Fewer than 2 * min_segment values: none.
std::vector<size_t> pelt_l2(const std::vector<double>& y, double penalty, size_t min_segment);

// The search find_change_points runs: pelt_l2 up to max_blocks values; beyond, PELT over
// blocks of ceil(n / max_blocks) values (the same objective restricted to changes at block
// edges, segments at least max(2 blocks, min_segment)), each change then moved to the raw
// index that best splits the values between its neighbours within two blocks.
std::vector<size_t> segment_l2(const std::vector<double>& y, double penalty, size_t min_segment,
                               size_t max_blocks);

// Noise sigma, robust to level shifts and spikes: the median absolute deviation of first
// differences, scaled to a Gaussian's sigma (x 1.4826 / sqrt(2)).  0 for fewer than 3 values.
double robust_sigma(const std::vector<double>& y);

// The running median of y over [i - half_window, i + half_window] (clipped at the ends).
std::vector<double> running_median(const std::vector<double>& y, int64_t half_window);

// The summary's steps in step order: each step's time is the slowest device's window, its walls
// that row's walls (so they sum to the step time).  Warm-up rows and the slow-start steps are
// left out, as the summary leaves them out.
struct StepSeries {
  std::vector<int64_t> step_index;
  std::vector<double> step_ms;
  std::vector<WallMs> wall_ms;
  size_t size() const { return step_ms.size(); }
};
StepSeries step_series(const std::vector<StepRow>& rows, const RunSummary& summary);

struct Segment {
  int64_t first_step = 0, last_step = 0;  // step indices, inclusive
  int64_t steps = 0;                      // steps in it (outliers included)
  double mean_step_ms = 0;                // over its steps that are not outliers
  WallMs wall_ms{};                       // same steps; they sum to mean_step_ms
};

// The change from one level to the next: where, by how much, and which wall carries it.  A
// short segment (at most 2 x min_segment steps) between two shifts in the same direction is a
// transition (a queue of GPU work absorbing a slower input for a few steps): the two are one
// shift, from the level before to the level after.
struct LevelShift {
  int64_t step = 0;              // first step of the new level, or of its transition
  int64_t transition_steps = 0;  // steps between the two levels (0: none)
  double before_ms = 0, after_ms = 0;
  WallMs wall_change_ms{};     // sums to after_ms - before_ms
  Wall wall = Wall::kCompute;  // the wall with the largest change in the direction of the shift
};

struct PeriodicSpikes {
  int64_t period_steps = 0;
  int64_t first_step = 0, last_step = 0;
  int64_t occurrences = 0;  // slow outliers on the progression
  int64_t expected = 0;     // places of the progression from first_step to last_step
  double excess_ms = 0;     // mean over the occurrences of step time above the baseline
  WallMs wall_excess_ms{};  // the same per wall (each wall above its own local baseline)
  Wall wall = Wall::kOther;
  double chance = 0;  // the bound on the probability of the pattern by chance
};

// A change point of one wall's own series that step time does not show.
struct WallShift {
  Wall wall = Wall::kCompute;
  int64_t step = 0;
  double before_ms = 0, after_ms = 0;
};

struct ChangePoints {
  bool searched = false;  // false: fewer than 2 * min_segment steps
  int64_t steps = 0;
  double sigma_ms = 0;   // the noise the penalty is scaled by (outliers held out)
  double penalty = 0;    // beta, in ms^2
  int64_t outliers = 0;  // steps held out of the level search (periodic ones included)
  std::vector<Segment> segments;
  std::vector<LevelShift> shifts;
  std::vector<PeriodicSpikes> periodic;
  std::vector<WallShift> wall_shifts;
};

ChangePoints find_change_points(const StepSeries& series, const ChangePointOptions& opts = {});

// The report's `change_points` section (docs/report_schema.md).
nlohmann::json change_points_json(const ChangePoints& cp, const ChangePointOptions& opts = {});

// At most three terminal lines from a report's `change_points` section (none when it found
// nothing): the largest shifts with the wall that carries them, the periodic slow steps with a
// hint by wall.
std::vector<std::string> change_point_lines(const nlohmann::json& section);

// What a change carried by `wall` usually is (a hint, ends with '?').
const char* shift_hint(Wall wall);
const char* periodic_hint(Wall wall);

}  // namespace gpuacct
