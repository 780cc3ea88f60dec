// The live library's one path from collected events to outputs.  A CUPTI record and a host
// record each pass it once:
//
//   Collector (completed buffers) -> ActivityParser --+
//   CounterSampler (GPUACCT_COUNTERS=1, each tick) ---+
//   per-thread host rings -> HostEventProcessor ------+-> batch -> [stand-down check]
//        -> step detector (when nothing marks steps) -> recording (GPUACCT_RECORD=1)
//        -> StepAccountant -> row sink -> step stream (<base>.steps.jsonl)
//   NCCL profiler-plugin queues + the batch -> CollectiveOutput (matched to their kernels,
//        given their steps by the row sink) -> <base>.collectives.csv
//        (inject/output/collective_output.h)
//
// and at the end the report (<base>.report.json: analysis/job/rank_files.h), the stream's
// closing summary line and the terminal summary.  With GPUACCT_PROM_DIR the rows also reach
// the live metrics file, rewritten by tick() every GPUACCT_PROM_PERIOD_MS and once more by
// finish() (inject/output/prom_output.h).
// While the job runs the stream also gets provisional summary lines (below).  The
// pipeline owns every stage; the lifecycle (Runtime, inject/runtime.cc) owns the
// threads, the signals, fork and exit, flushes CUPTI, and computes the watermark
// (inject/recording/watermark.h: it depends on when the worker flushed) which tick() applies.
//
// Provisional summary lines (inject/output/step_stream.h has the format): the same C++ summary and
// verdict the report has (summarize, analysis/report/run_summary.h, laid out by
// report_to_json), over the rows finalised so far, so a reader of a running job's stream
// (gpuacct.load) never computes a verdict of its own.  Cadence: written by tick() at most once
// per kSummaryInterval and only when rows were finalised since the last one; the next one also
// waits at least kSummaryCostFactor times what the last one cost, so however many rows a run
// has the lines take at most 1% of the worker's time.
//
// Threading: not thread-safe.  The worker thread owns the pipeline; at exit the thread that
// joined the worker does (Runtime::Impl::finalize).  Errors: none escape; every failure to
// write is said once (inject/log.h) and counted (analysis/model/stats.h).  At the end each
// output is written on its own: an exception while building one part (a bug, out of memory)
// costs that part only -- the report then holds what could be built (at least the step rows)
// and names the part that failed in "report_errors"; the recording is closed or abandoned
// (never left as a temporary file), the stream gets its summary line.
//
// Text: every string from outside reaches the outputs through analysis/model/json_text.h
// (names interned safe, metadata by run_metadata_to_json, every line by dump_json).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/accounting/step_accountant.h"
#include "analysis/accounting/step_detection.h"
#include "analysis/import/recording.h"
#include "analysis/model/events.h"
#include "analysis/model/name_table.h"
#include "analysis/model/run_metadata.h"
#include "cupti_hooks/activity_parser.h"
#include "inject/config.h"
#include "inject/output/collection.h"
#include "inject/output/collective_output.h"
#include "inject/output/prom_output.h"
#include "inject/output/step_stream.h"
#include "inject/recording/host_events.h"
#include "inject/recording/native_stacks.h"
#include "inject/recording/recorder.h"

namespace gpuacct::inject {

// A summary line (inject/output/step_stream.h) from a report or a summary_report()
// (analysis/report/report.h).
nlohmann::json summary_line(const nlohmann::json& report, int64_t step_rows, bool provisional);

class Pipeline {
 public:
  static constexpr std::chrono::milliseconds kSummaryInterval{1000};
  static constexpr int kSummaryCostFactor = 100;

  explicit Pipeline(const Config& config);
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Takes the completed CUPTI buffers and the drained host rings into the batch; passes the
  // batch on when it is large (a buffer wake-up: the pool must recycle, the batch can wait for
  // the tick).
  void ingest();
  // ingest(), then the whole batch on, the step detector polled, and the accountant's
  // watermark advanced to `watermark` (FlushWatermark::kNone: not yet); a provisional summary
  // line when one is due.
  void tick(int64_t watermark);
  // The end: the final drain (CUPTI must be stopped already), every open step finalised, the
  // recording closed, the report written, the stream's closing summary line, the terminal
  // summary (unless GPUACCT_QUIET).  Call once.
  void finish(const GpuCollectionState& gpu);

  // Events from elsewhere (tests, benchmarks) into the batch, then the same path as ingest().
  void ingest_events(const EventBatch& events);
  // NCCL profiler-plugin records from elsewhere (tests), as if drained from the plugin's queues
  // with the next batch.
  void ingest_plugin_records(const std::vector<PluginRecord>& records);

  const CollectiveOutput& collectives() const { return collectives_; }
  const PromOutput& metrics_file() const { return prom_; }

