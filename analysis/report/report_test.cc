#include "analysis/report/report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analysis/accounting/step_accountant_test_util.h"
#include "analysis/import/synthetic.h"
#include "analysis/model/json_text.h"

namespace gpuacct {
namespace {

nlohmann::json demo_report(StepAccountant& acc, NameTable& names) {
  auto spec = SyntheticSpec::preset("demo");
  EXPECT_TRUE(spec.ok());
  generate_synthetic(*spec, names, acc);
  acc.finish();
  RunMetadata meta;
  meta.source = "synthetic";
  return build_report(acc, meta, names);
}

TEST(Report, SchemaAndExactRows) {
  NameTable names;
  StepAccountant acc;
  const nlohmann::json j = demo_report(acc, names);
  EXPECT_EQ(j["schema"], "gpuacct.report/1");
  ASSERT_EQ(j["steps"].size(), acc.rows().size());
  for (const auto& r : j["steps"]) {
    int64_t sum = 0;
    for (const auto& [k, v] : r["categories"].items()) sum += v.get<int64_t>();
    EXPECT_EQ(sum, r["duration_ns"].get<int64_t>());
    int64_t walls = 0;
    for (const auto& [k, v] : r["walls"].items()) walls += v.get<int64_t>();
    EXPECT_EQ(walls, r["duration_ns"].get<int64_t>());
  }
  EXPECT_EQ(j["verdict"]["bound"], "data");
  EXPECT_FALSE(j["top_kernels"].empty());
  EXPECT_FALSE(j["largest_idle_gaps"].empty());
  EXPECT_EQ(j["stats"].size(), kStatCount);
  EXPECT_FALSE(j["data_loss"].get<bool>());
}

TEST(Report, TerminalSummaryNamesVerdictAndWalls) {
  NameTable names;
  StepAccountant acc;
  const nlohmann::json j = demo_report(acc, names);
  auto text = render_terminal_summary(j);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("verdict: HIGHLY data-bound"), std::string::npos);
  for (const char* w : {"compute", "communication", "data", "launch", "other"}) {
    EXPECT_NE(text->find(w), std::string::npos) << w;
  }
  EXPECT_NE(text->find("what if"), std::string::npos);
  EXPECT_NE(text->find("top kernels by exposed time: "), std::string::npos);
  EXPECT_FALSE(render_terminal_summary(nlohmann::json{{"a", 1}}).ok());
  EXPECT_FALSE(render_terminal_summary(nlohmann::json::array()).ok());
}

TEST(Report, HeadlineNamesDevicesOrHostOnly) {
  NameTable names;
  StepAccountant acc;
  auto spec = SyntheticSpec::preset("balanced");
  spec->steps = 4;
  generate_synthetic(*spec, names, acc);
  acc.finish();
  RunMetadata meta;
  meta.devices.push_back(DeviceInfo{0, "NVIDIA H200", 132, 9, 0, 0});
  auto text = render_terminal_summary(build_report(acc, meta, names));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("on 1 device (NVIDIA H200)"), std::string::npos) << text.value();
  EXPECT_EQ(text->find("model FLOPs"), std::string::npos) << "no FLOPs declared";

  // Declared FLOPs: achieved TFLOP/s and MFU against the H200's bf16 dense peak.
  NameTable names2;
  StepAccountant flops;
  spec->flops_per_step = 1e12;
  generate_synthetic(*spec, names2, flops);
  flops.finish();
  const nlohmann::json j = build_report(flops, meta, names2);
  const auto& mf = j["summary"]["model_flops"];
  ASSERT_TRUE(mf.is_object());
  EXPECT_DOUBLE_EQ(mf["peak_tflops_bf16_dense"].get<double>(), 989);
  EXPECT_NEAR(mf["mfu"].get<double>(), mf["achieved_tflops"].get<double>() / 989, 1e-12);
  text = render_terminal_summary(j);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("of the bf16 dense peak (989 TFLOP/s)"), std::string::npos) << text.value();

  StepAccountant host;  // steps and data ranges, no GPU op
  host.add_range(HostRange{0, 1'000'000, 0, 1, 0, RangeKind::kStep, {}});
  host.add_range(HostRange{0, 400'000, -1, 1, 0, RangeKind::kData, {}});
  host.finish();
  text = render_terminal_summary(build_report(host, RunMetadata{}, names));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("on the host only (no GPU activity)"), std::string::npos) << text.value();

  // A first step before any GPU op is a host-only row (device -1, docs/accounting.md): the
  // run is still on one device.
  nlohmann::json one = build_report(acc, meta, names);
  nlohmann::json host_row = one["steps"][0];
  host_row["device"] = -1;
  one["steps"].insert(one["steps"].begin(), host_row);
  text = render_terminal_summary(one);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("on 1 device (NVIDIA H200)"), std::string::npos) << text.value();
}

TEST(Report, DataLossIsPrinted) {
  NameTable names;
  StepAccountant acc;
  acc.mutable_stats().add(Stat::cupti_records_dropped, 42);
  const nlohmann::json j = demo_report(acc, names);
  EXPECT_TRUE(j["data_loss"].get<bool>());
  auto text = render_terminal_summary(j);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("data loss"), std::string::npos);
  EXPECT_NE(text->find("42"), std::string::npos);
}

