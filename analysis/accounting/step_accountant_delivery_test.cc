// StepAccountant: delivery (out of order, late, incremental finalisation and freed state),
// steps from markers, warm-up, host-only rows, bad input, and the derived outputs (kernel
// exposure, category segments).  The per-rule tests with hand-computed truth are in
// step_accountant_test.cc.
#include <algorithm>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_accountant_test_util.h"
#include "analysis/model/name_table.h"

namespace gpuacct {
namespace {

using namespace testing_util;  // NOLINT(google-build-using-namespace): test helpers

Trace two_step_trace() {
  Trace t;
  t.step(0, us(1000), 0);
  t.step(us(1000), us(4000), 1);
  t.step(us(4000), us(5000), 2);
  t.data(0, us(300));
  t.kernel(us(300), us(305), us(310), us(900));
  t.collective(us(306), us(309), us(500), us(1200));
  t.kernel(us(1100), us(1105), us(1300), us(3500));
  t.copy(us(1106), us(1110), us(1120), us(1250), CopyDir::kH2D);
  t.kernel(us(4100), us(4105), us(4110), us(4900));
  t.call(us(3600), us(3700));
  return t;
}

// Events delivered in random order, in batches, with watermarks: the same rows.
TEST(StepAccountant, OutOfOrderAndLateDelivery) {
  const Trace t = two_step_trace();
  const auto expected = run(t);
  ASSERT_EQ(expected.size(), 3u);

  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    // Flatten, shuffle, deliver in batches of 3; the watermark is the smallest end among
    // events not yet delivered (the contract's strongest valid promise).
    struct Ev {
      int kind;
      size_t i;
      TimeNs end;
    };
    std::vector<Ev> evs;
    for (size_t i = 0; i < t.b.gpu_ops.size(); ++i) evs.push_back({0, i, t.b.gpu_ops[i].end});
    for (size_t i = 0; i < t.b.api_calls.size(); ++i) evs.push_back({1, i, t.b.api_calls[i].end});
    for (size_t i = 0; i < t.b.ranges.size(); ++i) evs.push_back({2, i, t.b.ranges[i].end});
    std::shuffle(evs.begin(), evs.end(), rng);
    StepAccountant acc(no_warmup());
    size_t emitted_before_finish = 0;
    for (size_t i = 0; i < evs.size(); ++i) {
      const Ev& e = evs[i];
      if (e.kind == 0) acc.add_gpu_op(t.b.gpu_ops[e.i]);
      if (e.kind == 1) acc.add_api_call(t.b.api_calls[e.i]);
      if (e.kind == 2) acc.add_range(t.b.ranges[e.i]);
      if (i % 3 == 2) {
        TimeNs w = INT64_MAX;
        for (size_t j = i + 1; j < evs.size(); ++j) w = std::min(w, evs[j].end);
        acc.advance_watermark(w);
        emitted_before_finish = acc.rows().size();
      }
    }
    acc.finish();
    const auto& got = acc.rows();
    ASSERT_EQ(got.size(), expected.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].window_begin, expected[i].window_begin);
      EXPECT_EQ(got[i].window_end, expected[i].window_end);
      EXPECT_EQ(got[i].cat.compute, expected[i].cat.compute);
      EXPECT_EQ(got[i].cat.comm_exposed, expected[i].cat.comm_exposed);
      EXPECT_EQ(got[i].cat.copy_input, expected[i].cat.copy_input);
      EXPECT_EQ(got[i].cat.data_wait, expected[i].cat.data_wait);
      EXPECT_EQ(got[i].cat.launch_gap, expected[i].cat.launch_gap);
      EXPECT_EQ(got[i].cat.host_other, expected[i].cat.host_other);
    }
    (void)emitted_before_finish;
    EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 0);
  }
}

// Steps finalise as soon as the watermark allows, and their state is freed.
TEST(StepAccountant, FinalisesIncrementallyAndFreesState) {
  const Trace t = two_step_trace();
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  EXPECT_TRUE(acc.rows().empty());
  acc.advance_watermark(us(1300));  // step 0 window ends at 1200 us; its host end 1000 us
  ASSERT_EQ(acc.rows().size(), 1u);
  const size_t retained = acc.retained_events();
  acc.advance_watermark(us(6000));
  EXPECT_EQ(acc.rows().size(), 3u);
  EXPECT_LT(acc.retained_events(), retained);
}

// A GPU op arriving after its step was finalised is dropped and counted, never silent.
// A run whose launches come from ever new threads (thread pools, short-lived workers, or a
// recording with garbage thread ids) keeps no state for threads whose events are all done.
TEST(StepAccountant, StateForFinishedThreadsIsFreed) {
  StepAccountant acc(no_warmup());
  for (int i = 0; i < 10000; ++i) {
    Trace t;
    t.next_corr = static_cast<uint64_t>(i) + 1;
    const TimeNs b = us(100 * i);
    t.step(b, b + us(100), i);
    t.kernel(b + us(10), b + us(12), b + us(20), b + us(60), 0, 7, static_cast<uint32_t>(1000 + i));
    acc.add(t.b);
    acc.advance_watermark(b + us(100));
  }
  // Correlation ids are pruned in batches (at most a few thousand kept); threads are not kept.
  EXPECT_LT(acc.retained_events(), 6000u);
  acc.finish();
  EXPECT_EQ(acc.rows().size(), 10000u);
}

TEST(StepAccountant, LateOpIsCountedAsDataLoss) {
  Trace t = two_step_trace();
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.advance_watermark(us(6000));
  ASSERT_EQ(acc.rows().size(), 3u);
  GpuOp late;
  late.start = us(100);
  late.end = us(200);
  acc.add_gpu_op(late);
  acc.finish();
  EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 1);
  EXPECT_TRUE(acc.stats().has_data_loss());
}

