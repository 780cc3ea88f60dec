// Internal to the fake CUPTI (libcupti.so.13): the shared state, its locks and the steps the
// translation units call on each other (state, engine hooks, delivery, exported API).  Nothing
// here is exported (the library is built with hidden visibility).
#ifndef GPUACCT_TESTS_SIM_SIM_CUPTI_STATE_H_
#define GPUACCT_TESTS_SIM_SIM_CUPTI_STATE_H_

#include <cupti.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim_internal.h"

#define CUPTI_EXPORT extern "C" __attribute__((visibility("default")))

namespace sim_cupti {

// ---- callback names ----------------------------------------------------------------------------

constexpr size_t kMaxCbid = 1024;  // > CUPTI_DRIVER_TRACE_CBID_SIZE (807)

// The number of callback ids of a domain; 0 for an unknown domain.
size_t DomainCbidLimit(CUpti_CallbackDomain d);

// Names as cuptiGetCallbackName returns them ("cudaLaunchKernel_v7000") and the callback's
// functionName ("cudaLaunchKernel", the version suffix stripped).  Built once, never freed; the
// stripped names live in `storage` (a deque: its strings never move), so every allocation stays
// reachable from the table (LeakSanitizer saw the strings leaked when only their buffers were
// kept).
struct NameTables {
  const char* full[3][kMaxCbid] = {};
  const char* plain[3][kMaxCbid] = {};
  std::deque<std::string> storage;
  NameTables();
};
const NameTables& Names();

// ---- records ----------------------------------------------------------------------------------

union AnyRecord {
  CUpti_Activity base;
  CUpti_ActivityKernel10 kernel;
  CUpti_ActivityMemcpy6 memcpy;
  CUpti_ActivityMemcpyPtoP4 p2p;
  CUpti_ActivityMemset4 memset;
  CUpti_ActivityAPI api;
  CUpti_ActivitySynchronization2 sync;
  CUpti_ActivityExternalCorrelation ext;
  CUpti_ActivityGraphTrace2 graph;
};

// The size of one record of `kind` in a client buffer; 0 for a kind the sim does not produce.
size_t RecordSize(CUpti_ActivityKind kind);
// Sets a GPU record's timestamps (start, end, a kernel's completed) to CUPTI_TIMESTAMP_UNKNOWN.
void ClearGpuTimes(AnyRecord& r);

struct Pending {
  uint64_t complete_at;  // sim time at which the record is complete (GPU end / API end)
  uint64_t lane;         // delivery lane: one per host thread, one per (device, stream)
  uint64_t owner;        // the host lane of the call that made it (GPUACCT_SIM_HOLD_BUFFERS)
  uint8_t delay;         // flushes to hold the record back once it is complete
  uint64_t held_index;   // GPUACCT_SIM_HOLD_BUFFERS: its owner's buffer, set when placed
  AnyRecord rec;
};

constexpr uint64_t kHostLaneBit = 1ull << 63;
constexpr size_t kThresholdStep = 4096;  // pending records between buffer fills
constexpr size_t kMaxPendingWithoutBuffers = 1u << 20;

// The seeded generator behind delay draws and delivery order.
uint64_t SplitMix(uint64_t& s);

// GPUACCT_SIM_FAULTS, parsed.
struct Faults {
  bool subscribe_refused = false;
  uint64_t drop_first = 0;                 // drop=N
  uint64_t drop_every = 0;                 // drop_every=K
  uint64_t untimed_every = 0;              // untimed_every=K: every K-th GPU record, 0 times
  int64_t buffer_refused = 0;              // buffer_refused (-1: every request) / buffer_refused=N
  std::unordered_set<std::string> errors;  // error:FUNCTION

  void Parse(const char* spec);
};

struct ClientBuffer {
  uint8_t* buf = nullptr;
  size_t size = 0;
  size_t used = 0;  // bytes from buf (alignment padding included) = validSize
  size_t count = 0;
  size_t max_records = 0;
};

struct Completed {
  uint8_t* buf;
  size_t size;
  size_t valid;
};

enum class PlaceMode { kThreshold, kFlush, kForced, kPeriodic };

// Locks, outermost first: fill_mu (recursive; one thread fills client buffers at a time; held
// while calling bufferRequested), deliver_mu (recursive; held while calling bufferCompleted),
// mu (short critical sections over the state; never held while calling the client).
struct State {
  std::mutex mu;
  std::recursive_mutex fill_mu;
  std::recursive_mutex deliver_mu;
  std::condition_variable worker_cv;

