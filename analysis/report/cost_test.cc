// The cost section and money line against sums done by hand (docs/cost.md).
#include "analysis/report/cost.h"

#include <gtest/gtest.h>

#include "analysis/report/report.h"

namespace gpuacct {
namespace {

using nlohmann::json;

// 2 devices with rows x world_size 8 = 16 GPUs; a 500 ms step, 30% of it data wall; the
// verdict says a step would take 350 ms without it.
json hand_report() {
  json walls = {{"compute", {{"share", 0.5}}},
                {"communication", {{"share", 0.1}}},
                {"data", {{"share", 0.3}}},
                {"launch", {{"share", 0.05}}},
                {"other", {{"share", 0.05}}}};
  return {{"schema", "gpuacct.report/1"},
          {"run", {{"world_size", 8}, {"rank", 0}}},
          {"summary",
           {{"steps", 10},
            {"rows", 20},
            {"step_time_ms", {{"p50", 500.0}, {"p90", 500.0}, {"p99", 500.0}, {"mean", 500.0}}},
            {"walls", walls},
            {"compute_share", 0.5},
            {"gpu_busy_share", 0.8}}},
          {"verdict",
           {{"bound", "data"},
            {"headline", "data-bound"},
            {"mean_step_ms", 500.0},
            {"what_if_step_ms", 350.0}}},
          {"steps", json::array({{{"device", 0}}, {{"device", 1}}, {{"device", 0}}})}};
}

TEST(Cost, HandComputedNumbers) {
  const json c = cost_section(hand_report(), CostModel{3.0});
  EXPECT_EQ(c["gpus"], 16);
  EXPECT_EQ(c["gpus_from"], "rows x world_size");
  EXPECT_EQ(c["price_from"], "gpu_hour_price");
  EXPECT_FALSE(c.contains("owned"));
  // $3 x 16 GPUs = $48 an hour; a step is 0.5 s = 1/7200 h.
  EXPECT_DOUBLE_EQ(c["job_per_hour"].get<double>(), 48.0);
  EXPECT_NEAR(c["per_step"].get<double>(), 48.0 / 7200, 1e-12);
  EXPECT_NEAR(c["per_1000_steps"].get<double>(), 48000.0 / 7200, 1e-9);
  EXPECT_DOUBLE_EQ(c["per_day"].get<double>(), 1152.0);
  EXPECT_NEAR(c["walls"]["data"]["per_day"].get<double>(), 345.6, 1e-9);
  EXPECT_NEAR(c["walls"]["compute"]["per_day"].get<double>(), 576.0, 1e-9);
  EXPECT_NEAR(c["walls"]["data"]["per_step"].get<double>(), 0.3 * 48.0 / 7200, 1e-12);
  // $3 / 0.5 compute = $6 per computing hour; / 0.8 busy = $3.75 per busy hour.
  EXPECT_DOUBLE_EQ(c["per_compute_hour"].get<double>(), 6.0);
  EXPECT_DOUBLE_EQ(c["per_busy_hour"].get<double>(), 3.75);
  // Without the data wall: 350 / 500 of the time, 30% saved.
  EXPECT_EQ(c["what_if"]["wall"], "data");
  EXPECT_NEAR(c["what_if"]["saving_share"].get<double>(), 0.3, 1e-12);
  EXPECT_NEAR(c["what_if"]["saving_per_day"].get<double>(), 345.6, 1e-9);
  EXPECT_NEAR(c["what_if"]["saving_per_1000_steps"].get<double>(), 2.0, 1e-9);
  EXPECT_NEAR(c["what_if"]["per_step"].get<double>(), 0.7 * 48.0 / 7200, 1e-12);
}

// Declared work: 16 GPUs, a 0.5 s step costing $1/150 (48 $/h / 7200).  262,144 tokens a step:
// $1/150 / 262,144 x 1e6 = $0.02543 per million tokens; 262,144 / (0.5 s x 16) = 32,768
// tokens/s per GPU.  512 samples: $0.01302 per 1,000 samples, 64 samples/s per GPU.
TEST(Cost, DeclaredWork) {
  CostModel m{3.0};
  m.tokens_per_step = 262144;
  m.samples_per_step = 512;
  const json c = cost_section(hand_report(), m);
  const json& w = c["work"];
  EXPECT_NEAR(w["per_million_tokens"].get<double>(), 1.0 / 150 / 262144 * 1e6, 1e-12);
  EXPECT_DOUBLE_EQ(w["tokens_per_second_per_gpu"].get<double>(), 32768);
  EXPECT_NEAR(w["per_1000_samples"].get<double>(), 1.0 / 150 / 512 * 1e3, 1e-12);
  EXPECT_DOUBLE_EQ(w["samples_per_second_per_gpu"].get<double>(), 64);
  EXPECT_DOUBLE_EQ(w["tokens_per_step"].get<double>(), 262144);
  EXPECT_EQ(w["tokens_from"], "constant");
  EXPECT_NE(cost_line(c).find("; $0.0254 per million tokens (32768 tokens/s per GPU); $0.0130 "
                              "per 1,000 samples (64.0 samples/s per GPU); $3.00 per GPU-hour"),
            std::string::npos)
      << cost_line(c);
  EXPECT_FALSE(cost_section(hand_report(), CostModel{3.0}).contains("work"));
}

// Work declared step by step (summary.declared_work): 4 steps of varying work, 1,000,000 tokens
// in 2.5 s of step time (not 4 x the 0.5 s mean: the steps that declared are priced by their own
// time) on 16 GPUs at $3: $48/h x 2.5 s = $1/30 -> $0.0333 per million tokens; 1e6 / (2.5 s x
// 16) = 25,000 tokens/s per GPU.  It wins over a constant setting for its unit; samples, not
// declared, keep the constant.
TEST(Cost, WorkDeclaredPerStepWinsOverTheConstant) {
  json r = hand_report();
  r["summary"]["declared_work"] = {{"tokens", {{"steps", 4}, {"total", 1e6}, {"step_ms", 2500.0}}}};
  CostModel m{3.0};
  m.tokens_per_step = 262144;  // ignored: the program declared its tokens
  m.samples_per_step = 512;
  const json w = cost_section(r, m)["work"];
  EXPECT_EQ(w["tokens_from"], "declared per step");
  EXPECT_EQ(w["tokens_steps"], 4);
  EXPECT_DOUBLE_EQ(w["tokens_per_step"].get<double>(), 250000);
  EXPECT_NEAR(w["per_million_tokens"].get<double>(), 1.0 / 30, 1e-12);
  EXPECT_DOUBLE_EQ(w["tokens_per_second_per_gpu"].get<double>(), 25000);
  EXPECT_EQ(w["samples_from"], "constant");
  EXPECT_FALSE(w.contains("samples_steps"));
  EXPECT_DOUBLE_EQ(w["samples_per_second_per_gpu"].get<double>(), 64);
  // Without any constant: the declared work alone gives the section its `work`.
  const json alone = cost_section(r, CostModel{3.0})["work"];
  EXPECT_DOUBLE_EQ(alone["tokens_per_second_per_gpu"].get<double>(), 25000);
  EXPECT_FALSE(alone.contains("samples_from"));
  // A foreign report's nonsense is not priced: the constant applies again.
  for (const json& bad : {json{{"steps", 0}, {"total", 1e6}, {"step_ms", 2500.0}},
                          json{{"steps", 4}, {"total", -1.0}, {"step_ms", 2500.0}},
                          json{{"steps", 4}, {"total", 1e6}, {"step_ms", "x"}}}) {
    r["summary"]["declared_work"]["tokens"] = bad;
    EXPECT_EQ(cost_section(r, m)["work"]["tokens_from"], "constant") << bad;
  }
}

// From step rows to money: rows carrying varying declared tokens, summarised as the library
// and `gpuacct analyze` do (summary_report), priced.  The work and the time are those of the
// summary steps that declared work (the warm-up step's tokens do not count).
TEST(Cost, DeclaredWorkFromStepRows) {
  std::vector<StepRow> rows;
  double tokens = 0, seconds = 0;
  for (int64_t i = 0; i < 8; ++i) {
    StepRow r;
    r.step_index = i;
    r.warmup = i == 0;
    r.window_begin = i * 100'000'000;
    r.window_end = r.window_begin + 40'000'000 + i * 1'000'000;  // 40-47 ms
    r.cat.compute = r.window_end - r.window_begin;
    r.tokens = i == 5 ? 0 : 1000.0 * static_cast<double>(i) + 0.25;  // step 5 declared none
    if (!r.warmup && r.tokens > 0) {
      tokens += r.tokens;
      seconds += static_cast<double>(r.duration()) / 1e9;
    }
    rows.push_back(r);
  }
  RunMetadata meta;
  json report = summary_report(rows, Stats{}, AccountingConfig{}, meta);
  report["steps"] = json::array();
  for (const StepRow& r : rows) report["steps"].push_back(step_row_to_json(r));
  const json w = cost_section(report, CostModel{2.0})["work"];
  EXPECT_EQ(w["tokens_from"], "declared per step");
  EXPECT_EQ(w["tokens_steps"], 6);
  EXPECT_NEAR(w["tokens_per_second_per_gpu"].get<double>(), tokens / seconds, 1e-9);
  EXPECT_NEAR(w["per_million_tokens"].get<double>(), 2.0 * seconds / 3600 / tokens * 1e6, 1e-12);
}

TEST(Cost, GpuCount) {
  json r = hand_report();
  r["run"].erase("world_size");
  std::string from;
  EXPECT_EQ(job_gpus(r, &from), 2);
  EXPECT_EQ(from, "rows");
  r["steps"] = json::array({{{"device", -1}}});  // host-only rows are no GPU
  r["run"]["devices"] = json::array({json::object(), json::object(), json::object()});
  EXPECT_EQ(job_gpus(r, &from), 3);
  EXPECT_EQ(from, "run.devices");
  r["run"].erase("devices");
  EXPECT_EQ(job_gpus(r, &from), 1);
  EXPECT_EQ(from, "assumed");
}

// A report read back from disk may hold anything: no overflowing cast, no throw, a short line.
TEST(Cost, AbsurdReportValues) {
  json r = hand_report();
  r["run"]["world_size"] = 1e300;  // out of range: not used
  r["steps"] = json::array({{{"device", 1e300}}, {{"device", -5}}, {{"device", "x"}}, {{"device", 3}}});
  std::string from;
  EXPECT_EQ(job_gpus(r, &from), 1);
  EXPECT_EQ(from, "rows");
  r["summary"]["step_time_ms"]["mean"] = 1e300;
  const json c = cost_section(r, CostModel{kMaxGpuHourPrice});
  const std::string line = cost_line(c);
  EXPECT_NE(line.find("$2.78e+299/step"), std::string::npos) << line;
  EXPECT_LT(line.size(), 400u);
}

TEST(Cost, NoStepsNoMoney) {
  json r = hand_report();
  r["summary"]["step_time_ms"]["mean"] = 0.0;
  const json c = cost_section(r, CostModel{3.0});
  EXPECT_EQ(c["reason"], "no_steps");
  EXPECT_FALSE(c.contains("per_step"));
  EXPECT_EQ(cost_line(c), "");
}

TEST(Cost, SectionOnlyWithAPrice) {
  json r = hand_report();
  add_cost_section(CostModel{}, &r);
  EXPECT_FALSE(r.contains("cost"));
  auto text = render_terminal_summary(r);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("cost:"), std::string::npos);
  add_cost_section(CostModel{3.0}, &r);
  ASSERT_TRUE(r.contains("cost"));
  text = render_terminal_summary(r);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("  cost: $0.00667/step, $6.67 per 1,000 steps, $1,152.00/day on 16 GPUs; "
                       "the data wall costs $345.60/day (without the data wall: save "
                       "$345.60/day); $3.00 per GPU-hour, $6.00 per hour the GPU actually "
                       "computed ($3.75 per hour nvidia-smi calls busy, 80%)\n"),
            std::string::npos)
      << *text;
}