// A step waits for a launched op that has not arrived yet (it may still run in the window).
TEST(StepAccountant, WaitsForPendingLaunch) {
  Trace t;
  t.step(0, us(1000), 0);
  t.step(us(1000), us(2000), 1);
  t.kernel(us(10), us(15), us(20), us(800));
  GpuOp held = t.b.gpu_ops.back();
  t.b.gpu_ops.pop_back();
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.advance_watermark(us(1500));
  EXPECT_TRUE(acc.rows().empty()) << "the op of a seen launch call has not arrived";
  acc.add_gpu_op(held);
  acc.advance_watermark(us(1600));
  ASSERT_EQ(acc.rows().size(), 1u);
  EXPECT_EQ(acc.rows()[0].window_end, us(800));
}

// Rule 6: warm-up steps are flagged.
TEST(StepAccountant, WarmupStepsAreFlagged) {
  Trace t;
  for (int i = 0; i < 5; ++i) {
    t.step(us(1000.0 * i), us(1000.0 * (i + 1)), i);
    t.kernel(us(1000.0 * i + 1), us(1000.0 * i + 5), us(1000.0 * i + 10), us(1000.0 * i + 900));
  }
  AccountingConfig cfg;
  cfg.warmup_steps = 2;
  const auto rows = run(t, cfg);
  ASSERT_EQ(rows.size(), 5u);
  EXPECT_TRUE(rows[0].warmup);
  EXPECT_TRUE(rows[1].warmup);
  EXPECT_FALSE(rows[2].warmup);
  EXPECT_EQ(rows[3].step_number, 3);
}

// Steps from markers: one mark per iteration; the open last step ends at its last CUDA call.
TEST(StepAccountant, StepsFromMarkers) {
  Trace t;
  for (int i = 0; i < 3; ++i) {
    t.b.markers.push_back(Marker{us(1000.0 * i), 0, i, 1, 4, MarkerKind::kStepBoundary, {}});
    t.kernel(us(1000.0 * i + 1), us(1000.0 * i + 5), us(1000.0 * i + 10), us(1000.0 * i + 900));
  }
  t.call(us(2900), us(2950));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].host_end, us(2950));
  for (const auto& r : rows) expect_exact(r);
  EXPECT_EQ(rows[1].window_begin, rows[0].window_end);
}

// No GPU at all: host-only rows whose idle time is split by the host's activity.
TEST(StepAccountant, HostOnlyRowsWithoutGpu) {
  Trace t;
  t.step(0, us(1000), 0);
  t.step(us(1000), us(2000), 1);
  t.data(us(100), us(400));
  t.data(us(1000), us(1700));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].device, 0xFFFF);
  EXPECT_EQ(rows[0].cat.data_wait, us(300));
  EXPECT_EQ(rows[1].cat.data_wait, us(700));
  EXPECT_EQ(rows[0].cat.host_other, us(700));
  expect_exact(rows[0]);
  expect_exact(rows[1]);
}

// Bad input is counted and skipped, never a crash.
TEST(StepAccountant, InvalidEventsAreCountedAndSkipped) {
  Trace t;
  t.step(0, us(1000));
  t.kernel(us(10), us(15), us(20), us(500));
  GpuOp bad;
  bad.start = us(300);
  bad.end = us(100);
  t.b.gpu_ops.push_back(bad);
  t.b.ranges.push_back(HostRange{us(900), us(800), -1, 1, 0, RangeKind::kData, {}});
  t.step(us(500), us(1500));  // overlaps the first step
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.finish();
  EXPECT_EQ(acc.stats().get(Stat::invalid_events_skipped), 2);
  EXPECT_EQ(acc.stats().get(Stat::overlapping_steps_skipped), 1);
  ASSERT_EQ(acc.rows().size(), 1u);
  expect_exact(acc.rows()[0]);
}

// Exposure: compute split equally between concurrent kernels; sums to compute + comm.
// Timestamps near the int64 limits (a corrupt recording) would overflow window lengths: they
// are skipped as invalid, and the rest is accounted exactly.
TEST(StepAccountant, TimestampsNearInt64LimitsAreSkipped) {
  constexpr TimeNs kMax = std::numeric_limits<TimeNs>::max();
  constexpr TimeNs kMin = std::numeric_limits<TimeNs>::min();
  Trace t;
  t.step(us(0), us(100));
  t.kernel(us(10), us(12), us(20), us(50));
  t.kernel(us(30), us(31), kMin, kMax);  // spans every window
  t.step(kMin, us(-1));                  // a step "before" everything
  t.call(us(60), kMax);
  Marker m;
  m.kind = MarkerKind::kStepBoundary;
  m.ts = kMax;
  t.b.markers.push_back(m);
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 1u);
  const StepRow& r = acc.rows()[0];
  expect_exact(r);
  EXPECT_EQ(r.window_begin, us(0));
  EXPECT_EQ(r.window_end, us(50));  // its last op's end
  EXPECT_EQ(r.cat.compute, us(30));
  EXPECT_EQ(acc.stats().get(Stat::invalid_events_skipped), 4);
}

