#include "analysis/accounting/step_detection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "analysis/accounting/step_accountant.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/import/synthetic.h"

namespace gpuacct {
namespace {

// A whole recording that marks no steps gets exactly its loop's steps back: every step, and
// only complete ones.  When the step-ending op the detector picks lies inside the loop body
// (demo: two syncs per step, so it ends steps at the all-reduce), the first and last loop
// iterations are cut at that op: the work before the first step end and after the last one
// are partial steps, left out (not two short "steps"), and the rest are whole periods.
TEST(OfflineStepDetection, FindsTheStepsOfAnUnmarkedLoop) {
  for (const char* preset : {"data_bound", "launch_bound", "comm_bound", "balanced", "demo"}) {
    NameTable names;
    AccountingConfig cfg;
    cfg.warmup_steps = 0;
    StepAccountant acc(cfg);
    OfflineStepDetection detection;
    TeeSink tee({&acc, &detection});
    auto spec = SyntheticSpec::preset(preset);
    ASSERT_TRUE(spec.ok());
    spec->steps = 12;
    spec->emit_steps = false;
    generate_synthetic(*spec, names, tee);
    ASSERT_FALSE(detection.input_marks_steps());
    const OfflineStepDetection::Result detected = detection.detect();
    for (const HostRange& r : detected.steps) acc.add_range(r);
    acc.finish();
    EXPECT_TRUE(detection.detector().locked()) << preset;
    const bool mid_loop = std::string(preset) == "demo";
    EXPECT_EQ(detected.leading_partial, mid_loop) << preset;
    EXPECT_EQ(detected.trailing_partial, mid_loop) << preset;
    EXPECT_EQ(acc.rows().size(), mid_loop ? 11u : 12u) << preset;
    for (const StepRow& r : acc.rows()) {
      EXPECT_EQ(r.cat.sum(), r.duration());
      EXPECT_EQ(r.kernels, acc.rows().front().kernels) << preset << ": a partial step";
    }
  }
}

// An input with its own steps is left alone.
TEST(OfflineStepDetection, InputWithStepsIsLeftAlone) {
  NameTable names;
  OfflineStepDetection detection;
  auto spec = SyntheticSpec::preset("balanced");
  spec->steps = 6;
  generate_synthetic(*spec, names, detection);
  EXPECT_TRUE(detection.input_marks_steps());
  EXPECT_TRUE(detection.detect().steps.empty());
}

// A burst of one op repeated back to back is not a training step, and neither is a pattern
// that covers only a small part of the run: no lock, rather than nonsense steps.
TEST(OfflineStepDetection, NoLockOnOneOpBurstsOrMinorPatterns) {
  NameTable names;
  OfflineStepDetection detection;
  const NameId sync = names.intern("cudaEventSynchronize");
  const NameId k = names.intern("kernel");
  TimeNs t = 0;
  uint64_t corr = 1;
  for (int i = 0; i < 30; ++i) {  // 30 syncs back to back
    detection.on_api_call(HostApiCall{t, t + 100, corr++, 1, sync, HostApiKind::kSync, {}});
    t += 1000;
  }
  for (int i = 0; i < 200; ++i) {  // then irregular work: kernel names all different
    const NameId n = names.intern("k" + std::to_string(i));
    detection.on_api_call(HostApiCall{t, t + 10, corr, 1, k, HostApiKind::kLaunch, {}});
    GpuOp op;
    op.start = t + 20;
    op.end = t + 50;
    op.correlation_id = corr++;
    op.name = n;
    detection.on_gpu_op(op);
    t += 100;
  }
  EXPECT_TRUE(detection.detect().steps.empty());
  EXPECT_FALSE(detection.detector().locked());
}

// ---- issue 8, item 4: ordinary traces without step markers ---------------------------------

// A loop as a profiler captures it: per step a host pause (data loading), five kernel launches,
// and a blocking stream sync.  Step k is planted at [begin[k], begin[k + 1]): from the start of
// its pause to the end of its sync.
struct UnmarkedLoop {
  NameTable names;
  std::vector<HostApiCall> calls;
  std::vector<GpuOp> ops;
  std::vector<TimeNs> begin;  // planted step begins; begin.back() = end of the last step
  uint64_t corr = 1;
  TimeNs t = 5'000'000'000;
  bool sync_correlated = true;
  NameId sync_name = 0;

