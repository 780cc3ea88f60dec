// The front door: every input the tools analyse enters here, whatever its source.
//
//   Input::open(path)          checks the path (check_input_file) and recognises the format by
//                              content: the recording magic, a live run's step stream (first
//                              line: schema gpuacct.steps/1), a gpuacct report (its top-level
//                              "schema": "gpuacct.report/1" within its first MiB: the rows and
//                              run sections precede the steps), else a PyTorch-profiler
//                              (Kineto) trace (plain or gzip JSON);
//   input.resolve(cfg, given)  the accounting settings: a setting the caller gave wins; else the
//                              run's own, when the input carries them (a live run's recording:
//                              RunMetadata::accounting), else the default -- for the warm-up,
//                              this source's default, decided here only;
//   input.read(names, sink..)  imports every event into `sink`; when the input marks no steps,
//                              detects them (StepDetection) and hands the step ranges to `sink`
//                              the way every source does (EventSink::on_range), then returns the
//                              run metadata and the extra report sections ("hta_totals" for
//                              Kineto traces, "step_detection" when steps were detected);
//   account_input(input, ...)  all of it into a finished StepAccountant: what `gpuacct analyze`,
//                              `gpuacct timeline`, the fuzzers and the benchmarks run, so the
//                              same input gives the same steps and rows everywhere;
//   report_input(input, ...)   the report and rows of any input: account_input and build_report
//                              for events, or a step stream's rows summarised, or a report as
//                              it was written (step streams and reports hold accounted rows,
//                              not events: read() refuses them).
//
// Inputs whose writer was killed (a SIGKILLed job's recording, its step stream without the
// closing line) are read up to their last whole chunk or line; InputContents::cut_off says what
// was lost, the report's "cut_off" section has the numbers (docs/report_schema.md), and
// Stat::inputs_cut_off counts it.  Steps not finished before the kill are not invented: a cut
// recording's accountant is not finish()ed, so only the rows its last watermark finalised --
// the ones the live run had finalised -- come out.
//
// Layering: input/ sits above import/ (the readers), accounting/ (step detection, the
// accountant) and report/ (HTA totals, the step_detection section); nothing below includes it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/accounting_config.h"
#include "analysis/accounting/step_accountant.h"
#include "analysis/input/step_stream_reader.h"
#include "analysis/accounting/collective_steps.h"
#include "analysis/model/collective.h"
#include "analysis/model/collective_rows.h"
#include "analysis/model/event_sink.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "analysis/model/stats.h"
#include "analysis/model/status.h"
#include "analysis/report/cost.h"
#include "analysis/report/timeline_writer.h"

