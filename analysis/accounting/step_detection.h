// Turning events into StepDetector tokens, for the live library and for whole files.
//
// DetectorFeeder: the join both need — an op's token carries its launch call's host time
// (correlation id), a blocking sync call is a token of its own.  Calls should come before the
// ops they launched (the library feeds each batch's calls first); an op whose call is not known
// uses its own start.
//
// OfflineStepDetection: an EventSink for a whole trace or recording.  If the input marks no
// steps (no step range, no step-boundary marker) detect() returns the steps the detector
// finds, as step ranges between consecutive boundaries (as the live library makes them), which
// the caller hands to the StepAccountant before finish().  This is what gives on-demand
// profiler traces (no ProfilerStep#N) per-step rows.  Work after the last boundary is a step
// the capture cut off: it is not a step (counted in Stat::incomplete_trailing_step by the
// caller), and neither is work before the first one when the capture began inside a step.
#pragma once

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/accounting/step_detector.h"
#include "analysis/model/event_sink.h"

namespace gpuacct {

// Which host calls are blocking synchronisations (DetectorToken::is_sync): the calls that make
// the host wait for the GPU -- cudaDeviceSynchronize, cudaStreamSynchronize,
// cudaEventSynchronize, cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize (any name
// holding "Synchronize", as the importer maps them).  cudaStreamWaitEvent / cuStreamWaitEvent
// make a *stream* wait for an event and return at once: not a sync (HostApiKind::kOther).
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
  struct Launch {
    TimeNs start;
    TimeNs end;
    uint32_t thread;
  };
  std::unordered_map<uint64_t, Launch> launch_times_;
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

  struct Result {
    std::vector<HostRange> steps;  // kStep ranges named `step_name`, numbered from 0
    size_t boundaries = 0;
    bool leading_partial = false;   // the capture began inside a step: its work is outside
    bool trailing_partial = false;  // work after the last boundary: a step the capture cut off
  };
  // Steps for an input that marks none (none otherwise, or if no period was found).
  Result detect(NameId step_name);
  const StepDetector& detector() const { return detector_; }

 private:
  void input_has_steps();
  void saw(TimeNs t) { earliest_ = std::min(earliest_, t); }

  StepDetector detector_;
  bool explicit_steps_ = false;
  std::vector<HostApiCall> calls_;  // launch, copy and sync calls
  std::vector<GpuOp> ops_;
  TimeNs earliest_ = std::numeric_limits<TimeNs>::max();  // the input's first event
};

}  // namespace gpuacct
