#include "analysis/report/trace_totals.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace gpuacct {
namespace {

constexpr TimeNs us(double v) {
  return static_cast<TimeNs>(v * 1000.0);
}

class TraceTotalsTest : public ::testing::Test {
 protected:
  void op(const char* name, double s, double e, uint64_t corr, uint32_t stream,
          GpuOpKind kind = GpuOpKind::kKernel) {
    GpuOp o;
    o.name = names.intern(name);
    o.start = us(s);
    o.end = us(e);
    o.correlation_id = corr;
    o.stream = stream;
    o.kind = kind;
    target().on_gpu_op(o);
  }
  TraceTotals& target() { return sink ? *sink : totals; }
  void launch(uint64_t corr, double at) {
    HostApiCall c;
    c.correlation_id = corr;
    c.start = us(at);
    c.end = us(at + 1);
    target().on_api_call(c);
  }
  // ProfilerStep#<at / 100>: HTA counts step names, one per step.
  void step(double at, const char* name = nullptr) {
    HostRange r;
    r.kind = RangeKind::kStep;
    r.name = names.intern(name ? std::string(name)
                               : "ProfilerStep#" + std::to_string(static_cast<int>(at / 100)));
    r.start = us(at);
    r.end = us(at + 100);
    target().on_range(r);
  }
  void build() {
    step(0);
    step(100);
    step(200);  // the last step: ops launched at/after 200 us are dropped
    op("void gemm(float)", 10.2, 30.7, 1, 7);              // rounds to [11, 30]
    op("ncclDevKernel_AllReduce_Sum_f32", 20, 50, 2, 20);  // comm
    op("Memcpy HtoD (Pageable -> Device)", 60, 70, 3, 7, GpuOpKind::kMemcpy);
    op("void relu(float)", 80, 90, 4, 7);
    op("void add(float)", 125, 130, 5, 7);
    op("void late(float)", 300, 310, 6, 7);    // launched after the last step start
    op("void orphan(float)", 400, 401, 0, 7);  // no launching call
    launch(1, 5);
    launch(2, 15);
    launch(3, 65);  // after the previous op on stream 7 ended (30): host wait
    launch(4, 50);  // before 70: gap 10 < 30 -> kernel wait
    launch(5, 40);  // gap 35 >= 30 -> other
    launch(6, 210);
  }
  NameTable names;
  TraceTotals totals{names};
  std::unique_ptr<TraceTotals> sink;
};

TEST_F(TraceTotalsTest, HandComputedHtaTotals) {
  build();
  const HtaTotals t = totals.compute();
  EXPECT_TRUE(t.last_step_dropped);
  EXPECT_EQ(t.gpu_ops, 7);
  EXPECT_EQ(t.gpu_ops_kept, 5);
  // union = [11,50] + [60,70] + [80,90] + [125,130] = 39 + 10 + 10 + 5 = 64; span 119.
  EXPECT_EQ(t.kernel_time_us, 119);
  EXPECT_EQ(t.idle_us, 55);
  EXPECT_EQ(t.compute_us, 34);
  EXPECT_EQ(t.non_compute_us, 30);
  EXPECT_EQ(t.comm_us, 30);
  EXPECT_EQ(t.comm_overlap_us, 10);
  EXPECT_NEAR(t.comm_comp_overlap_pct, 100.0 / 3.0, 1e-9);
  ASSERT_EQ(t.idle_by_stream.size(), 2u);
  EXPECT_EQ(t.idle_by_stream[0].stream, 7u);
  EXPECT_EQ(t.idle_by_stream[0].host_wait_us, 30);
  EXPECT_EQ(t.idle_by_stream[0].kernel_wait_us, 10);
  EXPECT_EQ(t.idle_by_stream[0].other_us, 35);
  EXPECT_EQ(t.idle_by_stream[1].stream, 20u);
  const auto j = totals.to_json();
  EXPECT_EQ(j["kernel_time_us"], 119);
  EXPECT_EQ(j["idle_by_stream"].size(), 2u);
  EXPECT_DOUBLE_EQ(j["comm_compute_overlap_pct"].get<double>(), 33.33);
}

TEST_F(TraceTotalsTest, IncludeLastStepKeepsEverything) {
  sink = std::make_unique<TraceTotals>(names, HtaTotalsOptions{true, 30});
  build();
  const HtaTotals t = sink->compute();
  EXPECT_FALSE(t.last_step_dropped);
  EXPECT_EQ(t.gpu_ops_kept, 7);
  EXPECT_EQ(t.kernel_time_us, 401 - 11);
}

// HTA drops the last step when it has >= 2 ProfilerStep *names*: the same name written twice
// (two threads, or a cpu_op and a user_annotation) is one step, and nothing is dropped.
TEST_F(TraceTotalsTest, OneStepNameWrittenTwiceDropsNothing) {
  step(0, "ProfilerStep#1");
  step(50, "ProfilerStep#1");
  op("void gemm(float)", 10, 20, 1, 7);
  op("void late(float)", 60, 70, 2, 7);  // launched after the second copy began
  launch(1, 5);
  launch(2, 55);
  HtaTotals t = totals.compute();
  EXPECT_EQ(t.profiler_steps, 2);
  EXPECT_FALSE(t.last_step_dropped);
  EXPECT_EQ(t.gpu_ops_kept, 2);
  EXPECT_EQ(t.kernel_time_us, 60);
  step(100, "ProfilerStep#2");  // a second name: the last step (at 100) is dropped from now on
  t = totals.compute();
  EXPECT_TRUE(t.last_step_dropped);
  EXPECT_EQ(t.gpu_ops_kept, 2);  // both launched before 100
}

TEST(TraceTotals, FewerThanTwoStepsDropsNothing) {
  NameTable names;
  TraceTotals t(names);
  GpuOp o;
  o.name = names.intern("k");
  o.start = 1000;
  o.end = 5000;
  t.on_gpu_op(o);  // no correlation, no steps: kept
  EXPECT_EQ(t.compute().gpu_ops_kept, 1);
  EXPECT_EQ(t.compute().compute_us, 4);
}

TEST(TraceTotals, EmptyInput) {
  NameTable names;
  TraceTotals t(names);
  const HtaTotals h = t.compute();
  EXPECT_EQ(h.kernel_time_us, 0);
  EXPECT_EQ(t.to_json()["idle_us"], 0);
  // An MTIA trace has no CUDA GPU op: the zeros are not a result, and the JSON says so.
  EXPECT_NE(t.to_json().value("note", "").find("no CUDA GPU operation"), std::string::npos);
}

// Issue 8, item 6: HTA's temporal breakdown counts every row with a stream, cuda_sync rows
// (Stream Sync, Stream Wait Event) included; its idle breakdown leaves them out.
TEST_F(TraceTotalsTest, CudaSyncRowsCountInTheSpanNotInTheIdleBreakdown) {
  op("void gemm(float)", 10, 20, 1, 7);  // [10, 20]
  op("void gemm(float)", 40, 50, 2, 7);  // [40, 50]
  launch(1, 5);
  launch(2, 12);  // before 20: the 20 us gap is kernel wait
  GpuOp sync;
  sync.name = names.intern("Stream Sync");
  sync.start = us(15);
  sync.end = us(45);
  sync.stream = 7;
  sync.correlation_id = 3;
  totals.on_cuda_sync(sync);  // covers the gap [20, 40]
  launch(3, 14);
  const HtaTotals t = totals.compute();
  EXPECT_EQ(t.cuda_sync_rows, 1);
  EXPECT_EQ(t.kernel_time_us, 40);
  EXPECT_EQ(t.idle_us, 0);  // without the sync row: 20
  EXPECT_EQ(t.compute_us, 20);
  EXPECT_EQ(t.non_compute_us, 20);  // the sync row is HTA's OTHER class
  ASSERT_EQ(t.idle_by_stream.size(), 1u);
  EXPECT_EQ(t.idle_by_stream[0].kernel_wait_us, 20);  // 40 - 20: the sync row is not an op here
  EXPECT_EQ(t.idle_by_stream[0].host_wait_us, 0);
}

// HTA's gap is an op's start minus the previous op's end (pandas shift(1)), not the latest end
// so far: ops of one stream that overlap give negative gaps, added to kernel_wait.
TEST_F(TraceTotalsTest, SameStreamOverlapsAddNegativeGapsToKernelWait) {
  op("void a(float)", 10, 50, 1, 7);  // [10, 50]
  op("void b(float)", 30, 60, 2, 7);  // gap 30 - 50 = -20
  op("void c(float)", 40, 45, 3, 7);  // gap 40 - 60 = -20
  op("void d(float)", 48, 55, 4, 7);  // gap 48 - 45 = +3 (not 48 - 60)
  launch(1, 1);
  launch(2, 2);
  launch(3, 3);
  launch(4, 4);
  const HtaTotals t = totals.compute();
  ASSERT_EQ(t.idle_by_stream.size(), 1u);
  EXPECT_EQ(t.idle_by_stream[0].kernel_wait_us, -37);
  EXPECT_EQ(t.idle_by_stream[0].host_wait_us, 0);
  EXPECT_EQ(t.idle_by_stream[0].other_us, 0);
  EXPECT_EQ(t.idle_us, 0);
}

// pandas reads ts and dur as float64 and rounds ceil(ts), floor(ts + dur) in float64: for a
// microsecond-epoch timestamp (1.68e15 us, ulp 0.25 us) that is not the exact decimal's
// rounding.  ts = 1682725898079292.120 us, dur = 64.937 us: exactly [..293, ..357]; in float64
// ts reads as ..292.0 (ceil ..292) and ts + dur as ..357.0: HTA's [..292, ..357] (HTA 0.5.0
// on this one-kernel trace: kernel_time 65 us; exact rounding gave 64).
TEST(TraceTotals, RoundsAsPandasDoesInFloat64) {
  NameTable names;
  GpuOp o;
  o.name = names.intern("k");
  o.start = 1682725898079292120;
  o.end = o.start + 64937;
  GpuOp p = o;  // a Kineto-resolution timestamp well below 2^53 ns: float64 is exact enough
  p.start = 4458676522690655;
  p.end = p.start + 1345;  // [..690.655, ..692.000]: ceil ..691, floor ..692
  TraceTotals only_epoch(names);
  only_epoch.on_gpu_op(o);
  EXPECT_EQ(only_epoch.compute().kernel_time_us, 1682725898079357 - 1682725898079292);
  TraceTotals only_small(names);
  only_small.on_gpu_op(p);
  EXPECT_EQ(only_small.compute().kernel_time_us, 1);
}

// A sub-microsecond op can end before it starts once rounded (ts 100.5, dur 0.4 -> [101, 100]):
// HTA keeps the negative length, in the union (idle) and in the gaps.
TEST(TraceTotals, SubMicrosecondOpsKeepTheirNegativeRoundedLength) {
  NameTable names;
  TraceTotals t(names);
  GpuOp o;
  o.name = names.intern("k");
  o.stream = 7;
  o.start = 10'000;
  o.end = 20'000;  // [10, 20]
  t.on_gpu_op(o);
  o.start = 100'500;
  o.end = 100'900;  // [101, 100]
  t.on_gpu_op(o);
  o.start = 130'000;
  o.end = 140'000;  // [130, 140]
  t.on_gpu_op(o);
  const HtaTotals h = t.compute();
  EXPECT_EQ(h.kernel_time_us, 130);
  EXPECT_EQ(h.idle_us, 130 - (10 - 1 + 10));  // the middle group counts -1
  ASSERT_EQ(h.idle_by_stream.size(), 1u);
  // Gaps 101 - 20 = 81 and 130 - 100 = 30: both "other" (no launch call, >= 30 us).
  EXPECT_EQ(h.idle_by_stream[0].other_us, 111);
}

// With >= 2 steps HTA keeps a GPU row with a correlation id only when its launching call
// started before the last step; a row without one is one of its CPU rows, kept when it starts
// before the last step.
TEST_F(TraceTotalsTest, UncorrelatedRowsAreKeptWhenTheyStartBeforeTheLastStep) {
  step(0);
  step(100);
  op("void k(float)", 50, 60, 0, 7);    // no correlation, before the last step: kept
  op("void k(float)", 150, 160, 0, 7);  // after it: dropped
  op("void k(float)", 70, 80, 9, 7);    // correlation without a launching call: dropped
  const HtaTotals t = totals.compute();
  EXPECT_EQ(t.gpu_ops_kept, 1);
  EXPECT_EQ(t.kernel_time_us, 10);
}

TEST(TraceTotals, HtaKernelClasses) {
  EXPECT_TRUE(hta_is_communication("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(hta_is_communication("void ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)"));
  EXPECT_TRUE(hta_is_communication("hipMemcpy"));
  EXPECT_FALSE(hta_is_communication("void gemm(float)"));
  EXPECT_TRUE(hta_is_computation("void gemm(float)"));
  EXPECT_FALSE(hta_is_computation("Memcpy DtoD (Device -> Device)"));
  EXPECT_FALSE(hta_is_computation("Memset (Device)"));
  EXPECT_FALSE(hta_is_computation("Stream Sync"));
  EXPECT_FALSE(hta_is_computation("Stream Wait Event"));
  EXPECT_FALSE(hta_is_computation("cudaLaunchKernel"));
  EXPECT_FALSE(hta_is_computation("ncclDevKernel_SendRecv"));
}

}  // namespace
}  // namespace gpuacct

