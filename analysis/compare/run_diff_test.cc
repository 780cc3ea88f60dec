// The run diff against planted truth: synthetic runs (analysis/import/synthetic.h) that differ
// in one wall by a known amount, accounted by the real accountant and read the way the CLI
// reads them (a report and its rows).
#include "analysis/compare/run_diff.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/synthetic.h"
#include "analysis/model/json_text.h"
#include "analysis/report/report.h"

namespace gpuacct {
namespace {

struct Accounted {
  nlohmann::json report;
  std::vector<StepRow> rows;
};

Accounted account(const SyntheticSpec& spec, const std::string& device = "simulated GPU") {
  NameTable names;
  StepAccountant acc;
  generate_synthetic(spec, names, acc);
  acc.finish();
  RunMetadata meta;
  meta.source = "synthetic";
  for (int d = 0; d < spec.devices; ++d)
    meta.devices.push_back(DeviceInfo{d, device, 132, 9, 0, 0});
  return {build_report(acc, meta, names), acc.rows()};
}

DiffRun run_of(const SyntheticSpec& spec, const std::string& label) {
  const Accounted a = account(spec);
  auto run = diff_run_from_report(a.report, a.rows, label);
  EXPECT_TRUE(run.ok()) << run.status().message();
  return run.value();
}

SyntheticSpec preset(const std::string& name, int steps, uint64_t seed) {
  auto spec = SyntheticSpec::preset(name);
  EXPECT_TRUE(spec.ok());
  spec->steps = steps;
  spec->seed = seed;
  return spec.value();
}

double wall_delta(const RunDiff& d, Wall w) {
  return d.walls[static_cast<size_t>(w)].change.delta_ms;
}

TEST(RunDiff, RunTakesTheSummaryStepsAndTheirTime) {
  const Accounted a = account(preset("demo", 24, 1));
  auto run = diff_run_from_report(a.report, a.rows, "demo");
  ASSERT_TRUE(run.ok()) << run.status().message();
  const nlohmann::json& summary = a.report["summary"];
  EXPECT_EQ(static_cast<int64_t>(run->steps.size()), summary["steps"].get<int64_t>());
  EXPECT_EQ(run->warmup_steps, summary["warmup_steps"].get<int64_t>());
  double total_ms = 0;
  for (const WallBreakdown& w : run->steps) total_ms += static_cast<double>(w.sum()) / 1e6;
  EXPECT_NEAR(total_ms / static_cast<double>(run->steps.size()),
              summary["step_time_ms"]["mean"].get<double>(), 1e-9);
  EXPECT_TRUE(run->kernels_known);
  EXPECT_FALSE(run->kernels.empty());
}

TEST(RunDiff, TwoDevicesTakeTheSlowestDevicesRow) {
  SyntheticSpec spec = preset("demo", 12, 3);
  spec.devices = 2;
  const Accounted a = account(spec);
  auto run = diff_run_from_report(a.report, a.rows, "two");
  ASSERT_TRUE(run.ok());
  double total_ms = 0;
  for (const WallBreakdown& w : run->steps) total_ms += static_cast<double>(w.sum()) / 1e6;
  EXPECT_NEAR(total_ms / static_cast<double>(run->steps.size()),
              a.report["summary"]["step_time_ms"]["mean"].get<double>(), 1e-9);
}

TEST(RunDiff, OnlyWarmupIsAnError) {
  const Accounted a = account(preset("demo", 2, 1));  // both steps are warm-up
  auto run = diff_run_from_report(a.report, a.rows, "short.gpuacct");
  ASSERT_FALSE(run.ok());
  EXPECT_NE(run.status().message().find("short.gpuacct: no summary step"), std::string::npos);
}

TEST(RunDiff, OddReportSectionsAreReadWithoutThrowing) {
  Accounted a = account(preset("demo", 10, 1));
  a.report["run"] = "not an object";
  a.report["config"] = nlohmann::json::array({1, 2});
  a.report["top_kernels"] = nlohmann::json::array(
      {{{"name", 5}, {"exposed_ns", "many"}, {"communication", "yes"}}, "junk"});
  auto run = diff_run_from_report(a.report, a.rows, "odd");
  ASSERT_TRUE(run.ok());
  EXPECT_TRUE(run->run.is_object());
  EXPECT_TRUE(run->config.is_object());
  ASSERT_EQ(run->kernels.size(), 1u);
  EXPECT_EQ(run->kernels[0].name, "?");
  EXPECT_EQ(run->kernels[0].exposed_ns, 0);
  DiffRun devices_odd = run.value();
  devices_odd.run = {{"devices", "one"}, {"world_size", "x"}};
  const RunDiff d = diff_runs(run.value(), devices_odd);
  ASSERT_EQ(d.settings.size(), 1u);  // both list no devices (the first's run was a string)
  EXPECT_EQ(d.settings[0].setting, "world size");
  EXPECT_EQ(d.settings[0].base, "-");
  EXPECT_EQ(d.settings[0].next, "x");
  EXPECT_FALSE(diff_run_from_report(nlohmann::json::array(), a.rows, "arr").ok());
}

// One wall changed by a known amount per step, nothing else.
struct Planted {
  const char* name;
  const char* preset;
  Wall wall;
  double truth_ms;
  std::function<void(SyntheticSpec&)> change;
};

std::vector<Planted> planted_cases() {
  return {
      // The host waits in the data loader's range with the GPU idle: the data wall.
      {"data_wait", "demo", Wall::kData, 3.0,
       [](SyntheticSpec& s) { s.data_wait_ns += 3'000'000; }},
      // CPU work outside data ranges before any launch, the GPU idle: the other wall.
      {"cpu_work", "demo", Wall::kOther, 2.0, [](SyntheticSpec& s) { s.cpu_work_ns += 2'000'000; }},
      // The all-reduce already outlasts the compute that hides it: every extra ms is exposed.
      {"collective", "demo", Wall::kCommunication, 2.5,
       [](SyntheticSpec& s) { s.collective_ns += 2'500'000; }},
      // 100 kernels queued ahead of the GPU (no launch gaps), each 20 us longer: compute.
      {"kernel_time", "balanced", Wall::kCompute, 2.0,
       [](SyntheticSpec& s) { s.kernel_ns += 20'000; }},
      // 2000 kernels shorter than their launch cost: the GPU waits 1 us more for each.
      {"launch_cost", "launch_bound", Wall::kLaunch, 2.0,
       [](SyntheticSpec& s) { s.launch_cost_ns += 1'000; }},
  };
}

// Both runs draw the same noise (one seed), so the planted amount is the change itself: the
// interval must cover it.  With other noise (another seed) the interval's coverage is a
// probability, checked over many pairs below; the attribution must still be within 1%.
TEST(RunDiff, PlantedChangeInOneWallIsAttributedToIt) {
  for (const Planted& p : planted_cases()) {
    for (const uint64_t new_seed : {uint64_t{1}, uint64_t{2}}) {
      SCOPED_TRACE(std::string(p.name) + (new_seed == 1 ? ", same noise" : ", other noise"));
      const SyntheticSpec base_spec = preset(p.preset, 202, 1);
      SyntheticSpec new_spec = preset(p.preset, 202, new_seed);
      p.change(new_spec);
      const RunDiff d = diff_runs(run_of(base_spec, "base"), run_of(new_spec, "new"));
      const double tolerance = 0.01 * d.step.base_ms;  // 1% of the step time
      const Change& planted = d.walls[static_cast<size_t>(p.wall)].change;
      EXPECT_NEAR(planted.delta_ms, p.truth_ms, tolerance);
      EXPECT_NEAR(d.step.delta_ms, p.truth_ms, tolerance);
      ASSERT_TRUE(planted.interval_ms.has_value());
      if (new_seed == 1) {
        EXPECT_LE(planted.interval_ms->first, p.truth_ms);
        EXPECT_GE(planted.interval_ms->second, p.truth_ms);
      }
      EXPECT_TRUE(planted.significant);
      EXPECT_TRUE(d.step.significant);
      EXPECT_GT(d.walls[static_cast<size_t>(p.wall)].share_of_change, 0.9);
      for (const WallChange& w : d.walls) {
        if (w.wall != p.wall) {
          EXPECT_FALSE(w.change.significant) << to_string(w.wall);
        }
      }
      EXPECT_NE(d.headline.find(std::string(to_string(p.wall)) + " wall"), std::string::npos)
          << d.headline;
      EXPECT_TRUE(slower_than(d, 1.0));
      EXPECT_FALSE(slower_than(d, 100.0 * p.truth_ms / d.step.base_ms + 5.0));
      // The reverse is as much faster.
      const RunDiff back = diff_runs(run_of(new_spec, "new"), run_of(base_spec, "base"));
      EXPECT_NEAR(wall_delta(back, p.wall), -p.truth_ms, tolerance);
      EXPECT_FALSE(slower_than(back, 0.0));
    }
  }
}

TEST(RunDiff, WallChangesAddUpToTheStepTimeChange) {
  SyntheticSpec b = preset("demo", 60, 4), n = preset("demo", 80, 5);
  n.data_wait_ns += 1'000'000;
  n.collective_ns += 1'000'000;
  const RunDiff d = diff_runs(run_of(b, "b"), run_of(n, "n"));
  double sum = 0, share = 0;
  for (const WallChange& w : d.walls) sum += w.change.delta_ms, share += w.share_of_change;
  EXPECT_NEAR(sum, d.step.delta_ms, 1e-9);
  EXPECT_NEAR(share, 1.0, 1e-9);
  EXPECT_NEAR(d.step.new_ms - d.step.base_ms, d.step.delta_ms, 1e-12);
}

// The interval is calibrated: over independent seed pairs it covers the planted change about
// as often as it says (95%).  40 pairs: fewer than 34 covered has probability < 1% when the
// true coverage is 95%, and ~40% when it is 80%.
TEST(RunDiff, IntervalCoversThePlantedChangeAtItsConfidence) {
  int covered = 0;
  const int pairs = 40;
  for (int i = 0; i < pairs; ++i) {
    SyntheticSpec b = preset("demo", 62, 100 + 2 * static_cast<uint64_t>(i));
    SyntheticSpec n = preset("demo", 62, 101 + 2 * static_cast<uint64_t>(i));
    n.data_wait_ns += 1'000'000;
    DiffOptions opt;
    opt.resamples = 1000;
    opt.seed = 7 + static_cast<uint64_t>(i);
    const RunDiff d = diff_runs(run_of(b, "b"), run_of(n, "n"), opt);
    const auto& ci = d.walls[static_cast<size_t>(Wall::kData)].change.interval_ms;
    ASSERT_TRUE(ci.has_value());
    if (ci->first <= 1.0 && 1.0 <= ci->second) ++covered;
  }
  std::printf("interval covered the planted change in %d of %d seed pairs\n", covered, pairs);
  EXPECT_GE(covered, 34) << covered << " of " << pairs;
  EXPECT_LE(covered, pairs);
}

TEST(RunDiff, IdenticalRunsShowNoChange) {
  const DiffRun run = run_of(preset("demo", 50, 1), "same");
  const RunDiff d = diff_runs(run, run);
  EXPECT_EQ(d.step.delta_ms, 0.0);
  EXPECT_FALSE(d.step.significant);
  for (const WallChange& w : d.walls) {
    EXPECT_FALSE(w.change.significant);
    ASSERT_TRUE(w.change.interval_ms.has_value());
    EXPECT_LE(w.change.interval_ms->first, 0.0);
    EXPECT_GE(w.change.interval_ms->second, 0.0);
  }
  EXPECT_FALSE(slower_than(d, 0.0));
  EXPECT_TRUE(d.settings.empty());
  EXPECT_EQ(d.headline.rfind("no significant change in step time", 0), 0u) << d.headline;
  EXPECT_NE(d.headline.find("no wall changed significantly"), std::string::npos);
  for (const KernelChange& k : d.kernels) EXPECT_EQ(k.delta_ms, 0.0);
}

TEST(RunDiff, SameDesignOtherNoiseIsNoSignificantChange) {
  for (uint64_t seed = 2; seed < 7; ++seed) {
    SCOPED_TRACE(seed);
    for (const char* name : {"demo", "balanced", "launch_bound"}) {
      const RunDiff d =
          diff_runs(run_of(preset(name, 102, 1), "a"), run_of(preset(name, 102, seed), "b"));
      EXPECT_FALSE(d.step.significant) << name << ": " << d.headline;
      for (const WallChange& w : d.walls) EXPECT_FALSE(w.change.significant) << name;
      EXPECT_FALSE(slower_than(d, 0.0));
    }
  }
}

TEST(RunDiff, DeterministicForASeed) {
  const DiffRun a = run_of(preset("demo", 40, 1), "a"), b = run_of(preset("demo", 40, 2), "b");
  DiffOptions opt;
  const RunDiff d1 = diff_runs(a, b, opt), d2 = diff_runs(a, b, opt);
  EXPECT_EQ(dump_json(run_diff_to_json(d1)), dump_json(run_diff_to_json(d2)));
  opt.seed += 1;
  const RunDiff d3 = diff_runs(a, b, opt);
  EXPECT_NE(d1.step.interval_ms, d3.step.interval_ms);
  EXPECT_EQ(d1.step.delta_ms, d3.step.delta_ms);  // the point estimate needs no resampling
}

TEST(RunDiff, TooFewStepsHaveNoInterval) {
  DiffRun a, b;
  a.label = "a";
  b.label = "b";
  WallBreakdown w;
  w.compute = 10'000'000;
  a.steps = {w};
  w.compute = 20'000'000;
  b.steps = {w, w, w, w, w, w};
  const RunDiff d = diff_runs(a, b);
  EXPECT_NEAR(d.step.delta_ms, 10.0, 1e-12);
  EXPECT_FALSE(d.step.interval_ms.has_value());
  EXPECT_FALSE(d.step.significant);  // a doubling, but one step says nothing of the spread
  EXPECT_NE(d.headline.find("fewer than 5 steps"), std::string::npos);
  EXPECT_TRUE(run_diff_to_json(d)["step_time"]["interval_ms"].is_null());
  a.steps.assign(4, w);  // still too few for a percentile bootstrap
  EXPECT_FALSE(diff_runs(a, b).step.interval_ms.has_value());
  a.steps.clear();
  for (int64_t ms : {9, 10, 11, 10, 10}) {  // some spread around 10 ms
    w.compute = ms * 1'000'000;
    a.steps.push_back(w);
  }
  const RunDiff five = diff_runs(a, b);
  ASSERT_TRUE(five.step.interval_ms.has_value());
  EXPECT_TRUE(five.step.significant);
}

TEST(RunDiff, SettingsThatDifferComeFirst) {
  SyntheticSpec spec = preset("demo", 30, 1);
  const Accounted a = account(spec);
  spec.devices = 2;
  Accounted b = account(spec, "NVIDIA H200");
  b.report["run"]["world_size"] = 8;
  b.report["config"]["warmup_steps"] = 5;
  auto base = diff_run_from_report(a.report, a.rows, "a");
  auto next = diff_run_from_report(b.report, b.rows, "b");
  ASSERT_TRUE(base.ok() && next.ok());
  const RunDiff d = diff_runs(base.value(), next.value());
  ASSERT_EQ(d.settings.size(), 3u);
  EXPECT_EQ(d.settings[0].setting, "GPU");
  EXPECT_EQ(d.settings[0].base, "1 x simulated GPU");
  EXPECT_EQ(d.settings[0].next, "2 x NVIDIA H200");
  EXPECT_EQ(d.settings[1].setting, "world size");
  EXPECT_EQ(d.settings[1].next, "8");
  EXPECT_EQ(d.settings[2].setting, "config.warmup_steps");
  const std::string text = run_diff_text(d);
  const size_t settings_at = text.find("settings that differ");
  ASSERT_NE(settings_at, std::string::npos) << text;
  EXPECT_LT(settings_at, text.find(d.headline)) << text;
  EXPECT_NE(text.find("GPU: 1 x simulated GPU -> 2 x NVIDIA H200"), std::string::npos) << text;
  EXPECT_EQ(run_diff_to_json(d)["settings_differ"].size(), 3u);
}

TEST(RunDiff, KernelsWhoseExposedTimeChanged) {
  SyntheticSpec b = preset("balanced", 52, 1), n = preset("balanced", 52, 2);
  n.kernel_ns += 20'000;  // 100 kernels of 5 names, 20 each: +0.4 ms per name per step
  const RunDiff d = diff_runs(run_of(b, "b"), run_of(n, "n"));
  ASSERT_TRUE(d.kernels_known);
  ASSERT_EQ(d.kernels.size(), 5u);
  double sum = 0;
  for (const KernelChange& k : d.kernels) {
    EXPECT_FALSE(k.delta_is_bound);
    EXPECT_NEAR(k.delta_ms, 0.4, 0.05) << k.name;
    sum += k.delta_ms;
  }
  EXPECT_NEAR(sum, wall_delta(d, Wall::kCompute), 0.05);
}

TEST(RunDiff, KernelOutsideAFullListIsABound) {
  DiffRun a, b;
  a.label = "a";
  b.label = "b";
  WallBreakdown w;
  w.compute = 1'000'000;
  a.steps = b.steps = {w, w};
  a.kernels_known = b.kernels_known = true;
  a.kernel_steps = b.kernel_steps = 1;
  a.kernel_list_limit = 2;  // full: k1, k2
  a.kernels = {{"k1", 5'000'000, 1, false}, {"k2", 1'000'000, 1, false}};
  b.kernel_list_limit = 10;  // not full: what it does not list had no exposed time
  b.kernels = {{"k1", 5'000'000, 1, false}, {"k3", 4'000'000, 1, true}};
  const RunDiff d = diff_runs(a, b);
  ASSERT_EQ(d.kernels.size(), 3u);
  EXPECT_EQ(d.kernels[0].name, "k3");  // at least +3 ms (was at most 1 ms)
  EXPECT_TRUE(d.kernels[0].delta_is_bound);
  EXPECT_NEAR(d.kernels[0].delta_ms, 3.0, 1e-12);
  EXPECT_FALSE(d.kernels[0].base_ms.has_value());
  EXPECT_TRUE(d.kernels[0].communication);
  EXPECT_EQ(d.kernels[1].name, "k2");  // exactly -1 ms: b's list is complete
  EXPECT_FALSE(d.kernels[1].delta_is_bound);
  EXPECT_NEAR(d.kernels[1].delta_ms, -1.0, 1e-12);
  EXPECT_NE(d.kernels_note.find("bound"), std::string::npos);
}

TEST(RunDiff, KernelsUnknownOnOneSideAreSaid) {
  DiffRun a = run_of(preset("demo", 10, 1), "a"), b = a;
  b.kernels_known = false;
  b.kernels_unknown_why = "a step stream holds rows, not kernels";
  const RunDiff d = diff_runs(a, b);
  EXPECT_FALSE(d.kernels_known);
  EXPECT_EQ(d.kernels_note, "new: a step stream holds rows, not kernels");
  EXPECT_NE(run_diff_text(d).find("kernels: not compared (new: a step stream"), std::string::npos);
}

TEST(RunDiff, JsonAndText) {
  SyntheticSpec b = preset("demo", 40, 1), n = preset("demo", 40, 2);
  n.data_wait_ns += 3'000'000;
  const RunDiff d = diff_runs(run_of(b, "base.gpuacct"), run_of(n, "new.gpuacct"));
  const nlohmann::json j = run_diff_to_json(d);
  EXPECT_EQ(j["schema"], kDiffSchema);
  for (const WallInfo& w : kWalls) ASSERT_TRUE(j["walls"].contains(std::string(w.name)));
  EXPECT_EQ(j["walls"].size(), static_cast<size_t>(kWallCount));
  EXPECT_TRUE(j["walls"]["data"]["significant"].get<bool>());
  EXPECT_EQ(j["step_time"]["interval_ms"].size(), 2u);
  EXPECT_EQ(j["method"]["resamples"], 2000);
  EXPECT_EQ(j["base"]["input"], "base.gpuacct");
  const std::string text = run_diff_text(d);
  EXPECT_NE(text.find(d.headline), std::string::npos);
  EXPECT_EQ(d.headline.rfind("step time +", 0), 0u) << d.headline;
  EXPECT_NE(d.headline.find("of it data wall (+3."), std::string::npos) << d.headline;
  for (const WallInfo& w : kWalls)
    EXPECT_NE(text.find("  " + std::string(w.name)), std::string::npos);
}

}  // namespace
}  // namespace gpuacct
