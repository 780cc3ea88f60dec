// The differential fuzzer's oracle (program_truth.cc) on hand-computed logs: each rule of
// docs/accounting.md it implements, with the numbers worked out by hand below.
#include <gtest/gtest.h>

#include "program.h"

namespace sim_fuzz {
namespace {

constexpr uint64_t kUs = 1000;

struct LogBuilder {
  ProgramLog log;
  LogBuilder& step(uint64_t b, uint64_t e, int thread = 0) {
    log.steps.push_back(StepLog{thread, b, e});
    return *this;
  }
  LogBuilder& call(uint64_t s, uint64_t e, CallKind k = CallKind::kLaunch, int thread = 0,
                   bool outer = true) {
    log.calls.push_back(Call{thread, k, s, e, outer});
    return *this;
  }
  // An op launched by the call starting at `launch` (submitted then too).
  LogBuilder& op(uint64_t s, uint64_t e, uint64_t launch, int cls = kCompute, int thread = 0,
                 int device = 0) {
    Op o;
    o.cls = cls;
    o.start = s;
    o.end = e;
    o.launch_time = o.submitted = launch;
    o.thread = thread;
    o.device = device;
    log.ops.push_back(o);
    return *this;
  }
  LogBuilder& data(uint64_t s, uint64_t e, int thread = 0) {
    log.data.push_back(Range{thread, s, e});
    return *this;
  }
  std::vector<ExpectedRow> rows() const { return expected_rows(log, Thresholds{}); }
};

TEST(ProgramTruth, GapBeforeTheFirstOpIsLaunchTimeWhenTheHostPausedBriefly) {
  // Step [0, 50): launch call [10, 14) µs, kernel [20, 50).  Gap [0, 20): a pause of 10 µs
  // (launch), then the call and its latency (launch).
  auto rows = LogBuilder()
                  .step(0, 50 * kUs)
                  .call(10 * kUs, 14 * kUs)
                  .op(20 * kUs, 50 * kUs, 10 * kUs)
                  .rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].window_begin, 0u);
  EXPECT_EQ(rows[0].window_end, 50 * kUs);
  EXPECT_EQ(rows[0].cat[kCatCompute], 30 * kUs);
  EXPECT_EQ(rows[0].cat[kCatLaunch], 20 * kUs);
  EXPECT_EQ(rows[0].launches, 1u);
}

TEST(ProgramTruth, APauseOverTheThresholdIsHostTimeAndADataRangeWins) {
  // Gap [0, 300): data [0, 40), pause [40, 250) = 210 µs > 100 µs (other), call at 250, op at
  // 300: launch 50 µs.
  auto rows = LogBuilder()
                  .step(0, 400 * kUs)
                  .data(0, 40 * kUs)
                  .call(250 * kUs, 254 * kUs)
                  .op(300 * kUs, 400 * kUs, 250 * kUs)
                  .rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].cat[kCatData], 40 * kUs);
  EXPECT_EQ(rows[0].cat[kCatOther], 210 * kUs);
  EXPECT_EQ(rows[0].cat[kCatLaunch], 50 * kUs);
  EXPECT_EQ(rows[0].cat[kCatCompute], 100 * kUs);
}

TEST(ProgramTruth, ACallOfNoLengthSplitsAPause) {
  // Pauses [0, 60) and [60, 120) around a synchronize of no length: each under 100 µs.
  auto rows = LogBuilder()
                  .step(0, 200 * kUs)
                  .call(60 * kUs, 60 * kUs, CallKind::kSync)
                  .call(120 * kUs, 124 * kUs)
                  .op(130 * kUs, 200 * kUs, 120 * kUs)
                  .rows();
  EXPECT_EQ(rows[0].cat[kCatLaunch], 130 * kUs);
  EXPECT_EQ(rows[0].cat[kCatOther], 0u);
}

TEST(ProgramTruth, AnUntracedCallDoesNotSplitAPause) {
  // A stream creation at 60 µs is not a traced CUDA call: [0, 120) is one pause of 120 µs.
  auto rows = LogBuilder()
                  .step(0, 200 * kUs)
                  .call(60 * kUs, 60 * kUs, CallKind::kOther)
                  .call(120 * kUs, 124 * kUs)
                  .op(130 * kUs, 200 * kUs, 120 * kUs)
                  .rows();
  EXPECT_EQ(rows[0].cat[kCatOther], 120 * kUs);
  EXPECT_EQ(rows[0].cat[kCatLaunch], 10 * kUs);
}

