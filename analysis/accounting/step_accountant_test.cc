// One test per accounting rule of docs/accounting.md, each with hand-computed truth.
// Times are written in microseconds (us()) so the thresholds (30 us launch latency, 100 us
// host pause) read naturally.
#include "analysis/accounting/step_accountant.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "analysis/accounting/step_accountant_test_util.h"
#include "analysis/model/name_table.h"

namespace gpuacct {
namespace {

using namespace testing_util;  // NOLINT(google-build-using-namespace): test helpers

// Rule 2: compute hides a collective; the rest of the collective is exposed communication.
TEST(StepAccountant, ComputeAndCollectiveOverlapOnTwoStreams) {
  Trace t;
  t.step(0, us(1000));
  t.kernel(us(10), us(15), us(100), us(600));
  t.collective(us(20), us(25), us(400), us(900));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.window_begin, 0);
  EXPECT_EQ(r.window_end, us(900));  // completion of the last op launched in the step
  EXPECT_EQ(r.cat.compute, us(500));
  EXPECT_EQ(r.cat.comm_exposed, us(300));
  EXPECT_EQ(r.comm_total, us(500));
  EXPECT_EQ(r.comm_overlapped, us(200));
  EXPECT_EQ(r.gpu_busy, us(800));
  // [0, 100): the host issued the launch at 10 us with no long pause: launch wall.
  EXPECT_EQ(r.cat.launch_gap, us(100));
  EXPECT_EQ(r.kernels, 2u);
  EXPECT_EQ(r.launches, 2u);
}

// Rule 2: a copy under a kernel is hidden; alone it is exposed and H2D counts as input.
TEST(StepAccountant, CopyUnderCompute) {
  Trace t;
  t.step(0, us(1000));
  t.kernel(0, us(5), us(10), us(500));
  t.copy(us(6), us(8), us(200), us(700), CopyDir::kH2D);
  t.copy(us(9), us(11), us(700), us(750), CopyDir::kD2H);
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.cat.compute, us(490));
  EXPECT_EQ(r.cat.copy_input, us(200));
  EXPECT_EQ(r.cat.copy_other, us(50));
  EXPECT_EQ(r.cat.launch_gap, us(10));  // queued op, 10 us < 30 us: launch latency
  EXPECT_EQ(r.walls().data, us(200));
  EXPECT_EQ(r.walls().other, us(50));
  EXPECT_EQ(r.copies, 2u);
}

// Rule 2: the idle gap before the first kernel while the launching thread is in a data range.
TEST(StepAccountant, IdleGapInDataRangeIsDataWait) {
  Trace t;
  t.step(0, us(10000));
  t.data(0, us(5000));
  t.kernel(us(5000), us(5010), us(5015), us(8000));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.window_end, us(8000));
  EXPECT_EQ(r.cat.data_wait, us(5000));
  EXPECT_EQ(r.cat.launch_gap, us(15));  // the launch call and its latency
  EXPECT_EQ(r.cat.compute, us(2985));
  EXPECT_EQ(r.cat.host_other, 0);
}

// Rule 2: thousands of tiny kernels; the host cannot keep up: launch wall.
TEST(StepAccountant, LaunchBoundTinyKernels) {
  Trace t;
  const int n = 1000;
  // Launch i: call [10i, 10i+8) us; kernel 5 us, starts 5 us after its call.
  for (int i = 0; i < n; ++i) {
    const TimeNs a = us(10.0 * i);
    t.kernel(a, a + us(8), a + us(5), a + us(10));
  }
  t.call(us(10.0 * n), us(10.0 * n + 1));  // final sync
  t.step(0, us(10.0 * n + 1));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.window_end, us(10.0 * n));
  EXPECT_EQ(r.cat.compute, us(5.0 * n));
  EXPECT_EQ(r.cat.launch_gap, us(5.0 * n));
  EXPECT_EQ(r.cat.host_other, 0);
  EXPECT_EQ(r.kernels, static_cast<uint32_t>(n));
}