// Owned GPUs: $21,915 over 30 months = $730.50 a month, + $730.50 facility = $1,461 a month =
// $2.00 an hour day and night (730.5 h a month), + $0.50 power = $2.50 per GPU-hour.
CostModel owned_model(double rent) {
  CostModel m;
  m.gpu_hour_price = rent;
  m.hardware_cost = 21915;
  m.amortization_months = 30;
  m.facility_per_month = 730.5;
  m.power_per_gpu_hour = 0.5;
  return m;
}

TEST(Cost, OwnedGpusWithoutARentPrice) {
  const json c = cost_section(hand_report(), owned_model(0));
  EXPECT_EQ(c["price_from"], "owned");
  const json& o = c["owned"];
  EXPECT_DOUBLE_EQ(o["hardware_cost"].get<double>(), 21915);  // inputs echoed
  EXPECT_DOUBLE_EQ(o["amortization_months"].get<double>(), 30);
  EXPECT_DOUBLE_EQ(o["facility_per_month"].get<double>(), 730.5);
  EXPECT_DOUBLE_EQ(o["power_per_gpu_hour"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(o["hours_per_month"].get<double>(), 730.5);
  EXPECT_NEAR(o["fixed_per_month"].get<double>(), 1461, 1e-9);
  EXPECT_NEAR(o["per_gpu_hour"].get<double>(), 2.5, 1e-12);
  EXPECT_NEAR(o["per_compute_hour"].get<double>(), 5.0, 1e-12);  // 2.5 / 0.5 compute
  EXPECT_FALSE(o.contains("break_even_gpu_hours_per_month"));    // no rent to compare
  // The money at $2.50 per GPU-hour: 16 GPUs x 24 h.
  EXPECT_NEAR(c["gpu_hour_price"].get<double>(), 2.5, 1e-12);
  EXPECT_NEAR(c["per_day"].get<double>(), 960, 1e-9);
  EXPECT_NE(cost_line(c).find("$2.50 per GPU-hour (owned, used day and night)"),
            std::string::npos)
      << cost_line(c);
}

TEST(Cost, RentVersusOwnBreakEven) {
  const json c = cost_section(hand_report(), owned_model(3.0));
  EXPECT_EQ(c["price_from"], "gpu_hour_price");
  EXPECT_DOUBLE_EQ(c["per_day"].get<double>(), 1152);  // the rent price
  // $1,461 a month = ($3.00 - $0.50) x h  ->  h = 584.4 GPU-hours, 80% of 730.5.
  EXPECT_NEAR(c["owned"]["break_even_gpu_hours_per_month"].get<double>(), 584.4, 1e-9);
  EXPECT_NEAR(c["owned"]["break_even_use_share"].get<double>(), 0.8, 1e-12);
  EXPECT_NE(cost_line(c).find("; owning pays above 584 GPU-hours a month per GPU (80% use) and "
                              "costs $2.50 per GPU-hour used day and night"),
            std::string::npos)
      << cost_line(c);
  // Power dearer than the rent: owning never pays.
  const json never = cost_section(hand_report(), owned_model(0.4));
  EXPECT_TRUE(never["owned"]["break_even_gpu_hours_per_month"].is_null());
  EXPECT_NE(cost_line(never).find("owning never pays"), std::string::npos);
}

TEST(Cost, IncompleteOwnedModelIsRefused) {
  CostModel m;
  m.hardware_cost = 30000;  // no months
  EXPECT_NE(m.check(), "");
  json r = hand_report();
  add_cost_section(m, &r);
  EXPECT_FALSE(r.contains("cost"));
  CostModel power_only;
  power_only.gpu_hour_price = 3;
  power_only.power_per_gpu_hour = 0.5;
  EXPECT_NE(power_only.check(), "");
  EXPECT_EQ(owned_model(0).check(), "");
}

}  // namespace
}  // namespace gpuacct
