// The live pipeline without CUPTI: events go in through ingest_events() (the path a buffer
// wake-up takes) and the host rings; rows, summary lines and the report come out.
#include "inject/pipeline/pipeline.h"

#include "cupti_hooks/collector.h"
#include "inject/pipeline/pipeline_test_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/report/report.h"
#include "inject/recording/recorder.h"
#include "inject/recording/watermark.h"

namespace gpuacct::inject {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class PipelineTest : public PipelineOutputTest {
 protected:
  std::vector<json> stream_lines() const {
    std::vector<json> out;
    std::istringstream in(read("run.steps.jsonl"));
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
  }
};

using test_events::kStart;
using test_events::kStepNs;
using test_events::step_events;

// Every provisional line is the report's summary and verdict over exactly the rows finalised
// before it (counted in the stream), computed by the report's own code (build_report on the
// accountant at that moment), and the trailer is the final report's.
TEST_F(PipelineTest, SummaryLinesAreTheReportsSummaryOfTheRowsBeforeThem) {
  Pipeline p(cfg_);
  p.set_summary_cadence_for_testing(std::chrono::nanoseconds(0), 0);
  const RunMetadata no_devices = [] {
    RunMetadata m;
    m.source = "injected";
    return m;
  }();
  size_t lines_checked = 0;
  for (int i = 0; i < 12; ++i) {
    EventBatch b = step_events(i);
    if (i == 4) {
      GpuOp unfinished;  // a forced flush's incomplete record: skipped and counted
      unfinished.correlation_id = 999;
      b.gpu_ops.push_back(unfinished);
    }
    p.ingest_events(b);
    const size_t rows_before = p.accountant().rows().size();
    p.tick(kStart + i * kStepNs + kStepNs / 2);  // the previous step can be finalised
    const size_t rows_after = p.accountant().rows().size();
    const std::vector<json> lines = stream_lines();
    if (rows_after == rows_before) {
      EXPECT_TRUE(lines.empty() || !lines.back().contains("summary")) << "no new rows, no line";
      continue;
    }
    ASSERT_FALSE(lines.empty());
    const json& line = lines.back();
    ASSERT_TRUE(line.contains("summary")) << line.dump();
    EXPECT_EQ(line["provisional"], true);
    EXPECT_EQ(line["step_rows"].get<size_t>(), rows_after);
    size_t rows_in_stream = 0;
    for (const json& l : lines) rows_in_stream += l.contains("step_index") ? 1u : 0u;
    EXPECT_EQ(rows_in_stream, rows_after);
    const json expected = build_report(p.accountant(), no_devices, NameTable());
    EXPECT_EQ(line["summary"], expected["summary"]) << "after " << rows_after << " rows";
    EXPECT_EQ(line["verdict"], expected["verdict"]);
    EXPECT_EQ(line["data_loss"], expected["data_loss"]);
    json nonzero = json::array();
    for (const json& st : expected["stats"]) {
      if (st["value"] != 0) {
        nonzero.push_back(
            {{"name", st["name"]}, {"value", st["value"]}, {"severity", st["severity"]}});
      }
    }
    EXPECT_EQ(line["stats"], nonzero);
    EXPECT_EQ(line["stats"].dump().find("cupti_records_incomplete") != std::string::npos, i >= 4);
    ++lines_checked;
  }
  EXPECT_GE(lines_checked, 10u);
  p.finish(GpuCollectionState{});
  const std::vector<json> lines = stream_lines();
  const json rep = report();
  const json& trailer = lines.back();
  EXPECT_EQ(trailer["provisional"], false);
  EXPECT_EQ(trailer["summary"], rep["summary"]);
  EXPECT_EQ(trailer["verdict"], rep["verdict"]);
  EXPECT_EQ(trailer["step_rows"].get<size_t>(), rep["steps"].size());
  EXPECT_EQ(rep["verdict"]["bound"], "data");
  // The provisional lines moved with the rows: not all the same verdict share.
  std::set<double> shares;
  for (const json& l : lines) {
    if (l.contains("verdict")) shares.insert(l["verdict"]["share"].get<double>());
  }
  EXPECT_GT(shares.size(), 3u);
}

// Cadence: at most one line per interval, and none without new rows.
TEST_F(PipelineTest, SummaryLinesAtMostOncePerInterval) {
  Pipeline p(cfg_);
  p.set_summary_cadence_for_testing(std::chrono::hours(1), 0);
  for (int i = 0; i < 8; ++i) {
    p.ingest_events(step_events(i));
    p.tick(kStart + i * kStepNs + kStepNs / 2);
  }
  ASSERT_GE(p.accountant().rows().size(), 6u);
  size_t summaries = 0;
  for (const json& l : stream_lines()) summaries += l.contains("summary") ? 1u : 0u;
  EXPECT_EQ(summaries, 1u);  // the first tick with rows; the next is an hour away
  p.finish(GpuCollectionState{});
  summaries = 0;
  for (const json& l : stream_lines()) summaries += l.contains("summary") ? 1u : 0u;
  EXPECT_EQ(summaries, 2u);  // ... and the trailer
}

// Ranges dropped at a nesting cap reach the report (a data-loss counter, data_loss set, the
// verdict's note) and the stream's summary line.
TEST_F(PipelineTest, RangesDroppedAtACapAreDataLossInTheReport) {
  Pipeline p(cfg_);
  const int depth = static_cast<int>(HostEventProcessor::kMaxNestedRanges) + 3;
  EventBatch steps;
  for (int i = 0; i < 3; ++i) steps.ranges.push_back(step_events(i).ranges[0]);
  p.ingest_events(steps);
  // Through the host rings, as the C API writes them.
  for (int i = 0; i < depth; ++i) {
    emit_at(kStart + 1000 + i, HostRecType::kDataPush, 0, "decode", 0, 0);
  }
  for (int i = 0; i < depth; ++i)
    emit_at(kStart + 5000 + i, HostRecType::kDataPop, 0, nullptr, 0, 0);
  p.finish(GpuCollectionState{});
  const json rep = report();
  int64_t dropped = -1;
  for (const json& st : rep["stats"]) {
    if (st["name"] == "host_ranges_dropped") dropped = st["value"].get<int64_t>();
  }
  EXPECT_EQ(dropped, 3);
  EXPECT_EQ(rep["data_loss"], true);
  const json trailer = stream_lines().back();
  EXPECT_EQ(trailer["data_loss"], true);
  EXPECT_NE(trailer["stats"].dump().find("host_ranges_dropped"), std::string::npos);
  auto text = render_terminal_summary(rep, false);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text.value().find("! data loss: step / data ranges dropped"), std::string::npos)
      << text.value();
}

