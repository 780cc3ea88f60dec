#include "inject/pipeline/pipeline.h"

#include <set>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <stdexcept>

#include "analysis/input/input.h"
#include "analysis/job/rank_files.h"
#include "analysis/model/file_io.h"
#include "analysis/model/json_text.h"
#include "analysis/report/cost.h"
#include "analysis/report/report.h"
#include "cupti_hooks/collector.h"
#include "cupti_hooks/device_info.h"
#include "inject/log.h"
#include "inject/python/python_hook.h"
#include "inject/recording/watermark.h"

namespace gpuacct::inject {
namespace {

// How long past a thread's exit (by the watermark) its life is kept for late API records.
constexpr int64_t kThreadLifeGraceNs = 60'000'000'000;
// The most the watermark waits for hardware counter samples (hold_for_counters).
constexpr int64_t kCounterLagLimitNs = 2'000'000'000;

// A batch this large goes on at a buffer wake-up instead of waiting for the tick.
constexpr size_t kFeedBatchEvents = size_t{1} << 16;

void mkdir_p(const std::string& dir) {
  std::string path;
  for (size_t i = 0; i < dir.size(); ++i) {
    path += dir[i];
    if ((dir[i] == '/' && i > 0) || i + 1 == dir.size()) mkdir(path.c_str(), 0777);
  }
}

std::string read_cmdline() {
  std::FILE* f = std::fopen("/proc/self/cmdline", "rb");
  if (f == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n = std::fread(buf, 1, sizeof buf, f);
  std::fclose(f);
  for (size_t i = 0; i < n; ++i) out += buf[i] == '\0' ? ' ' : buf[i];
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

nlohmann::json summary_line(const nlohmann::json& report, int64_t step_rows, bool provisional) {
  // The report's counters that are not zero, without their descriptions.
  nlohmann::json stats = nlohmann::json::array();
  for (const nlohmann::json& s : report.value("stats", nlohmann::json::array())) {
    if (s.value("value", int64_t{0}) == 0) continue;
    stats.push_back({{"name", s["name"]}, {"value", s["value"]}, {"severity", s["severity"]}});
  }
  nlohmann::json line = {{"summary", report.value("summary", nlohmann::json())},
                         {"verdict", report.value("verdict", nlohmann::json())},
                         {"provisional", provisional},
                         {"step_rows", step_rows},
                         {"data_loss", report.value("data_loss", false)},
                         {"stats", stats}};
  // The final report's cost (GPUACCT_GPU_HOUR_PRICE); provisional lines have none.
  if (report.contains("cost")) line["cost"] = report["cost"];
  return line;
}

Pipeline::Pipeline(const Config& config)
    : cfg_(config),
      base_(config.output_base()),
      acc_(config.accounting()),
      parser_(names_),
      host_(names_, NamePatterns(config.step_patterns), NamePatterns(config.data_patterns)),
      collectives_(
          rank_file(base_, RankFileKind::kCollectives),
          [this] { return metadata(/*final=*/false); }, &acc_.mutable_stats()),
      detection_(names_.intern(kDetectedStepName), &names_),
      record_pending_(config.record),
      prom_(config) {
  acc_.set_row_sink([this](const StepRow& row) { write_row(row); });
  const nlohmann::json header = {{"schema", "gpuacct.steps/1"},
                                 {"source", "injected"},
                                 {"hostname", json_safe_utf8(cfg_.host)},
                                 {"pid", cfg_.pid},
                                 {"rank", cfg_.rank},
                                 {"world_size", cfg_.world_size},
                                 {"job_id", json_safe_utf8(cfg_.job_id)}};
  stream_.configure(rank_file(base_, RankFileKind::kStepStream), dump_json(header),
                    &acc_.mutable_stats());
}

// ---- sources -> batch -----------------------------------------------------------------------

// The threads are learnt after the buffers are parsed: a thread's start is logged before CUPTI
// has any record of it (Registry::acquire), so every thread whose records were just parsed is
// known by now, whatever its records' delivery order, however long ago it exited.
void Pipeline::collect() {
  auto& collector = cupti::Collector::instance();
  const size_t parsed_from = batch_.api_calls.size();
  collector.consume(parser_, batch_, acc_.mutable_stats());
  Registry::get().snapshot(threads_);
  learn_threads();
  if (!collector.thread_ids_are_system()) {
    parser_.resolve_threads(batch_.api_calls, parsed_from, acc_.mutable_stats());
  }
  drain_rings();
}

// Starts, and exits of threads whose id came back, in the order they were logged; the other
// exits are learnt when drain_rings recycles an orphan's state (the parser keeps its life).
void Pipeline::learn_threads() {
  cupti::ThreadIds& ids = parser_.thread_ids();
  Registry::get().take_thread_events(thread_events_);
  for (const ThreadIdEvent& e : thread_events_) {
    if (e.exited) {
      ids.exited(e.pthread_low, e.tid, e.ns);
    } else {
      ids.started(e.pthread_low, e.tid, e.ns);
    }
  }
}

void Pipeline::drain_rings() {
  records_.clear();
  for (ThreadState* t : threads_) {
    const bool orphan = t->orphaned.load(std::memory_order_acquire);
    t->ring.drain([&](const HostRecord& r, uint64_t index, HostRing& ring) {
      if (r.type == HostRecType::kStackFrames) return;
      if (r.type == HostRecType::kApiCall) {  // a call timed by its callbacks: no host event
        take_timed_call(r, t->tid);
        return;
      }
      TimedRecord tr;
      tr.rec = r;
      tr.tid = t->tid;
      if (r.type == HostRecType::kStack) {
        const int n = std::min<int>(static_cast<int>(r.aux), kMaxFrames);
        for (int k = 0; k < n; ++k) {
          const HostRecord& c = ring.slot(index + 1 + static_cast<uint64_t>(k / kFramesPerSlot));
          tr.frames[k] = c.frames[k % kFramesPerSlot];
        }
        tr.nframes = n;
      }
      records_.push_back(tr);
    });
    CountsSeen& seen = seen_[t];
    Stats& stats = acc_.mutable_stats();
    auto add_new = [&](Stat stat, uint64_t now, uint64_t& before) {
      if (now > before) stats.add(stat, static_cast<int64_t>(now - before));
      before = now;
    };
    add_new(Stat::host_records_dropped, t->ring.dropped(), seen.dropped);
    add_new(Stat::launch_callbacks_runtime,
            t->runtime_launch_callbacks.load(std::memory_order_relaxed), seen.runtime_launches);
    add_new(Stat::launch_callbacks_driver,
            t->driver_launch_callbacks.load(std::memory_order_relaxed), seen.driver_launches);
    add_new(Stat::launch_callbacks_driver_nested,
            t->driver_launch_callbacks_nested.load(std::memory_order_relaxed),
            seen.driver_launches_nested);
    if (orphan) {
      parser_.thread_ids().exited(t->pthread_low, t->tid,
                                  t->exit_ns.load(std::memory_order_relaxed));
      t->ring.drain([](const HostRecord&, uint64_t, HostRing&) {});
      Registry::get().recycle(t);
    }
  }
  host_.process(records_, batch_, &sites_, acc_.mutable_stats());
}

// A kApiCall record (ApiSource::kCallbacks): the call, and the driver call nested in it when
// there was one -- a call of its own inside the outer one's span, as CUPTI's records of a nest
// would give it, so that its submission time and the id its ops may carry are known (the
// accountant takes the two as one nest).
void Pipeline::take_timed_call(const HostRecord& r, uint32_t tid) {
  uint16_t api = 0;
  std::memcpy(&api, r.name + kApiCallIndexAt, sizeof api);
  bool ok = parser_.add_timed_call(api, r.ts, r.value, r.aux, tid, batch_);
  if ((r.flags & kApiCallNested) != 0) {
    uint16_t nested_api = 0;
    uint32_t nested_id = 0;
    int64_t start = 0, end = 0;
    std::memcpy(&nested_api, r.name + kApiCallNestedIndexAt, sizeof nested_api);
    std::memcpy(&nested_id, r.name + kApiCallNestedIdAt, sizeof nested_id);
    std::memcpy(&start, r.name + kApiCallNestedStartAt, sizeof start);
    std::memcpy(&end, r.name + kApiCallNestedEndAt, sizeof end);
    ok = parser_.add_timed_call(nested_api, start, end, nested_id, tid, batch_,
                                /*nested=*/true) &&
         ok;
  }
  if (!ok) acc_.mutable_stats().add(Stat::cupti_records_unparsed);
}

void Pipeline::drop_incomplete_ops() {
  // A forced flush hands out unfinished work with zero timestamps: not usable.
  auto bad = std::remove_if(batch_.gpu_ops.begin(), batch_.gpu_ops.end(),
                            [](const GpuOp& op) { return op.start <= 0 || op.end <= 0; });
  const auto n_bad = std::distance(bad, batch_.gpu_ops.end());
  if (n_bad > 0) {
    acc_.mutable_stats().add(Stat::cupti_records_incomplete, n_bad);
    batch_.gpu_ops.erase(bad, batch_.gpu_ops.end());
  }
}

// The devices this process runs work on: those it launched on (the collector's launch
// callbacks: the first launch, at once) and those a kernel, memcpy or memset record came from
// (the parser's list: also work the callbacks did not see), not those it merely made a context
// on.  A rank's stray context on another rank's GPU (everyone on GPU 0 at init) must not take
// that GPU's counters from the rank that uses it (the first to enable holds them; the other is
// refused as busy).  docs/counters.md, "Devices".
std::vector<uint16_t> Pipeline::counter_devices() const {
  std::vector<uint16_t> devices;
  const uint64_t launched = cupti::Collector::instance().devices_launched();
  for (uint16_t d = 0; d < 64; ++d) {
    if ((launched >> d & 1) != 0) devices.push_back(d);
  }
  for (uint16_t d : parser_.totals().devices) {
    if (std::find(devices.begin(), devices.end(), d) == devices.end()) devices.push_back(d);
  }
  return devices;
}

void Pipeline::start_counters() {
  auto& collector = cupti::Collector::instance();
  cupti::CounterSampler* counters = collector.counters();
  if (counters == nullptr || collector.state() != cupti::CollectorState::kActive) return;
  for (uint16_t d : counter_devices()) say_counter_refusal(counters->enable(d));
}

void Pipeline::collect_counters() {
  auto& collector = cupti::Collector::instance();
  cupti::CounterSampler* counters = collector.counters();
  if (counters == nullptr) return;
  start_counters();
  // Sample times move onto the host clock by the offset activity records move by (the same
  // CUPTI clock: docs/counters.md says what only a GPU can confirm).
  if (collector.clock_source() == cupti::ClockSource::kNone) return;
  for (const std::string& line :
       counters->decode(collector.clock_offset_ns(), batch_.counter_samples, acc_.mutable_stats()))
    say_counter_refusal(line);
}

// GPUACCT_COUNTERS_DEBUG: a device's raw sampling view, for tests/gpu/check.sh.
static nlohmann::json counter_debug_json(const cupti::CounterDebug& d) {
  nlohmann::json samples = nlohmann::json::array();
  for (const cupti::CounterDebug::Sample& s : d.first_samples) {
    nlohmann::json values = nlohmann::json::object();
    for (size_t m = 0; m < s.values.size() && m < d.metric_names.size(); ++m) {
      values[json_safe_utf8(d.metric_names[m])] =
          std::isfinite(s.values[m]) ? nlohmann::json(s.values[m]) : nlohmann::json(nullptr);
    }
    samples.push_back({{"start", s.start},
                       {"end", s.end},
                       {"decode_before", s.decode_before},
                       {"decode_after", s.decode_after},
                       {"values", values}});
  }
  nlohmann::json j = {{"trigger_mode", d.trigger_mode},
                      {"sampling_interval", d.sampling_interval},
                      {"interval_unit", d.interval_unit},
                      {"hardware_buffer_bytes", d.hardware_buffer_bytes},
                      {"max_samples_per_decode", d.max_samples_per_decode},
                      {"setup_began", d.setup_began},
                      {"enable_before", d.enable_before},
                      {"enable_after", d.enable_after},
                      {"set_config_after", d.set_config_after},
                      {"start_before", d.start_before},
                      {"start_after", d.start_after},
                      {"stop_at", d.stop_at},
                      {"first_samples", samples},
                      {"decodes", d.decodes},
                      {"decodes_with_samples", d.decodes_with_samples},
                      {"populated_not_completed", d.populated_not_completed},
                      {"overflows", d.overflows},
                      {"first_sample_decoded_at", d.first_sample_decoded_at},
                      {"duration_min_ns", d.duration_min_ns},
                      {"duration_max_ns", d.duration_max_ns}};
  if (d.offset_low) j["offset_low_ns"] = *d.offset_low;
  if (d.offset_high) j["offset_high_ns"] = *d.offset_high;
  if (!d.first_samples.empty() && d.start_before != 0) {
    j["start_to_first_sample_ns"] =
        static_cast<int64_t>(d.first_samples.front().start) - static_cast<int64_t>(d.start_before);
  }
  return j;
}

// Said once per cause (the report lists every device): eight GPUs refusing for the same reason
// are one line.
void Pipeline::say_counter_refusal(const std::string& line) {
  if (line.empty()) return;
  const size_t colon = line.find(':');
  if (counter_causes_said_.insert(colon == std::string::npos ? line : line.substr(colon)).second)
    log_line(line);
}

// A step is finalised once the watermark passes it, and a counter sample arriving after that
// would be dropped: the watermark waits for the samples, but never more than
// kCounterLagLimitNs (a sampler that stopped delivering must not hold every row back).
int64_t Pipeline::hold_for_counters(int64_t watermark) const {
  if (watermark == FlushWatermark::kNone) return watermark;
  auto& collector = cupti::Collector::instance();
  const cupti::CounterSampler* counters = collector.counters();
  if (counters == nullptr) return watermark;
  const int64_t until = counters->decoded_until(collector.clock_offset_ns());
  if (until == cupti::CounterSampler::kNothingDecoded) return watermark;
  return std::max(std::min(watermark, until), watermark - kCounterLagLimitNs);
}

nlohmann::json Pipeline::counters_section(const GpuCollectionState& gpu) const {
  if (cfg_.counters_held_back) return {{"state", "held_back"}, {"why", kCountersHeldBack}};
  if (!cfg_.counters) return nullptr;
  nlohmann::json c = {{"interval_us", cfg_.counters_interval_us}};
  const cupti::CounterSampler* counters = cupti::Collector::instance().counters();
  nlohmann::json devices = nlohmann::json::array();
  std::string refused;
  int active = 0;
  if (counters != nullptr) {
    for (const cupti::CounterDeviceStatus& d : counters->status()) {
      nlohmann::json one = {{"device", d.device},
                            {"state", cupti::to_string(d.state)},
                            {"chip", json_safe_utf8(d.chip)},
                            {"samples", d.samples},
                            {"metrics", d.metrics}};
      if (d.first_sample_lag_ns) one["first_sample_lag_ns"] = *d.first_sample_lag_ns;
      if (d.state == cupti::CounterState::kActive || d.samples_due > 0) {
        one["samples_due"] = d.samples_due;
        one["samples_before_start"] = d.samples_before_start;
        one["trigger"] = d.trigger;
        one["interval_set"] = d.interval_set;
      }
      if (d.clock_offset_ns) {
        one["clock_offset_ns"] = *d.clock_offset_ns;
        one["clock"] = d.clock;
      }
      if (d.interval_seen_ns) one["interval_seen_ns"] = *d.interval_seen_ns;
      if (d.debug) one["debug"] = counter_debug_json(*d.debug);
      if (!d.line.empty()) {
        one["line"] = json_safe_utf8(d.line);
        if (refused.empty()) refused = d.line;
      } else {
        ++active;
      }
      devices.push_back(one);
    }
  }
  c["devices"] = devices;
  // Devices that ran work but were never set up: seen only once sampling had stopped.
  std::string unstarted;
  if (counters != nullptr) {
    const std::vector<cupti::CounterDeviceStatus> tried = counters->status();
    for (uint16_t d : counter_devices()) {
      const bool seen =
          std::any_of(tried.begin(), tried.end(),
                      [&](const cupti::CounterDeviceStatus& s) { return s.device == d; });
      if (!seen) unstarted += (unstarted.empty() ? "" : ", ") + std::to_string(d);
    }
  }
  if (active > 0) {
    c["state"] = refused.empty() ? "active" : "partial";
  } else if (!refused.empty()) {
    c["state"] = "refused";
  } else {
    c["state"] = "off";
    const bool collecting = gpu.state == "active" || gpu.state == "stopped";
    refused = !collecting || counters == nullptr
                  ? "hardware counters off: no GPU collection (" + gpu.message + ")"
              : !unstarted.empty()
                  ? "hardware counters off: device(s) " + unstarted +
                        " ran work, but the run ended before sampling could start there"
                  : "hardware counters off: no device was used";
  }
  if (!unstarted.empty()) c["devices_not_started"] = unstarted;
  if (!refused.empty()) c["why"] = json_safe_utf8(refused);
  return c;
}

void Pipeline::describe_new_devices(std::vector<DeviceInfo>& devices) {
  const std::vector<uint16_t>& seen = parser_.totals().devices;  // first-seen order
  for (size_t i = devices.size(); i < seen.size(); ++i) {
    devices.push_back(cupti::describe_device(seen[i]));
  }
}

// ---- the one path: batch -> detector -> recording -> accountant -----------------------------

void Pipeline::feed() {
  drop_incomplete_ops();
  if (detecting()) {
    if (host_.explicit_steps()) {
      auto_stood_down_ = true;  // an explicit step source appeared: it wins from here on
    } else {
      detection_.add(batch_);  // calls first, so each op finds its launch call's host time
    }
  }
  if (!batch_.empty()) record([&] { return recording_.write_batch(batch_); });
  drain_plugin();
  collectives_.add(plugin_records_, batch_);
  plugin_records_.clear();
  acc_.add(batch_);
  batch_.clear();
}

// The plugin's records are drained with each batch, after the CUPTI buffers were consumed
// (collect, then feed); a launch call delivered before its record is kept by the matcher for
// its thread (CollectiveMatcher: the last launches of a thread without records).
void Pipeline::drain_plugin() {
  drain_nccl_records(plugin_records_);
  const uint64_t dropped = nccl_plugin_counters().events_dropped;
  if (dropped > plugin_dropped_seen_) {
    acc_.mutable_stats().add(Stat::nccl_profiler_events_dropped,
                             static_cast<int64_t>(dropped - plugin_dropped_seen_));
    plugin_dropped_seen_ = dropped;
  }
}

void Pipeline::ingest_plugin_records(const std::vector<PluginRecord>& records) {
  plugin_records_.insert(plugin_records_.end(), records.begin(), records.end());
}

void Pipeline::ingest() {
  collect();
  if (batch_.size() >= kFeedBatchEvents) feed();
}

void Pipeline::ingest_events(const EventBatch& events) {
  batch_.gpu_ops.insert(batch_.gpu_ops.end(), events.gpu_ops.begin(), events.gpu_ops.end());
  batch_.api_calls.insert(batch_.api_calls.end(), events.api_calls.begin(), events.api_calls.end());
  batch_.ranges.insert(batch_.ranges.end(), events.ranges.begin(), events.ranges.end());
  batch_.markers.insert(batch_.markers.end(), events.markers.begin(), events.markers.end());
  if (batch_.size() >= kFeedBatchEvents) feed();
}

void Pipeline::tick(int64_t watermark_from_flush) {
  collect();
  collect_counters();  // each tick (not at buffer wake-ups): the decode costs milliseconds
  const int64_t watermark = hold_for_counters(watermark_from_flush);
  describe_new_devices(devices_);  // while the driver is alive
  feed();
  add_detected_steps(watermark, /*final=*/false);
  if (watermark != FlushWatermark::kNone) {
    // Recorded first: a job killed in between leaves no streamed row that its recording cannot
    // give back (the recording reaches the kernel at each watermark: RecordingWriter).
    record([&] { return recording_.write_watermark(watermark); });
    acc_.advance_watermark(watermark);
    write_setup_line();
    collectives_.on_watermark(watermark);
    // A thread's life is kept until the watermark is kThreadLifeGraceNs past its exit: the
    // watermark promises GPU records only, and API records can come late too (a busy CUPTI
    // delivery thread), so its API records may still arrive.  16 bytes a life: even a job that
    // starts 1000 threads a second keeps ~1 MB.
    if (watermark > kThreadLifeGraceNs)
      parser_.thread_ids().forget_before(watermark - kThreadLifeGraceNs);
  }
  maybe_write_summary();
  prom_.maybe_write(acc_.stats(), std::chrono::steady_clock::now());
}

// The stream's set-up line (inject/output/step_stream.h): once set-up is known, and again when
// detected steps are folded into it (their rows, already written, are named in it).
void Pipeline::write_setup_line() {
  const SetupTally& setup = acc_.setup();
  if (!setup.known || setup.version == setup_line_version_) return;
  setup_line_version_ = setup.version;
  const nlohmann::json section = setup_json(setup, &names_);
  if (!section.is_null()) stream_.write_setup(dump_json({{"setup", section}}));
}

void Pipeline::maybe_write_summary() {
  const size_t rows = acc_.rows().size();
  if (rows == rows_at_last_summary_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now < next_summary_) return;
  rows_at_last_summary_ = rows;
  const nlohmann::json report =
      summary_report(acc_.rows(), acc_.stats(), acc_.config(), metadata(/*final=*/false));
  stream_.write_summary(
      dump_json(summary_line(report, static_cast<int64_t>(rows), /*provisional=*/true)));
  const auto cost = std::chrono::steady_clock::now() - now;
  next_summary_ =
      now + std::max<std::chrono::nanoseconds>(summary_interval_, cost * summary_cost_factor_);
}

// ---- live step detection --------------------------------------------------------------------

bool Pipeline::detecting() const {
  return cfg_.auto_steps && !auto_stood_down_ && !detection_.gave_up();
}

// The ranges go to the accountant before the watermark that may finalise them; at the end a
// step the capture cut off is counted (Stat::incomplete_trailing_step).  They are recorded, and
// the metadata carries the step_detection section: `gpuacct analyze` of the recording accounts
// exactly the steps live found (detection decides on what it has seen so far, so a whole-file
// detection of an irregular run could place them differently), the same section included
// (tests/e2e run_e2e.py same_steps).
void Pipeline::add_detected_steps(int64_t watermark, bool final) {
  if (!detecting()) return;
  const std::vector<HostRange> steps =
      detection_.poll_into(acc_, acc_.mutable_stats(), watermark, final);
  if (steps.empty()) return;
  record([&] {
    EventBatch b;
    b.ranges = steps;
    return recording_.write_batch(b);
  });
}

// The report's step_detection section when steps were to be detected (none when a step source
// marked them): one object for the report and for the recording's metadata.
nlohmann::json Pipeline::step_detection_section() const {
  nlohmann::json sections = nlohmann::json::object();
  if (cfg_.auto_steps && !host_.explicit_steps()) {
    add_step_detection_section(detection_.summary(), names_, &sections);
  }
  return sections;
}

// ---- outputs --------------------------------------------------------------------------------

void Pipeline::ensure_output_dir() {
  if (!output_dir_made_) mkdir_p(cfg_.output_dir);
  output_dir_made_ = true;
}

void Pipeline::write_row(const StepRow& row) {
  ensure_output_dir();
  stream_.write_row(dump_json(step_row_to_json(row)), row.step_index);
  collectives_.on_step_row(row);
  prom_.add_row(row);
}

// Every recording write goes through here: the first one opens the file (with GPUACCT_RECORD=1),
// then names (events refer to them), then `write`.  The first failure abandons the recording --
// one with a hole would mislead -- says so once, and counts it; nothing appears under the final
// name.
template <typename Write>
void Pipeline::record(Write write) {
  Status st;
  try {
    if (record_pending_) {  // one attempt
      record_pending_ = false;
      recording_ok_ = true;
      ensure_output_dir();
      st = recording_.open(rank_file(base_, RankFileKind::kRecording), OutputPolicy::kOwnFilesOnly);
      if (!recording_.note().empty()) log_line(recording_.note());
    }
    if (!recording_ok_) return;
    fault_point("recording");
    if (st.ok()) st = recording_.write_new_names(names_);
    if (st.ok()) st = write();
  } catch (const std::exception& e) {  // a bug or out of memory: handled as a failed write
    st =
        Status::Error(std::string("cannot write the recording (internal error: ") + e.what() + ")");
  } catch (...) {
    st = Status::Error("cannot write the recording (internal error)");
  }
  if (st.ok()) return;
  recording_ok_ = false;
  recording_.abandon();
  acc_.mutable_stats().add(Stat::recordings_abandoned);
  log_line(st.message() + "; the recording is abandoned (no " + base_ + ".gpuacct is written)");
}

void Pipeline::finish_recording(const RunMetadata& meta) {
  // The file keeps the collector's counters (StatOrigin::kCollection): what never became an
  // event in it.
  record([&] { return recording_.write_metadata(meta); });
  record([&] { return recording_.write_stats(acc_.stats()); });
  record([&] { return recording_.close(); });
}

// `final`: also the command line and the devices first seen in the final drain (a very short
// run); a provisional summary needs neither.
RunMetadata Pipeline::metadata(bool final) {
  RunMetadata meta;
  meta.source = "injected";
  meta.hostname = cfg_.host;
  meta.pid = cfg_.pid;
  meta.rank = cfg_.rank;
  meta.world_size = cfg_.world_size;
  meta.job_id = cfg_.job_id;
  meta.gpuacct_version = GPUACCT_VERSION_STRING;
  meta.devices = devices_;
  // What this run accounted with (GPUACCT_WARMUP_STEPS, ...): `gpuacct analyze` of the
  // recording applies them, so it gives this run's rows without being told.
  meta.accounting = accounting_settings(acc_.config());
  if (final) {
    meta.command = read_cmdline();
    describe_new_devices(meta.devices);
    const nlohmann::json detection = step_detection_section();
    if (detection.contains("step_detection"))
      meta.step_detection = dump_json(detection["step_detection"]);
  }
  std::sort(meta.devices.begin(), meta.devices.end(),
            [](const DeviceInfo& a, const DeviceInfo& b) { return a.id < b.id; });
  return meta;
}

CollectionFacts Pipeline::collection_facts(const GpuCollectionState& gpu) const {
  const auto& col = cupti::Collector::instance();
  CollectionFacts f;
  f.gpu = gpu;
  f.cupti_version = col.version();
  f.clock_source = col.clock_source();
  f.clock_offset_ns = col.clock_offset_ns();
  f.clock_offset_uncertainty_ns = col.clock_offset_uncertainty_ns();
  f.buffer_count = cfg_.buffer_count;
  f.buffer_bytes = static_cast<int64_t>(cfg_.buffer_mb) << 20;
  f.buffers_allocated = col.buffers_allocated();
  f.totals = &parser_.totals();
  f.plan = col.plan();
  f.callbacks = col.callbacks();
  f.graph_trace = col.graph_trace();
  f.step_source = host_.explicit_steps()           ? host_.step_source()
                  : detection_.summary().steps > 0 ? "detected"
                                                   : "none";
  f.native_sites = sites_.to_json(5);
  f.python = python_status();
  f.counters = counters_section(gpu);
  const NcclPluginCounters plugin = nccl_plugin_counters();
  const std::string forward = nccl_plugin_forward_note();
  if (plugin.communicators > 0 || !forward.empty() ||
      collectives_.identity() != CollectiveSource::kNone) {
    f.nccl_plugin = {{"version", plugin.version},
                     {"communicators", plugin.communicators},
                     {"records", plugin.records},
                     {"events_dropped", plugin.events_dropped},
                     {"identity", to_string(collectives_.identity())},
                     {"rows", collectives_.rows_written()}};
    if (!forward.empty()) f.nccl_plugin["forward"] = json_safe_utf8(forward);
  }
  return f;
}

void Pipeline::fault_point(const char* part) const {
  for (const std::string& f : faults_for_testing_) {
    if (f == part) throw std::runtime_error("fault injected for testing");
  }
}

void Pipeline::failed(const std::string& what, std::string* error) {
  if (error != nullptr) {
    *error = what;  // the report says it (report_errors); final_report says it once
  } else {
    log_line(what + " (internal error; the other outputs are written)");
  }
}

// Runs one part of the end; an exception (a bug, out of memory) costs that part only: said in
// one line, false returned.  A part named by add_fault_for_testing throws here.
template <typename Part>
bool Pipeline::guarded(const char* part, Part run, std::string* error) {
  try {
    fault_point(part);
    run();
    return true;
  } catch (const std::exception& e) {
    failed(std::string(part) + ": " + e.what(), error);
  } catch (...) {
    failed(std::string(part) + ": an exception of unknown type", error);
  }
  return false;
}

// The report, part by part: a part that throws is left out and named in "report_errors"
// (docs/report_schema.md); the steps finalised are in the report whatever else failed.
nlohmann::json Pipeline::final_report(const GpuCollectionState& gpu, const RunMetadata& meta) {
  std::vector<std::string> errors;
  auto part = [&](const char* name, auto run) {
    std::string error;
    const bool ok = guarded(name, run, &error);
    if (!ok) errors.push_back(error);
    return ok;
  };
  // The live sections; the report is assembled where every tool's is (build_report,
  // analysis/report/report.h).
  ReportParts parts;
  parts.cost = cfg_.cost;
  nlohmann::json& extra = parts.sections;
  part("collection", [&] { extra["collection"] = collection_section(collection_facts(gpu)); });
  // Steps detected: the same section, keys and place as a file's (analysis/input/input.cc).
  part("step_detection", [&] { extra.update(step_detection_section()); });
  part("sampling", [&] {
    if (cfg_.sample_every > 1) extra["sampling"] = sampling_section();
  });
  nlohmann::json report;
  if (!part("report", [&] { report = build_report(acc_, meta, names_, parts); })) {
    if (!part("summary",
              [&] { report = summary_report(acc_.rows(), acc_.stats(), acc_.config(), meta); })) {
      report = {{"schema", kReportSchema},
                {"generated_by", "gpuacct " + std::string(GPUACCT_VERSION_STRING)}};
    }
    part("steps", [&] {
      nlohmann::json steps = nlohmann::json::array();
      for (const StepRow& r : acc_.rows()) steps.push_back(step_row_to_json(r));
      report["steps"] = steps;
    });
    part("report parts", [&] { add_report_parts(parts, &report); });
  }
  if (!errors.empty()) {
    report["report_errors"] = errors;
    std::string line = "the report lacks what failed (internal error):";
    for (const std::string& e : errors) line += " [" + e + "]";
    log_line(line + "; the rest is written");
  }
  return report;
}

// GPUACCT_SAMPLE=N: what was traced (inject/recording/sampling.h, docs/overhead.md).
nlohmann::json Pipeline::sampling_section() const {
  std::set<int64_t> traced, all;
  for (const StepRow& r : acc_.rows()) {
    all.insert(r.step_index);
    if (r.sampled) traced.insert(r.step_index);
  }
  const std::string n = std::to_string(cfg_.sample_every);
  const bool capi = std::string(host_.step_source()).find("capi") != std::string::npos;
  std::string line =
      capi ? "traced 1 step in " + n + " (" + std::to_string(traced.size()) + " of " +
                 std::to_string(all.size()) +
                 " steps); the walls are the traced steps' alone, the other rows hold step time "
                 "and data wait"
           : "GPUACCT_SAMPLE=" + n +
                 " needs steps marked through the C API or Python (gpuacct.step); every step "
                 "was traced";
  return {{"every", cfg_.sample_every},
          {"traced_steps", traced.size()},
          {"steps", all.size()},
          {"line", line}};
}

bool Pipeline::nothing_recorded(const GpuCollectionState& gpu) const {
  if (gpu.state != "active" && gpu.state != "stopped") return false;
  const Stats& s = acc_.stats();
  return acc_.rows().empty() && collectives_.rows_written() == 0 && !recording_ok_ &&
         s.get(Stat::gpu_ops_received) + s.get(Stat::api_calls_received) +
                 s.get(Stat::ranges_received) + s.get(Stat::markers_received) ==
             0;
}

void Pipeline::finish(const GpuCollectionState& gpu) {
  // The final drain: everything left goes on, and every detected boundary.
  guarded("the final drain", [&] {
    // Sampling stops first; what its buffers hold is decoded by this last collect.
    if (cupti::CounterSampler* c = cupti::Collector::instance().counters(); c != nullptr) c->stop();
    collect();
    collect_counters();
    feed();
    add_detected_steps(std::numeric_limits<int64_t>::max(), /*final=*/true);
    host_.finish(acc_.mutable_stats());
  });
  guarded("the last steps", [&] {
    acc_.finish();
    write_setup_line();
  });
  guarded("the collectives file", [&] {
    ensure_output_dir();  // a run whose only rows are collectives' (no step finalised)
    collectives_.finish();
  });
  if (nothing_recorded(gpu)) {
    // A process whose collection worked but that made no traced CUDA call, ran no GPU op and
    // marked nothing -- a torch.compile worker that only initialised CUDA (16 of them on the
    // H200), a helper process: no files, no summary.  One report per such process would bury
    // the training process's own.  (When collection failed, the report says why: kept.)
    stream_.close();
    return;
  }

  RunMetadata meta;
  if (!guarded("the run metadata", [&] { meta = metadata(/*final=*/true); })) {
    guarded("the run metadata", [&] { meta = metadata(/*final=*/false); });
  }
  finish_recording(meta);  // before the report, which counts a recording that failed
  const nlohmann::json report = final_report(gpu, meta);
  Status written = Status::Error("the report could not be serialised");
  OutputPlace place{rank_file(base_, RankFileKind::kReport), ""};
  guarded("the report file", [&] {
    mkdir_p(cfg_.output_dir);  // again: the directory may have been removed while the job ran
    written = write_file_atomic(place.path, dump_json(report, 2) + "\n",
                                OutputPolicy::kOwnFilesOnly, &place);
  });
  if (!place.note.empty()) log_line(place.note);
  const std::string& path = place.path;
  guarded("the step stream's summary line", [&] {
    stream_.write_trailer(dump_json(
        summary_line(report, static_cast<int64_t>(acc_.rows().size()), /*provisional=*/false)));
  });
  stream_.close();
  // Every row and the output counters (a stream or recording that failed) are in by now.
  guarded("the metrics file", [&] { prom_.write(acc_.stats()); });
  if (!cfg_.quiet) {
    guarded("the terminal summary", [&] {
      auto text = render_terminal_summary(report, false);
      if (text.ok()) log_block(text.value());
      if (report.contains("collection") && report["collection"].contains("note")) {
        log_line(report["collection"]["note"].get<std::string>());
      }
      if (report.contains("sampling")) log_line(report["sampling"]["line"].get<std::string>());
    });
  }
  if (!written.ok()) {
    log_line("no report: " + written.message());
  } else if (!cfg_.quiet) {
    log_line("report written to " + path);
  }
}

}  // namespace gpuacct::inject
