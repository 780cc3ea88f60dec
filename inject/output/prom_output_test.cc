// The live metrics file (GPUACCT_PROM_DIR) through the pipeline: its name, its cadence, its
// totals against the report, and a directory that cannot be written.
#include "inject/output/prom_output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/report/prometheus_text.h"
#include "inject/pipeline/pipeline.h"
#include "inject/pipeline/pipeline_test_events.h"

namespace gpuacct::inject {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(PromFileName, JobHostAndRankOrPid) {
  Config c;
  c.host = "node-a.cluster";
  c.pid = 4242;
  c.rank = 3;
  c.job_id = "1234";
  EXPECT_EQ(prom_file_name(c), "gpuacct_1234_node-a.cluster_rank3.prom");
  c.rank = -1;
  c.job_id = "";
  EXPECT_EQ(prom_file_name(c), "gpuacct_nojob_node-a.cluster_pid4242.prom");
  c.job_id = "a/b c\n\xe9";
  EXPECT_EQ(prom_file_name(c), "gpuacct_a_b_c___node-a.cluster_pid4242.prom");
  c.job_id = std::string(300, 'j');
  EXPECT_EQ(prom_file_name(c).size(),
            std::string("gpuacct__node-a.cluster_pid4242.prom").size() + 64);
}

TEST(PromConfig, DirAndPeriodFromTheEnvironment) {
  static std::vector<std::pair<std::string, std::string>> env;
  const EnvLookup lookup = [](const char* name) -> const char* {
    for (const auto& [k, v] : env)
      if (k == name) return v.c_str();
    return nullptr;
  };
  std::vector<std::string> warnings;
  env = {};
  Config c = parse_config(lookup, &warnings);
  EXPECT_TRUE(c.prom_dir.empty());
  EXPECT_EQ(c.prom_period_ms, kDefaultPromPeriodMs);
  EXPECT_FALSE(PromOutput(c).enabled());
  env = {{"GPUACCT_PROM_DIR", "/var/lib/node_exporter"}, {"GPUACCT_PROM_PERIOD_MS", "250"}};
  c = parse_config(lookup, &warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_EQ(c.prom_dir, "/var/lib/node_exporter");
  EXPECT_EQ(c.prom_period_ms, 250);
  EXPECT_TRUE(PromOutput(c).enabled());
  EXPECT_EQ(PromOutput(c).path().rfind("/var/lib/node_exporter/gpuacct_", 0), 0u);
  env = {{"GPUACCT_PROM_PERIOD_MS", "5"}};  // below the minimum: one warning, the default
  c = parse_config(lookup, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("GPUACCT_PROM_PERIOD_MS='5' is not a number in [10, 3600000]"),
            std::string::npos)
      << warnings[0];
  EXPECT_EQ(c.prom_period_ms, kDefaultPromPeriodMs);
}

class PromOutputTest : public PipelineOutputTest {
 protected:
  void SetUp() override {
    PipelineOutputTest::SetUp();
    if (HasFatalFailure()) return;
    fs::create_directory(dir_ + "/prom");
    cfg_.rank = 1;
    cfg_.job_id = "job9";
    cfg_.prom_dir = dir_ + "/prom";
    cfg_.prom_period_ms = 0;  // every tick (the configured minimum is 10 ms)
  }

  std::string prom_path() const { return dir_ + "/prom/gpuacct_job9_testhost_rank1.prom"; }
  std::string prom_text() const { return read("prom/gpuacct_job9_testhost_rank1.prom"); }
  std::vector<std::string> prom_dir_entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_ + "/prom")) out.push_back(e.path().filename());
    return out;
  }
};

using test_events::kStart;
using test_events::kStepNs;
using test_events::step_events;
const std::string kLabels = R"(job="job9",host="testhost",rank="1",device="0")";
const std::string kDataLoss = R"(gpuacct_data_loss_total{job="job9",host="testhost",rank="1"})";

