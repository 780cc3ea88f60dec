// The CUPTI side of the injected library: loads CUPTI, subscribes, enables the activity kinds
// and API callbacks gpuacct needs, owns the bounded activity-buffer pool, and hands completed
// buffers to the worker.  CUDA-free interface (inject/ never includes CUPTI headers).
//
// Buffer pool: at most `buffer_count` buffers of `buffer_bytes` each exist at any time
// (default 8 x 4 MiB = 32 MiB).  When CUPTI asks for a buffer and all are in use (CUPTI holds
// them or the worker has not parsed them yet), the request is refused (NULL buffer, counted in
// Stat::cupti_buffers_refused) and CUPTI drops records, which cuptiActivityGetNumDroppedRecords
// reports (Stat::cupti_records_dropped).  Parsed buffers go back to the pool.
//
// Errors: functions that can fail return Status (analysis/model/status.h) with one line that
// says why (no "gpuacct: " prefix); nothing here prints.  What must be said as it happens (a
// failing CUPTI call, CUPTI's fatal-error callback) goes through CollectorHooks::warn, which
// the library routes to its one-line log (inject/log.h); without a hook it is not said.
//
// Locking: one mutex guards the pool and the completed queue; it is never held across a CUPTI
// call (CUPTI calls the buffer callbacks with its own lock held: holding ours while calling
// into CUPTI would be an ABBA deadlock).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>

#include "analysis/model/events.h"
#include "analysis/model/stats.h"
#include "analysis/model/status.h"
#include "cupti_hooks/api_table.h"
#include "cupti_hooks/counter_sampler.h"
#include "cupti_hooks/cupti_plan.h"
#include "cupti_hooks/graph_nodes.h"

namespace gpuacct::cupti {

class ActivityParser;

// What a traced call's exit callback says of the call (CUpti_CallbackData, CUPTI-free).
struct ApiCallExit {
  uint32_t correlation_id = 0;  // the id its kernels / copies carry (ApiSource::kCallbacks)
  uint16_t traced_index = 0;    // into traced_apis()
  bool failed = false;          // the call returned an error: it submitted nothing
  ApiDomain domain = ApiDomain::kRuntime;  // the domain of this callback
};

// Called synchronously from CUPTI API callbacks on the application thread.  Must be cheap.
struct CollectorHooks {
  // A traced launch / copy / sync call begins (in `domain`) or ends.  `scratch` is per-call
  // storage shared by the enter and exit callbacks of the same call.
  void (*api_enter)(HostApiKind kind, ApiDomain domain, uint64_t* scratch) = nullptr;
  void (*api_exit)(HostApiKind kind, uint64_t* scratch, const ApiCallExit& call) = nullptr;
  // CUPTI completed a buffer (wake the worker if it sleeps).  Any thread.
  void (*buffer_ready)() = nullptr;
  // With hardware counters configured: the first launch seen on a device (its CUDA ordinal),
  // once per device, on the launching thread (wake the worker to start sampling there).
  void (*device_launched)(uint32_t device) = nullptr;
  // Says one line to the user (no prefix, no newline).  Any thread; not on the hot path.
  void (*warn)(std::string_view message) = nullptr;
};

// Where CUPTI's timestamps come from, relative to the host clock (CollectorOptions::host_clock).
enum class ClockSource : uint8_t {
  kNone,               // not started
  kTimestampCallback,  // CUPTI reads the host clock (cuptiActivityRegisterTimestampCallback)
  kMeasuredOffset,     // CUPTI keeps its own clock; records are moved by a measured offset
  kCuptiHostClock,     // CUPTI's own clock is the host clock (every reading bracketed): as is
};
const char* to_string(ClockSource s);

struct CollectorOptions {
  std::string library = "libcupti.so.13";
  // The clock of every host record (nanoseconds).  CUPTI is made to read it, or, when it
  // cannot be (an older CUPTI, an error), its offset from CUPTI's clock is measured so records
  // can be moved onto it (ActivityParser::set_clock_offset).  Required for start().
  uint64_t (*host_clock)() = nullptr;
  size_t buffer_bytes = 4u << 20;
  int buffer_count = 8;
  uint32_t flush_period_ms = 100;
  // Launch / sync callbacks (native call sites).  Without SYSTEM thread ids every traced call
  // gets them regardless (a thread's first call makes it known: ActivityParser::ThreadIds).
  bool api_callbacks = true;
  // What is asked of CUPTI (cupti_plan.h): the design unless a GPUACCT_CUPTI_* experiment
  // setting changed it.
  CuptiPlan plan;
  CollectorHooks hooks;
};

enum class CollectorState : uint8_t {
  kNotStarted,
  kActive,           // subscribed, activity enabled
  kNoCupti,          // library missing or unusable
  kVersionMismatch,  // CUPTI API version outside the layouts we read
  kOtherSubscriber,  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: stepped aside
  kFailed,           // subscribe / enable failed for another reason (e.g. no driver)
  kStopped,
};
const char* to_string(CollectorState s);

class Collector {
 public:
  // The process-wide instance (CUPTI's buffer callbacks carry no user pointer).
  static Collector& instance();