// Rule 2: a kernel queued behind a long one leaves no idle time.
TEST(StepAccountant, KernelQueuedBehindLongOne) {
  Trace t;
  t.step(0, us(6000));
  t.kernel(0, us(5), us(10), us(5000));
  t.kernel(us(20), us(25), us(5000), us(5100));
  t.call(us(30), us(5102));  // host blocks in a sync
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.window_end, us(5100));
  EXPECT_EQ(r.cat.compute, us(5090));
  EXPECT_EQ(r.cat.launch_gap, us(10));
  EXPECT_EQ(r.cat.idle(), us(10));
}

// Rule 2: a long host pause outside data ranges is host-other; the launch itself is launch.
TEST(StepAccountant, LongHostPauseIsHostOther) {
  Trace t;
  t.step(0, us(3000));
  t.kernel(0, us(10), us(15), us(100));
  // Host computes (no CUDA calls) until 2100 us, then launches.
  t.kernel(us(2100), us(2104), us(2105), us(2200));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.cat.host_other, us(2000));    // [100, 2100): one pause of 2 ms
  EXPECT_EQ(r.cat.launch_gap, us(15 + 5));  // first gap (queued, 15 us) + launch tail
  EXPECT_EQ(r.cat.compute, us(85 + 95));
}

// Rule 2: short pauses between CUDA calls (framework overhead) are the launch wall.
TEST(StepAccountant, ShortPausesBetweenCallsAreLaunchGap) {
  Trace t;
  t.step(0, us(1000));
  t.kernel(0, us(5), us(10), us(20));
  // The host issues non-launch CUDA calls with 50 us pauses (< 100 us) until 400 us.
  for (int i = 0; i < 6; ++i) t.call(us(50 + 60.0 * i), us(60 + 60.0 * i), HostApiKind::kOther);
  t.kernel(us(400), us(405), us(410), us(500));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.cat.host_other, 0);
  EXPECT_EQ(r.cat.launch_gap, us(10) + us(390));
}

// ---- Nested CUDA calls (docs/accounting.md, "Nested calls") ----------------------------------
// With both CUPTI API domains traced, a runtime launch (cudaLaunchKernel) reports the driver
// launch it makes (cuLaunchKernel) as a second call on the same thread, inside the first, with
// the same correlation id or its own; the kernel carries one of the two.  Kineto traces hold
// cuda_runtime and cuda_driver rows alike.  One call is one launch, and the whole outer call is
// host time in CUDA.

enum class NestIds { kShared, kOpCarriesRuntime, kOpCarriesDriver };

// A runtime launch [rs, re) on thread 1 that makes a driver launch [ds, de), and the kernel
// [ks, ke) they launched.
void nested_launch(EventBatch& b, uint64_t& corr, NestIds ids, TimeNs rs, TimeNs re, TimeNs ds,
                   TimeNs de, TimeNs ks, TimeNs ke) {
  const uint64_t rt = corr++;
  const uint64_t drv = ids == NestIds::kShared ? rt : corr++;
  b.api_calls.push_back(HostApiCall{rs, re, rt, 1, 1, HostApiKind::kLaunch, {}});
  b.api_calls.push_back(HostApiCall{ds, de, drv, 1, 7, HostApiKind::kLaunch, {}});
  GpuOp op;
  op.start = ks;
  op.end = ke;
  op.correlation_id = ids == NestIds::kOpCarriesDriver ? drv : rt;
  op.stream = 7;
  op.name = 2;
  b.gpu_ops.push_back(op);
}

