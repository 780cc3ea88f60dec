// Step detection for inputs that mark no steps: events -> StepDetector -> step ranges, the one
// path for the live library and for whole files.
//
// DetectorFeeder: the join both need -- an op's token carries its launch call's host time
// (correlation id), a blocking sync call is a token of its own.  Calls should come before the
// ops they launched (the library feeds each batch's calls first); an op whose call is not known
// uses its own start.
//
// StepDetection: the incremental component.  It feeds the detector (through a DetectorFeeder)
// and turns the boundaries it finds into step ranges: step i runs from boundary i to boundary
// i + 1 (N + 1 boundaries -> N steps, numbered from 0, named `step_name`, on the thread of the
// boundary that ends them).  poll() is watermark-driven: the live library calls it every tick
// with its watermark (final = true at exit); a whole file calls it once with final = true.
// Boundaries delivered in any chunks give the same ranges.  poll_into() hands the ranges to a
// sink the one way every source does (EventSink::on_range, before the watermark that may
// finalise them) and, at the end, counts a step the capture cut off.
//
// OfflineStepDetection: an EventSink for a whole trace or recording.  If the input marks no
// steps (no step range, no step-boundary marker) detect() returns the steps StepDetection
// finds, which the caller hands to the StepAccountant before finish().  This is what gives
// on-demand profiler traces (no ProfilerStep#N) per-step rows.  Work after the last boundary is
// a step the capture cut off: it is not a step (Stat::incomplete_trailing_step), and neither is
// work before the first one when the capture began inside a step.
#pragma once

#include <algorithm>
#include <deque>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "analysis/accounting/step_detector.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/name_table.h"
#include "analysis/model/stats.h"

namespace gpuacct {

// Which host calls are blocking synchronisations (DetectorToken::is_sync): the calls that make
// the host wait for the GPU -- cudaDeviceSynchronize, cudaStreamSynchronize,
// cudaEventSynchronize, cuCtxSynchronize, cuStreamSynchronize, cuEventSynchronize (any name
// holding "Synchronize", as the importer maps them).  cudaStreamWaitEvent / cuStreamWaitEvent
// make a *stream* wait for an event and return at once: not a sync (HostApiKind::kOther).
class DetectorFeeder {
 public:
  // Remembers at most `max_launches` launch calls (oldest forgotten first); 0 = no limit.
  // `names` (optional) tells optimizer kernels by name (DetectorToken::is_optimizer); without
  // it no token is one.
  explicit DetectorFeeder(StepDetector& detector, size_t max_launches = size_t{1} << 20,
                          const NameTable* names = nullptr)
      : detector_(detector), max_launches_(max_launches), names_(names) {}

  void add_api_call(const HostApiCall& call);
  void add_gpu_op(const GpuOp& op);

 private:
  bool is_optimizer(NameId name);

  StepDetector& detector_;
  size_t max_launches_;
  const NameTable* names_;
  std::vector<int8_t> optimizer_name_;  // by NameId: -1 not looked up yet, 0 no, 1 yes
  struct Launch {
    TimeNs start;
    TimeNs end;
    uint32_t thread;
  };
  std::unordered_map<uint64_t, Launch> launch_times_;
  std::deque<uint64_t> launch_order_;
};

// The name every detected step range carries (live and offline).
inline constexpr std::string_view kDetectedStepName = "step (detected)";

// What step detection found: the report's "step_detection" section
// (report/report.h add_step_detection_section) is made from it.
// The detector's version in the report's step_detection section and a recording's metadata:
// a recording whose detected steps an older detector made has them detected again
// (analysis/input/input.cc).  2: periods need a kernel, steps end after the optimizer's run.
inline constexpr int kStepDetectorVersion = 2;

struct StepDetectionSummary {
  bool locked = false;
  size_t period_ops = 0;      // tokens (GPU ops and syncs) per step
  NameId step_end = kNoName;  // the token that ends each step
  bool step_end_is_sync = false;
  StepEndRule rule = StepEndRule::kNone;
  double match_share = 0;      // StepDetector::match_share
  double explained_share = 0;  // StepDetector::explained_share
  size_t boundaries = 0;          // boundaries found so far
  size_t steps = 0;               // step ranges made so far (boundaries - 1, or 0)
  bool leading_partial = false;   // the capture began inside a step: its work is in no step
  bool trailing_partial = false;  // work issued after the last boundary (known once final)
};

// Step ranges between consecutive boundaries, made incrementally: boundaries delivered in any
// chunks (in order) give the same ranges as all at once.  Step i runs from boundary i to
// boundary i + 1, is numbered i, named `step_name`, on the thread of the boundary that ends it.
class StepRangeMaker {
 public:
  explicit StepRangeMaker(NameId step_name) : step_name_(step_name) {}
  // Appends to `out` the ranges the new boundaries close.
  void add(const std::vector<Marker>& boundaries, std::vector<HostRange>* out);
  size_t boundaries() const { return boundaries_; }
  size_t steps() const { return steps_; }
  // The last boundary (where the open step begins); null before the first.
  const Marker* last_boundary() const { return boundaries_ > 0 ? &last_ : nullptr; }