  // dlopens CUPTI (idempotent).  An error saying why when it cannot be used.
  Status load(const std::string& library);
  bool loaded() const { return loaded_; }
  uint32_t version() const;

  // Subscribes and enables collection.  Ok when state() is kActive; otherwise an error that
  // says why (state() names the case).  Idempotent: a second call returns the first's state.
  Status start(const CollectorOptions& options);
  CollectorState state() const { return state_.load(std::memory_order_acquire); }
  // Read by the worker while start() runs on the thread that loads CUDA: atomic.  Set before
  // the clock is published (publish_clock, release), so a worker that parsed records sees it.
  bool thread_ids_are_system() const { return system_thread_ids_.load(std::memory_order_acquire); }
  // Set by start(): how CUPTI's timestamps relate to the host clock.  With kMeasuredOffset,
  // CUPTI time - clock_offset_ns() = host time (to within clock_offset_uncertainty_ns()).
  // Published once (the source last, with release), before any activity kind is enabled, and
  // never changed; consume() hands the offset to the parser only once it sees it published.
  ClockSource clock_source() const { return clock_source_.load(std::memory_order_acquire); }
  int64_t clock_offset_ns() const { return clock_offset_ns_.load(std::memory_order_acquire); }
  int64_t clock_offset_uncertainty_ns() const {
    return clock_offset_uncertainty_ns_.load(std::memory_order_acquire);
  }

  // Sampled tracing (GPUACCT_SAMPLE, docs/overhead.md): switches off (or back on) everything
  // that costs per CUDA call -- the activity kinds, the per-API runtime / driver records and
  // the launch / sync / copy API callbacks -- leaving subscribed, with the resource, state and
  // reset callbacks on.  With CuptiPlan::sample_switch kActivity the launch / sync callbacks stay
  // enabled and return at once while tracing is off (no callback toggled per window).  Called
  // at a step boundary by the thread that marks steps, never per launch; serialised with
  // start() / stop().  Before start() it only records the wish, which start() then applies.
  // Records of calls already made stay in their buffers.
  void set_tracing(bool on);
  bool tracing() const { return tracing_wanted_.load(std::memory_order_acquire); }

  // What start() asked of CUPTI: the plan, the callback domains it came to, and whether CUPTI
  // took GRAPH_TRACE (graph launches as one record each; false: node by node).  Set by start().
  CuptiPlan plan() const;
  CallbackSet callbacks() const;
  bool graph_trace() const { return graph_trace_.load(std::memory_order_acquire); }
  // Node counts of the graphs built so far (GRAPH_TRACE records carry none).
  const GraphNodeCounts& graph_node_counts() const;

  // cuptiActivityFlushAll(forced ? FORCED : 0), then reads the dropped-record count.
  void flush(bool forced);
  // Parses every completed buffer into `out` (timestamps moved onto the host clock) and returns
  // the buffers to the pool.  Before start() has published the clock, parses nothing: the
  // buffers stay queued for a later call (no record is ever moved by an offset not yet known).
  size_t consume(ActivityParser& parser, EventBatch& out, Stats& stats);
  // Disables activity, forces a final flush, unsubscribes.  Idempotent.
  void stop();
  // After fork() in the child: never call CUPTI again from this process image.
  void disable_in_child();