// Delivers every event of `b` one at a time in a random order (seeded), then finishes.
StepAccountant& deliver_shuffled(StepAccountant& acc, const EventBatch& b, uint32_t seed) {
  std::vector<std::function<void()>> events;
  for (const auto& e : b.gpu_ops) events.push_back([&acc, e] { acc.add_gpu_op(e); });
  for (const auto& e : b.api_calls) events.push_back([&acc, e] { acc.add_api_call(e); });
  for (const auto& e : b.ranges) events.push_back([&acc, e] { acc.add_range(e); });
  std::mt19937 rng(seed);
  std::shuffle(events.begin(), events.end(), rng);
  for (auto& f : events) f();
  acc.finish();
  return acc;
}

const char* to_string(NestIds ids) {
  switch (ids) {
    case NestIds::kShared:
      return "shared id";
    case NestIds::kOpCarriesRuntime:
      return "own ids, op carries the runtime's";
    case NestIds::kOpCarriesDriver:
      return "own ids, op carries the driver's";
  }
  return "";
}

// Two runtime launches, each stalling 234 us after its driver launch returned.  The GPU idles
// in [67, 257) while the host is still inside launch A (until 250), then in launch B: all of it
// is host time in CUDA (launch wall), and there are two launches, not four.
//   [0, 17)    launch A issued (pause 0-10 < 100 us, then the call): launch_gap 17
//   [17, 67)   kernel A: compute 50
//   [67, 257)  host in launch A's runtime tail, then in launch B: launch_gap 190
//   [257, 307) kernel B: compute 50
TEST(StepAccountant, NestedDriverLaunchIsPartOfItsRuntimeLaunch) {
  for (NestIds ids : {NestIds::kShared, NestIds::kOpCarriesRuntime, NestIds::kOpCarriesDriver}) {
    for (bool driver_at_entry : {false, true}) {  // the driver call may start with the runtime's
      for (uint32_t seed = 0; seed < 24; ++seed) {
        SCOPED_TRACE(testing::Message() << to_string(ids) << ", driver at entry " << driver_at_entry
                                        << ", delivery order " << seed);
        EventBatch b;
        uint64_t corr = 1;
        b.ranges.push_back(HostRange{0, us(1000), -1, 1, 4, RangeKind::kStep, {}});
        const TimeNs da = driver_at_entry ? us(10) : us(12);
        const TimeNs db = driver_at_entry ? us(250) : us(252);
        nested_launch(b, corr, ids, us(10), us(250), da, da + us(4), us(17), us(67));
        nested_launch(b, corr, ids, us(250), us(490), db, db + us(4), us(257), us(307));
        b.api_calls.push_back(HostApiCall{us(490), us(500), 0, 1, 6, HostApiKind::kSync, {}});
        StepAccountant acc(no_warmup());
        deliver_shuffled(acc, b, seed);
        ASSERT_EQ(acc.rows().size(), 1u);
        const StepRow& r = acc.rows()[0];
        expect_exact(r);
        EXPECT_EQ(r.window_end, us(307));
        EXPECT_EQ(r.launches, 2u);
        EXPECT_EQ(r.kernels, 2u);
        EXPECT_EQ(r.cat.compute, us(100));
        EXPECT_EQ(r.cat.launch_gap, us(207));
        EXPECT_EQ(r.cat.host_other, 0);
        EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 0);
      }
    }
  }
}

// The GPU goes idle while the host is inside a runtime launch whose nested driver launch has
// not submitted the op yet (it does at 150 us): the GPU waits for the host, launch wall -- not
// an op queued behind a dependency, whichever call the op's correlation id names.
//   [0, 5) launch P: 5;  [5, 100) kernel P;  [100, 159) host in the runtime call: launch 59;
//   [159, 259) the nested launch's kernel.
TEST(StepAccountant, GapBeforeTheNestedSubmissionIsLaunchGap) {
  for (NestIds ids : {NestIds::kShared, NestIds::kOpCarriesRuntime, NestIds::kOpCarriesDriver}) {
    SCOPED_TRACE(to_string(ids));
    Trace t;
    t.step(0, us(1000));
    t.kernel(0, us(5), us(5), us(100));
    t.next_corr = 100;
    nested_launch(t.b, t.next_corr, ids, us(10), us(400), us(150), us(154), us(159), us(259));
    const auto rows = run(t);
    ASSERT_EQ(rows.size(), 1u);
    const StepRow& r = rows[0];
    expect_exact(r);
    EXPECT_EQ(r.window_end, us(259));
    EXPECT_EQ(r.cat.launch_gap, us(5 + 59));
    EXPECT_EQ(r.cat.host_other, 0);
    EXPECT_EQ(r.launches, 2u);
  }
}

