// One central list of counters that every stage increments and every report prints.
// Severity says how a reader should take a non-zero value:
//   kInfo     - expected bookkeeping;
//   kError    - bad input that was skipped (the result is still exact for what remained);
//   kDataLoss - events the tool never saw or had to drop: numbers may be incomplete.
// Data loss is never silent: report writers print every non-zero kDataLoss counter.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace gpuacct {

enum class StatSeverity : uint8_t { kInfo, kError, kDataLoss };

// Who counts it, which says whether a recording carries it:
//   kCollection - only the live collector knows it (what CUPTI or the host rings dropped, what
//                 never became an event): recordings carry it, a re-analysis adds it;
//   kAccounting - counted again by whoever accounts the events (received, late, skipped,
//                 detected): recordings do not carry it, so a re-analysis does not count twice;
//   kOutput     - about the live run's own output files (stream, recording): not carried.
enum class StatOrigin : uint8_t { kCollection, kAccounting, kOutput };

// X(name, severity, origin, description)
#define GPUACCT_STATS_LIST(X)                                                                  \
  X(gpu_ops_received, kInfo, kAccounting, "GPU operations received")                           \
  X(api_calls_received, kInfo, kAccounting, "host CUDA API calls received")                    \
  X(ranges_received, kInfo, kAccounting, "host ranges received")                               \
  X(markers_received, kInfo, kAccounting, "markers received")                                  \
  X(steps_finalized, kInfo, kAccounting, "steps finalised")                                    \
  X(ops_outside_steps, kInfo, kAccounting, "GPU ops that ran outside every step window")       \
  X(unmatched_launches, kInfo, kAccounting, "launch calls whose GPU op never arrived")         \
  X(data_waits_inferred, kInfo, kAccounting,                                                   \
    "idle gaps whose host pause before a host-to-device input copy was counted as data wait "  \
    "(no data range marked)")                                                                  \
  X(incomplete_trailing_step, kInfo, kAccounting,                                              \
    "open step at the end of the run that was dropped")                                        \
  X(invalid_events_skipped, kError, kAccounting,                                               \
    "events skipped: end before start or out of range")                                        \
  X(step_boundaries_aligned, kInfo, kAccounting,                                               \
    "step ranges that began within the touch tolerance (rounding) before the previous step "   \
    "ended; they begin where it ends")                                                         \
  X(overlapping_steps_skipped, kError, kAccounting,                                            \
    "step ranges that overlapped an earlier step (nested or concurrent), skipped: their time " \
    "is in the neighbouring rows")                                                             \
  X(unknown_names, kError, kAccounting, "events naming an unknown string id")                  \
  X(late_gpu_ops_dropped, kDataLoss, kAccounting,                                              \
    "GPU ops that arrived after their step was finalised")                                     \
  X(late_host_events_dropped, kDataLoss, kAccounting,                                          \
    "host events that arrived after their step was finalised")                                 \
  X(late_steps_dropped, kDataLoss, kAccounting,                                                \
    "step ranges that arrived after later steps were finalised")                               \
  X(owed_launches_cut_off, kDataLoss, kAccounting,                                             \
    "launch calls given up on while their GPU op was still owed: the events held for "         \
    "unfinalised steps reached pending_event_limit")                                           \
  X(cupti_records_dropped, kDataLoss, kCollection,                                             \
    "activity records CUPTI dropped (buffers full)")                                           \
  X(cupti_buffers_refused, kDataLoss, kCollection, "activity buffers refused at the pool cap") \
  X(cupti_records_unparsed, kDataLoss, kCollection,                                            \
    "activity records of an unexpected kind or version")                                       \
  X(cupti_records_incomplete, kError, kCollection,                                             \
    "GPU activity records the closing forced flush handed out unfinished (zero "               \
    "timestamps), skipped: work still running at exit")                                        \
  X(cupti_records_untimed, kDataLoss, kCollection,                                             \
    "GPU activity records CUPTI delivered without timestamps during the run (no device "       \
    "memory to time them, or a forced flush mid-run): their GPU time is missing from the "     \
    "rows")                                                                                    \
  X(host_records_dropped, kDataLoss, kCollection,                                              \
    "host ranges/markers dropped (per-thread ring full)")                                      \
  X(host_ranges_dropped, kDataLoss, kCollection,                                               \
    "step / data ranges dropped: nested deeper than the per-thread cap, or too many "          \
    "nvtxRangeStart ranges open at once")                                                      \
  X(cupti_thread_ids_unknown, kDataLoss, kCollection,                                          \
    "CUDA API records whose CUPTI thread id (pthread_self(): SYSTEM thread ids refused) "      \
    "matched no thread the library knew: their thread's data ranges could not be told")        \
  X(launch_callbacks_runtime, kInfo, kCollection,                                              \
    "launch callbacks CUPTI delivered in the runtime domain (API callbacks on: docs/overhead.md)") \
  X(launch_callbacks_driver, kInfo, kCollection,                                               \
    "launch callbacks CUPTI delivered in the driver domain")                                    \
  X(launch_callbacks_driver_nested, kInfo, kCollection,                                        \
    "driver-domain launch callbacks inside a traced runtime call (equal to "                   \
    "launch_callbacks_runtime when every runtime launch reached the driver's callbacks)")      \
  X(native_sites_dropped, kInfo, kCollection,                                                  \
    "native call-site samples left out (the site table was full)")                             \
  X(nccl_profiler_events_dropped, kDataLoss, kCollection,                                      \
    "NCCL profiler-plugin events lost (a thread's queue full, no event handle left): those "   \
    "collectives have no row")                                                                 \
  X(collectives_unmatched, kDataLoss, kCollection,                                             \
    "collectives the NCCL profiler plugin recorded whose kernel was not found (CUDA graph "    \
    "capture, a CUPTI record lost, CUPTI off): their rows have no GPU times")                  \
  X(stream_rows_lost, kDataLoss, kOutput,                                                      \
    "per-step stream rows that could not be written (disk full?)")                             \
  X(recordings_abandoned, kDataLoss, kOutput,                                                  \
    "recordings abandoned after a failed write (disk full?)")                                  \
  X(collective_rows_lost, kDataLoss, kOutput,                                                  \
    "collectives file rows that could not be written (disk full?)")                            \
  X(inputs_cut_off, kDataLoss, kAccounting,                                                    \
    "inputs whose writer was killed before it finished: read up to the last whole chunk or "   \
    "line; steps not finished by then are missing")                                            \
  X(importer_events_skipped, kError, kAccounting,                                              \
    "trace events skipped by the importer (malformed)")                                        \
  X(importer_unknown_categories, kInfo, kAccounting,                                           \
    "trace events of categories the importer ignores")                                         \
  X(late_counter_samples_dropped, kDataLoss, kAccounting,                                      \
    "hardware counter samples that arrived after their step was finalised")                    \
  X(counter_samples_lost, kDataLoss, kCollection,                                              \
    "hardware counter samples lost: the PM sampling buffer overflowed (a gap in the sample "   \
    "times) or a sample could not be decoded")                                                 \
  X(trace_collectives_over_limit, kDataLoss, kAccounting,                                      \
    "a trace's collective kernels or launch calls past the importer's limit (4 M of each): "   \
    "those kernels have no collectives row, or no host enqueue time")

