#include "analysis/accounting/step_detection.h"

#include <algorithm>
#include <limits>

#include "analysis/model/optimizer_names.h"

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

bool DetectorFeeder::is_optimizer(NameId name) {
  if (names_ == nullptr || name == kNoName || !names_->contains(name)) return false;
  if (name >= optimizer_name_.size()) optimizer_name_.resize(static_cast<size_t>(name) + 1, -1);
  int8_t& known = optimizer_name_[name];
  if (known < 0) known = is_optimizer_kernel_name(names_->text(name)) ? 1 : 0;
  return known == 1;
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
  t.is_copy = op.kind != GpuOpKind::kKernel;
  t.is_optimizer = !t.is_copy && is_optimizer(op.name);
  detector_.add(t);
}

void StepRangeMaker::add(const std::vector<Marker>& boundaries, std::vector<HostRange>* out) {
  for (const Marker& b : boundaries) {
    if (boundaries_ > 0) {
      HostRange r;
      r.start = last_.ts;
      r.end = b.ts;
      r.number = static_cast<int64_t>(steps_++);
      r.thread = b.thread;
      r.name = step_name_;
      r.kind = RangeKind::kStep;
      mark_step_detected(r);
      out->push_back(r);
    }
    last_ = b;
    ++boundaries_;
  }
}

StepDetection::StepDetection(NameId step_name, const NameTable* names,
                             StepDetectorOptions options, size_t max_launches)
    : detector_(options), feeder_(detector_, max_launches, names), ranges_(step_name) {}

void StepDetection::add_api_call(const HostApiCall& call) {
  if (call.kind == HostApiKind::kOther) return;
  saw_call_ = true;
  latest_call_start_ = std::max(latest_call_start_, call.start);
  feeder_.add_api_call(call);
}

void StepDetection::add_gpu_op(const GpuOp& op) {
  saw_op_ = true;
  latest_op_start_ = std::max(latest_op_start_, op.start);
  feeder_.add_gpu_op(op);
}

void StepDetection::add(const EventBatch& batch) {
  // Calls first, so each op of the batch finds its launch call's host time.
  for (const HostApiCall& c : batch.api_calls) add_api_call(c);
  for (const GpuOp& op : batch.gpu_ops) add_gpu_op(op);
}

std::vector<HostRange> StepDetection::poll(TimeNs watermark, bool final) {
  std::vector<HostRange> out;
  ranges_.add(detector_.poll(watermark, final), &out);
  if (final && ranges_.last_boundary() != nullptr) {
    // Work issued after the last step ended belongs to a step the capture cut off.  (By launch
    // call; by op only when the input has no calls: an op of the last step can still run
    // after the step's end.)
    const TimeNs last = ranges_.last_boundary()->ts;
    trailing_partial_ =
        saw_call_ ? latest_call_start_ >= last : saw_op_ && latest_op_start_ >= last;
  }
  return out;
}

std::vector<HostRange> StepDetection::poll_into(EventSink& sink, Stats& stats, TimeNs watermark,
                                                bool final) {
  std::vector<HostRange> ranges = poll(watermark, final);
  for (const HostRange& r : ranges) sink.on_range(r);
  if (final && trailing_partial_) stats.add(Stat::incomplete_trailing_step);
  return ranges;
}

StepDetectionSummary StepDetection::summary() const {
  StepDetectionSummary s;
  s.locked = detector_.locked();
  s.period_ops = detector_.period_tokens();
  s.step_end = detector_.step_end_name();
  s.step_end_is_sync = detector_.step_end_is_sync();
  s.rule = detector_.step_end_rule();
  s.match_share = detector_.match_share();
  s.explained_share = detector_.explained_share();
  s.boundaries = ranges_.boundaries();
  s.steps = ranges_.steps();
  s.leading_partial = detector_.leading_partial_step();
  s.trailing_partial = trailing_partial_;
  return s;
}

OfflineStepDetection::OfflineStepDetection(NameId step_name, const NameTable* names,
                                           StepDetectorOptions options)
    : detection_(step_name, names, options, /*max_launches=*/0) {}

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

namespace {

class DiscardingSink final : public EventSink {
 public:
  void on_gpu_op(const GpuOp&) override {}
  void on_api_call(const HostApiCall&) override {}
  void on_range(const HostRange&) override {}
  void on_marker(const Marker&) override {}
};

}  // namespace

OfflineStepDetection::Result OfflineStepDetection::detect() {
  DiscardingSink none;
  Stats ignored;
  return detect_into(none, ignored);
}

OfflineStepDetection::Result OfflineStepDetection::detect_into(EventSink& sink, Stats& stats) {
  Result out;
  if (explicit_steps_) return out;
  // Whole input at hand: every call first, so each op finds its launch time.
  for (const HostApiCall& c : calls_) detection_.add_api_call(c);
  for (const GpuOp& op : ops_) detection_.add_gpu_op(op);
  std::vector<HostApiCall>().swap(calls_);
  std::vector<GpuOp>().swap(ops_);
  if (capture_began_at_first_event_ && earliest_ != std::numeric_limits<TimeNs>::max()) {
    detection_.note_input_start(earliest_);
  }
  out.steps = detection_.poll_into(sink, stats, std::numeric_limits<TimeNs>::max(), /*final=*/true);
  const StepDetectionSummary s = detection_.summary();
  out.boundaries = s.boundaries;
  out.leading_partial = s.leading_partial;
  out.trailing_partial = s.trailing_partial;
  return out;
}

}  // namespace gpuacct
