// Set-up (setup_tally.h, docs/accounting.md §1): what comes before the first step is no step,
// and steps detected before the program's own marks began are folded into it.
#include <gtest/gtest.h>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_accountant_test_util.h"

namespace gpuacct {
namespace {

using testing_util::Trace;
using testing_util::us;

HostRange detected(TimeNs a, TimeNs b) {
  HostRange r{a, b, -1, 1, 8, RangeKind::kStep, {}};
  mark_step_detected(r);
  return r;
}

TEST(Setup, EverythingBeforeTheFirstStepIsSetUp) {
  Trace t;
  // Parameters copied in, each followed by a sync, then a long pause (context, cuBLAS).
  for (int i = 0; i < 10; ++i) {
    t.copy(us(100 * i), us(100 * i + 10), us(100 * i + 20), us(100 * i + 50), CopyDir::kH2D);
    t.call(us(100 * i + 50), us(100 * i + 60));
  }
  t.kernel(us(5000), us(5010), us(5020), us(5100));  // an init kernel
  // Three marked steps of one kernel each.
  for (int s = 0; s < 3; ++s) {
    const TimeNs b = us(10'000 + 1'000 * s);
    t.step(b, b + us(1'000));
    t.kernel(b + us(100), b + us(110), b + us(200), b + us(700));
  }
  StepAccountant acc(testing_util::no_warmup());
  acc.add(t.b);
  acc.finish();
  ASSERT_EQ(acc.rows().size(), 3u);
  const SetupTally& s = acc.setup();
  ASSERT_TRUE(s.known);
  EXPECT_EQ(s.begin, 0);
  EXPECT_EQ(s.end, us(10'000));
  EXPECT_EQ(s.copies, 10);
  EXPECT_EQ(s.kernels, 1);
  EXPECT_EQ(s.syncs, 10);
  EXPECT_EQ(s.launches, 1);
  EXPECT_EQ(s.gpu_busy_ns, 10 * us(30) + us(80));
  // The first step's window begins at its host begin: none of set-up is in it.
  EXPECT_EQ(acc.rows()[0].window_begin, us(10'000));
  EXPECT_EQ(s.folded_steps, 0);
}

TEST(Setup, StepsDetectedBeforeTheMarksAreFoldedIntoIt) {
  // Live order: detected steps (parameter copies taken for a loop) are finalised, then the
  // program's first optimizer step marks a step.
  for (bool in_one_batch : {false, true}) {
    StepAccountant acc;  // warm-up 2: counted from the first kept step
    Trace early;
    for (int i = 0; i < 6; ++i) {
      early.copy(us(100 * i), us(100 * i + 10), us(100 * i + 20), us(100 * i + 50), CopyDir::kH2D);
      early.b.ranges.push_back(detected(us(100 * i), us(100 * i + 100)));
    }
    Trace late;
    late.next_corr = 100;  // correlation ids stay unique across the two batches
    for (int s = 0; s < 5; ++s) {
      const TimeNs b = us(5'000 + 1'000 * s);
      late.step(b, b + us(1'000), s);
      late.kernel(b + us(100), b + us(110), b + us(200), b + us(700));
    }
    if (in_one_batch) {
      Trace all = early;
      all.b.gpu_ops.insert(all.b.gpu_ops.end(), late.b.gpu_ops.begin(), late.b.gpu_ops.end());
      all.b.api_calls.insert(all.b.api_calls.end(), late.b.api_calls.begin(), late.b.api_calls.end());
      all.b.ranges.insert(all.b.ranges.end(), late.b.ranges.begin(), late.b.ranges.end());
      acc.add(all.b);
    } else {
      acc.add(early.b);
      acc.advance_watermark(us(1'000));
      ASSERT_EQ(acc.rows().size(), 6u);  // emitted before any mark came
      acc.add(late.b);
    }
    acc.finish();
    const auto& rows = acc.rows();
    ASSERT_EQ(rows.size(), 5u) << in_one_batch;
    for (const StepRow& r : rows) EXPECT_EQ(r.kernels, 1u);
    // Warm-up counts from the first kept step.
    EXPECT_TRUE(rows[0].warmup && rows[1].warmup && !rows[2].warmup);
    // The first kept window restarts at its host begin.
    EXPECT_EQ(rows[0].window_begin, us(5'000));
    const SetupTally& s = acc.setup();
    ASSERT_TRUE(s.known);
    EXPECT_EQ(s.folded_steps, 6);
    EXPECT_EQ(s.end, us(5'000));
    EXPECT_EQ(s.copies, 6);
    EXPECT_EQ(s.gpu_busy_ns, 6 * us(30));
    if (!in_one_batch) {
      EXPECT_EQ(s.folded_first_index, 0);
      EXPECT_EQ(s.folded_last_index, 5);
    }
  }
}

TEST(Setup, DetectedStepsAloneAreKept) {
  StepAccountant acc(testing_util::no_warmup());
  Trace t;
  for (int s = 0; s < 4; ++s) {
    const TimeNs b = us(1'000 * (s + 1));
    t.kernel(b + us(100), b + us(110), b + us(200), b + us(700));
    t.b.ranges.push_back(detected(b, b + us(1'000)));
  }
  acc.add(t.b);
  acc.finish();
  EXPECT_EQ(acc.rows().size(), 4u);
  EXPECT_EQ(acc.setup().folded_steps, 0);
  EXPECT_EQ(acc.setup().end, us(1'000));
}

}  // namespace
}  // namespace gpuacct
