// What the live pipeline's tests share (pipeline_test, pipeline_bytes_test,
// pipeline_collectives_test, prom_output_test): a fixture with an output directory and a
// Config writing there, and a train of steps whose rows and verdict are known.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "inject/pipeline/pipeline.h"

namespace gpuacct::inject {

// A fresh directory per test (removed after it) and a quiet Config writing "run.*" there;
// tests adjust cfg_ in their own SetUp after calling this one.
class PipelineOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gpuacct_pipeline_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    cfg_.output_dir = dir_;
    cfg_.output_pattern = "run";
    cfg_.host = "testhost";
    cfg_.pid = 42;
    cfg_.quiet = true;
    cfg_.warmup_steps = 1;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The bytes of `name` in the output directory ("" when it is missing).
  std::string read(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  nlohmann::json report() const { return nlohmann::json::parse(read("run.report.json")); }

  std::string dir_;
  Config cfg_;
};

}  // namespace gpuacct::inject

namespace gpuacct::inject::test_events {

inline constexpr TimeNs kStepNs = 10'000'000;
inline constexpr TimeNs kStart = 1'000'000'000;

// Step i: a step range on thread 1 with a data range (2 ms; 5 ms every third step, so the
// verdict is data-bound and the shares move step by step), one launch and its kernel to
// 0.1 ms before the step's end.
inline EventBatch step_events(int i) {
  EventBatch b;
  const TimeNs t0 = kStart + i * kStepNs;
  const TimeNs data_end = t0 + (i % 3 == 0 ? 5'000'000 : 2'000'000);
  b.ranges.push_back({t0, t0 + kStepNs, i, 1, kNoName, RangeKind::kStep, {}});
  b.ranges.push_back({t0, data_end, -1, 1, kNoName, RangeKind::kData, {}});
  HostApiCall launch;
  launch.start = data_end;
  launch.end = data_end + 5'000;
  launch.correlation_id = static_cast<uint64_t>(i) + 1;
  launch.thread = 1;
  launch.kind = HostApiKind::kLaunch;
  b.api_calls.push_back(launch);
  GpuOp op;
  op.start = data_end + 10'000;
  op.end = t0 + kStepNs - 100'000;
  op.correlation_id = launch.correlation_id;
  op.stream = 7;
  b.gpu_ops.push_back(op);
  return b;
}

}  // namespace gpuacct::inject::test_events