// A nested call whose own correlation id never gets an op (the op carries the other call's id)
// is no pending launch: the step is finalised as soon as the watermark passes, not after the
// pending-launch timeout, and nothing is counted as unmatched.
TEST(StepAccountant, NestedCallWithoutItsOwnOpDoesNotHoldTheStep) {
  for (NestIds ids : {NestIds::kOpCarriesRuntime, NestIds::kOpCarriesDriver}) {
    SCOPED_TRACE(to_string(ids));
    EventBatch b;
    uint64_t corr = 1;
    b.ranges.push_back(HostRange{0, us(1000), 0, 1, 4, RangeKind::kStep, {}});
    b.ranges.push_back(HostRange{us(1000), us(2000), 1, 1, 4, RangeKind::kStep, {}});
    nested_launch(b, corr, ids, us(10), us(250), us(12), us(16), us(17), us(67));
    nested_launch(b, corr, ids, us(1010), us(1250), us(1012), us(1016), us(1017), us(1067));
    StepAccountant acc(no_warmup());
    acc.add(b);
    acc.advance_watermark(us(3000));  // far less than the 2 s pending-launch timeout
    ASSERT_EQ(acc.rows().size(), 2u);
    EXPECT_EQ(acc.rows()[0].launches, 1u);
    EXPECT_EQ(acc.rows()[1].launches, 1u);
    acc.finish();
    EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 0);
  }
}

// A launch whose op never arrives is still counted once, as one unmatched launch, whether the
// runtime call comes alone or with its nested driver call.
TEST(StepAccountant, UnmatchedNestedLaunchCountsOnce) {
  for (bool nested : {false, true}) {
    SCOPED_TRACE(nested ? "runtime + driver" : "runtime only");
    EventBatch b;
    b.ranges.push_back(HostRange{0, us(1000), 0, 1, 4, RangeKind::kStep, {}});
    b.api_calls.push_back(HostApiCall{us(10), us(50), 1, 1, 1, HostApiKind::kLaunch, {}});
    if (nested)
      b.api_calls.push_back(HostApiCall{us(12), us(16), 2, 1, 7, HostApiKind::kLaunch, {}});
    StepAccountant acc(no_warmup());
    acc.add(b);
    acc.finish();
    ASSERT_EQ(acc.rows().size(), 1u);
    EXPECT_EQ(acc.rows()[0].launches, 1u);
    EXPECT_EQ(acc.stats().get(Stat::unmatched_launches), 1);
  }
}

// Rule 2: an op submitted long before it could run waited on a dependency: host-other.
TEST(StepAccountant, QueuedOpWaitingLongIsDependency) {
  Trace t;
  t.step(0, us(1000));
  t.kernel(0, us(5), us(10), us(100));
  t.kernel(us(6), us(9), us(600), us(700));  // submitted at 6 us, started at 600 us
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 1u);
  const StepRow& r = rows[0];
  expect_exact(r);
  EXPECT_EQ(r.cat.host_other, us(500));
  EXPECT_EQ(r.cat.launch_gap, us(10));
}

