#include "cupti_hooks/collector.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <vector>

#include "cupti_hooks/activity_parser.h"
#include "cupti_hooks/api_table.h"
#include "cupti_hooks/cupti_api.h"
#include "cupti_hooks/cupti_record_types.h"

namespace gpuacct::cupti {

const char* to_string(CollectorState s) {
  switch (s) {
    case CollectorState::kNotStarted:
      return "not_started";
    case CollectorState::kActive:
      return "active";
    case CollectorState::kNoCupti:
      return "no_cupti";
    case CollectorState::kVersionMismatch:
      return "cupti_version_mismatch";
    case CollectorState::kOtherSubscriber:
      return "other_subscriber";
    case CollectorState::kFailed:
      return "cupti_failed";
    case CollectorState::kStopped:
      return "stopped";
  }
  return "unknown";
}

const char* to_string(ClockSource s) {
  switch (s) {
    case ClockSource::kNone:
      return "none";
    case ClockSource::kTimestampCallback:
      return "cupti_timestamp_callback";
    case ClockSource::kMeasuredOffset:
      return "measured_offset";
    case ClockSource::kCuptiHostClock:
      return "cupti_host_clock";
  }
  return "none";
}

struct Collector::Impl {
  CuptiApi api;
  CollectorOptions options;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool subscribed = false;
  std::vector<CUpti_ActivityKind> enabled_kinds;
  bool per_api_records = false;  // API records enabled call by call (else the whole kinds)
  bool tracing = true;           // what apply_tracing last set
  CallbackSet callbacks;         // the domains of the launch / sync / copy callbacks (start())
  GraphNodeCounts graph_nodes;   // GRAPHNODE_CREATED / _CLONED / _DESTROY_STARTING, by graph id

  std::mutex mu;  // guards the fields below; never held across a CUPTI call
  std::vector<uint8_t*> free_buffers;
  int64_t allocated = 0;
  // The buffers CUPTI holds, with when it asked for each (host clock): oldest_lent_ns().
  struct Lent {
    uint8_t* buffer;
    int64_t since;
  };
  std::vector<Lent> lent;  // at most buffer_count
  struct Completed {
    uint8_t* buffer;
    size_t valid;
    bool closing;  // handed back by stop()'s forced flush (ActivityParser::set_closing_flush)
  };
  std::deque<Completed> completed;
  std::mutex stop_mu;  // serialises start/stop
  std::unique_ptr<CounterSampler> counters;  // GPUACCT_COUNTERS=1
};

namespace {

// The C boundary with CUPTI: no exception may cross it.
void CUPTIAPI buffer_requested_trampoline(uint8_t** buffer, size_t* size, size_t* max_records) {
  try {
    Collector::instance().on_buffer_requested(buffer, size, max_records);
  } catch (...) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
  }
}

void CUPTIAPI buffer_completed_trampoline(CUcontext ctx, uint32_t stream_id, uint8_t* buffer,
                                          size_t size, size_t valid) {
  try {
    Collector::instance().on_buffer_completed(ctx, stream_id, buffer, size, valid);
  } catch (...) {
  }
}

void CUPTIAPI callback_trampoline(void* /*userdata*/, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId cbid, const void* cbdata) {
  try {
    Collector::instance().on_callback(static_cast<int>(domain), cbid, cbdata);
  } catch (...) {
  }
}

}  // namespace

Collector::Collector() : impl_(new Impl()) {}

Collector& Collector::instance() {
  static Collector* c = new Collector();  // never destroyed (exit-time callbacks)
  return *c;
}

Status Collector::load(const std::string& library) {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (loaded_) return Status::Ok();
  if (impl_->api.handle != nullptr) return Status::Error("previous load failed");
  GPUACCT_RETURN_IF_ERROR(impl_->api.load(library));
  loaded_ = true;
  return Status::Ok();
}

uint32_t Collector::version() const {
  return impl_->api.version;
}

int64_t Collector::buffers_allocated() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->allocated;
}

