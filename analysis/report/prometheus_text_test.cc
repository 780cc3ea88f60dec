#include "analysis/report/prometheus_text.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace gpuacct {
namespace {

const PrometheusIdentity kId{"job7", "node-a", 3};
const std::string kDev0 = R"(job="job7",host="node-a",rank="3",device="0")";
const std::string kDev1 = R"(job="job7",host="node-a",rank="3",device="1")";

// A row of `compute_ns` compute and `data_ns` data wait (its window is their sum).
StepRow row(int64_t index, uint16_t device, int64_t compute_ns, int64_t data_ns) {
  StepRow r;
  r.step_index = index;
  r.device = device;
  r.window_begin = 1'000'000'000 * index;
  r.window_end = r.window_begin + compute_ns + data_ns;
  r.cat.compute = compute_ns;
  r.cat.data_wait = data_ns;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// The value of the one sample whose name and labels are `series` ("name{labels}").
std::string value_of(const std::string& text, const std::string& series) {
  std::string found;
  int hits = 0;
  for (const std::string& line : lines_of(text)) {
    if (line.rfind(series + " ", 0) == 0) {
      found = line.substr(series.size() + 1);
      ++hits;
    }
  }
  EXPECT_EQ(hits, 1) << series << "\n" << text;
  return found;
}

TEST(PrometheusText, SecondsAreExactDecimals) {
  EXPECT_EQ(prometheus_seconds(0), "0");
  EXPECT_EQ(prometheus_seconds(500'000), "0.0005");
  EXPECT_EQ(prometheus_seconds(2'000'000'000), "2");
  EXPECT_EQ(prometheus_seconds(1'234'567'891), "1.234567891");
  EXPECT_EQ(prometheus_seconds(1), "0.000000001");
  EXPECT_EQ(prometheus_seconds(-1'500'000'000), "-1.5");
  EXPECT_EQ(prometheus_seconds(INT64_MIN), "-9223372036.854775808");
}

TEST(PrometheusText, LabelValuesAreEscaped) {
  EXPECT_EQ(prometheus_label_value("plain"), "plain");
  EXPECT_EQ(prometheus_label_value("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  // Not UTF-8: the byte spelled \xE9 (json_safe_utf8), whose backslash is then escaped.
  EXPECT_EQ(prometheus_label_value("caf\xe9"), "caf\\\\xE9");
}

TEST(PrometheusText, NoRowsStillHasEveryFamilyAndDataLoss) {
  Stats stats;
  stats.add(Stat::cupti_records_dropped, 5);
  stats.add(Stat::host_records_dropped, 2);
  stats.add(Stat::gpu_ops_received, 1000);     // info: not data loss
  stats.add(Stat::invalid_events_skipped, 4);  // error: not data loss
  const std::string text = PrometheusMetrics{}.render(kId, stats);
  for (const char* family : {"gpuacct_step_seconds histogram", "gpuacct_wall_seconds_total counter",
                             "gpuacct_steps_total counter", "gpuacct_data_loss_total counter"}) {
    EXPECT_NE(text.find(std::string("# TYPE ") + family + "\n"), std::string::npos) << family;
  }
  EXPECT_EQ(value_of(text, R"(gpuacct_data_loss_total{job="job7",host="node-a",rank="3"})"), "7");
  EXPECT_EQ(text.find("device="), std::string::npos);
  EXPECT_EQ(text.back(), '\n');
}

TEST(PrometheusText, DataLossTotalSaturates) {
  Stats stats;
  stats.set(Stat::cupti_records_dropped, INT64_MAX - 1);
  stats.add(Stat::stream_rows_lost, 5);
  EXPECT_EQ(stats.data_loss_total(), INT64_MAX);
  EXPECT_TRUE(stats.has_data_loss());
  EXPECT_FALSE(Stats{}.has_data_loss());
}

TEST(PrometheusText, HistogramBucketsAreCumulativeAndInclusive) {
  PrometheusMetrics m;
  m.add_row(row(0, 0, 500'000, 0));              // exactly on the first bound: le="0.0005"
  m.add_row(row(1, 0, 400'000, 100'001));        // just above it
  m.add_row(row(2, 0, 30'000'000, 20'000'000));  // 50 ms
  m.add_row(row(3, 0, 61'000'000'000, 0));       // above every bound: +Inf only
  const std::string text = m.render(kId, Stats{});
  auto bucket = [&](const char* le) {
    return value_of(text, "gpuacct_step_seconds_bucket{" + kDev0 + ",le=\"" + le + "\"}");
  };
  EXPECT_EQ(bucket("0.0005"), "1");
  EXPECT_EQ(bucket("0.001"), "2");
  EXPECT_EQ(bucket("0.025"), "2");
  EXPECT_EQ(bucket("0.05"), "3");
  EXPECT_EQ(bucket("30"), "3");
  EXPECT_EQ(bucket("60"), "3");
  EXPECT_EQ(bucket("+Inf"), "4");
  EXPECT_EQ(value_of(text, "gpuacct_step_seconds_count{" + kDev0 + "}"), "4");
  // 0.0005 + 0.000500001 + 0.05 + 61
  EXPECT_EQ(value_of(text, "gpuacct_step_seconds_sum{" + kDev0 + "}"), "61.051000001");
  EXPECT_EQ(m.rows(), 4);
}

TEST(PrometheusText, WallsAndStepsPerDevice) {
  PrometheusMetrics m;
  m.add_row(row(0, 0, 3'000'000, 1'000'000));
  m.add_row(row(0, 1, 2'000'000, 0));
  m.add_row(row(1, 0, 5'000'000, 2'500'000));
  StepRow comm = row(1, 1, 0, 0);
  comm.cat.comm_exposed = 7'000'000;
  comm.window_end += 7'000'000;
  m.add_row(comm);
  const std::string text = m.render(kId, Stats{});
  auto wall = [&](const std::string& dev, const char* name) {
    return value_of(text, "gpuacct_wall_seconds_total{" + dev + ",wall=\"" + name + "\"}");
  };
  EXPECT_EQ(wall(kDev0, "compute"), "0.008");
  EXPECT_EQ(wall(kDev0, "data"), "0.0035");
  EXPECT_EQ(wall(kDev0, "communication"), "0");
  EXPECT_EQ(wall(kDev1, "compute"), "0.002");
  EXPECT_EQ(wall(kDev1, "communication"), "0.007");
  // Every wall of the taxonomy, once per device.
  for (const WallInfo& w : kWalls) wall(kDev0, w.name.data());
  EXPECT_EQ(value_of(text, "gpuacct_steps_total{" + kDev0 + "}"), "2");
  EXPECT_EQ(value_of(text, "gpuacct_steps_total{" + kDev1 + "}"), "2");
  EXPECT_EQ(value_of(text, "gpuacct_data_loss_total{job=\"job7\",host=\"node-a\",rank=\"3\"}"),
            "0");
  // Device 0's samples come before device 1's in each family.
  EXPECT_LT(text.find("gpuacct_steps_total{" + kDev0), text.find("gpuacct_steps_total{" + kDev1));
}

TEST(PrometheusText, HostOnlyRowsAreDeviceMinusOneAndIdentityIsEscaped) {
  PrometheusMetrics m;
  m.add_row(row(0, kHostOnlyDevice, 0, 4'000'000));
  const PrometheusIdentity id{"a\"b", "host\\x", -1};
  const std::string text = m.render(id, Stats{});
  EXPECT_EQ(
      value_of(text, R"(gpuacct_steps_total{job="a\"b",host="host\\x",rank="-1",device="-1"})"),
      "1");
}

TEST(PrometheusText, NeverTheStepNumber) {
  PrometheusMetrics m;
  for (int64_t i = 0; i < 100; ++i) m.add_row(row(i, 0, 1'000'000, 0));
  const std::string text = m.render(kId, Stats{});
  EXPECT_EQ(text.find("step_index"), std::string::npos);
  EXPECT_EQ(text.find("step="), std::string::npos);
  // One series per family per device however many steps: 18 buckets + sum + count, 5 walls,
  // 1 steps, 1 data loss, and 2 comment lines per family.
  EXPECT_EQ(lines_of(text).size(), size_t{20 + kWallCount + 1 + 1 + 8});
}

}  // namespace
}  // namespace gpuacct