// The value of the one sample named `series` ("name{labels}"), or "" when there is none.
std::string value_of(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(series + " ", 0) == 0) return line.substr(series.size() + 1);
  }
  return "";
}

// While the job runs the file holds the rows finalised so far; at the end, the report's rows,
// warm-up included; no temporary file is left.
TEST_F(PromOutputTest, FileFollowsTheRowsAndEndsWithTheReportsTotals) {
  Pipeline p(cfg_);
  ASSERT_TRUE(p.metrics_file().enabled());
  int64_t last_steps = 0;
  int64_t last_loss = 0;
  for (int i = 0; i < 10; ++i) {
    p.ingest_events(step_events(i));
    p.tick(kStart + i * kStepNs + kStepNs / 2);
    const std::string text = prom_text();
    ASSERT_FALSE(text.empty()) << "tick " << i;
    const size_t rows = p.accountant().rows().size();
    const std::string steps = value_of(text, "gpuacct_steps_total{" + kLabels + "}");
    if (rows == 0) {
      EXPECT_EQ(steps, "");  // no device has rows yet: no per-device sample
    } else {
      EXPECT_EQ(steps, std::to_string(rows)) << "tick " << i;
      last_steps = std::stoll(steps);
    }
    // Always there, never going back (the host rings are the process's: other tests' drops
    // may be counted here too).
    const std::string loss = value_of(text, kDataLoss);
    ASSERT_FALSE(loss.empty());
    EXPECT_GE(std::stoll(loss), last_loss);
    last_loss = std::stoll(loss);
  }
  EXPECT_GE(last_steps, 7);
  EXPECT_EQ(p.metrics_file().writes(), 10);
  p.finish(GpuCollectionState{});
  EXPECT_EQ(p.metrics_file().writes(), 11);

  const json rep = report();
  const std::string text = prom_text();
  int64_t duration = 0;
  int64_t warmup_rows = 0;
  WallBreakdown walls;
  for (const json& r : rep["steps"]) {
    duration += r["duration_ns"].get<int64_t>();
    warmup_rows += r["warmup"].get<bool>() ? 1 : 0;
    for (const WallInfo& w : kWalls)
      walls[w.wall] += r["walls"][std::string(w.name)].get<int64_t>();
  }
  EXPECT_EQ(warmup_rows, 1);  // counted too
  int64_t loss = 0;
  for (const json& st : rep["stats"]) {
    if (st["severity"] == "data_loss") loss += st["value"].get<int64_t>();
  }
  EXPECT_EQ(value_of(text, kDataLoss), std::to_string(loss));
  EXPECT_EQ(value_of(text, "gpuacct_steps_total{" + kLabels + "}"),
            std::to_string(rep["steps"].size()));
  EXPECT_EQ(value_of(text, "gpuacct_step_seconds_count{" + kLabels + "}"),
            std::to_string(rep["steps"].size()));
  EXPECT_EQ(value_of(text, "gpuacct_step_seconds_sum{" + kLabels + "}"),
            prometheus_seconds(duration));
  EXPECT_GT(walls.data, 0);
  for (const WallInfo& w : kWalls) {
    EXPECT_EQ(value_of(text, "gpuacct_wall_seconds_total{" + kLabels + ",wall=\"" +
                                 std::string(w.name) + "\"}"),
              prometheus_seconds(walls[w.wall]))
        << w.name;
  }
  // 10 ms steps: all in le="0.01" and none below le="0.005".
  EXPECT_EQ(value_of(text, "gpuacct_step_seconds_bucket{" + kLabels + ",le=\"0.005\"}"), "0");
  EXPECT_EQ(value_of(text, "gpuacct_step_seconds_bucket{" + kLabels + ",le=\"0.01\"}"),
            std::to_string(rep["steps"].size()));
  EXPECT_EQ(prom_dir_entries(), std::vector<std::string>{"gpuacct_job9_testhost_rank1.prom"});
}