// Rule 1: windows tile each device; several devices get one row each.
TEST(StepAccountant, SeveralDevices) {
  Trace t;
  t.step(0, us(1000), 0);
  t.step(us(1000), us(2000), 1);
  t.kernel(us(10), us(15), us(20), us(800), 0);
  t.kernel(us(16), us(20), us(25), us(900), 1);
  t.kernel(us(1010), us(1015), us(1020), us(1500), 0);
  t.kernel(us(1016), us(1020), us(1025), us(1700), 1);
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 4u);
  for (const auto& r : rows) expect_exact(r);
  EXPECT_EQ(rows[0].device, 0);
  EXPECT_EQ(rows[1].device, 1);
  EXPECT_EQ(rows[0].window_end, us(800));
  EXPECT_EQ(rows[1].window_end, us(900));
  EXPECT_EQ(rows[2].window_begin, us(800));
  EXPECT_EQ(rows[3].window_begin, us(900));
  EXPECT_EQ(rows[2].window_end, us(1500));
  EXPECT_EQ(rows[3].window_end, us(1700));
  EXPECT_EQ(rows[2].cat.compute, us(480));
  EXPECT_EQ(rows[3].cat.compute, us(675));
  EXPECT_EQ(rows[0].launches, 2u);  // launches count all devices
}

// Rule 1: GPU work that spills past the next step's host begin stays in its own step.
TEST(StepAccountant, WorkSpillsPastNextStepBegin) {
  Trace t;
  t.step(0, us(1000), 0);
  t.step(us(1000), us(4000), 1);
  t.kernel(us(500), us(505), us(600), us(3000));
  t.kernel(us(1100), us(1105), us(3000), us(3500));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 2u);
  expect_exact(rows[0]);
  expect_exact(rows[1]);
  EXPECT_EQ(rows[0].window_end, us(3000));
  EXPECT_EQ(rows[1].window_begin, us(3000));
  EXPECT_EQ(rows[1].window_end, us(3500));
  EXPECT_EQ(rows[1].cat.compute, us(500));
  EXPECT_EQ(rows[1].cat.idle(), 0);
  // Step 0: [0, 500) the host paused > 100 us with no CUDA call: host-other; then the launch.
  EXPECT_EQ(rows[0].cat.host_other, us(500));
  EXPECT_EQ(rows[0].cat.launch_gap, us(100));
}

// Rule 1: an op a step launched that ran entirely inside the previous window (on a free
// stream) still belongs to its step: the step's window ends at its completion, i.e. is empty.
TEST(StepAccountant, OwnedOpThatRanInsidePreviousWindow) {
  for (const bool live : {false, true}) {
    Trace t;
    t.step(0, us(1000), 0);
    t.step(us(1000), us(1200), 1);
    for (int i = 2; i < 8; ++i) t.step(us(1200.0 + 100 * i), us(1300.0 + 100 * i), i);
    t.kernel(us(10), us(15), us(20), us(3000), 0, 7);        // step 0, long
    t.kernel(us(1100), us(1105), us(1110), us(1500), 0, 8);  // step 1, other stream
    StepAccountant acc(no_warmup());
    acc.add(t.b);
    if (live) acc.advance_watermark(us(5000));
    acc.finish();
    const auto& rows = acc.rows();
    ASSERT_EQ(rows.size(), 8u);
    EXPECT_EQ(rows[0].window_end, us(3000));
    EXPECT_EQ(rows[1].window_begin, us(3000));
    EXPECT_EQ(rows[1].window_end, us(3000)) << (live ? "live" : "finish");
    EXPECT_EQ(rows[1].kernels, 1u);
    EXPECT_EQ(rows[0].kernels, 1u);
  }
}

