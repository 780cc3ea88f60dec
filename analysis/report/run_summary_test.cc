#include "analysis/report/run_summary.h"

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

// One rank of a multi-rank job whose wall is communication: the verdict says that waiting for
// another rank is part of it and points to the job view; a single process, or another wall,
// does not get the note.
TEST(RunSummary, CommunicationOfOneRankPointsToTheJobView) {
  CategoryNs c;
  c.compute = 5'000'000;
  c.comm_exposed = 5'000'000;
  const std::vector<StepRow> rows{row(0, c), row(1, c), row(2, c)};
  const auto has_note = [](const RunSummary& s) {
    for (const std::string& n : s.verdict.notes) {
      if (n.find("gpuacct job") != std::string::npos) return true;
    }
    return false;
  };
  RunMetadata meta;
  meta.world_size = 8;
  const RunSummary ranked = summarize(rows, Stats{}, VerdictBands{}, &meta);
  EXPECT_EQ(ranked.verdict.bound, "communication");
  EXPECT_TRUE(has_note(ranked));
  meta.world_size = 1;
  EXPECT_FALSE(has_note(summarize(rows, Stats{}, VerdictBands{}, &meta)));
  CategoryNs d;
  d.compute = 5'000'000;
  d.data_wait = 5'000'000;
  meta.world_size = 8;
  EXPECT_FALSE(has_note(summarize({row(0, d), row(1, d)}, Stats{}, VerdictBands{}, &meta)));
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

// Declared work over the summary steps that declared it: each step's work once (not once per
// device row), its time the slowest device's window; warm-up steps and steps without work left
// out.
TEST(RunSummary, DeclaredWorkOverTheStepsThatDeclaredIt) {
  CategoryNs c;
  c.compute = 8'000'000;
  c.data_wait = 2'000'000;  // 10 ms steps
  StepRow a0 = row(0, c), a1 = row(0, c), b = row(1, c), none = row(2, c), warm = row(3, c, true);
  a1.device = 1;
  a1.window_end += 5'000'000;  // the slowest device of step 0: 15 ms
  a0.tokens = a1.tokens = 1000;
  a0.samples = a1.samples = 4;
  b.tokens = 3000.5;
  warm.tokens = 1e9;  // left out
  const RunSummary s = summarize({a0, a1, b, none, warm}, Stats{});
  EXPECT_EQ(s.declared_tokens.steps, 2);
  EXPECT_DOUBLE_EQ(s.declared_tokens.total, 4000.5);
  EXPECT_DOUBLE_EQ(s.declared_tokens.step_ms, 25.0);
  EXPECT_EQ(s.declared_samples.steps, 1);
  EXPECT_DOUBLE_EQ(s.declared_samples.total, 4);
  EXPECT_DOUBLE_EQ(s.declared_samples.step_ms, 15.0);
  const RunSummary nothing = summarize({none}, Stats{});
  EXPECT_EQ(nothing.declared_tokens.steps, 0);
  EXPECT_EQ(nothing.declared_tokens.total, 0);
}

// Issue 8, item 2: the verdict can name the host.  A step that is 63% host_other used to get
// "Compute-bound ... the GPU is the bottleneck".
TEST(RunSummary, HostWallIsTheVerdictWhenItDominates) {
  CategoryNs c;
  c.compute = 37;
  c.host_other = 63;
  const RunSummary s = summarize({row(0, c), row(1, c)}, Stats{});
  EXPECT_EQ(s.verdict.bound, "other");
  EXPECT_EQ(s.verdict.severity, Severity::kHigh);
  EXPECT_NEAR(s.verdict.share, 0.63, 1e-12);
  EXPECT_NE(s.verdict.headline.find("HIGHLY host-bound: 63.0%"), std::string::npos)
      << s.verdict.headline;
  EXPECT_NE(s.verdict.recommendation.find("py-spy"), std::string::npos);
  EXPECT_NE(s.verdict.recommendation.find(".item()"), std::string::npos);
  EXPECT_NEAR(s.verdict.what_if_step_ms, 37e-6, 1e-12);

  // Exposed D2H copies make the other wall too: the advice is about the copies.
  CategoryNs d;
  d.compute = 60;
  d.copy_other = 30;
  d.host_other = 10;
  const RunSummary t = summarize({row(0, d)}, Stats{});
  EXPECT_EQ(t.verdict.bound, "other");
  EXPECT_NE(t.verdict.recommendation.find(".cpu()"), std::string::npos);
}

// Each wall's band from docs/accounting.md §5, at its edges: just below moderate is not a
// verdict, moderate and high are.
TEST(RunSummary, BandsOfEveryWall) {
  struct Case {
    const char* bound;
    double moderate, high;
    void (*set)(CategoryNs&, int64_t);
  };
  const Case cases[] = {
      {"data", 0.05, 0.20, [](CategoryNs& c, int64_t v) { c.data_wait = v; }},
      {"launch", 0.03, 0.15, [](CategoryNs& c, int64_t v) { c.launch_gap = v; }},
      {"communication", 0.03, 0.15, [](CategoryNs& c, int64_t v) { c.comm_exposed = v; }},
      {"other", 0.10, 0.25, [](CategoryNs& c, int64_t v) { c.host_other = v; }},
  };
  for (const Case& k : cases) {
    for (const auto& [share, sev] :
         {std::pair{k.moderate - 0.001, Severity::kNone},
          std::pair{k.moderate, Severity::kModerate}, std::pair{k.high, Severity::kHigh}}) {
      CategoryNs c;
      const int64_t v = static_cast<int64_t>(share * 1'000'000 + 0.5);
      k.set(c, v);
      c.compute = 1'000'000 - v;
      const RunSummary s = summarize({row(0, c)}, Stats{});
      if (sev == Severity::kNone) {
        EXPECT_EQ(s.verdict.bound, "compute") << k.bound << " " << share;
      } else {
        EXPECT_EQ(s.verdict.bound, k.bound) << share;
        EXPECT_EQ(s.verdict.severity, sev) << k.bound << " " << share;
        EXPECT_FALSE(s.verdict.recommendation.empty()) << k.bound;
      }
    }
  }
}

// Compute wins only when no other wall reaches its moderate band, and then with its own band.
TEST(RunSummary, ComputeVerdictWhenNothingElseReachesItsBand) {
  CategoryNs c;
  c.compute = 820;
  c.data_wait = 49;     // < 5%
  c.launch_gap = 29;    // < 3%
  c.comm_exposed = 29;  // < 3%
  c.host_other = 73;    // < 10%
  const RunSummary s = summarize({row(0, c)}, Stats{});
  EXPECT_EQ(s.verdict.bound, "compute");
  EXPECT_EQ(s.verdict.severity, Severity::kHigh);  // >= 80%
  EXPECT_NE(s.verdict.headline.find("Compute-bound"), std::string::npos);

  // A wall at its band wins over a larger compute share; the runners-up are named in notes.
  c.launch_gap = 31;  // 3.1%: moderate
  c.host_other = 110;
  c.compute = 781;
  const RunSummary t = summarize({row(0, c)}, Stats{});
  EXPECT_EQ(t.verdict.bound, "other");  // both moderate: the larger share wins
  ASSERT_FALSE(t.verdict.notes.empty());
  EXPECT_NE(t.verdict.notes.front().find("Also moderate: the launch wall"), std::string::npos)
      << t.verdict.notes.front();
}

// Issue 8, items 4 and 7: "none" says what was found instead of pointing at warnings that
// were never printed.
TEST(RunSummary, NothingToAccountSaysWhy) {
  CategoryNs c;
  c.host_other = 10;
  StepRow r = row(0, c);
  r.device = 0xFFFF;
  RunMetadata meta;
  meta.other_accelerator_events = {{"mtia_ccp_events", 1200}, {"mtia_runtime", 340}};
  const RunSummary mtia = summarize({r}, Stats{}, VerdictBands{}, &meta);
  EXPECT_EQ(mtia.verdict.bound, "none");
  EXPECT_EQ(mtia.verdict.reason, "unsupported_device");
  EXPECT_NE(mtia.verdict.headline.find("mtia_ccp_events: 1200, mtia_runtime: 340"),
            std::string::npos)
      << mtia.verdict.headline;
  EXPECT_NE(mtia.verdict.recommendation.find("not supported"), std::string::npos);
  EXPECT_EQ(mtia.verdict.recommendation.find("warnings above"), std::string::npos);
  // No step at all: the same reason wins (it is what the user needs to know).
  const RunSummary mtia_no_steps = summarize({}, Stats{}, VerdictBands{}, &meta);
  EXPECT_EQ(mtia_no_steps.verdict.reason, "unsupported_device");

  Stats st;
  st.add(Stat::gpu_ops_received, 176);
  st.add(Stat::ops_outside_steps, 176);
  const RunSummary outside = summarize({r}, st);
  EXPECT_EQ(outside.verdict.reason, "gpu_work_outside_steps");
  EXPECT_NE(outside.verdict.headline.find("176 GPU operations were recorded"), std::string::npos);
  EXPECT_EQ(outside.verdict.headline.find("No GPU activity"), std::string::npos);

  const RunSummary host = summarize({r}, Stats{});
  EXPECT_EQ(host.verdict.reason, "no_gpu_activity");
  EXPECT_EQ(host.verdict.recommendation.find("warnings above"), std::string::npos);
  EXPECT_EQ(summarize({}, Stats{}).verdict.reason, "no_steps");
}

// Reading finding B (issue 14): launches are per step (every row of a step carries the same
// count); the summary takes them from a step's first row, which it recognised by a zero
// duration so far -- a first row lasting 0 ns made the second row "first" too.
TEST(RunSummary, LaunchesCountOncePerStepWhenTheFirstRowLastsNoTime) {
  CategoryNs busy;
  busy.compute = 1'000'000;
  StepRow empty = row(0, CategoryNs{});  // device 0: a window of 0 ns
  empty.device = 0;
  empty.launches = 7;
  StepRow other = row(0, busy);  // device 1, same step
  other.device = 1;
  other.launches = 7;
  const RunSummary s = summarize({empty, other}, Stats{});
  EXPECT_EQ(s.steps, 1);
  EXPECT_EQ(s.launches, 7);
}

// Item 7 (issue 14): a ResNet-50 trace without a profiler schedule -- 5 steps, the first
// 707 ms (cuDNN autotuning, 289 ms of launch gap) against ~150 ms for the others, which are
// data-bound (data 26%, launch 8%).  The first step made the verdict "HIGHLY launch-bound".
std::vector<StepRow> resnet_like_rows() {
  CategoryNs first;  // 707 ms: 289 launch, 150 compute, 40 data, 228 other
  first.launch_gap = 289'000'000;
  first.compute = 150'000'000;
  first.data_wait = 40'000'000;
  first.host_other = 228'000'000;
  std::vector<StepRow> rows{row(0, first)};
  for (int64_t i = 1; i <= 4; ++i) {
    CategoryNs c;  // ~150 ms: data 26%, launch 8%, the rest compute
    c.data_wait = 39'000'000 + i * 100'000;
    c.launch_gap = 12'000'000;
    c.compute = 99'000'000;
    rows.push_back(row(i, c));
  }
  return rows;
}

TEST(RunSummary, SlowFirstStepIsWarmup) {
  const RunSummary s = summarize(resnet_like_rows(), Stats{});
  ASSERT_EQ(s.slow_start_steps, std::vector<int64_t>{0});
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.warmup_steps, 1);
  EXPECT_NEAR(s.slow_start_steady_ms, 150.3, 1e-9);  // steps 2..4
  ASSERT_EQ(s.slow_start_step_ms.size(), 1u);
  EXPECT_NEAR(s.slow_start_step_ms[0], 707.0, 1e-9);
  EXPECT_EQ(s.verdict.bound, "data");
  EXPECT_EQ(s.verdict.severity, Severity::kHigh);
  EXPECT_NEAR(s.step_ms_mean, 150.25, 1e-9);
  // Its walls are reported apart, with the configured warm-up's.
  EXPECT_EQ(s.warmup_walls.total_ns, 707'000'000);
  bool noted = false;
  for (const std::string& n : s.verdict.notes) noted |= n.find("warm-up") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(RunSummary, SlowStartRuleBounds) {
  auto steps = [](std::vector<double> ms) {
    std::map<int64_t, double> m;
    for (size_t i = 0; i < ms.size(); ++i) m[static_cast<int64_t>(i) + 10] = ms[i];
    return m;
  };
  const SlowStartRule rule;
  double steady = 0;
  // Two slow leading steps, then the steady state: of 6 steps at most one goes (a tenth, at
  // least one); the steady median is that of the last half of the run (110, 100, 90).
  EXPECT_EQ(slow_start_steps(steps({900, 500, 100, 110, 100, 90}), rule, &steady),
            (std::vector<int64_t>{10}));
  EXPECT_DOUBLE_EQ(steady, 100);
  // Of 20 steps, two slow leading ones both go; a third would be more than a tenth.
  std::vector<double> twenty(20, 100);
  twenty[0] = twenty[1] = twenty[2] = 900;
  EXPECT_EQ(slow_start_steps(steps(twenty), rule), (std::vector<int64_t>{10, 11}));
  // Exactly 3x is not slower than 3x; jitter and a doubled step never count.
  EXPECT_TRUE(slow_start_steps(steps({300, 100, 100, 100}), rule).empty());
  EXPECT_TRUE(slow_start_steps(steps({200, 100, 100, 100, 100}), rule).empty());
  // Only leading steps: a slow step later in the run is the run's own business.
  EXPECT_TRUE(slow_start_steps(steps({100, 900, 100, 100, 100}), rule).empty());
  // Too few steps to know a steady state (fewer than 3 after the candidate).
  EXPECT_TRUE(slow_start_steps(steps({900, 100, 100}), rule).empty());
  // At most half the run: with no share cap, of 4 slow steps out of 7, the first 3 go (the
  // steady median, of the last 4 steps, is 100).
  SlowStartRule uncapped;
  uncapped.max_leading_share = 1.0;
  EXPECT_EQ(slow_start_steps(steps({900, 900, 900, 900, 100, 100, 100}), uncapped),
            (std::vector<int64_t>{10, 11, 12}));
  // A configured warm-up comes first: the rule looks at the steps after it.
  std::vector<StepRow> rows = resnet_like_rows();
  rows[0].warmup = true;
  const RunSummary s = summarize(rows, Stats{});
  EXPECT_TRUE(s.slow_start_steps.empty());
  EXPECT_EQ(s.warmup_steps, 1);
}

// GPUACCT_SAMPLE: rows of untraced steps (host side only) are left out of every number, and a
// note says how many steps were traced.
TEST(RunSummary, UntracedRowsLeftOutAndNamed) {
  CategoryNs c;
  c.compute = 6'000'000;
  c.launch_gap = 4'000'000;
  CategoryNs host_side;
  host_side.data_wait = 9'000'000;  // an untraced row: data wait only, 20 ms long
  std::vector<StepRow> rows{row(0, c), row(1, host_side), row(2, c), row(3, host_side)};
  rows[1].sampled = rows[3].sampled = false;
  for (size_t i : {1u, 3u}) rows[i].window_end = rows[i].window_begin + 20'000'000;
  const RunSummary s = summarize(rows, Stats{}, VerdictBands{}, nullptr, SlowStartRule{});
  const RunSummary traced = summarize({row(0, c), row(2, c)}, Stats{});
  EXPECT_EQ(s.untraced_steps, 2);
  EXPECT_EQ(s.steps, 2);
  EXPECT_EQ(s.warmup_steps, 0);
  EXPECT_EQ(s.walls.total_ns, traced.walls.total_ns);
  EXPECT_DOUBLE_EQ(s.step_ms_mean, traced.step_ms_mean);
  EXPECT_EQ(s.verdict.bound, traced.verdict.bound);
  bool named = false;
  for (const std::string& n : s.verdict.notes) {
    named = named || n.find("traced 2 of 4 steps") != std::string::npos;
  }
  EXPECT_TRUE(named);
  EXPECT_EQ(traced.untraced_steps, 0);
}

}  // namespace
}  // namespace gpuacct