// Bad input whose rows must not depend on the order events were delivered in: a correlation id
// used by two launch calls (the earliest call is the launch), and two step ranges that begin
// at the same instant (the shorter one is the step; the other overlaps it and is skipped).
TEST(StepAccountant, TiesInBadInputDoNotDependOnDeliveryOrder) {
  Trace t;
  t.step(us(0), us(100), 0);
  t.step(us(0), us(300), 7);
  t.step(us(100), us(200), 1);
  t.kernel(us(10), us(11), us(150), us(160));
  t.b.api_calls.push_back(HostApiCall{us(120), us(121), 1, 1, 1, HostApiKind::kLaunch, {}});
  for (int order = 0; order < 2; ++order) {
    if (order == 1) {
      std::reverse(t.b.api_calls.begin(), t.b.api_calls.end());
      std::reverse(t.b.ranges.begin(), t.b.ranges.end());
    }
    const auto rows = run(t);
    ASSERT_EQ(rows.size(), 2u) << "order " << order;
    EXPECT_EQ(rows[0].step_number, 0) << "order " << order;
    EXPECT_EQ(rows[0].kernels, 1u) << "order " << order;  // launched at 10 us, in step 0
    EXPECT_EQ(rows[0].window_end, us(160)) << "order " << order;
    EXPECT_EQ(rows[1].kernels, 0u) << "order " << order;
  }
}

// A step range nested in another is skipped; the ops launched inside it belong to the outer
// step, whether the steps are finalised one by one or many at once at the end.
TEST(StepAccountant, OpsInsideASkippedNestedStepStayWithTheOuterStep) {
  Trace t;
  for (int i = 0; i < 6; ++i) {
    const TimeNs b = us(1000 * i);
    t.step(b, b + us(1000), i);
    t.kernel(b + us(10), b + us(12), b + us(20), b + us(100));
  }
  t.step(us(1400), us(1600), 99);                    // nested in step 1: skipped
  t.kernel(us(1500), us(1501), us(1510), us(1900));  // launched in step 1, inside the nested one
  for (bool incremental : {false, true}) {
    StepAccountant acc(no_warmup());
    acc.add(t.b);
    if (incremental) {
      for (int i = 1; i <= 7; ++i) acc.advance_watermark(us(1000 * i));
    }
    acc.finish();
    const auto& rows = acc.rows();
    ASSERT_EQ(rows.size(), 6u) << "incremental " << incremental;
    EXPECT_EQ(rows[1].kernels, 2u) << "incremental " << incremental;
    EXPECT_EQ(rows[1].window_end, us(1900)) << "incremental " << incremental;
    EXPECT_EQ(acc.stats().get(Stat::overlapping_steps_skipped), 1);
  }
}

// Issue 8, item 1: a step range that begins up to the touch tolerance (1 us: rounding by the
// trace writer) before the previous one ends touches it -- it begins where that one ends --
// instead of being skipped (which merged two steps into one row).  Beyond the tolerance, or
// nested, it is still skipped and counted.  All at once, and live with the next step arriving
// before or after the previous one is finalised, give the same rows.
TEST(StepAccountant, StepsOverlappingByRoundingTouch) {
  const TimeNs tol = AccountingConfig{}.step_touch_tolerance_ns;
  ASSERT_EQ(tol, 1000);
  // Nominal boundaries every 1000 us; each step's recorded begin is moved earlier by `early`.
  const TimeNs early[] = {0, 1, tol, tol + 1, 0, 500};
  Trace t;
  for (int i = 0; i < 6; ++i) {
    const TimeNs b = us(1000 * i);
    t.step(b - early[i], b + us(1000), i);
    t.kernel(b + us(10), b + us(11), b + us(20), b + us(100));
  }
  t.step(us(6000) - 500, us(6000) - 100, 99);  // nested at step 5's end: not touching
  for (int mode = 0; mode < 3; ++mode) {
    StepAccountant acc(no_warmup());
    if (mode == 0) {  // all at once
      acc.add(t.b);
    } else {
      // Live: step i's events, then (mode 2) a watermark that finalises it before step i+1
      // arrives; mode 1 delivers everything first and finalises step by step.
      if (mode == 1) acc.add(t.b);
      for (int i = 0; i < 6; ++i) {
        if (mode == 2) {
          acc.add_range(t.b.ranges[static_cast<size_t>(i)]);
          acc.add_api_call(t.b.api_calls[static_cast<size_t>(i)]);
          acc.add_gpu_op(t.b.gpu_ops[static_cast<size_t>(i)]);
          if (i == 5) acc.add_range(t.b.ranges[6]);
        }
        acc.advance_watermark(us(1000 * (i + 1)) + 1);
      }
    }
    acc.finish();
    const auto& rows = acc.rows();
    ASSERT_EQ(rows.size(), 5u) << "mode " << mode;
    const int64_t numbers[] = {0, 1, 2, 4, 5};
    for (size_t r = 0; r < rows.size(); ++r) {
      EXPECT_EQ(rows[r].step_number, numbers[r]) << "mode " << mode << " row " << r;
      EXPECT_EQ(rows[r].host_begin, us(static_cast<double>(1000 * numbers[r])))
          << "mode " << mode << " row " << r;
      expect_exact(rows[r]);
    }
    EXPECT_EQ(rows[1].kernels, 1u);
    EXPECT_EQ(rows[1].duration(), us(1000)) << "mode " << mode;  // not two steps long
    EXPECT_EQ(acc.stats().get(Stat::step_boundaries_aligned), 3) << "mode " << mode;
    // Step 3 (1 ns beyond the tolerance) and the nested range: skipped all at once; live,
    // step 3 arrives once step 2 is final (late, data loss) in mode 2.
    const int64_t skipped = acc.stats().get(Stat::overlapping_steps_skipped);
    const int64_t late = acc.stats().get(Stat::late_steps_dropped);
    EXPECT_EQ(skipped + late, 2) << "mode " << mode;
    if (mode < 2) {
      EXPECT_EQ(skipped, 2) << "mode " << mode;
    }
  }
}

