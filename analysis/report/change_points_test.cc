#include "analysis/report/change_points.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace gpuacct {
namespace {

constexpr size_t kData = static_cast<size_t>(Wall::kData);
constexpr size_t kCompute = static_cast<size_t>(Wall::kCompute);
constexpr size_t kOther = static_cast<size_t>(Wall::kOther);

enum class Noise { kGaussian, kLaplace, kStudentT3 };

// Unit-scale noise of one of three shapes (Laplace and t(3) have heavy tails).
class NoiseSource {
 public:
  NoiseSource(Noise kind, uint64_t seed) : kind_(kind), rng_(seed) {}
  double operator()() {
    switch (kind_) {
      case Noise::kGaussian:
        return normal_(rng_);
      case Noise::kLaplace:
        return exp_(rng_) - exp_(rng_);
      case Noise::kStudentT3:
        return t3_(rng_);
    }
    return 0;
  }

 private:
  Noise kind_;
  std::mt19937_64 rng_;
  std::normal_distribution<double> normal_{0.0, 1.0};
  std::exponential_distribution<double> exp_{1.0};
  std::student_t_distribution<double> t3_{3.0};
};

// A run of n steps whose walls are compute 60 ms, data 20 ms, other 10 ms, launch 5 ms and
// communication 5 ms, each with its own noise of `sigma` ms; step time is their sum.
struct Planted {
  StepSeries series;
  void add_to_wall(size_t from, size_t wall, double ms, size_t every = 1, size_t phase = 0) {
    for (size_t i = from; i < series.size(); ++i) {
      if (i % every != phase % every) continue;
      series.wall_ms[i][wall] += ms;
      series.step_ms[i] += ms;
    }
  }
};

Planted planted_run(size_t n, double sigma, Noise noise, uint64_t seed) {
  NoiseSource draw(noise, seed);
  Planted p;
  const WallMs base = [] {
    WallMs w{};
    w[kCompute] = 60;
    w[kData] = 20;
    w[kOther] = 10;
    w[static_cast<size_t>(Wall::kLaunch)] = 5;
    w[static_cast<size_t>(Wall::kCommunication)] = 5;
    return w;
  }();
  for (size_t i = 0; i < n; ++i) {
    WallMs w = base;
    double step = 0;
    // Step-time noise sigma is `sigma`: each of the five walls carries sigma / sqrt(5).
    for (double& v : w) {
      v += draw() * sigma / std::sqrt(5.0);
      step += v;
    }
    p.series.step_index.push_back(static_cast<int64_t>(i));
    p.series.step_ms.push_back(step);
    p.series.wall_ms.push_back(w);
  }
  return p;
}

TEST(Pelt, NoiselessStepsAreExact) {
  std::vector<double> y;
  for (int i = 0; i < 30; ++i) y.push_back(1);
  for (int i = 0; i < 12; ++i) y.push_back(5);
  for (int i = 0; i < 40; ++i) y.push_back(2);
  EXPECT_EQ(pelt_l2(y, 1.0, 5), (std::vector<size_t>{30, 42}));
  // Segments shorter than min_segment are not made: a 3-step level joins a neighbour.
  std::vector<double> z(20, 0.0);
  z[10] = z[11] = z[12] = 9;
  for (size_t b : pelt_l2(z, 1.0, 5)) EXPECT_TRUE(b >= 5 && b <= 15) << b;
  EXPECT_TRUE(pelt_l2(std::vector<double>(9, 1.0), 1.0, 5).empty());  // < 2 * min_segment
}

TEST(RobustSigma, IgnoresAShiftAndSpikes) {
  NoiseSource draw(Noise::kGaussian, 3);
  std::vector<double> y;
  for (int i = 0; i < 4000; ++i)
    y.push_back(2.0 * draw() + (i >= 2000 ? 50 : 0) + (i % 97 == 0 ? 400 : 0));
  EXPECT_NEAR(robust_sigma(y), 2.0, 0.15);
}

TEST(RunningMedian, FollowsAShiftAndSkipsASpike) {
  std::vector<double> y(40, 1.0);
  for (size_t i = 20; i < 40; ++i) y[i] = 3.0;
  y[10] = 100;
  const std::vector<double> m = running_median(y, 3);
  EXPECT_EQ(m[10], 1.0);
  EXPECT_EQ(m[18], 1.0);
  EXPECT_EQ(m[21], 3.0);
}

// A level shift planted at a known step is found within +-2 steps: several lengths, sizes
// (in noise sigmas) and positions, five seeds each, and nothing else is found.
TEST(ChangePoints, PlantedShiftFoundWithinTwoSteps) {
  const double sigma = 2.0;
  int runs = 0;
  for (size_t n : {200u, 1000u, 5000u}) {
    for (double size : {3.0, 5.0, 10.0}) {
      for (double where : {0.25, 0.5, 0.8}) {
        for (uint64_t seed = 1; seed <= 5; ++seed) {
          Planted p = planted_run(n, sigma, Noise::kGaussian, seed * 7919 + n);
          const auto at = static_cast<size_t>(where * static_cast<double>(n));
          p.add_to_wall(at, kCompute, size * sigma);
          const ChangePoints cp = find_change_points(p.series);
          ASSERT_EQ(cp.shifts.size(), 1u)
              << "n=" << n << " size=" << size << " at=" << at << " seed=" << seed;
          EXPECT_LE(std::abs(cp.shifts[0].step - static_cast<int64_t>(at)), 2)
              << "n=" << n << " size=" << size << " at=" << at << " seed=" << seed;
          EXPECT_NEAR(cp.shifts[0].after_ms - cp.shifts[0].before_ms, size * sigma, 1.0);
          EXPECT_TRUE(cp.periodic.empty());
          ++runs;
        }
      }
    }
  }
  EXPECT_EQ(runs, 135);
}

// A smaller shift (1.5 sigma) in a long run is still found, less sharply.
TEST(ChangePoints, SmallShiftInALongRun) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Planted p = planted_run(4000, 2.0, Noise::kGaussian, seed);
    p.add_to_wall(2500, kCompute, 3.0);
    const ChangePoints cp = find_change_points(p.series);
    ASSERT_EQ(cp.shifts.size(), 1u) << seed;
    EXPECT_LE(std::abs(cp.shifts[0].step - 2500), 15) << seed;
  }
}

