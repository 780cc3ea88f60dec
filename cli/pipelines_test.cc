// `gpuacct analyze` and `gpuacct timeline` account an input the same way: the same steps (step
// detection included), the same warm-up, the same windows and categories.  They used to build
// the pipeline twice and disagree: the timeline ran no step detection (0 steps for a recording
// that marks none, where analyze found 9) and marked 2 warm-up steps of a profiler trace where
// analyze marked none.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "analysis/import/recording.h"
#include "analysis/import/synthetic.h"
#include "cli/pipelines.h"

namespace gpuacct::cli {
namespace {

namespace fs = std::filesystem;

// Writes a synthetic run that marks no steps as a recording.
class NoStepsRecording {
 public:
  NoStepsRecording() {
    path_ = (fs::temp_directory_path() /
             ("gpuacct_pipelines_test_" + std::to_string(::getpid()) + ".gpuacct"))
                .string();
    auto spec = SyntheticSpec::preset("balanced");
    EXPECT_TRUE(spec.ok());
    spec->steps = 9;
    spec->emit_steps = false;
    NameTable names;
    EventBatch batch;
    struct Collect final : EventSink {
      EventBatch* b;
      explicit Collect(EventBatch* out) : b(out) {}
      void on_gpu_op(const GpuOp& op) override { b->gpu_ops.push_back(op); }
      void on_api_call(const HostApiCall& c) override { b->api_calls.push_back(c); }
      void on_range(const HostRange& r) override { b->ranges.push_back(r); }
      void on_marker(const Marker& m) override { b->markers.push_back(m); }
    } collect(&batch);
    generate_synthetic(*spec, names, collect);
    RecordingWriter w;
    EXPECT_TRUE(w.open(path_).ok());
    EXPECT_TRUE(w.write_new_names(names).ok());
    EXPECT_TRUE(w.write_batch(batch).ok());
    EXPECT_TRUE(w.close().ok());
  }
  ~NoStepsRecording() { fs::remove(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void expect_same_rows(const std::string& input, const AccountingConfig& cfg, size_t min_rows) {
  SCOPED_TRACE(input);
  auto analysed = analyze_input(input, cfg, /*progress=*/false);
  ASSERT_TRUE(analysed.ok()) << analysed.status().message();
  auto timeline = timeline_of_input(input, cfg, /*progress=*/false);
  ASSERT_TRUE(timeline.ok()) << timeline.status().message();
  const std::vector<StepRow>& a = analysed->rows;
  const std::vector<StepRow>& t = timeline->writer->rows();
  ASSERT_EQ(a.size(), t.size());
  EXPECT_GE(a.size(), min_rows);
  ASSERT_EQ(analysed->report["steps"].size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    EXPECT_EQ(a[i].step_index, t[i].step_index);
    EXPECT_EQ(a[i].step_number, t[i].step_number);
    EXPECT_EQ(a[i].device, t[i].device);
    EXPECT_EQ(a[i].warmup, t[i].warmup);
    EXPECT_EQ(a[i].host_begin, t[i].host_begin);
    EXPECT_EQ(a[i].host_end, t[i].host_end);
    EXPECT_EQ(a[i].window_begin, t[i].window_begin);
    EXPECT_EQ(a[i].window_end, t[i].window_end);
    for (const CategoryInfo& c : kCategories) {
      EXPECT_EQ(a[i].cat[c.category], t[i].cat[c.category]) << c.name;
    }
    EXPECT_EQ(a[i].kernels, t[i].kernels);
    EXPECT_EQ(a[i].launches, t[i].launches);
  }
}

TEST(AnalyzeAndTimeline, RecordingThatMarksNoStepsGetsTheSameDetectedSteps) {
  NoStepsRecording rec;
  AccountingConfig given;
  given.warmup_steps = 1;
  given.launch_latency_threshold_ns = 20'000;
  expect_same_rows(rec.path(), given, 9);
  AccountingConfig by_source;
  by_source.warmup_steps = AccountingConfig::kWarmupBySource;
  expect_same_rows(rec.path(), by_source, 9);
  auto analysed = analyze_input(rec.path(), by_source, false);
  ASSERT_TRUE(analysed.ok());
  EXPECT_EQ(analysed->report["summary"]["warmup_steps"], AccountingConfig::kWarmupStepsWholeRun);
  EXPECT_EQ(analysed->report["step_detection"]["steps"], 9);
}

TEST(AnalyzeAndTimeline, RecordingsAndProfilerTracesGiveTheSameRows) {
  AccountingConfig by_source;
  by_source.warmup_steps = AccountingConfig::kWarmupBySource;
  const fs::path root = GPUACCT_SOURCE_DIR;
  expect_same_rows((root / "examples/data/sample.gpuacct").string(), by_source, 24);
  for (const char* trace : {"nccl_data.json.gz", "sampled_rank-0.json.gz",
                            "handmade_cuda_sync.json", "handmade_stream_overlap.json"}) {
    expect_same_rows((root / "tests/data/kineto" / trace).string(), by_source, 1);
  }
  // A profiler trace is a steady-state capture: no warm-up steps, in both.
  auto timeline =
      timeline_of_input((root / "tests/data/kineto/nccl_data.json.gz").string(), by_source, false);
  ASSERT_TRUE(timeline.ok());
  for (const StepRow& r : timeline->writer->rows()) EXPECT_FALSE(r.warmup);
}

TEST(AnalyzeAndTimeline, BadInputIsTheSameErrorInBoth) {
  AccountingConfig cfg;
  const auto a = analyze_input("/nonexistent/x.gpuacct", cfg, false);
  const auto t = timeline_of_input("/nonexistent/x.gpuacct", cfg, false);
  ASSERT_FALSE(a.ok());
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(a.status().message(), t.status().message());
}

}  // namespace
}  // namespace gpuacct::cli