// Device id 65535 is the host-only rows' marker (device -1 in reports): an op claiming it is
// a corrupt record, skipped, not a GPU whose rows would read as host-only.
TEST(StepAccountant, DeviceIdOfHostOnlyRowsIsInvalid) {
  Trace t;
  t.step(us(0), us(100));
  t.kernel(us(10), us(12), us(20), us(50), /*device=*/0xFFFF);
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 1u);
  EXPECT_EQ(acc.rows()[0].cat.compute, 0);
  EXPECT_EQ(acc.stats().get(Stat::invalid_events_skipped), 1);
}

TEST(StepAccountant, KernelExposureSumsToComputeAndComm) {
  Trace t;
  t.step(0, us(1000));
  GpuOp& a = t.kernel(0, us(5), us(10), us(410), 0, 7);
  a.name = 10;
  GpuOp& b = t.kernel(us(1), us(6), us(210), us(610), 0, 8);
  b.name = 11;
  t.collective(us(2), us(7), us(500), us(800));
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.finish();
  const auto k = acc.kernel_exposure();
  int64_t total = 0;
  int64_t a_ns = 0;
  for (const auto& e : k) {
    total += e.exposed_ns;
    if (e.name == 10) a_ns = e.exposed_ns;
  }
  const StepRow& r = acc.rows()[0];
  EXPECT_EQ(total, r.cat.compute + r.cat.comm_exposed);
  EXPECT_EQ(a_ns, us(200) + us(100));  // alone 200 us, shared 200 us
}

// Segments (timeline) cover each window exactly with one category per instant.
TEST(StepAccountant, SegmentsTileTheWindow) {
  const Trace t = two_step_trace();
  StepAccountant acc(no_warmup());
  std::vector<CategorySegment> segs;
  acc.set_segment_sink([&](const CategorySegment& s) { segs.push_back(s); });
  acc.add(t.b);
  acc.finish();
  ASSERT_FALSE(segs.empty());
  TimeNs pos = acc.rows().front().window_begin;
  for (const auto& s : segs) {
    EXPECT_EQ(s.start, pos);
    EXPECT_LT(s.start, s.end);
    pos = s.end;
  }
  EXPECT_EQ(pos, acc.rows().back().window_end);
}

// ---- owed launches: GPU records later than the pending-launch timeout (issue 14, item 4) ----

constexpr TimeNs kMs = 1'000'000;

// A data-bound loop as the live library sees it: `steps` steps of 10 ms (7 ms data range, then
// one launch whose kernel runs to the step's end).  `lost`: a step whose op never comes.
Trace data_bound_loop(int steps, int lost = -1) {
  Trace t;
  for (int i = 0; i < steps; ++i) {
    const TimeNs b = i * 10 * kMs;
    t.step(b, b + 10 * kMs, i);
    t.data(b, b + 7 * kMs);
    t.kernel(b + 7 * kMs, b + 7 * kMs + us(4), b + 7 * kMs + us(9), b + 10 * kMs);
    if (i == lost) t.b.gpu_ops.pop_back();
  }
  return t;
}

// Delivers `t` the way the library does: every `tick` the host events that ended by then and
// the GPU ops that ended `gpu_lag` before then, then a watermark 300 ms behind the clock (the
// flush watermark's margin, inject/recording/watermark.h), for at most 10 s past the last event;
// what is still held back then comes at the end.  Calls `on_tick(now)` after each tick.  The first
// `on_time` ops come without the lag.
template <typename F>
void deliver_live(StepAccountant& acc, const Trace& t, TimeNs gpu_lag, F&& on_tick,
                  size_t on_time = 0) {
  const TimeNs tick = 100 * kMs;
  TimeNs last_end = 0;
  for (const GpuOp& op : t.b.gpu_ops) last_end = std::max(last_end, op.end);
  for (const HostRange& r : t.b.ranges) last_end = std::max(last_end, r.end);
  const TimeNs stop = last_end + std::min(gpu_lag, 10'000 * kMs) + tick;
  TimeNs now = tick;
  for (; now <= stop; now += tick) {
    acc.add(arriving(t, now, tick, [&](size_t i) { return i < on_time ? 0 : gpu_lag; }));
    acc.advance_watermark(now - 300 * kMs);
    on_tick(now);
  }
  EventBatch rest;
  for (size_t i = on_time; i < t.b.gpu_ops.size(); ++i)
    if (t.b.gpu_ops[i].end + gpu_lag > now - tick) rest.gpu_ops.push_back(t.b.gpu_ops[i]);
  acc.add(rest);
  acc.finish();
}

// GPU records 3.1 s late (past the 2 s timeout) are owed, not lost: the steps wait for them, and
// the rows are those of the same events all at once.  Before: each launch was given up 2 s
// after the watermark passed it, and 899 of 900 ops were dropped.
TEST(StepAccountant, OwedOpsFarBeyondTheTimeoutAreWaitedFor) {
  const Trace t = data_bound_loop(900);
  const std::vector<StepRow> truth = run(t);
  ASSERT_EQ(truth.size(), 900u);
  ASSERT_EQ(truth[5].cat.data_wait, 7 * kMs);
  for (const TimeNs lag : {3100 * kMs, 8000 * kMs}) {
    SCOPED_TRACE(lag);
    StepAccountant acc(no_warmup());
    size_t rows_before_end = 0;
    deliver_live(acc, t, lag, [&](TimeNs) { rows_before_end = acc.rows().size(); });
    EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 0);
    EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 0);
    EXPECT_FALSE(acc.stats().has_data_loss());
    expect_same_rows(acc.rows(), truth);
    EXPECT_GT(rows_before_end, 500u) << "the steps are finalised while the run goes on";
    // How late they came: the watermark (300 ms behind the clock, moved each 100 ms tick) had
    // passed their end by the lag less 300-400 ms when they arrived.
    const DeliveryLag& d = acc.delivery_lag();
    EXPECT_EQ(d.ops(), 900);
    EXPECT_EQ(d.behind_watermark(), 900);
    EXPECT_GE(d.max(), lag - 400 * kMs);
    EXPECT_LE(d.max(), lag - 300 * kMs);
    EXPECT_GE(d.quantile(0.99), lag - 400 * kMs);
    EXPECT_LE(d.quantile(0.99), d.max());
    // Waiting holds the lag's worth of steps (~4 events each), far under the limit.
    EXPECT_LT(d.held_peak(), 4 * (lag / (10 * kMs) + 50));
  }
}