  // Fault and delivery knobs (re-read by Configure()).
  Faults faults;
  std::atomic<bool> any_error_fault{false};
  uint64_t rng = 1;
  uint32_t delay_pct = 5;
  bool shuffle = true;
  bool forced_zero_incomplete = true;
  // GPUACCT_SIM_GPU_DELIVERY_LAG_NS: GPU records are held until the sim clock is this far past
  // their end (a deep queue, a busy CUPTI thread); host records are not.
  uint64_t gpu_delivery_lag_ns = 0;
  // GPUACCT_SIM_HOLD_BUFFERS=N: records wait in a per-thread buffer of N records (the thread
  // that made the call, its GPU ops' records included), handed back only once every record in
  // it is complete (0: the default, record by record).
  uint64_t hold_buffer_records = 0;
  // GPUACCT_SIM_INNER_DRIVER: `callbacks` (default) -- a runtime launch (cudaLaunchKernel,
  // cudaGraphLaunch) fires the driver domain's launch callbacks (cuLaunchKernel, cuGraphLaunch)
  // inside its own and gets no driver API record, as an H200 showed (tests/gpu/check.sh 2a:
  // nested = runtime; its recordings: no nested API record); `none`: runtime callbacks only.
  bool inner_driver_callbacks = true;
  // GPUACCT_SIM_CUPTI_COUNTS=<path>: at exit, what the client cost in CUPTI work (Counts).
  std::string counts_path;

  // Subscriber (one per process, as with real CUPTI).
  bool subscribed = false;
  std::string subscriber_name;
  std::atomic<CUpti_CallbackFunc> callback{nullptr};
  // Read by callbacks on any thread without the lock, so atomic: a callback racing
  // cuptiUnsubscribe (a SIGTERM's final flush) reads it while it changes.
  std::atomic<void*> userdata{nullptr};
  std::atomic<uint8_t> cb_enabled[CUPTI_CB_DOMAIN_SIZE][kMaxCbid] = {};

  // Activity configuration.
  std::atomic<uint8_t> kind_enabled[CUPTI_ACTIVITY_KIND_COUNT] = {};
  std::atomic<uint8_t> runtime_api[kMaxCbid] = {};
  std::atomic<uint8_t> driver_api[kMaxCbid] = {};
  std::atomic<int> thread_id_type{CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT};
  std::atomic<bool> latency_timestamps{false};
  // CUPTI's clock: sim time + clock_shift (GPUACCT_SIM_CUPTI_CLOCK), or the client's timestamp
  // callback once one is registered.
  std::atomic<int64_t> clock_shift{0};
  std::atomic<CUpti_TimestampCallbackFunc> timestamp_cb{nullptr};
  uint64_t attrs[16] = {};
  CUpti_BuffersCallbackRequestFunc request = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete = nullptr;

  // Records and buffers.
  std::deque<Pending> pending;
  size_t next_threshold = kThresholdStep;
  uint64_t produced = 0;
  uint64_t gpu_records = 0;  // GPU-op records made (the untimed_every fault counts them)
  uint64_t dropped = 0;
  int64_t buffer_requests = 0;
  ClientBuffer current;  // guarded by fill_mu
  // GPUACCT_SIM_HOLD_BUFFERS: per owner (host lane), the buffers lent to hold its records, one
  // per hold_buffer_records of them, oldest first: asked for as soon as the owner has a record
  // with no room (as real CUPTI asks when a thread needs room), filled and handed back once
  // their records are all complete.  Guarded by fill_mu.
  std::unordered_map<uint64_t, std::deque<ClientBuffer>> held_buffers;
  std::unordered_map<uint64_t, uint64_t> owner_pending;  // records pending per owner (mu)
  std::deque<Completed> done;  // guarded by mu, delivered under deliver_mu