// Noisy flat runs: no change at the default penalty over 100 seeds, for Gaussian and for
// heavy-tailed (Laplace, Student-t with 3 degrees of freedom) noise; no periodic pattern and
// no wall shift either.
TEST(ChangePoints, NoFalseChangeOnFlatRuns) {
  for (Noise noise : {Noise::kGaussian, Noise::kLaplace, Noise::kStudentT3}) {
    int false_shifts = 0, false_periodic = 0, false_wall = 0;
    for (uint64_t seed = 1; seed <= 100; ++seed) {
      // Short runs, runs searched exactly and runs searched over blocks (n > 2048).
      const size_t n = seed % 10 == 0 ? 20000 : seed % 2 == 0 ? 500 : 2000;
      const Planted p = planted_run(n, 2.0, noise, seed);
      const ChangePoints cp = find_change_points(p.series);
      ASSERT_TRUE(cp.searched);
      false_shifts += static_cast<int>(cp.shifts.size());
      false_periodic += static_cast<int>(cp.periodic.size());
      false_wall += static_cast<int>(cp.wall_shifts.size());
    }
    EXPECT_EQ(false_shifts, 0) << "noise " << static_cast<int>(noise);
    EXPECT_EQ(false_periodic, 0) << "noise " << static_cast<int>(noise);
    EXPECT_EQ(false_wall, 0) << "noise " << static_cast<int>(noise);
  }
}

// Short runs (a profiler trace of 10 to 50 steps): the penalty's ln(n) has a floor of
// ln(200), so few false shifts (measured: at most 3 per 1000 flat runs per noise shape; without
// the floor 7 to 15), and a shift of 5 sigma in the middle of a 20-step run is still found.
TEST(ChangePoints, ShortRuns) {
  int false_shifts = 0;
  for (uint64_t seed = 1; seed <= 1000; ++seed) {
    const Planted p = planted_run(10 + seed % 41, 2.0, Noise::kLaplace, seed);
    false_shifts += find_change_points(p.series).shifts.empty() ? 0 : 1;
  }
  EXPECT_LE(false_shifts, 5);
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    Planted p = planted_run(20, 2.0, Noise::kGaussian, seed);
    p.add_to_wall(10, kData, 10.0);
    const ChangePoints cp = find_change_points(p.series);
    ASSERT_EQ(cp.shifts.size(), 1u) << seed;
    EXPECT_LE(std::abs(cp.shifts[0].step - 10), 2) << seed;
    EXPECT_EQ(cp.shifts[0].wall, Wall::kData);
  }
}