// Rule 1: a step that launched nothing on a device: its window ends at the step's host end.
// The same with an op whose launch call is unknown (no correlation id): its launch time is
// its own start, which lies in step 1, so step 1 still owns it.
TEST(StepAccountant, UncorrelatedOpThatRanInsidePreviousWindow) {
  for (const bool live : {false, true}) {
    Trace t;
    t.step(0, us(1000), 0);
    t.step(us(1000), us(1200), 1);
    t.kernel(us(10), us(15), us(20), us(3000), 0, 7);  // step 0, long
    GpuOp op = t.kernel(us(1100), us(1105), us(1110), us(1500), 0, 8);
    t.b.gpu_ops.pop_back();
    t.b.api_calls.pop_back();
    op.correlation_id = 0;  // launched at its start, 1110 us: step 1
    t.b.gpu_ops.push_back(op);
    StepAccountant acc(no_warmup());
    acc.add(t.b);
    if (live) acc.advance_watermark(us(5000));
    acc.finish();
    const auto& rows = acc.rows();
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[0].kernels, 1u) << (live ? "live" : "finish");
    EXPECT_EQ(rows[1].kernels, 1u) << (live ? "live" : "finish");
    EXPECT_EQ(rows[1].window_end, us(3000)) << (live ? "live" : "finish");
  }
}

TEST(StepAccountant, StepWithoutWorkOnADevice) {
  Trace t;
  t.step(0, us(1000), 0);
  t.step(us(1000), us(2000), 1);
  t.kernel(us(10), us(15), us(20), us(500));
  const auto rows = run(t);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1].window_begin, us(500));
  EXPECT_EQ(rows[1].window_end, us(2000));
  EXPECT_EQ(rows[1].cat.idle(), us(1500));
  expect_exact(rows[1]);
}


// Work declared with gpuacct_set_step_work lands in the row of the step it was declared in;
// two declarations in one step add up (micro-batches); work declared between steps is dropped;
// a value that is not a positive finite number is skipped and counted.
TEST(StepAccountant, DeclaredWorkLandsInItsStepAndAddsUp) {
  Trace t;
  t.step(us(0), us(1000), 0);
  t.step(us(1000), us(2000), 1);
  t.step(us(2500), us(3500), 2);  // after a gap with work declared in it
  t.kernel(us(10), us(15), us(20), us(800), 0);
  t.kernel(us(10), us(15), us(20), us(700), 1);  // a second device: both rows carry the work
  t.kernel(us(1010), us(1015), us(1020), us(1800), 0);
  t.kernel(us(2510), us(2515), us(2520), us(3300), 0);
  auto work = [&t](TimeNs ts, MarkerKind kind, double v) {
    Marker m;
    m.ts = ts;
    m.kind = kind;
    m.value = v;
    t.b.markers.push_back(m);
  };
  work(us(100), MarkerKind::kStepTokens, 4096);
  work(us(1000), MarkerKind::kStepTokens, 1000.5);  // at step 1's begin: step 1
  work(us(1999), MarkerKind::kStepTokens, 2000.25);  // the same step: adds up
  work(us(1500), MarkerKind::kStepSamples, 16);
  work(us(2200), MarkerKind::kStepTokens, 1e9);      // between steps: dropped
  work(us(2600), MarkerKind::kStepTokens, -5);       // invalid: skipped, counted
  work(us(2700), MarkerKind::kStepSamples, std::numeric_limits<double>::quiet_NaN());
  work(us(2800), MarkerKind::kStepSamples, 3);
  StepAccountant acc(no_warmup());
  acc.add(t.b);
  acc.finish();
  const auto& rows = acc.rows();
  ASSERT_EQ(rows.size(), 6u);  // 3 steps x 2 devices: every row of a step carries its work
  const double tokens[] = {4096, 3000.75, 0};
  const double samples[] = {0, 16, 3};
  for (const StepRow& r : rows) {
    ASSERT_LT(r.step_index, 3);
    EXPECT_DOUBLE_EQ(r.tokens, tokens[r.step_index]) << "step " << r.step_index;
    EXPECT_DOUBLE_EQ(r.samples, samples[r.step_index]) << "step " << r.step_index;
  }
  EXPECT_EQ(acc.stats().get(Stat::invalid_events_skipped), 2);
}

