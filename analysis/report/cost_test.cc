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
  const json c = cost_section(hand_report(), 3.0);
  EXPECT_EQ(c["gpus"], 16);
  EXPECT_EQ(c["gpus_from"], "rows x world_size");
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

TEST(Cost, NoStepsNoMoney) {
  json r = hand_report();
  r["summary"]["step_time_ms"]["mean"] = 0.0;
  const json c = cost_section(r, 3.0);
  EXPECT_EQ(c["reason"], "no_steps");
  EXPECT_FALSE(c.contains("per_step"));
  EXPECT_EQ(cost_line(c), "");
}

TEST(Cost, SectionOnlyWithAPrice) {
  json r = hand_report();
  add_cost_section(0, &r);
  EXPECT_FALSE(r.contains("cost"));
  auto text = render_terminal_summary(r);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->find("cost:"), std::string::npos);
  add_cost_section(3.0, &r);
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

}  // namespace
}  // namespace gpuacct