TEST(ProgramTruth, AQueuedOpsGapIsLatencyWhenShortElseADependency) {
  // Both ops launched at 0.  Gap [10, 39) = 29 µs < 30 µs: launch; gap [49, 79) = 30 µs: other.
  auto rows = LogBuilder()
                  .step(0, 100 * kUs)
                  .call(0, 4 * kUs)
                  .op(0, 10 * kUs, 0)
                  .op(39 * kUs, 49 * kUs, 0)
                  .op(79 * kUs, 100 * kUs, 0)
                  .rows();
  EXPECT_EQ(rows[0].cat[kCatLaunch], 29 * kUs);
  EXPECT_EQ(rows[0].cat[kCatOther], 30 * kUs);
  EXPECT_EQ(rows[0].cat[kCatCompute], 41 * kUs);
}

TEST(ProgramTruth, BusyTimeGoesToTheCategoryOfHighestPriority) {
  // compute [0, 10), collective [5, 20), H2D [15, 30), memset [25, 40).
  auto rows = LogBuilder()
                  .step(0, 40 * kUs)
                  .call(0, 1)
                  .op(0, 10 * kUs, 0, kCompute)
                  .op(5 * kUs, 20 * kUs, 0, kComm)
                  .op(15 * kUs, 30 * kUs, 0, kCopyInput)
                  .op(25 * kUs, 40 * kUs, 0, kCopyOther)
                  .rows();
  EXPECT_EQ(rows[0].cat[kCatCompute], 10 * kUs);
  EXPECT_EQ(rows[0].cat[kCatComm], 10 * kUs);
  EXPECT_EQ(rows[0].cat[kCatCopyInput], 10 * kUs);
  EXPECT_EQ(rows[0].cat[kCatCopyOther], 10 * kUs);
}

TEST(ProgramTruth, WindowsTileAndSpilledWorkStaysInItsStep) {
  // Step 0 [0, 10) owns a kernel [5, 30) that spills past step 1's begin (20); step 1 [20, 50)
  // owns [35, 40).  Windows: [0, 30), [30, 40).
  auto rows = LogBuilder()
                  .step(0, 10 * kUs)
                  .step(20 * kUs, 50 * kUs)
                  .call(1 * kUs, 2 * kUs)
                  .call(30 * kUs, 31 * kUs)
                  .op(5 * kUs, 30 * kUs, 1 * kUs)
                  .op(35 * kUs, 40 * kUs, 30 * kUs)
                  .rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].window_end, 30 * kUs);
  EXPECT_EQ(rows[1].window_begin, 30 * kUs);
  EXPECT_EQ(rows[1].window_end, 40 * kUs);
  EXPECT_EQ(rows[1].cat[kCatLaunch], 5 * kUs);  // the call at 30 and its latency
}

TEST(ProgramTruth, ANestedLaunchIsOneLaunch) {
  auto rows = LogBuilder()
                  .step(0, 100 * kUs)
                  .call(0, 50 * kUs)
                  .call(2 * kUs, 6 * kUs, CallKind::kLaunch, 0, /*outer=*/false)
                  .op(10 * kUs, 100 * kUs, 0)
                  .rows();
  EXPECT_EQ(rows[0].launches, 1u);
}

TEST(ProgramTruth, ADeviceHasRowsFromTheStepItIsFirstUsedIn) {
  // Device 1 runs only in step 1: no row in step 0, its first window from step 1's host begin.
  auto rows = LogBuilder()
                  .step(0, 10 * kUs)
                  .step(10 * kUs, 20 * kUs)
                  .call(0, 1)
                  .call(10 * kUs, 11 * kUs)
                  .op(5 * kUs, 10 * kUs, 0)
                  .op(15 * kUs, 20 * kUs, 10 * kUs, kCompute, 0, /*device=*/1)
                  .rows();
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].device, 0);
  EXPECT_EQ(rows[2].device, 1);
  EXPECT_EQ(rows[2].window_begin, 10 * kUs);
  EXPECT_EQ(rows[2].cat[kCatCompute], 5 * kUs);
}

TEST(ProgramTruth, AStepBeforeTheFirstOpIsHostOnly) {
  auto rows = LogBuilder()
                  .step(0, 10 * kUs)
                  .step(10 * kUs, 20 * kUs)
                  .call(10 * kUs, 11 * kUs)
                  .op(15 * kUs, 20 * kUs, 10 * kUs)
                  .rows();
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].device, -1);
  EXPECT_EQ(rows[0].window_end, 10 * kUs);
  EXPECT_EQ(rows[1].device, 0);
  EXPECT_EQ(rows[1].window_begin, 10 * kUs);
}

TEST(ProgramTruth, NoOpAtAllGivesHostOnlyRows) {
  auto rows = LogBuilder().step(0, 10 * kUs).call(2 * kUs, 2 * kUs, CallKind::kSync).rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].device, -1);
  EXPECT_EQ(rows[0].cat[kCatLaunch], 10 * kUs);  // pauses of 2 and 8 µs on the step's thread
}

}  // namespace
}  // namespace sim_fuzz
