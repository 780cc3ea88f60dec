#include "analysis/report/change_points.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <set>

#include "analysis/model/json_text.h"

namespace gpuacct {

using nlohmann::json;

// ---- the primitives -----------------------------------------------------------------------

namespace {

// Prefix sums of a series cut into blocks: per block its sum A and count c (values centred on
// their mean first: the cost of a long segment is a small difference of large sums otherwise).
// The L2 cost of blocks [s, t) is sum(A^2 / c) - (sum A)^2 / sum c: the raw series' L2 cost of
// those steps less the spread inside each block, which no change at a block edge can reduce.
// So PELT over blocks minimises the raw objective over change points at block edges.
struct BlockSums {
  std::vector<double> sum, sq, count;  // prefix sums, size blocks + 1
  size_t blocks() const { return sum.size() - 1; }
  double cost(size_t s, size_t t) const {
    const double a = sum[t] - sum[s];
    return std::max(0.0, (sq[t] - sq[s]) - a * a / (count[t] - count[s]));
  }
};

BlockSums block_sums(const std::vector<double>& y, size_t block) {
  double mean = 0;
  for (double v : y) mean += v;
  mean /= static_cast<double>(std::max<size_t>(y.size(), 1));
  const size_t blocks = (y.size() + block - 1) / block;
  BlockSums b;
  b.sum.assign(blocks + 1, 0.0);
  b.sq.assign(blocks + 1, 0.0);
  b.count.assign(blocks + 1, 0.0);
  for (size_t k = 0; k < blocks; ++k) {
    double a = 0, c = 0;
    for (size_t i = k * block; i < std::min(y.size(), (k + 1) * block); ++i, c += 1)
      a += y[i] - mean;
    b.sum[k + 1] = b.sum[k] + a;
    b.sq[k + 1] = b.sq[k] + a * a / c;
    b.count[k + 1] = b.count[k] + c;
  }
  return b;
}

// PELT over the blocks: F(t) = min over candidates s of F(s) + cost(s, t) + penalty, each
// segment at least min_seg blocks.  A candidate s is pruned when F(s) + cost(s, t') > F(t') for
// t' = t - min_seg: from t on, a last change at t' always beats one at s (the L2 cost only
// falls when a segment is split).  Pruning against t' rather than t keeps the result exact with
// a minimum segment length (t itself is not a valid last change before t + min_seg).
std::vector<size_t> pelt_blocks(const BlockSums& b, double penalty, size_t min_seg) {
  const size_t n = b.blocks();
  if (n < 2 * min_seg) return {};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<double> best(n + 1, kInf);  // F(t): the cost of blocks [0, t) best segmented
  std::vector<uint32_t> last(n + 1, 0);   // where F(t)'s last segment begins
  best[0] = -penalty;
  std::vector<size_t> candidates{0}, kept;
  for (size_t t = min_seg; t <= n; ++t) {
    if (t >= 2 * min_seg) {
      const size_t admitted = t - min_seg;
      kept.clear();
      for (size_t s : candidates) {
        if (best[s] + b.cost(s, admitted) <= best[admitted]) kept.push_back(s);
      }
      kept.push_back(admitted);
      candidates.swap(kept);
    }
    double f = kInf;
    size_t arg = 0;
    for (size_t s : candidates) {
      const double v = best[s] + b.cost(s, t) + penalty;
      if (v < f) {
        f = v;
        arg = s;
      }
    }
    best[t] = f;
    last[t] = static_cast<uint32_t>(arg);
  }
  std::vector<size_t> out;
  for (size_t t = last[n]; t > 0; t = last[t]) out.push_back(t);
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

std::vector<size_t> pelt_l2(const std::vector<double>& y, double penalty, size_t min_segment) {
  return pelt_blocks(block_sums(y, 1), penalty, std::max<size_t>(min_segment, 1));
}

std::vector<size_t> segment_l2(const std::vector<double>& y, double penalty, size_t min_segment,
                               size_t max_blocks) {
  const size_t min_seg = std::max<size_t>(min_segment, 1);
  const size_t block =
      std::max<size_t>(1, (y.size() + max_blocks - 1) / std::max<size_t>(max_blocks, 1));
  if (block == 1) return pelt_l2(y, penalty, min_seg);
  const std::vector<size_t> coarse = pelt_blocks(
      block_sums(y, block), penalty, std::max<size_t>(2, (min_seg + block - 1) / block));
  // Each change moves to the raw step that best splits the steps between its neighbours,
  // within two blocks of where the blocks put it; a change no longer worth its penalty there
  // (a block that straddled a change made two) goes, and the rest are placed again.
  const BlockSums raw = block_sums(y, 1);
  std::vector<size_t> out;
  for (size_t c : coarse) out.push_back(std::min(c * block, y.size()));
  auto bounds = [&](size_t k) {
    return std::make_pair(k == 0 ? size_t{0} : out[k - 1],
                          k + 1 < out.size() ? out[k + 1] : y.size());
  };
  auto place = [&]() {
    for (size_t k = 0; k < out.size(); ++k) {
      const auto [left, right] = bounds(k);
      const size_t at = out[k];
      const size_t lo = std::max(left + min_seg, at > 2 * block ? at - 2 * block : 0);
      const size_t hi = std::min(right >= min_seg ? right - min_seg : 0, at + 2 * block);
      double split_cost = std::numeric_limits<double>::infinity();
      for (size_t j = lo; j <= hi; ++j) {
        const double c = raw.cost(left, j) + raw.cost(j, right);
        if (c < split_cost) split_cost = c, out[k] = j;
      }
    }
  };
  place();
  for (bool removed = true; removed;) {
    removed = false;
    for (size_t k = 0; k < out.size(); ++k) {
      const auto [left, right] = bounds(k);
      const bool short_side = out[k] < left + min_seg || out[k] + min_seg > right;
      if (short_side ||
          raw.cost(left, right) - raw.cost(left, out[k]) - raw.cost(out[k], right) < penalty) {
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(k));
        removed = true;
        break;
      }
    }
  }
  place();
  return out;
}

namespace {

// Reorders v.
double median_in_place(std::vector<double>& v) {
  if (v.empty()) return 0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  if (v.size() % 2 == 1) return *mid;
  const double hi = *mid;
  const double lo = *std::max_element(v.begin(), mid);
  return (lo + hi) / 2;
}

double median_of(std::vector<double> v) {
  return median_in_place(v);
}

}  // namespace

double robust_sigma(const std::vector<double>& y) {
  if (y.size() < 3) return 0;
  std::vector<double> d(y.size() - 1);
  for (size_t i = 1; i < y.size(); ++i) d[i - 1] = y[i] - y[i - 1];
  const double center = median_of(d);
  for (double& v : d) v = std::abs(v - center);
  return 1.4826 * median_of(std::move(d)) / std::sqrt(2.0);
}

std::vector<double> running_median(const std::vector<double>& y, int64_t half_window) {
  const size_t n = y.size();
  const size_t h = static_cast<size_t>(std::max<int64_t>(half_window, 0));
  std::vector<double> out(n), window;
  window.reserve(2 * h + 1);
  for (size_t i = 0; i < n; ++i) {
    const size_t lo = i >= h ? i - h : 0;
    const size_t hi = std::min(n, i + h + 1);
    window.assign(y.begin() + static_cast<std::ptrdiff_t>(lo),
                  y.begin() + static_cast<std::ptrdiff_t>(hi));
    out[i] = median_in_place(window);
  }
  return out;
}

StepSeries step_series(const std::vector<StepRow>& rows, const RunSummary& summary) {
  const std::set<int64_t> slow(summary.slow_start_steps.begin(), summary.slow_start_steps.end());
  std::map<int64_t, const StepRow*> slowest;  // step index -> its slowest device's row
  for (const StepRow& r : rows) {
    if (r.warmup || slow.count(r.step_index) > 0) continue;
    const StepRow*& s = slowest[r.step_index];
    if (s == nullptr || r.duration() > s->duration()) s = &r;
  }
  StepSeries out;
  out.step_index.reserve(slowest.size());
  out.step_ms.reserve(slowest.size());
  out.wall_ms.reserve(slowest.size());
  for (const auto& [index, r] : slowest) {
    out.step_index.push_back(index);
    out.step_ms.push_back(static_cast<double>(r->duration()) / 1e6);
    const WallBreakdown w = r->walls();
    WallMs ms{};
    for (const WallInfo& k : kWalls) {
      ms[static_cast<size_t>(k.wall)] = static_cast<double>(w[k.wall]) / 1e6;
    }
    out.wall_ms.push_back(ms);
  }
  return out;
}

// ---- the search ---------------------------------------------------------------------------

namespace {

// One series prepared for the level search: its noise, baseline, outliers and the series with
// outliers replaced by their baseline.
struct Prepared {
  double sigma_robust = 0;  // the outlier rule's scale
  double sigma = 0;         // the penalty's scale
  std::vector<double> baseline;
  std::vector<int8_t> outlier;  // +1 slow, -1 fast, 0 neither
  std::vector<double> clean;
};

Prepared prepare(const std::vector<double>& y, double sigma_floor, const ChangePointOptions& o) {
  Prepared p;
  p.sigma_robust = std::max(robust_sigma(y), sigma_floor);
  p.baseline = running_median(y, o.baseline_half_window);
  p.outlier.assign(y.size(), 0);
  p.clean = y;
  const double limit = o.outlier_z * p.sigma_robust;
  for (size_t i = 0; i < y.size(); ++i) {
    const double r = y[i] - p.baseline[i];
    if (std::abs(r) > limit) {
      p.outlier[i] = r > 0 ? 1 : -1;
      p.clean[i] = p.baseline[i];
    }
  }
  // The penalty's sigma is the noise the L2 cost sees: the clean series' first differences,
  // each capped at the outlier limit so that a level shift's own step does not count as noise.
  // Heavy-tailed noise has more variance than its robust sigma says; the larger one counts.
  double sum = 0;
  const double cap = 2 * limit * limit;
  for (size_t i = 1; i < y.size(); ++i) {
    const double d = p.clean[i] - p.clean[i - 1];
    sum += std::min(d * d, cap);
  }
  const double diff_sigma =
      y.size() > 1 ? std::sqrt(sum / static_cast<double>(y.size() - 1) / 2) : 0.0;
  p.sigma = std::max(p.sigma_robust, diff_sigma);
  return p;
}

double penalty_of(const Prepared& p, size_t n, const ChangePointOptions& o) {
  const double steps = std::max(static_cast<double>(n), o.penalty_min_steps);
  return o.penalty_factor * p.sigma * p.sigma * std::log(steps);
}

// P(X >= k) for X ~ Binomial(trials, q).
double binomial_tail(int64_t trials, double q, int64_t k) {
  if (k <= 0) return 1;
  if (k > trials || q <= 0) return 0;
  if (q >= 1) return 1;
  const double n = static_cast<double>(trials);
  double sum = 0;
  for (int64_t j = k; j <= trials; ++j) {
    const double x = static_cast<double>(j);
    const double log_term = std::lgamma(n + 1) - std::lgamma(x + 1) - std::lgamma(n - x + 1) +
                            x * std::log(q) + (n - x) * std::log1p(-q);
    const double term = std::exp(log_term);
    sum += term;
    if (x > n * q && term < sum * 1e-12) break;
  }
  return std::min(1.0, sum);
}

// The median of x over [i - h, i + h] without the outlier steps (x[i] itself when all are).
double local_baseline(const std::vector<double>& x, const std::vector<int8_t>& outlier, size_t i,
                      int64_t half_window) {
  const size_t h = static_cast<size_t>(std::max<int64_t>(half_window, 1));
  std::vector<double> w;
  for (size_t j = i >= h ? i - h : 0; j < std::min(x.size(), i + h + 1); ++j) {
    if (outlier[j] == 0) w.push_back(x[j]);
  }
  return w.empty() ? x[i] : median_of(std::move(w));
}

Wall largest(const WallMs& change, bool up) {
  Wall best = Wall::kCompute;
  double best_value = -std::numeric_limits<double>::infinity();
  for (const WallInfo& k : kWalls) {
    const double v = change[static_cast<size_t>(k.wall)] * (up ? 1.0 : -1.0);
    if (v > best_value) {
      best_value = v;
      best = k.wall;
    }
  }
  return best;
}

// The excess of a periodic pattern's steps over their baselines, per step and per wall.
void measure_excess(const StepSeries& s, const Prepared& p, const std::vector<size_t>& hits,
                    const ChangePointOptions& o, PeriodicSpikes* out) {
  std::vector<double> wall(s.size());
  for (size_t i : hits) out->excess_ms += s.step_ms[i] - p.baseline[i];
  for (const WallInfo& k : kWalls) {
    const auto w = static_cast<size_t>(k.wall);
    for (size_t i = 0; i < s.size(); ++i) wall[i] = s.wall_ms[i][w];
    double sum = 0;
    for (size_t i : hits)
      sum += wall[i] - local_baseline(wall, p.outlier, i, o.baseline_half_window);
    out->wall_excess_ms[w] = sum / static_cast<double>(hits.size());
  }
  out->excess_ms /= static_cast<double>(hits.size());
  out->wall = largest(out->wall_excess_ms, true);
}

// One periodic pattern among the slow outliers at `slow` (positions), or none.
bool find_one_periodic(const StepSeries& s, const Prepared& p, std::vector<size_t>* slow,
                       const ChangePointOptions& o, PeriodicSpikes* out) {
  const auto m = static_cast<int64_t>(slow->size());
  if (m < std::max<int64_t>(o.min_occurrences, 3)) return false;
  std::map<int64_t, int64_t> gap_count;
  for (size_t k = 1; k < slow->size(); ++k) {
    const int64_t gap = s.step_index[(*slow)[k]] - s.step_index[(*slow)[k - 1]];
    if (gap >= o.min_period) ++gap_count[gap];
  }
  std::vector<std::pair<int64_t, int64_t>> periods;  // (count, gap)
  for (const auto& [gap, count] : gap_count) {
    if (count >= 2) periods.emplace_back(count, gap);
  }
  std::sort(periods.begin(), periods.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  const double rate = static_cast<double>(m) / static_cast<double>(s.size());
  const double pairs = static_cast<double>(m) * static_cast<double>(m - 1) / 2;
  for (size_t c = 0; c < periods.size() && c < 3; ++c) {
    const int64_t period = periods[c].second;
    std::map<int64_t, int64_t> phase_count;
    for (size_t i : *slow) ++phase_count[s.step_index[i] % period];
    int64_t phase = 0, best = 0;
    for (const auto& [ph, count] : phase_count) {
      if (count > best) best = count, phase = ph;
    }
    std::vector<size_t> hits, rest;
    for (size_t i : *slow) (s.step_index[i] % period == phase ? hits : rest).push_back(i);
    const auto h = static_cast<int64_t>(hits.size());
    const int64_t first = s.step_index[hits.front()], last = s.step_index[hits.back()];
    const int64_t expected = (last - first) / period + 1;
    if (h < o.min_occurrences ||
        static_cast<double>(h) < o.min_coverage * static_cast<double>(expected)) {
      continue;
    }
    // Two outliers suggest the pattern; the others must not be there by chance.
    const double chance = binomial_tail(expected - 2, rate, h - 2) * pairs;
    if (chance > o.periodic_alpha) continue;
    out->period_steps = period;
    out->first_step = first;
    out->last_step = last;
    out->occurrences = h;
    out->expected = expected;
    out->chance = chance;
    measure_excess(s, p, hits, o, out);
    slow->swap(rest);
    return true;
  }
  return false;
}

// Segments between the breakpoints, their means over the steps that are not outliers.
std::vector<Segment> segments_of(const StepSeries& s, const Prepared& p,
                                 const std::vector<size_t>& breaks) {
  std::vector<size_t> bounds{0};
  bounds.insert(bounds.end(), breaks.begin(), breaks.end());
  bounds.push_back(s.size());
  std::vector<Segment> out;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    Segment seg;
    seg.first_step = s.step_index[bounds[k]];
    seg.last_step = s.step_index[bounds[k + 1] - 1];
    seg.steps = static_cast<int64_t>(bounds[k + 1] - bounds[k]);
    int64_t used = 0;
    for (size_t pass = 0; pass < 2 && used == 0; ++pass) {  // all outliers: use them all
      for (size_t i = bounds[k]; i < bounds[k + 1]; ++i) {
        if (pass == 0 && p.outlier[i] != 0) continue;
        ++used;
        seg.mean_step_ms += s.step_ms[i];
        for (size_t w = 0; w < kWallCount; ++w) seg.wall_ms[w] += s.wall_ms[i][w];
      }
    }
    seg.mean_step_ms /= static_cast<double>(used);
    for (double& w : seg.wall_ms) w /= static_cast<double>(used);
    out.push_back(seg);
  }
  return out;
}

// Each wall's own change points that step time does not show (within wall_match_steps).
std::vector<WallShift> hidden_wall_shifts(const StepSeries& s, const std::vector<size_t>& breaks,
                                          double median_ms, const ChangePointOptions& o) {
  std::vector<WallShift> out;
  std::vector<double> x(s.size());
  for (const WallInfo& k : kWalls) {
    const auto w = static_cast<size_t>(k.wall);
    for (size_t i = 0; i < s.size(); ++i) x[i] = s.wall_ms[i][w];
    const Prepared p = prepare(x, o.min_relative_sigma * median_ms, o);
    const double penalty = penalty_of(p, x.size(), o) * o.wall_penalty_factor / o.penalty_factor;
    const std::vector<size_t> wall_breaks =
        segment_l2(p.clean, penalty, static_cast<size_t>(std::max<int64_t>(o.min_segment, 1)),
                   o.max_exact_steps);
    std::vector<size_t> bounds{0};
    bounds.insert(bounds.end(), wall_breaks.begin(), wall_breaks.end());
    bounds.push_back(s.size());
    for (size_t b = 1; b + 1 < bounds.size(); ++b) {
      const int64_t step = s.step_index[bounds[b]];
      const bool shown = std::any_of(breaks.begin(), breaks.end(), [&](size_t sb) {
        return std::abs(s.step_index[sb] - step) <= o.wall_match_steps;
      });
      if (shown) continue;
      auto mean = [&](size_t lo, size_t hi) {
        double sum = 0;
        for (size_t i = lo; i < hi; ++i) sum += p.clean[i];
        return sum / static_cast<double>(hi - lo);
      };
      WallShift ws{k.wall, step, mean(bounds[b - 1], bounds[b]), mean(bounds[b], bounds[b + 1])};
      if (std::abs(ws.after_ms - ws.before_ms) >= o.min_wall_shift * median_ms) out.push_back(ws);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const WallShift& a, const WallShift& b) { return a.step < b.step; });
  return out;
}

// The shifts from each segment to the next; a short segment (at most 2 x min_segment steps)
// between two shifts in the same direction is a transition, and the two make one shift.
std::vector<LevelShift> shifts_between(const std::vector<Segment>& segs,
                                       const ChangePointOptions& o) {
  std::vector<LevelShift> out;
  const int64_t short_segment = 2 * std::max<int64_t>(o.min_segment, 1);
  for (size_t k = 1; k < segs.size();) {
    const Segment& a = segs[k - 1];
    size_t end = k;  // the new level
    while (end + 1 < segs.size() && segs[end].steps <= short_segment &&
           (segs[end].mean_step_ms > a.mean_step_ms) ==
               (segs[end + 1].mean_step_ms > segs[end].mean_step_ms)) {
      ++end;
    }
    const Segment& b = segs[end];
    LevelShift shift;
    shift.step = segs[k].first_step;
    for (size_t t = k; t < end; ++t) shift.transition_steps += segs[t].steps;
    shift.before_ms = a.mean_step_ms;
    shift.after_ms = b.mean_step_ms;
    for (size_t w = 0; w < kWallCount; ++w) shift.wall_change_ms[w] = b.wall_ms[w] - a.wall_ms[w];
    shift.wall = largest(shift.wall_change_ms, shift.after_ms >= shift.before_ms);
    out.push_back(shift);
    k = end + 1;
  }
  return out;
}

}  // namespace

ChangePoints find_change_points(const StepSeries& s, const ChangePointOptions& o) {
  ChangePoints out;
  out.steps = static_cast<int64_t>(s.size());
  if (s.size() < static_cast<size_t>(2 * std::max<int64_t>(o.min_segment, 1))) return out;
  out.searched = true;
  const double median_ms = median_of(s.step_ms);
  const Prepared p = prepare(s.step_ms, o.min_relative_sigma * median_ms, o);
  std::vector<size_t> slow;
  for (size_t i = 0; i < s.size(); ++i) {
    if (p.outlier[i] > 0) slow.push_back(i);
    if (p.outlier[i] != 0) ++out.outliers;
  }
  for (int k = 0; k < 2; ++k) {  // at most two periodic patterns (checkpoints and evaluation)
    PeriodicSpikes spikes;
    if (!find_one_periodic(s, p, &slow, o, &spikes)) break;
    out.periodic.push_back(spikes);
  }
  out.sigma_ms = p.sigma;
  out.penalty = penalty_of(p, s.size(), o);
  const std::vector<size_t> breaks =
      segment_l2(p.clean, out.penalty, static_cast<size_t>(std::max<int64_t>(o.min_segment, 1)),
                 o.max_exact_steps);
  out.segments = segments_of(s, p, breaks);
  out.shifts = shifts_between(out.segments, o);
  out.wall_shifts = hidden_wall_shifts(s, breaks, median_ms, o);
  return out;
}

// ---- output -------------------------------------------------------------------------------

const char* shift_hint(Wall wall) {
  switch (wall) {
    case Wall::kData:
      return "input slower: a DataLoader worker lost, or slower storage?";
    case Wall::kLaunch:
      return "host CPU slower at submitting work (throttling, contention)?";
    case Wall::kCommunication:
      return "collectives slower: the network, or a slower peer rank?";
    case Wall::kOther:
      return "more host work per step (logging, a sync, a CPU throttled)?";
    case Wall::kCompute:
      return "GPU slower (clock throttling) or more work per step?";
  }
  return "?";
}

const char* periodic_hint(Wall wall) {
  switch (wall) {
    case Wall::kData:
      return "a dataset shard boundary or a DataLoader worker restart?";
    case Wall::kLaunch:
      return "host-side work at submission every N steps (recompilation?)";
    case Wall::kCommunication:
      return "a periodic collective (metrics, gradient sync every N steps)?";
    case Wall::kOther:
      return "checkpointing, evaluation or logging every N steps?";
    case Wall::kCompute:
      return "extra GPU work every N steps (evaluation, an EMA update)?";
  }
  return "?";
}

namespace {

json walls_ms_json(const WallMs& w) {
  json out = json::object();
  for (const WallInfo& k : kWalls) out[std::string(k.name)] = w[static_cast<size_t>(k.wall)];
  return out;
}

}  // namespace

json change_points_json(const ChangePoints& cp, const ChangePointOptions& o) {
  json out = {{"method", "pelt_l2"},
              {"searched", cp.searched},
              {"steps", cp.steps},
              {"noise_sigma_ms", cp.sigma_ms},
              {"penalty_factor", o.penalty_factor},
              {"penalty_ms2", cp.penalty},
              {"min_segment_steps", o.min_segment},
              {"outlier_z", o.outlier_z},
              {"outliers", cp.outliers}};
  json segments = json::array(), shifts = json::array(), periodic = json::array(),
       wall_shifts = json::array();
  for (size_t i = 0; i < cp.segments.size() && i < o.max_listed; ++i) {
    const Segment& s = cp.segments[i];
    segments.push_back({{"first_step", s.first_step},
                        {"last_step", s.last_step},
                        {"steps", s.steps},
                        {"mean_step_ms", s.mean_step_ms},
                        {"walls_ms", walls_ms_json(s.wall_ms)}});
  }
  for (size_t i = 0; i < cp.shifts.size() && i < o.max_listed; ++i) {
    const LevelShift& s = cp.shifts[i];
    const double change = s.after_ms - s.before_ms;
    shifts.push_back(
        {{"step", s.step},
         {"transition_steps", s.transition_steps},
         {"before_ms", s.before_ms},
         {"after_ms", s.after_ms},
         {"change_ms", change},
         {"relative_change", s.before_ms > 0 ? change / s.before_ms : 0.0},
         {"wall", to_string(s.wall)},
         {"wall_share", change != 0 ? s.wall_change_ms[static_cast<size_t>(s.wall)] / change : 0.0},
         {"wall_change_ms", walls_ms_json(s.wall_change_ms)},
         {"hint", shift_hint(s.wall)}});
  }
  for (const PeriodicSpikes& p : cp.periodic) {
    periodic.push_back({{"period_steps", p.period_steps},
                        {"first_step", p.first_step},
                        {"last_step", p.last_step},
                        {"occurrences", p.occurrences},
                        {"expected", p.expected},
                        {"excess_ms", p.excess_ms},
                        {"wall", to_string(p.wall)},
                        {"wall_excess_ms", walls_ms_json(p.wall_excess_ms)},
                        {"chance", p.chance},
                        {"hint", periodic_hint(p.wall)}});
  }
  for (size_t i = 0; i < cp.wall_shifts.size() && i < o.max_listed; ++i) {
    const WallShift& w = cp.wall_shifts[i];
    wall_shifts.push_back({{"wall", to_string(w.wall)},
                           {"step", w.step},
                           {"before_ms", w.before_ms},
                           {"after_ms", w.after_ms}});
  }
  out["segments"] = segments;
  out["segments_total"] = cp.segments.size();
  out["shifts"] = shifts;
  out["shifts_total"] = cp.shifts.size();
  out["periodic"] = periodic;
  out["wall_shifts"] = wall_shifts;
  out["wall_shifts_total"] = cp.wall_shifts.size();
  return out;
}

namespace {

std::string steps_text(int64_t v) {  // 12400 -> "12,400"
  std::string digits = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string ms_text(double ms, bool sign) {
  char buf[48];
  const double a = std::abs(ms);
  const char* f = a >= 1000 ? (sign ? "%+.2f s" : "%.2f s") : (sign ? "%+.2f ms" : "%.2f ms");
  std::snprintf(buf, sizeof buf, f, a >= 1000 ? ms / 1000 : ms);
  return buf;
}

std::string wall_text(const std::string& wall) {
  return wall == "other" ? "other (host)" : wall;
}

double number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

int64_t integer(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<int64_t>() : 0;
}

std::string text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? terminal_text(it->get<std::string>()) : "?";
}

}  // namespace

std::vector<std::string> change_point_lines(const json& section) {
  std::vector<std::string> lines;
  if (!section.is_object()) return lines;
  const json shifts = section.value("shifts", json::array());
  if (shifts.is_array() && !shifts.empty()) {
    // The largest shift by size, and how many there were.
    const json* top = nullptr;
    for (const json& s : shifts) {
      if (s.is_object() && (top == nullptr || std::abs(number(s, "change_ms")) >
                                                  std::abs(number(*top, "change_ms")))) {
        top = &s;
      }
    }
    if (top != nullptr) {
      const json& s = *top;
      const double change = number(s, "change_ms");
      const std::string wall = text(s, "wall");
      const double wall_ms = number(s.value("wall_change_ms", json::object()), wall.c_str());
      char share[32];
      std::snprintf(share, sizeof share, "%+.0f%%", number(s, "relative_change") * 100);
      const int64_t total =
          std::max<int64_t>(integer(section, "shifts_total"), static_cast<int64_t>(shifts.size()));
      std::string line = (total > 1 ? "step time changed level " + std::to_string(total) +
                                          " times; largest: from step "
                                    : "step time changed level: from step ") +
                         steps_text(integer(s, "step")) + " " + share + " (" +
                         ms_text(number(s, "before_ms"), false) + " -> " +
                         ms_text(number(s, "after_ms"), false) + ")" +
                         (integer(s, "transition_steps") > 0
                              ? " over " + std::to_string(integer(s, "transition_steps")) + " steps"
                              : std::string()) +
                         ", " + ms_text(wall_ms, true) + " of it " + wall_text(wall) + " wall";
      if (change != 0) {
        char of[32];
        std::snprintf(of, sizeof of, " (%.0f%%)", std::clamp(wall_ms / change, -9.99, 9.99) * 100);
        line += of;
      }
      lines.push_back(line + ": " + text(s, "hint"));
    }
  }
  for (const json& p : section.value("periodic", json::array())) {
    if (lines.size() >= 3 || !p.is_object()) break;
    const int64_t period = integer(p, "period_steps");
    lines.push_back("every " + steps_text(period) + " steps a slow step, " +
                    ms_text(number(p, "excess_ms"), true) + " (steps " +
                    steps_text(integer(p, "first_step")) + " to " +
                    steps_text(integer(p, "last_step")) + ", " +
                    std::to_string(integer(p, "occurrences")) + " of " +
                    std::to_string(integer(p, "expected")) + "), " + wall_text(text(p, "wall")) +
                    " wall: " + text(p, "hint"));
  }
  const json walls = section.value("wall_shifts", json::array());
  if (lines.size() < 3 && walls.is_array() && !walls.empty() && walls.front().is_object()) {
    const json& w = walls.front();
    lines.push_back("a wall shift step time hides: " + wall_text(text(w, "wall")) + " " +
                    ms_text(number(w, "after_ms") - number(w, "before_ms"), true) + " from step " +
                    steps_text(integer(w, "step")) +
                    (walls.size() > 1 ? " (" + std::to_string(walls.size()) + " in all)" : "") +
                    ", other walls make up for it");
  }
  return lines;
}

}  // namespace gpuacct
