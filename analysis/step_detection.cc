#include "analysis/step_detection.h"

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
  if (launch_times_.emplace(c.correlation_id, std::make_pair(c.start, c.end)).second) {
    launch_order_.push_back(c.correlation_id);
    if (max_launches_ != 0 && launch_order_.size() > max_launches_) {
      launch_times_.erase(launch_order_.front());
      launch_order_.pop_front();
    }
  }
}

void DetectorFeeder::add_gpu_op(const GpuOp& op) {
  DetectorToken t;
  auto it = launch_times_.find(op.correlation_id);
  if (it != launch_times_.end()) {
    t.start = it->second.first;
    t.end = std::max(it->second.second, op.end);
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
  if (!explicit_steps_) ops_.push_back(op);
}

void OfflineStepDetection::on_api_call(const HostApiCall& call) {
  if (explicit_steps_ || call.kind == HostApiKind::kOther) return;
  calls_.push_back(call);
}

void OfflineStepDetection::on_range(const HostRange& range) {
  if (range.kind == RangeKind::kStep) input_has_steps();
}

void OfflineStepDetection::on_marker(const Marker& marker) {
  if (marker.kind == MarkerKind::kStepBoundary) input_has_steps();
}

void OfflineStepDetection::input_has_steps() {
  if (explicit_steps_) return;
  explicit_steps_ = true;  // nothing to detect: free what was kept for it
  std::vector<HostApiCall>().swap(calls_);
  std::vector<GpuOp>().swap(ops_);
}

std::vector<Marker> OfflineStepDetection::detect() {
  if (explicit_steps_) return {};
  // Whole input at hand: every call first, so each op finds its launch time.
  DetectorFeeder feeder(detector_, /*max_launches=*/0);
  for (const HostApiCall& c : calls_) feeder.add_api_call(c);
  for (const GpuOp& op : ops_) feeder.add_gpu_op(op);
  calls_.clear();
  calls_.shrink_to_fit();
  ops_.clear();
  ops_.shrink_to_fit();
  return detector_.poll(std::numeric_limits<TimeNs>::max(), /*final=*/true);
}

}  // namespace gpuacct