  // Tests: the provisional summary lines' cadence (defaults kSummaryInterval,
  // kSummaryCostFactor).
  void set_summary_cadence_for_testing(std::chrono::nanoseconds interval, int cost_factor) {
    summary_interval_ = interval;
    summary_cost_factor_ = cost_factor;
  }

  const StepAccountant& accountant() const { return acc_; }

  // Hardware counters: a device's first launch was seen (the worker is woken for it), so
  // sampling starts there now rather than at the next tick (docs/counters.md, "Devices").
  void start_counters();

  // Tests: the part of finish() named `part` ("collection", "step_detection", "report",
  // "summary", "steps", "the run metadata", ...) or every recording write ("recording")
  // throws, as a bug would.
  void add_fault_for_testing(std::string part) { faults_for_testing_.push_back(std::move(part)); }

 private:
  void collect();
  void learn_threads();
  void drain_rings();
  void take_timed_call(const HostRecord& r, uint32_t tid);
  void drop_incomplete_ops();
  void feed();
  void describe_new_devices(std::vector<DeviceInfo>& devices);
  // Hardware counters (GPUACCT_COUNTERS=1), each tick and at the end: sampling started on the
  // devices seen so far, the samples decoded into the batch; the watermark held back until
  // they are decoded.
  void collect_counters();
  std::vector<uint16_t> counter_devices() const;
  void say_counter_refusal(const std::string& line);
  int64_t hold_for_counters(int64_t watermark) const;
  nlohmann::json counters_section(const GpuCollectionState& gpu) const;
  // Live step detection: analysis's StepDetection (the component whole files use) polled up
  // to the watermark; its step ranges reach the accountant through poll_into, as offline.
  bool detecting() const;
  nlohmann::json step_detection_section() const;
  void add_detected_steps(int64_t watermark, bool final);
  void write_row(const StepRow& row);
  void write_setup_line();
  // CUPTI collected, yet no event of any kind came in and nothing was written: finish()
  // writes no output.
  bool nothing_recorded(const GpuCollectionState& gpu) const;
  void maybe_write_summary();
  template <typename Write>
  void record(Write write);
  void finish_recording(const RunMetadata& meta);
  RunMetadata metadata(bool final);
  template <typename Part>
  bool guarded(const char* part, Part run, std::string* error = nullptr);
  static void failed(const std::string& what, std::string* error);
  void fault_point(const char* part) const;  // throws when a test named `part`
  nlohmann::json final_report(const GpuCollectionState& gpu, const RunMetadata& meta);
  CollectionFacts collection_facts(const GpuCollectionState& gpu) const;
  nlohmann::json sampling_section() const;
  void ensure_output_dir();

  Config cfg_;
  std::string base_;
  NameTable names_;
  StepAccountant acc_;
  cupti::ActivityParser parser_;
  HostEventProcessor host_;
  SiteTable sites_;
  EventBatch batch_;

  // NCCL profiler-plugin records (drained with each batch) -> <base>.collectives.csv.
  void drain_plugin();
  std::vector<PluginRecord> plugin_records_;
  uint64_t plugin_dropped_seen_ = 0;
  CollectiveOutput collectives_;

  // Host rings.
  std::vector<TimedRecord> records_;
  std::vector<ThreadState*> threads_;
  std::vector<ThreadIdEvent> thread_events_;
  // Per thread state: the ring's drops and its launch-callback counts already added to the
  // stats (both keep counting while the state is in use: the stats take the differences).
  struct CountsSeen {
    uint64_t dropped = 0;
    uint64_t runtime_launches = 0;
    uint64_t driver_launches = 0;
    uint64_t driver_launches_nested = 0;
  };
  std::unordered_map<ThreadState*, CountsSeen> seen_;

  // Step detection (when nothing marks steps).
  StepDetection detection_;
  bool auto_stood_down_ = false;

  // Outputs.
  StepStream stream_;
  bool output_dir_made_ = false;
  RecordingWriter recording_;
  bool record_pending_ = false;  // GPUACCT_RECORD=1 and the file not yet opened
  bool recording_ok_ = false;
  std::vector<DeviceInfo> devices_;  // described while the driver is alive
  PromOutput prom_;                  // GPUACCT_PROM_DIR
  std::set<std::string> counter_causes_said_;  // refusal lines said (collect_counters)

  uint64_t setup_line_version_ = 0;  // SetupTally::version of the last set-up line written

  // Provisional summary lines.
  std::chrono::nanoseconds summary_interval_ = kSummaryInterval;
  int summary_cost_factor_ = kSummaryCostFactor;
  std::chrono::steady_clock::time_point next_summary_{};
  size_t rows_at_last_summary_ = 0;

  std::vector<std::string> faults_for_testing_;
};

}  // namespace gpuacct::inject