Status Collector::start(const CollectorOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (state_.load() != CollectorState::kNotStarted) {
    return state_.load() == CollectorState::kActive
               ? Status::Ok()
               : Status::Error(std::string("already tried: ") + to_string(state_.load()));
  }
  Impl& m = *impl_;
  CuptiApi& api = m.api;
  m.options = options;
  api.warn = options.hooks.warn;
  if (!loaded_) {
    state_.store(CollectorState::kNoCupti);
    return Status::Error("CUPTI is not loaded");
  }
  auto fail = [&](CollectorState s, const std::string& text) {
    state_.store(s, std::memory_order_release);
    return Status::Error(text);
  };
  if (options.host_clock == nullptr) {
    // Without it no clock is ever published, and consume() would hold every buffer.
    return fail(CollectorState::kFailed, "no host clock given");
  }
  if (!record_layouts_match(api.version)) {
    return fail(CollectorState::kVersionMismatch, "CUPTI API version " +
                                                      std::to_string(api.version) +
                                                      " is not the one gpuacct reads records of (" +
                                                      std::to_string(kMinCuptiApiVersion) + ".." +
                                                      std::to_string(kMaxCuptiApiVersion) + ")");
  }

  // gettid() thread ids, so API records line up with the library's per-thread rings.
  system_thread_ids_.store(GPUACCT_CUPTI_TRY(api, cuptiSetThreadIdType,
                                             CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) == CUPTI_SUCCESS,
                           std::memory_order_release);

  const CUptiResult sr = api.cuptiSubscribe(&m.subscriber, callback_trampoline, nullptr);
  if (sr == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    return fail(CollectorState::kOtherSubscriber,
                "another CUPTI client (a profiler, Nsight, torch.profiler) is already "
                "subscribed");
  }
  if (sr != CUPTI_SUCCESS) {
    return fail(CollectorState::kFailed, std::string("cuptiSubscribe failed: ") +
                                             api.result_string(sr) + " (" +
                                             std::to_string(static_cast<int>(sr)) + ")");
  }
  m.subscribed = true;
  // Before any activity kind is enabled (CUPTI's rule for the timestamp callback), and only
  // once CUPTI is ours: the callback would change the clock of another subscriber's records.
  sync_clocks(options.host_clock);

  if (GPUACCT_CUPTI_CALL(api, cuptiActivityRegisterCallbacks, buffer_requested_trampoline,
                         buffer_completed_trampoline) != CUPTI_SUCCESS) {
    api.cuptiUnsubscribe(m.subscriber);
    m.subscribed = false;
    return fail(CollectorState::kFailed, "cuptiActivityRegisterCallbacks failed");
  }

  enable_callbacks();
  const Status enabled = enable_activity();
  if (!enabled.ok()) {
    api.cuptiUnsubscribe(m.subscriber);
    m.subscribed = false;
    return fail(CollectorState::kFailed, enabled.message());
  }
  if (options.flush_period_ms > 0) {
    GPUACCT_CUPTI_TRY(api, cuptiActivityFlushPeriod, options.flush_period_ms);
  }
  // A step marked untraced before CUPTI started (GPUACCT_SAMPLE): off from the start.
  if (!tracing_wanted_.load(std::memory_order_acquire)) apply_tracing(false);
  state_.store(CollectorState::kActive, std::memory_order_release);
  return Status::Ok();
}