// An op that never comes (a failed launch, a lost record) is still given up on once delivery
// has moved the timeout past its launch, on time or late: its step is finalised while the run
// goes on, counted as one unmatched launch, and nothing else is lost.
TEST(StepAccountant, OpThatNeverComesIsGivenUpOnceDeliveryMovesPast) {
  const Trace t = data_bound_loop(900, /*lost=*/5);
  for (const TimeNs lag : {TimeNs{0}, 3100 * kMs}) {
    SCOPED_TRACE(lag);
    StepAccountant acc(no_warmup());
    TimeNs step5_final_at = -1;
    deliver_live(acc, t, lag, [&](TimeNs now) {
      if (step5_final_at < 0 && acc.rows().size() > 5) step5_final_at = now;
    });
    ASSERT_EQ(acc.rows().size(), 900u);
    EXPECT_EQ(acc.rows()[5].kernels, 0u);
    EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 1);
    EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 0);
    // Given up when ops launched 2 s after it arrived, kLateFlushes ticks (100 ms each)
    // earlier: 2 s + the lag after its launch (+ the tick they arrived in and those ticks).
    const TimeNs launch_end = 57 * kMs;
    const TimeNs ticks = (1 + AccountingConfig::kLateFlushes) * 100 * kMs;
    EXPECT_GE(step5_final_at, launch_end + 2000 * kMs + lag);
    EXPECT_LE(step5_final_at, launch_end + 2000 * kMs + lag + ticks);
  }
}

// CUPTI may hand a completed record out a few flushes after records that completed later (the
// differential fuzzer's seed 1717: a 0.63 s kernel's record came one flush after those of
// launches 2.1 s later, 1.7 s late all).  One batch moving the launch frontier past a launch
// does not give it up: the frontier counts as it stood kLateFlushes watermarks earlier.  Before:
// the launch was given up at the next watermark (unmatched_launches 1) and its op, one flush
// later, dropped as late (late_gpu_ops_dropped 1), nothing lost.  An op that never comes is
// still given up, kLateFlushes watermarks later, while the run goes on.
TEST(StepAccountant, RecordAFlushBehindLaterLaunchesIsNotGivenUp) {
  Trace t;
  t.step(0, 10 * kMs, 0);
  const GpuOp held = t.kernel(1 * kMs, 1 * kMs + us(5), 1 * kMs + us(7), 640 * kMs);
  t.step(10 * kMs, 2500 * kMs, 1);  // host work only
  t.step(2500 * kMs, 2600 * kMs, 2);
  t.kernel(2510 * kMs, 2510 * kMs + us(5), 2510 * kMs + us(7), 2520 * kMs, /*device=*/1);
  t.step(2600 * kMs, 2700 * kMs, 3);
  const std::vector<StepRow> truth = run(t);
  ASSERT_EQ(truth.size(), 6u);  // device 0 in each step, device 1 from step 2
  ASSERT_EQ(truth[0].kernels, 1u);
  EventBatch first = t.b;  // everything but the held op
  first.gpu_ops.erase(first.gpu_ops.begin());
  for (const bool comes : {true, false}) {
    SCOPED_TRACE(comes);
    StepAccountant acc(no_warmup());
    acc.add(first);
    // The batch moved the frontier 2.5 s past the held launch; the watermark passed it too.
    TimeNs w = 2650 * kMs;
    acc.advance_watermark(w);
    EXPECT_EQ(acc.rows().size(), 0u) << "step 0 waits for its launch";
    if (comes) {
      acc.add_gpu_op(held);  // the next flush
      acc.advance_watermark(w += kMs);
      acc.finish();
      EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 0);
      EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 0);
      EXPECT_FALSE(acc.stats().has_data_loss());
      expect_same_rows(acc.rows(), truth);
      continue;
    }
    for (int k = 1; k < AccountingConfig::kLateFlushes; ++k) {
      acc.advance_watermark(w += kMs);
      EXPECT_EQ(acc.rows().size(), 0u) << "watermark " << k;
    }
    acc.advance_watermark(w += kMs);
    EXPECT_GE(acc.rows().size(), 1u) << "given up kLateFlushes watermarks after delivery passed";
    EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 1);
    acc.finish();
    // Device 0 had no op: steps 0 and 1 host-only rows, device 1 in steps 2 and 3.
    ASSERT_EQ(acc.rows().size(), 4u);
    EXPECT_EQ(acc.rows()[0].kernels, 0u);
  }
}

