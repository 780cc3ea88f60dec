// The front door (analysis/input/input.h) on crafted inputs: a recording whose metadata holds
// fields of the wrong JSON type, and a profiler trace whose first step is warm-up.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "analysis/import/recording.h"
#include "analysis/input/input.h"
#include "analysis/report/report.h"
#include "analysis/report/run_summary.h"

namespace gpuacct {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

// A whole recording (valid checksums: written by RecordingWriter) of two step ranges, one
// kernel each, with `step_detection` as the metadata's step_detection section.
std::string recording_with_detection(const std::string& step_detection) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::to_string(::getpid()) + "_front_door.gpuacct"))
                               .string();
  NameTable names;
  EventBatch b;
  for (int i = 0; i < 2; ++i) {
    const TimeNs t = 1'000'000 * (i + 1);
    HostRange r;
    r.kind = RangeKind::kStep;
    r.start = t;
    r.end = t + 1'000'000;
    r.number = i;
    r.thread = 1;
    r.name = names.intern("step");
    b.ranges.push_back(r);
    HostApiCall c;
    c.kind = HostApiKind::kLaunch;
    c.thread = 1;
    c.start = t + 10'000;
    c.end = t + 15'000;
    c.correlation_id = static_cast<uint64_t>(i + 1);
    c.name = names.intern("cudaLaunchKernel");
    b.api_calls.push_back(c);
    GpuOp op;
    op.kind = GpuOpKind::kKernel;
    op.start = t + 20'000;
    op.end = t + 500'000;
    op.correlation_id = c.correlation_id;
    op.name = names.intern("gemm");
    b.gpu_ops.push_back(op);
  }
  RecordingWriter w;
  EXPECT_TRUE(w.open(path).ok());
  EXPECT_TRUE(w.write_new_names(names).ok());
  EXPECT_TRUE(w.write_batch(b).ok());
  RunMetadata meta;
  meta.source = "injected";
  meta.step_detection = step_detection;
  EXPECT_TRUE(w.write_metadata(meta).ok());
  EXPECT_TRUE(w.close().ok());
  std::string bytes = read_bytes(path);
  std::remove(path.c_str());
  return bytes;
}

// Reading finding A (issue 14): a checksummed recording whose metadata holds a field of the
// wrong JSON type ended in `.value(...)` throwing (the CLI's "internal error"); analysis/
// promises errors as Status.  Now a named error.
TEST(FrontDoor, MetadataOfTheWrongTypeIsANamedError) {
  for (const char* bad : {R"({"trailing_partial_step_dropped":"yes"})",
                          R"({"trailing_partial_step_dropped":1})",
                          R"({"trailing_partial_step_dropped":[true]})"}) {
    const std::string bytes = recording_with_detection(bad);
    ASSERT_FALSE(bytes.empty());
    NameTable names;
    auto accounted =
        account_input(Input::from_buffer(bytes, "crafted.gpuacct"), AccountingConfig{}, names);
    ASSERT_FALSE(accounted.ok()) << bad;
    EXPECT_NE(accounted.status().message().find("trailing_partial_step_dropped"),
              std::string::npos)
        << accounted.status().message();
  }
  // The same field of the right type is read as before; null is absent, as everywhere in
  // the metadata.
  const std::string good = recording_with_detection(R"({"trailing_partial_step_dropped":true})");
  NameTable names;
  auto accounted =
      account_input(Input::from_buffer(good, "good.gpuacct"), AccountingConfig{}, names);
  ASSERT_TRUE(accounted.ok()) << accounted.status().message();
  EXPECT_EQ(accounted->accountant->stats().get(Stat::incomplete_trailing_step), 1);
  const std::string null = recording_with_detection(R"({"trailing_partial_step_dropped":null})");
  auto absent =
      account_input(Input::from_buffer(null, "null.gpuacct"), AccountingConfig{}, names);
  ASSERT_TRUE(absent.ok()) << absent.status().message();
  EXPECT_EQ(absent->accountant->stats().get(Stat::incomplete_trailing_step), 0);
}

// A PyTorch-profiler trace (no schedule: no warm-up configured for a trace) of 5 steps: the
// first 700 us, most of it launch gaps (first-call set-up), the other four ~150 us and
// data-bound (a 40 us data range, then one 100 us kernel).
std::string trace_with_slow_first_step() {
  std::string ev;
  auto add = [&ev](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  auto x = [](const char* cat, const std::string& name, int tid, double ts, double dur,
              const std::string& args) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  R"({"ph":"X","cat":"%s","name":"%s","pid":%d,"tid":%d,"ts":%.1f,"dur":%.1f,)"
                  R"("args":{%s}})",
                  cat, name.c_str(), tid == 7 ? 0 : 1, tid, ts, dur, args.c_str());
    return std::string(buf);
  };
  int corr = 100;
  auto launch = [&](double at, double kernel_start, double kernel_dur) {
    ++corr;
    const std::string c = "\"correlation\":" + std::to_string(corr);
    add(x("cuda_runtime", "cudaLaunchKernel", 1, at, 4, c));
    add(x("kernel", "gemm_kernel", 7, kernel_start, kernel_dur,
          "\"device\":0,\"stream\":7," + c));
  };
  double t = 1000;
  // Step 1: data 40 us, then 11 kernels of 10 us, each launched 50 us after the last ended
  // (pauses below the 100 us host-pause threshold: launch wall).
  add(x("user_annotation", "ProfilerStep#1", 1, t, 700, ""));
  add(x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1, t,
        40, ""));
  for (int k = 0; k < 11; ++k) launch(t + 40 + 60 * k, t + 45 + 60 * k, 10);
  t += 700;
  for (int s = 2; s <= 5; ++s) {
    add(x("user_annotation", "ProfilerStep#" + std::to_string(s), 1, t, 150, ""));
    add(x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1,
          t, 40, ""));
    launch(t + 40, t + 45, 100);
    t += 150;
  }
  return "{\"traceEvents\":[\n" + ev + "\n]}";
}

