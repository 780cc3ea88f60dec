// A live run's recording carries the accounting settings the run used (RunMetadata::accounting):
// the front door applies them when the caller gives none (input.h resolve), so a re-analysis
// gives the live rows and summary; a setting the caller gives wins, with a note (issue 14,
// fuzzer dimension recorded_settings).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "analysis/import/recording.h"
#include "analysis/import/synthetic.h"
#include "analysis/input/input.h"
#include "analysis/report/report.h"

namespace gpuacct {
namespace {

using nlohmann::json;

// Settings no default has: no warm-up, a 3 us launch latency (the synthetic run's 4 us gaps
// become "other"), a 50 us host pause (its 60 us pauses become host time).
AccountingConfig run_settings() {
  AccountingConfig cfg;
  cfg.warmup_steps = 0;
  cfg.launch_latency_threshold_ns = 3'000;
  cfg.host_pause_threshold_ns = 50'000;
  cfg.top_gaps = 4;
  return cfg;
}

std::vector<json> rows_json(const std::vector<StepRow>& rows) {
  std::vector<json> out;
  for (const StepRow& r : rows) out.push_back(step_row_to_json(r));
  return out;
}

struct Recorded {
  std::string bytes;          // the recording
  json report;                // the live report
  std::vector<StepRow> rows;  // the live rows
};

// A run accounted live with `live_cfg` and recorded the way inject/pipeline/pipeline.cc does; its
// metadata carries the run's settings unless `carry_settings` is false (a recording written
// before they were carried).
Recorded record_run(const AccountingConfig& live_cfg, bool carry_settings) {
  auto spec = SyntheticSpec::preset("balanced");
  EXPECT_TRUE(spec.ok());
  spec->steps = 12;
  spec->host_pause_ns = 60'000;
  NameTable names;
  EventBatch batch;
  struct Gather final : EventSink {
    EventBatch* b;
    void on_gpu_op(const GpuOp& op) override { b->gpu_ops.push_back(op); }
    void on_api_call(const HostApiCall& c) override { b->api_calls.push_back(c); }
    void on_range(const HostRange& r) override { b->ranges.push_back(r); }
    void on_marker(const Marker& m) override { b->markers.push_back(m); }
  } gather;
  gather.b = &batch;
  generate_synthetic(*spec, names, gather);
  StepAccountant live(live_cfg);
  live.add(batch);
  live.finish();
  RunMetadata meta;
  meta.source = "injected";
  if (carry_settings) meta.accounting = accounting_settings(live.config());
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::to_string(::getpid()) + "_recorded_settings.gpuacct"))
                               .string();
  RecordingWriter w;
  EXPECT_TRUE(w.open(path).ok());
  EXPECT_TRUE(w.write_new_names(names).ok());
  EXPECT_TRUE(w.write_batch(batch).ok());
  EXPECT_TRUE(w.write_metadata(meta).ok());
  EXPECT_TRUE(w.close().ok());
  std::ifstream in(path, std::ios::binary);
  Recorded out;
  out.bytes.assign(std::istreambuf_iterator<char>(in), {});
  std::remove(path.c_str());
  out.rows = live.rows();
  out.report = build_report(live, meta, names);
  return out;
}

AccountingConfig no_flags() {
  AccountingConfig cfg;
  cfg.warmup_steps = AccountingConfig::kWarmupBySource;
  return cfg;
}

TEST(RecordedSettings, AnalyzeOfARecordingGivesTheLiveRowsAndSummary) {
  const Recorded run = record_run(run_settings(), /*carry_settings=*/true);
  NameTable names;
  auto rep = report_input(Input::from_buffer(run.bytes, "run.gpuacct"), no_flags(), names);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rows_json(rep->rows), rows_json(run.rows));
  EXPECT_EQ(rep->report["summary"], run.report["summary"]);
  EXPECT_EQ(rep->report["verdict"], run.report["verdict"]);
  EXPECT_EQ(rep->report["config"], run.report["config"]);
  EXPECT_TRUE(rep->settings_note.empty()) << rep->settings_note;
  EXPECT_FALSE(rep->report.contains("accounting_settings"));
  // The settings matter here: the same run accounted with the defaults differs.
  const Recorded defaults = record_run(AccountingConfig{}, /*carry_settings=*/true);
  EXPECT_NE(rows_json(defaults.rows), rows_json(run.rows));
}

// A recording written before the settings were carried keeps today's defaults.
TEST(RecordedSettings, AnOlderRecordingKeepsTheDefaults) {
  const Recorded old = record_run(run_settings(), /*carry_settings=*/false);
  const Recorded defaults = record_run(AccountingConfig{}, /*carry_settings=*/false);
  NameTable names;
  auto rep = report_input(Input::from_buffer(old.bytes, "old.gpuacct"), no_flags(), names);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rows_json(rep->rows), rows_json(defaults.rows));
  EXPECT_NE(rows_json(rep->rows), rows_json(old.rows));
}

// A setting the caller gives wins over the run's, and a note says it differs; the settings not
// given still come from the run.
TEST(RecordedSettings, AGivenSettingWinsWithANote) {
  const Recorded run = record_run(run_settings(), /*carry_settings=*/true);
  AccountingConfig flags = no_flags();
  flags.launch_latency_threshold_ns = 30'000;
  InputOptions opts;
  opts.given_settings = {kSettingLaunchLatency};
  NameTable names;
  auto rep = report_input(Input::from_buffer(run.bytes, "run.gpuacct"), flags, names, opts);
  ASSERT_TRUE(rep.ok()) << rep.status().message();
  EXPECT_EQ(rep->report["config"]["launch_latency_threshold_ns"], 30'000);
  EXPECT_EQ(rep->report["config"]["host_pause_threshold_ns"], 50'000);
  EXPECT_EQ(rep->report["config"]["warmup_steps"], 0);
  EXPECT_NE(rep->settings_note.find("launch_latency_threshold_ns 30000 (the run's: 3000)"),
            std::string::npos)
      << rep->settings_note;
  EXPECT_EQ(rep->settings_note.find("host_pause"), std::string::npos) << rep->settings_note;
  EXPECT_EQ(rep->report["accounting_settings"]["given_differ_from_run"],
            json({{"launch_latency_threshold_ns", {{"given", 30'000}, {"run", 3'000}}}}));
  // A given warm-up (not kWarmupBySource) wins too; the same value as the run's: no note.
  AccountingConfig same = no_flags();
  same.warmup_steps = 0;
  auto quiet = report_input(Input::from_buffer(run.bytes, "run.gpuacct"), same, names);
  ASSERT_TRUE(quiet.ok()) << quiet.status().message();
  EXPECT_TRUE(quiet->settings_note.empty()) << quiet->settings_note;
  EXPECT_EQ(rows_json(quiet->rows), rows_json(run.rows));
}

}  // namespace
}  // namespace gpuacct