 private:
  NameId step_name_;
  Marker last_;
  size_t boundaries_ = 0;
  size_t steps_ = 0;
};

class StepDetection {
 public:
  // `max_launches`: launch calls remembered for the join (DetectorFeeder); 0 = no limit (a
  // whole file, whose calls all come first).
  // `names`: the table the events' names are in (optimizer kernels are told by name).
  explicit StepDetection(NameId step_name, const NameTable* names = nullptr,
                         StepDetectorOptions options = {},
                         size_t max_launches = size_t{1} << 20);
  StepDetection(const StepDetection&) = delete;
  StepDetection& operator=(const StepDetection&) = delete;

  // Events, calls before the ops they launched.  Only launch, copy and sync calls and GPU ops
  // matter; the rest is ignored.
  void add_api_call(const HostApiCall& call);
  void add_gpu_op(const GpuOp& op);
  void add(const EventBatch& batch);  // the batch's calls, then its ops
  // The input (a trace, a recording) begins at `t` (StepDetector::note_input_start).
  void note_input_start(TimeNs t) { detector_.note_input_start(t); }

  // The step ranges closed by the boundaries found before `watermark` (all of them when
  // final), in order.  After the final poll summary().trailing_partial is known.
  std::vector<HostRange> poll(TimeNs watermark, bool final);
  // poll(), then hands each range to `sink` (on_range) and, on the final poll, counts a step
  // the capture cut off in `stats` (Stat::incomplete_trailing_step).  Returns the ranges (the
  // live library also records them).
  std::vector<HostRange> poll_into(EventSink& sink, Stats& stats, TimeNs watermark, bool final);

  StepDetectionSummary summary() const;
  const StepDetector& detector() const { return detector_; }
  bool gave_up() const { return detector_.gave_up(); }

 private:
  StepDetector detector_;
  DetectorFeeder feeder_;
  StepRangeMaker ranges_;
  // For the trailing partial step: the latest launch / copy / sync call start, or, for inputs
  // without calls, the latest op start.
  bool saw_call_ = false;
  TimeNs latest_call_start_ = std::numeric_limits<TimeNs>::min();
  bool saw_op_ = false;
  TimeNs latest_op_start_ = std::numeric_limits<TimeNs>::min();
  bool trailing_partial_ = false;
};

class OfflineStepDetection final : public EventSink {
 public:
  explicit OfflineStepDetection(NameId step_name = kNoName, const NameTable* names = nullptr,
                                StepDetectorOptions options = {});

  // Whether the capture began with the input's first event (default): a profiler trace, whose
  // capture was switched on mid-run -- the first detected step never begins before the first
  // event (StepDetector::note_input_start).  False for a recording of the live library, which
  // saw the process from its start: the first step begins one typical host pause before its
  // first token, exactly as it did live (the same steps live and offline).
  void set_capture_began_at_first_event(bool began) { capture_began_at_first_event_ = began; }

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
  // Steps for an input that marks none (none otherwise, or if no period was found).  Once.
  Result detect();
  // The same, handed on as every source hands detected steps on (StepDetection::poll_into):
  // each range to `sink`, a step the capture cut off counted in `stats`.
  Result detect_into(EventSink& sink, Stats& stats);
  const StepDetector& detector() const { return detection_.detector(); }
  StepDetectionSummary summary() const { return detection_.summary(); }

 private:
  void input_has_steps();
  void saw(TimeNs t) { earliest_ = std::min(earliest_, t); }

  StepDetection detection_;
  bool explicit_steps_ = false;
  std::vector<HostApiCall> calls_;  // launch, copy and sync calls
  std::vector<GpuOp> ops_;
  TimeNs earliest_ = std::numeric_limits<TimeNs>::max();  // the input's first event
  bool capture_began_at_first_event_ = true;
};

}  // namespace gpuacct
