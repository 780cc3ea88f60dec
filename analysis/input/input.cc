#include "analysis/input/input.h"

#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "analysis/accounting/step_detection.h"
#include "analysis/import/kineto_importer.h"
#include "analysis/import/recording.h"
#include "analysis/input/input_collectives.h"
#include "analysis/input/live_writer.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "analysis/model/ordered_parallel.h"
#include "analysis/model/threaded_sink.h"
#include "analysis/report/report.h"
#include "analysis/report/trace_totals.h"

namespace gpuacct {

const char* to_string(InputFormat format) {
  switch (format) {
    case InputFormat::kRecording:
      return "recording";
    case InputFormat::kKinetoTrace:
      return "kineto";
    case InputFormat::kStepStream:
      return "step_stream";
    case InputFormat::kReport:
      return "report";
  }
  return "kineto";
}

int default_warmup_steps(InputFormat format) {
  return format == InputFormat::kKinetoTrace ? AccountingConfig::kWarmupStepsProfilerTrace
                                             : AccountingConfig::kWarmupStepsWholeRun;
}

namespace {

// Whether reading may use a second thread (InputOptions::accounting_thread, and more than one
// CPU to run it on).
bool second_thread(const InputOptions& opts) {
  return opts.accounting_thread && usable_cpus() != 1;
}

// A JSON value made on a thread of its own while the caller goes on (when `own_thread` and a
// thread can be had; else by get(), on the caller's thread).  get() returns it, rethrowing what
// making it threw; the destructor waits for the thread.
class JsonBeside {
 public:
  JsonBeside(std::function<nlohmann::json()> make, bool own_thread) : make_(std::move(make)) {
    if (!own_thread) return;
    try {
      thread_ = std::thread([this] { run(); });
    } catch (const std::system_error&) {
      // No thread: get() makes it (the same value).
    }
  }
  ~JsonBeside() {
    if (thread_.joinable()) thread_.join();
  }
  JsonBeside(const JsonBeside&) = delete;
  JsonBeside& operator=(const JsonBeside&) = delete;

  nlohmann::json get() {
    if (thread_.joinable()) {
      thread_.join();
    } else if (!ran_) {
      run();
    }
    if (failure_) std::rethrow_exception(failure_);
    return std::move(value_);
  }

