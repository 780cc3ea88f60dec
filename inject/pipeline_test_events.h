// Test events for the live pipeline's tests (pipeline_test, prom_output_test): a train of
// steps whose rows and verdict are known.
#pragma once

#include "inject/pipeline.h"

namespace gpuacct::inject::test_events {

inline constexpr TimeNs kStepNs = 10'000'000;
inline constexpr TimeNs kStart = 1'000'000'000;

// Step i: a step range on thread 1 with a data range (2 ms; 5 ms every third step, so the
// verdict is data-bound and the shares move step by step), one launch and its kernel to
// 0.1 ms before the step's end.
inline EventBatch step_events(int i) {
  EventBatch b;
  const TimeNs t0 = kStart + i * kStepNs;
  const TimeNs data_end = t0 + (i % 3 == 0 ? 5'000'000 : 2'000'000);
  b.ranges.push_back({t0, t0 + kStepNs, i, 1, kNoName, RangeKind::kStep, {}});
  b.ranges.push_back({t0, data_end, -1, 1, kNoName, RangeKind::kData, {}});
  HostApiCall launch;
  launch.start = data_end;
  launch.end = data_end + 5'000;
  launch.correlation_id = static_cast<uint64_t>(i) + 1;
  launch.thread = 1;
  launch.kind = HostApiKind::kLaunch;
  b.api_calls.push_back(launch);
  GpuOp op;
  op.start = data_end + 10'000;
  op.end = t0 + kStepNs - 100'000;
  op.correlation_id = launch.correlation_id;
  op.stream = 7;
  b.gpu_ops.push_back(op);
  return b;
}

}  // namespace gpuacct::inject::test_events