// Synchronous callbacks: only what must be seen as it happens.
void Collector::enable_callbacks() {
  Impl& m = *impl_;
  CuptiApi& api = m.api;
  GPUACCT_CUPTI_CALL(api, cuptiEnableCallback, 1, m.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                     CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
  if (m.options.plan.reset_callback) {
    GPUACCT_CUPTI_CALL(api, cuptiEnableCallback, 1, m.subscriber, CUPTI_CB_DOMAIN_RUNTIME_API,
                       CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020);
  }
  GPUACCT_CUPTI_TRY(api, cuptiEnableCallback, 1, m.subscriber, CUPTI_CB_DOMAIN_STATE,
                    CUPTI_CBID_STATE_FATAL_ERROR);
  if ((m.options.plan.kinds & kKindGraph) != 0 && api.cuptiGetGraphId != nullptr) {
    // Node counts for GRAPH_TRACE spans: once per node built (capture, instantiation), never
    // per launch.
    GPUACCT_CUPTI_TRY(api, cuptiEnableCallback, 1, m.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED);
    GPUACCT_CUPTI_TRY(api, cuptiEnableCallback, 1, m.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    GPUACCT_CUPTI_TRY(api, cuptiEnableCallback, 1, m.subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                      CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING);
  }
  // Without SYSTEM thread ids, records carry pthread ids, which the library maps onto thread
  // ids it learns at each thread's first call: every traced call then gets its callbacks, so
  // that a thread is known before CUPTI records any call of it (ActivityParser::ThreadIds).
  m.callbacks = callback_set(m.options.plan, m.options.api_callbacks,
                             !system_thread_ids_.load(std::memory_order_acquire));
  set_api_callbacks(1);
}

// The launch / sync (/ copy) callbacks of the domains start() chose: on at start, switched by
// apply_tracing.
void Collector::set_api_callbacks(uint32_t enable) {
  Impl& m = *impl_;
  CuptiApi& api = m.api;
  size_t n_apis = 0;
  const TracedApi* apis = traced_apis(&n_apis);
  for (size_t i = 0; i < n_apis; ++i) {
    const uint8_t domains = apis[i].kind == HostApiKind::kLaunch ? m.callbacks.launch
                            : apis[i].kind == HostApiKind::kSync ? m.callbacks.sync
                                                                 : m.callbacks.copy;
    const bool runtime = apis[i].domain == ApiDomain::kRuntime;
    if ((domains & (runtime ? kRuntimeDomain : kDriverDomain)) == 0) continue;
    GPUACCT_CUPTI_TRY(api, cuptiEnableCallback, enable, m.subscriber,
                      runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API,
                      apis[i].cbid);
  }
}

CuptiPlan Collector::plan() const {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  return impl_->options.plan;
}

CallbackSet Collector::callbacks() const {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  return impl_->callbacks;
}

const GraphNodeCounts& Collector::graph_node_counts() const {
  return impl_->graph_nodes;
}

void Collector::set_tracing(bool on) {
  tracing_wanted_.store(on, std::memory_order_release);
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (state_.load() != CollectorState::kActive || child_.load()) return;
  apply_tracing(tracing_wanted_.load(std::memory_order_acquire));
}

// Caller holds stop_mu.  The order does not matter: launches are known from the API records,
// the callbacks only add call sites (stacks), which a launch made in between may lack.
void Collector::apply_tracing(bool on) {
  Impl& m = *impl_;
  if (m.tracing == on) return;
  m.tracing = on;
  CuptiApi& api = m.api;
  for (CUpti_ActivityKind k : m.enabled_kinds) {
    if (on) {
      GPUACCT_CUPTI_TRY(api, cuptiActivityEnable, k);
    } else {
      GPUACCT_CUPTI_TRY(api, cuptiActivityDisable, k);
    }
  }
  if (m.per_api_records) {
    size_t n_apis = 0;
    const TracedApi* apis = traced_apis(&n_apis);
    const uint8_t enable = on ? 1 : 0;
    for (size_t i = 0; i < n_apis; ++i) {
      if (apis[i].domain == ApiDomain::kRuntime) {
        api.cuptiActivityEnableRuntimeApi(apis[i].cbid, enable);
      } else {
        api.cuptiActivityEnableDriverApi(apis[i].cbid, enable);
      }
    }
  }
  // kActivity: the callbacks stay enabled (on_callback returns at once while tracing is off),
  // so a window switch toggles no callback.
  if (m.options.plan.sample_switch == SampleSwitch::kAll) set_api_callbacks(on ? 1 : 0);
}

// The activity kinds of the plan; an error only when kernels are asked for and cannot be
// collected.
Status Collector::enable_activity() {
  Impl& m = *impl_;
  CuptiApi& api = m.api;
  const uint32_t want = m.options.plan.kinds;
  // CONCURRENT_KERNEL, never KERNEL ("all kernel executions are serialized on the GPU",
  // cupti_activity.h).  No EXTERNAL_CORRELATION: gpuacct pushes no external ids and attributes
  // nothing to framework ops; the kind would only cost a record per API call whenever a
  // library pushes ids of its own.  No SYNCHRONIZATION unless asked: the accounting reads the
  // blocking sync calls' API records, and the report's sync totals come from them too.
  struct Wanted {
    uint32_t bit;
    CUpti_ActivityKind kind;
  };
  const Wanted kinds[] = {
      {kKindKernel, CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL},
      {kKindCopy, CUPTI_ACTIVITY_KIND_MEMCPY},
      {kKindCopy, CUPTI_ACTIVITY_KIND_MEMCPY2},
      {kKindMemset, CUPTI_ACTIVITY_KIND_MEMSET},
      {kKindSync, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION},
  };
  for (const Wanted& w : kinds) {
    if ((want & w.bit) == 0) continue;
    const CUptiResult r = GPUACCT_CUPTI_CALL(api, cuptiActivityEnable, w.kind);
    if (r == CUPTI_SUCCESS) {
      m.enabled_kinds.push_back(w.kind);
    } else if (w.kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      return Status::Error(std::string("cuptiActivityEnable(CONCURRENT_KERNEL) failed: ") +
                           api.result_string(r));
    }
  }
  if ((want & kKindGraph) != 0) {
    // One record per graph launch, its nodes unseen ("intended to reduce overheads in tracing
    // each node", CUpti_ActivityGraphTrace2), enabled beside CONCURRENT_KERNEL: kernels
    // launched outside graphs keep their records.  A CUPTI that refuses it
    // (CUPTI_ERROR_NOT_COMPATIBLE, an older one) traces graphs node by node, as before.
    const CUptiResult r =
        GPUACCT_CUPTI_TRY(api, cuptiActivityEnable, CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
    if (r == CUPTI_SUCCESS) {
      m.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_GRAPH_TRACE);
      graph_trace_.store(true, std::memory_order_release);
    } else if (api.warn != nullptr) {
      api.warn(std::string("CUPTI refused GRAPH_TRACE (") + api.result_string(r) +
               "); CUDA graph launches are traced node by node");
    }
  }
  // Calls timed by their callbacks (ApiSource::kCallbacks) need no API record.
  if (!m.options.plan.api_records || api_from_callbacks(m.options.plan)) return Status::Ok();
  size_t n_apis = 0;
  const TracedApi* apis = traced_apis(&n_apis);
  // RUNTIME / DRIVER restricted to the calls the accounting needs.  A driver call made inside
  // a runtime call gets no record of its own (the H200 recordings of 2026-12-04 hold no nested
  // call: one API record per launch, while the driver callbacks do fire inside), so the driver
  // domain's records are those of launches that bypass the runtime.
  bool per_api =
      api.cuptiActivityEnableRuntimeApi != nullptr && api.cuptiActivityEnableDriverApi != nullptr;
  if (per_api) {
    for (size_t i = 0; i < n_apis && per_api; ++i) {
      const CUptiResult r = apis[i].domain == ApiDomain::kRuntime
                                ? api.cuptiActivityEnableRuntimeApi(apis[i].cbid, 1)
                                : api.cuptiActivityEnableDriverApi(apis[i].cbid, 1);
      if (r != CUPTI_SUCCESS && i == 0) per_api = false;
    }
  }
  m.per_api_records = per_api;
  if (!per_api) {
    // Older CUPTI: all runtime / driver calls; the parser keeps only the traced ones.
    if (GPUACCT_CUPTI_CALL(api, cuptiActivityEnable, CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS)
      m.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_RUNTIME);
    if (GPUACCT_CUPTI_CALL(api, cuptiActivityEnable, CUPTI_ACTIVITY_KIND_DRIVER) == CUPTI_SUCCESS)
      m.enabled_kinds.push_back(CUPTI_ACTIVITY_KIND_DRIVER);
  }
  return Status::Ok();
}

// One clock for every record: host records are stamped with the host clock from the process's
// first record on, which can be long before CUDA loads CUPTI, and CUPTI's own clock may differ.
// cupti_activity.h (cuptiActivityRegisterTimestampCallback): "By default CUPTI uses ... Linux
// (x86_64, aarch64 sbsa, aarch64) uses clock_gettime(CLOCK_REALTIME)", the host clock
// (inject/clock.h), "WSL ... CLOCK_MONOTONIC_RAW", and GPU timestamps are interpolated onto that
// clock.  So (TimestampSource::kAuto):
//  - CUPTI's clock is read against the host clock nine times back to back; when every reading
//    falls between the two host readings around it, it is the host clock and records are taken
//    as they are -- no timestamp callback, which CUPTI would call for every timestamp;
//  - otherwise CUPTI is asked to read the host clock (the timestamp callback: it then takes
//    every host-side timestamp from it and maps GPU timestamps onto it);
//  - and when it cannot (an older CUPTI, an error), the offset is the narrowest reading's and
//    the parser moves every record by it.
// kCallback registers the callback whatever the clocks; kCupti never does.
void Collector::sync_clocks(uint64_t (*host_clock)()) {
  CuptiApi& api = impl_->api;
  const TimestampSource mode = impl_->options.plan.timestamps;
  if (mode == TimestampSource::kCallback &&
      GPUACCT_CUPTI_TRY(api, cuptiActivityRegisterTimestampCallback, host_clock) == CUPTI_SUCCESS) {
    publish_clock(ClockSource::kTimestampCallback, 0, 0);
    return;
  }
  int64_t offset = 0;
  int64_t uncertainty = -1;  // no reading
  int64_t best_width = std::numeric_limits<int64_t>::max();
  bool bracketed = true;
  int readings = 0;
  for (int i = 0; i < 9; ++i) {
    const uint64_t h0 = host_clock();
    uint64_t c = 0;
    if (api.cuptiGetTimestamp(&c) != CUPTI_SUCCESS) break;
    const uint64_t h1 = host_clock();
    ++readings;
    bracketed = bracketed && h0 <= c && c <= h1;
    const int64_t width = static_cast<int64_t>(h1 - h0);
    if (width >= 0 && width < best_width) {
      best_width = width;
      offset = static_cast<int64_t>(c) - static_cast<int64_t>(h0 + (h1 - h0) / 2);
      uncertainty = (width + 1) / 2;
    }
  }
  if (readings == 9 && bracketed && mode != TimestampSource::kCallback) {
    publish_clock(ClockSource::kCuptiHostClock, 0, 0);
    return;
  }
  if (mode == TimestampSource::kAuto &&
      GPUACCT_CUPTI_TRY(api, cuptiActivityRegisterTimestampCallback, host_clock) == CUPTI_SUCCESS) {
    publish_clock(ClockSource::kTimestampCallback, 0, 0);
    return;
  }
  publish_clock(ClockSource::kMeasuredOffset, offset, uncertainty);
  if (uncertainty < 0 && api.warn != nullptr) {
    api.warn("cannot read CUPTI's clock; GPU records are assumed to be on the host clock");
  }
}

void Collector::publish_clock(ClockSource source, int64_t offset_ns, int64_t uncertainty_ns) {
  clock_offset_ns_.store(offset_ns, std::memory_order_relaxed);
  clock_offset_uncertainty_ns_.store(uncertainty_ns, std::memory_order_relaxed);
  clock_source_.store(source, std::memory_order_release);
}

void Collector::on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  Impl& m = *impl_;
  *max_records = 0;
  if (child_.load(std::memory_order_relaxed)) {
    // A fork child (e.g. CUPTI's exit-time flush in it): no lock, no allocation -- a lock may
    // have been held by a parent thread that does not exist here.
    *buffer = nullptr;
    *size = 0;
    return;
  }
  uint8_t* buf = nullptr;
  bool allocate = false;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    if (!m.free_buffers.empty()) {
      buf = m.free_buffers.back();
      m.free_buffers.pop_back();
    } else if (m.allocated < m.options.buffer_count) {
      ++m.allocated;
      allocate = true;
    }
  }
  if (allocate) {
    buf = static_cast<uint8_t*>(std::aligned_alloc(8, m.options.buffer_bytes));
    if (buf == nullptr) {
      std::lock_guard<std::mutex> lock(m.mu);
      --m.allocated;
    }
  }
  if (buf == nullptr) {
    // At the cap: refuse (safe from CUPTI API v27 on; 13.x is far beyond).  CUPTI drops the
    // records and reports them through cuptiActivityGetNumDroppedRecords.
    buffers_refused_.fetch_add(1, std::memory_order_relaxed);
    *buffer = nullptr;
    *size = 0;
    return;
  }
  const int64_t since =
      m.options.host_clock != nullptr ? static_cast<int64_t>(m.options.host_clock()) : 0;
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.lent.push_back({buf, since});  // as often as a buffer is allocated, at most
  }
  *buffer = buf;
  *size = m.options.buffer_bytes;
}