  UnmarkedLoop() { sync_name = names.intern("cudaStreamSynchronize"); }
  // Launches kernels k_first..k_last of one step (names k0..k4), 50 us each on the GPU.
  void kernels(int k_first, int k_last) {
    for (int i = k_first; i <= k_last; ++i) {
      calls.push_back(HostApiCall{
          t, t + 5'000, corr, 1, names.intern("cudaLaunchKernel"), HostApiKind::kLaunch, {}});
      GpuOp op;
      op.start = t + 10'000;
      op.end = op.start + 50'000;
      op.correlation_id = corr++;
      op.stream = 7;
      op.name = names.intern("k" + std::to_string(i));
      ops.push_back(op);
      t += 60'000;
    }
  }
  void sync() {
    calls.push_back(HostApiCall{
        t, t + 100'000, sync_correlated ? corr++ : 0, 1, sync_name, HostApiKind::kSync, {}});
    t += 100'000;
  }
  void step() {
    begin.push_back(t);
    t += 2'000'000;  // data loading
    kernels(0, 4);
    sync();
  }
  // Feeds everything (in file order) to the accountant and the detection, then adds the
  // detected steps and finishes.
  OfflineStepDetection::Result analyse(StepAccountant& acc) {
    OfflineStepDetection detection(names.intern(kDetectedStepName));
    TeeSink tee({&acc, &detection});
    for (const HostApiCall& c : calls) tee.on_api_call(c);
    for (const GpuOp& op : ops) tee.on_gpu_op(op);
    OfflineStepDetection::Result r = detection.detect();
    for (const HostRange& step : r.steps) acc.add_range(step);
    acc.finish();
    EXPECT_TRUE(detection.detector().locked());
    return r;
  }
};

AccountingConfig no_warmup() {
  AccountingConfig c;
  c.warmup_steps = 0;
  return c;
}

void expect_planted_steps(const std::vector<StepRow>& rows, const std::vector<TimeNs>& begin) {
  ASSERT_EQ(rows.size() + 1, begin.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i].host_begin, begin[i]) << "step " << i;
    EXPECT_EQ(rows[i].host_end, begin[i + 1]) << "step " << i;
    EXPECT_EQ(rows[i].kernels, 5u) << "step " << i;
    EXPECT_GT(rows[i].gpu_busy, 0) << "step " << i;
  }
}

// Sync calls without a correlation id used to sort before every launch (order 0): the loop
// looked like a burst of syncs then a run of kernels, and the steps were lost (no step, or one
// empty step and "No GPU activity").  They take their place by host time.
TEST(OfflineStepDetection, SyncsWithoutCorrelationIdEndSteps) {
  UnmarkedLoop loop;
  loop.sync_correlated = false;
  loop.calls.push_back(HostApiCall{loop.t,
                                   loop.t + 1'000,
                                   0,
                                   1,
                                   loop.names.intern("cudaGetDevice"),
                                   HostApiKind::kOther,
                                   {}});  // the capture begins here
  for (int s = 0; s < 10; ++s) loop.step();
  loop.begin.push_back(loop.t);
  StepAccountant acc(no_warmup());
  const auto r = loop.analyse(acc);
  EXPECT_FALSE(r.leading_partial);
  EXPECT_FALSE(r.trailing_partial);
  expect_planted_steps(acc.rows(), loop.begin);
  EXPECT_EQ(acc.stats().get(Stat::ops_outside_steps), 0);
}

// The first detected step starts one typical host pause before its first launch -- but never
// before the capture began (that invented milliseconds of host_other).
TEST(OfflineStepDetection, FirstStepNeverStartsBeforeTheCapture) {
  UnmarkedLoop loop;
  for (int s = 0; s < 10; ++s) loop.step();
  loop.begin.push_back(loop.t);
  // The capture begins with the first launch, inside step 0's data loading.
  loop.begin.front() = loop.calls.front().start;
  StepAccountant acc(no_warmup());
  loop.analyse(acc);
  expect_planted_steps(acc.rows(), loop.begin);
  ASSERT_FALSE(acc.rows().empty());
  EXPECT_EQ(acc.rows().front().window_begin, loop.calls.front().start);
  EXPECT_EQ(acc.rows().front().cat.host_other, 0);
}

// A capture that stops inside a step, or starts inside one: those partial steps are not steps
// (their work lies outside every step), and the trailing one is counted.
TEST(OfflineStepDetection, PartialStepsAtEitherEndAreNotSteps) {
  UnmarkedLoop loop;
  loop.t += 2'000'000;
  loop.kernels(3, 4);  // the capture begins inside a step
  loop.sync();
  for (int s = 0; s < 10; ++s) loop.step();
  loop.begin.push_back(loop.t);
  loop.t += 2'000'000;
  loop.kernels(0, 1);  // and stops inside one
  StepAccountant acc(no_warmup());
  const auto r = loop.analyse(acc);
  EXPECT_TRUE(r.leading_partial);
  EXPECT_TRUE(r.trailing_partial);
  expect_planted_steps(acc.rows(), loop.begin);
}

// cudaStreamWaitEvent makes a stream wait for an event; the host returns at once.  It is not a
// blocking sync, so it does not end steps (it did: steps ended mid-loop at the wait).
TEST(OfflineStepDetection, StreamWaitEventDoesNotEndSteps) {
  const std::string ev_prefix = R"({"ph": "X", "pid": 1, "tid": 1, )";
  std::string events;
  uint64_t corr = 1;
  double t = 1000.0;
  auto add = [&](const std::string& e) { events += (events.empty() ? "" : ",\n") + e; };
  auto launch = [&](const std::string& name) {
    add(ev_prefix + R"("cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": )" +
        std::to_string(t) + R"(, "dur": 5, "args": {"correlation": )" + std::to_string(corr) +
        "}}");
    add(R"({"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": ")" + name + R"(", "ts": )" +
        std::to_string(t + 10) +
        R"(, "dur": 40, "args": {"device": 0, "stream": 7, "correlation": )" +
        std::to_string(corr++) + "}}");
    t += 60;
  };
  for (int s = 0; s < 12; ++s) {
    t += 3000;  // data loading
    launch("k0");
    launch("k1");
    add(ev_prefix + R"("cat": "cuda_runtime", "name": "cudaStreamWaitEvent", "ts": )" +
        std::to_string(t) + R"(, "dur": 3, "args": {"correlation": )" + std::to_string(corr++) +
        "}}");
    t += 10;
    launch("k2");
    launch("k3");
  }
  NameTable names;
  Stats stats;
  OfflineStepDetection detection;
  ASSERT_TRUE(
      import_kineto_buffer("{\"traceEvents\": [" + events + "]}", names, detection, stats).ok());
  const auto r = detection.detect();
  ASSERT_TRUE(detection.detector().locked());
  EXPECT_FALSE(detection.detector().step_end_is_sync());
  EXPECT_EQ(names.text(detection.detector().step_end_name()), "k3");  // before the data wait
  EXPECT_EQ(r.steps.size(), 12u);  // one per loop iteration, each ending at its k3
  EXPECT_FALSE(r.leading_partial);
  EXPECT_FALSE(r.trailing_partial);
}

// ---- the incremental component: live (chunks, watermarks) and offline give the same steps --

bool same_range(const HostRange& a, const HostRange& b) {
  return a.start == b.start && a.end == b.end && a.number == b.number && a.thread == b.thread &&
         a.name == b.name && a.kind == b.kind;
}

// Boundaries delivered in any chunks (a live run polls every tick) make the same step ranges as
// all at once (a whole file): between consecutive boundaries, numbered from 0.
TEST(StepRangeMaker, ChunksGiveTheSameRangesAsAllAtOnce) {
  std::vector<Marker> boundaries;
  TimeNs t = 1'000;
  for (int i = 0; i < 40; ++i) {
    Marker m;
    m.ts = t;
    m.kind = MarkerKind::kStepBoundary;
    m.number = i;
    m.thread = static_cast<uint32_t>(100 + i % 3);
    boundaries.push_back(m);
    t += 500 + (i * 7919) % 1000;  // uneven steps
  }
  StepRangeMaker whole(42);
  std::vector<HostRange> expected;
  whole.add(boundaries, &expected);
  ASSERT_EQ(expected.size(), boundaries.size() - 1);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].start, boundaries[i].ts);
    EXPECT_EQ(expected[i].end, boundaries[i + 1].ts);
    EXPECT_EQ(expected[i].number, static_cast<int64_t>(i));
    EXPECT_EQ(expected[i].thread, boundaries[i + 1].thread);
    EXPECT_EQ(expected[i].name, 42u);
    EXPECT_EQ(expected[i].kind, RangeKind::kStep);
  }
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    StepRangeMaker live(42);
    std::vector<HostRange> got;
    uint32_t x = seed;
    for (size_t i = 0; i < boundaries.size();) {
      x = x * 1103515245u + 12345u;
      const size_t n = std::min<size_t>(boundaries.size() - i, (x >> 16) % 5);  // 0..4, empty too
      live.add(std::vector<Marker>(boundaries.begin() + static_cast<ptrdiff_t>(i),
                                   boundaries.begin() + static_cast<ptrdiff_t>(i + n)),
               &got);
      i += n;
    }
    ASSERT_EQ(got.size(), expected.size()) << "seed " << seed;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(same_range(got[i], expected[i])) << i;
    EXPECT_EQ(live.boundaries(), boundaries.size());
    EXPECT_EQ(live.steps(), expected.size());
  }
}

