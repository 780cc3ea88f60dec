#include "analysis/input/input.h"

#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "analysis/accounting/step_detection.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/import/recording.h"
#include "analysis/model/file_io.h"
#include "analysis/report/report.h"
#include "analysis/report/trace_totals.h"

namespace gpuacct {

const char* to_string(InputFormat format) {
  switch (format) {
    case InputFormat::kRecording:
      return "recording";
    case InputFormat::kKinetoTrace:
      return "kineto";
  }
  return "kineto";
}

int default_warmup_steps(InputFormat format) {
  return format == InputFormat::kRecording ? AccountingConfig::kWarmupStepsWholeRun
                                           : AccountingConfig::kWarmupStepsProfilerTrace;
}

namespace {

InputFormat format_of_bytes(std::string_view bytes) {
  const bool magic = bytes.size() >= sizeof kRecordingMagic &&
                     std::memcmp(bytes.data(), kRecordingMagic, sizeof kRecordingMagic) == 0;
  return magic ? InputFormat::kRecording : InputFormat::kKinetoTrace;
}

}  // namespace

StatusOr<Input> Input::open(const std::string& path) {
  GPUACCT_RETURN_IF_ERROR(check_input_file(path));
  const InputFormat format =
      looks_like_recording(path) ? InputFormat::kRecording : InputFormat::kKinetoTrace;
  return Input(format, path, std::nullopt);
}

Input Input::from_buffer(std::string_view bytes, std::string label,
                         std::optional<InputFormat> format) {
  return Input(format.value_or(format_of_bytes(bytes)), std::move(label), bytes);
}

AccountingConfig Input::resolve(AccountingConfig cfg) const {
  if (cfg.warmup_steps == AccountingConfig::kWarmupBySource) {
    cfg.warmup_steps = default_warmup_steps(format_);
  }
  return cfg;
}

StatusOr<RunMetadata> Input::import(NameTable& names, EventSink& sink, Stats& stats,
                                    const InputOptions& opts, nlohmann::json* sections) const {
  if (format_ == InputFormat::kRecording) {
    auto contents = bytes_ ? read_recording_buffer(*bytes_, path_, names, sink, stats)
                           : read_recording(path_, names, sink, stats);
    if (!contents.ok()) return contents.status();
    RunMetadata meta = std::move(contents->metadata);
    if (meta.source.empty()) meta.source = to_string(format_);
    return meta;
  }
  // One pass feeds the caller and HTA's whole-trace totals.
  TraceTotals totals(names);
  TeeSink tee({&sink, &totals});
  KinetoImportOptions kopts;
  kopts.progress = opts.progress;
  // cuda_sync rows count in HTA's temporal breakdown, GPU-side ProfilerSteps in its last-step
  // rule; neither is GPU work or a step for the accounting.
  totals.attach(&kopts);
  auto imported = bytes_ ? import_kineto_buffer(*bytes_, names, tee, stats, kopts)
                         : import_kineto_trace(path_, names, tee, stats, kopts);
  if (!imported.ok()) return imported.status();
  RunMetadata meta = std::move(imported.value());
  meta.source = to_string(format_);
  totals.set_rank(meta.rank);
  (*sections)["hta_totals"] = totals.to_json();
  return meta;
}

StatusOr<InputContents> Input::read(NameTable& names, EventSink& sink, Stats& stats,
                                    const InputOptions& opts) const {
  InputContents out;
  // Inputs that mark no steps (on-demand profiler traces have no ProfilerStep#N, a run without
  // markers) get them from the repeating kernel sequence, as a live run does.
  OfflineStepDetection detection(names.intern(kDetectedStepName));
  // A recording is the live library's view, which began with the process: its steps are
  // detected as they were live.  A profiler trace began when the profiler was switched on.
  detection.set_capture_began_at_first_event(format_ != InputFormat::kRecording);
  TeeSink tee({&sink, &detection});
  auto meta = import(names, tee, stats, opts, &out.sections);
  if (!meta.ok()) return meta.status();
  out.metadata = std::move(meta.value());
  out.metadata.source_path = path_;
  if (!detection.input_marks_steps()) {
    detection.detect_into(sink, stats);
    add_step_detection_section(detection.summary(), names, &out.sections);
  } else if (!out.metadata.step_detection.empty()) {
    // A live run's recording: its steps are the ranges the library detected, recorded with
    // the section that describes them.
    // A checksum proves the bytes, not their types: every field read here is checked, and a
    // wrong one is a named error (analysis/ never throws).
    auto section = nlohmann::json::parse(out.metadata.step_detection, nullptr,
                                         /*allow_exceptions=*/false);
    if (!section.is_object()) {
      return Status::Error(path_ + ": metadata field 'step_detection' is not an object");
    }
    // Live detection counted a step the capture cut off (StepDetection::poll_into); that count
    // is the accountant's kind, not carried by the recording: count it here, as live did.
    auto trailing = section.find("trailing_partial_step_dropped");
    if (trailing != section.end() && trailing->is_null()) trailing = section.end();  // absent
    if (trailing != section.end() && !trailing->is_boolean()) {
      return Status::Error(path_ +
                           ": metadata field 'step_detection.trailing_partial_step_dropped' is "
                           "not a boolean");
    }
    if (trailing != section.end() && trailing->get<bool>()) {
      stats.add(Stat::incomplete_trailing_step);
    }
    out.sections["step_detection"] = std::move(section);
  }
  return out;
}

AccountingObservers timeline_observers(TimelineWriter& timeline) {
  AccountingObservers observers;
  observers.events = &timeline;
  observers.on_row = [&timeline](const StepRow& r) { timeline.on_step_row(r); };
  observers.on_segment = [&timeline](const CategorySegment& s) { timeline.on_segment(s); };
  return observers;
}

StatusOr<AccountedInput> account_input(const Input& input, const AccountingConfig& cfg,
                                       NameTable& names, const InputOptions& opts,
                                       const AccountingObservers& observers) {
  AccountedInput out;
  out.accountant = std::make_unique<StepAccountant>(input.resolve(cfg));
  StepAccountant& acc = *out.accountant;
  if (observers.on_row) acc.set_row_sink(observers.on_row);
  if (observers.on_segment) acc.set_segment_sink(observers.on_segment);
  std::vector<EventSink*> sinks = {&acc};
  if (observers.events != nullptr) sinks.push_back(observers.events);
  TeeSink tee(std::move(sinks));
  auto contents = input.read(names, tee, acc.mutable_stats(), opts);
  if (!contents.ok()) return contents.status();
  out.contents = std::move(contents.value());
  acc.finish();
  return out;
}

}  // namespace gpuacct