// The same in a loop marked with one boundary per step (gpuacct_step_mark): work declared
// after mark k belongs to step k, whatever order the markers arrive in.
TEST(StepAccountant, DeclaredWorkWithStepMarks) {
  Trace t;
  for (int k = 0; k < 3; ++k) {
    const TimeNs b0 = us(1000 * k);
    Marker mark;
    mark.ts = b0;
    mark.kind = MarkerKind::kStepBoundary;
    mark.number = k;
    t.b.markers.push_back(mark);
    Marker w;
    w.ts = b0 + us(5);
    w.kind = MarkerKind::kStepTokens;
    w.value = 100.0 * (k + 1);
    t.b.markers.insert(t.b.markers.begin(), w);  // before its boundary in the batch
    t.kernel(b0 + us(10), b0 + us(15), b0 + us(20), b0 + us(900), 0);
  }
  Marker end;
  end.ts = us(3000);
  end.kind = MarkerKind::kStepBoundary;
  t.b.markers.push_back(end);
  const auto rows = run(t);
  ASSERT_GE(rows.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(rows[static_cast<size_t>(k)].step_index, k);
    EXPECT_DOUBLE_EQ(rows[static_cast<size_t>(k)].tokens, 100.0 * (k + 1)) << "step " << k;
  }
}

// GPUACCT_SAMPLE: a step whose range is flagged untraced (CUPTI was off) keeps its window and
// data wait; its GPU side is unknown, not idle -- all 0, the row marked not sampled.  The
// traced step next to it is accounted as without the flag.
TEST(StepAccountant, UntracedStepKeepsHostSideOnly) {
  Trace t;
  t.data(us(0), us(300));
  t.kernel(us(300), us(305), us(320), us(900));
  t.step(us(0), us(1000), 0);
  t.data(us(1000), us(1400));
  t.kernel(us(1400), us(1405), us(1420), us(1900));
  t.step(us(1000), us(2000), 1);
  const std::vector<StepRow> full = run(t);
  mark_step_untraced(t.b.ranges[1]);  // step 0
  const std::vector<StepRow> rows = run(t);
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_EQ(full.size(), 2u);
  EXPECT_FALSE(rows[0].sampled);
  EXPECT_TRUE(rows[1].sampled);
  EXPECT_EQ(rows[0].duration(), full[0].duration());
  EXPECT_EQ(rows[0].cat.data_wait, full[0].cat.data_wait);
  EXPECT_GT(rows[0].cat.data_wait, 0);
  EXPECT_EQ(rows[0].cat.sum(), rows[0].cat.data_wait);
  EXPECT_EQ(rows[0].gpu_busy, 0);
  EXPECT_EQ(rows[0].kernels, 0u);
  EXPECT_EQ(rows[1].cat.sum(), full[1].cat.sum());
  EXPECT_EQ(rows[1].cat.compute, full[1].cat.compute);
  EXPECT_EQ(rows[1].cat.data_wait, full[1].cat.data_wait);
  EXPECT_EQ(rows[1].kernels, full[1].kernels);
}

// The same flag on a step-boundary marker (C API step_mark).
TEST(StepAccountant, UntracedStepFromBoundaryMarker) {
  Trace t;
  for (int i = 0; i < 3; ++i) {
    Marker m;
    m.ts = us(1000.0 * i);
    m.kind = MarkerKind::kStepBoundary;
    m.number = i;
    m.thread = 1;
    if (i == 1) mark_step_untraced(m);
    t.b.markers.push_back(m);
    t.call(us(1000.0 * i + 10), us(1000.0 * i + 20));
  }
  const std::vector<StepRow> rows = run(t);
  ASSERT_GE(rows.size(), 2u);
  EXPECT_TRUE(rows[0].sampled);
  EXPECT_FALSE(rows[1].sampled);
  EXPECT_EQ(rows[1].duration(), us(1000));
}

}  // namespace
}  // namespace gpuacct