// A live run: batches arrive tick by tick and StepDetection is polled with a lagging watermark;
// a whole file: everything, then one final poll.  Same steps, and a step the capture cut off is
// counted the same way (poll_into).
TEST(StepDetection, LiveTicksAndWholeFileGiveTheSameSteps) {
  UnmarkedLoop loop;
  for (int s = 0; s < 30; ++s) loop.step();
  loop.t += 2'000'000;
  loop.kernels(0, 1);  // the capture stops inside a step
  const NameId name = loop.names.intern(kDetectedStepName);
  const TimeNs input_start = loop.calls.front().start;

  StepDetection offline(name, nullptr, {}, /*max_launches=*/0);
  for (const HostApiCall& c : loop.calls) offline.add_api_call(c);
  for (const GpuOp& op : loop.ops) offline.add_gpu_op(op);
  offline.note_input_start(input_start);
  StepAccountant offline_sink;
  std::vector<HostRange> expected = offline.poll_into(offline_sink, offline_sink.mutable_stats(),
                                                      std::numeric_limits<TimeNs>::max(), true);
  ASSERT_EQ(expected.size(), 30u);
  EXPECT_TRUE(offline.summary().trailing_partial);
  EXPECT_EQ(offline_sink.stats().get(Stat::incomplete_trailing_step), 1);

  for (size_t per_tick : {1u, 3u, 7u, 50u}) {
    StepDetection live(name);
    live.note_input_start(input_start);
    StepAccountant sink;
    std::vector<HostRange> got;
    // Each tick delivers the next `per_tick` calls and their ops, then polls with the end of
    // the previous tick's last call as the watermark (later events may still be in flight).
    size_t ci = 0, oi = 0;
    TimeNs watermark = std::numeric_limits<TimeNs>::min();
    while (ci < loop.calls.size()) {
      EventBatch batch;
      for (size_t n = 0; n < per_tick && ci < loop.calls.size(); ++n, ++ci) {
        batch.api_calls.push_back(loop.calls[ci]);
        while (oi < loop.ops.size() && loop.ops[oi].correlation_id <= loop.calls[ci].correlation_id)
          batch.gpu_ops.push_back(loop.ops[oi++]);
      }
      live.add(batch);
      for (const HostRange& r : live.poll_into(sink, sink.mutable_stats(), watermark, false))
        got.push_back(r);
      watermark = batch.api_calls.back().end;
    }
    const size_t before_final = got.size();
    EXPECT_GT(before_final, 20u) << "steps are handed on while the run goes on";
    for (const HostRange& r : live.poll_into(sink, sink.mutable_stats(), watermark, true))
      got.push_back(r);
    ASSERT_EQ(got.size(), expected.size()) << per_tick << " calls per tick";
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(same_range(got[i], expected[i])) << per_tick << " calls per tick, step " << i;
    }
    EXPECT_EQ(live.summary().steps, offline.summary().steps);
    EXPECT_EQ(live.summary().period_ops, offline.summary().period_ops);
    EXPECT_TRUE(live.summary().trailing_partial);
    EXPECT_EQ(sink.stats().get(Stat::incomplete_trailing_step), 1);
    EXPECT_EQ(sink.stats().get(Stat::ranges_received), static_cast<int64_t>(got.size()));
  }
}

}  // namespace
}  // namespace gpuacct