  // Worker thread: periodic flush + asynchronous delivery of full buffers.
  std::thread worker;
  bool worker_started = false;
  bool worker_stop = false;
  uint32_t flush_period_ms = 0;

  // What the client asked of the fake CUPTI, counted for the overhead matrix
  // (tests/gpu/overhead_matrix.py --sim): callbacks delivered per domain, records made per
  // kind, the work of each launch call (its callbacks and records, a nested driver launch
  // included) and the configuration calls a sampled window's switch makes.  Written as JSON at
  // exit (GPUACCT_SIM_CUPTI_COUNTS).  simReset clears it.
  struct Counts {
    std::atomic<uint64_t> callbacks[CUPTI_CB_DOMAIN_SIZE] = {};
    std::atomic<uint64_t> records[CUPTI_ACTIVITY_KIND_COUNT] = {};
    std::atomic<uint64_t> launches{0};
    std::atomic<uint64_t> launch_callbacks{0};
    std::atomic<uint64_t> launch_records{0};
    std::atomic<uint64_t> launches_with_work{0};
    std::atomic<uint64_t> max_launch_callbacks{0};
    std::atomic<uint64_t> max_launch_records{0};
    std::atomic<uint64_t> kind_switches{0};        // cuptiActivityEnable / Disable
    std::atomic<uint64_t> callback_switches{0};    // cuptiEnableCallback / EnableDomain
    std::atomic<uint64_t> api_filter_switches{0};  // cuptiActivityEnableRuntimeApi / DriverApi
    std::atomic<uint64_t> timestamp_callback_calls{0};
  } counts;

  State() { Configure(); }
  // (Re-)reads the fault and delivery knobs from the environment.
  void Configure();
};

// Never destroyed: the client's exit-time flushes may run after our static destructors would.
State& S();

// True when GPUACCT_SIM_FAULTS has error:<fn>.
bool Faulted(const char* fn);

#define SIM_FAULT_POINT()                                           \
  do {                                                              \
    if (::sim_cupti::Faulted(__func__)) return CUPTI_ERROR_UNKNOWN; \
  } while (0)

// The thread id a record carries, for CUpti_ActivityThreadIdType `type`.
uint32_t ThreadIdFor(int type);

// Per-thread external correlation stacks (cuptiActivityPush/PopExternalCorrelationId).
extern thread_local std::vector<uint64_t> t_external[CUPTI_EXTERNAL_CORRELATION_KIND_SIZE];

// The distance from the sim clock to CUPTI's clock now (GPUACCT_SIM_CUPTI_CLOCK, or the client's
// timestamp callback once one is registered).
int64_t CuptiClockShift(State& s);

// Drops the subscriber, the activity configuration and every record (s.mu held).
void ResetLocked(State& s);

// GPUACCT_SIM_CUPTI_COUNTS: writes State::Counts as JSON to that path (at exit).
void WriteCounts(State& s);

bool ValidSubscriber(State& s, CUpti_SubscriberHandle h);

// Forgets every PM sampling device (simReset; sim_cupti_pmsampling.cc).
void ResetPmSampling();

// ---- engine hooks (sim_cupti_records.cc) ------------------------------------------------------

extern const SimTracer kTracer;

// ---- buffers and delivery (sim_cupti_delivery.cc) ----------------------------------------------

// Starts the worker thread (periodic flush, asynchronous delivery) once.  s.mu held.
void StartWorkerLocked(State& s);
// Moves pending records into client buffers, as `mode` allows, then delivers (or wakes the
// worker for a threshold fill).
void Place(PlaceMode mode);
// Hands completed buffers to the client's bufferCompleted.
void Deliver();
// Queues the current client buffer for delivery (fill_mu held).
void QueueCurrent(State& s, bool even_empty);
// GPUACCT_SIM_HOLD_BUFFERS: lends `owner` buffers until its pending records have room (mu not
// held; takes fill_mu).
void LendHeldBuffers(uint64_t owner);
// Hands held buffers back: those holding records, empty ones too with `even_empty` (fill_mu
// held).
void QueueHeldBuffers(State& s, bool even_empty);

}  // namespace sim_cupti

#endif  // GPUACCT_TESTS_SIM_SIM_CUPTI_STATE_H_
