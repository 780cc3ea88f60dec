// Helpers shared by the StepAccountant rule tests (step_accountant_test.cc,
// step_accountant_delivery_test.cc): events built with automatic correlation ids, times in
// microseconds so the thresholds (30 us launch latency, 100 us host pause) read naturally.
#pragma once

#include <gtest/gtest.h>

#include <vector>

#include "analysis/accounting/step_accountant.h"

namespace gpuacct::testing_util {

inline constexpr TimeNs us(double v) {
  return static_cast<TimeNs>(v * 1000.0);
}

// Builds events for a test with automatic correlation ids.
struct Trace {
  EventBatch b;
  uint64_t next_corr = 1;

  // A launch call on `thread` during [a, b) and the kernel it launched running [ks, ke).
  GpuOp& kernel(TimeNs a, TimeNs b_, TimeNs ks, TimeNs ke, uint16_t device = 0, uint32_t stream = 7,
                uint32_t thread = 1) {
    const uint64_t c = next_corr++;
    b.api_calls.push_back(HostApiCall{a, b_, c, thread, 1, HostApiKind::kLaunch, {}});
    GpuOp op;
    op.start = ks;
    op.end = ke;
    op.correlation_id = c;
    op.device = device;
    op.stream = stream;
    op.name = 2;
    b.gpu_ops.push_back(op);
    return b.gpu_ops.back();
  }
  GpuOp& collective(TimeNs a, TimeNs b_, TimeNs ks, TimeNs ke, uint16_t device = 0,
                    uint32_t stream = 13) {
    GpuOp& op = kernel(a, b_, ks, ke, device, stream);
    op.collective = CollectiveType::kAllReduce;
    op.name = 3;
    return op;
  }
  GpuOp& copy(TimeNs a, TimeNs b_, TimeNs ks, TimeNs ke, CopyDir dir, uint16_t device = 0,
              uint32_t stream = 9) {
    GpuOp& op = kernel(a, b_, ks, ke, device, stream);
    op.kind = GpuOpKind::kMemcpy;
    op.copy_dir = dir;
    b.api_calls.back().kind = HostApiKind::kCopy;
    return op;
  }
  void step(TimeNs a, TimeNs b_, int64_t number = -1, uint32_t thread = 1) {
    b.ranges.push_back(HostRange{a, b_, number, thread, 4, RangeKind::kStep, {}});
  }
  void data(TimeNs a, TimeNs b_, uint32_t thread = 1) {
    b.ranges.push_back(HostRange{a, b_, -1, thread, 5, RangeKind::kData, {}});
  }
  void call(TimeNs a, TimeNs b_, HostApiKind kind = HostApiKind::kSync, uint32_t thread = 1) {
    b.api_calls.push_back(HostApiCall{a, b_, 0, thread, 6, kind, {}});
  }
};

inline AccountingConfig no_warmup() {
  AccountingConfig c;
  c.warmup_steps = 0;
  return c;
}

inline std::vector<StepRow> run(const Trace& t, AccountingConfig cfg = no_warmup()) {
  StepAccountant acc(cfg);
  acc.add(t.b);
  acc.finish();
  return acc.rows();
}

// The events of `t` that arrive in the tick (now - tick, now]: host events when they end, GPU
// op i lag_of(i) after it ends (the live delivery tests).
template <typename LagOf>
EventBatch arriving(const Trace& t, TimeNs now, TimeNs tick, LagOf&& lag_of) {
  EventBatch batch;
  for (const HostRange& r : t.b.ranges)
    if (r.end <= now && r.end > now - tick) batch.ranges.push_back(r);
  for (const HostApiCall& c : t.b.api_calls)
    if (c.end <= now && c.end > now - tick) batch.api_calls.push_back(c);
  for (size_t i = 0; i < t.b.gpu_ops.size(); ++i) {
    const TimeNs at = t.b.gpu_ops[i].end + lag_of(i);
    if (at <= now && at > now - tick) batch.gpu_ops.push_back(t.b.gpu_ops[i]);
  }
  return batch;
}

inline void expect_exact(const StepRow& r) {
  EXPECT_EQ(r.cat.sum(), r.duration()) << "categories must sum to the window";
  EXPECT_GE(r.cat.compute, 0);
  EXPECT_GE(r.cat.comm_exposed, 0);
  EXPECT_GE(r.cat.copy_input, 0);
  EXPECT_GE(r.cat.copy_other, 0);
  EXPECT_GE(r.cat.data_wait, 0);
  EXPECT_GE(r.cat.launch_gap, 0);
  EXPECT_GE(r.cat.host_other, 0);
}

// Rows equal field by field (window, kernel count, categories), each mismatch named by row.
inline void expect_same_rows(const std::vector<StepRow>& got, const std::vector<StepRow>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].window_begin, want[i].window_begin) << "row " << i;
    EXPECT_EQ(got[i].window_end, want[i].window_end) << "row " << i;
    EXPECT_EQ(got[i].kernels, want[i].kernels) << "row " << i;
    EXPECT_EQ(got[i].cat.compute, want[i].cat.compute) << "row " << i;
    EXPECT_EQ(got[i].cat.data_wait, want[i].cat.data_wait) << "row " << i;
    EXPECT_EQ(got[i].cat.launch_gap, want[i].cat.launch_gap) << "row " << i;
    EXPECT_EQ(got[i].cat.host_other, want[i].cat.host_other) << "row " << i;
  }
}

}  // namespace gpuacct::testing_util
