// Turning events into StepDetector tokens, for the live library and for whole files.
//
// DetectorFeeder: the join both need — an op's token carries its launch call's host time
// (correlation id), a blocking sync call is a token of its own.  Calls should come before the
// ops they launched (the library feeds each batch's calls first); an op whose call is not known
// uses its own start.
//
// OfflineStepDetection: an EventSink for a whole trace or recording.  If the input marks no
// steps (no step range, no step-boundary marker) detect() returns the boundaries the detector
// finds, which the caller hands to the StepAccountant before finish().  This is what gives
// on-demand profiler traces (no ProfilerStep#N) per-step rows.
#pragma once

#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/event_sink.h"
#include "analysis/step_detector.h"

namespace gpuacct {

class DetectorFeeder {
 public:
  // Remembers at most `max_launches` launch calls (oldest forgotten first); 0 = no limit.
  explicit DetectorFeeder(StepDetector& detector, size_t max_launches = size_t{1} << 20)
      : detector_(detector), max_launches_(max_launches) {}

  void add_api_call(const HostApiCall& call);
  void add_gpu_op(const GpuOp& op);

 private:
  StepDetector& detector_;
  size_t max_launches_;
  std::unordered_map<uint64_t, std::pair<TimeNs, TimeNs>> launch_times_;
  std::deque<uint64_t> launch_order_;
};

class OfflineStepDetection final : public EventSink {
 public:
  explicit OfflineStepDetection(StepDetectorOptions options = {});

  void on_gpu_op(const GpuOp& op) override;
  void on_api_call(const HostApiCall& call) override;
  void on_range(const HostRange& range) override;
  void on_marker(const Marker& marker) override;

  bool input_marks_steps() const { return explicit_steps_; }
  // Step boundaries for an input that marks none (empty otherwise, or if no period was found).
  std::vector<Marker> detect();
  const StepDetector& detector() const { return detector_; }

 private:
  void input_has_steps();

  StepDetector detector_;
  bool explicit_steps_ = false;
  std::vector<HostApiCall> calls_;  // launch, copy and sync calls
  std::vector<GpuOp> ops_;
};

}  // namespace gpuacct