int64_t Collector::oldest_lent_ns() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  int64_t oldest = kNoBufferLent;
  for (const Impl::Lent& l : impl_->lent) oldest = std::min(oldest, l.since);
  return oldest;
}

void Collector::on_buffer_completed(void* context, uint32_t stream_id, uint8_t* buffer,
                                    size_t /*size*/, size_t valid) {
  Impl& m = *impl_;
  // A fork child must not lock (see on_buffer_requested), call CUPTI or wake the parent's
  // worker (the wake pipe is shared with the parent): the buffer is left to the exiting child.
  if (child_.load(std::memory_order_relaxed)) return;
  if (buffer != nullptr) {
    std::lock_guard<std::mutex> lock(m.mu);
    for (size_t i = 0; i < m.lent.size(); ++i) {
      if (m.lent[i].buffer != buffer) continue;
      m.lent[i] = m.lent.back();
      m.lent.pop_back();
      break;
    }
    if (valid > 0) {
      m.completed.push_back({buffer, valid, closing_flush_.load(std::memory_order_relaxed)});
    } else {
      m.free_buffers.push_back(buffer);
    }
  }
  // Outside our lock: CUPTI calls this callback holding its own.
  size_t dropped = 0;
  if (m.api.cuptiActivityGetNumDroppedRecords(static_cast<CUcontext>(context), stream_id,
                                              &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    records_dropped_.fetch_add(static_cast<int64_t>(dropped), std::memory_order_relaxed);
  }
  if (m.options.hooks.buffer_ready != nullptr) m.options.hooks.buffer_ready();
}

void Collector::on_callback(int domain, uint32_t cbid, const void* cbdata) {
  if (child_.load(std::memory_order_relaxed)) return;
  Impl& m = *impl_;
  switch (domain) {
    case CUPTI_CB_DOMAIN_RUNTIME_API:
    case CUPTI_CB_DOMAIN_DRIVER_API: {
      const auto* d = static_cast<const CUpti_CallbackData*>(cbdata);
      if (domain == CUPTI_CB_DOMAIN_RUNTIME_API &&
          cbid == CUPTI_RUNTIME_TRACE_CBID_cudaDeviceReset_v3020) {
        // The reset frees the device's CUPTI buffers: deliver what they hold first.
        if (d->callbackSite == CUPTI_API_ENTER)
          m.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        return;
      }
      // Sampled, between traced steps, with the callbacks left on (SampleSwitch::kActivity).
      if (m.options.plan.sample_switch == SampleSwitch::kActivity &&
          !tracing_wanted_.load(std::memory_order_relaxed)) {
        return;
      }
      const ApiDomain api_domain =
          domain == CUPTI_CB_DOMAIN_RUNTIME_API ? ApiDomain::kRuntime : ApiDomain::kDriver;
      const TracedApi* api = find_traced_api(api_domain, cbid);
      if (api == nullptr) return;
      if (d->callbackSite == CUPTI_API_ENTER) {
        if (api->kind == HostApiKind::kLaunch &&
            counters_.load(std::memory_order_relaxed) != nullptr) {
          note_launch_device(cbdata);
        }
        if (m.options.hooks.api_enter != nullptr)
          m.options.hooks.api_enter(api->kind, api_domain, d->correlationData);
      } else if (m.options.hooks.api_exit != nullptr) {
        size_t n_apis = 0;
        ApiCallExit call;
        call.correlation_id = d->correlationId;
        call.domain = api_domain;
        call.traced_index = static_cast<uint16_t>(api - traced_apis(&n_apis));
        // "Pointer to the return value of the runtime or driver API call.  This field is only
        // valid within the exit::CUPTI_API_EXIT callback" (cupti_callbacks.h): a cudaError_t
        // or a CUresult, both an int-sized enum whose success is 0.
        call.failed = d->functionReturnValue != nullptr &&
                      *static_cast<const int*>(d->functionReturnValue) != 0;
        m.options.hooks.api_exit(api->kind, d->correlationData, call);
      }
      return;
    }
    case CUPTI_CB_DOMAIN_RESOURCE:
      if (cbid == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) {
        // Records of a context being destroyed must be delivered before it goes.
        m.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
      } else {
        on_graph_node(cbid, cbdata);
      }
      return;
    case CUPTI_CB_DOMAIN_STATE:
      if (cbid == CUPTI_CBID_STATE_FATAL_ERROR) {
        static std::atomic<bool> logged{false};
        if (!logged.exchange(true) && m.api.warn != nullptr) {
          m.api.warn("CUPTI reported a fatal error; GPU data may be incomplete");
        }
      }
      return;
    default:
      return;
  }
}

// O(1), no lock, no allocation: one compare per launch; a CUPTI call only when the thread
// launches from another context than its previous launch; the hook once per device.
void Collector::note_launch_device(const void* cbdata) {
  thread_local CUcontext last_context = nullptr;
  const auto* d = static_cast<const CUpti_CallbackData*>(cbdata);
  if (d->context == nullptr || d->context == last_context) return;
  last_context = d->context;
  Impl& m = *impl_;
  uint32_t device = 0;
  if (m.api.cuptiGetDeviceId == nullptr ||
      m.api.cuptiGetDeviceId(d->context, &device) != CUPTI_SUCCESS || device >= 64) {
    return;
  }
  const uint64_t bit = uint64_t{1} << device;
  if ((devices_launched_.load(std::memory_order_relaxed) & bit) != 0) return;
  if ((devices_launched_.fetch_or(bit, std::memory_order_acq_rel) & bit) == 0 &&
      m.options.hooks.device_launched != nullptr) {
    m.options.hooks.device_launched(device);
  }
}

// A graph node built or about to go (CUpti_GraphData in CUpti_ResourceData::resourceDescriptor,
// as NVIDIA's cuda_graphs_trace sample reads it): the graph's count for GRAPH_TRACE spans.
void Collector::on_graph_node(uint32_t cbid, const void* cbdata) {
  const int32_t delta =
      cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED || cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED
          ? 1
      : cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_DESTROY_STARTING ? -1
                                                               : 0;
  if (delta == 0 || cbdata == nullptr || impl_->api.cuptiGetGraphId == nullptr) return;
  const auto* rd = static_cast<const CUpti_ResourceData*>(cbdata);
  const auto* gd = static_cast<const CUpti_GraphData*>(rd->resourceDescriptor);
  if (gd == nullptr || gd->graph == nullptr) return;
  uint32_t id = 0;
  if (impl_->api.cuptiGetGraphId(gd->graph, &id) != CUPTI_SUCCESS) return;
  impl_->graph_nodes.add(id, delta,
                         cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED ? GraphNodeCounts::kCloned
                                                                      : GraphNodeCounts::kCreated);
}

void Collector::flush(bool forced) {
  if (state_.load(std::memory_order_acquire) != CollectorState::kActive) return;
  if (child_.load(std::memory_order_relaxed)) return;
  impl_->api.cuptiActivityFlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  // Global (context-less) drops, e.g. of API records.
  size_t dropped = 0;
  if (impl_->api.cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    records_dropped_.fetch_add(static_cast<int64_t>(dropped), std::memory_order_relaxed);
  }
}

size_t Collector::consume(ActivityParser& parser, EventBatch& out, Stats& stats) {
  Impl& m = *impl_;
  size_t records = 0;
  // The clock is published once, by start(), before any activity kind is enabled, and never
  // changes.  Reading the offset without first seeing it published (acquire) let a worker that
  // entered here before start() parse the buffers completing meanwhile with offset 0 (issue
  // 14, fuzzer seed 3504): until it is published, buffers stay queued, unparsed.
  if (clock_source_.load(std::memory_order_acquire) == ClockSource::kNone) {
    stats.add(Stat::cupti_records_dropped, take_records_dropped());
    stats.add(Stat::cupti_buffers_refused, take_buffers_refused());
    return 0;
  }
  parser.set_clock_offset(clock_offset_ns_.load(std::memory_order_relaxed));
  parser.set_graph_node_counts(&m.graph_nodes);
  parser.set_sync_from_api_calls((m.options.plan.kinds & kKindSync) == 0);
  for (;;) {
    Impl::Completed c{};
    {
      std::lock_guard<std::mutex> lock(m.mu);
      if (m.completed.empty()) break;
      c = m.completed.front();
      m.completed.pop_front();
    }
    // Parsing calls cuptiActivityGetNextRecord: outside our lock.
    parser.set_closing_flush(c.closing);
    records += parser.parse_buffer(reinterpret_cast<void*>(m.api.cuptiActivityGetNextRecord),
                                   c.buffer, c.valid, out, stats);
    std::lock_guard<std::mutex> lock(m.mu);
    m.free_buffers.push_back(c.buffer);
  }
  stats.add(Stat::cupti_records_dropped, take_records_dropped());
  stats.add(Stat::cupti_buffers_refused, take_buffers_refused());
  return records;
}

void Collector::stop() {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (state_.load() != CollectorState::kActive) return;
  if (child_.load()) return;
  Impl& m = *impl_;
  for (CUpti_ActivityKind k : m.enabled_kinds) m.api.cuptiActivityDisable(k);
  // What this flush hands out unfinished was still running at exit; a forced flush earlier
  // (a context destroyed, a device reset) cuts off work of the run: that is data loss.
  closing_flush_.store(true, std::memory_order_relaxed);
  m.api.cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  size_t dropped = 0;
  if (m.api.cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS &&
      dropped > 0) {
    records_dropped_.fetch_add(static_cast<int64_t>(dropped), std::memory_order_relaxed);
  }
  if (m.subscribed) {
    m.api.cuptiUnsubscribe(m.subscriber);
    m.subscribed = false;
  }
  // cuptiFinalize is not called: it races with CUPTI's own threads at exit (kineto #686,
  // #949) and the process is ending anyway.  Unsubscribing stops every callback.
  state_.store(CollectorState::kStopped, std::memory_order_release);
}

void Collector::configure_counters(const CounterOptions& options) {
  std::lock_guard<std::mutex> lock(impl_->stop_mu);
  if (impl_->counters == nullptr && loaded_) {
    impl_->counters = std::make_unique<CounterSampler>(impl_->api, options);
    counters_.store(impl_->counters.get(), std::memory_order_release);
  }
}

CounterSampler* Collector::counters() {
  return counters_.load(std::memory_order_acquire);
}

void Collector::set_hooks_for_testing(const CollectorHooks& hooks) {
  impl_->options.hooks = hooks;
}

void Collector::set_host_clock_for_testing(uint64_t (*host_clock)()) {
  impl_->options.host_clock = host_clock;
}

void Collector::invoke_api_callback_for_testing(bool runtime_domain, uint32_t cbid, bool enter,
                                                uint64_t* scratch, uint32_t correlation_id) {
  CUpti_CallbackData d{};
  d.callbackSite = enter ? CUPTI_API_ENTER : CUPTI_API_EXIT;
  d.functionName = "cudaLaunchKernel";
  d.correlationData = scratch;
  d.correlationId = correlation_id;
  on_callback(runtime_domain ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, cbid, &d);
}

void Collector::set_record_functions_for_testing(void* next_record, void* num_dropped_records) {
  impl_->api.cuptiActivityGetNextRecord =
      reinterpret_cast<decltype(impl_->api.cuptiActivityGetNextRecord)>(next_record);
  impl_->api.cuptiActivityGetNumDroppedRecords =
      reinterpret_cast<decltype(impl_->api.cuptiActivityGetNumDroppedRecords)>(
          num_dropped_records);
}

uint32_t Collector::cbid_cuda_launch_kernel() {
  return CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
}

uint32_t Collector::cbid_cu_launch_kernel() {
  return CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
}

void Collector::disable_in_child() {
  child_.store(true, std::memory_order_relaxed);
}

}  // namespace gpuacct::cupti
