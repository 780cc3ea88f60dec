// Counter attribution (counter_attribution.h): planted per-interval values come back per wall
// and per step; random intervals agree with a per-nanosecond oracle written here on its own.
#include "analysis/accounting/counter_attribution.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_accountant_test_util.h"

namespace gpuacct {
namespace {

using testing_util::Trace;
using testing_util::us;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

CounterSample sample(TimeNs a, TimeNs b, double tensor, double sm = kNaN, uint16_t device = 0) {
  CounterSample s;
  s.start = a;
  s.end = b;
  for (double& v : s.pct) v = kNaN;
  s.pct[static_cast<size_t>(CounterMetric::kTensorActive)] = tensor;
  s.pct[static_cast<size_t>(CounterMetric::kSmActive)] = sm;
  s.device = device;
  return s;
}

CategorySegment seg(TimeNs a, TimeNs b, Category c) {
  return CategorySegment{0, 0, a, b, c};
}

double tensor(const CounterTotals& t) {
  return t.mean(CounterMetric::kTensorActive);
}
const CounterTotals& wall(const std::array<CounterTotals, kWallCount>& w, Wall k) {
  return w[static_cast<size_t>(k)];
}

TEST(CounterAttribution, StraddlingSamplesSplitAtWallChangesAndGapsAreLeftOut) {
  // compute [0,100) comm [100,150) compute [150,250); samples: 80% then 10% over the first
  // compute half, one 50% sample across the wall change, no sample over [200,250).
  const std::vector<CategorySegment> segs = {seg(0, 100, Category::kCompute),
                                             seg(100, 150, Category::kCommExposed),
                                             seg(150, 250, Category::kCompute)};
  const std::vector<CounterSample> samples = {sample(0, 50, 80), sample(50, 100, 10),
                                              sample(100, 200, 50)};
  const auto w = attribute_counters_by_wall(segs, samples);
  EXPECT_NEAR(tensor(wall(w, Wall::kCompute)), (50 * 80 + 50 * 10 + 50 * 50) / 150.0, 1e-9);
  EXPECT_EQ(wall(w, Wall::kCompute).covered_ns[static_cast<size_t>(CounterMetric::kTensorActive)],
            150);
  EXPECT_NEAR(tensor(wall(w, Wall::kCommunication)), 50.0, 1e-9);
  // A metric no sample gave, and a wall no sample touched: NaN, nothing covered.
  EXPECT_TRUE(std::isnan(wall(w, Wall::kCompute).mean(CounterMetric::kDram)));
  EXPECT_TRUE(std::isnan(tensor(wall(w, Wall::kData))));
  EXPECT_FALSE(wall(w, Wall::kData).any());
}

TEST(CounterAttribution, SampleValidity) {
  EXPECT_TRUE(counter_sample_valid(sample(0, 10, 100.0)));
  EXPECT_FALSE(counter_sample_valid(sample(10, 10, 5)));
  EXPECT_FALSE(counter_sample_valid(sample(0, 10, 100.5)));
  EXPECT_FALSE(counter_sample_valid(sample(0, 10, -1)));
  EXPECT_FALSE(counter_sample_valid(sample(0, 10, std::numeric_limits<double>::infinity())));
  EXPECT_FALSE(counter_sample_valid(sample(0, 10, 5, kNaN, kHostOnlyDevice)));
}

// The oracle: walk every nanosecond, find its segment by linear search, add every sample
// holding it.  Quadratic and obviously right.
TEST(CounterAttribution, RandomIntervalsMatchAPerNanosecondOracle) {
  std::mt19937_64 rng(18);
  for (int trial = 0; trial < 300; ++trial) {
    const TimeNs span = 50 + static_cast<TimeNs>(rng() % 400);
    std::vector<CategorySegment> segs;
    for (TimeNs t = static_cast<TimeNs>(rng() % 10); t < span;) {
      const TimeNs len = 1 + static_cast<TimeNs>(rng() % 40);
      const auto c = static_cast<Category>(rng() % kCategoryCount);
      segs.push_back(seg(t, std::min(span, t + len), c));
      t += len + static_cast<TimeNs>(rng() % 3);  // sometimes a hole between segments
    }
    std::vector<CounterSample> samples;
    for (TimeNs t = static_cast<TimeNs>(rng() % 30) - 10; t < span + 20;) {
      const TimeNs len = 1 + static_cast<TimeNs>(rng() % 60);
      const double v = static_cast<double>(rng() % 10001) / 100.0;
      const double sm = rng() % 4 == 0 ? kNaN : static_cast<double>(rng() % 101);
      samples.push_back(sample(t, t + len, v, sm));
      // Mostly back to back, sometimes a gap, sometimes an overlap with the previous one.
      t += len + static_cast<TimeNs>(rng() % 7) - 2;
    }
    // The contract: sorted by start (a short sample can start before the previous one).
    std::stable_sort(
        samples.begin(), samples.end(),
        [](const CounterSample& a, const CounterSample& b) { return a.start < b.start; });
    const auto got = attribute_counters_by_wall(segs, samples);

    std::array<double, kWallCount> sum_t{}, sum_s{};
    std::array<int64_t, kWallCount> cov_t{}, cov_s{};
    for (TimeNs t = -20; t < span + 100; ++t) {
      const CategorySegment* at = nullptr;
      for (const auto& s : segs)
        if (s.start <= t && t < s.end) at = &s;
      if (at == nullptr) continue;
      const auto k = static_cast<size_t>(wall_of(at->category));
      for (const auto& s : samples) {
        if (!(s.start <= t && t < s.end)) continue;
        sum_t[k] += s.pct[1];
        ++cov_t[k];
        if (!std::isnan(s.pct[0])) {
          sum_s[k] += s.pct[0];
          ++cov_s[k];
        }
      }
    }
    for (size_t k = 0; k < static_cast<size_t>(kWallCount); ++k) {
      const CounterTotals& g = got[k];
      ASSERT_EQ(g.covered_ns[1], cov_t[k]) << "trial " << trial << " wall " << k;
      ASSERT_EQ(g.covered_ns[0], cov_s[k]) << "trial " << trial << " wall " << k;
      if (cov_t[k] > 0) {
        ASSERT_NEAR(g.mean(CounterMetric::kTensorActive), sum_t[k] / static_cast<double>(cov_t[k]),
                    1e-9);
      }
      if (cov_s[k] > 0) {
        ASSERT_NEAR(g.mean(CounterMetric::kSmActive), sum_s[k] / static_cast<double>(cov_s[k]),
                    1e-9);
      }
    }
  }
}

// Through the accountant: four steps of 1 ms; each computes for 600 us, then waits 400 us on
// an exposed collective.  Planted per-interval values, 100 us intervals on a grid: 80% tensor
// activity over the first compute half, 10% over the second, 0 during the collective -- except
// that one 200 us interval at 40% straddles every step edge (and the comm -> compute change
// there), and step 2 has no samples over its second compute half (a gap).
TEST(CounterAttribution, PlantedValuesComeBackPerStep) {
  Trace t;
  const TimeNs step = us(1000);
  for (int i = 0; i < 4; ++i) {
    const TimeNs b = i * step;
    t.step(b, b + step, i);
    t.kernel(b + us(1), b + us(2), b, b + us(600));
    t.collective(b + us(3), b + us(4), b + us(600), b + step);
  }
  constexpr double kHigh = 80, kLow = 10, kEdge = 40;
  for (int i = 0; i < 4; ++i) {
    const TimeNs b = i * step;
    for (TimeNs a = (i == 0 ? 0 : us(100)); a < us(900); a += us(100)) {
      if (i == 2 && a >= us(300) && a < us(600)) continue;  // the gap
      const double v = a < us(300) ? kHigh : a < us(600) ? kLow : 0.0;
      t.b.counter_samples.push_back(sample(b + a, b + a + us(100), v, 55.0));
    }
    // The straddling interval [b + 900 us, b + 1100 us); the last step ends with a plain one.
    const TimeNs len = i == 3 ? us(100) : us(200);
    t.b.counter_samples.push_back(sample(b + us(900), b + us(900) + len, kEdge, 55.0));
  }
  StepAccountant acc(testing_util::no_warmup());
  acc.add(t.b);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 4u);
  for (const StepRow& r : acc.rows()) {
    SCOPED_TRACE(r.step_index);
    // Covered compute time per value: [0, 100) us carries the straddling 40% after step 0.
    const double edge_us = r.step_index == 0 ? 0 : 100;
    const double high_us = 300 - edge_us;
    const double low_us = r.step_index == 2 ? 0 : 300;
    const double want =
        (edge_us * kEdge + high_us * kHigh + low_us * kLow) / (edge_us + high_us + low_us);
    EXPECT_NEAR(r.counters.mean(CounterMetric::kTensorActive), want, 0.5);
    EXPECT_EQ(r.counters.covered_ns[static_cast<size_t>(CounterMetric::kTensorActive)],
              us(edge_us + high_us + low_us));
    EXPECT_NEAR(r.counters.mean(CounterMetric::kSmActive), 55.0, 1e-9);
    EXPECT_TRUE(std::isnan(r.counters.mean(CounterMetric::kDram)));
  }
  EXPECT_EQ(acc.stats().get(Stat::late_counter_samples_dropped), 0);
}

TEST(CounterAttribution, NoSamplesLeaveRowsWithoutCounters) {
  Trace t;
  t.step(0, us(1000), 0);
  t.kernel(us(1), us(2), 0, us(600));
  StepAccountant acc(testing_util::no_warmup());
  acc.add(t.b);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 1u);
  EXPECT_FALSE(acc.rows()[0].counters.any());
  EXPECT_TRUE(std::isnan(acc.rows()[0].counters.mean(CounterMetric::kTensorActive)));
}