TEST_F(PromOutputTest, WrittenOncePerPeriod) {
  cfg_.prom_period_ms = 3'600'000;
  Pipeline p(cfg_);
  for (int i = 0; i < 6; ++i) {
    p.ingest_events(step_events(i));
    p.tick(kStart + i * kStepNs + kStepNs / 2);
  }
  EXPECT_EQ(p.metrics_file().writes(), 1);  // the first tick; the next is an hour away
  EXPECT_EQ(value_of(prom_text(), "gpuacct_steps_total{" + kLabels + "}"), "");
  p.finish(GpuCollectionState{});
  EXPECT_EQ(p.metrics_file().writes(), 2);  // ... and the end
  EXPECT_EQ(value_of(prom_text(), "gpuacct_steps_total{" + kLabels + "}"),
            std::to_string(report()["steps"].size()));
}

TEST_F(PromOutputTest, OffWithoutADirectory) {
  cfg_.prom_dir.clear();
  Pipeline p(cfg_);
  EXPECT_FALSE(p.metrics_file().enabled());
  p.ingest_events(step_events(0));
  p.tick(kStart);
  p.finish(GpuCollectionState{});
  EXPECT_TRUE(prom_dir_entries().empty());
  EXPECT_EQ(p.metrics_file().writes(), 0);
}

// A directory that does not exist: one failure turns the metrics off; the report is written.
TEST_F(PromOutputTest, AnUnwritableDirectoryTurnsTheMetricsOffNotTheRun) {
  cfg_.prom_dir = dir_ + "/missing";
  Pipeline p(cfg_);
  for (int i = 0; i < 4; ++i) {
    p.ingest_events(step_events(i));
    p.tick(kStart + i * kStepNs + kStepNs / 2);
  }
  EXPECT_FALSE(p.metrics_file().enabled());
  EXPECT_EQ(p.metrics_file().writes(), 0);
  p.finish(GpuCollectionState{});
  EXPECT_FALSE(fs::exists(dir_ + "/missing"));
  EXPECT_GE(report()["steps"].size(), 3u);
}

// An exception while writing it at the end (a bug, out of memory) costs the final write only:
// the report and the stream's trailer are written, the file keeps the last period's values.
TEST_F(PromOutputTest, AFailureAtTheEndCostsOnlyTheFinalWrite) {
  Pipeline p(cfg_);
  p.add_fault_for_testing("the metrics file");
  for (int i = 0; i < 4; ++i) {
    p.ingest_events(step_events(i));
    p.tick(kStart + i * kStepNs + kStepNs / 2);
  }
  const std::string before = prom_text();
  ASSERT_FALSE(before.empty());
  p.finish(GpuCollectionState{});
  EXPECT_EQ(prom_text(), before);
  EXPECT_EQ(report()["steps"].size(), 4u);
  EXPECT_EQ(prom_dir_entries(), std::vector<std::string>{"gpuacct_job9_testhost_rank1.prom"});
}

// Another user's file, or a link planted at the name, is never written through: a fresh name
// beside it, kept for the rest of the run.
TEST_F(PromOutputTest, APlantedLinkIsNotFollowed) {
  const std::string victim = dir_ + "/victim";
  { std::ofstream(victim) << "keep"; }
  fs::create_symlink(victim, prom_path());
  Pipeline p(cfg_);
  for (int i = 0; i < 3; ++i) {
    p.ingest_events(step_events(i));
    p.tick(kStart + i * kStepNs + kStepNs / 2);
  }
  p.finish(GpuCollectionState{});
  std::ifstream in(victim);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "keep");
  EXPECT_EQ(p.metrics_file().path(), dir_ + "/prom/gpuacct_job9_testhost_rank1-1.prom");
  EXPECT_TRUE(fs::exists(p.metrics_file().path()));
  EXPECT_EQ(prom_dir_entries().size(), 2u);  // the link and the one fresh file, nothing else
}

}  // namespace
}  // namespace gpuacct::inject