// Item 7 (issue 14): a leading step far slower than the steady state is warm-up whatever the
// source; the summary of the trace leaves it out and says so.
TEST(FrontDoor, SlowFirstStepOfATraceIsWarmup) {
  const std::string trace = trace_with_slow_first_step();
  NameTable names;
  AccountingConfig cfg;
  cfg.warmup_steps = AccountingConfig::kWarmupBySource;  // what `gpuacct analyze` passes
  auto accounted = account_input(Input::from_buffer(trace, "slow_first.json"), cfg, names);
  ASSERT_TRUE(accounted.ok()) << accounted.status().message();
  const StepAccountant& acc = *accounted->accountant;
  ASSERT_EQ(acc.rows().size(), 5u);
  EXPECT_FALSE(acc.rows()[0].warmup);  // a trace configures no warm-up
  const RunSummary s = summarize(acc.rows(), acc.stats());
  EXPECT_EQ(s.slow_start_steps, std::vector<int64_t>{0});
  EXPECT_EQ(s.steps, 4);
  EXPECT_EQ(s.warmup_steps, 1);
  EXPECT_EQ(s.verdict.bound, "data") << s.verdict.headline;
  const nlohmann::json report =
      build_report(acc, accounted->contents.metadata, names, ReportParts{accounted->contents.sections, {}});
  EXPECT_EQ(report["summary"]["warmup_steps"], 1);
  EXPECT_EQ(report["summary"]["warmup"]["slow_start"]["steps"], nlohmann::json::array({0}));
  // The warm-up step's idle gaps are not the summary's largest.
  for (const auto& gap : report["largest_idle_gaps"]) EXPECT_NE(gap["step_index"], 0);
  const RunSummary all = summarize(acc.rows(), acc.stats(), VerdictBands{}, nullptr,
                                   SlowStartRule{1e9, 3});  // the rule off: what it was before
  std::printf("[warm-up] before: %s\n[warm-up] after:  %s\n", all.verdict.headline.c_str(),
              s.verdict.headline.c_str());
}

}  // namespace
// Issue 27: a profiler trace whose capture began before its first ProfilerStep (no schedule):
// what comes before the first step is set-up -- its own report section, in no step -- with the
// calls that name one-time work (graph capture) counted where the trace has them.
TEST(FrontDoor, WhatATraceHoldsBeforeItsFirstStepIsSetUp) {
  std::string ev;
  auto add = [&ev](const std::string& e) { ev += (ev.empty() ? "" : ",\n") + e; };
  auto x = [](const char* cat, const char* name, int tid, double ts, double dur, int corr) {
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  R"({"ph":"X","cat":"%s","name":"%s","pid":%d,"tid":%d,"ts":%.1f,"dur":%.1f,)"
                  R"("args":{"correlation":%d,"device":0,"stream":7}})",
                  cat, name, tid == 7 ? 0 : 1, tid, ts, dur, corr);
    return std::string(buf);
  };
  // Set-up: a kernel (weights initialised), a graph capture begun and ended.
  add(x("cuda_runtime", "cudaLaunchKernel", 1, 100, 5, 1));
  add(x("kernel", "init_kernel", 7, 110, 40, 1));
  add(x("cuda_runtime", "cudaStreamBeginCapture", 1, 300, 10, 2));
  add(x("cuda_runtime", "cudaStreamEndCapture", 1, 400, 10, 3));
  for (int s = 1; s <= 4; ++s) {
    const double t = 1000.0 + 200.0 * (s - 1);
    add(x("user_annotation", ("ProfilerStep#" + std::to_string(s)).c_str(), 1, t, 200, 0));
    add(x("cuda_runtime", "cudaLaunchKernel", 1, t + 10, 5, 10 + s));
    add(x("kernel", "gemm_kernel", 7, t + 20, 150, 10 + s));
  }
  const std::string trace = "{\"traceEvents\":[\n" + ev + "\n]}";
  NameTable names;
  AccountingConfig cfg;
  cfg.warmup_steps = AccountingConfig::kWarmupBySource;
  auto accounted = account_input(Input::from_buffer(trace, "setup.json"), cfg, names);
  ASSERT_TRUE(accounted.ok()) << accounted.status().message();
  const StepAccountant& acc = *accounted->accountant;
  ASSERT_EQ(acc.rows().size(), 4u);
  const nlohmann::json report = build_report(acc, accounted->contents.metadata, names,
                                             ReportParts{accounted->contents.sections, {}});
  ASSERT_TRUE(report.contains("setup")) << report.dump();
  const nlohmann::json& setup = report["setup"];
  EXPECT_EQ(setup["begin_ns"], 100'000);
  EXPECT_EQ(setup["end_ns"], 1'000'000);
  EXPECT_EQ(setup["kernels"], 1);
  EXPECT_EQ(setup["launches"], 1);
  EXPECT_EQ(setup["gpu_busy_ns"], 40'000);
  EXPECT_EQ(setup["graph_captures"], 1);
  EXPECT_EQ(setup["folded_steps"], 0);
  // The set-up's kernel is in no step, and the first step's window begins at its host begin.
  EXPECT_EQ(acc.rows()[0].window_begin, 1'000'000);
  const StatusOr<std::string> text = render_terminal_summary(report);
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text.value().find("set-up 0.9 ms before the first step"), std::string::npos)
      << text.value();
}

}  // namespace gpuacct