TEST(CounterAttribution, LateSamplesAreCountedAsDataLoss) {
  StepAccountant acc(testing_util::no_warmup());
  Trace t;
  t.step(0, us(1000), 0);
  t.kernel(us(1), us(2), 0, us(600));
  t.step(us(1000), us(2000), 1);
  t.kernel(us(1001), us(1002), us(1000), us(1600));
  acc.add(t.b);
  acc.advance_watermark(us(1500));  // step 0 is finalised
  ASSERT_EQ(acc.rows().size(), 1u);
  acc.add_counter_sample(sample(us(100), us(200), 50));    // late: step 0 is done
  acc.add_counter_sample(sample(us(1100), us(1200), 40));  // in time for step 1
  acc.add_counter_sample(sample(us(1100), us(1000), 40));  // invalid: ends before it starts
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 2u);
  EXPECT_EQ(acc.stats().get(Stat::late_counter_samples_dropped), 1);
  EXPECT_EQ(acc.stats().get(Stat::invalid_events_skipped), 1);
  EXPECT_NEAR(acc.rows()[1].counters.mean(CounterMetric::kTensorActive), 40.0, 1e-9);
}

// Samples waiting for an unfinalised step are held events like its ops: they count toward the
// pending-event bound and show in the delivery section's held_events_peak.
TEST(CounterAttribution, SamplesHeldForAnOpenStepCountAsHeldEvents) {
  StepAccountant acc(testing_util::no_warmup());
  Trace t;
  t.step(0, us(1000), 0);
  t.kernel(us(1), us(2), 0, us(600));
  t.step(us(1000), us(100000), 1);
  t.kernel(us(1001), us(1002), us(1000), us(99000));
  acc.add(t.b);
  for (TimeNs a = us(1000); a < us(1500); a += us(1))
    acc.add_counter_sample(sample(a, a + us(1), 30));
  acc.advance_watermark(us(1500));  // step 0 is finalised, step 1 holds its 500 samples
  ASSERT_EQ(acc.rows().size(), 1u);
  EXPECT_GE(acc.delivery_lag().held_peak(), 500);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 2u);
  EXPECT_NEAR(acc.rows()[1].counters.mean(CounterMetric::kTensorActive), 30.0, 1e-9);
}

}  // namespace
}  // namespace gpuacct
