#include "analysis/run_summary.h"

#include <gtest/gtest.h>

namespace gpuacct {
namespace {

StepRow row(int64_t index, CategoryNs c, bool warmup = false) {
  StepRow r;
  r.step_index = index;
  r.warmup = warmup;
  r.window_begin = index * 1'000'000'000;
  r.window_end = r.window_begin + c.sum();
  r.cat = c;
  r.gpu_busy = c.compute + c.comm_exposed + c.copy_input + c.copy_other;
  return r;
}

TEST(Percentile, Interpolates) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({5}, 99), 5);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, 90), 10);
}

TEST(RunSummary, DataBandsAndWhatIf) {
  CategoryNs c;
  c.compute = 6'000'000;
  c.data_wait = 3'000'000;
  c.copy_input = 1'000'000;  // data wall = 40%
  std::vector<StepRow> rows{row(0, c, true), row(1, c), row(2, c)};
  const RunSummary s = summarize(rows, Stats{});
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.warmup_steps, 1);
  EXPECT_NEAR(s.walls.share[static_cast<size_t>(Wall::kData)], 0.4, 1e-12);
  EXPECT_EQ(s.verdict.bound, "data");
  EXPECT_EQ(s.verdict.severity, Severity::kHigh);
  EXPECT_NEAR(s.verdict.mean_step_ms, 10.0, 1e-9);
  EXPECT_NEAR(s.verdict.what_if_step_ms, 6.0, 1e-9);
  EXPECT_NE(s.verdict.recommendation.find("num_workers"), std::string::npos);
}

TEST(RunSummary, ModerateLaunchAndCompute) {
  CategoryNs c;
  c.compute = 95;
  c.launch_gap = 5;  // 5%: moderate launch (3..15)
  const RunSummary s = summarize({row(0, c), row(1, c)}, Stats{});
  EXPECT_EQ(s.verdict.bound, "launch");
  EXPECT_EQ(s.verdict.severity, Severity::kModerate);
  EXPECT_NE(s.verdict.recommendation.find("CUDA graphs"), std::string::npos);

  CategoryNs d;
  d.compute = 99;
  d.launch_gap = 1;  // below every band
  const RunSummary t = summarize({row(0, d)}, Stats{});
  EXPECT_EQ(t.verdict.bound, "compute");
}

TEST(RunSummary, HighBeatsModerateThenLargestShare) {
  CategoryNs c;
  c.compute = 50;
  c.comm_exposed = 16;  // high (>= 15)
  c.data_wait = 19;     // moderate (< 20) though larger
  c.launch_gap = 15;    // high, smaller than comm? no: equal band, 15 < 16
  const RunSummary s = summarize({row(0, c)}, Stats{});
  EXPECT_EQ(s.verdict.bound, "communication");
  EXPECT_EQ(s.verdict.severity, Severity::kHigh);
}

TEST(RunSummary, WallSharesSumToOne) {
  CategoryNs c{10, 20, 30, 40, 50, 60, 70};
  const RunSummary s = summarize({row(0, c), row(1, c)}, Stats{});
  double sum = 0;
  for (double v : s.walls.share) sum += v;
  EXPECT_NEAR(sum, 1.0, 1e-12);
  EXPECT_EQ(s.walls.total_ns, 2 * c.sum());
}

TEST(RunSummary, NoGpuAndDataLossNotes) {
  CategoryNs c;
  c.data_wait = 10;
  c.host_other = 10;
  StepRow r = row(0, c);
  r.device = 0xFFFF;
  Stats st;
  st.add(Stat::cupti_records_dropped, 5);
  const RunSummary s = summarize({r}, st);
  EXPECT_EQ(s.verdict.bound, "none");
  EXPECT_NE(s.verdict.headline.find("No GPU activity"), std::string::npos);
  ASSERT_FALSE(s.verdict.notes.empty());
  EXPECT_NE(s.verdict.notes.back().find("lost"), std::string::npos);
}

TEST(RunSummary, ModelFlopsGiveAchievedThroughput) {
  CategoryNs c;
  c.compute = 8'000'000;
  c.data_wait = 2'000'000;  // 10 ms steps
  StepRow a = row(0, c), b = row(1, c), warm = row(2, c, true);
  a.flops = 5e12;
  b.flops = 5e12;
  warm.flops = 1e15;  // left out
  const RunSummary s = summarize({a, b, warm}, Stats{});
  EXPECT_EQ(s.steps_with_flops, 2);
  EXPECT_NEAR(s.flops_per_step, 5e12, 1);
  EXPECT_NEAR(s.achieved_tflops, 500.0, 1e-6);  // 5e12 FLOP per 10 ms
  EXPECT_DOUBLE_EQ(peak_bf16_tflops("NVIDIA H200"), 989);
  EXPECT_DOUBLE_EQ(peak_bf16_tflops("NVIDIA H100 PCIe"), 756);
  EXPECT_DOUBLE_EQ(peak_bf16_tflops("NVIDIA A100-SXM4-80GB"), 312);
  EXPECT_DOUBLE_EQ(peak_bf16_tflops("simulated GPU"), 0);
}

}  // namespace
}  // namespace gpuacct