namespace gpuacct {
namespace {

// HTA's last step begins at the latest ProfilerStep among its CPU rows (stream -1), the
// GPU-side step annotations included; only those reach the totals, through the importer.
TEST(TraceTotals, GpuSideStepAnnotationsMoveTheLastStep) {
  const std::string trace = R"({"traceEvents": [
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 100},
    {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "pid": 1, "tid": 1, "ts": 100, "dur": 100},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 10, "dur": 1, "args": {"correlation": 1}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 20, "dur": 10, "args": {"device": 0, "stream": 7, "correlation": 1}},
    {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": 110, "dur": 1, "args": {"correlation": 2}},
    {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 150, "dur": 10, "args": {"device": 0, "stream": 7, "correlation": 2}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#2", "pid": 0, "tid": 7, "ts": 150, "dur": 10, "args": {"External id": 2}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#9", "pid": 0, "tid": 7, "ts": 900, "dur": 10, "args": {"stream": 7}},
    {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#9", "pid": 0, "tid": 7, "ts": 900},
    {"ph": "X", "cat": "gpu_user_annotation", "name": 5, "pid": 0, "tid": 7, "ts": 900, "dur": 1},
    {"ph": "i", "cat": "gpu_user_annotation", "name": "ProfilerStep#9", "pid": 0, "tid": 7, "ts": 900, "dur": 1},
    {"cat": "gpu_user_annotation", "name": "ProfilerStep#9", "pid": 0, "tid": 7, "ts": 900, "dur": 1}
  ]})";
  for (bool attached : {false, true}) {
    NameTable names;
    Stats stats;
    TraceTotals totals(names);
    KinetoImportOptions opts;
    if (attached) totals.attach(&opts);
    ASSERT_TRUE(import_kineto_buffer(trace, names, totals, stats, opts).ok());
    const HtaTotals t = totals.compute();
    // Attached: the GPU-side #2 (150) is the last step, the kernel launched at 110 is kept;
    // with a stream, without a dur, a phase other than X or a name that is no string, an
    // annotation is not one of HTA's CPU-row steps.  Detached: the last step is the CPU's, 100.
    EXPECT_EQ(t.gpu_step_annotations, attached ? 1 : 0);
    EXPECT_EQ(t.gpu_ops_kept, attached ? 2 : 1);
    EXPECT_EQ(t.kernel_time_us, attached ? 140 : 10);
    // Annotations are not events of the model: nothing skipped, nothing unknown.
    EXPECT_EQ(stats.get(Stat::importer_events_skipped), 0);
    EXPECT_EQ(stats.get(Stat::importer_unknown_categories), 0);
  }
}

}  // namespace
}  // namespace gpuacct