  // Hardware counters (GPUACCT_COUNTERS=1, cupti_hooks/counter_sampler.h): configured after
  // load() and before start(); counters() is nullptr when not configured.  The sampler belongs
  // to the worker (its calls are the worker's only).
  void configure_counters(const CounterOptions& options);
  CounterSampler* counters();
  // With counters configured: the devices (bit = CUDA ordinal, < 64) a launch call was seen on,
  // from the launch callbacks (CollectorOptions::api_callbacks) -- a device's first launch, not
  // its first delivered record, which CUPTI may hold until the end of a short run.
  uint64_t devices_launched() const { return devices_launched_.load(std::memory_order_acquire); }

  // When CUPTI asked for the oldest buffer it still holds (host clock), or kNoBufferLent.
  // CUPTI hands a buffer back only once every record in it is complete (cuptiActivityFlushAll
  // with flag 0, the periodic flush: cupti_activity.h), so a record it has put in a buffer it
  // still holds -- made after that buffer was asked for -- is still to come, however long ago
  // it completed (inject/recording/watermark.h, FlushWatermark::held_by_buffers).
  static constexpr int64_t kNoBufferLent = std::numeric_limits<int64_t>::max();
  int64_t oldest_lent_ns() const;

  // Counters since start (read and reset by take_*).
  int64_t take_records_dropped() { return records_dropped_.exchange(0); }
  int64_t take_buffers_refused() { return buffers_refused_.exchange(0); }
  int64_t buffers_allocated() const;

  // Buffer callbacks (public so the C trampolines can reach them).
  void on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  void on_buffer_completed(void* context, uint32_t stream_id, uint8_t* buffer, size_t size,
                           size_t valid);
  void on_callback(int domain, uint32_t cbid, const void* cbdata);

  // Benchmarks / tests: install hooks without starting CUPTI, and drive one API callback the
  // way CUPTI would (a CUpti_CallbackData is built on the stack).
  void set_hooks_for_testing(const CollectorHooks& hooks);
  void set_host_clock_for_testing(uint64_t (*host_clock)());
  void invoke_api_callback_for_testing(bool runtime_domain, uint32_t cbid, bool enter,
                                       uint64_t* scratch, uint32_t correlation_id);
  // Tests: the record functions CUPTI would lend (cuptiActivityGetNextRecord,
  // cuptiActivityGetNumDroppedRecords), and the clock start() would publish.
  void set_record_functions_for_testing(void* next_record, void* num_dropped_records);
  void publish_clock_for_testing(ClockSource source, int64_t offset_ns) {
    publish_clock(source, offset_ns, 0);
  }
  static uint32_t cbid_cuda_launch_kernel();
  static uint32_t cbid_cu_launch_kernel();

 private:
  Collector();
  struct Impl;
  void sync_clocks(uint64_t (*host_clock)());
  void publish_clock(ClockSource source, int64_t offset_ns, int64_t uncertainty_ns);
  void enable_callbacks();
  void set_api_callbacks(uint32_t enable);
  Status enable_activity();
  void apply_tracing(bool on);
  void on_graph_node(uint32_t cbid, const void* cbdata);

  Impl* impl_;  // never freed: CUPTI may call back during exit
  bool loaded_ = false;
  std::atomic<bool> system_thread_ids_{false};
  // Written once by start() (publish_clock) before any activity kind is enabled, read by the
  // worker: clock_source_ is stored last (release) and read first (acquire).
  std::atomic<ClockSource> clock_source_{ClockSource::kNone};
  std::atomic<int64_t> clock_offset_ns_{0};
  std::atomic<int64_t> clock_offset_uncertainty_ns_{0};
  std::atomic<CollectorState> state_{CollectorState::kNotStarted};
  std::atomic<bool> child_{false};
  std::atomic<bool> closing_flush_{false};  // stop()'s forced flush has begun
  std::atomic<bool> tracing_wanted_{true};
  std::atomic<bool> graph_trace_{false};
  // Published by configure_counters (the thread that loads CUDA) for the worker, which may
  // already run (a step marked before cuInit).
  std::atomic<CounterSampler*> counters_{nullptr};
  std::atomic<uint64_t> devices_launched_{0};
  void note_launch_device(const void* cbdata);
  std::atomic<int64_t> records_dropped_{0};
  std::atomic<int64_t> buffers_refused_{0};
};

}  // namespace gpuacct::cupti
