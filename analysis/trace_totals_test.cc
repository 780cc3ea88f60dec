#include "analysis/trace_totals.h"

#include <gtest/gtest.h>

#include <memory>

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
  void step(double at) {
    HostRange r;
    r.kind = RangeKind::kStep;
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
