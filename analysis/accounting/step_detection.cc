#include "analysis/accounting/step_detection.h"

#include <algorithm>
#include <limits>

namespace gpuacct {

void DetectorFeeder::add_api_call(const HostApiCall& c) {
  if (c.kind == HostApiKind::kSync) {
    DetectorToken t;
    t.start = c.start;
    t.end = c.end;
    t.order = c.correlation_id;
    t.name = c.name;
    t.thread = c.thread;
    t.is_sync = true;
    detector_.add(t);
    return;
  }
  if (c.kind != HostApiKind::kLaunch && c.kind != HostApiKind::kCopy) return;
  // Correlation id 0 means "unknown": it links no op to this call.
  if (c.correlation_id == 0) return;
  if (launch_times_.emplace(c.correlation_id, Launch{c.start, c.end, c.thread}).second) {
    launch_order_.push_back(c.correlation_id);
    if (max_launches_ != 0 && launch_order_.size() > max_launches_) {
      launch_times_.erase(launch_order_.front());
      launch_order_.pop_front();
    }
  }
}

void DetectorFeeder::add_gpu_op(const GpuOp& op) {
  DetectorToken t;
  auto it = op.correlation_id != 0 ? launch_times_.find(op.correlation_id) : launch_times_.end();
  if (it != launch_times_.end()) {
    t.start = it->second.start;
    t.end = std::max(it->second.end, op.end);
    t.thread = it->second.thread;
  } else {
    t.start = op.start;
    t.end = op.end;
  }
  t.order = op.correlation_id;
  t.name = op.name;
  detector_.add(t);
}

OfflineStepDetection::OfflineStepDetection(StepDetectorOptions options) : detector_(options) {}

void OfflineStepDetection::on_gpu_op(const GpuOp& op) {
  if (explicit_steps_) return;
  saw(op.start);
  ops_.push_back(op);
}

void OfflineStepDetection::on_api_call(const HostApiCall& call) {
  if (explicit_steps_) return;
  saw(call.start);
  if (call.kind != HostApiKind::kOther) calls_.push_back(call);
}

void OfflineStepDetection::on_range(const HostRange& range) {
  if (range.kind == RangeKind::kStep) input_has_steps();
  saw(range.start);
}

void OfflineStepDetection::on_marker(const Marker& marker) {
  if (marker.kind == MarkerKind::kStepBoundary) input_has_steps();
  saw(marker.ts);
}

void OfflineStepDetection::input_has_steps() {
  if (explicit_steps_) return;
  explicit_steps_ = true;  // nothing to detect: free what was kept for it
  std::vector<HostApiCall>().swap(calls_);
  std::vector<GpuOp>().swap(ops_);
}

OfflineStepDetection::Result OfflineStepDetection::detect(NameId step_name) {
  Result out;
  if (explicit_steps_) return out;
  // Whole input at hand: every call first, so each op finds its launch time.
  DetectorFeeder feeder(detector_, /*max_launches=*/0);
  for (const HostApiCall& c : calls_) feeder.add_api_call(c);
  for (const GpuOp& op : ops_) feeder.add_gpu_op(op);
  if (earliest_ != std::numeric_limits<TimeNs>::max()) detector_.note_input_start(earliest_);
  const std::vector<Marker> boundaries =
      detector_.poll(std::numeric_limits<TimeNs>::max(), /*final=*/true);
  out.boundaries = boundaries.size();
  out.leading_partial = detector_.leading_partial_step();
  for (size_t i = 0; i + 1 < boundaries.size(); ++i) {
    HostRange r;
    r.start = boundaries[i].ts;
    r.end = boundaries[i + 1].ts;
    r.number = static_cast<int64_t>(i);
    r.thread = boundaries[i + 1].thread;
    r.name = step_name;
    r.kind = RangeKind::kStep;
    out.steps.push_back(r);
  }
  if (!boundaries.empty()) {
    // Work issued after the last step ended belongs to a step the capture cut off.
    // (By launch call; ops only when the input has no calls: an op of the last step can
    // still run after the step's end.)
    const TimeNs last = boundaries.back().ts;
    for (const HostApiCall& c : calls_) out.trailing_partial |= c.start >= last;
    if (calls_.empty()) {
      for (const GpuOp& op : ops_) out.trailing_partial |= op.start >= last;
    }
  }
  calls_.clear();
  calls_.shrink_to_fit();
  ops_.clear();
  ops_.shrink_to_fit();
  return out;
}

}  // namespace gpuacct