// An op lost just before the job stops launching (an eval or checkpoint phase without GPU
// work): no later launch moves the frontier, so the watermark alone gives it up, once past the
// newest launch by the timeout plus max(4 x timeout, 2 x the delivery lag seen).  Before: its
// step and every step after it waited for the end of the run (11 rows while it ran).
TEST(StepAccountant, OpLostBeforeAPhaseWithoutLaunchesIsGivenUp) {
  Trace t;
  for (int i = 0; i < 1500; ++i) {
    const TimeNs b = i * 10 * kMs;
    t.step(b, b + 10 * kMs, i);
    t.data(b, b + 7 * kMs);
    if (i > 10) continue;  // from step 11 on: host work only
    t.kernel(b + 7 * kMs, b + 7 * kMs + us(4), b + 7 * kMs + us(9), b + 10 * kMs);
    if (i == 10) t.b.gpu_ops.pop_back();  // step 10's op is lost
  }
  StepAccountant acc(no_warmup());
  TimeNs step10_final_at = -1;
  size_t rows_before_end = 0;
  deliver_live(acc, t, /*gpu_lag=*/0, [&](TimeNs now) {
    rows_before_end = acc.rows().size();
    if (step10_final_at < 0 && acc.rows().size() > 10) step10_final_at = now;
  });
  ASSERT_EQ(acc.rows().size(), 1500u);
  EXPECT_GT(rows_before_end, 1400u) << "the steps after it are finalised while the run goes on";
  EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 1);
  EXPECT_EQ(acc.stats().get(Stat::owed_launches_cut_off), 0);
  // Launch at 107 ms; the watermark (300 ms behind the 100 ms ticks) passes it + 10 s.
  EXPECT_GE(step10_final_at, 107 * kMs + 10000 * kMs);
  EXPECT_LE(step10_final_at, 107 * kMs + 10000 * kMs + 500 * kMs);
}

// Waiting is bounded by memory: with the ops held back for good after the first 10 steps (CUPTI
// stalled), the held events reach pending_event_limit, and from then on the oldest owed launches
// are cut off -- counted as data loss -- so steps are finalised and the held events stay near the
// limit.  Their ops, when they come at last, are dropped as late (counted too).
TEST(StepAccountant, OwedLaunchesAreCutOffAtTheEventLimit) {
  const Trace t = data_bound_loop(900);
  AccountingConfig cfg = no_warmup();
  cfg.pending_event_limit = 1000;
  StepAccountant acc(cfg);
  size_t rows_before_end = 0;
  deliver_live(
      acc, t, /*gpu_lag=*/3600 * 1000 * kMs, [&](TimeNs) { rows_before_end = acc.rows().size(); },
      /*on_time=*/10);
  ASSERT_EQ(acc.rows().size(), 900u);
  EXPECT_GT(rows_before_end, 500u) << "steps finalised once the limit was reached";
  // Cut off at the limit while the job runs (each an unmatched launch); their ops, when they
  // come at last, are dropped as late.
  const int64_t cut = acc.stats().get(Stat::owed_launches_cut_off);
  EXPECT_GT(cut, 400);
  EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), cut);
  EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), cut);
  EXPECT_TRUE(acc.stats().has_data_loss());
  // Only launches the watermark has passed by the timeout are cut off (a long step's launches
  // whose kernels still run are not), so the limit is exceeded by at most the timeout's worth
  // of steps (2 s + the watermark's 300 ms and a tick: 240 steps of 4 events).
  EXPECT_LE(acc.delivery_lag().held_peak(), cfg.pending_event_limit + 4 * 240);
  EXPECT_GT(acc.delivery_lag().held_peak(), cfg.pending_event_limit);
}

// A watermark far beyond every valid time (a crafted recording) gives a lag, not an overflow.
TEST(DeliveryLag, FarWatermarkDoesNotOverflow) {
  StepAccountant acc(no_warmup());
  acc.advance_watermark(std::numeric_limits<TimeNs>::max());
  GpuOp op;
  op.start = -(TimeNs{1} << 62);
  op.end = op.start + 1;
  acc.add_gpu_op(op);
  EXPECT_EQ(acc.delivery_lag().max(), std::numeric_limits<TimeNs>::max() - 1);
  EXPECT_EQ(acc.delivery_lag().quantile(0.99), std::numeric_limits<TimeNs>::max() - 1);
}

// The lag histogram: quantiles are the upper end of their bucket (at most 1/8 above), capped
// at the maximum; on-time ops count as 0.
TEST(DeliveryLag, QuantilesWithinAnEighth) {
  DeliveryLag d;
  EXPECT_EQ(d.quantile(0.99), 0);
  for (int i = 0; i < 900; ++i) d.add(0);
  for (int i = 1; i <= 100; ++i) d.add(i * 10 * kMs);
  EXPECT_EQ(d.ops(), 1000);
  EXPECT_EQ(d.behind_watermark(), 100);
  EXPECT_EQ(d.max(), 1000 * kMs);
  EXPECT_EQ(d.quantile(0.5), 0);
  EXPECT_EQ(d.quantile(1.0), 1000 * kMs);
  const TimeNs p99 = d.quantile(0.99);  // the 990th lag: 90th late op, 900 ms
  EXPECT_GE(p99, 900 * kMs);
  EXPECT_LE(p99, 900 * kMs + 900 * kMs / 8);
  d.add(-5);  // a record in time
  EXPECT_EQ(d.behind_watermark(), 100);
}


// ---- the devices a step has rows on, whatever the delivery (docs/accounting.md §1) ----------
// Found by the differential fuzzer (dimensions empty_first_steps and late_device): a step
// finalised before the first op of a device arrived had no row on it (a host-only row when no
// device was known yet), one finalised after had one, so the rows depended on delivery timing.