// Issue 8, item 1: a skipped (nested or overlapping) step is never silent: the terminal
// summary names it with its severity and count.
TEST(Report, SkippedStepsArePrintedWithTheirSeverity) {
  NameTable names;
  StepAccountant acc;
  acc.add_range(HostRange{0, 1'000'000, 0, 1, 0, RangeKind::kStep, {}});
  acc.add_range(HostRange{200'000, 300'000, 1, 1, 0, RangeKind::kStep, {}});  // nested
  acc.add_range(HostRange{1'000'000, 2'000'000, 2, 1, 0, RangeKind::kStep, {}});
  acc.finish();
  auto text = render_terminal_summary(build_report(acc, RunMetadata{}, names));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("! error (input skipped): step ranges that overlapped an earlier step "
                       "(nested or concurrent), skipped: their time is in the neighbouring "
                       "rows: 1"),
            std::string::npos)
      << *text;
}

// The change_points section (change_points.h) comes from the rows: a synthetic run with a
// planted data shift has it in the accountant's report and in a report made from the rows
// alone (a step stream's, summary_report with rows), the same; the terminal summary says it.
TEST(Report, ChangePointsFromTheRowsAlike) {
  auto spec = SyntheticSpec::preset("balanced");
  ASSERT_TRUE(spec.ok());
  spec->steps = 300;
  spec->shift_step = 180;
  spec->shift_data_wait_ns = 3'000'000;
  NameTable names;
  StepAccountant acc;
  generate_synthetic(*spec, names, acc);
  acc.finish();
  RunMetadata meta;
  const nlohmann::json full = build_report(acc, meta, names);
  const nlohmann::json from_rows =
      summary_report(acc.rows(), acc.stats(), acc.config(), meta, /*with_rows=*/true);
  ASSERT_TRUE(full.contains("change_points"));
  EXPECT_EQ(full["change_points"], from_rows["change_points"]);
  EXPECT_EQ(full["steps"], from_rows["steps"]);
  const nlohmann::json& shifts = full["change_points"]["shifts"];
  ASSERT_EQ(shifts.size(), 1u);
  EXPECT_LE(std::abs(shifts[0]["step"].get<int64_t>() - 180), 2);
  EXPECT_EQ(shifts[0]["wall"], "data");
  const auto text = render_terminal_summary(full);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("step time changed level: from step 18"), std::string::npos) << text.value();
  // Without rows (a provisional summary line) there is no section.
  EXPECT_FALSE(
      summary_report(acc.rows(), acc.stats(), acc.config(), meta).contains("change_points"));
}

TEST(Report, CsvHasOneLinePerRow) {
  NameTable names;
  StepAccountant acc;
  demo_report(acc, names);
  const std::string csv = step_rows_csv(acc.rows());
  const auto lines = std::count(csv.begin(), csv.end(), '\n');
  EXPECT_EQ(static_cast<size_t>(lines), acc.rows().size() + 1);
}

TEST(JsonText, InvalidBytesAreKeptLosslessly) {
  EXPECT_EQ(json_safe_utf8("plain"), "plain");
  EXPECT_EQ(json_safe_utf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(json_safe_utf8(std::string("a\xFF"
                                       "b",
                                       3)),
            "a\\xFFb");
  EXPECT_EQ(json_safe_utf8(std::string("\xC3", 1)), "\\xC3");    // truncated sequence
  EXPECT_EQ(json_safe_utf8("\xED\xA0\x80"), "\\xED\\xA0\\x80");  // surrogate
  // The result always serialises.
  nlohmann::json j = json_safe_utf8(std::string("k\"\\\x01\xFE", 5));
  EXPECT_NO_THROW((void)j.dump());
}

}  // namespace
// A slow first step (left out as slow start) whose idle gaps are the run's largest must not
// crowd the steady steps' gaps out of largest_idle_gaps: the list still has top_gaps entries,
// none of them from the slow step.
TEST(Report, SlowStartGapsDoNotCrowdOutTheSteadyOnes) {
  using testing_util::us;
  testing_util::Trace t;
  AccountingConfig cfg = testing_util::no_warmup();
  cfg.top_gaps = 3;
  // Step 0: 10 kernels with 5 ms idle before each (50 ms); steps 1..9: 2 kernels, 200 us idle.
  TimeNs at = us(0);
  t.step(at, at + us(50'100));
  for (int k = 0; k < 10; ++k) {
    at += us(5'000);
    t.kernel(at - us(10), at - us(5), at, at + us(10));
    at += us(10);
  }
  at = us(50'100);
  for (int s = 1; s < 10; ++s) {
    const TimeNs begin = at;
    for (int k = 0; k < 2; ++k) {
      at += us(200 + 10 * k + s);
      t.kernel(at - us(10), at - us(5), at, at + us(10));
      at += us(10);
    }
    t.step(begin, at);
  }
  StepAccountant acc(cfg);
  acc.add(t.b);
  acc.finish();
  NameTable names;
  const nlohmann::json j = build_report(acc, RunMetadata{}, names);
  ASSERT_EQ(j["summary"]["warmup"]["slow_start"]["steps"], nlohmann::json::array({0})) << j["summary"];
  const nlohmann::json& gaps = j["largest_idle_gaps"];
  ASSERT_EQ(gaps.size(), 3u) << gaps;
  for (const auto& g : gaps) EXPECT_NE(g["step_index"].get<int64_t>(), 0) << g;
}

}  // namespace gpuacct