namespace gpuacct {

class InputCollectives;
class TraceTotals;

enum class InputFormat : uint8_t {
  kRecording,    // a gpuacct recording (*.gpuacct): the live library's or `gpuacct synth`'s
  kKinetoTrace,  // a PyTorch-profiler / Chrome trace (*.json, *.json.gz)
  kStepStream,   // a live run's step rows (<base>.steps.jsonl, inject/output/step_stream.h)
  kReport,       // a gpuacct report (<base>.report.json: its schema, gpuacct.report/1)
};
const char* to_string(InputFormat format);

// Steps left out as warm-up when the user gives none (AccountingConfig::kWarmupBySource).  A
// recording holds a whole run, whose first steps compile, autotune and allocate; a profiler
// trace is a steady-state capture (the profiler's own warm-up steps are not in it).  A step
// stream's rows carry the warm-up flags the live run gave them (report_input).
int default_warmup_steps(InputFormat format);

// The accounting settings a run carries (RunMetadata::accounting): every AccountingConfig field
// by the name the report's "config" section gives it, in the field's unit (ns, steps, events).
// The one table of names (input.cc); a name a newer writer added is ignored by older readers.
std::vector<std::pair<std::string, int64_t>> accounting_settings(const AccountingConfig& cfg);
// The names of the settings `gpuacct analyze` / `timeline` have flags for.
inline constexpr const char* kSettingWarmupSteps = "warmup_steps";
inline constexpr const char* kSettingLaunchLatency = "launch_latency_threshold_ns";
inline constexpr const char* kSettingHostPause = "host_pause_threshold_ns";

struct InputOptions {
  bool progress = false;  // the importer's progress line on stderr (only when it is a terminal)
  // The settings (accounting_settings names) the caller chose itself (the CLI: a flag given):
  // they win over the run's own.  The warm-up also counts as given when cfg.warmup_steps is not
  // AccountingConfig::kWarmupBySource.
  std::set<std::string> given_settings;
  // Optional: receives every collective instance the input identifies (analysis/model/
  // collective.h), step_index -1, during read(): a trace's from its collective args, its
  // collective kernels without args and a recording's by kernel order
  // (analysis/input/input_collectives.h).  InputContents::collective_identity says how.
  std::function<void(const CollectiveRecord&)> on_collective;
  // The events are accounted on a thread of their own while the importer reads on (analysis/
  // model/threaded_sink.h): the same calls in the same order, so the same output, in less
  // time.  Off: one thread (tests compare the two).  Also one thread where the process may use
  // one CPU only (usable_cpus, analysis/model/ordered_parallel.h).
  bool accounting_thread = true;
  // Optional: the accounting's own end (account_input: the accountant's finish()), which read()
  // runs on its caller's thread once every event of a complete input has reached the sink and
  // the input's own step detection and collectives are done -- while a second thread computes
  // a trace's HTA totals.  Not run for an input cut off by its writer's death (finishing would
  // invent the ends of the steps still open) nor when read() fails.
  std::function<void()> finish_accounting;
  // report_input: the price of a GPU-hour (the report's "cost" section; none by default).
  CostModel cost;
};

// The config an input is accounted with (Input::resolve).
struct ResolvedConfig {
  AccountingConfig cfg;
  // Not empty when a setting the caller gave differs from the one the run itself used: one line
  // for stderr (the rows then differ from the live report's), and the report's
  // "accounting_settings" section says the same (docs/report_schema.md).
  std::string note;
  nlohmann::json section;  // null unless `note` is set
};

struct InputContents {
  RunMetadata metadata;  // source and source_path always set
  // Extra top-level report sections (build_report's `extra`): "hta_totals" for Kineto traces,
  // "step_detection" when the input marked no steps, "cut_off" when its writer was killed,
  // "in_progress" when a step stream's writer is still running.
  nlohmann::json sections = nlohmann::json::object();
  // Not empty when the input was cut off by its writer's death: one line for stderr that says
  // what was read and what was lost.  A step stream its live writer still holds open (a job in
  // progress, analysis/input/live_writer.h) gets one too, saying so; nothing is counted lost.
  std::string cut_off;
  // ResolvedConfig::note (account_input): a given setting differs from the run's own.
  std::string settings_note;
  // When InputOptions::on_collective was given: how the collectives were identified (kNone:
  // the input has none), why when by a fallback, and how many (the rows file's header).
  CollectiveSource collective_identity = CollectiveSource::kNone;
  std::string collective_identity_note;
  int64_t collectives = 0;
  // account_input with AccountingObservers::on_collective: how the steps were assigned.
  CollectiveStepCounts collective_steps;
};

class Input {
 public:
  // Ok for a readable regular file; the format is recognised by content.
  static StatusOr<Input> open(const std::string& path);
  // Bytes in memory (fuzzers, tests).  `label` stands for the path in messages; the format is
  // recognised by content unless given.  `bytes` must outlive the Input.
  static Input from_buffer(std::string_view bytes, std::string label,
                           std::optional<InputFormat> format = std::nullopt);

  InputFormat format() const { return format_; }
  const std::string& path() const { return path_; }
  // The bytes of a from_buffer() input; null for a file.
  const std::string_view* from_memory() const { return bytes_ ? &*bytes_ : nullptr; }