 private:
  void run() {
    ran_ = true;
    try {
      value_ = make_();
    } catch (...) {
      failure_ = std::current_exception();
    }
  }
  std::function<nlohmann::json()> make_;
  std::thread thread_;
  bool ran_ = false;
  nlohmann::json value_;
  std::exception_ptr failure_;
};

// Every AccountingConfig field a run's recording carries, by name (the report's "config" keys).
struct SettingField {
  const char* name;
  int64_t AccountingConfig::*wide;  // one of the two is set
  int AccountingConfig::*narrow;
};
constexpr SettingField kSettingFields[] = {
    {kSettingLaunchLatency, &AccountingConfig::launch_latency_threshold_ns, nullptr},
    {kSettingHostPause, &AccountingConfig::host_pause_threshold_ns, nullptr},
    {"step_touch_tolerance_ns", &AccountingConfig::step_touch_tolerance_ns, nullptr},
    {kSettingWarmupSteps, nullptr, &AccountingConfig::warmup_steps},
    {"pending_launch_timeout_ns", &AccountingConfig::pending_launch_timeout_ns, nullptr},
    {"pending_event_limit", &AccountingConfig::pending_event_limit, nullptr},
    {"top_gaps", nullptr, &AccountingConfig::top_gaps},
    {"top_kernels", nullptr, &AccountingConfig::top_kernels},
};

int64_t get_setting(const AccountingConfig& cfg, const SettingField& f) {
  return f.wide != nullptr ? cfg.*f.wide : cfg.*f.narrow;
}

// False (cfg unchanged) for a value the field cannot hold; every setting is non-negative.
bool set_setting(AccountingConfig& cfg, const SettingField& f, int64_t value) {
  if (value < 0) return false;
  if (f.wide != nullptr) {
    cfg.*f.wide = value;
    return true;
  }
  if (value > std::numeric_limits<int>::max()) return false;
  cfg.*f.narrow = static_cast<int>(value);
  return true;
}

// A step stream's header line is short (host, pid, rank); what does not fit is no header.
constexpr size_t kHeaderLineMax = 64 << 10;

// A report's top-level "schema" follows its config, data-loss, gaps, kernels (both lists cut
// to their top entries) and run sections, and precedes its steps: within the first MiB.
constexpr size_t kReportHeadMax = 1 << 20;

bool looks_like_report(std::string_view head) {
  head = head.substr(0, kReportHeadMax);
  if (head.empty() || head.front() != '{') return false;
  const std::string indented = std::string("\"schema\": \"") + kReportSchema + "\"";
  const std::string compact = std::string("\"schema\":\"") + kReportSchema + "\"";
  return head.find(indented) != std::string_view::npos ||
         head.find(compact) != std::string_view::npos;
}

bool file_is_report(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(kReportHeadMax, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return looks_like_report(head);
}

InputFormat format_of_bytes(std::string_view bytes) {
  const bool magic = bytes.size() >= sizeof kRecordingMagic &&
                     std::memcmp(bytes.data(), kRecordingMagic, sizeof kRecordingMagic) == 0;
  if (magic) return InputFormat::kRecording;
  if (looks_like_step_stream(bytes.substr(0, kHeaderLineMax))) return InputFormat::kStepStream;
  if (looks_like_report(bytes)) return InputFormat::kReport;
  return InputFormat::kKinetoTrace;
}

bool file_is_step_stream(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(kHeaderLineMax, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return looks_like_step_stream(head);
}

// What a cut recording lost, for the report and for stderr.
void describe_cut(const RecordingContents& c, const std::string& path, InputContents* out) {
  nlohmann::json section = {{"input", "recording"},
                            {"chunks_read", c.chunks},
                            {"cut_at_byte", c.cut_at_byte},
                            {"bytes_cut", c.bytes_cut},
                            {"last_watermark_ns", nullptr}};
  std::string line = path + ": the recording was not finished (its writer was killed?): read " +
                     std::to_string(c.chunks) + " whole chunks up to byte " +
                     std::to_string(c.cut_at_byte) + ", " + std::to_string(c.bytes_cut) +
                     " bytes cut off after them; ";
  if (c.last_watermark) {
    section["last_watermark_ns"] = *c.last_watermark;
    line += "steps finalised by the last watermark (" + std::to_string(*c.last_watermark) +
            " ns) are accounted, later ones are left out";
  } else {
    line += "it holds no watermark, so no step is known to be finished";
  }
  out->sections["cut_off"] = section;
  out->cut_off = line;
}

}  // namespace

StatusOr<Input> Input::open(const std::string& path) {
  GPUACCT_RETURN_IF_ERROR(check_input_file(path));
  InputFormat format = InputFormat::kKinetoTrace;
  if (looks_like_recording(path)) {
    format = InputFormat::kRecording;
  } else if (file_is_step_stream(path)) {
    format = InputFormat::kStepStream;
  } else if (file_is_report(path)) {
    format = InputFormat::kReport;
  }
  return Input(format, path, std::nullopt);
}

Input Input::from_buffer(std::string_view bytes, std::string label,
                         std::optional<InputFormat> format) {
  return Input(format.value_or(format_of_bytes(bytes)), std::move(label), bytes);
}

std::vector<std::pair<std::string, int64_t>> accounting_settings(const AccountingConfig& cfg) {
  std::vector<std::pair<std::string, int64_t>> out;
  for (const SettingField& f : kSettingFields) out.emplace_back(f.name, get_setting(cfg, f));
  return out;
}

ResolvedConfig Input::resolve(AccountingConfig cfg, const std::set<std::string>& given) const {
  ResolvedConfig out;
  const bool warmup_given = cfg.warmup_steps != AccountingConfig::kWarmupBySource;
  if (!warmup_given) cfg.warmup_steps = default_warmup_steps(format_);
  std::vector<std::pair<std::string, int64_t>> run;  // the run's own settings, if it has them
  if (format_ == InputFormat::kRecording) {
    // Metadata that cannot be read here cannot be read by read() either, which names the error.
    auto meta = read_recording_metadata(path_, bytes_);
    if (meta.ok()) run = std::move(meta->accounting);
  }
  nlohmann::json differ = nlohmann::json::object();
  std::string listed;
  for (const auto& [name, value] : run) {
    const SettingField* f = nullptr;
    for (const SettingField& field : kSettingFields) {
      if (name == field.name) f = &field;
    }
    if (f == nullptr) continue;  // a newer writer's setting
    const bool user_gave = given.count(name) > 0 || (name == kSettingWarmupSteps && warmup_given);
    if (!user_gave) {
      set_setting(cfg, *f, value);
      continue;
    }
    if (get_setting(cfg, *f) == value) continue;
    differ[name] = {{"given", get_setting(cfg, *f)}, {"run", value}};
    listed += (listed.empty() ? "" : ", ") + name + " " + std::to_string(get_setting(cfg, *f)) +
              " (the run's: " + std::to_string(value) + ")";
  }
  out.cfg = cfg;
  if (!listed.empty()) {
    out.note = path_ + ": accounted with settings given that differ from the run's own: " + listed +
               "; the rows differ from the run's live report";
    out.section = {{"given_differ_from_run", differ}};
  }
  return out;
}

StatusOr<RunMetadata> Input::import(NameTable& names, EventSink& sink, Stats& stats,
                                    const InputOptions& opts, InputCollectives* collectives,
                                    TraceTotals& totals, InputContents* out) const {
  if (format_ == InputFormat::kStepStream) {
    return Status::Error(path_ +
                         ": a step stream holds accounted step rows, not the events this needs "
                         "(`gpuacct report` and `gpuacct analyze` summarise it; for a timeline "
                         "record the run with GPUACCT_RECORD=1)");
  }
  if (format_ == InputFormat::kReport) {
    return Status::Error(path_ +
                         ": a gpuacct report holds accounted step rows, not the events this "
                         "needs (analyse the run's recording or trace instead)");
  }
  // The accounting (`sink`) runs on its own thread while this one reads (ThreadedSink); what
  // the reader feeds itself stays on this thread.  The reader counts into its own Stats: the
  // accountant's are written on the other thread, and the counts are merged once it is done.
  const bool threaded = second_thread(opts);
  Stats reader_stats;
  Stats& counts = threaded ? reader_stats : stats;
  // A recording's sinks behind the worker.  Declared before it: on every way out, an exception
  // from the reader included, the worker (whose destructor delivers what is queued) goes first.
  std::optional<TeeSink> accounted;
  std::optional<ThreadedSink> worker;
  auto done = [&] {  // every event delivered, then the counts: before anything reads them
    if (!worker) return;
    worker->finish();
    stats.merge(reader_stats);
  };
  if (format_ == InputFormat::kRecording) {
    // A recording's collectives are numbered by kernel order as events come, and handed to
    // the step assigner that the accountant's rows also feed: one thread for both.
    accounted.emplace(collectives ? std::vector<EventSink*>{&sink, collectives->events()}
                                  : std::vector<EventSink*>{&sink});
    if (threaded) worker.emplace(*accounted);
    EventSink& target = worker ? static_cast<EventSink&>(*worker) : *accounted;
    auto contents = bytes_ ? read_recording_buffer(*bytes_, path_, names, target, counts)
                           : read_recording(path_, names, target, counts);
    done();
    if (!contents.ok()) return contents.status();
    if (contents->cut) describe_cut(contents.value(), path_, out);
    RunMetadata meta = std::move(contents->metadata);
    if (meta.source.empty()) meta.source = to_string(format_);
    return meta;
  }
  // One pass feeds the caller and HTA's whole-trace totals.  The totals and the trace's
  // collectives (which the importer also feeds directly, and which emit only at finish) stay
  // on the reading thread.
  if (threaded) worker.emplace(sink);
  std::vector<EventSink*> sinks = {worker ? static_cast<EventSink*>(&*worker) : &sink, &totals};
  if (collectives) sinks.push_back(collectives->events());
  TeeSink tee(std::move(sinks));
  KinetoImportOptions kopts;
  kopts.progress = opts.progress;
  kopts.collectives = collectives ? collectives->kineto() : nullptr;
  // cuda_sync rows count in HTA's temporal breakdown, GPU-side ProfilerSteps in its last-step
  // rule; neither is GPU work or a step for the accounting.
  totals.attach(&kopts);
  auto imported = bytes_ ? import_kineto_buffer(*bytes_, names, tee, counts, kopts)
                         : import_kineto_trace(path_, names, tee, counts, kopts);
  if (!imported.ok()) {
    done();
    return imported.status();
  }
  RunMetadata meta = std::move(imported.value());
  meta.source = to_string(format_);
  totals.set_rank(meta.rank);  // computed by read(), beside the accounting's end
  done();
  return meta;
}

namespace {

// A recording made by an older library holds the step ranges that library's detector found,
// named kDetectedStepName but without the kDetectedStep flag (events.h).  Those detectors locked
// onto set-up patterns (issue 27: 343 "steps" for a 25-iteration loop, each a parameter copy
// and its sync), so such ranges are dropped here and the steps detected anew -- or, where the
// program also marked steps, left to the marks.  Everything else passes through.
class OlderDetectionFilter final : public EventSink {
 public:
  OlderDetectionFilter(EventSink& next, NameId detected_name)
      : next_(next), detected_name_(detected_name) {}
  void on_gpu_op(const GpuOp& op) override { next_.on_gpu_op(op); }
  void on_api_call(const HostApiCall& call) override { next_.on_api_call(call); }
  void on_range(const HostRange& range) override {
    if (range.kind == RangeKind::kStep && range.name == detected_name_ &&
        !step_detected(range)) {
      ++dropped_;
      return;
    }
    next_.on_range(range);
  }
  void on_marker(const Marker& marker) override { next_.on_marker(marker); }
  void on_watermark(TimeNs watermark) override { next_.on_watermark(watermark); }
  void on_counter_sample(const CounterSample& sample) override {
    next_.on_counter_sample(sample);
  }
  int64_t dropped() const { return dropped_; }

 private:
  EventSink& next_;
  NameId detected_name_;
  int64_t dropped_ = 0;
};

}  // namespace

StatusOr<InputContents> Input::read(NameTable& names, EventSink& sink, Stats& stats,
                                    const InputOptions& opts) const {
  InputContents out;
  // Inputs that mark no steps (on-demand profiler traces have no ProfilerStep#N, a run without
  // markers) get them from the repeating kernel sequence, as a live run does.
  const NameId detected_name = names.intern(kDetectedStepName);
  OfflineStepDetection detection(detected_name, &names);
  // A recording is the live library's view, which began with the process: its steps are
  // detected as they were live.  A profiler trace began when the profiler was switched on.
  detection.set_capture_began_at_first_event(format_ != InputFormat::kRecording);
  std::unique_ptr<InputCollectives> collectives;
  if (opts.on_collective && format_ != InputFormat::kStepStream) {
    collectives = std::make_unique<InputCollectives>(format_ == InputFormat::kKinetoTrace,
                                                     opts.on_collective);
  }
  TeeSink tee({&sink, &detection});
  OlderDetectionFilter older(tee, detected_name);
  TraceTotals totals(names);  // a trace's (HTA's whole-trace numbers); fed by import()
  auto meta = import(names, older, stats, opts, collectives.get(), totals, &out);
  if (!meta.ok()) return meta.status();
  // HTA's totals are computed beside what is left on this thread: the collectives, the step
  // detection and the accounting's own end (InputOptions::finish_accounting).  Only `totals`
  // is touched there, and nothing here touches it any more.
  std::optional<JsonBeside> hta;
  if (format_ == InputFormat::kKinetoTrace) {
    hta.emplace([&totals] { return totals.to_json(); }, second_thread(opts));
  }
  out.metadata = std::move(meta.value());
  if (collectives) {
    const CollectiveIdentity identity = collectives->finish(out.metadata.rank);
    if (const int64_t over = collectives->over_limit(); over > 0) {
      stats.add(Stat::trace_collectives_over_limit, over);
    }
    out.collective_identity = identity.source;
    out.collective_identity_note = identity.note;
    out.collectives = identity.records;
  }
  out.metadata.source_path = path_;
  // A cut recording's live run recorded the steps it detected; what detection would find here
  // could only end after the last watermark, which no step of a cut input does.
  if (!detection.input_marks_steps() && out.cut_off.empty()) {
    detection.detect_into(sink, stats);
    add_step_detection_section(detection.summary(), names, &out.sections);
    if (older.dropped() > 0) {
      out.sections["step_detection"]["redetected"] = {
          {"recorded_steps_dropped", older.dropped()},
          {"why", "the recording's steps were detected by an older gpuacct"}};
    }
  } else if (older.dropped() > 0) {
    // An older library's detected steps before the program's own marks: the marks decide.
  } else if (!out.metadata.step_detection.empty()) {
    // A live run's recording: its steps are the ranges the library detected, recorded with
    // the section that describes them.
    // A checksum proves the bytes, not their types: every field read here is checked, and a
    // wrong one is a named error (analysis/ never throws).
    auto section = parse_json(out.metadata.step_detection);
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
  if (opts.finish_accounting && out.cut_off.empty()) opts.finish_accounting();
  if (hta) out.sections["hta_totals"] = hta->get();
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
  ResolvedConfig resolved = input.resolve(cfg, opts.given_settings);
  out.accountant = std::make_unique<StepAccountant>(resolved.cfg);
  StepAccountant& acc = *out.accountant;
  // Collectives get their steps from the rows as the accountant finalises them.
  std::unique_ptr<CollectiveStepAssigner> steps;
  InputOptions read_opts = opts;
  if (observers.on_collective) {
    CollectiveStepAssignerOptions limits;
    limits.held_record_limit = size_t{1} << 22;  // a trace's records all come before its rows
    limits.kept_step_limit = size_t{1} << 22;
    steps = std::make_unique<CollectiveStepAssigner>(observers.on_collective, limits);
    read_opts.on_collective = [&steps](const CollectiveRecord& r) { steps->add(r); };
    acc.set_row_sink([&steps, &observers](const StepRow& r) {
      if (observers.on_row) observers.on_row(r);
      steps->add_row(r);
    });
  } else if (observers.on_row) {
    acc.set_row_sink(observers.on_row);
  }
  if (observers.on_segment) acc.set_segment_sink(observers.on_segment);
  std::vector<EventSink*> sinks = {&acc};
  if (observers.events != nullptr) sinks.push_back(observers.events);
  TeeSink tee(std::move(sinks));
  // read() finishes the accountant when the input is complete (not cut off by its writer's
  // death: the steps still open there were not finished, and finish() would invent their
  // ends), while a trace's HTA totals are computed beside it.
  read_opts.finish_accounting = [&acc] { acc.finish(); };
  auto contents = input.read(names, tee, acc.mutable_stats(), read_opts);
  if (!contents.ok()) return contents.status();
  out.contents = std::move(contents.value());
  if (!resolved.note.empty()) {
    out.contents.settings_note = std::move(resolved.note);
    out.contents.sections["accounting_settings"] = std::move(resolved.section);
  }
  if (steps) {
    steps->finish();
    out.contents.collective_steps = steps->counts();
    // The accountant outlives this call; the assigner does not.
    acc.set_row_sink(observers.on_row ? observers.on_row : [](const StepRow&) {});
  }
  return out;
}

StatusOr<StepStreamContents> Input::read_step_rows() const {
  if (format_ != InputFormat::kStepStream) {
    return Status::Error(path_ + ": not a step stream (" + to_string(format_) + ")");
  }
  if (!bytes_) return read_step_stream_file(path_);
  std::istringstream in{std::string(*bytes_)};
  return read_step_stream(in, path_);
}

namespace {

// A step stream's rows through the one summary, the rows themselves as the report's steps.
StatusOr<InputReport> report_step_stream(const Input& input, const AccountingConfig& cfg,
                                         const CostModel& cost) {
  auto stream = input.read_step_rows();
  if (!stream.ok()) return stream.status();
  StepStreamContents& s = stream.value();
  InputReport out;
  out.rows = std::move(s.rows);
  AccountingConfig shown = cfg;
  if (cfg.warmup_steps == AccountingConfig::kWarmupBySource) {
    // The live run's choice, which the rows carry: the config says how many steps it was.
    std::set<int64_t> warm;
    for (const StepRow& r : out.rows) {
      if (r.warmup) warm.insert(r.step_index);
    }
    shown.warmup_steps = static_cast<int>(warm.size());
  } else if (!out.rows.empty()) {
    // Counted from the stream's first step (rows folded into set-up are gone).
    int64_t first = out.rows.front().step_index;
    for (const StepRow& r : out.rows) first = std::min(first, r.step_index);
    for (StepRow& r : out.rows) r.warmup = r.step_index - first < cfg.warmup_steps;
  }
  RunMetadata meta = std::move(s.metadata);
  if (meta.source.empty()) meta.source = to_string(input.format());
  meta.source_path = input.path();
  ReportParts parts;
  parts.cost = cost;
  if (s.setup.is_object()) parts.sections["setup"] = s.setup;
  // A stream without its closing line whose writer still holds it open: a job in progress, its
  // rows so far -- not a cut, not a loss.
  const bool running = !s.finished && file_held_by_live_writer(input.path(), meta);
  if (running) {
    s.stats.set(Stat::inputs_cut_off, 0);
    parts.sections["in_progress"] = {{"input", "step_stream"},
                                     {"pid", meta.pid},
                                     {"rows", out.rows.size()},
                                     {"summary_lines", s.summary_lines}};
    out.cut_off = input.path() + ": still being written (pid " + std::to_string(meta.pid) +
                  " holds it open): " + std::to_string(out.rows.size()) +
                  " step rows so far; counters as of its last summary line";
  } else if (!s.finished || s.bytes_cut > 0) {
    parts.sections["cut_off"] = {{"input", "step_stream"},
                             {"finished", s.finished},
                             {"rows", out.rows.size()},
                             {"summary_lines", s.summary_lines},
                             {"rows_in_last_summary", s.rows_in_last_summary},
                             {"bytes_cut", s.bytes_cut}};
    out.cut_off =
        input.path() + ": " +
        (s.finished ? std::string("the stream's last line was cut before its newline")
                    : "the stream has no closing summary line (its writer was "
                      "killed?)") +
        ": " + std::to_string(out.rows.size()) + " whole step rows summarised" +
        (s.bytes_cut > 0 ? ", a cut last line of " + std::to_string(s.bytes_cut) + " bytes left out"
                         : std::string()) +
        (s.finished ? "" : "; counters as of its last summary line");
  }
  out.report = build_rows_report(out.rows, s.stats, shown, meta, parts);
  return out;
}

// A report as it was written; its rows from its steps.
StatusOr<InputReport> report_saved_report(const Input& input, const AccountingConfig& cfg) {
  std::string text;
  if (input.from_memory() != nullptr) {
    text = std::string(*input.from_memory());
  } else {
    std::ifstream in(input.path(), std::ios::binary);
    std::ostringstream all;
    all << in.rdbuf();
    if (!in.good() && !in.eof()) return Status::Error(input.path() + ": cannot be read");
    text = all.str();
  }
  InputReport out;
  out.report = parse_json(text);
  if (!out.report.is_object()) {
    return Status::Error(input.path() +
                         ": a gpuacct report that does not parse (cut off while it was "
                         "written or copied?)");
  }
  const auto steps = out.report.find("steps");
  if (steps == out.report.end() || !steps->is_array()) {
    return Status::Error(input.path() + ": a gpuacct report without its \"steps\" array");
  }
  size_t n = 0;
  for (const nlohmann::json& j : *steps) {
    auto row = step_row_from_json(j);
    if (!row.ok()) {
      return Status::Error(input.path() + ": steps[" + std::to_string(n) +
                           "]: " + row.status().message());
    }
    if (cfg.warmup_steps != AccountingConfig::kWarmupBySource) {
      row->warmup = row->step_index < cfg.warmup_steps;
    }
    out.rows.push_back(row.value());
    ++n;
  }
  return out;
}

}  // namespace

StatusOr<InputReport> report_input(const Input& input, const AccountingConfig& cfg,
                                   NameTable& names, const InputOptions& opts,
                                   const AccountingObservers& observers) {
  if (input.format() == InputFormat::kStepStream) return report_step_stream(input, cfg, opts.cost);
  if (input.format() == InputFormat::kReport) return report_saved_report(input, cfg);
  auto accounted = account_input(input, cfg, names, opts, observers);
  if (!accounted.ok()) return accounted.status();
  const StepAccountant& acc = *accounted->accountant;
  InputReport out;
  out.report = build_report(acc, accounted->contents.metadata, names,
                            ReportParts{accounted->contents.sections, opts.cost});
  out.rows = acc.rows();
  out.cut_off = std::move(accounted->contents.cut_off);
  out.settings_note = std::move(accounted->contents.settings_note);
  out.collectives_header.metadata = accounted->contents.metadata;
  out.collectives_header.identity = accounted->contents.collective_identity;
  out.collectives_header.identity_note = accounted->contents.collective_identity_note;
  out.collectives = accounted->contents.collectives;
  return out;
}

}  // namespace gpuacct