// Delivers `t`'s events in the order `order` gives them (indices into events_of), with a
// watermark after every `batch` events: the smallest end among those not yet delivered (the
// strongest promise the contract allows).  All at once when `batch` is 0.
struct Delivered {
  int kind;  // 0: GPU op, 1: API call, 2: range
  size_t i;
  TimeNs end;
};
std::vector<Delivered> events_of(const Trace& t) {
  std::vector<Delivered> evs;
  for (size_t i = 0; i < t.b.gpu_ops.size(); ++i) evs.push_back({0, i, t.b.gpu_ops[i].end});
  for (size_t i = 0; i < t.b.api_calls.size(); ++i) evs.push_back({1, i, t.b.api_calls[i].end});
  for (size_t i = 0; i < t.b.ranges.size(); ++i) evs.push_back({2, i, t.b.ranges[i].end});
  return evs;
}
std::vector<StepRow> deliver(const Trace& t, const std::vector<Delivered>& evs, size_t batch) {
  StepAccountant acc(no_warmup());
  std::vector<TimeNs> rest_min(evs.size() + 1, std::numeric_limits<TimeNs>::max());
  for (size_t i = evs.size(); i-- > 0;) rest_min[i] = std::min(rest_min[i + 1], evs[i].end);
  for (size_t i = 0; i < evs.size(); ++i) {
    const Delivered& e = evs[i];
    if (e.kind == 0) acc.add_gpu_op(t.b.gpu_ops[e.i]);
    if (e.kind == 1) acc.add_api_call(t.b.api_calls[e.i]);
    if (e.kind == 2) acc.add_range(t.b.ranges[e.i]);
    if (batch > 0 && i % batch == batch - 1 && i + 1 < evs.size())
      acc.advance_watermark(rest_min[i + 1]);
  }
  acc.finish();
  EXPECT_FALSE(acc.stats().has_data_loss());
  return acc.rows();
}

void expect_identical_rows(const std::vector<StepRow>& got, const std::vector<StepRow>& want,
                           const std::string& how) {
  SCOPED_TRACE(how);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const StepRow& g = got[i];
    const StepRow& w = want[i];
    EXPECT_EQ(g.step_index, w.step_index) << "row " << i;
    EXPECT_EQ(g.device, w.device) << "row " << i;
    EXPECT_EQ(g.window_begin, w.window_begin) << "row " << i;
    EXPECT_EQ(g.window_end, w.window_end) << "row " << i;
    EXPECT_EQ(g.kernels, w.kernels) << "row " << i;
    EXPECT_EQ(g.copies, w.copies) << "row " << i;
    EXPECT_EQ(g.launches, w.launches) << "row " << i;
    for (const CategoryInfo& c : kCategories)
      EXPECT_EQ(g.cat[c.category], w.cat[c.category]) << "row " << i << " " << c.name;
  }
}

// `t` delivered all at once (a trace), in time order (a live run, a recording: each event when
// it ends, the GPU ops after their host events), with the GPU ops first (records that came
// early), and in 60 random orders and batch sizes: the same rows every time.  Returns them.
std::vector<StepRow> same_rows_in_every_delivery(const Trace& t) {
  const std::vector<Delivered> evs = events_of(t);
  const std::vector<StepRow> all_at_once = deliver(t, evs, 0);
  std::vector<Delivered> in_time = evs;
  std::stable_sort(in_time.begin(), in_time.end(), [](const Delivered& a, const Delivered& b) {
    return std::tie(a.end, b.kind) < std::tie(b.end, a.kind);  // ties: GPU ops last
  });
  expect_identical_rows(deliver(t, in_time, 1), all_at_once, "in time order");
  std::vector<Delivered> gpu_first = in_time;
  std::stable_partition(gpu_first.begin(), gpu_first.end(),
                        [](const Delivered& e) { return e.kind == 0; });
  expect_identical_rows(deliver(t, gpu_first, 1), all_at_once, "GPU ops first");
  std::mt19937 rng(11);
  for (int trial = 0; trial < 60; ++trial) {
    std::vector<Delivered> order = evs;
    std::shuffle(order.begin(), order.end(), rng);
    const size_t batch = 1 + static_cast<size_t>(trial % 5);
    expect_identical_rows(deliver(t, order, batch), all_at_once,
                          "shuffle " + std::to_string(trial) + ", batches of " +
                              std::to_string(batch));
  }
  return all_at_once;
}

// Device 1 is first used in step 3 of 5: its rows begin there, its first window at step 3's
// host begin, and steps 0-2 have rows on device 0 only.  Before: all at once (and with its op
// delivered early) steps 0-2 had rows on device 1 too; in time order they had none.
TEST(StepAccountant, DeviceFirstUsedInStep3HasRowsFromStep3InEveryDelivery) {
  Trace t;
  for (int k = 0; k < 5; ++k) {
    const TimeNs b = us(1000.0 * k);
    t.step(b, b + us(1000), k);
    t.kernel(b + us(10), b + us(15), b + us(20), b + us(800));
    if (k >= 3) t.kernel(b + us(100), b + us(105), b + us(110), b + us(600), /*device=*/1);
  }
  const std::vector<StepRow> rows = same_rows_in_every_delivery(t);
  ASSERT_EQ(rows.size(), 7u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rows[i].step_index, static_cast<int64_t>(i));
    EXPECT_EQ(rows[i].device, 0);
  }
  EXPECT_EQ(rows[3].step_index, 3);
  EXPECT_EQ(rows[4].step_index, 3);
  EXPECT_EQ(rows[4].device, 1);
  EXPECT_EQ(rows[4].window_begin, us(3000)) << "the device's first window: its step's host begin";
  EXPECT_EQ(rows[4].window_end, us(3600));
  EXPECT_EQ(rows[4].cat.compute, us(490));
  EXPECT_EQ(rows[6].device, 1);
  EXPECT_EQ(rows[6].window_begin, us(3600)) << "then the windows tile";
  for (const StepRow& r : rows) expect_exact(r);
}