  // The config to account this input with: every setting in `given` (and the warm-up unless it
  // is AccountingConfig::kWarmupBySource) as in `cfg`; the others the run's own when the input
  // carries them (a live run's recording; its metadata is read first, the events skipped), else
  // `cfg`'s, and a warm-up by source this source's default_warmup_steps().  Must be applied
  // before the accountant is made: recordings carry watermarks, so rows are finalised while the
  // input is read.  A recording whose metadata cannot be read keeps `cfg` (read() names the
  // error).
  ResolvedConfig resolve(AccountingConfig cfg, const std::set<std::string>& given = {}) const;

  // Reads the whole input into `sink` (see the file comment).  Counters go to `stats` (the
  // accountant's).  On an error the sink may have seen events: discard them.  A step stream
  // has no events: an error (report_input reads it).  `sink` may be called on another thread
  // (InputOptions::accounting_thread), never after read() returns.
  StatusOr<InputContents> read(NameTable& names, EventSink& sink, Stats& stats,
                               const InputOptions& opts = {}) const;
  // A step stream's rows, header and counters (an error for other formats).
  StatusOr<StepStreamContents> read_step_rows() const;

 private:
  Input(InputFormat format, std::string path, std::optional<std::string_view> bytes)
      : format_(format), path_(std::move(path)), bytes_(bytes) {}
  StatusOr<RunMetadata> import(NameTable& names, EventSink& sink, Stats& stats,
                               const InputOptions& opts, InputCollectives* collectives,
                               TraceTotals& totals, InputContents* out) const;

  InputFormat format_;
  std::string path_;
  std::optional<std::string_view> bytes_;  // set for from_buffer()
};

// What else sees the accounting of an input (a timeline): every event, and the rows and
// category segments the accountant emits.
struct AccountingObservers {
  EventSink* events = nullptr;
  StepAccountant::RowSink on_row;
  StepAccountant::SegmentSink on_segment;
  // Every collective instance of the input (InputOptions::on_collective) with its step
  // (CollectiveStepAssigner, analysis/accounting/collective_steps.h, fed the accountant's rows): as
  // soon as the rows that could hold it are finalised, the rest when the accounting finishes.
  std::function<void(const CollectiveRecord&)> on_collective;
};

// Observers that fill `timeline` with the input's events, step rows and category segments
// (`gpuacct timeline`, the fuzzers).
AccountingObservers timeline_observers(TimelineWriter& timeline);

struct AccountedInput {
  InputContents contents;
  std::unique_ptr<StepAccountant> accountant;  // finished: rows, stats, exposure, gaps
};

// `input` through the accounting: resolve(cfg, opts.given_settings), a StepAccountant, read(),
// finish() -- unless the input was cut off (then only what its watermarks finalised).
StatusOr<AccountedInput> account_input(const Input& input, const AccountingConfig& cfg,
                                       NameTable& names, const InputOptions& opts = {},
                                       const AccountingObservers& observers = {});

struct InputReport {
  nlohmann::json report;      // the gpuacct.report/1 JSON (report/report.h)
  std::vector<StepRow> rows;  // its step rows
  std::string cut_off;        // InputContents::cut_off
  std::string settings_note;  // InputContents::settings_note
  // With AccountingObservers::on_collective: the collectives rows file's header (the run's
  // metadata, how the collectives were identified) and how many were handed out.
  CollectiveRowsHeader collectives_header;
  int64_t collectives = 0;
};

// The report of any input.  Events: account_input, then build_report.  A step stream: all its
// rows through the one summary (report.h summary_report) with the counters of its last summary
// line; the rows keep the warm-up flags the live run gave them unless cfg.warmup_steps is
// given (then the first that many steps are warm-up, as the accountant marks them).  A report:
// itself, its rows from its "steps" array (step_row_from_json); a report that does not parse
// (cut off) or has no valid steps is an error.
// `observers` (optional) see the accounting as in account_input (a step stream and a report
// have no events).
StatusOr<InputReport> report_input(const Input& input, const AccountingConfig& cfg,
                                   NameTable& names, const InputOptions& opts = {},
                                   const AccountingObservers& observers = {});

}  // namespace gpuacct
