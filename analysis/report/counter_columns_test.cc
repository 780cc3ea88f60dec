// The counter fields of step rows (counter_columns.h): JSON round trip through the step stream
// reader, absent without samples, CSV columns empty for a metric with no covered time.
#include "analysis/report/counter_columns.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "analysis/input/step_stream_reader.h"
#include "analysis/report/report.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {
namespace {

StepRow row_with_counters() {
  StepRow r;
  r.window_begin = 0;
  r.window_end = 1000;
  CounterSample s;
  s.start = 0;
  s.end = 400;
  for (double& v : s.pct) v = std::numeric_limits<double>::quiet_NaN();
  s.pct[static_cast<size_t>(CounterMetric::kTensorActive)] = 23.5;
  s.pct[static_cast<size_t>(CounterMetric::kSmActive)] = 61.25;
  r.counters.add(s, 400);
  s.pct[static_cast<size_t>(CounterMetric::kTensorActive)] = 80;
  r.counters.add(s, 100);
  return r;
}

TEST(CounterColumns, RowJsonRoundTripsThroughTheStreamReader) {
  const StepRow r = row_with_counters();
  const nlohmann::json j = step_row_to_json(r);
  ASSERT_TRUE(j.contains("counters"));
  EXPECT_TRUE(j["counters"]["dram_pct"].is_null());
  EXPECT_EQ(j["counters"]["tensor_active_covered_ns"], 500);
  auto back = step_row_from_json(j);
  ASSERT_TRUE(back.ok()) << back.status().message();
  for (size_t i = 0; i < kCounterMetricCount; ++i) {
    const auto m = static_cast<CounterMetric>(i);
    EXPECT_EQ(back->counters.covered_ns[i], r.counters.covered_ns[i]);
    if (std::isnan(r.counters.mean(m))) {
      EXPECT_TRUE(std::isnan(back->counters.mean(m)));
    } else {
      EXPECT_NEAR(back->counters.mean(m), r.counters.mean(m), 1e-12);
    }
  }
  EXPECT_NEAR(back->counters.mean(CounterMetric::kTensorActive), (400 * 23.5 + 100 * 80) / 500.0,
              1e-12);
}

TEST(CounterColumns, RowsWithoutSamplesHaveNoSectionAndEmptyColumns) {
  StepRow r;
  EXPECT_FALSE(step_row_to_json(r).contains("counters"));
  EXPECT_EQ(counters_csv(r.counters), ",,,,");
  const std::string csv = step_rows_csv({row_with_counters()});
  const std::string last_line = csv.substr(csv.rfind('\n', csv.size() - 2) + 1);
  // The last five fields: sm 61.25, tensor (400 x 23.5 + 100 x 80) / 500, three empty.
  const size_t sm_at = last_line.find(",61.25,");
  ASSERT_NE(sm_at, std::string::npos) << last_line;
  const std::string rest = last_line.substr(sm_at + 7);
  EXPECT_NEAR(std::stod(rest), (400 * 23.5 + 100 * 80) / 500.0, 1e-12) << last_line;
  EXPECT_EQ(rest.substr(rest.find(',')), ",,,\n") << last_line;
}

TEST(CounterColumns, BadCountersAreErrorsNamingTheKey) {
  nlohmann::json j = step_row_to_json(row_with_counters());
  j["counters"]["tensor_active_pct"] = 120;
  auto r = step_row_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor_active_pct"), std::string::npos);
  j["counters"]["tensor_active_pct"] = 20;
  j["counters"]["sm_active_covered_ns"] = -1;
  EXPECT_FALSE(step_row_from_json(j).ok());
}

// A summary row of `compute_ns` compute in 1 ms, the rest host time, with the tensor activity
// (value, covered ns) pairs given.
StepRow summary_row(int64_t index, int64_t compute_ns,
                    std::initializer_list<std::pair<double, int64_t>> tensor) {
  StepRow r;
  r.step_index = index;
  r.window_begin = index * 1'000'000;
  r.window_end = r.window_begin + 1'000'000;
  r.cat.compute = compute_ns;
  r.cat.host_other = 1'000'000 - compute_ns;
  r.gpu_busy = compute_ns;
  r.kernels = 10;
  for (const auto& [value, ns] : tensor) {
    CounterSample s;
    for (double& v : s.pct) v = std::numeric_limits<double>::quiet_NaN();
    s.pct[static_cast<size_t>(CounterMetric::kTensorActive)] = value;
    r.counters.add(s, ns);
  }
  return r;
}

TEST(CounterColumns, SummaryWeighsEachRowByTheComputeTimeItsSamplesCovered) {
  // Compute-bound: 95% compute.  Step 0: half of its compute time at 80%, half at 10%; step 1:
  // 20% over a quarter of its compute time only (a gap in the sampling); step 2: no samples.
  std::vector<StepRow> rows = {summary_row(0, 950'000, {{80, 475'000}, {10, 475'000}}),
                               summary_row(1, 950'000, {{20, 237'500}}),
                               summary_row(2, 950'000, {})};
  const RunSummary s = summarize(rows, Stats{});
  const double want = (475'000 * 80.0 + 475'000 * 10.0 + 237'500 * 20.0) / 1'187'500.0;
  EXPECT_NEAR(s.counters.mean(CounterMetric::kTensorActive), want, 1e-9);
  EXPECT_NEAR(measured_tensor_mfu(s), want / 100.0 * 0.95, 1e-9);
  ASSERT_EQ(s.verdict.bound, "compute");
  char expect[160];
  std::snprintf(expect, sizeof expect,
                "compute 95%% of step; during compute the tensor pipes were busy %.0f%% -> "
                "kernel efficiency is the next wall",
                want);
  EXPECT_EQ(counters_summary_line(s), expect);
  const nlohmann::json j = counters_summary_json(s, 0.31);
  EXPECT_EQ(j["line"], expect);
  EXPECT_EQ(j["declared_mfu"], 0.31);
  EXPECT_NEAR(j["compute_time"]["tensor_active_pct"].get<double>(), want, 1e-9);
}

TEST(CounterColumns, NoSamplesNoSummarySectionOrLine) {
  const RunSummary s = summarize({summary_row(0, 950'000, {})}, Stats{});
  EXPECT_EQ(counters_summary_line(s), "");
  EXPECT_TRUE(counters_summary_json(s, 0.5).is_null());
  const nlohmann::json report =
      summary_report({summary_row(0, 950'000, {})}, Stats{}, AccountingConfig{}, RunMetadata{});
  EXPECT_FALSE(report["summary"].contains("counters"));
}

TEST(CounterColumns, TheTerminalSummaryShowsTheLine) {
  const std::vector<StepRow> rows = {summary_row(0, 950'000, {{23, 950'000}})};
  const nlohmann::json report = summary_report(rows, Stats{}, AccountingConfig{}, RunMetadata{});
  ASSERT_TRUE(report["summary"].contains("counters"));
  auto text = render_terminal_summary(report);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("counters: compute 95% of step; during compute the tensor pipes were "
                       "busy 23% -> kernel efficiency is the next wall\n"),
            std::string::npos)
      << *text;
}

}  // namespace
}  // namespace gpuacct
