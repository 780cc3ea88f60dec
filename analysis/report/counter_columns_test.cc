// The counter fields of step rows (counter_columns.h): JSON round trip through the step stream
// reader, absent without samples, CSV columns empty for a metric with no covered time.
#include "analysis/report/counter_columns.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "analysis/input/step_stream_reader.h"
#include "analysis/report/report.h"

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

}  // namespace
}  // namespace gpuacct
