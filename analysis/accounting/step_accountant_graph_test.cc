// StepAccountant: graph launches delivered late (issue 14, fuzzer dimension `graph_lag`).  A
// graph launch has one GPU op per kernel node, all with the launch's correlation id, so the
// first to arrive does not settle the launch: it stays owed until delivery has moved the
// pending-launch timeout past it, and a kernel that comes after its step was finalised anyway
// is dropped and counted, never accounted in a later step's window.
#include <algorithm>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_accountant_test_util.h"

namespace gpuacct {
namespace {

using namespace testing_util;  // NOLINT(google-build-using-namespace): test helpers

constexpr TimeNs kMs = 1'000'000;
constexpr int kNodes = 3;

// `steps` steps of 20 ms: 5 ms data range, then one graph launch of three kernels running back
// to back, [5, 9), [9, 16) and [16, 23) ms into the step -- the last runs 3 ms into the next
// step's host time, as the 1.26 s kernel of the fuzzer's seed 1764 did.
Trace graph_loop(int steps) {
  Trace t;
  for (int i = 0; i < steps; ++i) {
    const TimeNs b = i * 20 * kMs;
    t.step(b, b + 20 * kMs, i);
    t.data(b, b + 5 * kMs);
    const TimeNs ends[kNodes] = {9 * kMs, 16 * kMs, 23 * kMs};
    const uint64_t corr = t.next_corr;
    TimeNs start = 5 * kMs + us(10);
    for (int n = 0; n < kNodes; ++n) {
      t.next_corr = corr;  // one launch call, one correlation id for every node
      GpuOp& op = t.kernel(b + 5 * kMs, b + 5 * kMs + us(4), b + start, b + ends[n]);
      op.graph_id = 1;
      start = ends[n];
      if (n > 0) t.b.api_calls.pop_back();
    }
  }
  return t;
}

// Delivers `t` as the library does (step_accountant_delivery_test.cc, deliver_live): every
// 100 ms tick the host events that ended by then and each GPU op `lag_of(op index)` after its
// end, then a watermark 300 ms behind the clock; what is still held back comes at the end.
// Returns the rows finalised before the end.
size_t deliver(StepAccountant& acc, const Trace& t, const std::function<TimeNs(size_t)>& lag_of) {
  const TimeNs tick = 100 * kMs;
  TimeNs stop = 0;
  for (size_t i = 0; i < t.b.gpu_ops.size(); ++i)
    stop = std::max(stop, t.b.gpu_ops[i].end + lag_of(i) + tick);
  TimeNs now = tick;
  for (; now <= stop; now += tick) {
    acc.add(arriving(t, now, tick, lag_of));
    acc.advance_watermark(now - 300 * kMs);
  }
  const size_t before_end = acc.rows().size();
  acc.finish();
  return before_end;
}

// Every GPU record 3.1 s late (the `graph_lag` dimension): the three kernels of a graph launch
// arrive one by one, and the step waits for all of them -- the rows are those of the same events
// all at once, nothing lost.  Before: the first kernel settled the launch, the step was
// finalised without the other two; the second was dropped (counted) and the third, running past
// the step's end, was accounted as compute in the next step's window without a count.
TEST(StepAccountantGraphs, GraphKernelsDeliveredLateAreWaitedFor) {
  const Trace t = graph_loop(300);
  const std::vector<StepRow> truth = run(t);
  ASSERT_EQ(truth.size(), 300u);
  ASSERT_EQ(truth[5].kernels, 3u);
  ASSERT_EQ(truth[5].window_end, (5 * 20 + 23) * kMs);
  for (const TimeNs lag : {TimeNs{0}, 3100 * kMs}) {
    SCOPED_TRACE(lag);
    StepAccountant acc(no_warmup());
    const size_t before_end = deliver(acc, t, [&](size_t) { return lag; });
    EXPECT_EQ(acc.stats().get(Stat::late_gpu_ops_dropped), 0);
    EXPECT_FALSE(acc.stats().has_data_loss());
    expect_same_rows(acc.rows(), truth);
    EXPECT_GT(before_end, 100u) << "the steps are finalised while the run goes on";
  }
}

// The 2nd and 3rd kernel of every graph come 3.1 s late while every other record comes on time:
// delivery moves on without them, the launch is given up once it is the timeout behind, and the
// kernels that come after their step was finalised are dropped and counted.  Every kernel is
// either in its step's row or counted, and no row holds time of a kernel it does not own.
TEST(StepAccountantGraphs, GraphKernelsLaterThanDeliveryAreCountedNeverMisplaced) {
  const Trace t = graph_loop(300);
  const std::vector<StepRow> truth = run(t);
  StepAccountant acc(no_warmup());
  const size_t before_end =
      deliver(acc, t, [](size_t i) { return i % kNodes == 0 ? 0 : 3100 * kMs; });
  const std::vector<StepRow>& rows = acc.rows();
  ASSERT_EQ(rows.size(), truth.size());
  EXPECT_GT(before_end, 100u);
  int64_t kernels = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    kernels += rows[i].kernels;
    EXPECT_LE(rows[i].cat.compute, truth[i].cat.compute) << "row " << i;
  }
  const int64_t dropped = acc.stats().get(Stat::late_gpu_ops_dropped);
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(kernels + dropped, kNodes * 300);
  EXPECT_TRUE(acc.stats().has_data_loss());
}

// Waiting for graph launches is bounded by memory too: with records on time a step holding a
// graph launch waits 2 s (100 steps here, 600 events), over pending_event_limit = 200.  There a
// graph launch whose first op came is let go without a count -- its nodes came with it, as they
// would be dropped and counted if they came later -- so the held events stay near the limit,
// nothing is counted as cut off and the rows are those of the same events all at once.
TEST(StepAccountantGraphs, GraphLaunchesAreLetGoAtTheEventLimit) {
  const Trace t = graph_loop(300);
  AccountingConfig cfg = no_warmup();
  cfg.pending_event_limit = 200;
  StepAccountant acc(cfg);
  const size_t before_end = deliver(acc, t, [](size_t) { return TimeNs{0}; });
  EXPECT_GT(before_end, 250u);
  EXPECT_EQ(acc.stats().get(Stat::owed_launches_cut_off), 0);
  EXPECT_FALSE(acc.stats().has_data_loss());
  expect_same_rows(acc.rows(), run(t));
  // At most a tick's intake (5 steps of 6 events) above the limit.
  EXPECT_LE(acc.delivery_lag().held_peak(), cfg.pending_event_limit + 30);
  EXPECT_GT(acc.delivery_lag().held_peak(), cfg.pending_event_limit);
}

// The same loop with each graph launch traced as one GRAPH_TRACE span (kGpuOpGraphSpan): its
// only op settles the launch at once, so steps are finalised a tick behind, not the 2 s
// pending-launch timeout behind; the span is compute over the whole launch, and a row counts the
// graph's nodes as its kernels.  Rows equal those of the node-by-node loop where the nodes run
// back to back (they tile the span).
TEST(StepAccountantGraphs, AGraphSpanSettlesItsLaunchAtOnce) {
  const Trace nodes = graph_loop(300);
  Trace spans = nodes;
  spans.b.gpu_ops.clear();
  for (size_t i = 0; i < nodes.b.gpu_ops.size(); i += kNodes) {
    GpuOp span = nodes.b.gpu_ops[i];
    span.end = nodes.b.gpu_ops[i + kNodes - 1].end;
    span.flags = kGpuOpGraphSpan;
    span.graph_nodes = kNodes;
    spans.b.gpu_ops.push_back(span);
  }
  const std::vector<StepRow> truth = run(nodes);
  StepAccountant acc(no_warmup());
  // Finalised before the end: all but the steps of the last tick or so (node by node, the last
  // 2 s of steps -- 100 -- wait for the end).
  const size_t before_end = deliver(acc, spans, [](size_t) { return TimeNs{0}; });
  EXPECT_GE(before_end, 280u);
  EXPECT_FALSE(acc.stats().has_data_loss());
  expect_same_rows(acc.rows(), truth);
  ASSERT_EQ(acc.rows()[5].kernels, static_cast<uint32_t>(kNodes));
  // An unknown node count counts the span as one kernel.
  Trace unknown = spans;
  for (GpuOp& op : unknown.b.gpu_ops) op.graph_nodes = 0;
  EXPECT_EQ(run(unknown)[5].kernels, 1u);
}

}  // namespace
}  // namespace gpuacct