// Every Nth step slower: the period is found exactly, with its first step, its count, its
// excess and the wall that carries it; the spikes make no level shift, and a real shift in the
// same run is still found.
TEST(ChangePoints, PeriodicSpikePeriodFoundExactly) {
  for (size_t period : {7u, 50u, 137u}) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      Planted p = planted_run(2000, 2.0, Noise::kLaplace, seed * 31 + period);
      const size_t phase = period - 1;
      p.add_to_wall(0, kOther, 40.0, period, phase);  // +40 ms of host work (20 sigma)
      const ChangePoints cp = find_change_points(p.series);
      ASSERT_EQ(cp.periodic.size(), 1u) << "period " << period << " seed " << seed;
      const PeriodicSpikes& s = cp.periodic[0];
      EXPECT_EQ(s.period_steps, static_cast<int64_t>(period));
      EXPECT_EQ(s.first_step, static_cast<int64_t>(phase));
      EXPECT_EQ(s.occurrences, s.expected);
      EXPECT_EQ(s.occurrences, static_cast<int64_t>((2000 - phase + period - 1) / period));
      EXPECT_NEAR(s.excess_ms, 40.0, 2.0);
      EXPECT_EQ(s.wall, Wall::kOther);
      EXPECT_NEAR(s.wall_excess_ms[kOther], 40.0, 2.0);
      EXPECT_TRUE(cp.shifts.empty()) << "period " << period << " seed " << seed;
    }
  }
  // Spikes and a shift together.
  Planted p = planted_run(3000, 2.0, Noise::kGaussian, 77);
  p.add_to_wall(0, kOther, 2000.0, 500, 0);  // a 2 s checkpoint every 500th step
  p.add_to_wall(1234, kData, 10.0);
  const ChangePoints cp = find_change_points(p.series);
  ASSERT_EQ(cp.shifts.size(), 1u);
  EXPECT_LE(std::abs(cp.shifts[0].step - 1234), 2);
  ASSERT_EQ(cp.periodic.size(), 1u);
  EXPECT_EQ(cp.periodic[0].period_steps, 500);
  EXPECT_EQ(cp.periodic[0].first_step, 0);
  EXPECT_EQ(cp.periodic[0].occurrences, 6);
}

// Slow outliers at random steps are not a period, however many there are.
TEST(ChangePoints, RandomSlowStepsAreNotPeriodic) {
  for (uint64_t seed = 1; seed <= 50; ++seed) {
    Planted p = planted_run(2000, 2.0, Noise::kGaussian, seed);
    std::mt19937_64 rng(seed);
    for (int k = 0; k < 30; ++k) {
      const size_t i = rng() % 2000;
      p.series.wall_ms[i][kOther] += 50.0;
      p.series.step_ms[i] += 50.0;
    }
    const ChangePoints cp = find_change_points(p.series);
    EXPECT_TRUE(cp.periodic.empty()) << seed << " period " << cp.periodic[0].period_steps;
    EXPECT_TRUE(cp.shifts.empty()) << seed;
  }
}

// A shift carried by the data wall is attributed to data, and the per-wall changes add up to
// the change of step time.
TEST(ChangePoints, ShiftCarriedByDataIsAttributedToData) {
  Planted p = planted_run(1000, 2.0, Noise::kGaussian, 5);
  p.add_to_wall(400, kData, 8.0);
  const ChangePoints cp = find_change_points(p.series);
  ASSERT_EQ(cp.shifts.size(), 1u);
  const LevelShift& s = cp.shifts[0];
  EXPECT_EQ(s.wall, Wall::kData);
  EXPECT_NEAR(s.wall_change_ms[kData], 8.0, 0.8);
  double sum = 0;
  for (double w : s.wall_change_ms) sum += w;
  EXPECT_NEAR(sum, s.after_ms - s.before_ms, 1e-9);
  // A faster step: the largest drop names the wall.
  Planted q = planted_run(1000, 2.0, Noise::kGaussian, 6);
  q.add_to_wall(600, kCompute, -12.0);
  const ChangePoints cq = find_change_points(q.series);
  ASSERT_EQ(cq.shifts.size(), 1u);
  EXPECT_EQ(cq.shifts[0].wall, Wall::kCompute);
  EXPECT_LT(cq.shifts[0].after_ms, cq.shifts[0].before_ms);
}