// GPUACCT_GPU_HOUR_PRICE reaches the report's cost section (analysis/report/cost.h), its money
// line and the stream's trailer; without a price there is none.
TEST_F(PipelineTest, PriceGivesTheReportACostSection) {
  for (const double price : {0.0, 2.0}) {
    cfg_.cost.gpu_hour_price = price;
    Pipeline p(cfg_);
    for (int i = 0; i < 6; ++i) p.ingest_events(step_events(i));
    p.finish(GpuCollectionState{});
    const json rep = report();
    if (price == 0) {
      EXPECT_FALSE(rep.contains("cost"));
      EXPECT_FALSE(stream_lines().back().contains("cost"));
      continue;
    }
    ASSERT_TRUE(rep.contains("cost")) << rep.dump();
    const json& cost = rep["cost"];
    EXPECT_EQ(cost["gpus"], 1);  // one device with rows, no world size
    // $2 an hour for one GPU, a 10 ms step: 2 x 0.01 / 3600.
    EXPECT_NEAR(rep["summary"]["step_time_ms"]["mean"].get<double>(), 10.0, 1e-9);
    EXPECT_NEAR(cost["per_step"].get<double>(), 2.0 * 0.01 / 3600, 1e-15);
    EXPECT_DOUBLE_EQ(cost["per_day"].get<double>(), 48.0);
    EXPECT_EQ(stream_lines().back()["cost"], cost);
    auto text = render_terminal_summary(rep, false);
    ASSERT_TRUE(text.ok());
    EXPECT_NE(text->find("/day on 1 GPU"), std::string::npos) << *text;
  }
}

TEST(FlushWatermark, PromisesTheClockSeenFiveTicksEarlierAtMostTwoPeriodsBack) {
  FlushWatermark w(100);
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(w.on_tick(1000 * i), FlushWatermark::kNone);
  EXPECT_EQ(w.on_tick(5000), 0);
  EXPECT_EQ(w.on_tick(6000), 1000);
  // Ticks closer together than the flush period (gpuacct_flush()): at most now - 2 periods.
  FlushWatermark fast(1000);
  int64_t last = 0;
  for (int64_t i = 0; i < 10; ++i) last = fast.on_tick(10 * i);
  EXPECT_EQ(last, 90 - 2000);
}

// A buffer CUPTI still holds after the flush holds the watermark before the time CUPTI asked
// for it (its records are still to come, API records too), by a margin; never more than
// kMaxBufferWaitNs behind.
TEST(FlushWatermark, StaysBeforeTheOldestBufferCuptiHolds) {
  const int64_t w = 50'000'000'000;
  const int64_t margin = FlushWatermark::kBufferMarginNs;
  EXPECT_EQ(FlushWatermark::held_by_buffers(w, cupti::Collector::kNoBufferLent), w);
  EXPECT_EQ(FlushWatermark::held_by_buffers(w, w + 5 * margin), w) << "lent after it: no effect";
  EXPECT_EQ(FlushWatermark::held_by_buffers(w, w - 3'000'000'000), w - 3'000'000'000 - margin);
  EXPECT_EQ(FlushWatermark::held_by_buffers(w, 0), w - FlushWatermark::kMaxBufferWaitNs);
  EXPECT_EQ(FlushWatermark::held_by_buffers(FlushWatermark::kNone, 0), FlushWatermark::kNone);
}

}  // namespace
}  // namespace gpuacct::inject