enum class Stat : uint16_t {
#define GPUACCT_STAT_ENUM(name, sev, origin, desc) name,
  GPUACCT_STATS_LIST(GPUACCT_STAT_ENUM)
#undef GPUACCT_STAT_ENUM
      kCount
};

inline constexpr size_t kStatCount = static_cast<size_t>(Stat::kCount);

struct StatInfo {
  std::string_view name;
  StatSeverity severity;
  StatOrigin origin;
  std::string_view description;
};

const StatInfo& stat_info(Stat s);
std::string_view to_string(StatSeverity s);

class Stats {
 public:
  void add(Stat s, int64_t n = 1) { values_[static_cast<size_t>(s)] += n; }
  void set(Stat s, int64_t v) { values_[static_cast<size_t>(s)] = v; }
  int64_t get(Stat s) const { return values_[static_cast<size_t>(s)]; }
  void merge(const Stats& other) {
    for (size_t i = 0; i < kStatCount; ++i) values_[i] += other.values_[i];
  }
  // The sum of the kDataLoss counters: how many events were never seen or had to be dropped
  // (the Prometheus metric gpuacct_data_loss_total).  has_data_loss() is data_loss_total() > 0:
  // the report's "data_loss".
  int64_t data_loss_total() const;
  bool has_data_loss() const { return data_loss_total() > 0; }

 private:
  std::array<int64_t, kStatCount> values_{};
};

}  // namespace gpuacct