// Data up and compute down by the same amount: step time shows nothing, the walls' own
// searches do.
TEST(ChangePoints, WallShiftThatStepTimeHides) {
  Planted p = planted_run(1000, 1.0, Noise::kGaussian, 9);
  p.add_to_wall(500, kData, 10.0);
  p.add_to_wall(500, kCompute, -10.0);
  const ChangePoints cp = find_change_points(p.series);
  EXPECT_TRUE(cp.shifts.empty());
  ASSERT_EQ(cp.wall_shifts.size(), 2u);
  for (const WallShift& w : cp.wall_shifts) {
    EXPECT_LE(std::abs(w.step - 500), 2);
    EXPECT_TRUE(w.wall == Wall::kData || w.wall == Wall::kCompute);
    EXPECT_NEAR(std::abs(w.after_ms - w.before_ms), 10.0, 1.0);
  }
}

TEST(ChangePoints, TooFewStepsAreNotSearched) {
  const Planted p = planted_run(9, 1.0, Noise::kGaussian, 1);
  const ChangePoints cp = find_change_points(p.series);
  EXPECT_FALSE(cp.searched);
  EXPECT_TRUE(change_point_lines(change_points_json(cp)).empty());
}

// The series from rows: the slowest device's row of each step, warm-up and slow-start steps
// left out, walls summing to the step time.
TEST(StepSeries, SlowestDeviceRowsWithoutWarmup) {
  std::vector<StepRow> rows;
  for (int64_t i = 0; i < 6; ++i) {
    for (uint16_t dev = 0; dev < 2; ++dev) {
      StepRow r;
      r.step_index = i;
      r.device = dev;
      r.warmup = i == 0;
      r.cat.compute = 1'000'000 + dev * 500'000;
      r.cat.data_wait = 200'000 * i;
      r.window_begin = i * 10'000'000;
      r.window_end = r.window_begin + r.cat.sum();
      rows.push_back(r);
    }
  }
  RunSummary summary;
  summary.slow_start_steps = {1};
  const StepSeries s = step_series(rows, summary);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s.step_index.front(), 2);
  for (size_t k = 0; k < s.size(); ++k) {
    const double i = static_cast<double>(s.step_index[k]);
    EXPECT_NEAR(s.step_ms[k], 1.5 + 0.2 * i, 1e-12);
    EXPECT_NEAR(s.wall_ms[k][kCompute], 1.5, 1e-12);
    double sum = 0;
    for (double w : s.wall_ms[k]) sum += w;
    EXPECT_NEAR(sum, s.step_ms[k], 1e-12);
  }
}

// The JSON section and the terminal lines of a planted run.
TEST(ChangePoints, SectionAndTerminalLines) {
  Planted p = planted_run(20000, 2.0, Noise::kGaussian, 11);
  p.add_to_wall(12400, kData, 18.0);
  p.add_to_wall(0, kOther, 2100.0, 500, 499);
  const ChangePoints cp = find_change_points(p.series);
  const nlohmann::json j = change_points_json(cp);
  EXPECT_EQ(j["method"], "pelt_l2");
  ASSERT_EQ(j["shifts"].size(), 1u);
  EXPECT_EQ(j["shifts"][0]["wall"], "data");
  ASSERT_EQ(j["periodic"].size(), 1u);
  EXPECT_EQ(j["periodic"][0]["period_steps"], 500);
  EXPECT_EQ(j["periodic"][0]["wall"], "other");
  const std::vector<std::string> lines = change_point_lines(j);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("from step 12,40"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("data wall"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("every 500 steps"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("+2.10 s"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("checkpointing"), std::string::npos) << lines[1];
  for (const std::string& l : lines) std::printf("%s\n", l.c_str());
}

}  // namespace
}  // namespace gpuacct
