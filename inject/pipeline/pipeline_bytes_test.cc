// The live pipeline's outputs under outside bytes and internal errors (issue 14, item 1):
// a byte that is not UTF-8 never costs an output, and a part of the report that throws costs
// that part only.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/recording.h"
#include "analysis/model/json_text.h"
#include "inject/pipeline/pipeline.h"
#include "inject/pipeline/pipeline_test_events.h"

namespace gpuacct::inject {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class PipelineBytesTest : public PipelineOutputTest {
 protected:
  void SetUp() override {
    PipelineOutputTest::SetUp();
    cfg_.host = "host\xE9-\xC3";  // Latin-1 and a truncated sequence
    cfg_.warmup_steps = 0;
    cfg_.record = true;
  }

  // Every line parsed by the strict parser (it rejects bytes that are not UTF-8).
  std::vector<json> stream_lines() const {
    std::vector<json> out;
    std::istringstream in(read("run.steps.jsonl"));
    for (std::string line; std::getline(in, line);) {
      EXPECT_TRUE(is_valid_utf8(line)) << line;
      out.push_back(json::parse(line));
    }
    return out;
  }
  json report() const {
    const std::string text = read("run.report.json");
    EXPECT_TRUE(is_valid_utf8(text));
    return json::parse(text);
  }
  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (name.find(".tmp.") != std::string::npos) out.push_back(name);
    }
    return out;
  }

  // Four steps of a launch and its kernel each, then finish().
  void run(Pipeline& p) {
    for (int i = 0; i < 4; ++i) {
      const TimeNs t0 = 1'000'000'000 + i * 10'000'000;
      EventBatch b;
      b.ranges.push_back({t0, t0 + 10'000'000, i, 1, kNoName, RangeKind::kStep, {}});
      HostApiCall launch;
      launch.start = t0 + 1'000;
      launch.end = t0 + 6'000;
      launch.correlation_id = static_cast<uint64_t>(i) + 1;
      launch.thread = 1;
      launch.kind = HostApiKind::kLaunch;
      b.api_calls.push_back(launch);
      GpuOp op;
      op.start = t0 + 10'000;
      op.end = t0 + 9'000'000;
      op.correlation_id = launch.correlation_id;
      b.gpu_ops.push_back(op);
      p.ingest_events(b);
    }
    p.finish(GpuCollectionState{});
  }
};

// Before: the stream's header (the hostname) threw in the constructor; the report, the
// recording's metadata and the trailer were never written.
TEST_F(PipelineBytesTest, AHostnameThatIsNotUtf8CostsNoOutput) {
  {
    Pipeline p(cfg_);
    run(p);
  }
  const json rep = report();
  EXPECT_EQ(rep["run"]["hostname"], "host\\xE9-\\xC3");
  EXPECT_EQ(rep["steps"].size(), 4u);
  const std::vector<json> lines = stream_lines();
  ASSERT_GE(lines.size(), 6u);  // header, 4 rows, trailer
  EXPECT_EQ(lines.front()["hostname"], "host\\xE9-\\xC3");
  EXPECT_EQ(lines.back()["provisional"], false);
  EXPECT_TRUE(leftovers().empty());
  // The recording holds the same text: a re-analysis names the host as the report did.
  NameTable names;
  StepAccountant acc;
  Stats stats;
  auto contents = read_recording(dir_ + "/run.gpuacct", names, acc, stats);
  ASSERT_TRUE(contents.ok()) << contents.status().message();
  EXPECT_EQ(contents->metadata.hostname, "host\\xE9-\\xC3");
}

// A part of the report that throws (a bug, out of memory) costs that part only: the report
// is written with the step rows and names the part in report_errors; the stream gets its
// trailer; the recording is closed (or, when its own part fails, abandoned: no temporary file).
TEST_F(PipelineBytesTest, APartThatThrowsCostsThatPartOnly) {
  for (const char* part :
       {"collection", "step_detection", "report", "the run metadata", "the last steps"}) {
    SCOPED_TRACE(part);
    {
      Pipeline p(cfg_);
      p.add_fault_for_testing(part);
      run(p);
    }
    const json rep = report();
    EXPECT_EQ(rep["schema"], "gpuacct.report/1");
    const std::string name = part;
    const bool lists_it = rep.contains("report_errors") &&
                          rep["report_errors"].dump().find(name) != std::string::npos;
    const bool report_part = name == "collection" || name == "step_detection" || name == "report";
    EXPECT_EQ(lists_it, report_part) << rep.value("report_errors", json()).dump();
    // (Without the last steps finalised there are no rows: nothing ticked the watermark.)
    if (name != "the last steps") {
      EXPECT_EQ(rep["steps"].size(), 4u);
    }
    if (name == "report") {
      EXPECT_EQ(rep["summary"]["steps"], 4);  // summary_report's
    }
    if (name != "collection") {
      EXPECT_TRUE(rep.contains("collection"));
    }
    if (name != "the last steps") {
      EXPECT_EQ(stream_lines().back()["provisional"], false);
    }
    EXPECT_TRUE(leftovers().empty());
    EXPECT_TRUE(fs::exists(dir_ + "/run.gpuacct"));
    fs::remove(dir_ + "/run.report.json");
    fs::remove(dir_ + "/run.steps.jsonl");
    fs::remove(dir_ + "/run.gpuacct");
  }
}

// A recording write that throws: the recording is abandoned (counted, no temporary file left),
// everything else is written.
TEST_F(PipelineBytesTest, ARecordingWriteThatThrowsAbandonsTheRecordingOnly) {
  {
    Pipeline p(cfg_);
    p.add_fault_for_testing("recording");
    run(p);
  }
  const json rep = report();
  EXPECT_EQ(rep["steps"].size(), 4u);
  int64_t abandoned = -1;
  for (const json& st : rep["stats"]) {
    if (st["name"] == "recordings_abandoned") abandoned = st["value"].get<int64_t>();
  }
  EXPECT_EQ(abandoned, 1);
  EXPECT_TRUE(rep["data_loss"].get<bool>());
  EXPECT_FALSE(fs::exists(dir_ + "/run.gpuacct"));
  EXPECT_TRUE(leftovers().empty());
  EXPECT_EQ(stream_lines().back()["provisional"], false);
}

// The report fails and a part of its fallback too (the summary, the rows): the rest is there.
TEST_F(PipelineBytesTest, TheFallbackReportKeepsWhatItCanBuild) {
  for (const char* second : {"summary", "steps"}) {
    SCOPED_TRACE(second);
    {
      Pipeline p(cfg_);
      p.add_fault_for_testing("report");
      p.add_fault_for_testing(second);
      run(p);
    }
    const json rep = report();
    EXPECT_EQ(rep["schema"], "gpuacct.report/1");
    EXPECT_EQ(rep.contains("summary"), std::string(second) != "summary");
    EXPECT_EQ(rep.value("steps", json::array()).size(), std::string(second) == "steps" ? 0u : 4u);
    EXPECT_EQ(rep["report_errors"].size(), 2u) << rep["report_errors"].dump();
    EXPECT_TRUE(rep.contains("collection"));
    EXPECT_EQ(stream_lines().back()["provisional"], false);
    fs::remove(dir_ + "/run.report.json");
    fs::remove(dir_ + "/run.steps.jsonl");
    fs::remove(dir_ + "/run.gpuacct");
  }
}

}  // namespace
}  // namespace gpuacct::inject