// A first step without GPU work, before any device's first op: a host-only row, whatever the
// delivery; device 0's rows begin with step 1, at its host begin.  Before: a device-0 row all
// at once, a host-only row in time order.
TEST(StepAccountant, FirstStepWithoutGpuWorkIsHostOnlyInEveryDelivery) {
  Trace t;
  t.step(0, us(1000), 0);
  t.data(us(100), us(400));
  for (int k = 1; k < 4; ++k) {
    const TimeNs b = us(1000.0 * k);
    t.step(b, b + us(1000), k);
    t.kernel(b + us(10), b + us(15), b + us(20), b + us(800));
  }
  const std::vector<StepRow> rows = same_rows_in_every_delivery(t);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].device, kHostOnlyDevice);
  EXPECT_EQ(rows[0].window_begin, 0);
  EXPECT_EQ(rows[0].window_end, us(1000));
  EXPECT_EQ(rows[0].cat.data_wait, us(300));
  EXPECT_EQ(rows[0].cat.host_other, us(700));
  EXPECT_EQ(rows[1].device, 0);
  EXPECT_EQ(rows[1].window_begin, us(1000));
  EXPECT_EQ(rows[1].window_end, us(1800));
  EXPECT_EQ(rows[2].window_begin, us(1800));
  for (const StepRow& r : rows) expect_exact(r);
}

// An op launched before the first step (weights copied in) makes its device take part from
// the first step, even one without GPU work: the device was in use before it ended.
TEST(StepAccountant, DeviceUsedBeforeTheFirstStepHasRowsFromIt) {
  Trace t;
  t.copy(-us(500), -us(490), -us(480), -us(300), CopyDir::kH2D);
  t.step(0, us(1000), 0);
  t.step(us(1000), us(2000), 1);
  t.kernel(us(1010), us(1015), us(1020), us(1800));
  const std::vector<StepRow> rows = same_rows_in_every_delivery(t);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].device, 0);
  EXPECT_EQ(rows[0].window_begin, 0);
  EXPECT_EQ(rows[0].window_end, us(1000));
  EXPECT_EQ(rows[0].copies, 0u) << "the copy ran before every window";
  EXPECT_EQ(rows[1].window_begin, us(1000));
}

// An op for a device with no row yet, launched in a step already finalised without it (the
// launch was given up on), comes late: dropped and counted, as on a device with windows.
// Before: it was kept, and the device got a row in the next step, with the op outside it.
TEST(StepAccountant, LateFirstOpOfADeviceIsDroppedAndCounted) {
  Trace t;
  for (int k = 0; k < 3; ++k) {
    const TimeNs b = us(1000.0 * k);
    t.step(b, b + us(1000), k);
    t.kernel(b + us(10), b + us(15), b + us(20), b + us(800));
  }
  const GpuOp held = t.kernel(us(100), us(105), us(110), us(600), /*device=*/1);
  t.b.gpu_ops.pop_back();
  AccountingConfig cfg = no_warmup();
  cfg.pending_launch_timeout_ns = us(100);
  StepAccountant acc(cfg);
  acc.add(t.b);
  // Steps 0 and 1 finalised, the launch given up on (delivery past it kLateFlushes
  // watermarks ago).
  for (int k = 0; k <= AccountingConfig::kLateFlushes; ++k) acc.advance_watermark(us(2001) + k);
  ASSERT_EQ(acc.rows().size(), 2u);
  acc.add_gpu_op(held);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 3u);
  for (const StepRow& r : acc.rows()) EXPECT_EQ(r.device, 0);
  EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 1);
  EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 1);
}

// A window that ends idle is read by the pauses between the step thread's CUDA calls once that
// thread has made one, else by its length alone -- calls made before the gap's end, whatever
// was delivered or pruned by then.  Step 0 (a host-only row: no device yet) ends with 50 us
// after its data range, longer than the 30 us launch latency, shorter than the 100 us pause;
// its thread makes its first call in step 1, so they are host_other.  Step 2 ends the same way
// after that call: launch_gap.  Before: all at once the later call made step 0's 50 us
// launch_gap; live, whether it had come decided (differential fuzzer seed 15237).
TEST(StepAccountant, WindowEndingIdleIsReadByTheCallsMadeBeforeItsEnd) {
  Trace t;
  for (int k = 0; k < 3; ++k) {
    t.step(us(1000.0 * k), us(1000.0 * k + 1000), k);
    if (k != 1) t.data(us(1000.0 * k), us(1000.0 * k + 950));
  }
  t.kernel(us(1100), us(1105), us(1110), us(2000));
  const std::vector<StepRow> rows = same_rows_in_every_delivery(t);
  ASSERT_EQ(rows.size(), 3u);
  for (const StepRow& r : rows) expect_exact(r);
  EXPECT_EQ(rows[0].device, kHostOnlyDevice);
  EXPECT_EQ(rows[0].cat.data_wait, us(950));
  EXPECT_EQ(rows[0].cat.host_other, us(50)) << "no CUDA call of its thread yet";
  EXPECT_EQ(rows[0].cat.launch_gap, 0);
  EXPECT_EQ(rows[2].cat.data_wait, us(950));
  EXPECT_EQ(rows[2].cat.host_other, 0);
  EXPECT_EQ(rows[2].cat.launch_gap, us(50)) << "a short pause after its thread's calls";
}

}  // namespace
}  // namespace gpuacct
